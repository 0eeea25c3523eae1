"""Time-series graph analytics: sub-graph programs over a selection of GoFS instances.

A time-series graph keeps one topology and, per instance (a time instant or
range), new vertex and edge attribute values. A program declares which
instance attributes it reads (``instance_vertex_attributes`` /
``instance_edge_attributes``) and sees them through ``subgraph.vertex_attribute``,
``subgraph.edge_attribute`` and ``subgraph.remote_edges.attribute``. Three
patterns run it (Simmhan et al., "Distributed Programming over Time-series
Graphs", IPDPS 2015):

``run_independent``
    every instance analysed on its own; the result is the union of the
    per-instance results (an ``instance`` column). A lane may read the state its
    sub-graph has in the previous instance's lane (``ctx.state_before``): a
    sequential analysis whose dependent part is small runs its independent part
    this way, in shared supersteps (CGQL's past frames).
``run_eventually_dependent``
    the same, then :meth:`TimeSeriesProgram.merge` runs once per sub-graph with
    its final state in every instance (each exactly once, in time order);
    merged per-vertex results and merged aggregates come back too.
``run_sequential``
    instances in time order; instance t starts only after t-1 has finished.
    A sub-graph's ``state`` carries over, and messages sent with
    ``ctx.send_forward_*`` arrive in superstep 0 of the next instance.

Every instance is a BSP run: superstep 0 runs every sub-graph (in a sequential
run, with the forward messages; a program with ``wake_at_instance_start =
False`` runs there only the sub-graphs that did not halt or got a forward
message); later a sub-graph runs when it has not voted to halt or a message
arrives; the instance ends when all have halted with no message in flight,
when ``master`` halts, or after ``max_supersteps``.
``ctx.superstep`` counts within the instance; ``ctx.instance`` is the
manifest entry (``id``, ``start``, ``end``), ``ctx.instance_index`` its
position in the selection. A sequential run ends when the instances run out,
or, if ``program.stop_when_quiet`` (the default), after an instance in which
nothing was sent forward.

Execution: independent instances are *lanes* of the same supersteps (up to
``concurrency`` at a time: a finished lane's place goes to the next instance), a
sequential run is one lane that moves from instance to instance; both run on
the one engine (:mod:`gopher.engine`), in one resident Spark stage. Topology is
loaded once per task and shared by all instances; each instance's selected
attribute columns are read once. A sequential run costs at least one superstep
per instance it reaches.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from gofs.errors import InputError
from gopher.engine import MERGED, Lane, Table, execute
from gopher.metrics import RunMetrics
from gopher.program import SubgraphProgram
from gopher.worker import TimeSeriesContext

__all__ = ["TimeSeriesProgram", "TimeSeriesContext", "TimeSeriesResult", "run_independent",
           "run_eventually_dependent", "run_sequential", "run_timeseries", "select_instances", "PATTERNS"]


class TimeSeriesProgram(SubgraphProgram):
    """A :class:`gopher.program.SubgraphProgram` with the time-series hooks.

    Any SubgraphProgram runs in the independent and sequential patterns; the
    eventually dependent pattern needs :meth:`merge`.
    """

    #: sequential runs: stop after an instance in which nothing was sent forward
    stop_when_quiet: bool = True
    #: sequential runs: run every sub-graph in superstep 0 of each instance (False: a halted
    #: sub-graph sleeps through instances until a forward message wakes it)
    wake_at_instance_start: bool = True
    #: output columns of :meth:`merge_output` besides ``id``: {name: pyarrow type}
    merge_schema: dict = {}

    def merge(self, subgraph, states: dict, ctx) -> None:
        """Combine one sub-graph's final ``states`` ({instance id: state}, time order, each
        instance once) into ``subgraph.state`` (read by :meth:`merge_output`); may
        ``ctx.aggregate`` for graph-wide merged results."""
        raise NotImplementedError(f"{type(self).__name__} needs merge() for the eventually dependent pattern")

    def merge_output(self, subgraph) -> dict:
        """Per-vertex merged results: {column: array aligned with the local vertices}."""
        return {}


@dataclass
class TimeSeriesResult:
    """What a time-series run returns.

    ``dataframe``: per-instance results (``instance``, ``id``, ...) for the
    independent patterns, the final results (``id``, ...) for a sequential run;
    None when the program has no ``output_schema``. ``aggregated``: {instance
    id: aggregates after its last superstep}. ``merged`` / ``merged_aggregated``:
    the Merge step's per-vertex results and aggregates. ``files_read``: the
    (path, columns) pairs the supersteps' tasks read from GoFS.
    """

    dataframe: object
    metrics: RunMetrics
    instances: list[int]
    aggregated: dict
    supersteps: dict
    merged: object = None
    merged_aggregated: dict = field(default_factory=dict)
    files_read: list = field(default_factory=list)


def select_instances(store, instances=None, time=None) -> list[dict]:
    """The manifest entries of the selected instances in time order: by id (one or a list),
    by ``time`` (a number or a (start, end) range, see ``GraphStore.select_instances``), or all."""
    chosen = store.instances if instances is None and time is None else \
        store.select_instances(instance=instances, time=time)
    if not chosen:
        raise InputError(f"{store.path}: the graph has no instances to run over")
    return sorted(chosen, key=lambda i: (i["start"], i["id"]))


def _independent(store, program, instances, time, max_supersteps, concurrency, merge, spark, transport,
                 checkpoint_interval, checkpoint_seconds, progress, globals_, tasks) -> TimeSeriesResult:
    selected = select_instances(store, instances, time)
    lanes = [Lane(i, [inst], i, len(selected), False, globals_ or {}) for i, inst in enumerate(selected)]
    tables = [Table("output", dict(program.output_schema), True)]
    if merge:
        tables.append(Table("merge_output", dict(program.merge_schema), False, {MERGED: None}))
    frames, metrics, merged_aggregated, _, files = execute(
        store, program, lanes, tables, window=concurrency or len(lanes), max_supersteps=max_supersteps,
        merge=merge, spark=spark, transport=transport, checkpoint_interval=checkpoint_interval,
        checkpoint_seconds=checkpoint_seconds, progress=progress, tasks=tasks)
    return TimeSeriesResult(frames[0], metrics, [i["id"] for i in selected],
                            {k: v for lane in lanes for k, v in lane.final.items()},
                            {k: v for lane in lanes for k, v in lane.supersteps.items()},
                            frames[1] if merge else None, merged_aggregated, files)


def run_independent(store, program, instances=None, time=None, max_supersteps: int = 1000,
                    concurrency: int | None = None, spark=None, transport: str | None = None,
                    checkpoint_interval: int | None = None, checkpoint_seconds: float | None = None,
                    progress: bool | None = None, globals_: dict | None = None,
                    tasks: int | None = None) -> TimeSeriesResult:
    """Analyse every selected instance on its own, all in the same supersteps.

    ``instances``: an instance id or list of ids; ``time``: a time or (start, end)
    range; neither: all instances. ``concurrency``: at most this many instances
    share a superstep (default: all), to bound memory. ``globals_``: initial
    ``ctx.globals`` of every instance. Returns per-instance results.
    """
    return _independent(store, program, instances, time, max_supersteps, concurrency, False, spark, transport,
                        checkpoint_interval, checkpoint_seconds, progress, globals_, tasks)


def run_eventually_dependent(store, program: TimeSeriesProgram, instances=None, time=None,
                             max_supersteps: int = 1000, concurrency: int | None = None, spark=None,
                             transport: str | None = None, checkpoint_interval: int | None = None,
                             checkpoint_seconds: float | None = None, progress: bool | None = None,
                             globals_: dict | None = None, tasks: int | None = None) -> TimeSeriesResult:
    """:func:`run_independent`, then ``program.merge`` per sub-graph over every instance's final state.

    Returns per-instance results plus ``merged`` (``id`` and ``program.merge_schema``
    columns) and ``merged_aggregated``.
    """
    return _independent(store, program, instances, time, max_supersteps, concurrency, True, spark, transport,
                        checkpoint_interval, checkpoint_seconds, progress, globals_, tasks)


def run_sequential(store, program, instances=None, time=None, max_supersteps: int = 1000, spark=None,
                   transport: str | None = None, checkpoint_interval: int | None = None,
                   checkpoint_seconds: float | None = None, progress: bool | None = None,
                   globals_: dict | None = None, tasks: int | None = None) -> TimeSeriesResult:
    """Analyse the selected instances one after another in time order, carrying state forward.

    ``max_supersteps`` bounds each instance. ``ctx.globals`` also carries over.
    Returns the final per-vertex results (``program.output`` after the last
    instance run, which is ``ctx.instance`` there too).
    """
    selected = select_instances(store, instances, time)
    lane = Lane(0, selected, 0, len(selected), True, globals_ or {})
    frames, metrics, _, _, files = execute(
        store, program, [lane], [Table("output", dict(program.output_schema), False)],
        max_supersteps=max_supersteps, spark=spark, transport=transport, checkpoint_interval=checkpoint_interval,
        checkpoint_seconds=checkpoint_seconds, progress=progress, tasks=tasks)
    return TimeSeriesResult(frames[0], metrics, list(lane.supersteps), lane.final, lane.supersteps,
                            files_read=files)


PATTERNS = {"independent": run_independent, "eventually_dependent": run_eventually_dependent,
            "sequential": run_sequential}


def run_timeseries(store, program, pattern: str = "independent", **options) -> TimeSeriesResult:
    """Run ``program`` with a pattern by name: "independent", "eventually_dependent" or "sequential"."""
    try:
        runner = PATTERNS[pattern]
    except KeyError:
        raise InputError(f"unknown time-series pattern {pattern!r}; choose one of: {', '.join(PATTERNS)}") from None
    return runner(store, program, **options)
