"""The resident transport: a whole run is one Spark barrier stage.

A Spark job costs ~0.2 s here while a superstep's compute takes milliseconds,
so a run does not start a job per superstep. Instead it starts one
gang-scheduled barrier stage of T tasks (an RDD job, see below):

1. the driver opens a listener with a fresh random key for the run; each task
   opens its own listener on its executor's address, registers it with the
   driver, and gets back the table of peers (one rendezvous per run);
2. every superstep each task runs its partitions (:class:`gopher.worker.TaskWorker`,
   topology from the process cache), sends each peer one frame of messages
   (numpy buffers out of band, :mod:`gopher.codec`) and its lane reports, and
   receives one frame from each peer. Where the program has no ``master``, the
   tasks go on by themselves: each applies :mod:`gopher.lanes`'s rule to all the
   reports and starts the next superstep, and tells the driver its summary
   (metrics, progress, checkpoints and faults stay the driver's); otherwise the
   driver sends each task every superstep's plan, the task answers with its
   summary before it takes in its peers' frames, and the driver works out the
   next plan while the messages arrive;
3. at the end each task writes its per-vertex results as one Parquet file
   (Arrow batches, no row-by-row Python) into the run's result directory, and
   the result DataFrame is a plain scan of those files, made when first asked
   for (:class:`LazyFrame`): no shuffle and no cache, and ``show()``/``take()``
   work on it (Spark refuses jobs over some of a barrier stage's partitions
   anywhere downstream of it without a shuffle).
   :class:`ResultFiles` removes the files when the result is unpersisted, or at
   the latest when the process exits.

The stage is an RDD job (``barrier().mapPartitions``), not a DataFrame query:
planning one costs seconds in a fresh JVM and the stage has no rows to plan.

Sockets are :mod:`gopher.channel`'s: a handshake proving the run's random key
both ways (with a deadline: a stray client is dropped, never waited on), a
frame-size limit, per-frame HMACs where the user's Spark authenticates its own
connections, and loopback-only listeners when the master is ``local``. Faults: a task that dies ends
its connection; the driver cancels the stage and starts it again, and the new
tasks resume from the last checkpoint every task confirmed (each task writes
its partitions' states and pending messages to the run directory every
``checkpointInterval`` supersteps or ``checkpointSeconds``).
"""
from __future__ import annotations

import atexit
import contextlib
import pickle
import queue
import shutil
import tempfile
import threading
import time
import traceback
import uuid
import weakref
from collections import defaultdict, deque
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import wait

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from gofs import files, layout
from gofs.errors import EngineError, GraphExistsError
from sparkshim.compat import forgets_zip_importers, spark_schema
from gopher import codec
from gopher import lanes as schedule
from gopher.channel import HANDSHAKE_SECONDS, Listener, Readiness, RunKey, connect, frames_authenticated
from gopher.worker import GopherProgramError, TaskWorker


class RendezvousTimeout(EngineError, RuntimeError):
    """Not every task of the run's barrier stage connected in time."""


# ------------------------------------------------------------------------------ framing

def send_frames(conn, frames: list) -> None:
    conn.send_bytes(len(frames[1:]).to_bytes(4, "little") + frames[0])
    for buffer in frames[1:]:
        conn.send_bytes(buffer)


def recv_frames(conn, limit: int) -> list:
    first = conn.recv_bytes(limit)
    count = int.from_bytes(first[:4], "little")
    return [memoryview(first)[4:], *(conn.recv_bytes(limit) for _ in range(count))]


# ------------------------------------------------------------------------------ checkpoints

def _checkpoint_path(run_dir: str, step: int, p: int) -> tuple:
    fs, root = layout.filesystem(run_dir)
    return fs, layout.join(root, f"ckpt-{step:06d}", f"part-{p:05d}.bin")


def write_checkpoint(run_dir: str, step: int, p: int, blob: bytes) -> None:
    fs, path = _checkpoint_path(run_dir, step, p)
    fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
    with fs.open_output_stream(path) as out:
        out.write(blob)


def read_checkpoint(run_dir: str, step: int, p: int) -> bytes:
    fs, path = _checkpoint_path(run_dir, step, p)
    with fs.open_input_stream(path) as handle:
        return handle.read()


# ------------------------------------------------------------------------------ the task side

LOOPBACK = "127.0.0.1"
#: how long a task going on by itself keeps its superstep summaries before it sends them to the driver
SUMMARY_SECONDS = 0.05


def task_function(spec, address, key: RunKey, launch: int, schema, run_dir, results: str, frame_limit: int,
                  local: bool, peer_timeout: float):
    """The function each barrier task runs: serve the run (its result rows go into a file under
    ``results``, and the driver hears of it over the task's connection); it yields nothing.
    ``local``: the master is local, so the task listens on the loopback address only."""

    def run(numbers):
        from pyspark import BarrierTaskContext

        for _ in numbers:
            pass
        context = BarrierTaskContext.get()
        me = context.partitionId()
        host = LOOPBACK if local else context.getTaskInfos()[me].address.rsplit(":", 1)[0]
        try:
            driver = connect(address, key)
        except OSError as exc:
            raise RuntimeError(f"gopher: task {me} cannot reach this run's coordinator at {address} ({exc}); "
                               "the run has ended (a cached result recomputed after it ended?)") from exc
        side = _TaskSide(spec, me, driver, schema, run_dir, results, frame_limit)
        try:
            side.connect(host, key, launch, context.attemptNumber(), peer_timeout)
            side.serve()
        except GopherProgramError as exc:
            side.report_error(str(exc))
            raise
        except (EOFError, ConnectionError):
            raise                            # a peer or the driver went away: the run's loss, not ours
        except Exception as exc:
            side.report_error(f"gopher: task {me} failed: {exc!r}\n{traceback.format_exc()}", program=False)
            raise
        finally:
            side.close()
        return iter(())

    return forgets_zip_importers(run)


class _TaskSide:
    """One barrier task: its worker, its connections to the driver and to its peers."""

    def __init__(self, spec, me: int, driver, schema, run_dir, results: str, frame_limit: int):
        self.spec, self.me, self.driver, self.schema = spec, me, driver, schema
        self.run_dir, self.results, self.limit = run_dir, results, frame_limit
        self.listener = None
        self.worker: TaskWorker | None = None
        self.outbound: dict = {}
        self.inbound: list = []
        self.sender = ThreadPoolExecutor(1)
        self.inline_bytes = 0
        self.readiness = Readiness()

    def connect(self, host: str, key: RunKey, launch: int, attempt: int, timeout: float) -> None:
        """Register with the driver, then connect to every peer and take one connection from each
        (stray clients of this task's port are dropped by the listener); the listener then closes."""
        arrived: queue.Queue = queue.Queue()
        self.listener = Listener(host, key, arrived.put)
        self.driver.send(("hello", launch, attempt, self.me, self.listener.address))
        clock = time.perf_counter()          # load the topology while the other tasks register
        self.worker = TaskWorker(self.spec, self.spec.partitions_of(self.me))
        self.worker.load_topology()
        loaded = time.perf_counter() - clock
        _, table, self.resume = self.driver.recv()
        peers = [j for j in table if j != self.me]
        self.outbound = {j: connect(table[j], key) for j in peers}
        # a superstep's frames that fit in half the kernel's buffer are sent inline: a peer may still be
        # reading the last superstep's frame, never an older one (a task sends a superstep's frames
        # only once it has every peer's frame of the last, which each peer sent after taking in all
        # frames of the one before), so such a send never waits for a reader
        self.inline_bytes = min((conn.send_buffer() // 2 for conn in self.outbound.values()), default=0)
        deadline = time.monotonic() + timeout
        while len(self.inbound) < len(peers):
            try:
                self.inbound.append(arrived.get(timeout=max(0.0, deadline - time.monotonic())))
            except queue.Empty:
                raise ConnectionError(f"gopher: task {self.me}: {len(peers) - len(self.inbound)} peer(s) did not "
                                      f"connect within {timeout:g} s") from None
        self.listener.close()
        while not arrived.empty():
            arrived.get_nowait().close()
        self.driver.send(("ready", loaded))

    def serve(self):
        """Answer the driver until it ends the run or its rows are written."""
        worker = self.worker
        if self.resume is not None:
            for p in worker.partitions:
                worker.import_partition(p, read_checkpoint(self.run_dir, self.resume, p))
        while True:
            command = self.driver.recv()
            if command[0] == "step":
                _, step, plan, checkpoint = command
                if checkpoint is not None:
                    for p in worker.partitions:
                        write_checkpoint(self.run_dir, checkpoint, p, worker.export_partition(p))
                outgoing, summary = worker.step(plan)
                clock = time.perf_counter()
                summary["bytes"], sending = self.send_out(worker, outgoing)
                summary["exchange_seconds"] = time.perf_counter() - clock
                summary["checkpointed"] = checkpoint
                self.driver.send(("summary", summary))
                self.take_in(worker, sending)
            elif command[0] == "ahead":
                self.go_ahead(*command[1:])
            elif command[0] == "merge":
                self.driver.send(("merged", worker.merge(command[1])))
            elif command[0] == "output":
                clock = time.perf_counter()
                fs, root = layout.filesystem(self.results)
                rows = pa.Table.from_batches(list(worker.output(command[1], self.schema)), self.schema)
                files.put_table(fs, layout.join(root, layout.part_file(self.me)), rows)
                self.driver.send(("written", time.perf_counter() - clock))
                return
            else:
                return

    def go_ahead(self, superstep: int, lanes: list, window: int, max_supersteps: int, checkpoint: int | None,
                 interval: int | None, seconds: float | None) -> None:
        """Run supersteps from ``superstep`` until every lane is done, without waiting for the driver:
        each frame to a peer carries this task's lane reports, and every task moves its copy of
        ``lanes`` on by :mod:`gopher.lanes`'s rule over all the tasks' reports, in task order, as
        the driver does with the summaries it still gets (for metrics, progress and faults).
        Checkpoints follow the driver's rule; the time since the last one is the longest any task
        saw, so all tasks agree on it. The summaries go to the driver in batches, every
        :data:`SUMMARY_SECONDS`, at once where one confirms a checkpoint, and at the end: the
        driver wakes up a few times a second instead of every superstep."""
        worker, program = self.worker, self.spec.program
        saved = told = time.perf_counter()
        plan = schedule.plan(lanes, window)
        batch: list = []
        while plan:
            clock = time.perf_counter()
            if checkpoint is not None:
                for p in worker.partitions:
                    write_checkpoint(self.run_dir, checkpoint, p, worker.export_partition(p))
                saved = time.perf_counter()
            outgoing, summary = worker.step(plan)
            mine = summary["lanes"]
            sent = time.perf_counter()
            summary["bytes"], sending = self.send_out(worker, outgoing, (self.me, mine, sent - saved))
            summary["exchange_seconds"] = time.perf_counter() - sent
            summary["checkpointed"] = checkpoint
            reports = self.take_in(worker, sending)
            reports.append((self.me, {lane: {**r, "partials": dict(r["partials"])} for lane, r in mine.items()},
                            sent - saved))       # the summary keeps its partials for the driver
            reports.sort(key=lambda report: report[0])
            schedule.finish(lanes, plan, [r[1] for r in reports], worker.specs, program, None, max_supersteps)
            superstep += 1
            plan = schedule.plan(lanes, window)
            due = schedule.checkpoint_due(superstep, interval, seconds, max(r[2] for r in reports))
            checkpoint = superstep if due else None
            summary["going"] = bool(plan)
            now = time.perf_counter()
            summary["seconds"] = now - clock
            batch.append(summary)
            if not plan or summary["checkpointed"] is not None or now - told >= SUMMARY_SECONDS:
                self.driver.send(("summaries", batch))
                batch, told = [], now

    def send_out(self, worker: TaskWorker, outgoing: dict, report=None) -> tuple:
        """Send every peer its partitions' messages (one frame each, maybe empty, with ``report``)
        and hand this task's own partitions theirs (they never leave it). Returns (bytes moved, the
        send still running on the sender thread or None). Driven by the driver, the task tells it
        its summary next and only then takes in its peers' frames (:meth:`take_in`): the driver
        decides on the next superstep while the messages are still arriving."""
        by_task: dict = defaultdict(dict)
        for dst, payload in outgoing.items():
            by_task[self.spec.task_of(dst)][dst] = payload
        frames = {j: codec.to_frames((report, by_task.get(j, {}))) for j in self.outbound}
        inline = all(codec.frames_size(f) <= self.inline_bytes for f in frames.values())
        sending = None if inline else self.sender.submit(self._send, frames)
        if inline:                           # a thread's hand-off would cost more than these sends
            self._send(frames)
        local = worker.deliver_own(by_task.get(self.me, {}))
        return sum(local if j == self.me else codec.frames_size(frames[j]) for j in by_task), sending

    def take_in(self, worker: TaskWorker, sending) -> list:
        """Take in one frame from every peer (the next superstep's messages), then wait for
        this task's own sends to end. Returns the reports the frames carried, in arrival order."""
        reports = []
        peers = self.inbound if len(self.inbound) == 1 else self.readiness.each(self.inbound)
        for conn in peers:                   # one peer: read it (no selector)
            report, messages = codec.from_frames(recv_frames(conn, self.limit))
            for p, payload in messages.items():
                worker.deliver(p, payload)
            reports.append(report)
        if sending is not None:
            sending.result()
        return reports

    def _send(self, frames: dict) -> None:
        for j, task_frames in frames.items():
            send_frames(self.outbound[j], task_frames)

    def report_error(self, message: str, program: bool = True) -> None:
        """Tell the driver why this task fails, so the run ends with that error instead of
        being retried as if the task had been lost."""
        try:
            self.driver.send(("error" if program else "failure", message))
        except OSError:
            pass

    def close(self) -> None:
        self.sender.shutdown(wait=False)
        for conn in [*self.outbound.values(), *self.inbound, self.driver]:
            conn.close()
        if self.listener is not None:
            self.listener.close()


# ------------------------------------------------------------------------------ the driver side

_UNRELEASED: list = []          # result directories of this process not yet released
_ENDING: set = set()            # stages of finished runs that Spark has not ended yet


@atexit.register
def await_ending_stages() -> None:
    """Wait (at most :data:`HANDSHAKE_SECONDS` each) for the stages of finished runs to end: before
    the process exits, and before a caller stops its SparkContext (stopped under them, Spark
    cancels them and logs it as errors, and their tasks never report their end)."""
    for job in list(_ENDING):
        job.finished.wait(HANDSHAKE_SECONDS)


def _release_all() -> None:
    while _UNRELEASED:
        _UNRELEASED[-1].unpersist()


class ResultFiles:
    """A run's result rows: one Parquet file per task under ``uri`` (as Spark names it).

    ``unpersist`` removes them (the DataFrame cannot be read afterwards); results never
    released are removed when the Python process exits, so no run leaves files behind."""

    def __init__(self, uri: str):
        self.uri = uri
        self.path = _as_pyarrow_path(uri)
        self.schema: pa.Schema | None = None     # the rows' schema, once written
        if not _UNRELEASED:
            atexit.register(_release_all)
        _UNRELEASED.append(self)

    def frame(self, spark, schema: pa.Schema) -> "LazyFrame":
        """The rows (written with ``schema``) as a DataFrame, a plain scan of the files, made on first use."""
        self.schema = schema
        return LazyFrame(lambda: spark.read.schema(spark_schema(schema)).parquet(self.uri))

    def read(self, columns: list[str]) -> pa.Table:
        """``columns`` of rows written in their final shape, read straight from the files by this
        process, in file order (as a scan of the directory lists them). File by file with
        ``ParquetFile``, not through ``pyarrow.dataset``: its import costs a caller's first read ~25
        CPU-ms more (and imports pandas where nothing has yet)."""
        fs, root = layout.filesystem(self.path)
        parts = sorted(info.path for info in layout.listing(fs, root)
                       if info.is_file and not info.base_name.startswith((".", "_")))
        if not parts:
            raise FileNotFoundError(f"gopher: no result files under {self.uri} (the result was unpersisted?)")
        tables = []
        for path in parts:
            with fs.open_input_file(path) as handle:
                tables.append(pq.ParquetFile(handle).read(columns=columns))
        return pa.concat_tables(tables)

    def copy_to(self, out: str, overwrite: bool = False) -> None:
        """Write the rows to ``out`` as a Parquet directory, as ``DataFrame.write.parquet`` would
        (``part-*`` files and ``_SUCCESS``; mode overwrite or errorifexists), by copying the files:
        no Spark job. They are copied into a directory beside ``out`` and renamed into place, so
        ``out`` never holds part of them; an existing ``out`` is replaced only with ``overwrite``."""
        fs, root = layout.filesystem(self.path)
        out_fs, target = layout.filesystem(out)
        target = target.rstrip("/")
        if layout.exists(out_fs, target) and not overwrite:
            raise GraphExistsError(f"{out} already exists (pass overwrite=True to replace it)")
        parent, _, base = target.rpartition("/")
        staging = f"{parent}/.{base}.{uuid.uuid4().hex[:12]}.tmp"
        try:
            out_fs.create_dir(staging, recursive=True)
            for info in layout.listing(fs, root):
                if info.is_file and not info.base_name.startswith((".", "_")):
                    pafs.copy_files(info.path, f"{staging}/{info.base_name}", source_filesystem=fs,
                                    destination_filesystem=out_fs)
            with out_fs.open_output_stream(f"{staging}/_SUCCESS"):
                pass
            if layout.exists(out_fs, target):
                out_fs.delete_dir(target)
            out_fs.move(staging, target)
        finally:
            if layout.exists(out_fs, staging):
                out_fs.delete_dir(staging)

    def unpersist(self) -> None:
        if self in _UNRELEASED:
            _UNRELEASED.remove(self)
        fs, root = layout.filesystem(self.path)
        if fs.get_file_info(root).type.name != "NotFound":
            fs.delete_dir(root)


class LazyFrame:
    """A result DataFrame made when first asked for (:meth:`get`). Spark's first read of a run's
    result files costs ~0.7 s in a fresh JVM (the data source and analyzer load); a caller that
    reads the rows with ``RunResult.to_arrow`` or uses only the metrics never pays it."""

    def __init__(self, make):
        self._make, self._frame = make, None

    def get(self):
        if self._frame is None:
            self._frame = self._make()
        return self._frame


def prepare_result_reads(spark) -> None:
    """Build what a caller's first read of result files needs, on a session that has not run a
    query yet: its SQL state and Spark's Parquet data source (~1 s of a fresh JVM; as CPU time
    it is moved, not added: the first read then costs that much less). Meant for a thread of
    its own while a run's stage starts; it reads an empty directory of this process, removed
    after, and runs no Spark job."""
    empty = tempfile.mkdtemp(prefix="goffish-prepare-")
    try:
        spark.read.schema("id long").parquet(empty)
    except Exception:                    # the session stopped meanwhile: nothing to prepare
        pass
    finally:
        shutil.rmtree(empty, ignore_errors=True)


_LOCAL_RESULTS: list = []        # this process's own directory for results, where Spark has no run dir


def _results_root(options, local: bool) -> str:
    """Where a run's results go: beside its run directory (``spark.goffish.runDir``, else the
    checkpoint directory); on a local master without either, a temporary directory of this
    process (removed at exit). A cluster needs a directory every executor can write."""
    if options.run_dir:
        return options.run_dir
    if not local:
        raise EngineError("gopher: a run on a cluster writes its results under spark.goffish.runDir or the "
                           "checkpoint directory; set one that every executor can write "
                           "(sc.setCheckpointDir or --conf spark.goffish.runDir=...)")
    if not _LOCAL_RESULTS:
        _LOCAL_RESULTS.append(tempfile.mkdtemp(prefix="goffish-results-"))
        atexit.register(shutil.rmtree, _LOCAL_RESULTS[0], True)
    return _LOCAL_RESULTS[0]


class BackgroundJob:
    """A Spark job running in a thread of its own (its own job group): the barrier stage of a run,
    or a Hatrick stream worker's long-running task;
    its result is what the tasks yield. The thread has the caller's Spark local properties
    (as ``pyspark.InheritableThread`` would) and is kept for a later job (:func:`_on_stage_thread`)."""

    def __init__(self, spark, rdd, group: str, description: str):
        from sparkshim.compat import adopt_thread_properties, thread_properties

        self.error: BaseException | None = None
        self.result = None
        self.finished = threading.Event()
        properties = thread_properties(spark)

        def run():
            try:
                adopt_thread_properties(spark, properties)
                spark.sparkContext.setJobGroup(group, description, interruptOnCancel=True)
                self.result = rdd.collect()
            except BaseException as exc:       # handed to the driver loop
                self.error = exc
            finally:
                self.finished.set()

        _on_stage_thread(run)

    def done(self) -> bool:
        return self.finished.is_set()


_IDLE_STAGE_THREADS: list = []      # the inboxes of stage threads waiting for a job
_STAGE_THREADS_LOCK = threading.Lock()


def _on_stage_thread(work) -> None:
    """Run ``work`` on an idle stage thread, or on a new one where none is idle. Stage threads are
    daemons kept for the next job: PySpark gives each Python thread a Py4J connection of its
    own, so a new thread per run paid a new connection (its authentication, a JVM thread)."""
    with _STAGE_THREADS_LOCK:
        inbox = _IDLE_STAGE_THREADS.pop() if _IDLE_STAGE_THREADS else None
    if inbox is None:
        inbox = queue.SimpleQueue()
        threading.Thread(target=_serve_stage_jobs, args=(inbox,), daemon=True, name="gopher-stage").start()
    inbox.put(work)


def _serve_stage_jobs(inbox: queue.SimpleQueue) -> None:
    while True:
        inbox.get()()
        with _STAGE_THREADS_LOCK:
            _IDLE_STAGE_THREADS.append(inbox)


_TASK_NUMBERS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()   # SparkContext -> {tasks: RDD}


def task_numbers(sc, tasks: int):
    """An RDD of ``tasks`` partitions holding their numbers, what a run's stage maps: made once per
    SparkContext and task count (``parallelize`` ships its data through a file and a few JVM
    calls, a share of a warm run's fixed cost)."""
    made = _TASK_NUMBERS.setdefault(sc, {})
    if tasks not in made:
        made[tasks] = sc.parallelize(range(tasks), tasks)
    return made[tasks]


class ResidentTransport:
    """Driver side: the listener, the rendezvous, one round trip per superstep, restarts."""

    def __init__(self, spark, spec, options, schema=None):
        self.spark, self.spec, self.options, self.schema = spark, spec, options, schema
        self.key = RunKey.fresh(frames=frames_authenticated(options.spark))
        self.local = options.local
        self.group = f"gopher-{uuid.uuid4().hex[:12]}"
        self.launch = 0
        self.job: BackgroundJob | None = None
        self.results: ResultFiles | None = None
        self.conns: dict = {}
        self.arrivals: queue.Queue = queue.Queue()
        self.listener = None
        self.run_dir = None
        self.lost = False
        self.readiness = Readiness()         # what _gather waits on
        self.held: dict = {}                 # {task: its summaries received, not yet asked for} (go_ahead)
        self.written = False                 # every task has written its result rows and ended its side
        self.phases: dict = {}               # {phase: seconds}: workers, rendezvous, topology, rows

    # lifecycle -----------------------------------------------------------------------
    def __enter__(self) -> "ResidentTransport":
        try:
            conf = self.options.spark
            advertised = LOOPBACK if self.local else conf.get("spark.driver.host")
            bind = LOOPBACK if self.local else conf.get("spark.driver.bindAddress", advertised)
            self.listener = Listener(bind, self.key, self.arrivals.put)
            self.address = (advertised, self.listener.address[1])
            if self.options.run_dir:
                self.run_dir = layout.join(_as_pyarrow_path(self.options.run_dir),
                                           f"gopher-run-{uuid.uuid4().hex[:12]}")
            self.results = ResultFiles(layout.join(_results_root(self.options, self.local),
                                                   f"gopher-result-{uuid.uuid4().hex[:12]}"))
            self._launch(None)
        except BaseException:
            self._close(failed=True)
            raise
        return self

    def __exit__(self, kind, exc, tb) -> None:
        self._close(failed=kind is not None)

    def _close(self, failed: bool) -> None:
        if self.job is not None and not self.job.done():
            if not failed and (self.written or self._broadcast(("end",))):
                self._reap(self.job)             # the tasks end as they should (Spark keeps their Python
            else:                                # workers for the next run); the caller need not wait for it
                self.spark.sparkContext.cancelJobGroup(self.group)
                self.job.finished.wait()
        self._drop_connections()
        if self.listener is not None:
            self.listener.close()
            self.listener = None
        while not self.arrivals.empty():
            self.arrivals.get_nowait().close()
        if failed and self.results is not None:
            self.results.unpersist()
        if self.run_dir is not None:
            fs, root = layout.filesystem(self.run_dir)
            if fs.get_file_info(root).type.name != "NotFound":
                fs.delete_dir(root)

    def _reap(self, job: BackgroundJob) -> None:
        """Let a finished run's stage end on its own, off the caller's time: every task has been
        told to end (or has written its rows); a stage still running after
        :data:`HANDSHAKE_SECONDS` is cancelled, so none outlives its run for long, and the
        process waits for its stages before it exits (Spark would log their end as errors)."""
        spark, group = self.spark, self.group
        _ENDING.add(job)

        def reap():
            if not job.finished.wait(HANDSHAKE_SECONDS):
                spark.sparkContext.cancelJobGroup(group)
                job.finished.wait()
            _ENDING.discard(job)

        threading.Thread(target=reap, daemon=True, name="gopher-reaper").start()

    def _drop_connections(self) -> None:
        for conn in self.conns.values():
            conn.close()
        self.conns = {}

    # launching -----------------------------------------------------------------------
    def _launch(self, resume: int | None) -> None:
        self.launch += 1
        fn = task_function(self.spec, self.address, self.key, self.launch, self.schema, self.run_dir,
                           self.results.path, self.options.max_frame_bytes, self.local,
                           self.options.rendezvous_timeout)
        tasks = self.spec.tasks
        stage = task_numbers(self.spark.sparkContext, tasks).barrier().mapPartitions(fn)
        self.job = BackgroundJob(self.spark, stage, self.group,
                        f"gopher: {type(self.spec.program).__name__} on {self.spec.store.path}")
        self._rendezvous(resume)

    def _rendezvous(self, resume: int | None) -> None:
        """Wait for every task's hello (on connections that passed the handshake), then send each
        the table of peers."""
        clock = time.perf_counter()
        deadline = time.monotonic() + self.options.rendezvous_timeout
        registered: dict = {}
        unregistered: list = []              # passed the handshake, no hello yet
        try:
            while len(registered) < self.spec.tasks:
                if not unregistered:
                    with contextlib.suppress(queue.Empty):
                        unregistered.append(self.arrivals.get(timeout=0.1))
                while not self.arrivals.empty():
                    unregistered.append(self.arrivals.get_nowait())
                for conn in wait(unregistered, timeout=0.1) if unregistered else []:
                    unregistered.remove(conn)
                    try:
                        _, launch, attempt, task, address = conn.recv()
                    except (EOFError, OSError, ValueError, TypeError):
                        conn.close()
                        continue
                    if launch != self.launch:
                        conn.close()
                        continue
                    if task in registered:
                        registered[task][0].close()
                    registered[task] = (conn, address)
                if len(registered) == self.spec.tasks:
                    break
                if self.job.done():
                    self._raise_job_error("before all of its tasks connected")
                if time.monotonic() > deadline:
                    missing = sorted(set(range(self.spec.tasks)) - set(registered))
                    raise RendezvousTimeout(
                        f"gopher: {len(missing)} of the run's {self.spec.tasks} tasks (task {missing}) did not "
                        f"connect within {self.options.rendezvous_timeout:g} s (spark.goffish.rendezvousTimeout); "
                        "are the executors able to reach the driver, and are enough slots free?")
        except BaseException:
            for conn, _ in registered.values():
                conn.close()
            raise
        finally:
            for conn in unregistered:
                conn.close()
        self._phase("workers", clock)
        self._start(registered, resume)

    def _start(self, registered: dict, resume: int | None) -> None:
        """Every task has registered its listener: send each the table of peers, then wait until
        each has connected to its peers and loaded its topology."""
        clock = time.perf_counter()
        table = {task: address for task, (_, address) in registered.items()}
        self.conns = {task: conn for task, (conn, _) in sorted(registered.items())}
        for conn in self.conns.values():
            conn.send(("start", table, resume))
        loaded = self._gather()
        self.lost = loaded is None           # the first superstep starts the stage again
        topology = max(loaded or [0.0])
        self._phase("rendezvous", clock, minus=topology)
        self.phases["topology"] = self.phases.get("topology", 0.0) + topology

    def _phase(self, name: str, since: float, minus: float = 0.0) -> float:
        """Account the time since ``since`` (less ``minus``) to phase ``name``; returns now."""
        now = time.perf_counter()
        self.phases[name] = self.phases.get(name, 0.0) + max(0.0, now - since - minus)
        return now

    def restart(self, resume: int | None) -> None:
        """Tasks were lost: end this stage and start another that resumes from ``resume``."""
        if not self.job.done():
            self.spark.sparkContext.cancelJobGroup(self.group)
            self.job.finished.wait()
        self._drop_connections()
        self._launch(resume)

    # the protocol ------------------------------------------------------------------------
    def _broadcast(self, message) -> bool:
        """Send every task ``message`` (pickled once); False if a connection has ended."""
        payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        try:
            for conn in self.conns.values():
                conn.send_bytes(payload)
            return True
        except OSError:
            return False

    def _gather(self, tasks=None) -> list | None:
        """One answer from every task (of ``tasks``), in task order; None if a task was lost."""
        answers: dict = {}
        pending = {conn: task for task, conn in self.conns.items() if tasks is None or task in tasks}
        for conn in self.readiness.each(list(pending), 0.5):
            if conn is None:
                if self.job.done():
                    self._raise_job_error("while tasks were running")
                continue
            try:
                kind, value = conn.recv()
            except (EOFError, OSError):
                return self._lost(pending)
            _raise_reported(kind, value)
            answers[pending.pop(conn)] = value
        return [answers[task] for task in sorted(answers)]

    def _lost(self, pending: dict) -> None:
        """A task's connection ended. If another task reports a program error meanwhile (the
        stage is being torn down because of it), that error is the run's outcome."""
        deadline = time.monotonic() + 0.5
        alive = list(pending)
        while alive and time.monotonic() < deadline:
            alive = _drain(alive, 0.1)
        return None

    def superstep(self, step: int, plan: dict, checkpoint: int | None) -> list | None:
        if self.lost:
            return None
        if checkpoint is not None and self.run_dir is None:
            checkpoint = None
        if not self._broadcast(("step", step, plan, checkpoint)):
            return None
        return self._gather()

    #: the tasks can go on from superstep to superstep by themselves (:meth:`go_ahead`)
    runs_ahead = True

    def go_ahead(self, step: int, lanes: list, window: int, max_supersteps: int, checkpoint: int | None) -> bool:
        """Start the tasks on their own supersteps from ``step`` (:meth:`_TaskSide.go_ahead`); the
        driver then reads one summary per task and superstep (:meth:`summaries`) until every lane
        is done. False if a task was lost."""
        if self.lost:
            return False
        o, saves = self.options, self.run_dir is not None
        rule = (checkpoint, o.checkpoint_interval, o.checkpoint_seconds) if saves else (None, None, None)
        self.held = {task: deque() for task in self.conns}
        return self._broadcast(("ahead", step, lanes, window, max_supersteps, *rule))

    def summaries(self) -> list | None:
        """Every task's summary of the next superstep they ran on their own; None if a task was lost.
        The tasks send them in batches (:meth:`_TaskSide.go_ahead`), each task's when it has them."""
        short = [task for task in self.conns if not self.held[task]]
        if short:
            batches = self._gather(short)
            if batches is None:
                return None
            for task, batch in zip(sorted(short), batches):
                self.held[task].extend(batch)
        return [self.held[task].popleft() for task in sorted(self.conns)]

    def merge(self, lanes: dict) -> list:
        if not self._broadcast(("merge", lanes)):
            raise RuntimeError("gopher: a task was lost during the Merge step")
        partials = self._gather()
        if partials is None:
            raise RuntimeError("gopher: a task was lost during the Merge step")
        return partials

    def output(self, tables: list, schema) -> LazyFrame:
        """The result rows: the tasks write them, the DataFrame reads them (:class:`ResultFiles`),
        made when first asked for, once every task has said its file is written."""
        written = self._gather() if self._broadcast(("output", tables)) else None
        if written is None:
            self._raise_job_error("while writing its results")
        self.written = True
        self.phases["rows"] = max(written, default=0.0)
        return self.results.frame(self.spark, schema)

    def _raise_job_error(self, when: str):
        self.job.finished.wait()
        error = self.job.error or "a task's connection ended"
        raise RuntimeError(f"gopher: the run's Spark stage ended {when}: {error}") from self.job.error


class GopherTaskError(EngineError, RuntimeError):
    """A run's task failed outside the program's own code (the task's traceback is in the message)."""


def _drain(conns: list, timeout: float) -> list:
    """Read what the connections say within ``timeout``: a reported error is raised, ended
    connections are dropped; returns those still open."""
    alive = list(conns)
    for conn in wait(alive, timeout=timeout):
        try:
            kind, value = conn.recv()
        except (EOFError, OSError):
            alive.remove(conn)
            continue
        _raise_reported(kind, value)
    return alive


def _raise_reported(kind: str, value) -> None:
    if kind == "error":
        raise GopherProgramError(value)
    if kind == "failure":
        raise GopherTaskError(value)


def _as_pyarrow_path(uri: str) -> str:
    """Spark writes local directories as ``file:/path``; pyarrow wants ``/path`` or ``file:///path``."""
    if uri.startswith("file:") and not uri.startswith("file://"):
        return uri[len("file:"):]
    return uri
