"""Run metrics: what each superstep did and cost, and how the run executed."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SuperstepMetrics:
    superstep: int
    seconds: float               # wall time on the driver, from sending the plan to the last summary
    active_subgraphs: int
    messages: int
    bytes: int
    task_seconds: float = 0.0    # the slowest task's time inside the program
    exchange_seconds: float = 0.0  # the slowest task's time moving messages to its peers
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

    def as_dict(self) -> dict:
        return {"program": self.program, "transport": self.transport, "supersteps": self.num_supersteps,
                "messages": self.messages, "bytes": self.bytes, "seconds": round(self.seconds, 4),
                "setup_seconds": round(self.setup_seconds, 4), "output_seconds": round(self.output_seconds, 4),
                "attempts": self.attempts, "per_superstep": [vars(s) for s in self.supersteps]}

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
