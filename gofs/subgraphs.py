"""Sub-graph discovery: the weakly connected pieces of each partition's local edges.

Vertices are then renumbered so that every partition owns a contiguous range of
dense ids, and within it every sub-graph a contiguous block. A sub-graph is then
a slice of its partition's arrays, and a vertex's partition is a binary search.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components


@dataclass
class Layout:
    """The result of discovery, in the new dense numbering.

    ``new_of_old[i]`` is the dense vid of input vertex i; ``parts[v]`` and
    ``subgraph[v]`` are the partition and global sub-graph id of vid v;
    ``vertex_offsets[p]`` and ``subgraph_offsets[p]`` the first vid / sub-graph
    id of partition p (with a final sentinel).
    """

    new_of_old: np.ndarray
    parts: np.ndarray
    subgraph: np.ndarray
    vertex_offsets: np.ndarray
    subgraph_offsets: np.ndarray

    @property
    def num_subgraphs(self) -> int:
        return int(self.subgraph_offsets[-1])


def discover(num_vertices: int, src: np.ndarray, dst: np.ndarray, parts: np.ndarray,
             num_partitions: int) -> Layout:
    """Find sub-graphs and renumber vertices partition-major, sub-graph-major."""
    parts = np.asarray(parts, dtype=np.int64)
    local = parts[src] == parts[dst]
    adjacency = sp.coo_matrix((np.ones(int(local.sum()), dtype=np.int8), (src[local], dst[local])),
                              shape=(num_vertices, num_vertices)).tocsr()
    _, labels = connected_components(adjacency, directed=True, connection="weak")
    order = np.lexsort((np.arange(num_vertices), labels, parts))
    new_of_old = np.empty(num_vertices, dtype=np.int64)
    new_of_old[order] = np.arange(num_vertices, dtype=np.int64)
    sorted_labels = labels[order]
    starts = np.ones(num_vertices, dtype=bool)
    starts[1:] = sorted_labels[1:] != sorted_labels[:-1]
    subgraph = np.cumsum(starts) - 1
    sorted_parts = parts[order]
    vertex_offsets = np.searchsorted(sorted_parts, np.arange(num_partitions + 1), side="left").astype(np.int64)
    subgraph_offsets = np.append(subgraph, subgraph[-1] + 1 if num_vertices else 0)[vertex_offsets]
    return Layout(new_of_old=new_of_old, parts=sorted_parts, subgraph=subgraph.astype(np.int64),
                  vertex_offsets=vertex_offsets, subgraph_offsets=subgraph_offsets.astype(np.int64))


def size_histogram(sizes: np.ndarray) -> dict[str, int]:
    """Sub-graph sizes binned by powers of two: {"1": .., "2-3": .., "4-7": ..}."""
    if len(sizes) == 0:
        return {}
    return histogram_from_bins(np.bincount(np.floor(np.log2(np.maximum(sizes, 1))).astype(np.int64)))


def histogram_from_bins(counts: np.ndarray) -> dict[str, int]:
    """:func:`size_histogram` from counts per bin (bin b holds sizes 2**b .. 2**(b+1)-1), as the
    Spark ingest engine sums them over partitions."""
    out = {}
    for b, c in enumerate(counts):
        if c:
            lo, hi = 2 ** b, 2 ** (b + 1) - 1
            out[str(lo) if lo == hi else f"{lo}-{hi}"] = int(c)
    return out
