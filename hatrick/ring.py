"""Stable hashing of vertex ids to buckets, and buckets to workers on a consistent-hash ring.

Python's ``hash`` is salted per process, so it cannot route the same key to
the same bucket after a restart. Integer ids go through splitmix64 (a bijective
64-bit mixer; one numba pass that also takes the bucket, since the driver hashes
every update of a batch); string ids through pandas' SipHash with its
fixed key (``pandas.util.hash_array``), which is the same in every process.

A worker owns the arc of the ring up to each of its virtual nodes, so adding a
worker only takes buckets from others (about 1/(n+1) of them) and removing one
only hands its buckets out: no bucket moves between two surviving workers.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from numba import njit

from gofs.errors import InputError
from gofs.numba_cache import serialise_compilation

serialise_compilation()  # one compilation at a time on this machine: numba's kernel cache stays whole

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


@njit(cache=True, nogil=True)
def mix64(z):
    """splitmix64 of one uint64 (wrapping arithmetic)."""
    z = z + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


@njit(cache=True, nogil=True)
def _mixed(values):
    out = np.empty(len(values), np.uint64)
    for i in range(len(values)):
        out[i] = mix64(values[i])
    return out


@njit(cache=True, nogil=True)
def _mixed_buckets(values, num_buckets):
    """``splitmix64(values) % num_buckets`` in one pass (no temporaries per step of the mix)."""
    out = np.empty(len(values), np.int64)
    count = np.uint64(num_buckets)
    for i in range(len(values)):
        out[i] = np.int64(mix64(values[i]) % count)
    return out


def splitmix64(values) -> np.ndarray:
    """splitmix64 finaliser of each 64-bit integer (Steele, Lea, Flood, OOPSLA 2014)."""
    return _mixed(np.ascontiguousarray(np.asarray(values).astype(np.uint64)))


def stable_hash(ids) -> np.ndarray:
    """A 64-bit hash of each id that is the same in every process and run."""
    ids = np.asarray(ids)
    if ids.dtype.kind in "iu":
        return splitmix64(ids.astype(np.int64).view(np.uint64))
    return pd.util.hash_array(ids.astype(object), categorize=False)


def bucket_of(ids, num_buckets: int) -> np.ndarray:
    """The bucket (0 .. num_buckets-1) of each id: ``stable_hash(ids) % num_buckets``."""
    ids = np.asarray(ids)
    if ids.dtype.kind in "iu":
        return _mixed_buckets(np.ascontiguousarray(ids.astype(np.int64, copy=False)).view(np.uint64), num_buckets)
    return (stable_hash(ids) % np.uint64(num_buckets)).astype(np.int64)


class HashRing:
    """Workers (non-negative ints) on a consistent-hash ring with ``vnodes`` virtual nodes each.

    Example
    -------
    >>> ring = HashRing([0, 1], vnodes=64)
    >>> owner = ring.owners(64)                 # bucket -> worker
    >>> bigger = ring.with_worker(2)
    >>> moved = (bigger.owners(64) != owner)    # only buckets that went to worker 2
    """

    def __init__(self, workers, vnodes: int = 128):
        self.workers = sorted(int(w) for w in workers)
        if not self.workers:
            raise InputError("a ring needs at least one worker")
        if len(set(self.workers)) != len(self.workers) or self.workers[0] < 0:
            raise InputError(f"workers must be distinct non-negative ints, got {workers}")
        self.vnodes = int(vnodes)
        w = np.repeat(np.array(self.workers, np.uint64), self.vnodes)
        v = np.tile(np.arange(self.vnodes, dtype=np.uint64), len(self.workers))
        points = splitmix64((w << np.uint64(32)) | v)
        order = np.argsort(points, kind="stable")
        self._points, self._owner = points[order], w[order].astype(np.int64)

    def owners(self, num_buckets: int) -> np.ndarray:
        """The worker of each bucket 0 .. num_buckets-1 (the first virtual node clockwise)."""
        position = splitmix64(np.arange(num_buckets, dtype=np.uint64) ^ np.uint64(0xA5A5A5A5A5A5A5A5))
        at = np.searchsorted(self._points, position) % len(self._points)
        return self._owner[at]

    def with_worker(self, worker: int) -> "HashRing":
        return HashRing(self.workers + [worker], self.vnodes)

    def without_worker(self, worker: int) -> "HashRing":
        if worker not in self.workers:
            raise InputError(f"worker {worker} is not on the ring {self.workers}")
        return HashRing([w for w in self.workers if w != worker], self.vnodes)
