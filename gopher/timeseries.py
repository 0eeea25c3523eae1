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
    per-instance results (an ``instance`` column).
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

Execution: topology is loaded once per Spark task's worker process and shared
by all instances (so is the sort behind ``subgraph.adjacency``); each
instance's selected attribute columns are read once. Independent instances are
*lanes* of the same supersteps, so one Spark job per superstep serves all of
them (up to ``concurrency`` at a time); states and messages are kept per
(instance, sub-graph), and combiners work per instance. A sequential run costs
at least one superstep per instance it reaches.
"""
from __future__ import annotations

import contextlib
import functools
import pickle
import sys
import time as clock
from dataclasses import dataclass, field

import pyarrow as pa
from pyspark.sql import functions as F

from gofs.errors import InputError
from gopher import aggregators as agg
from gopher.context import MasterContext
from gopher.engine import Engine, _raise_program_error, _spark_schema, adaptive_execution_off
from gopher.metrics import RunMetrics, SuperstepMetrics
from gopher.program import SubgraphProgram
from gopher.timeseries_worker import (MERGED, LaneStep, TimeSeriesContext, merge_function, output_function,
                                      superstep_function)
from gopher.worker import RECORD_SCHEMA, STATE, SUMMARY

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


class _Lane:
    """Driver-side progress of one lane: which instance, which superstep, what it aggregated."""

    def __init__(self, key: int, instances: list[dict], index: int, count: int, sequential: bool, globals_: dict):
        self.key, self.instances, self.index, self.count, self.sequential = key, instances, index, count, sequential
        self.position = self.superstep = self.forwarded = 0
        self.aggregated: dict = {}
        self.globals = dict(globals_)
        self.done = False
        self.supersteps: dict = {}
        self.final: dict = {}

    @property
    def instance(self) -> dict:
        return self.instances[self.position]

    def step(self) -> LaneStep:
        return LaneStep(self.instance, self.index + self.position, self.count, self.superstep, self.aggregated,
                        self.globals, self.sequential)

    def finish_superstep(self, summaries, specs, program, metrics, max_supersteps: int) -> None:
        mine = [s["lanes"][self.key] for s in summaries if self.key in s["lanes"]]
        aggregated = {name: specs[name].reduce([m["partials"][name] for m in mine if name in m["partials"]])
                      for name in specs}
        sent = sum(m["sent"] for m in mine)
        halted = all(m["halted"] == m["subgraphs"] for m in mine)
        master = MasterContext(self.superstep, aggregated, self.globals, metrics, self.instance)
        program.master(master)
        self.superstep += 1
        self.forwarded += sum(m["forward"] for m in mine)
        self.aggregated = aggregated
        if not (master.halted or (halted and sent == 0) or self.superstep >= max_supersteps):
            return
        self.supersteps[self.instance["id"]] = self.superstep
        self.final[self.instance["id"]] = aggregated
        quiet = getattr(program, "stop_when_quiet", True) and self.forwarded == 0
        if self.sequential and self.position + 1 < len(self.instances) and not quiet:
            self.position += 1
            self.superstep = self.forwarded = 0
            self.aggregated = {}
        else:
            self.done = True


class _Runner:
    """The superstep loop over lanes, on an :class:`gopher.engine.Engine`'s routing.

    Used as a context manager: adaptive execution is off inside, and the cached
    records are released on the way out.
    """

    def __init__(self, store, program, spark, checkpoint_interval: int, progress):
        self.engine = Engine(store, spark, checkpoint_interval, progress)
        self.store, self.program = store, program
        self.specs = {name: agg.resolve(spec) for name, spec in program.aggregators.items()}
        self.metrics = RunMetrics(type(program).__name__)
        self.files: set = set()
        self.cached: list = []
        self.superstep = 0

    def _materialise(self, out):
        """Persist (or every few supersteps checkpoint) ``out``; return it and its summaries."""
        interval = self.engine.checkpoint_interval
        try:
            out = out.localCheckpoint(eager=True) if self.superstep % interval == interval - 1 else out.persist()
            summaries = [pickle.loads(r[0]) for r in
                         out.filter(F.col("kind") == SUMMARY).select("payload").collect()]
        except Exception as exc:
            out.unpersist()
            _raise_program_error(exc)
        for s in summaries:
            self.files.update(s["files"])
        return out, summaries

    def lanes(self, lanes: list[_Lane], max_supersteps: int):
        """Run ``lanes`` until all are done; returns the final records (kept cached)."""
        records, previous = self.engine._seed(), None
        while True:
            plan = {lane.key: lane.step() for lane in lanes if not lane.done}
            if not plan:
                break
            start = clock.perf_counter()
            step = superstep_function(self.store, self.program, plan, self.engine.routes,
                                      self.engine.vertex_offsets, self.engine.subgraph_offsets)
            out, summaries = self._materialise(
                self.engine.shuffle(records).mapInArrow(step, _spark_schema(RECORD_SCHEMA)))
            if previous is not None:
                previous.unpersist()
            previous = out
            for lane in lanes:
                if lane.key in plan:
                    lane.finish_superstep(summaries, self.specs, self.program, self.metrics, max_supersteps)
            lane_summaries = [m for s in summaries for m in s["lanes"].values()]
            metrics = SuperstepMetrics(self.superstep, clock.perf_counter() - start,
                                       sum(m["active"] for m in lane_summaries),
                                       sum(m["sent"] + m["forward"] for m in lane_summaries),
                                       sum(s["bytes"] for s in summaries),
                                       max((s["seconds"] for s in summaries), default=0.0))
            self.metrics.supersteps.append(metrics)
            if self.engine.progress:
                print(f"[gopher] {self.metrics.program} superstep {self.superstep}: {len(plan)} instance(s), "
                      f"{metrics.active_subgraphs} active sub-graphs, {metrics.messages} messages, "
                      f"{metrics.seconds:.2f}s", file=sys.stderr)
            self.superstep += 1
            records = out.filter(F.col("kind") != SUMMARY)
        self.cached.append(previous)
        return records

    def merge(self, records, lanes: dict):
        """The Merge step: returns (merged records, merged aggregates)."""
        start = clock.perf_counter()
        merge = merge_function(self.store, self.program, lanes, self.engine.routes)
        out, summaries = self._materialise(self._states(records).mapInArrow(merge, _spark_schema(RECORD_SCHEMA)))
        self.cached.append(out)
        self.metrics.supersteps.append(SuperstepMetrics(self.superstep, clock.perf_counter() - start,
                                                        self.store.manifest["subgraphs"]["count"], 0, 0))
        partials = [s["lanes"][MERGED]["partials"] for s in summaries]
        aggregated = {name: self.specs[name].reduce([p[name] for p in partials if name in p]) for name in self.specs}
        return out.filter(F.col("kind") != SUMMARY), aggregated

    def output(self, records, lanes: dict, columns: dict, method: str, per_instance: bool):
        """Per-vertex rows of ``lanes`` ({lane: instance or None}), materialised (cached in
        Spark's columnar form, which holds many instances' rows more cheaply than a checkpoint)."""
        if not columns:
            return None
        start = clock.perf_counter()
        id_type = pa.int64() if self.store.manifest["id_type"] == "int64" else pa.string()
        schema = pa.schema(([("instance", pa.int64())] if per_instance else []) + [("id", id_type),
                                                                                   *columns.items()])
        fn = output_function(self.store, self.program, lanes, schema, method, per_instance)
        try:
            frame = self._states(records).mapInArrow(fn, _spark_schema(schema)).persist()
            frame.count()
        except Exception as exc:
            _raise_program_error(exc)
        self.metrics.output_seconds += clock.perf_counter() - start
        return frame

    def _states(self, records):
        return self.engine.shuffle(records.filter(F.col("kind") == STATE))

    def __enter__(self) -> "_Runner":
        self._exit = contextlib.ExitStack()
        self._exit.enter_context(adaptive_execution_off(self.engine.spark))
        self._exit.callback(lambda: [frame.unpersist() for frame in self.cached])
        return self

    def __exit__(self, *exc) -> None:
        self._exit.close()


def select_instances(store, instances=None, time=None) -> list[dict]:
    """The manifest entries of the selected instances in time order: by id (one or a list),
    by ``time`` (a number or a (start, end) range, see ``GraphStore.select_instances``), or all."""
    chosen = store.instances if instances is None and time is None else \
        store.select_instances(instance=instances, time=time)
    if not chosen:
        raise InputError(f"{store.path}: the graph has no instances to run over")
    return sorted(chosen, key=lambda i: (i["start"], i["id"]))


def _independent(store, program, instances, time, max_supersteps, concurrency, merge, spark,
                 checkpoint_interval, progress, globals_) -> TimeSeriesResult:
    selected = select_instances(store, instances, time)
    runner = _Runner(store, program, spark, checkpoint_interval, progress)
    width = len(selected) if not concurrency else max(1, int(concurrency))
    lanes = [_Lane(i, [inst], i, len(selected), False, globals_ or {}) for i, inst in enumerate(selected)]
    with runner:
        finals = [runner.lanes(lanes[i:i + width], max_supersteps) for i in range(0, len(lanes), width)]
        records = functools.reduce(lambda a, b: a.union(b), finals)
        by_lane = {lane.key: lane.instance for lane in lanes}
        frame = runner.output(records, by_lane, program.output_schema, "output", per_instance=True)
        merged, merged_aggregated = None, {}
        if merge:
            merged_records, merged_aggregated = runner.merge(records, by_lane)
            merged = runner.output(merged_records, {MERGED: None}, program.merge_schema, "merge_output",
                                   per_instance=False)
    return TimeSeriesResult(frame, runner.metrics, [i["id"] for i in selected],
                            {k: v for lane in lanes for k, v in lane.final.items()},
                            {k: v for lane in lanes for k, v in lane.supersteps.items()},
                            merged, merged_aggregated, sorted(runner.files))


def run_independent(store, program, instances=None, time=None, max_supersteps: int = 1000,
                    concurrency: int | None = None, spark=None, checkpoint_interval: int = 5,
                    progress: bool | None = None, globals_: dict | None = None) -> TimeSeriesResult:
    """Analyse every selected instance on its own, all in the same supersteps.

    ``instances``: an instance id or list of ids; ``time``: a time or (start, end)
    range; neither: all instances. ``concurrency``: at most this many instances
    share a superstep (default: all), to bound memory. ``globals_``: initial
    ``ctx.globals`` of every instance. Returns per-instance results.
    """
    return _independent(store, program, instances, time, max_supersteps, concurrency, False, spark,
                        checkpoint_interval, progress, globals_)


def run_eventually_dependent(store, program: TimeSeriesProgram, instances=None, time=None,
                             max_supersteps: int = 1000, concurrency: int | None = None, spark=None,
                             checkpoint_interval: int = 5, progress: bool | None = None,
                             globals_: dict | None = None) -> TimeSeriesResult:
    """:func:`run_independent`, then ``program.merge`` per sub-graph over every instance's final state.

    Returns per-instance results plus ``merged`` (``id`` and ``program.merge_schema``
    columns) and ``merged_aggregated``.
    """
    return _independent(store, program, instances, time, max_supersteps, concurrency, True, spark,
                        checkpoint_interval, progress, globals_)


def run_sequential(store, program, instances=None, time=None, max_supersteps: int = 1000, spark=None,
                   checkpoint_interval: int = 5, progress: bool | None = None,
                   globals_: dict | None = None) -> TimeSeriesResult:
    """Analyse the selected instances one after another in time order, carrying state forward.

    ``max_supersteps`` bounds each instance. ``ctx.globals`` also carries over.
    Returns the final per-vertex results (``program.output`` after the last
    instance run, which is ``ctx.instance`` there too).
    """
    selected = select_instances(store, instances, time)
    runner = _Runner(store, program, spark, checkpoint_interval, progress)
    lane = _Lane(0, selected, 0, len(selected), True, globals_ or {})
    with runner:
        records = runner.lanes([lane], max_supersteps)
        frame = runner.output(records, {0: lane.instance}, program.output_schema, "output", per_instance=False)
    return TimeSeriesResult(frame, runner.metrics, list(lane.supersteps), lane.final, lane.supersteps,
                            files_read=sorted(runner.files))


PATTERNS = {"independent": run_independent, "eventually_dependent": run_eventually_dependent,
            "sequential": run_sequential}


def run_timeseries(store, program, pattern: str = "independent", **options) -> TimeSeriesResult:
    """Run ``program`` with a pattern by name: "independent", "eventually_dependent" or "sequential"."""
    try:
        runner = PATTERNS[pattern]
    except KeyError:
        raise InputError(f"unknown time-series pattern {pattern!r}; choose one of: {', '.join(PATTERNS)}") from None
    return runner(store, program, **options)
