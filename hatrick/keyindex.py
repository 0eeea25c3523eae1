"""The live graph's edge-key index: packed edge key -> slot, a hash table changed in place.

A batch touches at most its own keys, so the index costs O(batch) a batch: a sorted index (one
merge pass per batch) costs O(live edges), and a search per key misses the cache ~log(E) times.
Open addressing with linear probing over a table of (key, slot) pairs, at most
70% full; a deletion shifts the later pairs of its run back (no tombstones), so probe runs stay
short under any churn.

The table is changed in place, so it belongs to one state at a time: each change bumps
``version``, and a :class:`hatrick.live.State` holds the version it was left at. The state
holding the current version is the only one that may use the index; any other (one a batch was
staged on and abandoned, or applied to twice) rebuilds its own from its slots (:func:`build`).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from gofs.numba_cache import serialise_compilation

serialise_compilation()  # one compilation at a time on this machine: numba's kernel cache stays whole

EMPTY = np.int64(-1)       # a free row's key (packed keys are never negative)


class KeyIndex:
    """Edge keys to slots (:func:`build`); ``version`` counts the changes, see the module."""

    def __init__(self, table: np.ndarray, count: int):
        self.table = table          # (capacity, 2): key, slot; key EMPTY where free
        self.count = count
        self.version = 0

    def __len__(self) -> int:
        return self.count

    def lookup(self, keys: np.ndarray) -> np.ndarray:
        """The slot of each key, -1 where it is not in the index."""
        return _lookup(self.table, np.ascontiguousarray(keys, np.int64))

    def update(self, removed: np.ndarray, added: np.ndarray, added_slots: np.ndarray) -> None:
        """Drop keys ``removed`` (all in the index), then add distinct keys ``added`` (none in it)
        held in ``added_slots``."""
        _remove(self.table, np.ascontiguousarray(removed, np.int64))
        self.count -= len(removed)
        if self.count + len(added) > 0.7 * len(self.table):
            self.table = _rehashed(self.table, _capacity(self.count + len(added)))
        _insert(self.table, np.ascontiguousarray(added, np.int64), np.ascontiguousarray(added_slots, np.int64))
        self.count += len(added)

    def items(self) -> tuple[np.ndarray, np.ndarray]:
        """(keys, slots) of every entry, in table order."""
        used = self.table[:, 0] != EMPTY
        return self.table[used, 0], self.table[used, 1]


def build(keys: np.ndarray, slots: np.ndarray) -> KeyIndex:
    """An index of distinct ``keys`` held in ``slots``."""
    table = np.full((_capacity(len(keys)), 2), EMPTY, np.int64)
    _insert(table, np.ascontiguousarray(keys, np.int64), np.ascontiguousarray(slots, np.int64))
    return KeyIndex(table, len(keys))


def _capacity(count: int) -> int:
    """Rows for ``count`` keys: a table starts 40% full, and starts again so when over 70% full
    (linear probing stays near one cache line a search up to there)."""
    return max(16, int(count / 0.4) + 1)


@njit(cache=True, nogil=True, inline="always")
def _home(key, size):
    """Where ``key``'s run starts among ``size`` rows: the top 32 bits of key * 2^64/phi (Fibonacci
    hashing; the low bits of a packed key are the destination's vid, which alone would crowd
    neighbouring sources' keys together) scaled to ``size`` by one multiply (no modulo)."""
    h = (np.uint64(key) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(32)
    return np.int64((h * np.uint64(size)) >> np.uint64(32))


@njit(cache=True, nogil=True, inline="always")
def _next(at, size):
    at += 1
    return 0 if at == size else at


@njit(cache=True, nogil=True, inline="always")
def _gap(start, end, size):
    """Rows from ``start`` forward to ``end``, wrapping round."""
    return end - start if end >= start else end - start + size


@njit(cache=True, nogil=True)
def _lookup(table, keys):
    size = len(table)
    out = np.empty(len(keys), np.int64)
    for i in range(len(keys)):
        key = keys[i]
        at = _home(key, size)
        while table[at, 0] != key and table[at, 0] != EMPTY:
            at = _next(at, size)
        out[i] = table[at, 1] if table[at, 0] == key else -1
    return out


@njit(cache=True, nogil=True)
def _insert(table, keys, slots):
    size = len(table)
    for i in range(len(keys)):
        at = _home(keys[i], size)
        while table[at, 0] != EMPTY:
            at = _next(at, size)
        table[at, 0], table[at, 1] = keys[i], slots[i]


@njit(cache=True, nogil=True)
def _remove(table, keys):
    """Delete each key, shifting back every later pair of its run that may move into the hole
    (one whose home is not cyclically within (hole, its place])."""
    size = len(table)
    for i in range(len(keys)):
        hole = _home(keys[i], size)
        while table[hole, 0] != keys[i]:
            if table[hole, 0] == EMPTY:
                raise KeyError("hatrick.keyindex: removing a key that is not in the index")
            hole = _next(hole, size)
        at = hole
        while True:
            at = _next(at, size)
            key = table[at, 0]
            if key == EMPTY:
                break
            home = _home(key, size)
            if _gap(home, at, size) >= _gap(hole, at, size):           # home at or before the hole
                table[hole, 0], table[hole, 1] = key, table[at, 1]
                hole = at
        table[hole, 0], table[hole, 1] = EMPTY, EMPTY


@njit(cache=True, nogil=True)
def _rehashed(table, size):
    out = np.full((size, 2), EMPTY, np.int64)
    _insert(out, table[:, 0][table[:, 0] != EMPTY].copy(), table[:, 1][table[:, 0] != EMPTY].copy())
    return out
