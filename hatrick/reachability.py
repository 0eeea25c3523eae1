"""Reachability between selected vertices: the one definition behind the live stream's ``reachable``,
its workers' summaries, CGQL's ``Reach`` (live, on workers, replayed) and the Gopher Reach program.

The core is a table of bit sets, one row per vertex and one bit per source (:func:`source_bits`),
closed over a CSR graph by :func:`spread_bits`, a worklist that revisits a vertex only when it gains
a bit; :func:`set_bits` reads the (row, source) pairs back. The Gopher program
(:mod:`hatrick.cgql.programs`) spreads per partition and sends the gains across partitions.
:func:`reachable_pairs` answers a whole graph at once. Directed: the strongly connected
components (scipy, C) condense it into a DAG and the worklist is seeded with every component in
topological order, so each component is visited once, after all its predecessors, at
O((V + E) * sources / 64), instead of one traversal per source; the sources go in batches so the
table stays within :data:`TABLE_BYTES`. Undirected: components, then an equi-join of the sources'
and sinks' labels (:func:`same_label_pairs`, which the live graph also runs on the components it
keeps incrementally).
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from numba import njit
from scipy.sparse.csgraph import connected_components

from gofs.numba_cache import serialise_compilation

serialise_compilation()  # one compilation at a time on this machine: numba's kernel cache stays whole

__all__ = ["reachable_pairs", "same_label_pairs", "source_bits", "spread_bits", "set_bits", "TABLE_BYTES"]

TABLE_BYTES = 1 << 26   # the most one batch of sources' bit sets over a condensation may take


def reachable_pairs(n: int, src: np.ndarray, dst: np.ndarray, sources: np.ndarray, sinks: np.ndarray,
                    directed: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Pairs (source, sink) of nodes 0..n-1 joined by a path over edges ``src -> dst`` (both ways
    when not ``directed``); a node reaches itself. By source in the order given, then by sink in
    the order given."""
    sources, sinks = np.asarray(sources, np.int64), np.asarray(sinks, np.int64)
    if not len(sources) or not len(sinks):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    graph = sp.csr_matrix((np.ones(len(src), bool), (src, dst)), shape=(n, n))
    if not directed:
        _, label = connected_components(graph, directed=False)
        return same_label_pairs(sources, label[sources], sinks, label[sinks])
    k, label = connected_components(graph, directed=True, connection="strong")
    a, z = label[src], label[dst]
    between = a != z
    dag = sp.csr_matrix((np.ones(int(between.sum()), bool), (a[between], z[between])), shape=(k, k))
    indptr, indices = dag.indptr.astype(np.int64), dag.indices.astype(np.int64)
    order = topological_order(indptr, indices)
    per_batch = 64 * max(1, TABLE_BYTES // (8 * k))
    out_s, out_t = [], []
    sink_label = label[sinks]
    for first in range(0, len(sources), per_batch):
        batch = sources[first:first + per_batch]
        bits = source_bits(k, label[batch], np.arange(len(batch)), len(batch))
        spread_bits(indptr, indices, bits, order)
        row, bit = set_bits(bits[sink_label])
        by_source = np.argsort(bit, kind="stable")
        out_s.append(batch[bit[by_source]])
        out_t.append(sinks[row[by_source]])
    return np.concatenate(out_s), np.concatenate(out_t)


def same_label_pairs(sources: np.ndarray, s_lab: np.ndarray, sinks: np.ndarray,
                     t_lab: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pairs (source, sink) whose labels (``s_lab``, ``t_lab``: components) are equal, by
    source then sink order (a sorted join: no pandas merge per live result)."""
    order = np.argsort(t_lab, kind="stable")
    t_sorted, t_lab_sorted = sinks[order], t_lab[order]
    lo = np.searchsorted(t_lab_sorted, s_lab, "left")
    count = np.searchsorted(t_lab_sorted, s_lab, "right") - lo
    src = np.repeat(sources, count)
    starts = np.repeat(lo, count) + (np.arange(count.sum()) - np.repeat(np.cumsum(count) - count, count))
    return src, t_sorted[starts]


def source_bits(size: int, rows: np.ndarray, numbers: np.ndarray, count: int) -> np.ndarray:
    """A (size, words) bit-set table for ``count`` sources with source ``numbers[i]``'s bit set
    in row ``rows[i]`` (one row may hold several sources)."""
    bits = np.zeros((size, max(1, -(-count // 64))), np.uint64)
    numbers = np.asarray(numbers, np.int64)
    np.bitwise_or.at(bits, (rows, numbers // 64), np.left_shift(np.uint64(1), (numbers % 64).astype(np.uint64)))
    return bits


@njit(cache=True, nogil=True)
def spread_bits(indptr, indices, bits, start):
    """Close the per-vertex bit sets over a CSR graph from the vertices in ``start`` (a worklist:
    a vertex is revisited only when it gains a bit; seeded with every vertex of a DAG in
    topological order, each is visited once). Vertex ``v``'s edges are
    ``indices[indptr[v]:indptr[v + 1]]``. Returns the mask of vertices that gained."""
    n, words = bits.shape
    gained = np.zeros(n, np.bool_)
    queued = np.zeros(n, np.bool_)
    queue = np.empty(n, np.int64)
    head = tail = 0
    for v in start:
        gained[v] = True
        if not queued[v]:
            queued[v] = True
            queue[tail % n] = v
            tail += 1
    while head < tail:
        v = queue[head % n]
        head += 1
        queued[v] = False
        empty = True
        for w in range(words):
            if bits[v, w]:
                empty = False
                break
        if empty:
            continue
        for e in range(indptr[v], indptr[v + 1]):
            u = indices[e]
            grew = False
            for w in range(words):
                new = bits[v, w] & ~bits[u, w]
                if new:
                    bits[u, w] |= new
                    grew = True
            if grew:
                gained[u] = True
                if not queued[u]:
                    queued[u] = True
                    queue[tail % n] = u
                    tail += 1
    return gained


@njit(cache=True, nogil=True)
def set_bits(bits):
    """(row, bit) of every set bit of a bit-set table, row by row, bits ascending."""
    rows, words = bits.shape
    one = np.uint64(1)
    total = 0
    for r in range(rows):
        for w in range(words):
            x = bits[r, w]
            while x:
                x &= x - one
                total += 1
    row = np.empty(total, np.int64)
    bit = np.empty(total, np.int64)
    i = 0
    for r in range(rows):
        for w in range(words):
            x = bits[r, w]
            b = w * 64
            while x:
                if x & one:
                    row[i] = r
                    bit[i] = b
                    i += 1
                x >>= one
                b += 1
    return row, bit


@njit(cache=True, nogil=True)
def topological_order(indptr, indices):
    """The nodes of a DAG in CSR (``indices[indptr[v]:indptr[v + 1]]`` follow ``v``), each after
    all its predecessors (Kahn's algorithm)."""
    n = len(indptr) - 1
    indegree = np.zeros(n, np.int64)
    for e in range(len(indices)):
        indegree[indices[e]] += 1
    order = np.empty(n, np.int64)
    tail = 0
    for v in range(n):
        if indegree[v] == 0:
            order[tail] = v
            tail += 1
    head = 0
    while head < tail:
        v = order[head]
        head += 1
        for e in range(indptr[v], indptr[v + 1]):
            u = indices[e]
            indegree[u] -= 1
            if indegree[u] == 0:
                order[tail] = u
                tail += 1
    return order
