"""Run metrics: what each superstep did and cost."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SuperstepMetrics:
    superstep: int
    seconds: float
    active_subgraphs: int
    messages: int
    bytes: int
    task_seconds: float = 0.0  # the slowest task's time inside the program (the rest is Spark)
    exchange_seconds: float = 0.0  # time spent moving this superstep's messages between tasks
    instance: int | None = None  # time-series runs: the instance this superstep belonged to


@dataclass
class RunMetrics:
    program: str
    supersteps: list[SuperstepMetrics] = field(default_factory=list)
    setup_seconds: float = 0.0
    output_seconds: float = 0.0

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
        return {"program": self.program, "supersteps": self.num_supersteps, "messages": self.messages,
                "bytes": self.bytes, "seconds": round(self.seconds, 4),
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
