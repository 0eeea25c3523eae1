"""Per-partition topology as numpy arrays, loaded by the Spark task that owns it.

A bundle holds one partition's vertices, its local edges (both endpoints in the
partition) sorted by source, and its remote edge rows (outgoing and, as mirror
rows, incoming) sorted by the local endpoint. Sub-graphs are contiguous blocks
of local vertex indices, so a sub-graph's edges are contiguous ranges too.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from gofs import files, layout


@dataclass
class PartitionBundle:
    partition: int
    directed: bool
    vid_offset: int
    ids: np.ndarray                 # original id per local vertex
    sg_offset: int                  # global id of the first sub-graph
    sg_starts: np.ndarray           # local index where each sub-graph starts (+ sentinel)
    local_src: np.ndarray           # local edges, local indices, sorted by source
    local_dst: np.ndarray
    local_rows: np.ndarray          # their row numbers in the template edge file
    local_bounds: np.ndarray        # local edges of sub-graph k: local_bounds[k]:local_bounds[k+1]
    remote_src: np.ndarray          # remote rows: local endpoint
    remote_dst: np.ndarray          # global vid of the other endpoint
    remote_dst_sg: np.ndarray
    remote_dst_part: np.ndarray
    remote_incoming: np.ndarray     # True: a mirror row (the edge points into this partition)
    remote_rows: np.ndarray
    remote_bounds: np.ndarray
    vertex_attributes: dict = field(default_factory=dict)
    edge_attributes: dict = field(default_factory=dict)   # name -> (local values, remote values)

    @property
    def num_vertices(self) -> int:
        return len(self.ids)

    @property
    def num_subgraphs(self) -> int:
        return len(self.sg_starts) - 1


def _column(table, name):
    column = table.column(name)
    return column.to_numpy(zero_copy_only=False)


def load_partition(store, p: int, vertex_attributes=(), edge_attributes=()) -> PartitionBundle:
    """Read partition ``p`` of ``store`` (a gofs.store.GraphStore) into numpy arrays.

    ``vertex_attributes`` / ``edge_attributes`` name static attributes of the template.
    """
    info = store.partitions[p]
    v = files.read_columns(store.fs, layout.template_vertices(store.root, p), ["id", "sg", *vertex_attributes])
    e = files.read_columns(store.fs, layout.template_edges(store.root, p),
                           ["src", "dst", "remote", "dst_part", "dst_sg", "mirror", *edge_attributes])
    off = info["vertex_offset"]
    sg = _column(v, "sg")
    sg_off = info["subgraph_offset"]
    sg_starts = np.searchsorted(sg, np.arange(sg_off, sg_off + info["num_subgraphs"] + 1))
    src = _column(e, "src") - off
    remote = _column(e, "remote")
    local = np.flatnonzero(~remote)
    rem = np.flatnonzero(remote)
    local = local[np.argsort(src[local], kind="stable")]
    rem = rem[np.argsort(src[rem], kind="stable")]
    dst = _column(e, "dst")
    bundle = PartitionBundle(
        partition=p, directed=store.directed, vid_offset=off, ids=_column(v, "id"),
        sg_offset=sg_off, sg_starts=sg_starts,
        local_src=src[local], local_dst=dst[local] - off, local_rows=local,
        local_bounds=np.searchsorted(src[local], sg_starts),
        remote_src=src[rem], remote_dst=dst[rem], remote_dst_sg=_column(e, "dst_sg")[rem],
        remote_dst_part=_column(e, "dst_part")[rem], remote_incoming=_column(e, "mirror")[rem],
        remote_rows=rem, remote_bounds=np.searchsorted(src[rem], sg_starts),
        vertex_attributes={a: _column(v, a) for a in vertex_attributes},
    )
    for a in edge_attributes:
        values = _column(e, a)
        bundle.edge_attributes[a] = (values[local], values[rem])
    return bundle


def load_instance_attributes(store, bundle: PartitionBundle, instance: dict,
                             vertex_attributes=(), edge_attributes=()) -> tuple[dict, dict]:
    """Instance values aligned with ``bundle``: ({name: per-vertex}, {name: (local, remote)})."""
    p = bundle.partition
    vertex = {}
    edge = {}
    have_v = [a for a in vertex_attributes if a in instance["vertex_attributes"]]
    have_e = [a for a in edge_attributes if a in instance["edge_attributes"]]
    if have_v:
        t = files.read_columns(store.fs, layout.instance_vertices(store.root, instance["id"], p), have_v)
        vertex = {a: _column(t, a) for a in have_v}
    if have_e:
        t = files.read_columns(store.fs, layout.instance_edges(store.root, instance["id"], p), have_e)
        for a in have_e:
            values = _null_to_nan(t.column(a))
            edge[a] = (values[bundle.local_rows], values[bundle.remote_rows])
    return vertex, edge


def _null_to_nan(column):
    if column.null_count and pa.types.is_floating(column.type):
        return pc.fill_null(column, float("nan")).to_numpy()
    return column.to_numpy(zero_copy_only=False)
