"""Compiled Louvain local moving for one sub-graph (numba).

Level 1 of partitioned Louvain is one local-moving phase per sub-graph (Blondel et al.
2008): vertices, in a seeded random order, move to the neighbouring community with the
best modularity gain until a full pass moves none. igraph's ``community_multilevel`` does
this in C but always runs every level after it, which level 1 throws away, and building
its graph costs Python lists; no numpy or scipy call does a sequential sweep whose moves
depend on each other, so this is a numba kernel (``cache=True``: compiled once, the
machine code kept in ``algorithms/__pycache__`` where every Spark Python worker loads it;
``nogil``: tasks of one worker process do not serialise on the GIL).
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from numba import njit


@njit(cache=True, nogil=True)
def _local_moves(indptr, indices, weights, degree, order, resolution, two_m):
    """Move vertices in ``order`` until a pass moves none; every move raises modularity by more
    than a rounding error. Returns each vertex's community (not dense)."""
    n = len(degree)
    community = np.arange(n)
    total = degree.copy()
    to_community = np.zeros(n)
    touched = np.empty(n, dtype=np.int64)
    tolerance = 1e-12 * two_m
    moved = 1
    while moved:
        moved = 0
        for v in order:
            own = community[v]
            count = 0
            for j in range(indptr[v], indptr[v + 1]):
                u = indices[j]
                if u == v:
                    continue
                c = community[u]
                if to_community[c] == 0.0:
                    touched[count] = c
                    count += 1
                to_community[c] += weights[j]
            total[own] -= degree[v]
            scale = resolution * degree[v] / two_m
            best, best_gain = own, to_community[own] - scale * total[own]
            for i in range(count):
                c = touched[i]
                gain = to_community[c] - scale * total[c]
                if gain > best_gain + tolerance:
                    best, best_gain = c, gain
            total[best] += degree[v]
            community[v] = best
            if best != own:
                moved += 1
            for i in range(count):
                to_community[touched[i]] = 0.0
    return community


def local_moving(n: int, src: np.ndarray, dst: np.ndarray, weight: np.ndarray, resolution: float,
                 seed: int) -> np.ndarray:
    """One Louvain level (local moving to convergence) on an undirected weighted edge list over
    ``n`` vertices: each vertex's community, dense 0..k-1. Parallel
    edges add up; a self-loop of weight w adds 2w to its vertex's degree (NetworkX's modularity)."""
    if n == 0 or len(src) == 0 or not np.any(weight > 0):
        return np.arange(n, dtype=np.int64)
    w = np.asarray(weight, dtype=np.float64)
    adjacency = sp.coo_matrix((np.concatenate([w, w]), (np.concatenate([src, dst]), np.concatenate([dst, src]))),
                              shape=(n, n)).tocsr()
    adjacency.sum_duplicates()
    degree = np.asarray(adjacency.sum(axis=1)).ravel()
    order = np.random.default_rng(seed).permutation(n)
    community = _local_moves(adjacency.indptr.astype(np.int64), adjacency.indices.astype(np.int64),
                             adjacency.data, degree, order, float(resolution), float(degree.sum()))
    return np.unique(community, return_inverse=True)[1].astype(np.int64)
