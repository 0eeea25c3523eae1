"""A stream of updates on a stored graph: exactly-once application, live results, snapshots, rescaling.

``s = g.stream(workers=N)`` loads the graph's latest state (its last instance, else
the template) into a :mod:`hatrick.partitioned` live graph of N workers owning
buckets (the embedded default is N = 1 of the same code); workers in Spark tasks each load it
from GoFS on their executor and keep their buckets (:mod:`hatrick.loading`). Every batch (``s.push(...)`` or a
Structured Streaming micro-batch, see :mod:`hatrick.sources`) goes through:

1. row checks (:func:`hatrick.updates.validate`);
2. de-duplication (:mod:`hatrick.marks`): per producer, a high-water mark of the
   largest seq applied; an update at or below it, or repeated within the batch,
   is a replay and is skipped (producers number their updates in the order they
   send them); one that arrives late for a seq its producer skipped, or reuses
   a seq for a different update, is refused and listed in ``rejected``;
3. application, staged on every worker (copy-on-write; nothing changes on failure);
4. with a checkpoint directory (:mod:`hatrick.checkpoint`: data files, never
   pickles, in a directory only this user can write), the batch, the new marks
   and what the buffer then holds are logged to one
   file (written while step 3 runs, fsynced, moved into place atomically; every
   ``full_checkpoint_every`` batches the workers write their states in the
   background and the driver commits the manifest naming them), and only then do the workers show the new state. So a crash at any
   point, followed by a restart from the checkpoint and a replay of the
   producers' logs (or Spark's own replay of the uncommitted micro-batch),
   applies every update exactly once;
5. the elastic buffer records the batch by bucket; callbacks and live queries
   run; a snapshot is written when the buffer's policy says so.
The checkpoint also keeps the live CGQL queries subscribed to the stream as they
stand before each batch (topic seqs, pattern states; Reach only so far): a
restart registers them again (``s.queries``) and evaluates the restored batch, so
its events are published once, with the seqs a faultless run gives them.
Buckets are owned by workers through a consistent-hash ring or the
state-aware planner (``s.rescale``): at a batch boundary the moved buckets' state
travels from its old worker to its new one. Workers run in Spark tasks
(:mod:`hatrick.executors`: the default where the master is a cluster, or
``executors=True``) or in this process (the default on ``local[*]``): the same
:class:`hatrick.partitioned.Worker` answering the same requests. See
:mod:`hatrick.partitioned` for what is still gathered on the driver.
"""
from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import tempfile
import threading
import time as _time
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from gofs.errors import InputError
from gofs.instance_parts import append_parts
from gofs.store import as_store
from hatrick.buffer import ElasticBuffer, SnapshotPolicy
from hatrick.buckets import HASH, Buckets
from hatrick.checkpoint import Checkpoint
from hatrick.executors import WorkerFailed, WorkerLost, WorkerTasks, check_slots
from hatrick.live import GraphView
from hatrick.loading import load_graph_state
from hatrick.marks import ProducerMarks
from hatrick.partitioned import PartitionedGraph, Worker
from hatrick.planner import RescalePolicy, plan_migration, ring_plan
from hatrick.ring import HashRing
from hatrick.snapshot import SnapshotReport
from hatrick.updates import UpdateError, empty_rejected, validate
from sparkshim.checkpoints import driver_scratch


def _completed(method):
    """``method``, run once the batch in flight is complete (see :meth:`Stream.push`): whatever
    reads or changes the stream sees every pushed batch applied."""
    @functools.wraps(method)
    def run(self, *args, **kwargs):
        with self._lock:
            self._complete()
            return method(self, *args, **kwargs)
    return run


class BatchReport:
    """What one pushed batch did: its number, updates received and duplicates (known when the push
    returns), and, once the workers applied it, updates applied, the rejected ones, seconds from
    the push to its completion and the snapshot (instance id) it completed, if any. A pipelined
    push (see :meth:`Stream.push`) returns before its batch is applied: reading ``applied``,
    ``rejected``, ``seconds`` or ``snapshot`` then waits for it."""

    def __init__(self, batch: int, received: int, duplicates: int, applied: int | None = None,
                 rejected: pd.DataFrame | None = None, seconds: float | None = None,
                 snapshot: int | None = None, complete=None):
        self.batch, self.received, self.duplicates = batch, received, duplicates
        self._outcome = (applied, rejected, seconds, snapshot)
        self._complete = complete           # completes the batch, where it is still in flight
        self._failure: BaseException | None = None

    def _done(self, applied: int, rejected: pd.DataFrame, seconds: float, snapshot: int | None) -> None:
        self._outcome, self._complete = (applied, rejected, seconds, snapshot), None

    def _failed(self, error: BaseException) -> None:
        self._failure, self._complete = error, None

    def _wait(self) -> tuple:
        if self._complete is not None:
            self._complete()
        if self._failure is not None:
            raise RuntimeError(f"hatrick: batch {self.batch} was not applied: {self._failure!r}") from self._failure
        return self._outcome

    applied = property(lambda self: self._wait()[0])
    rejected = property(lambda self: self._wait()[1])
    seconds = property(lambda self: self._wait()[2])
    snapshot = property(lambda self: self._wait()[3])

    def __repr__(self) -> str:
        if self._complete is not None:
            return f"BatchReport(batch={self.batch}, received={self.received}, in flight)"
        return (f"BatchReport(batch={self.batch}, received={self.received}, duplicates={self.duplicates}, "
                f"applied={self.applied}, rejected={len(self.rejected)}, seconds={self.seconds:.3f}, "
                f"snapshot={self.snapshot})")


@dataclass
class _InFlight:
    """A batch sent to the workers and not yet completed (:meth:`Stream._complete`): what its
    completion needs."""

    batch: object                   # the de-duplicated UpdateBatch
    routed: object                  # its hatrick.partitioned.Routed, with the workers' pending answers
    marks: ProducerMarks            # the marks once it is applied
    bad_rows: pd.DataFrame          # rows refused on the driver (malformed, out of order)
    counts: np.ndarray              # its updates per bucket (hatrick.buffer.ElasticBuffer.count)
    buffered: dict
    queries: list
    pending: object                 # its checkpoint log write
    clock: float
    report: BatchReport


@dataclass
class RescaleReport:
    """One reconfiguration: who owns what, what moved and what it cost."""

    workers_before: int
    workers_after: int
    planner: str
    moved_buckets: int
    moved_fraction: float           # of the live state (edges + vertices), by the plan used
    ring_moved_fraction: float      # what the consistent-hash ring alone would have moved
    moved_bytes: int                # bytes actually sent worker to worker
    pause_seconds: float
    max_load_ratio: float           # busiest worker's load / mean load after the move (by the plan)
    feasible: bool
    worker_state: list | None = None    # per worker after the move: live edge copies + owned vertices


class Stream:
    """Updates to a stored graph, applied exactly once, with live results and snapshots.

    Parameters
    ----------
    graph : gofs.store.GraphStore (``goffish.graph.Graph`` is one)
    checkpoint : directory for the exactly-once checkpoint (restarting with the same one resumes)
    num_buckets : buckets keys are hashed to (the unit of migration)
    buckets : ``"hash"`` (each id's stable hash) or ``"partitions"``: each template vertex in a
        bucket of its GoFS partition's group, so that workers owning whole groups own whole
        partitions and their boundary is the partitions' cut (on a graph with locality, a small
        share of V); costs the driver O(V) memory (2 bytes per vertex for integer ids 0..V-1,
        up to 40 for others: :mod:`hatrick.buckets`), so it is opt-in. A restart from the checkpoint needs the same
        ``buckets``
    workers : workers owning buckets, each with its part of the live graph (:mod:`hatrick.partitioned`)
    snapshot_policy : :class:`hatrick.buffer.SnapshotPolicy` to snapshot automatically (None: only
        when ``snapshot()`` is called or the buffer's capacity would overflow)
    aging_ttl : if set, edges not added or set for this much event time are removed after each
        batch by the ``"aging"`` producer (see :func:`hatrick.sources.aging_updates`)
    full_checkpoint_every : batches between full state checkpoints (in between, each batch is logged)
    autoscale : a :class:`hatrick.planner.RescalePolicy`; after each batch it sees the workers'
        update rates and may add or remove one worker (through the state-aware planner)
    rate_half_life : seconds over which measured update rates (per bucket and in total) halve
    executors : run the workers as long-running Spark tasks (:mod:`hatrick.executors`; N workers
        hold N task slots, N + 1 with a Structured Streaming source). None: yes unless the Spark
        master is ``local``/``local[N]`` (or there is no active SparkSession)
    pipelined : with workers in Spark tasks, ``push`` returns once its batch is sent, and the
        driver checks and routes the next batch while the workers apply it (see :meth:`push`);
        None: yes where the workers are in Spark tasks (in this process there is nothing to overlap)

    Example
    -------
    >>> s = g.stream(checkpoint="/tmp/ck")
    >>> s.push([{"op": "add_edge", "src": 1, "dst": 2, "producer": "p", "seq": 1, "time": 0.0}])
    >>> s.connected_components()
    >>> s.snapshot()
    """

    def __init__(self, graph, checkpoint: str | None = None, num_buckets: int = 64, workers: int = 1,
                 snapshot_policy: SnapshotPolicy | None = None, aging_ttl: float | None = None,
                 vnodes: int = 128, tau: float = 0.1, full_checkpoint_every: int = 20,
                 autoscale: RescalePolicy | None = None, rate_half_life: float = 2.0,
                 executors: bool | None = None, pipelined: bool | None = None, buckets: str = HASH):
        self.graph = as_store(graph)
        self.id_type = self.graph.id_kind
        self.buckets = Buckets(buckets, self.graph).prepare()      # its table read at the start, not in a push
        self._lock = threading.RLock()
        self._checkpoint = Checkpoint(checkpoint, full_checkpoint_every, self.buckets) if checkpoint else None
        self.marks = ProducerMarks()
        self._inflight: _InFlight | None = None     # the batch the workers apply while the driver returns
        self.snapshots: list[SnapshotReport] = []
        self._covered = 0              # the batch the last snapshot holds
        self.num_buckets = num_buckets
        self.tau = tau
        self.ring = HashRing(range(workers), vnodes)
        self.owner = self._first_owners(workers)
        self.buffer = ElasticBuffer(num_buckets, snapshot_policy, rate_half_life)
        restored = self._checkpoint.load() if self._checkpoint else None
        self._tasks = None
        self.recoveries = 0             # times lost worker tasks were replaced (from the checkpoint)
        if _on_executors(executors, graph):
            check_slots(self.graph.spark, workers, fed_by_query=False)
            self._tasks = WorkerTasks(self.graph.spark)
        try:
            if restored:
                self.live = self._adopt(restored["graph"])
                self.marks = ProducerMarks(restored["hwm"], restored["gaps"])
                self.snapshots, self._covered = restored["snapshots"], restored["covered"]
                if restored["pending"]:
                    self._finish_interrupted_snapshot(restored["pending"])
                if self.live.batch > self._covered:
                    self.buffer.restore(restored["buffer"])
                if self._tasks:
                    self.live.place_on(self._tasks)
            else:
                self.live = self._load(workers)
        except BaseException:
            if self._tasks:
                self._tasks.close()
            raise
        self.auto_snapshot = snapshot_policy is not None
        self.pipelined = self._tasks is not None if pipelined is None else bool(pipelined)
        self.aging_ttl = aging_ttl
        self.autoscale = autoscale
        self._rejected = empty_rejected()
        self.rescales: list[RescaleReport] = []
        self._callbacks: list = []
        self._live_queries: dict = {}
        self._live_results: dict = {}
        self._live_due = False          # the live results lag the last batch (see _after_batch)
        self._live_asked: dict = {}     # {name: join} of live results asked of the workers, not yet joined
        self._query = None
        self._query_scratch = None      # the source query's own checkpoint directory, when the stream keeps none
        self.queries: dict = {}         # {topic name: Topic} of the CGQL queries restored from the checkpoint
        if restored:
            self._restore_queries(restored["queries"])

    def _query_records(self) -> list:
        """The live CGQL queries subscribed to this stream, as the checkpoint keeps them (taken
        before a batch is applied: the pattern states that decide what that batch emits)."""
        owners = (getattr(callback, "__self__", None) for callback in self._callbacks)
        records = (owner.checkpoint_record() for owner in owners if hasattr(owner, "checkpoint_record"))
        return [record for record in records if record is not None]

    def _restore_queries(self, records: list) -> None:
        """Register the checkpoint's CGQL queries again and evaluate the restored batch on them: it is
        the batch their records were taken before, whose events a crash may have kept from being
        published (a subscriber resuming from its last seq gets them once, with the same seqs)."""
        if not records:
            return
        from hatrick.cgql.engine import restore_query

        view = self.live.view()
        for record in records:
            self.queries.update(restore_query(record, self, view).topics)

    def _load(self, workers: int) -> PartitionedGraph:
        """The live graph loaded from the store: every worker loads the whole graph (in Spark
        tasks each on its executor, so the driver holds none of it; in this process one load
        they share), the first split (:meth:`_first_owners`) is evened out by live edges (moves
        are free before any batch), then each worker keeps its part."""
        if self._tasks:
            loaded = self._tasks.load(self.graph, range(workers), self.owner, self.buckets)
        else:
            state = load_graph_state(self.graph)
            loaded = [Worker(i, state, self.owner, self.buckets) for i in range(workers)]
        if workers > 1:
            held = loaded[0].request("held_edges").result()
            self.owner = plan_migration(held + 1e-9, held, self.owner, self.ring.workers, 0.02,
                                        group=self._groups()).owner
        return PartitionedGraph.loaded(loaded, self.owner, self.buckets)

    def _first_owners(self, workers: int) -> np.ndarray:
        """The owner of each bucket before the load evens them out: the ring's, or with buckets
        aligned to partitions each partition's group whole on one worker (groups dealt out in order)."""
        if self.buckets.kind == HASH:
            return self.ring.owners(self.num_buckets)
        return self.buckets.dealt(self.num_buckets, workers)

    def _groups(self) -> np.ndarray | None:
        """The partition group of each bucket, for the planner to keep together (None: hashed buckets)."""
        return None if self.buckets.kind == HASH else self.buckets.groups(self.num_buckets)

    def _adopt(self, live: PartitionedGraph) -> PartitionedGraph:
        """A restored live graph, its buckets moved to this stream's owners (kept if it has as many
        workers and buckets: its owners then come from the plans made before the restart)."""
        if len(live.owner) == self.num_buckets and len(live.workers) == len(self.ring.workers):
            self.owner = live.owner
        elif len(live.owner) == self.num_buckets or len(live.workers) == 1:
            if len(live.workers) == 1:
                live.workers[0].owner = np.zeros(self.num_buckets, np.int64)
            live.rescale(self.owner)
        else:
            live = PartitionedGraph(live.gather(), self.owner, self.buckets)
        return live

    @property
    @_completed
    def state(self):
        """The whole live graph as one :class:`hatrick.live.State`: with one worker its state,
        with several a gather onto the driver (O(graph); for inspection and tests)."""
        return self.live.gather()

    @property
    def workers(self) -> int:
        return len(self.live.workers)

    # ingest ------------------------------------------------------------------------------------------
    def push(self, updates, errors: str = "raise") -> BatchReport:
        """Apply a batch of updates exactly once.

        Parameters
        ----------
        updates : pandas DataFrame, Spark DataFrame or list of dicts
            Columns as in :mod:`hatrick.updates` (``producer``, ``seq``, ``op``, ids, values);
            an update whose (producer, seq) was already applied is counted as a duplicate.
            ``op`` and ``producer`` may be categorical (``pandas.Categorical``, as ``to_pandas()``
            makes Arrow dictionary columns): their codes are checked, not a string per row.
        errors : "raise" or "report"
            ``"raise"`` refuses a batch with a malformed row, ``"report"`` skips the row.

        Returns
        -------
        BatchReport
            Counts (received, duplicates, applied), the rejected rows with their reasons,
            seconds, and the snapshot (instance id) the batch completed, if any. Updates that
            conflict with the graph (no such edge, wrong attribute type) are always skipped
            whole and listed in ``rejected`` (and ``s.rejected``).

        Pipelined (the default with workers in Spark tasks, unless ``on_batch`` callbacks such as
        CGQL's live queries, whose events a caller expects once push returns, are registered or
        ``aging_ttl`` is set; Structured Streaming micro-batches never are): the push returns once
        its batch is checked, de-duplicated and sent to the workers, so the driver checks and routes
        the next batch while they apply it. The batch completes (applied, made durable in the
        checkpoint, its live results computed, its rejections listed and warned about) when the next
        push has routed its batch, when the report's ``applied``/``rejected``/``seconds``/``snapshot``
        are read, at :meth:`flush`, or before anything reads or changes the stream (queries,
        ``hwm``, ``rejected``, snapshots, rescaling, ``close``). One batch is in flight at most,
        and the next is sent only once it is complete, so batches apply in push order and every
        query, checkpoint and rescale falls on a batch boundary. An error or lost worker met while
        completing a batch is raised by the call that completes it (a push then sends nothing);
        reading that batch's report raises it too. Updates of a pushed batch count as applied
        for de-duplication from the push on (a replay in the next push is a duplicate).

        Raises
        ------
        UpdateError
            ``errors="raise"`` and a row is malformed: names its producer and seq; nothing applied.

        Example
        -------
        >>> s = g.stream()                                                   # doctest: +SKIP
        >>> s.push([{"op": "add_edge", "src": 1, "dst": 2, "producer": "p", "seq": 1, "time": 60.0}]).applied
        1

        Cost: O(batch) plus the incremental components' merges (union-find), not O(graph).
        """
        if errors not in ("raise", "report"):
            raise InputError(f"errors must be 'raise' or 'report', got {errors!r}")
        return self._ingest(updates, text_values=False, errors=errors)

    def _ingest(self, updates, text_values: bool, errors: str, locate=None) -> BatchReport:
        clock = _time.perf_counter()
        batch, bad_rows = validate(updates, self.id_type, text_values, locate)
        if len(bad_rows) and errors == "raise":
            first = bad_rows.iloc[0]
            raise UpdateError(f"{len(bad_rows)} malformed update(s), nothing applied; first: producer "
                              f"{first.producer!r} seq {first.seq}: {first.reason}", bad_rows)
        with self._lock:
            received = len(batch) + len(bad_rows)
            inflight = self._inflight           # admitted against the marks it leaves, routed meanwhile
            batch, refused, marks = (inflight.marks if inflight else self.marks).admit(batch)
            if len(refused):
                bad_rows = pd.concat([bad_rows, refused], ignore_index=True) if len(bad_rows) else refused
            buckets = self.buckets.of(batch.a, self.num_buckets) if len(batch) else None     # once: buffer, routing
            routed = self.live.route(batch, buckets) if len(batch) else None
            self._complete(pipelined=True)
            if not len(batch):
                self._join_live()
                if len(bad_rows):
                    self._rejected = pd.concat([self._rejected, bad_rows], ignore_index=True)
                return BatchReport(self.live.batch, received, received - len(bad_rows), 0, bad_rows,
                                   _time.perf_counter() - clock)
            if self.buffer.would_overflow(len(batch)):
                self._snapshot_locked()
            counts = self.buffer.count(buckets)
            buffered = self.buffer.summary_after(counts, batch)
            queries = self._query_records() if self._checkpoint else []
            report = BatchReport(self.live.batch + 1, received, received - len(bad_rows) - len(batch),
                                 complete=self.flush)
            self._inflight = self._send(_InFlight(batch, routed, marks, bad_rows, counts, buffered, queries,
                                                  None, clock, report))
            with contextlib.suppress(WorkerLost):   # the batch in flight meets the lost worker and recovers
                self._join_live()                   # the batch before's live results, while the workers stage
            if not self.pipelined or text_values or self.aging_ttl is not None or self._callbacks:
                self._complete()        # a micro-batch is done when foreachBatch returns; aging reads the
                                        # graph; callbacks (CGQL's live queries) publish when push returns
        return report

    def _send(self, inflight: _InFlight) -> _InFlight:
        """Log ``inflight``'s batch (with a checkpoint) and send it to the workers to stage; a lost
        worker is recovered from the checkpoint first, once."""
        for attempt in (0, 1):
            inflight.pending = self._checkpoint.begin(self.live.batch + 1, inflight.batch, inflight.marks.hwm,
                                                      inflight.buffered, inflight.marks.gaps,
                                                      inflight.queries) if self._checkpoint else None
            try:
                inflight.routed = self.live.send(inflight.batch, inflight.routed)
                return inflight
            except BaseException as error:
                if self._checkpoint:
                    self._checkpoint.abandon(inflight.pending)
                if attempt or not isinstance(error, WorkerLost):
                    raise
                self._recover(error)

    def flush(self) -> None:
        """Complete the batch in flight, if any (see :meth:`push`): once this returns, every pushed
        batch is applied (and, with a checkpoint, durable), its rejections in ``rejected``."""
        with self._lock:
            self._complete()

    def _complete(self, pipelined: bool = False) -> None:
        """Complete the batch in flight: the live results of the batch before (while the workers
        stage this one), its outcome, its log made durable, the commit on every worker (which
        starts the boundary exchange for live results), then the buffer, callbacks, snapshots and
        scaling that follow a batch. A worker lost before the commit: the stream recovers from
        the checkpoint and applies the batch again (once). Then the workers' answers to the
        commit are read (:meth:`_committed`), unless ``pipelined``: a push that sends the next
        batch reads them with that batch's outcome, so the next stage goes out without a round trip."""
        inflight, self._inflight = self._inflight, None
        if inflight is not None:
            try:
                self._apply(inflight)
            except BaseException as error:
                inflight.report._failed(error)
                raise
        if not pipelined:
            try:
                self._committed()
                self._join_live()
            except WorkerLost as error:         # the batch is in the checkpoint's log: recovery applies it
                self._recover(error)

    def _committed(self) -> None:
        """Read the workers' answers to the last commit, if not read yet, and hand their reports of
        state files written to the checkpoint. A worker lost meanwhile raises WorkerLost (the
        batch is in the checkpoint's log, so recovering applies it); a worker's failure to show
        it, WorkerFailed naming that batch."""
        try:
            written = self.live.committed()
        except WorkerFailed as error:
            raise WorkerFailed(f"hatrick: batch {self.live.batch} is logged, but a worker failed to show it: "
                               f"{error}") from error
        if self._checkpoint:
            self._checkpoint.states_written(written)

    def _apply(self, inflight: _InFlight) -> None:
        """:meth:`_complete` of ``inflight``."""
        for attempt in (0, 1):
            try:
                self._committed()               # the batch before's commit: answered before this one's stage
                self._ask_live()                # answered before this batch's commit; joined once the next is sent
                applied, refused = self.live.outcome(inflight.routed)
                break
            except BaseException as error:
                if self._checkpoint:
                    self._checkpoint.abandon(inflight.pending)
                if attempt or not isinstance(error, WorkerLost):
                    raise
                self._recover(error)
                inflight.routed = None
                self._send(inflight)
        marks, bad_rows, batch = inflight.marks, inflight.bad_rows, inflight.batch
        if self._checkpoint:
            try:
                self._checkpoint.commit(inflight.pending, self.live, marks.hwm, inflight.buffered, marks.gaps,
                                        owner=self.live.owner, queries=inflight.queries)
            except BaseException:
                self.live.abandon()
                raise
        try:
            self.live.commit([sel for pair in self._live_queries.values() for sel in pair]
                             if self._live_queries else None)
        except WorkerLost as error:             # the batch is in the checkpoint's log: recovery applies it
            self._recover(error)
        self.marks = marks
        rejected = pd.concat([bad_rows, refused], ignore_index=True) if len(bad_rows) else refused
        if len(rejected):
            self._rejected = pd.concat([self._rejected, rejected], ignore_index=True)
            warnings.warn(f"{len(rejected)} update(s) rejected; first: producer {rejected.producer.iloc[0]!r} "
                          f"seq {rejected.seq.iloc[0]}: {rejected.reason.iloc[0]} (see .rejected)", stacklevel=4)
        self.buffer.add(inflight.counts, batch)
        self._after_batch()
        snap = self._snapshot_locked() if self.auto_snapshot and self.buffer.due() else None
        inflight.report._done(applied, rejected, _time.perf_counter() - inflight.clock, snap)
        if self.autoscale is not None:
            step = self.autoscale.observe(self.worker_loads())
            if step:
                self.rescale(len(self.ring.workers) + step)
        if self.aging_ttl is not None and np.isfinite(self.now()):
            from hatrick.sources import aging_updates

            now = self.now()
            aged = aging_updates(*self.live.stale_edges(self.aging_ttl, now), now, self.hwm.get("aging", 0) + 1)
            if len(aged):
                self._ingest(aged, text_values=False, errors="report")

    def _recover(self, error: WorkerLost) -> None:
        """A worker's Spark task was lost (its executor died): end every worker task, rebuild the
        live graph from the checkpoint (the last full state plus the batches logged since, which
        hold every committed batch) and start the workers again; without a checkpoint the live
        state is gone, so ``error`` is raised."""
        if self._checkpoint is None or self._tasks is None:
            raise WorkerLost(f"{error}; the stream has no checkpoint, so its live state is lost") from error
        self.live.abort()
        if self._live_asked:                    # asked of the lost workers: asked again of the new ones
            self._live_asked, self._live_due = {}, True
        self._checkpoint.drop_awaited()
        self._checkpoint.wait()
        restored = self._checkpoint.load()
        self.live = self._adopt(restored["graph"]) if restored else \
            PartitionedGraph(load_graph_state(self.graph), self.owner, self.buckets)
        self.live.place_on(self._tasks)
        self.recoveries += 1

    @property
    @_completed
    def rejected(self) -> pd.DataFrame:
        """Every update rejected so far (``producer``, ``seq``, ``op``, ``reason``)."""
        return self._rejected

    @property
    @_completed
    def hwm(self) -> dict:
        """Per producer, the largest seq applied."""
        return self.marks.hwm

    def _after_batch(self) -> None:
        """Live queries and callbacks after a batch. With workers in Spark tasks, the live queries'
        results are computed when first read, or while the workers apply the next batch (their
        boundary exchange and merge then overlap the driver's checks and routing of that batch,
        and the driver's join of the selections overlaps the workers' next batch); every batch's
        result is still computed from that batch's state."""
        if self._live_queries:
            self._live_due = True
            if self._tasks is None:
                self._settle()
        if self._callbacks:
            view = self.live.view()
            for callback in list(self._callbacks):
                callback(view)

    # callbacks and live results ----------------------------------------------------------------------
    @property
    @_completed
    def live_results(self) -> dict:
        """``{name: pairs}`` of every live query (see :meth:`reachable`) as of the last applied batch."""
        with self._lock:
            self._settle()
            return self._live_results

    def _settle(self) -> None:
        """Compute the live queries' results of the last applied batch, if they are due."""
        self._ask_live()
        self._join_live()

    def _ask_live(self) -> None:
        """Send the workers the requests of the live queries' results of the last applied batch, if
        they are due (answered on that batch's state: before the next commit); :meth:`_join_live`
        reads the answers and joins them."""
        if self._live_due:
            self._join_live()               # results asked before are read first, in request order
            self._live_asked = {name: self.live.ask_reachable(sources, sinks)
                                for name, (sources, sinks) in self._live_queries.items()}
            self._live_due = False

    def _join_live(self) -> None:
        """The live results asked by :meth:`_ask_live`, if any, read and joined."""
        asked, self._live_asked = self._live_asked, {}
        try:
            self._live_results.update({name: pairs() for name, pairs in asked.items()})
        except WorkerLost:
            self._live_due = True           # asked again of the workers that replace the lost one
            raise

    @_completed
    def now(self) -> float:
        """The stream's current event time: the latest applied update's ``time`` (before any,
        the end of the graph's last instance). CGQL splits past and live frames here."""
        return float(self.live.time)

    @_completed
    def on_batch(self, callback) -> None:
        """Call ``callback(view)`` after every applied batch with a :class:`hatrick.live.GraphView`."""
        with self._lock:
            self._callbacks.append(callback)

    @_completed
    def remove_callback(self, callback) -> None:
        with self._lock:
            self._callbacks.remove(callback)

    @_completed
    def forget_patterns(self, keys: list) -> None:
        """Free what the workers keep for live CGQL sub-queries ``keys`` (a cancelled query's;
        a worker already lost or closed took its memory with it)."""
        with self._lock, contextlib.suppress(WorkerLost):
            self.live.forget_patterns(keys)

    @_completed
    def pattern_keys(self) -> list:
        """Per worker, the live CGQL sub-queries whose memory it keeps."""
        with self._lock:
            return self.live.pattern_keys()

    @_completed
    def view(self) -> GraphView:
        return self.live.view()

    @_completed
    def vertices(self) -> pd.DataFrame:
        return self.live.vertices()

    @_completed
    def edges(self) -> pd.DataFrame:
        return self.live.edges()

    @property
    @_completed
    def num_vertices(self) -> int:
        return int(self.live.sizes()[:, 0].sum())

    @property
    @_completed
    def num_edges(self) -> int:
        return int(self.live.sizes()[:, 1].sum())

    @_completed
    def connected_components(self) -> pd.DataFrame:
        """Live (weakly) connected components: ``id``, ``component`` (the smallest member's id by
        arrival order), as of the last applied batch."""
        return self.live.components()

    @_completed
    def reachable(self, sources, sinks, live: str | None = None) -> pd.DataFrame:
        """Pairs (``source``, ``sink``) with a path from source to sink (directed graphs follow edge
        direction). ``sources``/``sinks``: a list of ids or a dict ``{attribute: value(s)}``.
        ``live="name"`` keeps the query: ``s.live_results[name]`` is refreshed after every batch."""
        with self._lock:
            self._settle()
            result = self.live.reachable(sources, sinks)
            if live is not None:
                self._live_queries[live] = (sources, sinks)
                self._live_results[live] = result
            return result

    # snapshots ---------------------------------------------------------------------------------------
    @_completed
    def snapshot(self) -> int | None:
        """Write the current graph as a new GoFS instance and empty the buffer; returns the instance id
        (details in ``s.snapshots[-1]``)."""
        with self._lock:
            return self._snapshot_locked(force=True)

    def _snapshot_locked(self, force: bool = False) -> int | None:
        if not self.buffer.volume and not force:
            return None
        clock = _time.perf_counter()
        graph_instances = self.graph.refresh().instances
        last_start = graph_instances[-1]["start"] if graph_instances else float("-inf")
        last_end = graph_instances[-1]["end"] if graph_instances else 0.0
        now = self.now()
        end = now if np.isfinite(now) else last_end
        start = self.buffer.min_time()
        start = end if start is None else start
        start = max(start, last_start)
        end = max(end, start)
        if self._checkpoint:
            self._checkpoint.snapshot_started(self.snapshots, self._covered, self.live.batch, start, end)
        counts = []

        def stage(target):
            answers = self.live.stage_instance(target)
            counts.extend(c for *_, c in answers)
            return [(types, added) for types, added, _ in answers]

        instance = append_parts(self.graph.path, start, end, stage, self.live.write_instance)
        report = SnapshotReport.of_parts(counts, start, end)
        report.instance = instance
        self.graph.refresh()
        report.buffered_updates = self.buffer.drain()["volume"]
        report.seconds = _time.perf_counter() - clock
        self.snapshots.append(report)
        self._covered = self.live.batch
        if self._checkpoint:
            self._checkpoint.snapshot_done(self.snapshots, self._covered)
        return report.instance

    def _finish_interrupted_snapshot(self, pending: dict) -> None:
        """A restart after a crash during a snapshot: if its instance was committed (an instance
        newer than the last recorded snapshot with the recorded start and end), adopt it rather
        than write the same updates again; either way, record where snapshots stand."""
        known = max((r.instance for r in self.snapshots if r.instance is not None), default=-1)
        for instance in self.graph.refresh().instances:
            if instance["id"] > known and (instance["start"], instance["end"]) == (pending["start"], pending["end"]):
                self.snapshots.append(SnapshotReport(instance=instance["id"], start=instance["start"],
                                                     end=instance["end"]))
                self._covered = int(pending["batch"])
                break
        self._checkpoint.snapshot_done(self.snapshots, self._covered)

    # elasticity ----------------------------------------------------------------------------------------
    @_completed
    def bucket_state(self) -> np.ndarray:
        """Live state per bucket: edge copies (by the bucket that owns the edge) plus alive vertices,
        summed from the workers (O(buckets) on the driver)."""
        return self.live.bucket_state()

    def rescale(self, workers: int, planner: str = "state", retries: int = 1) -> RescaleReport:
        """Change the number of workers; ``planner`` "state" (moves least state while every worker
        ends within ``tau`` of the mean in both recent load and live state) or "ring" (consistent
        hashing). Added workers are started first, while batches go
        on; then, between two batches, the moved buckets' live state goes from their old worker
        to their new one (``moved_bytes``: what was sent; ``pause_seconds``: the cut-over).
        A worker lost mid-move leaves buckets half moved: the stream recovers every worker from
        its checkpoint (the owners before the move, every committed batch) and moves again, up
        to ``retries`` times."""
        if workers < 1:
            raise InputError(f"workers must be >= 1, got {workers}")
        if planner not in ("state", "ring"):
            raise InputError(f"planner must be 'state' or 'ring', got {planner!r}")
        with self._lock:
            self._complete()                        # the cut-over is at a batch boundary
            self._settle()                          # the live results of the batch before the move
            if self._tasks is not None:
                check_slots(self.graph.spark, workers, fed_by_query=self._query is not None and self._query.isActive)
            live, current = self.live, len(self.ring.workers)
            blank = live.blank_state() if workers > current else None
        added = live.new_workers(range(current, workers), blank) if blank is not None else None   # outside the pause
        with self._lock:
            self._complete()
            if self.live is not live or len(self.ring.workers) != current:      # recovered or rescaled meanwhile
                for w in added or []:
                    w.close()
                return self.rescale(workers, planner, retries)
            clock = _time.perf_counter()
            before = len(self.ring.workers)
            ring = self.ring
            while len(ring.workers) < workers:
                ring = ring.with_worker(max(ring.workers) + 1)
            while len(ring.workers) > workers:
                ring = ring.without_worker(max(ring.workers))
            state = self.bucket_state()
            load = self.buffer.load + 1e-9
            by_ring = ring_plan(load, state, ring.owners(self.num_buckets), self.owner, ring.workers, self.tau)
            plan = by_ring if planner == "ring" else \
                plan_migration(load, state, self.owner, ring.workers, self.tau, state_tau=self.tau, group=self._groups())
            try:
                moved_bytes = self.live.rescale(plan.owner, added)
                pause = _time.perf_counter() - clock
                worker_state = self.live.sizes().sum(axis=1).tolist()   # also finds a worker lost as the move ended
            except (WorkerLost, WorkerFailed) as error:
                if not retries:
                    raise
                self._recover(error if isinstance(error, WorkerLost) else WorkerLost(str(error)))
                return self.rescale(workers, planner, retries - 1)
            self.ring, self.owner = ring, plan.owner
            if self._checkpoint:                    # a removed worker never reports its state file
                self._checkpoint.drop_awaited()
            report = RescaleReport(before, workers, planner, len(plan.moved), plan.moved_fraction,
                                   by_ring.moved_fraction, moved_bytes, pause,
                                   plan.max_load / (load.sum() / workers), plan.feasible, worker_state)
            self.rescales.append(report)
            return report

    @_completed
    def worker_loads(self) -> np.ndarray:
        """Recent updates/s routed to each worker (exponentially weighted)."""
        per_second = self.buffer.load * np.log(2) / self.buffer.half_life
        return np.bincount(self.owner, weights=per_second, minlength=max(self.ring.workers) + 1)[self.ring.workers]

    # Structured Streaming ------------------------------------------------------------------------------
    @_completed
    def start(self, source, format: str = "json", trigger: str = "processingTime=1 second",
              checkpoint_location: str | None = None, max_files_per_trigger: int | None = None):
        """Consume a Structured Streaming source: a directory of JSON-lines/Parquet update files
        (``format``), or a streaming DataFrame with the update columns (see :mod:`hatrick.sources`).
        ``trigger``: "availableNow", "once" or "processingTime=<interval>". Returns the query."""
        from hatrick.sources import start_query

        with self._lock:
            if self._query is not None and self._query.isActive:
                raise InputError("this stream already consumes a source; call stop() first")
            if self._tasks is not None:
                check_slots(self.graph.spark, self.workers, fed_by_query=True)
            self.stop()                     # a query that ended by itself: its scratch directory goes
            if checkpoint_location is None and self._checkpoint:
                checkpoint_location = os.path.join(self._checkpoint.directory, "spark")
            elif checkpoint_location is None:
                self._query_scratch = tempfile.mkdtemp(prefix="hatrick-", dir=driver_scratch(self.graph.spark.sparkContext))
                checkpoint_location = os.path.join(self._query_scratch, "spark")
            self._query = start_query(self, source, format, trigger, checkpoint_location, max_files_per_trigger)
            return self._query

    def _foreach_batch(self, frame, batch_id: int) -> None:
        from hatrick.sources import source_lines

        rows = frame.toPandas()
        files = rows.pop("_file").to_numpy() if "_file" in rows.columns else None
        lines = rows.pop("_line").to_numpy() if "_line" in rows.columns else None

        def locate(bad):
            return source_lines(files[bad], None if lines is None else lines[bad])

        self._ingest(rows, text_values=True, errors="report", locate=locate if files is not None else None)

    def stop(self) -> None:
        """Stop consuming the Structured Streaming source (already applied batches stay)."""
        if self._query is not None:
            self._query.stop()
            self._query = None
        if self._query_scratch is not None:
            shutil.rmtree(self._query_scratch, ignore_errors=True)
            self._query_scratch = None

    def close(self) -> None:
        """Stop consuming and end the workers' Spark tasks (their state goes with them; the
        checkpoint keeps what was committed, with the full state the workers were writing)."""
        with self._lock:
            try:
                with contextlib.suppress(WorkerLost):   # its batch stays in the checkpoint's log, if any
                    self._complete()
            finally:
                self._close_locked()

    def _close_locked(self) -> None:
        """:meth:`close`, once the batch in flight is complete (or failed)."""
        self.stop()
        if self._checkpoint:
            with contextlib.suppress(WorkerLost):
                self._checkpoint.states_written(self.live.written(wait=True))
            self._checkpoint.wait()
        if self._tasks is not None:
            with contextlib.suppress(WorkerLost):   # a lost worker's results stay as they were
                self._settle()
            self.live.close()
            self._tasks.close()
            self._tasks = None


def _on_executors(executors: bool | None, graph) -> bool:
    """Whether the workers run in Spark tasks: as asked, else where the master is a cluster."""
    if executors is not None:
        return bool(executors)
    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession()
    return spark is not None and re.fullmatch(r"local(\[.*\])?", spark.sparkContext.master) is None
