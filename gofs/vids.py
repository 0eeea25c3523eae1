"""The dense internal vertex id space: template vertices and vertices added by instances.

Template vertices have vids ``0 .. N-1``; partition ``p`` holds a contiguous range
of them. A vertex an instance adds beyond the template gets, the first time any
instance adds it, the vid ``N + p * ADDED_STRIDE + j``: ``p`` is the partition
it is placed in and ``j`` counts the vertices placed in ``p`` before it. The vid
is kept by every later instance that adds the same vertex, so state carried from
instance to instance stays with it, and the partition of any vid is arithmetic
(no lookup table travels with messages). The vertices an instance adds in
partition ``p`` form one extra sub-graph there, with id ``S + p`` (``S``: the
template's sub-graph count); it may consist of several weakly connected pieces.
"""
from __future__ import annotations

import numpy as np

ADDED_STRIDE = 1 << 32


def added_vid(num_vertices: int, partition, index) -> np.ndarray:
    """Vid of the ``index``-th vertex added to ``partition`` of a graph of ``num_vertices``."""
    return num_vertices + np.asarray(partition, np.int64) * ADDED_STRIDE + np.asarray(index, np.int64)


def partition_of_vids(vertex_offsets: np.ndarray, vids: np.ndarray) -> np.ndarray:
    """Partition of each vid, given every partition's first template vid and then N."""
    vids = np.asarray(vids, np.int64)
    n = vertex_offsets[-1]
    template = np.searchsorted(vertex_offsets, vids, side="right") - 1
    return np.where(vids < n, template, (vids - n) // ADDED_STRIDE)


def partition_of_subgraphs(subgraph_offsets: np.ndarray, subgraphs: np.ndarray) -> np.ndarray:
    """Partition of each sub-graph id, given every partition's first sub-graph id and then S."""
    subgraphs = np.asarray(subgraphs, np.int64)
    s = subgraph_offsets[-1]
    template = np.searchsorted(subgraph_offsets, subgraphs, side="right") - 1
    return np.where(subgraphs < s, template, subgraphs - s)
