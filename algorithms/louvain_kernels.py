"""Compiled Louvain local moving for one sub-graph (numba).

Level 1 of partitioned Louvain is one local-moving phase per sub-graph (Blondel et al.
2008): vertices, in a seeded random order, move to the neighbouring community with the
best modularity gain until a full pass moves none. igraph's ``community_multilevel`` does
this in C but always runs every level after it, which level 1 throws away, and building
its graph costs Python lists; no numpy or scipy call does a sequential sweep whose moves
depend on each other, so this is a numba kernel (``cache=True``: compiled once, the
machine code kept in ``algorithms/__pycache__`` where every Spark Python worker loads it;
``nogil``: tasks of one worker process do not serialise on the GIL).

The same kernel runs Leiden's second iteration on a sub-graph (:func:`moving_from`): vertices
begin in the whole graph's communities, with the neighbours in other sub-graphs held fixed,
and then its refinement (:func:`local_moving` inside each community, with whole-graph degrees).
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from numba import njit

from gofs.numba_cache import serialise_compilation

serialise_compilation()  # one compilation at a time on this machine: numba's kernel cache stays whole


@njit(cache=True, nogil=True)
def _local_moves(indptr, indices, weights, degree, order, resolution, two_m, start, total):
    """Move the vertices in ``order`` until a pass moves none; every move raises modularity by
    more than a rounding error. Vertices begin in ``start`` (labels that index ``total``, each
    label's total degree); rows not in ``order`` (fixed neighbours) never move. Returns each
    vertex's label (not dense)."""
    community = start.copy()
    total = total.copy()
    to_community = np.zeros(len(total))
    touched = np.empty(len(total), dtype=np.int64)
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


def _adjacency(size: int, src: np.ndarray, dst: np.ndarray, weight: np.ndarray, one_way: int = 0):
    """CSR over ``size`` rows of the undirected edges (src, dst, weight); the last ``one_way``
    edges are stored from src only (edges to fixed neighbours, whose rows stay empty)."""
    w = np.asarray(weight, dtype=np.float64)
    both = len(src) - one_way
    rows = np.concatenate([src, dst[:both]])
    cols = np.concatenate([dst, src[:both]])
    adjacency = sp.coo_matrix((np.concatenate([w, w[:both]]), (rows, cols)), shape=(size, size)).tocsr()
    adjacency.sum_duplicates()
    return adjacency


def local_moving(n: int, src: np.ndarray, dst: np.ndarray, weight: np.ndarray, resolution: float,
                 seed: int, degree: np.ndarray | None = None, two_m: float | None = None) -> np.ndarray:
    """One Louvain level (local moving to convergence, from singletons) on an undirected weighted
    edge list over ``n`` vertices: each vertex's community, dense 0..k-1. Parallel edges add up;
    a self-loop of weight w adds 2w to its vertex's degree (NetworkX's modularity). ``degree``
    and ``two_m`` default to this edge list's; Leiden's refinement passes the whole graph's, so
    that a vertex pays for all its edges while it may join only the ones listed."""
    if n == 0 or len(src) == 0 or not np.any(weight > 0):
        return np.arange(n, dtype=np.int64)
    adjacency = _adjacency(n, src, dst, weight)
    if degree is None:
        degree = np.asarray(adjacency.sum(axis=1)).ravel()
    degree = np.asarray(degree, dtype=np.float64)
    order = np.random.default_rng(seed).permutation(n)
    community = _local_moves(adjacency.indptr.astype(np.int64), adjacency.indices.astype(np.int64),
                             adjacency.data, degree, order, float(resolution),
                             float(degree.sum() if two_m is None else two_m), np.arange(n), degree)
    return np.unique(community, return_inverse=True)[1].astype(np.int64)


def moving_from(labels: np.ndarray, totals: np.ndarray, src: np.ndarray, dst: np.ndarray, weight: np.ndarray,
                fixed: tuple, resolution: float, seed: int, two_m: float) -> np.ndarray:
    """Local moving of ``len(labels)`` vertices that begin in ``labels`` (indices into ``totals``,
    each community's total degree in the whole graph of total degree ``two_m``), with edges
    (src, dst, weight) among them and ``fixed`` = (vertex, label, weight) edges to neighbours
    that do not move (another sub-graph's vertices): each vertex's new label."""
    n = len(labels)
    fixed_src, fixed_labels, fixed_weight = fixed
    ghosts = n + np.arange(len(fixed_src), dtype=np.int64)
    adjacency = _adjacency(n + len(ghosts), np.concatenate([src, fixed_src]), np.concatenate([dst, ghosts]),
                           np.concatenate([weight, fixed_weight]), one_way=len(ghosts))
    degree = np.asarray(adjacency.sum(axis=1)).ravel()
    order = np.random.default_rng(seed).permutation(n)
    community = _local_moves(adjacency.indptr.astype(np.int64), adjacency.indices.astype(np.int64),
                             adjacency.data, degree, order, float(resolution), float(two_m),
                             np.concatenate([labels, fixed_labels]).astype(np.int64),
                             np.asarray(totals, dtype=np.float64))
    return community[:n]
