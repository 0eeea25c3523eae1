"""Clusters of bounded weight by repeated heavy-edge matching, in one numba call.

METIS coarsens the same way before it partitions: each pass pairs every vertex with the
unmatched neighbour it shares the heaviest edge with (if their weights together stay within
the bound), contracts each pair, and repeats on the smaller graph. Stopping once the clusters
are as heavy as wanted gives connected clusters of METIS's kind without METIS's partitioning
passes (the multilevel partitioner clusters each id range of a level this way, in one task).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from gofs.numba_cache import serialise_compilation

serialise_compilation()  # one compilation at a time on this machine: numba's kernel cache stays whole


@njit(cache=True, nogil=True)
def splitmix(x):
    """splitmix64's finaliser: a well-spread 64-bit hash of ``x`` (uint64)."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


@njit(cache=True, nogil=True)
def _match(indptr, indices, weight, vw, bound, salt):
    """One pass: ``(cluster of each vertex, clusters)``, matched pairs sharing a cluster."""
    n = vw.size
    keys = np.empty(n, np.uint64)
    for u in range(n):
        keys[u] = splitmix(np.uint64(u) ^ salt)
    mate = np.full(n, -1, np.int64)
    for u in np.argsort(keys):
        if mate[u] >= 0:
            continue
        best, heaviest = -1, 0.0
        for e in range(indptr[u], indptr[u + 1]):
            v = indices[e]
            if v != u and mate[v] < 0 and vw[u] + vw[v] <= bound and weight[e] > heaviest:
                best, heaviest = v, weight[e]
        mate[u] = u if best < 0 else best
        if best >= 0:
            mate[best] = u
    cluster = np.full(n, -1, np.int64)
    count = 0
    for u in range(n):
        if cluster[u] < 0:
            cluster[u] = count
            cluster[mate[u]] = count
            count += 1
    return cluster, count


@njit(cache=True, nogil=True)
def _contract(indptr, indices, weight, vw, cluster, count):
    """The graph of the clusters: CSR with parallel edges summed, inner edges dropped."""
    n = vw.size
    cvw = np.zeros(count, np.float64)
    start = np.zeros(count + 1, np.int64)
    for u in range(n):
        cvw[cluster[u]] += vw[u]
        start[cluster[u] + 1] += 1
    for c in range(count):
        start[c + 1] += start[c]
    members = np.empty(n, np.int64)
    fill = start[:-1].copy()
    for u in range(n):
        members[fill[cluster[u]]] = u
        fill[cluster[u]] += 1
    out_ptr = np.zeros(count + 1, np.int64)
    out_idx = np.empty(indices.size, np.int64)
    out_w = np.empty(indices.size, np.float64)
    seen = np.full(count, -1, np.int64)
    where = np.zeros(count, np.int64)
    m = 0
    for c in range(count):
        for i in range(start[c], start[c + 1]):
            u = members[i]
            for e in range(indptr[u], indptr[u + 1]):
                d = cluster[indices[e]]
                if d == c:
                    continue
                if seen[d] != c:
                    seen[d] = c
                    where[d] = m
                    out_idx[m] = d
                    out_w[m] = 0
                    m += 1
                out_w[where[d]] += weight[e]
        out_ptr[c + 1] = m
    return out_ptr, out_idx[:m].copy(), out_w[:m].copy(), cvw


@njit(cache=True, nogil=True)
def heavy_edge_clusters(indptr, indices, weight, vw, bound, wanted, seed):
    """Cluster of each vertex (``0..clusters-1``) of the symmetric CSR graph (int64 ``indptr``,
    ``indices``) with float64 edge ``weight`` and vertex weights ``vw``: matching passes until at most ``wanted`` clusters
    remain or a pass merges fewer than 5% of them; no cluster weighs more than ``bound``."""
    n = vw.size
    label = np.arange(n)
    level = 0
    while vw.size > wanted:
        salt = splitmix(np.uint64(seed) + np.uint64(level))
        cluster, count = _match(indptr, indices, weight, vw, bound, salt)
        if count > 0.95 * vw.size:
            break
        for u in range(n):
            label[u] = cluster[label[u]]
        indptr, indices, weight, vw = _contract(indptr, indices, weight, vw, cluster, count)
        level += 1
    return label
