"""The task-side cache: what a Python worker keeps from one superstep and one run to the next.

Spark reuses Python worker processes, so topology loaded once stays loaded for
every later run on the same graph. One cache per process holds partition
bundles (topology plus static attributes) and instance views (an instance's
attribute values plus the sub-graph objects a program computes on, with their
derived matrices). It is bounded by bytes, not entries: the least recently used
entries go when the budget is exceeded. Keys start with the graph's identity
(its manifest uuid and root), so a re-ingested graph never sees stale topology.

The budget is a run's setting (``spark.goffish.taskCacheBytes``), not the
process's: each run reaches the cache through :func:`process_cache` with its own
budget, and an entry stays while the entries used since, with it, fit the budget
of the run that last used it. So a run with a small budget neither raises nor
lowers what another run keeps.

Cached arrays are made read-only, so a program that writes into its topology
fails at once instead of corrupting every later run.

A new process starts with an empty cache, so partition bundles are also kept on
the executor's local disk (:class:`DiskCache`): a ``spark-submit`` job's first
run reads one file per partition instead of reading Parquet and sorting edges.
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
import pickle
import stat
import tempfile
from collections import OrderedDict

import numpy as np

from gofs.files import write_atomic

DEFAULT_BUDGET = 1 << 30
DEFAULT_DISK_BUDGET = 4 << 30


def nbytes(value) -> int:
    """An estimate of the memory held by numpy arrays, scipy sparse matrices and
    containers of them (Python scalars and strings count a little)."""
    if isinstance(value, np.ndarray):
        return value.nbytes
    for attrs in (("data", "indices", "indptr"), ("data", "row", "col")):
        if all(hasattr(value, a) for a in attrs):
            return sum(nbytes(getattr(value, a)) for a in attrs)
    if isinstance(value, dict):
        return sum(nbytes(v) for v in value.values()) + 64 * len(value)
    if isinstance(value, (list, tuple)):
        return sum(nbytes(v) for v in value) + 8 * len(value)
    if dataclasses.is_dataclass(value):
        return nbytes(vars(value))
    return int(getattr(value, "nbytes", 64))         # pyarrow tables and arrays


def freeze(value):
    """Mark every numpy array in ``value`` (recursively through dicts, lists, tuples) read-only."""
    if isinstance(value, np.ndarray):
        value.flags.writeable = False
    elif isinstance(value, dict):
        for v in value.values():
            freeze(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            freeze(v)
    elif dataclasses.is_dataclass(value):
        freeze(vars(value))
    return value


class TaskCache:
    """A byte-budgeted LRU map; ``get(key, build, budget)`` builds what is missing.

    Each entry remembers the budget of the run that last asked for it: walking from the most
    recently used entry back, an entry goes once the bytes of the entries kept so far plus its
    own exceed its budget (with one budget for all, plain LRU eviction under that budget).
    """

    def __init__(self, budget: int = DEFAULT_BUDGET):
        self.budget = budget                  # for entries asked for without a budget of their own
        self._entries: OrderedDict = OrderedDict()
        self._sizes: dict = {}
        self._budgets: dict = {}
        self.used = 0

    def get(self, key, build, budget: int | None = None):
        budget = self.budget if budget is None else budget
        if key in self._entries:
            self._budgets[key] = budget
            self._entries.move_to_end(key)
            return self._entries[key]
        value = build()
        self._entries[key] = value
        self._budgets[key] = budget
        self._sizes[key] = 0
        self.grow(key, nbytes(value))
        return value

    def touch(self, keys, budget: int | None = None) -> bool:
        """Whether every one of ``keys`` is held; if so they become the most recently used, in
        order, as ``get`` of each would make them (a value held across supersteps is used again
        only while its entries stay, so the budget still bounds what a run keeps)."""
        if not all(key in self._entries for key in keys):
            return False
        budget = self.budget if budget is None else budget
        for key in keys:
            self._budgets[key] = budget
            self._entries.move_to_end(key)
        return True

    def peek(self, key, budget: int | None = None):
        """The value under ``key`` (now the most recently used), or None."""
        if key not in self._entries:
            return None
        return self.get(key, None, budget)

    def put(self, key, value, budget: int | None = None) -> None:
        """Keep ``value`` under ``key`` (replacing what was there), accounted at its size now."""
        self.discard(key)
        self.get(key, lambda: value, budget)

    def discard(self, key) -> None:
        if key in self._entries:
            del self._entries[key]
            del self._budgets[key]
            self.used -= self._sizes.pop(key)

    def grow(self, key, size: int) -> None:
        """Account ``size`` more bytes to ``key`` (derived data built after insertion)."""
        if key not in self._entries:
            return
        self._sizes[key] += size
        self.used += size
        self._evict(keep=key)

    def _evict(self, keep) -> None:
        kept = 0
        for key in reversed(list(self._entries)):
            if key != keep and kept + self._sizes[key] > self._budgets[key]:
                self.discard(key)
            else:
                kept += self._sizes[key]

    def scoped(self, budget: int) -> "ScopedCache":
        """This cache as one run sees it: everything it asks for is kept under ``budget``."""
        return ScopedCache(self, budget)

    def __contains__(self, key) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)


class ScopedCache:
    """One run's handle on a shared :class:`TaskCache`: the run's budget travels with it."""

    def __init__(self, cache: TaskCache, budget: int):
        self.cache, self.budget = cache, budget

    def get(self, key, build):
        return self.cache.get(key, build, self.budget)

    def peek(self, key):
        return self.cache.peek(key, self.budget)

    def touch(self, keys) -> bool:
        return self.cache.touch(keys, self.budget)

    def put(self, key, value) -> None:
        self.cache.put(key, value, self.budget)

    def discard(self, key) -> None:
        self.cache.discard(key)

    def grow(self, key, size: int) -> None:
        self.cache.grow(key, size)

    def __contains__(self, key) -> bool:
        return key in self.cache


class WorkingSpace:
    """A run's working data for one sub-graph: big arrays a program keeps from one superstep to
    the next but never ships. They are task-cache entries under the run's budget, so any may be
    gone at the next superstep, and the program rebuilds what is missing from its state.

    ``handle()`` gives the :class:`ScopedCache` of the run now computing on the sub-graph;
    keys are the program's own (e.g. its run token) under ``prefix``.
    """

    def __init__(self, handle, prefix: tuple):
        self._handle, self._prefix = handle, prefix

    def get(self, key):
        return self._handle().peek((*self._prefix, key))

    def put(self, key, value) -> None:
        self._handle().put((*self._prefix, key), value)

    def discard(self, key) -> None:
        self._handle().discard((*self._prefix, key))


_PROCESS_CACHE = TaskCache()


def process_cache(budget: int) -> ScopedCache:
    """The cache of this Python worker process, as a run with ``budget`` bytes uses it."""
    return _PROCESS_CACHE.scoped(budget)


class DiskCache:
    """Values kept on this machine's local disk, one file per key, across processes.

    ``directory`` (default: ``goffish-bundles-<uid>`` in the temporary directory) is
    made private to this user (mode 0700) and used only while it stays so: its files
    are unpickled, so nobody else may be able to write them. Keys must name the
    graph version (see :func:`gopher.worker.partition_view`), so a re-ingested graph
    never reads another version's files. Files are written atomically (a torn file is
    never read) and the least recently used go once the directory holds more than
    ``budget`` bytes. A file that cannot be read is rebuilt, a directory that cannot
    be used is skipped: the disk cache only ever saves work.
    """

    def __init__(self, directory: str | None = None, budget: int = DEFAULT_DISK_BUDGET):
        self.given, self.budget = directory, budget

    @property
    def directory(self) -> str:
        """Resolved where the cache is used (on the executor), not where it was configured."""
        return self.given or os.path.join(tempfile.gettempdir(), f"goffish-bundles-{os.getuid()}")

    def _private(self) -> bool:
        try:
            os.makedirs(self.directory, mode=0o700, exist_ok=True)
            info = os.lstat(self.directory)
        except OSError:
            return False
        return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o077

    def get(self, key, build):
        """The value stored under ``key``, else ``build()`` (stored for the next process)."""
        if not self._private():
            return build()
        path = os.path.join(self.directory, hashlib.sha256(repr(key).encode()).hexdigest() + ".pickle")
        try:
            with open(path, "rb") as handle:
                value = pickle.load(handle)
            os.utime(path)
            return value
        except Exception:                  # missing, torn by a crash, or from another pickle format
            pass
        value = build()
        try:
            write_atomic(path, write=lambda out: pickle.dump(value, out, protocol=pickle.HIGHEST_PROTOCOL))
            self._trim(keep=path)
        except OSError:
            pass
        return value

    def _trim(self, keep: str) -> None:
        entries = []
        for entry in os.scandir(self.directory):
            if entry.name.endswith(".pickle") and entry.is_file():
                info = entry.stat()
                entries.append((info.st_mtime, info.st_size, entry.path))
        used = sum(size for _, size, _ in entries)
        for _, size, path in sorted(entries):
            if used <= self.budget:
                break
            if path != keep:
                os.remove(path)
                used -= size
