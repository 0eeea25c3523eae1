"""What each step of a Spark computation cost in Spark work: jobs, stages run, stages skipped, tasks.

Read from Spark's public status tracker (``SparkContext.statusTracker()``),
without a listener and without touching the session: the jobs a stage ran are
the ids that appeared in the caller's job group (or among the ungrouped jobs)
while it ran, and each job's stages say whether they ran (a shuffle's map side
computed) or were skipped (its output reused). Every job costs a fixed
scheduling overhead and every run stage a round of task launches (through a
Python worker where the stage runs Python), so these counts explain a stage's
time where its data volume does not. :class:`ScratchFrames` holds a computation's
intermediate frames without their plans' history.
"""
from __future__ import annotations

import contextlib
import functools
import time
import uuid

import numpy as np
import pyarrow as pa

from gofs import layout
from sparkshim.checkpoints import ensure_checkpoint_dir
from sparkshim.compat import forgets_zip_importers

_JOB_GROUP = "spark.jobGroup.id"


class JobProfile:
    """Per-stage wall time and Spark job counts of one ingest.

    ``with profile.stage("read"): ...`` times the block into ``seconds`` and
    notes the ids of the jobs it ran; :meth:`summary` turns them into counts
    once the run is over (the status tracker is updated asynchronously, so
    counting at the end sees every finished stage). Without a session
    (``spark=None``: a call refused before any job) only seconds are kept.
    Inside a stage, ``with profile.step("what"): ...`` times and counts one
    step of it the same way (:meth:`steps`), so a stage's jobs can be told apart.
    """

    def __init__(self, spark, seconds: dict):
        self.context = spark.sparkContext if spark is not None else None
        self.seconds = seconds
        self.job_ids: dict[str, list[int]] = {}
        self.current: str | None = None
        self.step_log: dict[str, list[tuple[str, float, list[int]]]] = {}

    def _known_jobs(self) -> set[int]:
        if self.context is None:
            return set()
        group = self.context.getLocalProperty(_JOB_GROUP)
        return set(self.context.statusTracker().getJobIdsForGroup(group))

    @contextlib.contextmanager
    def stage(self, name: str):
        before = self._known_jobs()
        clock = time.perf_counter()
        self.current = name
        try:
            yield
        finally:
            self.current = None
            self.seconds[name] = time.perf_counter() - clock
            self.job_ids[name] = sorted(self._known_jobs() - before)

    @contextlib.contextmanager
    def step(self, name: str):
        before = self._known_jobs()
        clock = time.perf_counter()
        try:
            yield
        finally:
            self.step_log.setdefault(self.current, []).append(
                (name, time.perf_counter() - clock, sorted(self._known_jobs() - before)))

    def summary(self) -> dict:
        """``{stage: {"jobs", "stages", "skipped", "tasks"}}`` for the stages timed so far."""
        if self.context is None:
            return {}
        return {name: self._work(ids) for name, ids in self.job_ids.items()}

    def steps(self) -> dict:
        """``{stage: [{"step", "seconds", "jobs", "stages", "skipped", "tasks"}, ...]}`` for the
        steps timed so far, in the order they ran."""
        if self.context is None:
            return {}
        return {stage: [{"step": name, "seconds": seconds, **self._work(ids)} for name, seconds, ids in log]
                for stage, log in self.step_log.items()}

    def _work(self, ids: list[int]) -> dict:
        tracker = self.context.statusTracker()
        run = skipped = tasks = 0
        for job in ids:
            info = tracker.getJobInfo(job)
            for stage_id in (info.stageIds if info is not None else []):
                stage = tracker.getStageInfo(stage_id)
                if stage is not None and stage.numCompletedTasks + stage.numActiveTasks > 0:
                    run += 1
                    tasks += stage.numCompletedTasks + stage.numActiveTasks
                else:
                    skipped += 1
        return {"jobs": len(ids), "stages": run, "skipped": skipped, "tasks": tasks}


class ScratchFrames:
    """Intermediate frames written as Parquet under the session's checkpoint directory.

    A frame handed to an instance is written (one job) and read back, not
    persisted or checkpointed: a persisted frame keeps its whole plan, and
    every later query re-analyses that history (and compares it with every
    other cached plan), which costs seconds per job once an ingest's plans
    hold a few joins; Spark 3.5 gives a local checkpoint the size estimate
    of the plan it came from, and a join's estimate is the product of its
    inputs', so over rounds and levels the estimates grow to numbers with
    millions of digits. Files read back have their real size and no history.
    The directory is made by the first write (a run refused before any job makes none) and
    removed by :meth:`remove`.
    """

    def __init__(self, spark, purpose: str):
        self.spark, self.purpose = spark, purpose
        self.root = None
        self.count = 0

    def __call__(self, frame):
        path = self.directory()
        frame.write.parquet(path)
        return self.spark.read.parquet(path)

    def directory(self) -> str:
        """A new directory's URI under the root, for files that tasks write themselves
        (removed with the rest by :meth:`remove`)."""
        if self.root is None:
            base = ensure_checkpoint_dir(self.spark.sparkContext)
            self.root = f"{base.rstrip('/')}/goffish-{self.purpose}-{uuid.uuid4().hex[:12]}"
        path = f"{self.root}/{self.count:04d}"
        self.count += 1
        return path

    def remove(self) -> None:
        if self.root is None:
            return
        try:
            fs, path = layout.filesystem(self.root)
            layout.remove(fs, path)
        except (OSError, pa.ArrowException):
            pass        # a filesystem pyarrow cannot reach: Spark's own checkpoint clean-up applies


def rows_by(batches, column: str):
    """In a ``mapInArrow`` task: its rows grouped by the integer ``column``, as
    ``(value, table of its rows)`` in increasing order of the value (nothing for no rows)."""
    batches = list(batches)
    if not batches:
        return
    table = pa.Table.from_batches(batches)
    if table.num_rows == 0:
        return
    key = table.column(column).to_numpy()
    order = np.argsort(key, kind="stable")
    table = table.take(pa.array(order))
    key = key[order]
    bounds = np.flatnonzero(np.r_[True, key[1:] != key[:-1], True])
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        yield int(key[lo]), table.slice(lo, hi - lo)


def over_files(spark, paths: list, task, schema: str):
    """A frame of the rows ``task(share)`` yields in each of one task per core (at most one per
    file), ``share`` its files among ``paths``, dealt round-robin: one stage, no list shuffled to the
    tasks and no Spark reader between the files and the numpy pass that uses them."""
    tasks = max(1, min(len(paths), spark.sparkContext.defaultParallelism))
    return spark.range(0, tasks, 1, tasks).mapInArrow(
        forgets_zip_importers(functools.partial(_share_of_files, task, list(paths), tasks)), schema)


def _share_of_files(task, paths: list, tasks: int, batches):
    for batch in batches:
        for t in batch.column(0).to_pylist():
            yield from task(paths[t::tasks])


def task_columns(batches, names) -> tuple[int, list] | None:
    """In a ``mapInArrow`` task: its Spark partition's index and the columns ``names`` of its rows as
    numpy arrays; None if it got no rows. The files a task writes are named by that index, not by
    ``spark_partition_id()``, which a local relation's projection gives 0."""
    from pyspark import TaskContext

    batches = list(batches)
    table = pa.Table.from_batches(batches) if batches else None
    if table is None or table.num_rows == 0:
        return None
    return TaskContext.get().partitionId(), [table.column(name).to_numpy() for name in names]


def put_exchange(fs, path: str, table: pa.Table, destination: np.ndarray, k: int) -> None:
    """In a task: ``table`` sent to ``k`` tasks of a later job as one Arrow IPC file whose batch d
    holds the rows with ``destination == d``, in their order (an empty batch for none), written
    under a temporary name and moved in place (a retried task leaves no torn file). Each task d of
    the later job reads its batch from every such file (:func:`take_exchange`): a shuffle whose
    rows stay Arrow columns, for the steps where Spark's row shuffle and sort cost several times
    the numpy pass that uses them."""
    order = np.argsort(destination, kind="stable")
    bounds = np.searchsorted(destination[order], np.arange(k + 1))
    table = table.take(pa.array(order))
    whole = pa.RecordBatch.from_arrays([column.combine_chunks() for column in table.columns], schema=table.schema)
    directory, _, base = path.rpartition("/")
    fs.create_dir(directory, recursive=True)
    staging = f"{directory}/.{base}.{uuid.uuid4().hex[:12]}.tmp"
    with fs.open_output_stream(staging) as stream, pa.ipc.new_file(stream, table.schema) as writer:
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            writer.write_batch(whole.slice(lo, hi - lo))
    fs.move(staging, path)


def take_exchange(fs, paths: list[str], d: int, schema: pa.Schema | None = None) -> pa.Table:
    """In task d: its batches of the exchange files ``paths`` (:func:`put_exchange`), in the files' order
    (``schema``: the table's where no file was written)."""
    batches = []
    for path in paths:
        with fs.open_input_file(path) as file:
            batches.append(pa.ipc.open_file(file).get_batch(d))
    return pa.Table.from_batches(batches, None if batches else schema)


def id_buckets(ids: pa.Array, k: int) -> np.ndarray:
    """For each vertex id (integer or text), its bucket in ``0..k-1``: the same id, wherever it is
    met, lands in the same bucket; consecutive integers spread over all of them."""
    if pa.types.is_integer(ids.type):
        with np.errstate(over="ignore"):
            hashed = ids.to_numpy(zero_copy_only=False).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    else:
        import pandas as pd

        hashed = pd.util.hash_array(ids.to_numpy(zero_copy_only=False))
    return ((hashed >> np.uint64(32)) % np.uint64(k)).astype(np.int64)


def shuffled(frame):
    """``frame`` for a join that must shuffle both sides, never broadcast one: Spark judges a
    Parquet file by its compressed size, and an ingest's per-edge or per-vertex file (sorted,
    dense ids) compresses to under its broadcast threshold while the rows, built into one hash
    table through the driver, grow with the graph (a 5.6M-edge read, 4 MB on disk, did not fit
    a 1 GiB driver)."""
    return frame.hint("merge")

