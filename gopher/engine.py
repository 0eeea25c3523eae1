"""Driver-side half of the engine: the superstep loop on Spark.

Each superstep is one Spark job: records (state and messages, keyed by the
destination GoFS partition) are shuffled so that partition p lands in Spark
task p, and ``mapInArrow`` runs the program there. The result is persisted,
the tiny summary records are read back, and every few supersteps the lineage
is cut with a local checkpoint.
"""
from __future__ import annotations

import contextlib
import pickle
import sys
import time
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from pyspark.sql import functions as F

from gopher import aggregators as agg
from gopher.context import MasterContext
from gopher.metrics import RunMetrics, SuperstepMetrics
from gopher.worker import (RECORD_SCHEMA, STATE, SUMMARY, GopherProgramError,
                           output_function, superstep_function)

_ROUTE_CACHE: dict = {}


@dataclass
class RunResult:
    """Per-vertex results (a DataFrame keyed by original ``id``), metrics, final aggregates."""

    dataframe: object
    metrics: RunMetrics
    aggregated: dict


def route_keys(spark, k: int) -> list[int]:
    """For each partition p, a key that Spark's hash partitioning sends to task p.

    ``repartition(k, col)`` places a row in ``pmod(hash(col), k)``; choosing keys
    by that same expression makes the shuffle deliver partition p's records to
    task p exactly, with no second GoFS partition in the task.
    """
    if k not in _ROUTE_CACHE:
        rows = (spark.range(0, 64 * k + 64).select("id", F.expr(f"pmod(hash(id), {k})").alias("p"))
                .groupBy("p").agg(F.min("id").alias("id")).collect())
        keys = {r["p"]: r["id"] for r in rows}
        if len(keys) < k:
            raise RuntimeError(f"could not find routing keys for {k} partitions")
        _ROUTE_CACHE[k] = [int(keys[p]) for p in range(k)]
    return _ROUTE_CACHE[k]


def _spark_schema(schema: pa.Schema):
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema)


@contextlib.contextmanager
def adaptive_execution_off(spark):
    """Adaptive execution splits every superstep's shuffle into extra jobs and would
    be free to merge partitions; supersteps need neither, so it is off while they run."""
    key = "spark.sql.adaptive.enabled"
    previous = spark.conf.get(key, None)
    spark.conf.set(key, "false")
    try:
        yield
    finally:
        if previous is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, previous)


def _raise_program_error(exc: Exception) -> None:
    text = str(exc)
    marker = "GopherProgramError: "
    if marker in text:
        message = text[text.index(marker) + len(marker):].split("\n")[0]
        raise GopherProgramError(message) from None
    raise exc


class Engine:
    """Runs sub-graph programs over a GoFS graph on a SparkSession.

    A superstep runs as ``tasks`` Spark tasks, each serving the GoFS partitions
    p with p mod tasks equal to its index: the cluster's default parallelism (or
    ``spark.goffish.tasks``), at most one task per partition. Every Python task
    costs Spark a fixed start-up, so more tasks than cores only add overhead.
    """

    def __init__(self, store, spark=None, checkpoint_interval: int = 5, progress: bool | None = None):
        self.store = store
        self.spark = spark or store.spark
        self.checkpoint_interval = max(1, checkpoint_interval)
        self.progress = sys.stderr.isatty() if progress is None else progress
        k = store.num_partitions
        self.tasks = min(k, int(self.spark.conf.get("spark.goffish.tasks", None)
                                or self.spark.sparkContext.defaultParallelism))
        keys = route_keys(self.spark, self.tasks)
        self.routes = [keys[p % self.tasks] for p in range(k)]
        self.vertex_offsets = np.array([p["vertex_offset"] for p in store.partitions] + [store.num_vertices])
        self.subgraph_offsets = np.array([p["subgraph_offset"] for p in store.partitions]
                                         + [store.manifest["subgraphs"]["count"]])

    def shuffle(self, records):
        """Deliver every record to the Spark task that serves its GoFS partition."""
        return records.repartition(self.tasks, "route")

    def _seed(self, states: dict | None = None):
        k = self.store.num_partitions
        rows = [(self.routes[p], p, STATE, None if states is None else states[p]) for p in range(k)]
        return self.spark.createDataFrame(rows, _spark_schema(RECORD_SCHEMA))

    def run(self, program, max_supersteps: int = 1000, instance: dict | None = None,
            initial=None, globals_: dict | None = None) -> tuple[object, RunMetrics, dict]:
        """Run ``program`` to halting (or ``max_supersteps``); returns (final records, metrics, aggregates).

        The final records stay persisted until ``release``; ``initial`` may be the
        records of an earlier run (sequential time series).
        """
        if max_supersteps < 1:
            raise ValueError(f"max_supersteps must be at least 1, got {max_supersteps}")
        metrics = RunMetrics(type(program).__name__)
        clock = time.perf_counter()
        records = self._seed() if initial is None else initial
        aggregated: dict = {}
        globals_ = dict(globals_ or {})
        specs = {name: agg.resolve(spec) for name, spec in program.aggregators.items()}
        metrics.setup_seconds = time.perf_counter() - clock
        previous = None
        for superstep in range(max_supersteps):
            clock = time.perf_counter()
            step = superstep_function(self.store, program, superstep, aggregated, globals_, self.routes,
                                      self.vertex_offsets, self.subgraph_offsets, instance)
            out = self.shuffle(records).mapInArrow(step, _spark_schema(RECORD_SCHEMA))
            try:
                if superstep % self.checkpoint_interval == self.checkpoint_interval - 1:
                    out = out.localCheckpoint(eager=True)
                else:
                    out = out.persist()
                summaries = [pickle.loads(r[0]) for r in
                             out.filter(F.col("kind") == SUMMARY).select("payload").collect()]
            except Exception as exc:
                out.unpersist()
                self.release(previous)      # a failed run keeps nothing cached
                _raise_program_error(exc)
            if previous is not None:
                previous.unpersist()
            previous = out
            aggregated = {name: specs[name].reduce([s["partials"][name] for s in summaries if name in s["partials"]])
                          for name in specs}
            sent = sum(s["sent"] for s in summaries)
            halted = all(s["halted"] == s["subgraphs"] for s in summaries)
            step_metrics = SuperstepMetrics(superstep, time.perf_counter() - clock,
                                            sum(s["active"] for s in summaries), sent,
                                            sum(s["bytes"] for s in summaries),
                                            max((s["seconds"] for s in summaries), default=0.0))
            metrics.supersteps.append(step_metrics)
            master = MasterContext(superstep, aggregated, globals_, metrics)
            program.master(master)
            if self.progress:
                print(f"[gopher] {metrics.program} superstep {superstep}: {step_metrics.active_subgraphs} active "
                      f"sub-graphs, {sent} messages, {step_metrics.seconds:.2f}s", file=sys.stderr)
            records = out.filter(F.col("kind") != SUMMARY)
            if master.halted or (halted and sent == 0):
                break
        return previous, metrics, aggregated

    @staticmethod
    def release(records) -> None:
        if records is not None:
            records.unpersist()

    def output(self, program, records, instance: dict | None = None):
        """Per-vertex results of the final states, materialised (so the run's caches can go)."""
        id_type = pa.int64() if self.store.manifest["id_type"] == "int64" else pa.string()
        schema = program.output_arrow_schema(id_type)
        fn = output_function(self.store, program, schema, instance)
        states = self.shuffle(records.filter(F.col("kind") == STATE))
        try:
            return states.mapInArrow(fn, _spark_schema(schema)).localCheckpoint(eager=True)
        except Exception as exc:
            _raise_program_error(exc)


def run_program(store, program, max_supersteps: int = 1000, spark=None, checkpoint_interval: int = 5,
                progress: bool | None = None) -> RunResult:
    """Run a sub-graph program on a stored graph and return per-vertex results and metrics."""
    engine = Engine(store, spark, checkpoint_interval, progress)
    with adaptive_execution_off(engine.spark):
        records, metrics, aggregated = engine.run(program, max_supersteps)
        clock = time.perf_counter()
        frame = engine.output(program, records)
    engine.release(records)
    metrics.output_seconds = time.perf_counter() - clock
    return RunResult(frame, metrics, aggregated)
