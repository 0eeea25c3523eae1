"""The exactly-once checkpoint of a stream: a full state, a log of batches since, snapshot progress.

The full state is a small manifest (bucket owners, marks, buffer, live queries) naming one state
file per worker (:mod:`hatrick.statefile`), which each worker of the partitioned live graph
(:mod:`hatrick.partitioned`) writes itself, in its Spark task or in this process: no worker's
state passes through the driver. Logged batches are replayed through the same routing.
Workers in Spark tasks write into the checkpoint directory at the same path, so it must be
reachable there from the executors (a local-cluster, or a mount the executors share).

Everything is stored as data (:mod:`hatrick.datafile`, JSON), never as pickles,
and only in a directory this user owns that nobody else may write to: a
checkpoint is trusted state, so a directory someone else could have filled is
refused before any file in it is read.
"""
from __future__ import annotations

import dataclasses
import json
import os
import stat
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from gofs.errors import InputError
from hatrick import datafile
from hatrick.buckets import HASH, Buckets
from hatrick.live import State
from hatrick.partitioned import PartitionedGraph
from hatrick.snapshot import SnapshotReport
from hatrick.statefile import FORMAT, state_from_tree, write_durably, write_state_file
from hatrick.updates import UpdateBatch

FULL_NAME = "hatrick-checkpoint.data"
SNAPSHOTS_NAME = "hatrick-snapshots.json"
LOG_PREFIX, LOG_SUFFIX = "hatrick-batch-", ".data"
STATE_PREFIX = "hatrick-state-"
LEGACY_PICKLE = "hatrick-checkpoint.pkl"


def _state_batch(name: str):
    """The batch number of a workers' state file named ``hatrick-state-<batch>-<worker>.data``, or None
    for any other file: only the files this checkpoint wrote are ever removed."""
    if not (name.startswith(STATE_PREFIX) and name.endswith(LOG_SUFFIX)):
        return None
    batch, _, worker = name[len(STATE_PREFIX):-len(LOG_SUFFIX)].partition("-")
    return int(batch) if batch.isdigit() and worker.isdigit() else None


def private_directory(directory: str) -> str:
    """Create ``directory`` (mode 0700) or check that an existing one is this user's own and not
    writable by group or others; raises InputError naming it otherwise."""
    os.makedirs(directory, mode=0o700, exist_ok=True)
    info = os.stat(directory)
    if not stat.S_ISDIR(info.st_mode):
        raise InputError(f"checkpoint directory {directory!r} is not a directory")
    if hasattr(os, "geteuid") and info.st_uid != os.geteuid():
        raise InputError(f"checkpoint directory {directory!r} is owned by uid {info.st_uid}, not by this user "
                         f"(uid {os.geteuid()}); a checkpoint is trusted state, so it is refused: use a "
                         f"directory of your own")
    if info.st_mode & 0o022:
        raise InputError(f"checkpoint directory {directory!r} is writable by group or others (mode "
                         f"{stat.S_IMODE(info.st_mode):04o}); a checkpoint is trusted state, so it is refused: "
                         f"chmod go-w it or use a private directory")
    return directory


def _read_owned(path: str) -> bytes:
    """The bytes of ``path``, which must be a regular file of this user's."""
    with open(path, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode) or (hasattr(os, "geteuid") and info.st_uid != os.geteuid()):
            raise InputError(f"{path}: not a regular file owned by this user; refused")
        return f.read()


# batches as data ------------------------------------------------------------------------------------
_BATCH_FIELDS = ("op", "a", "b", "attribute", "value", "producer", "seq", "time")


def batch_to_tree(b: UpdateBatch) -> dict:
    return {**{name: getattr(b, name) for name in _BATCH_FIELDS}, "text_values": b.text_values}


def batch_from_tree(t: dict) -> UpdateBatch:
    return UpdateBatch(*(t[name] for name in _BATCH_FIELDS), text_values=bool(t["text_values"]))


def empty_buffer_summary(num_buckets: int) -> dict:
    """What the elastic buffer holds, as a checkpoint records it (see ElasticBuffer.summary)."""
    return {"volume": 0, "min_time": None, "per_bucket": np.zeros(num_buckets, np.int64)}


class _LogWrite:
    """One batch's log file being written (atomically, fsynced) by the checkpoint's log writer."""

    def __init__(self, path: str, future: Future):
        self.path = path
        self._future = future

    def result(self) -> None:
        """Wait until the log file is in place; raises what writing it raised."""
        self._future.result()


class _LogGap(InputError):
    """The checkpoint's log does not continue its full state."""


class Checkpoint:
    """Exactly-once state in ``directory``: a full state (a manifest and one state file per worker)
    plus a log of the batches applied since.

    Every batch's de-duplicated updates, the resulting producer marks and what the elastic buffer
    then holds go to one log file, written to a temporary name, fsynced and renamed (atomic) by a
    writer thread while the batch is applied (:meth:`begin`); :meth:`commit` returns once it is in
    place, so a committed batch survives a crash. Every ``full_every`` batches the whole state is
    written the same way, each worker's state file by that worker on a thread of its own (states
    are immutable, so it reads a stable one while later batches go on), then the manifest naming
    them, atomically, by the driver; once it is in place, the log files it covers are removed. Loading
    replays the logged batches on the newest full state; applying a batch is deterministic, so this
    rebuilds exactly the state that was committed. The first commit writes the full state
    synchronously: it is the base every log replays on.

    Snapshots are recorded in their own small file (:meth:`snapshot_started`,
    :meth:`snapshot_done`): the batch the last snapshot covers tells a restart whether the buffer
    still holds updates that no GoFS instance has, and an interrupted snapshot's (start, end) lets
    a restart recognise the instance if its commit landed.
    """

    def __init__(self, directory: str, full_every: int = 20, buckets: Buckets | None = None):
        self.directory = private_directory(directory)
        self.buckets = buckets or Buckets()     # what puts ids in buckets: the states' split, recorded
        if os.path.exists(os.path.join(directory, LEGACY_PICKLE)):
            raise InputError(f"{directory}: holds a checkpoint in the old pickle format ({LEGACY_PICKLE}), which "
                             f"is never loaded (unpickling can run code); start from a new checkpoint directory")
        self.full_every = full_every
        self.path = os.path.join(directory, FULL_NAME)
        self.snapshots_path = os.path.join(directory, SNAPSHOTS_NAME)
        self._since_full = 0
        self._log_writer = ThreadPoolExecutor(1, thread_name_prefix="hatrick-log")
        self._full_writer = ThreadPoolExecutor(1, thread_name_prefix="hatrick-checkpoint")
        self._full: Future | None = None
        self._awaited: dict | None = None       # a full state whose files the workers are writing
        self._failure: BaseException | None = None

    def _write(self, path: str, payload: dict) -> None:
        write_durably(path, datafile.dumps({"format": FORMAT, **payload}))

    def _log(self, batch_no: int) -> str:
        return os.path.join(self.directory, f"{LOG_PREFIX}{batch_no:012d}{LOG_SUFFIX}")

    def _logged(self) -> list[tuple[int, str]]:
        names = sorted(n for n in os.listdir(self.directory) if n.startswith(LOG_PREFIX) and n.endswith(LOG_SUFFIX))
        return [(int(n[len(LOG_PREFIX):-len(LOG_SUFFIX)]), os.path.join(self.directory, n)) for n in names]

    def _state_path(self, batch_no: int, worker: int) -> str:
        return os.path.join(self.directory, f"{STATE_PREFIX}{batch_no:012d}-{worker:04d}{LOG_SUFFIX}")

    def _write_manifest(self, batch_no: int, paths: list, record: dict) -> None:
        """Commit a full state: the manifest naming the workers' state files of batch ``batch_no``
        (all in place) is written atomically; then the logs it covers and older state files go."""
        self._write(self.path, {"batch": batch_no, "states": [os.path.basename(p) for p in paths], **record})
        for number, path in self._logged():
            if number <= batch_no:
                os.remove(path)
        for name in os.listdir(self.directory):
            number = _state_batch(name)
            if number is not None and number < batch_no:
                os.remove(os.path.join(self.directory, name))

    def _in_background(self, write, *args) -> None:
        try:
            write(*args)
        except BaseException as error:                 # reported by the next begin()
            self._failure = error

    def begin(self, number: int, batch: UpdateBatch, hwm: dict, buffer: dict,
              gaps: dict | None = None, queries: list | None = None) -> "_LogWrite | None":
        """Start making batch ``number`` durable: its log file (the batch, the marks and the buffer
        summary after it, and the live CGQL queries as they stand before it: see
        :meth:`hatrick.cgql.engine.Query.checkpoint_record`) is written on a thread while the caller applies the batch; :meth:`commit`
        waits for it, :meth:`abandon` undoes it. Returns None for the first batch, whose commit writes
        the full state instead (the base every log replays on). Raises the error of a failed
        background full-state write, if any (nothing is lost: the log files it would have replaced
        stay until a later full write succeeds)."""
        if self._failure is not None:
            failure, self._failure = self._failure, None
            raise InputError(f"{self.path}: writing the full checkpoint failed: {failure!r}") from failure
        if not os.path.exists(self.path):
            return None
        path = self._log(number)
        payload = {"batch": batch_to_tree(batch), "hwm": dict(hwm), "gaps": dict(gaps or {}), "buffer": buffer,
                   "queries": list(queries or [])}
        return _LogWrite(path, self._log_writer.submit(self._write, path, payload))

    def commit(self, pending: "_LogWrite | None", states, hwm: dict, buffer: dict,
               gaps: dict | None = None, owner: np.ndarray | None = None, queries: list | None = None) -> None:
        """Return once the batch that made ``states`` is durable; every ``full_every`` batches,
        start a full state. ``states``: one :class:`State`, or the states of a partitioned graph's
        workers (in worker order) with ``owner`` (bucket -> worker), written by this checkpoint on
        its writer thread; or a :class:`PartitionedGraph` with a staged batch, whose workers write
        their staged states themselves (:meth:`PartitionedGraph.write_staged`, on their own
        threads: the manifest follows once they report them written, :meth:`states_written`)."""
        record = {"owner": np.zeros(1, np.int64) if owner is None else np.asarray(owner, np.int64),
                  "buckets": self.buckets.kind,
                  "hwm": dict(hwm), "gaps": dict(gaps or {}), "buffer": buffer, "queries": list(queries or [])}
        if pending is None:
            self.wait()
            self._awaited = None
            self._start_full(states, record, wait=True)
            self._since_full = 0
            return
        pending.result()
        self._since_full += 1
        if self._since_full >= self.full_every and self._awaited is None and (self._full is None or self._full.done()):
            self._since_full = 0
            self._start_full(states, record, wait=False)

    def _start_full(self, states, record: dict, wait: bool) -> None:
        if isinstance(states, PartitionedGraph):
            batch_no = states.staged_batch
            paths = [self._state_path(batch_no, i) for i in range(len(states.workers))]
            states.write_staged(paths, wait)
            if wait:
                self._write_manifest(batch_no, paths, record)
            else:
                self._awaited = {"batch": batch_no, "paths": paths, "missing": set(paths), "record": record}
            return
        states = [states] if isinstance(states, State) else list(states)
        batch_no = states[0].batch
        paths = [self._state_path(batch_no, i) for i in range(len(states))]

        def write() -> None:
            for path, state in zip(paths, states):
                write_state_file(path, state)
            self._write_manifest(batch_no, paths, record)

        if wait:
            write()
        else:
            self._full = self._full_writer.submit(self._in_background, write)

    def states_written(self, reports: list) -> None:
        """The workers' reports of state files they finished writing, ``(path, error or None)``:
        once every file of the awaited full state is in place, its manifest is written (on the
        writer thread); a failed one abandons it and is raised by the next :meth:`begin`."""
        awaited = self._awaited
        for path, error in reports:
            if awaited is None or path not in awaited["missing"]:
                continue
            if error is not None:
                self._failure, self._awaited = OSError(f"{path}: {error}"), None
                return
            awaited["missing"].discard(path)
        if awaited is not None and not awaited["missing"]:
            self._awaited = None
            self._full = self._full_writer.submit(self._in_background, self._write_manifest, awaited["batch"],
                                                  awaited["paths"], awaited["record"])

    def drop_awaited(self) -> None:
        """Forget a full state the workers are still writing (they were replaced or rescaled, so
        some will never report it); the next one is started ``full_every`` batches later."""
        self._awaited = None

    def abandon(self, pending: "_LogWrite | None") -> None:
        """The batch was not applied: wait for its log write and remove the file (were a crash to
        keep it, loading finds it is the last log and applies it, which the producers' replay
        of that batch then finds already done)."""
        if pending is not None:
            try:
                pending.result()
            finally:
                if os.path.exists(pending.path):
                    os.remove(pending.path)

    def wait(self) -> None:
        """Wait for a full-state write in progress (it would also finish before the interpreter exits)."""
        if self._full is not None:
            self._full.result()

    # snapshots -------------------------------------------------------------------------------------
    def _write_snapshots(self, record: dict) -> None:
        write_durably(self.snapshots_path, json.dumps({"format": FORMAT, **record}).encode())

    def snapshot_started(self, snapshots: list, covered: int, batch: int, start: float, end: float) -> None:
        """Record that a snapshot of the state after ``batch`` with this (start, end) is being written."""
        self._write_snapshots({"snapshots": [dataclasses.asdict(r) for r in snapshots], "covered": covered,
                               "pending": {"batch": batch, "start": start, "end": end}})

    def snapshot_done(self, snapshots: list, covered: int) -> None:
        """Record the snapshots written so far; the last one holds every batch up to ``covered``."""
        self._write_snapshots({"snapshots": [dataclasses.asdict(r) for r in snapshots], "covered": covered,
                               "pending": None})

    def _snapshot_record(self) -> dict:
        if not os.path.exists(self.snapshots_path):
            return {"snapshots": [], "covered": 0, "pending": None}
        try:
            record = json.loads(_read_owned(self.snapshots_path))
            if record.get("format") != FORMAT:
                raise InputError(f"{self.snapshots_path}: checkpoint format {record.get('format')} is not {FORMAT}")
            reports = [SnapshotReport(**r) for r in record["snapshots"]]
            return {"snapshots": reports, "covered": int(record["covered"]), "pending": record["pending"]}
        except (ValueError, KeyError, TypeError) as error:
            if isinstance(error, InputError):
                raise
            raise InputError(f"{self.snapshots_path}: malformed snapshot record: {error}") from None

    # loading ---------------------------------------------------------------------------------------
    def load(self) -> dict | None:
        """The committed state, hwm, buffer summary, live queries, snapshots and the batch the last snapshot covers
        (None without a checkpoint). A full write that lands while we read (from a writer still
        running in this process) removes the logs it covers; then we read again from the new one."""
        if not os.path.exists(self.path):
            return None
        for attempt in range(3):
            try:
                return {**self._replay(), **self._snapshot_record()}
            except (FileNotFoundError, _LogGap):
                if attempt == 2:
                    raise
        return None

    def _replay(self) -> dict:
        base = os.stat(self.path)
        payload = self._read(self.path)
        for name in payload["states"]:
            if not (isinstance(name, str) and name.startswith(STATE_PREFIX) and name == os.path.basename(name)):
                raise InputError(f"{self.path}: names {name!r}, not a state file of this directory")
        states = [state_from_tree(self._read(os.path.join(self.directory, name))["state"]) for name in payload["states"]]
        owner = np.asarray(payload["owner"], np.int64)
        if payload.get("buckets", HASH) != self.buckets.kind:
            raise InputError(f"{self.path}: the live graph was split by buckets={payload.get('buckets', HASH)!r}, "
                             f"not {self.buckets.kind!r}: restart the stream with the buckets it was started with")
        graph = PartitionedGraph.restore(states, owner, self.buckets)
        logged = [(number, path) for number, path in self._logged() if number > graph.batch]
        now = os.stat(self.path)
        if (now.st_ino, now.st_mtime_ns) != (base.st_ino, base.st_mtime_ns):
            raise _LogGap(f"{self.path}: replaced while being read (its logs may be gone)")
        hwm, gaps, buffer, queries = payload["hwm"], payload["gaps"], payload["buffer"], payload.get("queries", [])
        for i, (number, path) in enumerate(logged):
            if number != graph.batch + 1:
                raise _LogGap(f"{path}: checkpoint log skips from batch {graph.batch} to {number}")
            entry = self._read(path)
            try:
                graph.apply(batch_from_tree(entry["batch"]))
            except Exception:
                if i < len(logged) - 1:
                    raise
                os.remove(path)     # the last batch failed to apply when pushed too: it never committed
                break
            hwm, gaps, buffer, queries = entry["hwm"], entry["gaps"], entry["buffer"], entry.get("queries", [])
        return {"graph": graph, "state": graph.gather() if len(graph.workers) == 1 else None, "hwm": hwm,
                "gaps": gaps, "buffer": buffer, "queries": queries}

    @staticmethod
    def _read(path: str) -> dict:
        try:
            payload = datafile.loads(_read_owned(path))
        except datafile.DataFileError as error:
            raise InputError(f"{path}: {error}") from None
        if not isinstance(payload, dict) or payload.get("format") != FORMAT:
            found = payload.get("format") if isinstance(payload, dict) else None
            raise InputError(f"{path}: checkpoint format {found} is not {FORMAT}")
        return payload
