"""The local ingest engine: validate -> partition -> discover sub-graphs -> write, in this process.

Takes a :class:`GraphInput` (from :mod:`gofs.ingest.read_local`) and commits it
through :mod:`gofs.ingest.commit`, as the Spark engine does.
"""
from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pyarrow as pa

from gofs import files, housekeeping, layout, manifest as manifest_io
from gofs.errors import InputError
from gofs.graph_input import GraphInput
import gofs.ingest.formats as formats
from gofs.ingest.commit import write_version
from gofs.partition import partition
from gofs.subgraphs import Layout, discover, size_histogram

def dense_ids(graph: GraphInput) -> tuple[pd.Index, np.ndarray, np.ndarray, np.ndarray | None]:
    """Map user ids to dense indices (vertex table order first, then first appearance in edges).

    Returns the id index, src and dst as dense indices, and the dense index of
    each vertex-table row.
    """
    src = graph.edges.column("src")
    dst = graph.edges.column("dst")
    for name, column in (("src", src), ("dst", dst)):
        if column.null_count:
            row = int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0])
            raise InputError(f"{graph.source}: edge row {row + 1}, field '{name}': vertex id is missing")
    pieces = [src.to_numpy(zero_copy_only=False), dst.to_numpy(zero_copy_only=False)]
    vertex_rows = None
    if graph.vertices is not None:
        vertex_ids = formats.unique_vertex_ids(graph.vertices.column("id"), graph.vertex_place)
        pieces.insert(0, vertex_ids)
    codes, uniques = pd.factorize(np.concatenate(pieces) if len(pieces) > 1 else pieces[0], sort=False)
    codes = codes.astype(np.int64)
    nv = 0 if graph.vertices is None else graph.vertices.num_rows
    m = graph.edges.num_rows
    if graph.vertices is not None:
        vertex_rows = codes[:nv]
    return pd.Index(uniques), codes[nv:nv + m], codes[nv + m:], vertex_rows


def _id_array(index: pd.Index, id_type: pa.DataType) -> pa.Array:
    values = index.to_numpy()
    if pa.types.is_integer(id_type):
        return pa.array(values.astype(np.int64), type=pa.int64())
    return pa.array(values, type=pa.string())


def _vertex_attributes(graph: GraphInput, vertex_rows: np.ndarray | None, num_vertices: int) -> pa.Table:
    """Vertex attributes aligned to dense index order (nulls for edge-only vertices)."""
    names = graph.vertex_attribute_names
    if not names:
        return pa.table({})
    position = np.full(num_vertices, -1, dtype=np.int64)
    position[vertex_rows] = np.arange(len(vertex_rows))
    take = pa.array(position, mask=position < 0)
    return pa.table({n: graph.vertices.column(n).take(take) for n in names})


def _partition_stats(lay: Layout, src_v, dst_v, remote, num_partitions):
    part_of_src = lay.parts[src_v]
    sg_sizes = np.bincount(lay.subgraph, minlength=lay.num_subgraphs)
    out = []
    for p in range(num_partitions):
        in_p = part_of_src == p
        a, b = lay.subgraph_offsets[p], lay.subgraph_offsets[p + 1]
        out.append({
            "id": p,
            "vertex_offset": int(lay.vertex_offsets[p]),
            "num_vertices": int(lay.vertex_offsets[p + 1] - lay.vertex_offsets[p]),
            "num_edges": int(in_p.sum()),
            "local_edges": int((in_p & ~remote).sum()),
            "cut_edges": int((in_p & remote).sum()),
            "subgraph_offset": int(a),
            "num_subgraphs": int(b - a),
            "largest_subgraph": int(sg_sizes[a:b].max()) if b > a else 0,
        })
    return out, sg_sizes


def _write_template(fs, root, graph, lay, index, src_v, dst_v, vertex_attrs, num_partitions):
    """Write per-partition vertex and edge files plus the sub-graph and meta-graph tables."""
    n = len(lay.parts)
    m = len(src_v)
    id_type = graph.edges.schema.field("src").type
    old_of_new = np.empty(n, dtype=np.int64)
    old_of_new[lay.new_of_old] = np.arange(n)
    ids = _id_array(index, id_type).take(pa.array(old_of_new))
    vattrs = vertex_attrs.take(pa.array(old_of_new)) if vertex_attrs.num_columns else vertex_attrs
    remote = lay.parts[src_v] != lay.parts[dst_v]
    sg = lay.subgraph
    eattr_names = graph.edge_attribute_names
    # canonical rows in the source's partition, plus a mirror of each remote edge in the destination's
    mirror_ix = np.flatnonzero(remote)
    row_eid = np.concatenate([np.arange(m, dtype=np.int64), mirror_ix])
    row_src = np.concatenate([src_v, dst_v[mirror_ix]])
    row_dst = np.concatenate([dst_v, src_v[mirror_ix]])
    row_mirror = np.concatenate([np.zeros(m, bool), np.ones(len(mirror_ix), bool)])
    row_remote = np.concatenate([remote, np.ones(len(mirror_ix), bool)])
    row_part = lay.parts[row_src]
    order = np.lexsort((row_dst, row_src))
    bounds = np.searchsorted(row_part[order], np.arange(num_partitions + 1))
    edge_attrs = graph.edges.select(eattr_names)
    for p in range(num_partitions):
        v0, v1 = lay.vertex_offsets[p], lay.vertex_offsets[p + 1]
        vt = {"vid": pa.array(np.arange(v0, v1, dtype=np.int64)), "id": ids.slice(v0, v1 - v0),
              "sg": pa.array(sg[v0:v1])}
        for name in vattrs.column_names:
            vt[name] = vattrs.column(name).slice(v0, v1 - v0)
        files.write_table(fs, layout.template_vertices(root, p), pa.table(vt))
        rows = order[bounds[p]:bounds[p + 1]]
        d = row_dst[rows]
        et = {"eid": pa.array(row_eid[rows]), "src": pa.array(row_src[rows]), "dst": pa.array(d),
              "remote": pa.array(row_remote[rows]), "mirror": pa.array(row_mirror[rows]),
              "dst_part": pa.array(lay.parts[d].astype(np.int32)), "dst_sg": pa.array(sg[d])}
        if eattr_names:
            taken = edge_attrs.take(pa.array(row_eid[rows]))
            for name in eattr_names:
                et[name] = taken.column(name)
        files.write_table(fs, layout.template_edges(root, p), pa.table(et))

    stats, sg_sizes = _partition_stats(lay, src_v, dst_v, remote, num_partitions)
    sg_local = np.bincount(sg[src_v[~remote]], minlength=lay.num_subgraphs)
    sg_cut = np.bincount(sg[src_v[remote]], minlength=lay.num_subgraphs) + \
        np.bincount(sg[dst_v[remote]], minlength=lay.num_subgraphs)
    sg_part = np.repeat(np.arange(num_partitions, dtype=np.int32), np.diff(lay.subgraph_offsets))
    files.write_table(fs, layout.join(root, "template", "subgraphs.parquet"), pa.table({
        "sg": pa.array(np.arange(lay.num_subgraphs, dtype=np.int64)), "partition": pa.array(sg_part),
        "num_vertices": pa.array(sg_sizes.astype(np.int64)), "local_edges": pa.array(sg_local.astype(np.int64)),
        "cut_edges": pa.array(sg_cut.astype(np.int64))}))
    pairs = pd.DataFrame({"sg": sg[src_v[remote]], "nbr_sg": sg[dst_v[remote]]})
    meta = pairs.groupby(["sg", "nbr_sg"], sort=True).size().rename("edges").reset_index()
    files.write_table(fs, layout.join(root, "template", "metagraph.parquet"),
           pa.Table.from_pandas(meta.astype({"edges": np.int64}), preserve_index=False))
    return stats, sg_sizes, int(remote.sum())


def ingest_graph(graph: GraphInput, path: str, num_partitions: int = 4, partitioner: str = "metis",
           overwrite: bool = False, name: str | None = None, seed: int = 0, spark=None,
           timings: dict | None = None, partitioner_options: dict | None = None) -> dict:
    """Partition ``graph`` into sub-graphs and write it as a GoFS graph at ``path``.

    Returns the manifest. ``timings`` (if given) receives seconds per stage;
    ``partitioner_options`` go to :func:`gofs.partition.partition`.
    Raises GraphExistsError if ``path`` holds a graph and ``overwrite`` is false,
    and always if it holds anything else (a file, a non-empty directory that is
    not a GoFS graph): only a GoFS graph is ever replaced. The new graph is
    written as a new version directory and committed by one log entry; the old
    version is removed after that, so a reader sees the old graph or the new one.
    """
    if num_partitions < 1:
        raise InputError(f"num_partitions must be >= 1, got {num_partitions}")
    fs, root = layout.filesystem(path)
    housekeeping.check_target(fs, root, path, overwrite)
    timings = {} if timings is None else timings

    clock = time.perf_counter()
    index, src, dst, vertex_rows = dense_ids(graph)
    n = len(index)
    vertex_attrs = _vertex_attributes(graph, vertex_rows, n)
    timings["validate"] = time.perf_counter() - clock

    clock = time.perf_counter()
    parts = partition(partitioner, n, src, dst, num_partitions, seed=seed, spark=spark, **(partitioner_options or {}))
    timings["partition"] = time.perf_counter() - clock

    clock = time.perf_counter()
    lay = discover(n, src, dst, parts, num_partitions)
    src_v, dst_v = lay.new_of_old[src], lay.new_of_old[dst]
    timings["subgraphs"] = time.perf_counter() - clock

    clock = time.perf_counter()

    def write_files(data: str) -> dict:
        stats, sg_sizes, cut = _write_template(fs, data, graph, lay, index, src_v, dst_v,
                                               vertex_attrs, num_partitions)
        sizes = np.array([s["num_vertices"] for s in stats])
        return {
            "name": name or graph.name or root.rstrip("/").rpartition("/")[2],
            "directed": bool(graph.directed),
            "id_type": "int64" if pa.types.is_integer(graph.edges.schema.field("src").type) else "string",
            "num_vertices": int(n),
            "num_edges": int(len(src)),
            "partitioner": partitioner,
            "num_partitions": int(num_partitions),
            "seed": int(seed),
            "vertex_schema": manifest_io.schema_fields(vertex_attrs.schema),
            "edge_schema": manifest_io.schema_fields(graph.edges.schema, skip=("src", "dst")),
            "cut_edges": cut,
            "balance": float(sizes.max() / sizes.mean()) if n else 1.0,
            "subgraphs": {"count": int(lay.num_subgraphs),
                          "largest": int(sg_sizes.max()) if len(sg_sizes) else 0,
                          "size_histogram": size_histogram(sg_sizes)},
            "partitions": stats,
        }

    manifest = write_version(fs, root, path, overwrite, write_files)
    timings["write"] = time.perf_counter() - clock
    return manifest
