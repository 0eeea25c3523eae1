"""Stable hashing of vertex ids to buckets, and buckets to workers on a consistent-hash ring.

Python's ``hash`` is salted per process, so it cannot route the same key to
the same bucket after a restart. Integer ids go through splitmix64 (a bijective
64-bit mixer, vectorised in numpy); string ids through pandas' SipHash with its
fixed key (``pandas.util.hash_array``), which is the same in every process.

A worker owns the arc of the ring up to each of its virtual nodes, so adding a
worker only takes buckets from others (about 1/(n+1) of them) and removing one
only hands its buckets out: no bucket moves between two surviving workers.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from gofs.errors import InputError

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def splitmix64(values) -> np.ndarray:
    """splitmix64 finaliser of each 64-bit integer (Steele, Lea, Flood, OOPSLA 2014)."""
    z = np.asarray(values).astype(np.uint64, copy=True)
    with np.errstate(over="ignore"):
        z += _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def stable_hash(ids) -> np.ndarray:
    """A 64-bit hash of each id that is the same in every process and run."""
    ids = np.asarray(ids)
    if ids.dtype.kind in "iu":
        return splitmix64(ids.astype(np.int64).view(np.uint64))
    return pd.util.hash_array(ids.astype(object), categorize=False)


def bucket_of(ids, num_buckets: int) -> np.ndarray:
    """The bucket (0 .. num_buckets-1) of each id."""
    if num_buckets > 0 and num_buckets & (num_buckets - 1) == 0:      # a power of two: the same remainder, by a mask
        return (stable_hash(ids) & np.uint64(num_buckets - 1)).astype(np.int64)
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
