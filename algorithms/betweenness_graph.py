"""The graph a betweenness pass runs on: a sub-graph's (or the whole gathered graph's) arcs as a
compressed CSR with its cut edges and leaf compression, shared by the partitioned MS-BC program
(:mod:`algorithms.betweenness`) and the gathered one (:mod:`algorithms.betweenness_gathered`)."""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from algorithms import brandes_kernels as kernels
from algorithms.leaf_compression import LeafCompression, strip_leaves


@dataclass
class LocalGraph:
    """A sub-graph as betweenness sees it: the compressed local graph (CSR and edge
    arrays, no self-loops, parallel edges at their smallest weight), its usable cut
    edges (deduplicated) and the leaf compression."""

    n: int
    csr: sp.csr_matrix
    src: np.ndarray
    dst: np.ndarray
    w: np.ndarray
    r_src: np.ndarray          # local end of each usable cut edge
    r_dst: np.ndarray          # global vertex id of the other end
    r_w: np.ndarray
    leaves: LeafCompression

    @functools.cached_property
    def unit(self) -> bool:
        """Whether every local and cut edge has length 1 (hop counts)."""
        return bool(np.all(self.w == 1) and np.all(self.r_w == 1))

    @functools.cached_property
    def reverse(self) -> sp.csr_matrix:
        """The transposed CSR (each vertex's incoming arcs), for pushing dependencies to DAG tails."""
        reverse = self.csr.T.tocsr()
        reverse.sort_indices()
        return reverse

    @functools.cached_property
    def integral(self) -> bool:
        """Whether every local length is a whole number >= 1 (hop counts included): then
        distances are exact integers and sort by counting."""
        return bool(np.all((self.w >= 1) & (self.w == np.floor(self.w))))

    def lower(self, dist: np.ndarray, seed_v, seed_col, seed_d) -> np.ndarray:
        """Lower ``dist`` (``n x B``, Fortran order, in place) to the distances from the seeds
        (vertex, column, distance) and what it already holds; returns the ``n x B`` mask of the
        entries that dropped. A breadth-first search on hop counts, else Dijkstra (compiled,
        :func:`algorithms.brandes_kernels.lower_distances`)."""
        if not dist.flags.f_contiguous:
            raise ValueError("LocalGraph.lower needs a Fortran-ordered distance array")
        changed = np.zeros(dist.shape, dtype=bool, order="F")
        seed_v, seed_col = np.asarray(seed_v, np.int64), np.asarray(seed_col, np.int64)
        seed_d = np.asarray(seed_d, np.float64)
        if len(seed_v):
            order = np.lexsort((seed_d, seed_col))
            kernels.lower_distances(self.csr.indptr, self.csr.indices, self.csr.data, self.unit, dist,
                                    seed_v[order], seed_col[order], seed_d[order], changed)
        return changed


def local_graph(subgraph, weight: str | None, compress: bool) -> LocalGraph:
    """Build the :class:`LocalGraph` of ``subgraph`` (topology-derived, cached by the caller)."""
    adj = subgraph.adjacency(weight).tocoo()
    remote = subgraph.remote_edges
    use = remote.outgoing(subgraph.directed)
    r_w = remote.attribute(weight)[use] if weight else np.ones(int(use.sum()))
    return compressed_graph(subgraph.num_vertices, adj.row, adj.col, adj.data, compress,
                            remote.src[use], remote.dst[use], r_w)


def compressed_graph(n: int, src, dst, w, compress: bool, r_src=(), r_dst=(), r_w=()) -> LocalGraph:
    """A :class:`LocalGraph` from local edges (distinct pairs, both directions when undirected)
    and cut edges (local end, global id of the other end, weight; parallel ones allowed)."""
    src, dst, w = np.asarray(src, np.int64), np.asarray(dst, np.int64), np.asarray(w, np.float64)
    loop = src == dst
    src, dst, w = src[~loop], dst[~loop], w[~loop]
    r_src, r_dst, r_w = np.asarray(r_src, np.int64), np.asarray(r_dst, np.int64), np.asarray(r_w, np.float64)
    if len(r_src):
        order = np.lexsort((r_w, r_dst, r_src))
        r_src, r_dst, r_w = r_src[order], r_dst[order], r_w[order]
        first = np.r_[True, (r_src[1:] != r_src[:-1]) | (r_dst[1:] != r_dst[:-1])]
        r_src, r_dst, r_w = r_src[first], r_dst[first], r_w[first]
    if compress:
        structure = sp.csr_matrix((np.ones(len(src)), (src, dst)), shape=(n, n))
        leaves = strip_leaves(structure, np.bincount(r_src, minlength=n))
        keep = leaves.alive[src] & leaves.alive[dst]
        src, dst, w = src[keep], dst[keep], w[keep]
    else:
        leaves = LeafCompression(np.ones(n, dtype=bool), np.ones(n), np.zeros(n), np.zeros(n))
    csr = sp.csr_matrix((w, (src, dst)), shape=(n, n))
    csr.sort_indices()
    return LocalGraph(n, csr, src, dst, w, r_src, r_dst, r_w, leaves)


def arc_graph(n: int, src, dst, w, compress: bool) -> tuple[LocalGraph, np.ndarray]:
    """A whole graph from its arcs (both directions of an undirected edge; parallel arcs
    and self-loops allowed, parallel ones kept at their smallest length): the
    :class:`LocalGraph` (leaf-compressed when ``compress``) and its stripped trees'
    ordered-pair betweenness, their components' sizes known."""
    order = np.lexsort((w, dst, src))
    src, dst, w = src[order], dst[order], w[order]
    first = np.r_[True, (src[1:] != src[:-1]) | (dst[1:] != dst[:-1])] if len(src) else np.zeros(0, bool)
    graph = compressed_graph(n, src[first], dst[first], w[first], compress)
    _, label = connected_components(sp.csr_matrix((np.ones(len(src)), (src, dst)), shape=(n, n)),
                                    directed=True, connection="weak")
    return graph, graph.leaves.tree_betweenness(np.bincount(label, minlength=n)[label])
