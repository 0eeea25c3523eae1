"""The exactly-once checkpoint of a stream: a full state, a log of batches since, snapshot progress.

The full state is the partitioned live graph's worker states and bucket owners
(:mod:`hatrick.partitioned`); logged batches are replayed through the same routing.

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
import pandas as pd

from gofs import files
from gofs.errors import InputError
from hatrick import datafile
from hatrick.live import Column, State, TemplateValues
from hatrick.partitioned import PartitionedGraph
from hatrick.snapshot import SnapshotReport
from hatrick.updates import UpdateBatch

FULL_NAME = "hatrick-checkpoint.data"
SNAPSHOTS_NAME = "hatrick-snapshots.json"
LOG_PREFIX, LOG_SUFFIX = "hatrick-batch-", ".data"
LEGACY_PICKLE = "hatrick-checkpoint.pkl"
FORMAT = 3          # 3: data files (no pickles), buffer summary per batch, snapshot record
_FULL_CHUNK = 1 << 20      # bytes of a full state synced at a time
_datasync = getattr(os, "fdatasync", os.fsync)


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


# states and batches as data ------------------------------------------------------------------------
def _columns_out(columns: dict) -> dict:
    return {name: {"values": c.values, "present": c.present} for name, c in columns.items()}


def _columns_in(tree: dict) -> dict:
    return {name: Column(c["values"], c["present"]) for name, c in tree.items()}


def state_to_tree(s: State) -> dict:
    return {"directed": s.directed, "ids": s.ids.to_numpy(), "alive": s.alive, "comp": s.comp,
            "vattrs": _columns_out(s.vattrs), "vkinds": dict(s.vkinds), "keys": s.keys, "key_slots": s.key_slots,
            "src": s.src, "dst": s.dst, "mult": s.mult, "touched": s.touched, "eattrs": _columns_out(s.eattrs),
            "ekinds": dict(s.ekinds), "static_vertex": sorted(s.static_vertex),
            "static_edge": sorted(s.static_edge), "batch": s.batch, "time": float(s.time), "free": s.free,
            "template": None if s.template is None else {
                "keys": s.template.keys, "edge": _columns_out(s.template.edge),
                "vertex_present": dict(s.template.vertex_present), "size": s.template.size,
                "counts": s.template.counts, "vertices": s.template.vertices}}


def state_from_tree(t: dict) -> State:
    return State(bool(t["directed"]), pd.Index(t["ids"]), t["alive"], t["comp"], _columns_in(t["vattrs"]),
                 dict(t["vkinds"]), t["keys"], t["key_slots"], t["src"], t["dst"], t["mult"], t["touched"],
                 _columns_in(t["eattrs"]), dict(t["ekinds"]), frozenset(t["static_vertex"]),
                 frozenset(t["static_edge"]), int(t["batch"]), float(t["time"]), t["free"],
                 None if t["template"] is None else TemplateValues(t["template"]["keys"],
                                                                   _columns_in(t["template"]["edge"]),
                                                                   dict(t["template"]["vertex_present"]),
                                                                   int(t["template"]["size"]),
                                                                   t["template"]["counts"],
                                                                   int(t["template"]["vertices"])))


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
    """Exactly-once state in ``directory``: a full state file plus a log of the batches applied since.

    Every batch's de-duplicated updates, the resulting producer marks and what the elastic buffer
    then holds go to one log file, written to a temporary name, fsynced and renamed (atomic) by a
    writer thread while the batch is applied (:meth:`begin`); :meth:`commit` returns once it is in
    place, so a committed batch survives a crash. Every ``full_every`` batches the whole state is
    written the same way by a background thread (states are immutable, so the writer reads a stable
    one while later batches go on); once it is in place, the log files it covers are removed. Loading
    replays the logged batches on the newest full state; applying a batch is deterministic, so this
    rebuilds exactly the state that was committed. The first commit writes the full state
    synchronously: it is the base every log replays on.

    Snapshots are recorded in their own small file (:meth:`snapshot_started`,
    :meth:`snapshot_done`): the batch the last snapshot covers tells a restart whether the buffer
    still holds updates that no GoFS instance has, and an interrupted snapshot's (start, end) lets
    a restart recognise the instance if its commit landed.
    """

    def __init__(self, directory: str, full_every: int = 20):
        self.directory = private_directory(directory)
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
        self._failure: BaseException | None = None

    def _write_bytes(self, path: str, data: bytes, chunk: int | None = None) -> None:
        """Write ``data`` to ``path`` atomically (:func:`gofs.files.write_atomic`). With ``chunk``, the
        data goes to disk ``chunk`` bytes at a time, each synced before the next is written: a full
        state is megabytes, and a log fsync issued meanwhile (by the other writer) would otherwise
        wait for all of them to reach the disk."""
        view = memoryview(data)
        step = chunk or max(len(view), 1)

        def write(out):
            for start in range(0, len(view), step):
                out.write(view[start:start + step])
                out.flush()
                _datasync(out.fileno())

        files.write_atomic(path, write=write)

    def _write(self, path: str, payload: dict, chunk: int | None = None) -> None:
        self._write_bytes(path, datafile.dumps({"format": FORMAT, **payload}), chunk)

    def _log(self, batch_no: int) -> str:
        return os.path.join(self.directory, f"{LOG_PREFIX}{batch_no:012d}{LOG_SUFFIX}")

    def _logged(self) -> list[tuple[int, str]]:
        names = sorted(n for n in os.listdir(self.directory) if n.startswith(LOG_PREFIX) and n.endswith(LOG_SUFFIX))
        return [(int(n[len(LOG_PREFIX):-len(LOG_SUFFIX)]), os.path.join(self.directory, n)) for n in names]

    def _write_full(self, payload: dict) -> None:
        self._write(self.path, payload, chunk=_FULL_CHUNK)
        for number, path in self._logged():
            if number <= payload["states"][0]["batch"]:
                os.remove(path)

    def _write_full_in_background(self, payload: dict) -> None:
        try:
            self._write_full(payload)
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

    def commit(self, pending: "_LogWrite | None", state, hwm: dict, buffer: dict,
               gaps: dict | None = None, owner: np.ndarray | None = None, queries: list | None = None) -> None:
        """Return once the batch that made ``state`` is durable; every ``full_every`` batches,
        start writing the full state in the background. ``state``: one :class:`State`, or the
        states of a partitioned graph's workers (in worker order) with ``owner`` (bucket -> worker), or
        a function returning those states, called only when the full state is written (workers in
        Spark tasks send theirs then)."""
        owner = np.zeros(1, np.int64) if owner is None else np.asarray(owner, np.int64)

        def payload() -> dict:
            states = state() if callable(state) else state
            states = [states] if isinstance(states, State) else list(states)
            return {"states": [state_to_tree(s) for s in states], "owner": owner, "hwm": dict(hwm),
                    "gaps": dict(gaps or {}), "buffer": buffer, "queries": list(queries or [])}

        if pending is None:
            self.wait()
            self._write_full(payload())
            self._since_full = 0
            return
        pending.result()
        self._since_full += 1
        if self._since_full >= self.full_every and (self._full is None or self._full.done()):
            self._since_full = 0
            self._full = self._full_writer.submit(self._write_full_in_background, payload())

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
        self._write_bytes(self.snapshots_path, json.dumps({"format": FORMAT, **record}).encode())

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
        if "states" in payload:
            states, owner = [state_from_tree(s) for s in payload["states"]], np.asarray(payload["owner"], np.int64)
        else:                                           # written before the live graph was partitioned
            states, owner = [state_from_tree(payload["state"])], np.zeros(1, np.int64)
        graph = PartitionedGraph.restore(states, owner)
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
