"""A stream's workers as long-running Spark tasks, each holding the live state of its buckets.

``g.stream(workers=N, executors=True)`` (the default where the Spark master is a cluster)
runs each :class:`hatrick.partitioned.Worker` inside a Spark task that lives as long as the
stream; the driver keeps the ring, the producers' marks and the merge state, and reaches each
worker only by requests over a :mod:`gopher.channel` connection (the same handshake, run key and
frames as Gopher's resident runs). In-process workers (the default on ``local[*]``) are the same
:class:`~hatrick.partitioned.Worker` answering the same requests by direct calls.

Why one single-task Spark job per worker (the way Spark Streaming runs its receivers) rather
than a barrier stage like Gopher's: a barrier stage is gang-scheduled with a fixed number of
tasks, so adding or removing one worker, or replacing a lost one, would end and restart all of
them with their state. With a job per worker, :meth:`hatrick.stream.Stream.rescale` starts or
ends one worker while the others keep serving, and the workers never exchange barrier messages
(only the moved buckets travel, on request).

Cores: each worker holds one task slot for the stream's life. Pushing from the driver needs
nothing more (N workers: N slots); a Structured Streaming query feeding the stream needs one
more slot for its own micro-batch jobs (N + 1), which :meth:`Stream.start` checks
(:func:`check_slots`), since otherwise its micro-batches would wait for ever.
"""
from __future__ import annotations

import collections
import contextlib
import os
import queue
import re
import socket
import time
import traceback
import uuid
from multiprocessing.connection import wait

import numpy as np

from gofs.errors import InputError
from gopher.channel import Listener, RunKey, connect, frames_authenticated
from gopher import codec
from gopher.resident import LOOPBACK, BackgroundJob, recv_frames, send_frames
from hatrick import datafile
from hatrick.statefile import state_from_tree, state_to_tree
from hatrick.loading import load_graph_state
from hatrick.partitioned import Worker, warm_up

RENDEZVOUS_SECONDS = 120.0


class WorkerLost(RuntimeError):
    """A worker's task ended (its executor died, or its job was cancelled)."""


class WorkerFailed(RuntimeError):
    """A request raised on a worker (the worker's traceback is in the message)."""


def task_slots(spark) -> int:
    """Task slots this Spark application has: cores of ``local[N]`` / ``local-cluster[E,C,M]``,
    else ``spark.executor.instances`` x ``spark.executor.cores``, else the default parallelism;
    divided by ``spark.task.cpus``."""
    sc = spark.sparkContext
    conf = sc.getConf()
    master = sc.master
    cores = None
    if master == "local":
        cores = 1
    elif match := re.fullmatch(r"local\[(\d+|\*)(?:,\s*\d+)?\]", master):
        cores = (os.cpu_count() or 1) if match.group(1) == "*" else int(match.group(1))
    elif match := re.fullmatch(r"local-cluster\[\s*(\d+)\s*,\s*(\d+)\s*,\s*\d+\s*\]", master):
        cores = int(match.group(1)) * int(match.group(2))
    elif conf.get("spark.executor.instances") and conf.get("spark.executor.cores"):
        cores = int(conf.get("spark.executor.instances")) * int(conf.get("spark.executor.cores"))
    else:
        cores = sc.defaultParallelism
    return max(cores // int(conf.get("spark.task.cpus") or 1), 0)


def check_slots(spark, workers: int, fed_by_query: bool) -> None:
    """Refuse (InputError) a stream whose long-running workers would leave a Structured
    Streaming query feeding it (``fed_by_query``) no slot, or would not all get one."""
    slots = task_slots(spark)
    needed = workers + (1 if fed_by_query else 0)
    if needed > slots:
        why = "and one more for the Structured Streaming query feeding them, " if fed_by_query else ""
        raise InputError(f"hatrick: {workers} worker(s) on executors hold {workers} task slot(s) for the stream's "
                         f"life, {why}so {needed} slot(s) are needed; Spark master {spark.sparkContext.master!r} "
                         f"has {slots}. Use fewer workers, more executor cores, or executors=False.")


# ------------------------------------------------------------------------------ the task side

def worker_task(index: int, launch: int, address, key: RunKey, local: bool):
    """The function of worker ``index``'s Spark task: connect to the driver, take the initial
    state, then answer requests until the driver closes the connection (that ends the task)."""

    def run(_):
        from pyspark import TaskContext

        driver = connect(address, key)
        try:
            driver.send(("hello", launch, index, TaskContext.get().attemptNumber()))
            serve(index, driver, key, LOOPBACK if local else socket.gethostbyname(socket.gethostname()))
        finally:
            driver.close()
        yield from ()

    return run


def serve(index: int, driver, key: RunKey, host: str) -> None:
    """Answer the driver's requests on one worker: ``(method, args)`` -> ``("ok", value)`` or
    ``("error", traceback)``; states travel as data files. The first message gives the initial
    state (``"init"``: a state; ``"load"``: a GoFS store this task reads the whole graph from,
    its part kept on a later :meth:`~hatrick.partitioned.Worker.keep`), the owner map and the bucket
    function (:class:`hatrick.buckets.Buckets`). The worker also listens
    on ``host`` for buckets other workers send it (its address is the answer to the first message)."""
    kind, payload, owner, buckets = driver.recv()
    try:
        state = _state_of(payload) if kind == "init" else load_graph_state(payload)
        buckets.prepare()
    except Exception as exc:
        driver.send(("error", f"hatrick worker {index}: {exc!r}\n{traceback.format_exc()}"))
        return
    worker = Worker(index, state, owner, buckets)
    try:
        warm_up(state)
        driver.send(("ok", worker.listen(host, key)))
        _answer(worker, driver)
    finally:
        worker.close()


def _answer(worker: Worker, driver) -> None:
    index = worker.index
    while True:
        try:
            frames = recv_frames(driver, None)
        except (EOFError, OSError):
            return
        clock, cpu = time.perf_counter(), time.thread_time()
        try:
            name, args = codec.from_frames(frames)
            value = worker.request(name, *args).result()
            if name in ("state", "empty_state"):
                value = _state_bytes(value)
            driver.send(("ok", value))
        except Exception as exc:
            driver.send(("error", f"hatrick worker {index}: {exc!r}\n{traceback.format_exc()}"))
        busy = worker.busy
        busy["answering"] = busy.get("answering", 0.0) + time.perf_counter() - clock
        busy["answering cpu"] = busy.get("answering cpu", 0.0) + time.thread_time() - cpu
        busy["process cpu"] = time.process_time()


def _state_bytes(state) -> bytes:
    return datafile.dumps(state_to_tree(state))


def _state_of(payload: bytes):
    return state_from_tree(datafile.loads(payload))


# ------------------------------------------------------------------------------ the driver side

class _Answer:
    """One request's answer, read from the worker's connection when asked for. Answers come in
    request order, so reading one first reads (and keeps) those of earlier requests not read yet."""

    def __init__(self, worker: "RemoteWorker", name: str):
        self.worker, self.name = worker, name
        self._read = None

    def result(self):
        unread = self.worker.unread
        while self._read is None:
            unread[0]._receive()
        kind, value = self._read
        if kind == "error":
            raise WorkerFailed(value)
        if self.name in ("state", "empty_state"):
            return _state_of(value)
        return value

    def _receive(self) -> None:
        try:
            self._read = self.worker.conn.recv()
        except (EOFError, OSError) as exc:
            raise self.worker.lost(exc) from exc
        self.worker.unread.popleft()


class RemoteWorker:
    """The driver's handle on a worker running in a Spark task: the same methods as
    :class:`hatrick.partitioned.Worker`, each a request (see :meth:`request` to overlap them)."""

    def __init__(self, index: int, owner: np.ndarray, conn, group: str, tasks: "WorkerTasks"):
        self.index, self._owner, self.conn, self.group, self.tasks = index, owner, conn, group, tasks
        self.peer_address = None
        self.unread: collections.deque = collections.deque()     # answers not read yet, in request order

    def request(self, name: str, *args) -> _Answer:
        """Send request ``name``; its answer is read by ``.result()`` (so several workers'
        requests run at once). A request travels as :mod:`gopher.codec` frames: its large numpy
        arrays (a batch's columns) are sent from where they lie and read back in place, never
        copied into or out of a pickle."""
        try:
            send_frames(self.conn, codec.to_frames((name, args)))
        except OSError as exc:
            raise self.lost(exc) from exc
        if name in ("set_owner", "keep"):             # requests that replace the worker's owner map
            self._owner = np.asarray(args[0], np.int64)
        answer = _Answer(self, name)
        self.unread.append(answer)
        return answer

    def lost(self, cause) -> WorkerLost:
        return WorkerLost(f"hatrick: worker {self.index}'s Spark task ended ({cause!r}); its executor died or its "
                          "job was cancelled")

    @property
    def owner(self) -> np.ndarray:
        return self._owner

    @owner.setter
    def owner(self, owner: np.ndarray) -> None:
        self.request("set_owner", owner).result()

    @property
    def state(self):
        """This worker's committed state, fetched to the driver (O(its part of the graph))."""
        return self.request("state").result()

    def close(self) -> None:
        """End this worker's task (it returns when its connection closes)."""
        self.conn.close()

    def abort(self) -> None:
        """End this worker's task now: close its connection and cancel its job (so that Spark does
        not retry a lost task that nobody waits for)."""
        self.conn.close()
        self.tasks.spark.sparkContext.cancelJobGroup(self.group)

    def __getattr__(self, name: str):
        if name.startswith("_") or name not in SERVED:
            raise AttributeError(name)
        return lambda *args: self.request(name, *args).result()


SERVED = frozenset({"stage", "commit", "abandon", "clock", "sizes", "bucket_state", "stale_edges",
                    "vertex_frame", "part", "owned", "send_ghosts", "join_ghosts", "edge_frame", "owned_labels",
                    "components_frame", "reachable", "reach_summary", "held_edges", "keep", "loaded_clock",
                    "extract", "absorb", "extract_to", "absorb_from", "set_owner", "state", "empty_state", "busy",
                    "merge_labels", "global_labels", "exchange", "stage_instance_part",
                    "write_instance_partitions", "write_state", "written", "pattern_step", "forget_patterns",
                    "pattern_keys"})


class WorkerTasks:
    """The driver side of a stream's worker tasks: a listener with the stream's random key, one
    Spark job (its own job group) per worker task, and the rendezvous that hands each task its
    initial state."""

    def __init__(self, spark):
        conf = spark.sparkContext.getConf()
        self.spark = spark
        self.key = RunKey.fresh(frames=frames_authenticated(conf))
        self.local = local = (spark.sparkContext.master or "").startswith("local")
        advertised = LOOPBACK if local else conf.get("spark.driver.host")
        bind = LOOPBACK if local else conf.get("spark.driver.bindAddress", advertised)
        self.arrivals: queue.Queue = queue.Queue()
        self.listener = Listener(bind, self.key, self.arrivals.put)
        self.address = (advertised, self.listener.address[1])
        self.group = f"hatrick-{uuid.uuid4().hex[:12]}"
        self.launches = 0

    def start(self, states: dict, owner: np.ndarray, buckets) -> list[RemoteWorker]:
        """Start one task per ``{worker index: State}`` and give each its state and the bucket function
        ``buckets`` (a :class:`hatrick.buckets.Buckets`); returns their handles (in the order of
        ``states``) once every one holds its state."""
        return self._launch({i: ("init", _state_bytes(state)) for i, state in states.items()}, owner, buckets)

    def load(self, store, indices, owner: np.ndarray, buckets) -> list[RemoteWorker]:
        """Start one task per worker of ``indices``, each loading the whole latest graph from GoFS
        ``store`` on its executor (:func:`hatrick.loading.load_graph_state`): nothing of it
        passes through the driver. Each keeps its part on :meth:`Worker.keep`."""
        return self._launch({i: ("load", store) for i in indices}, owner, buckets)

    def _launch(self, first: dict, owner: np.ndarray, buckets) -> list[RemoteWorker]:
        """Start one task per ``{worker index: (kind, payload)}`` and send it that first message."""
        jobs = {}
        for index in first:
            self.launches += 1
            fn = worker_task(index, self.launches, self.address, self.key, self.local)
            rdd = self.spark.sparkContext.parallelize([index], 1).mapPartitions(fn)
            group = f"{self.group}-{index}-{self.launches}"
            jobs[self.launches] = (index, group, BackgroundJob(self.spark, rdd, group, f"hatrick: stream worker {index}"))
        conns = self._rendezvous(jobs)
        handles = []
        for launch, (index, group, _) in jobs.items():
            conns[launch].send((*first[index], owner, buckets))
            handles.append(RemoteWorker(index, owner, conns[launch], group, self))
        for worker in handles:
            worker.unread.append(_Answer(worker, "init"))
            worker.peer_address = tuple(worker.unread[0].result())
        return handles

    def _rendezvous(self, jobs: dict) -> dict:
        """The connection of every launched task (by launch number), once each has said hello."""
        deadline = time.monotonic() + RENDEZVOUS_SECONDS
        registered, unregistered = {}, []
        try:
            while len(registered) < len(jobs):
                with contextlib.suppress(queue.Empty):
                    unregistered.append(self.arrivals.get(timeout=0.05))
                for conn in wait(unregistered, timeout=0.05) if unregistered else []:
                    unregistered.remove(conn)
                    try:
                        _, launch, _, _ = conn.recv()
                    except (EOFError, OSError, ValueError, TypeError):
                        conn.close()
                        continue
                    if launch in jobs and launch not in registered:
                        registered[launch] = conn
                    else:
                        conn.close()
                for launch, (index, _, job) in jobs.items():
                    if launch not in registered and job.done():
                        raise WorkerLost(f"hatrick: worker {index}'s Spark job ended before it connected: {job.error}")
                if time.monotonic() > deadline:
                    raise WorkerLost(f"hatrick: {len(jobs) - len(registered)} worker task(s) did not start within "
                                     f"{RENDEZVOUS_SECONDS:g} s; are enough task slots free?")
        except BaseException:
            for conn in [*registered.values(), *unregistered]:
                conn.close()
            for _, group, _ in jobs.values():
                self.spark.sparkContext.cancelJobGroup(group)
            raise
        return registered

    def close(self) -> None:
        self.listener.close()
        while not self.arrivals.empty():
            self.arrivals.get_nowait().close()

