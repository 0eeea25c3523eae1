"""METIS (through pymetis): the best cuts, for graphs (or coarse graphs) that fit in one process."""
from __future__ import annotations

import numpy as np
import pymetis
import scipy.sparse as sp

from gofs.partition.arrays import checked


def metis_partition(num_vertices: int, src, dst, num_partitions: int, seed: int = 0) -> np.ndarray:
    """Minimise the edge cut with k-way METIS, partitions balanced to within 3% in vertices.

    Uses multilevel k-way rather than recursive bisection: on a 1M-vertex grid it
    is about twice as fast and cuts fewer edges. METIS is deterministic for a
    given ``seed``. With at least as many partitions as vertices every vertex
    gets its own partition, the only perfectly balanced answer.
    """
    src, dst = checked(num_vertices, src, dst, num_partitions)
    if num_partitions >= num_vertices:
        return np.arange(num_vertices, dtype=np.int32)
    if num_partitions == 1:
        return np.zeros(num_vertices, dtype=np.int32)
    adjacency = _adjacency(num_vertices, src, dst)
    idx = pymetis.zero_copy_dtype()
    csr = pymetis.CSRAdjacency(adjacency.indptr.astype(idx, copy=False),
                               adjacency.indices.astype(idx, copy=False))
    _, parts = pymetis.part_graph(num_partitions, csr, recursive=False, options=pymetis.Options(seed=seed))
    return np.asarray(parts, dtype=np.int32)


def _adjacency(num_vertices: int, src: np.ndarray, dst: np.ndarray) -> sp.csr_matrix:
    """Adjacency as METIS wants it: both directions, no self-loops, no repeated neighbours."""
    keep = src != dst
    rows = np.concatenate([src[keep], dst[keep]])
    cols = np.concatenate([dst[keep], src[keep]])
    ones = np.ones(rows.size, dtype=np.int32)
    return sp.coo_matrix((ones, (rows, cols)), shape=(num_vertices, num_vertices)).tocsr()


def weighted_parts(num_vertices: int, heads: np.ndarray, tails: np.ndarray, edge_weights: np.ndarray,
                   vertex_weights: np.ndarray, num_partitions: int, seed: int = 0, recursive: bool = False,
                   ufactor: int | None = None, tries: int = 1) -> np.ndarray:
    """METIS on a weighted graph given as each undirected edge once (``heads[i]``, ``tails[i]``,
    no self-loops, no repeats), for the multilevel partitioner's coarse graphs and id ranges.
    Weights are clipped to int32, as METIS takes them. ``tries``: METIS's ``ncuts``, the best
    of that many partitionings. Returns ``int32`` labels."""
    k = int(num_partitions)
    if k == 1 or num_vertices <= 1:
        return np.zeros(num_vertices, dtype=np.int32)
    if heads.size == 0:
        return _heaviest_first(vertex_weights, k)
    idx = pymetis.zero_copy_dtype()
    limit = np.iinfo(np.int32).max
    xadj, adjncy, eweights = _weighted_csr(num_vertices, heads, tails, np.minimum(edge_weights, limit), idx)
    options = pymetis.Options(seed=seed, ncuts=int(tries), **({} if ufactor is None else {"ufactor": ufactor}))
    _, parts = pymetis.part_graph(k, xadj=xadj, adjncy=adjncy, vweights=np.minimum(vertex_weights, limit).astype(idx),
                                  eweights=eweights, recursive=recursive, options=options)
    return np.asarray(parts, dtype=np.int32)


def _weighted_csr(n: int, rows: np.ndarray, cols: np.ndarray, weights: np.ndarray, dtype):
    """CSR arrays (xadj, adjncy, eweights) of the undirected graph with each edge given once;
    neighbours sorted, so METIS sees the same input whatever order Spark collected the rows in
    (scipy's linear-time CSR build: a lexsort of both directions cost 4x as much)."""
    both = sp.csr_matrix((np.concatenate([weights, weights]).astype(dtype),
                          (np.concatenate([rows, cols]), np.concatenate([cols, rows]))), shape=(n, n))
    both.sort_indices()
    return both.indptr.astype(dtype, copy=False), both.indices.astype(dtype, copy=False), both.data


def _heaviest_first(weights: np.ndarray, k: int) -> np.ndarray:
    """Balanced assignment of weighted vertices with no edges: heaviest first, dealt out
    0, 1, .., k-1, k-1, .., 0 (a snake), so every part gets one of each k heaviest."""
    order = np.argsort(-weights, kind="stable")
    lap = np.arange(order.size) % (2 * k)
    parts = np.empty(weights.size, dtype=np.int32)
    parts[order] = np.where(lap < k, lap, 2 * k - 1 - lap)
    return parts
