"""The graph as dense numpy arrays, as every partitioner takes it: checks and quality measures.

Vertices are ``0..num_vertices-1``; ``src`` and ``dst`` are the edges, read as
undirected (they may repeat, point either way or be self-loops). A partition is
one ``int32`` label per vertex.
"""
from __future__ import annotations

import numpy as np

from gofs.errors import InputError
from sparkshim.compat import release_local_checkpoint


def edge_cut(parts, src, dst) -> int:
    """Edge rows (self-loops excluded, duplicates counted) whose endpoints lie in different partitions."""
    parts = np.asarray(parts)
    return int(np.count_nonzero(parts[np.asarray(src)] != parts[np.asarray(dst)]))


def balance(parts, num_partitions: int) -> float:
    """Largest partition size over the mean size: 1.0 is perfect balance."""
    parts = np.asarray(parts)
    if parts.size == 0:
        return 1.0
    return float(np.bincount(parts, minlength=num_partitions).max() * num_partitions / parts.size)


def checked(num_vertices: int, src, dst, num_partitions: int) -> tuple[np.ndarray, np.ndarray]:
    """Fail early with a clear message instead of deep inside METIS or scipy."""
    if num_partitions < 1:
        raise InputError(f"num_partitions must be >= 1, got {num_partitions}")
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    if src.shape != dst.shape or src.ndim != 1:
        raise InputError(f"src and dst must be 1-d arrays of equal length, got shapes {src.shape} and {dst.shape}")
    if src.size and (min(src.min(), dst.min()) < 0 or max(src.max(), dst.max()) >= num_vertices):
        raise InputError(f"edge endpoints must lie in [0, {num_vertices})")
    return src, dst


def summed_repeats(a, b, w):
    """The pairs ``(a, b)`` once each, sorted, with the weights ``w`` of their repeats summed."""
    if a.size == 0:
        return a, b, w
    low = min(a.min(), b.min())
    span = int(max(a.max(), b.max())) - int(low) + 1
    if span <= _ONE_KEY_SPAN:       # one int64 key: a stable sort of it costs half a lexsort of both
        key = (a - low).astype(np.int64, copy=False) * span + (b - low)
        order = np.argsort(key, kind="stable")
        key = key[order]
        new = key[1:] != key[:-1]
        a, b = a[order], b[order]
    else:
        order = np.lexsort((b, a))
        a, b = a[order], b[order]
        new = (a[1:] != a[:-1]) | (b[1:] != b[:-1])
    first = np.flatnonzero(np.r_[True, new])
    return a[first], b[first], np.add.reduceat(w[order], first)


_ONE_KEY_SPAN = 3_037_000_499       # the largest span whose pairs' keys fit an int64


def collect_labels(labels, num_vertices: int) -> np.ndarray:
    """A (``vid``, ``part``) DataFrame as the driver-side partition array, its checkpoint released."""
    try:
        result = labels.toPandas()
    finally:
        release_local_checkpoint(labels)
    parts = np.empty(num_vertices, dtype=np.int32)
    parts[result["vid"].to_numpy()] = result["part"].to_numpy()
    return parts
