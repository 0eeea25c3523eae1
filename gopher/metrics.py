"""Run metrics: what each superstep did and cost, and how the run executed.

Besides the supersteps, a run spends time setting up and handing over its
results; :attr:`RunMetrics.phases` names where (see :data:`SETUP_PHASES` and
:data:`OUTPUT_PHASES`), so a first run's cold start is visible, not folded into
one number.
"""
from __future__ import annotations

from dataclasses import dataclass, field


#: set-up phases, in order: the driver plans and submits the run's Spark stage; Spark starts the
#: tasks (Python workers, imports, the program shipped) until every task has said hello; the tasks
#: connect to their peers; the tasks load their partitions' topology (the slowest task's time)
SETUP_PHASES = ("submit", "workers", "rendezvous", "topology")
#: output phases, in order: the Merge step (time-series runs); the tasks make their result rows
#: (the slowest task); the rows are handed over (a single run's DataFrame over the tasks' files is
#: made when first read, by the caller; other runs' here)
OUTPUT_PHASES = ("merge", "rows", "handoff")


@dataclass
class SuperstepMetrics:
    superstep: int
    seconds: float               # wall time on the driver, from sending the plan to the last summary; where the
                                 # tasks go on by themselves, the slowest task's, from starting the superstep
                                 # to knowing the next
    active_subgraphs: int
    messages: int
    bytes: int
    task_seconds: float = 0.0    # the slowest task's time inside the program
    exchange_seconds: float = 0.0  # the slowest task's time sending messages to its peers (taking theirs in
                                   # overlaps the driver's next plan: the wait shows in the rest)
    instance: int | None = None  # in time-series runs: the instance, when one lane ran this superstep


@dataclass
class RunMetrics:
    program: str
    supersteps: list[SuperstepMetrics] = field(default_factory=list)
    setup_seconds: float = 0.0
    output_seconds: float = 0.0
    transport: str = ""          # "resident" (one barrier stage) or "jobs" (a Spark job per superstep)
    attempts: int = 0            # times the run's tasks were lost and the run resumed
    resumed_from: list = field(default_factory=list)   # the checkpoint superstep of each resumption (None: start)
    phases: dict = field(default_factory=dict)         # {phase: seconds}, of SETUP_PHASES and OUTPUT_PHASES

    def add_phase(self, name: str, seconds: float) -> None:
        """Account ``seconds`` more to phase ``name`` (a restarted run pays its set-up again)."""
        if name not in SETUP_PHASES + OUTPUT_PHASES:
            raise ValueError(f"unknown run phase {name!r}")
        self.phases[name] = self.phases.get(name, 0.0) + max(0.0, seconds)

    @property
    def num_supersteps(self) -> int:
        return len(self.supersteps)

    @property
    def messages(self) -> int:
        return sum(s.messages for s in self.supersteps)

    @property
    def bytes(self) -> int:
        return sum(s.bytes for s in self.supersteps)

    @property
    def seconds(self) -> float:
        return self.setup_seconds + sum(s.seconds for s in self.supersteps) + self.output_seconds

    def stretches(self) -> list[tuple[str, float]]:
        """The run in order as (name, seconds): its set-up phases, the supersteps, its output phases."""
        return ([(name, self.phases.get(name, 0.0)) for name in SETUP_PHASES]
                + [("supersteps", sum(s.seconds for s in self.supersteps))]
                + [(name, self.phases.get(name, 0.0)) for name in OUTPUT_PHASES])

    def as_dict(self) -> dict:
        return {"program": self.program, "transport": self.transport, "supersteps": self.num_supersteps,
                "messages": self.messages, "bytes": self.bytes, "seconds": round(self.seconds, 4),
                "setup_seconds": round(self.setup_seconds, 4), "output_seconds": round(self.output_seconds, 4),
                "attempts": self.attempts, "phases": {k: round(v, 4) for k, v in self.phases.items()},
                "per_superstep": [vars(s) for s in self.supersteps]}

    def plot(self, path=None):
        """A timeline of the run (see :func:`gopher.plots.timeline_figure`).

        Returns the matplotlib Figure; with ``path`` also writes it there as PNG.

        Example: ``g.connected_components().metrics.plot("cc.png")``
        """
        from gopher.plots import save_png, timeline_figure

        figure = timeline_figure(self)
        if path is not None:
            save_png(figure, path)
        return figure
