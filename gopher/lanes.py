"""The superstep rule of a run's lanes: which lanes run next, and how a superstep's lane
reports (active and halted sub-graphs, messages, aggregator partials) move a lane on, to its
next superstep, its next instance or its end.

The driver applies it to every task's summary; where the program has no driver-side
``master``, every task applies it too, to the reports its peers send with their messages, and
goes on to the next superstep without waiting for the driver (:mod:`gopher.resident`). Both
sides reduce the same reports in task order, so they agree on every plan.
"""
from __future__ import annotations

from gopher.context import MasterContext
from gopher.program import SubgraphProgram
from gopher.worker import LaneStep


class Lane:
    """Progress of one lane: which instance, which superstep, what it aggregated."""

    def __init__(self, key: int, instances: list, index: int, count: int, sequential: bool, globals_: dict):
        self.key, self.instances, self.index, self.count, self.sequential = key, instances, index, count, sequential
        self.position = self.superstep = self.forwarded = 0
        self.aggregated: dict = {}
        self.globals = dict(globals_)
        self.globals0 = dict(globals_)
        self.done = False
        self.supersteps: dict = {}
        self.final: dict = {}

    @property
    def instance(self) -> dict | None:
        return self.instances[self.position]

    def step(self) -> LaneStep:
        return LaneStep(self.instance, self.index + self.position, self.count, self.superstep, self.aggregated,
                        self.globals, self.sequential)

    def finish_superstep(self, reports: list, specs: dict, program, metrics, max_supersteps: int) -> None:
        # popped from the reports: what the master pops from ``aggregated`` is then freed
        aggregated = {name: specs[name].reduce([r["partials"].pop(name) for r in reports if name in r["partials"]])
                      for name in specs}
        sent = sum(r["sent"] for r in reports)
        halted = all(r["halted"] == r["subgraphs"] for r in reports)
        master = MasterContext(self.superstep, aggregated, self.globals, metrics, self.instance)
        program.master(master)
        self.superstep += 1
        self.forwarded += sum(r["forward"] for r in reports)
        self.aggregated = aggregated
        if not (master.halted or (halted and sent == 0) or self.superstep >= max_supersteps):
            return
        label = None if self.instance is None else self.instance["id"]
        self.supersteps[label] = self.superstep
        self.final[label] = aggregated
        quiet = getattr(program, "stop_when_quiet", True) and self.forwarded == 0
        if self.sequential and self.position + 1 < len(self.instances) and not quiet:
            self.position += 1
            self.superstep = self.forwarded = 0
            self.aggregated = {}
        else:
            self.done = True


def plan(lanes: list[Lane], window: int) -> dict:
    """The next superstep: {lane key: LaneStep} of the first ``window`` lanes not done."""
    running = [lane for lane in lanes if not lane.done][:window]
    return {lane.key: lane.step() for lane in running}


def finish(lanes: list[Lane], planned: dict, task_reports: list, specs: dict, program, metrics,
           max_supersteps: int) -> dict:
    """Move the ``planned`` lanes on by one superstep. ``task_reports``: each task's {lane: report},
    in task order (their partials are popped). Returns {lane: [report per task]}."""
    reports = {lane: [r[lane] for r in task_reports if lane in r] for lane in planned}
    for lane in lanes:
        if lane.key in planned:
            lane.finish_superstep(reports[lane.key], specs, program, metrics, max_supersteps)
    return reports


def runs_ahead(program) -> bool:
    """Whether the tasks may move the lanes on themselves: the program has no driver-side ``master``."""
    return type(program).master is SubgraphProgram.master


def checkpoint_due(superstep: int, interval: int | None, seconds: float | None, elapsed: float) -> bool:
    """Whether superstep ``superstep`` starts by saving the run's state: every ``interval``
    supersteps, or once ``seconds`` have passed (``elapsed``) since the last save; never the first."""
    if superstep == 0:
        return False
    if interval and superstep % interval == 0:
        return True
    return bool(seconds) and elapsed >= seconds
