"""Which bucket a vertex id is in: a stable hash, or a hash within its GoFS partition's group.

A stream's workers own buckets, so the bucket function decides its boundary: the vertices a
worker holds as ghosts because an edge it holds names them. Hashed buckets (the default) scatter
every neighbourhood over the workers, so on a graph with locality each of W workers still holds
~all vertices (owned or ghost) and its per-vertex passes do not shrink with W. Buckets aligned
with the graph's partitions (``buckets="partitions"``) give partition ``p`` of ``P`` its own group
of the ``count`` buckets (``[p * count // P, (p + 1) * count // P)``, at least one bucket) and put
each template vertex in a bucket of its partition's group (a hash of its id picks which); a worker
owning whole groups owns METIS partitions, so its boundary is their cut. Ids that are not in the
template (added by the stream or an instance) keep their hashed bucket.

Aligned buckets cost O(template vertices) memory wherever ids are bucketed, the driver
included (it routes every update): the partition of each template id, as an array indexed by
the id where the ids are integers in [0, DENSE_SPAN * V) (2 bytes per possible id: ids 0..V-1
cost 2 bytes per vertex, and a batch's lookups stay in a cache-sized array), else as an
open-addressing table (:mod:`hatrick.keyindex`) from each id's 63-bit hash, 40 bytes per
template vertex (16-byte rows, at most 40% full when built); plus the build's transient arrays.
That is why they are opt-in (the driver holds no O(V) state otherwise). A lookup is O(1) per
id, so routing a batch stays O(batch). The table is built from the GoFS template in each process
(:meth:`Buckets.prepare`: a stream and a worker's Spark task at their start, only the store
travels), so the same id gets the same bucket after a restart.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from gofs.errors import InputError
from gofs.numba_cache import serialise_compilation
from hatrick import keyindex
from hatrick.ring import bucket_of, mix64, stable_hash

serialise_compilation()  # one compilation at a time on this machine: numba's kernel cache stays whole

HASH, PARTITIONS = "hash", "partitions"
DENSE_SPAN = 4           # integer ids below DENSE_SPAN * V are looked up in an array indexed by the id


class Buckets:
    """The bucket function of a stream: ``of(ids, count)`` is the bucket (0 .. count-1) of each id.

    Parameters
    ----------
    kind : ``"hash"`` (``stable_hash(id) % count``, :func:`hatrick.ring.bucket_of`) or
        ``"partitions"`` (template vertices in their GoFS partition's group, see the module)
    store : the :class:`gofs.store.GraphStore` whose template partitions ``"partitions"`` follows

    Example
    -------
    >>> Buckets().of(np.array([1, 2, 3]), 64)                      # doctest: +SKIP
    >>> Buckets("partitions", g.store).of(np.array([1, 2, 3]), 64)  # doctest: +SKIP
    """

    def __init__(self, kind: str = HASH, store=None):
        if kind not in (HASH, PARTITIONS):
            raise InputError(f"buckets must be {HASH!r} or {PARTITIONS!r}, got {kind!r}")
        if kind == PARTITIONS and store is None:
            raise InputError("buckets='partitions' needs the GoFS graph whose partitions they follow")
        self.kind = kind
        self._store = store if kind == PARTITIONS else None
        self._table = None              # template id -> partition (built on first use, see the module)

    def __getstate__(self):
        """What a Spark task gets: the kind and the store, not the table (it builds its own)."""
        return {"kind": self.kind, "store": self._store}

    def __setstate__(self, state):
        self.__init__(state["kind"], state["store"])

    @property
    def partitions(self) -> int:
        """Partition groups the buckets are split into (1 for hashed buckets)."""
        return self._store.num_partitions if self._store is not None else 1

    def of(self, ids, count: int) -> np.ndarray:
        """The bucket of each id among ``count`` buckets (int64). O(len(ids)); integer ids under
        an indexed table take one pass (hash, lookup and bucket per id: the driver buckets both
        ends of every update of a batch)."""
        if self.kind == HASH:
            return bucket_of(ids, count)
        ids = np.asarray(ids)
        table = self._partitions_of_ids()
        starts, sizes = self._groups_at(count)
        if isinstance(table, np.ndarray) and ids.dtype.kind in "iu":
            return _indexed_grouped(np.ascontiguousarray(ids.astype(np.int64, copy=False)).view(np.uint64), table,
                                    starts, sizes, np.uint64(count))
        hashed = stable_hash(ids)
        if isinstance(table, np.ndarray):
            partition = _indexed(np.ascontiguousarray(ids.astype(np.int64, copy=False)), table)
        else:
            partition = table.lookup((hashed >> np.uint64(1)).view(np.int64))
        return _grouped(hashed, partition, starts, sizes, np.uint64(count))

    def _groups_at(self, count: int) -> tuple[np.ndarray, np.ndarray]:
        """(first bucket, bucket count as uint64) of each partition's group among ``count``
        buckets (see the module), so that bucketing an id costs one division."""
        partitions = np.arange(self.partitions + 1, dtype=np.int64) * count // self.partitions
        return partitions[:-1], np.maximum(partitions[1:] - partitions[:-1], 1).astype(np.uint64)

    def prepare(self) -> "Buckets":
        """Build the id -> partition table now, not on first use (a Spark task does at its start, so
        that a rescale's cut-over never waits for a new worker's build); returns this function."""
        if self.kind == PARTITIONS:
            self._partitions_of_ids()
        return self

    def groups(self, count: int) -> np.ndarray:
        """The partition group of each bucket 0 .. count-1 (all 0 for hashed buckets); where there are
        more partitions than buckets, partitions share a bucket and it is in the last one's group."""
        starts = np.arange(self.partitions, dtype=np.int64) * count // self.partitions
        return np.searchsorted(starts, np.arange(count), side="right") - 1

    def dealt(self, count: int, workers: int) -> np.ndarray:
        """The owner of each bucket with each partition's group whole on one worker, the groups dealt
        out to ``workers`` in order (where a stream with aligned buckets starts, before its load
        evens the workers' edges out)."""
        return self.groups(count) * workers // self.partitions

    def _partitions_of_ids(self):
        """The template's partition of each id: an array indexed by the id, or a
        :class:`hatrick.keyindex.KeyIndex` of hashed ids (see the module)."""
        if self._table is None:
            store = self._store
            parts = [store.read_vertex_partition(p, attributes=[]).column("id").to_numpy(zero_copy_only=False)
                     for p in range(store.num_partitions)]
            partition = np.repeat(np.arange(len(parts), dtype=np.int64), [len(part) for part in parts])
            ids = np.concatenate(parts) if parts else np.zeros(0, np.int64)
            if ids.dtype.kind in "iu" and len(ids) and ids.min() >= 0 and ids.max() < DENSE_SPAN * len(ids):
                self._table = np.full(int(ids.max()) + 1, -1, np.int16 if len(parts) < 2 ** 15 else np.int32)
                self._table[ids] = partition
            else:
                self._table = keyindex.build((stable_hash(ids) >> np.uint64(1)).view(np.int64), partition)
        return self._table


@njit(cache=True, nogil=True)
def _indexed(ids, table):
    """``table[id]`` of each id, -1 outside the table."""
    out = np.empty(len(ids), np.int64)
    for i in range(len(ids)):
        out[i] = table[ids[i]] if 0 <= ids[i] < len(table) else -1
    return out


@njit(cache=True, nogil=True)
def _bucket(hashed, partition, starts, sizes, count):
    """An id's bucket: within its partition's group where ``partition`` is one (>= 0), else
    ``hashed % count`` (the hashed bucket)."""
    if partition < 0:
        return np.int64(hashed % count)
    return starts[partition] + np.int64(hashed % sizes[partition])


@njit(cache=True, nogil=True)
def _grouped(hashed, partition, starts, sizes, count):
    """:func:`_bucket` of each id from its hash and partition."""
    out = np.empty(len(hashed), np.int64)
    for i in range(len(hashed)):
        out[i] = _bucket(hashed[i], partition[i], starts, sizes, count)
    return out


@njit(cache=True, nogil=True)
def _indexed_grouped(ids, table, starts, sizes, count):
    """:func:`_bucket` of each integer id (as uint64), its partition ``table[id]`` (none outside
    the table): :func:`hatrick.ring.stable_hash`, :func:`_indexed` and :func:`_grouped` in one pass."""
    out = np.empty(len(ids), np.int64)
    size = np.uint64(len(table))
    for i in range(len(ids)):
        partition = table[np.int64(ids[i])] if ids[i] < size else -1
        out[i] = _bucket(mix64(ids[i]), partition, starts, sizes, count)
    return out
