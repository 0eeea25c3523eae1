"""The fallback transport: one Spark job per superstep.

Used where a run cannot be one barrier stage (dynamic allocation, fewer slots
than tasks) or when ``spark.goffish.transport`` says ``jobs``. Each GoFS
partition's lane states and the messages addressed to it travel as records
(partition, kind, blob in :mod:`gopher.codec`); ``partitionBy`` brings
partition p's records to task ``p mod T``, where a
:class:`gopher.worker.TaskWorker` imports them, runs the superstep and exports
the new records. Topology still stays in the workers' process cache; Spark's
lineage (persisted blocks, cut by a local checkpoint every few supersteps)
gives the fault tolerance, so nothing here restarts.
"""
from __future__ import annotations

import re

from sparkshim.compat import forgets_zip_importers, spark_schema
from gopher import codec
from gopher.worker import GopherProgramError, TaskWorker

STATE, MESSAGES, SUMMARY = 0, 1, 2
_LINEAGE_CUT = 10


def _worker_for(spec, records) -> TaskWorker:
    """A worker for the partitions present in ``records``: states imported, messages delivered."""
    states, messages = {}, []
    for p, (kind, blob) in records:
        if kind == STATE:
            states[p] = blob
        else:
            messages.append((p, blob))
    worker = TaskWorker(spec, sorted(states))
    for p, blob in states.items():
        if blob is not None:
            worker.import_partition(p, blob)
    for p, blob in messages:
        worker.deliver(p, codec.loads(blob))
    return worker


def _export(worker: TaskWorker, outgoing: dict, summary: dict):
    sent = 0
    for dst, payload in outgoing.items():
        blob = codec.dumps(payload)
        sent += len(blob)
        yield dst, (MESSAGES, blob)
    for p in worker.partitions:
        yield p, (STATE, worker.export_partition(p))
    summary["bytes"] = sent
    yield -1, (SUMMARY, codec.dumps(summary))


def _program_error(exc: Exception) -> Exception:
    """The program error inside a failed job's Python traceback, whole, or ``exc`` itself."""
    match = re.search(r"GopherProgramError: (.*?)(?:\n\s*at org\.apache|\Z)", str(exc), re.S)
    return GopherProgramError(match.group(1).rstrip()) if match else exc


def _reraise(exc: Exception):
    error = _program_error(exc)
    if error is exc:
        raise exc
    raise error from exc


class JobTransport:
    """Driver side: one Spark job per superstep over persisted records."""

    def __init__(self, spark, spec, options, schema=None):
        self.spark, self.spec, self.schema = spark, spec, schema
        self.sc = spark.sparkContext
        self.records = None
        self.persisted: list = []
        self.cached = None

    def __enter__(self) -> "JobTransport":
        k = self.spec.store.num_partitions
        self.records = self.sc.parallelize([(p, (STATE, None)) for p in range(k)], self.spec.tasks)
        return self

    def __exit__(self, kind, exc, tb) -> None:
        for rdd in self.persisted:
            rdd.unpersist()
        self.persisted = []
        if kind is not None and self.cached is not None:
            self.cached.unpersist()

    def _run(self, function, step: int):
        spec = self.spec
        out = self.records.partitionBy(spec.tasks, spec.task_of).mapPartitions(forgets_zip_importers(function)).persist()
        if step % _LINEAGE_CUT == _LINEAGE_CUT - 1:
            out.localCheckpoint()
        try:
            summaries = out.filter(lambda r: r[1][0] == SUMMARY).map(lambda r: codec.loads(r[1][1])).collect()
        except Exception as exc:
            out.unpersist()
            _reraise(exc)
        for rdd in self.persisted:
            rdd.unpersist()
        self.persisted = [out]
        self.records = out.filter(lambda r: r[1][0] != SUMMARY)
        return summaries

    def superstep(self, step: int, plan: dict, checkpoint) -> list:
        spec = self.spec

        def run(records):
            worker = _worker_for(spec, records)
            outgoing, summary = worker.step(plan)
            summary["exchange_seconds"] = 0.0
            summary["checkpointed"] = checkpoint
            yield from _export(worker, outgoing, summary)

        return self._run(run, step)

    def restart(self, resume) -> None:
        raise AssertionError("the job-per-superstep transport never loses its state")

    def merge(self, lanes: dict) -> list:
        spec = self.spec

        def run(records):
            worker = _worker_for(spec, records)
            partials = worker.merge(lanes)
            yield from _export(worker, {}, {"partials": partials})

        return [s["partials"] for s in self._run(run, 0)]

    def output(self, tables: list, schema):
        spec = self.spec
        states = self.records.filter(lambda r: r[1][0] == STATE).map(lambda r: (r[0], r[1][1]))
        frame = self.spark.createDataFrame(states, "partition int, state binary")

        def run(batches):
            for batch in batches:
                for p, blob in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist()):
                    worker = TaskWorker(spec, [p])
                    worker.import_partition(p, blob)
                    yield from worker.output(tables, schema)

        self.cached = frame.mapInArrow(forgets_zip_importers(run), spark_schema(schema)).persist()
        try:
            self.cached.count()
        except Exception as exc:
            self.cached.unpersist()
            self.cached = None
            _reraise(exc)
        return self.cached
