"""Per-partition topology as numpy arrays, loaded by the Spark task that owns it.

A bundle holds one partition's vertices, its local edges (both endpoints in the
partition) sorted by source, and its remote edge rows (outgoing and, as mirror
rows, incoming) sorted by the local endpoint. Sub-graphs are contiguous blocks
of local vertex indices, so a sub-graph's edges are contiguous ranges too.

An instance with topology changes gets its own bundle (:func:`instance_bundle`):
the same vertices and sub-graphs, the template's edges minus the removed ones
plus the added ones. Sub-graphs keep their template ids, so state carried from
instance to instance stays with its vertices; an added edge between two
sub-graphs is a remote edge (even inside one partition), and removed edges may
split a sub-graph into several weakly connected pieces (``piece``). The vertices
an instance adds in a partition come after the template's as one more sub-graph
(:mod:`gofs.vids`): their vids are not contiguous, so vid <-> local index goes
through :meth:`PartitionBundle.local_index` and :meth:`PartitionBundle.vertex_ids`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa          # pyarrow.compute (~60 ms) is imported where used: a fresh Python worker imports this module

from gofs import files, layout, manifest as manifest_io, vids as vid_space


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
    # instance topology only: row of each edge in the instance's added edges (-1: a template row),
    # the added edges' attribute columns, and each vertex's piece within its sub-graph
    local_added: np.ndarray | None = None
    remote_added: np.ndarray | None = None
    added_attributes: pa.Table | None = None
    piece: np.ndarray | None = None
    piece_counts: np.ndarray | None = None
    # vertices the instance adds here (the last sub-graph, id ``added_subgraph``), in vid order
    added_vids: np.ndarray | None = None
    added_subgraph: int = -1        # S + p (gofs.vids), whether or not the instance adds any here

    @property
    def num_vertices(self) -> int:
        return len(self.ids)

    @property
    def num_subgraphs(self) -> int:
        return len(self.sg_starts) - 1

    @property
    def num_template_vertices(self) -> int:
        return self.num_vertices - (0 if self.added_vids is None else len(self.added_vids))

    def subgraph_id(self, k: int) -> int:
        """Global id of local sub-graph ``k``."""
        if self.added_vids is not None and k == self.num_subgraphs - 1:
            return self.added_subgraph
        return self.sg_offset + k

    def local_subgraph(self, subgraph_ids: np.ndarray) -> np.ndarray:
        """Local index of global sub-graph ids of this partition; -1 for the sub-graph of added
        vertices where this instance adds none here (a message sent to it in another instance)."""
        subgraph_ids = np.asarray(subgraph_ids, np.int64)
        template = subgraph_ids - self.sg_offset
        if self.added_vids is None:
            return np.where(subgraph_ids == self.added_subgraph, -1, template)
        return np.where(subgraph_ids == self.added_subgraph, self.num_subgraphs - 1, template)

    def vertex_ids(self, a: int, b: int) -> np.ndarray:
        """Global vids of local vertices ``a:b``."""
        n = self.num_template_vertices
        template = np.arange(a, min(b, n), dtype=np.int64) + self.vid_offset
        if b <= n:
            return template
        return np.concatenate([template, self.added_vids[max(a - n, 0):b - n]])

    def local_index(self, vids: np.ndarray) -> np.ndarray:
        """Local index of global vids of this partition's vertices; -1 for a vid beyond the
        template that this instance does not add (a message sent to it in another instance)."""
        return _local_index(vids, self.vid_offset, self.num_template_vertices, self.added_vids)


def _local_index(vids, vid_offset: int, num_template: int, added_vids: np.ndarray | None) -> np.ndarray:
    vids = np.asarray(vids, np.int64)
    template = vids < vid_offset + num_template
    if added_vids is None or not len(added_vids):
        return np.where(template, vids - vid_offset, -1)
    at = np.minimum(np.searchsorted(added_vids, vids), len(added_vids) - 1)
    return np.where(template, vids - vid_offset, np.where(added_vids[at] == vids, num_template + at, -1))


def _column(table, name):
    return files.numpy_values(table.column(name))


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
        added_subgraph=store.manifest["subgraphs"]["count"] + p,
    )
    for a in edge_attributes:
        values = _column(e, a)
        bundle.edge_attributes[a] = (values[local], values[rem])
    return bundle


def load_instance_attributes(store, bundle: PartitionBundle, instance: dict,
                             vertex_attributes=(), edge_attributes=(), categorical: bool = False) -> tuple[dict, dict]:
    """Instance values aligned with ``bundle``: ({name: per-vertex}, {name: (local, remote)}), of
    the attributes named that the instance stores (:func:`gofs.manifest.stored_columns`: its own
    and the static ones it overrides, which then take the template's place).

    ``categorical``: text edge values come as ``pandas.Categorical`` (the stored dictionary codes
    over the distinct values), so a reader can decide a condition once per distinct value."""
    p = bundle.partition
    vertex = {}
    edge = {}
    have_v = [a for a in vertex_attributes if a in manifest_io.stored_columns(instance, "vertex")]
    have_e = [a for a in edge_attributes if a in manifest_io.stored_columns(instance, "edge")]
    if have_v:
        t = files.read_columns(store.fs, layout.instance_vertices(store.root, instance["id"], p), have_v)
        vertex = {a: _column(t, a) for a in have_v}
    if have_e:
        t = files.read_columns(store.fs, layout.instance_edges(store.root, instance["id"], p), have_e,
                               read_dictionary=have_e)
        for a in have_e:
            column = t.column(a)
            coded = categorical and pa.types.is_dictionary(column.type) and _is_text(column.type.value_type)
            edge[a] = _edge_values(bundle, column.to_pandas().array if coded else _null_to_nan(column), a)
    return vertex, edge


def _edge_values(bundle: PartitionBundle, template_values: np.ndarray, name: str) -> tuple:
    """(local, remote) values of one edge attribute: template rows from ``template_values``,
    added edges (instance topology) from the added edges' own column, missing (NaN/None) without one."""
    if bundle.local_added is None:
        return template_values[bundle.local_rows], template_values[bundle.remote_rows]
    added = bundle.added_attributes
    if name in added.column_names:
        column = _null_to_nan(added.column(name))
    else:
        column = np.full(added.num_rows, np.nan if template_values.dtype.kind in "iuf" else None)
    numeric = template_values.dtype.kind in "iuf" and column.dtype.kind in "iuf"
    dtype = np.result_type(template_values, column) if numeric else object
    out = []
    for rows, extra in ((bundle.local_rows, bundle.local_added), (bundle.remote_rows, bundle.remote_added)):
        values = np.empty(len(rows), dtype)
        kept = rows >= 0
        values[kept] = template_values[rows[kept]]
        values[~kept] = column[extra[~kept]]
        out.append(values)
    return tuple(out)


def instance_bundle(store, bundle: PartitionBundle, instance: dict) -> PartitionBundle:
    """``bundle`` (the template's partition) as it is in ``instance``: removed edges dropped,
    the vertices it adds here appended as one more sub-graph, added edges placed as local or
    remote rows, sub-graph pieces found. Reads the instance's topology and added-vertex
    files, this partition's template edge ids and the sub-graph table (for the sub-graph of
    a remote endpoint), never another partition's files."""
    import pyarrow.compute as pc

    changes = files.read_columns(store.fs, layout.instance_topology(store.root, instance["id"]), None)
    p, off, n = bundle.partition, bundle.vid_offset, bundle.num_vertices
    removed = changes.filter(pc.equal(changes.column("op"), "remove")).column("eid").to_numpy()
    eid = _column(files.read_columns(store.fs, layout.template_edges(store.root, p), ["eid"]), "eid")
    keep_local = ~np.isin(eid[bundle.local_rows], removed)
    keep_remote = ~np.isin(eid[bundle.remote_rows], removed)

    added_here = store._added_in_partition(instance, p)
    new_vids = np.empty(0, np.int64) if added_here is None else _column(added_here, "vid").astype(np.int64)
    ids = bundle.ids
    if len(new_vids):
        new_ids = _column(added_here, "id")
        ids = np.concatenate([ids, new_ids] if ids.dtype == new_ids.dtype else [ids.astype(object), new_ids.astype(object)])
    sg_starts_here = np.r_[bundle.sg_starts, n + len(new_vids)] if len(new_vids) else bundle.sg_starts

    added = changes.filter(pc.equal(changes.column("op"), "add"))
    add_src = _column(added, "add_src").astype(np.int64) if added.num_rows else np.empty(0, np.int64)
    add_dst = _column(added, "add_dst").astype(np.int64) if added.num_rows else np.empty(0, np.int64)
    vertex_offsets = np.array([q["vertex_offset"] for q in store.partitions] + [store.num_vertices])
    sg_starts = _subgraph_starts(store)

    def subgraph_of(vids):
        template = _block_of(sg_starts, np.minimum(vids, store.num_vertices - 1))
        return np.where(vids < store.num_vertices, template,
                        store.manifest["subgraphs"]["count"] + vid_space.partition_of_vids(vertex_offsets, vids))

    src_here = vid_space.partition_of_vids(vertex_offsets, add_src) == p
    dst_here = vid_space.partition_of_vids(vertex_offsets, add_dst) == p
    inside = src_here & dst_here & (subgraph_of(add_src) == subgraph_of(add_dst))
    out_rows = np.flatnonzero(src_here & ~inside)
    in_rows = np.flatnonzero(dst_here & ~inside)
    loc_rows = np.flatnonzero(inside)

    def none(count):
        return np.full(count, -1, np.int64)

    def to_local(vids):
        return _local_index(vids, off, n, new_vids)

    local_src = np.concatenate([bundle.local_src[keep_local], to_local(add_src[loc_rows])])
    local_dst = np.concatenate([bundle.local_dst[keep_local], to_local(add_dst[loc_rows])])
    local_rows = np.concatenate([bundle.local_rows[keep_local], none(len(loc_rows))])
    local_added = np.concatenate([none(int(keep_local.sum())), loc_rows])
    remote_src = np.concatenate([bundle.remote_src[keep_remote], to_local(add_src[out_rows]), to_local(add_dst[in_rows])])
    remote_dst = np.concatenate([bundle.remote_dst[keep_remote], add_dst[out_rows], add_src[in_rows]])
    remote_incoming = np.concatenate([bundle.remote_incoming[keep_remote], np.zeros(len(out_rows), bool),
                                      np.ones(len(in_rows), bool)])
    remote_rows = np.concatenate([bundle.remote_rows[keep_remote], none(len(out_rows) + len(in_rows))])
    remote_added = np.concatenate([none(int(keep_remote.sum())), out_rows, in_rows])
    local = np.argsort(local_src, kind="stable")
    remote = np.argsort(remote_src, kind="stable")
    local_src, remote_src = local_src[local], remote_src[remote]
    out = PartitionBundle(
        partition=p, directed=bundle.directed, vid_offset=off, ids=ids, sg_offset=bundle.sg_offset,
        sg_starts=sg_starts_here, local_src=local_src, local_dst=local_dst[local], local_rows=local_rows[local],
        local_bounds=np.searchsorted(local_src, sg_starts_here),
        remote_src=remote_src, remote_dst=remote_dst[remote], remote_dst_sg=subgraph_of(remote_dst[remote]),
        remote_dst_part=vid_space.partition_of_vids(vertex_offsets, remote_dst[remote]),
        remote_incoming=remote_incoming[remote], remote_rows=remote_rows[remote],
        remote_bounds=np.searchsorted(remote_src, sg_starts_here),
        vertex_attributes={name: _padded(values, len(new_vids)) for name, values in bundle.vertex_attributes.items()},
        local_added=local_added[local], remote_added=remote_added[remote], added_attributes=added.drop_columns(
            [c for c in ("op", "eid", "add_src", "add_dst") if c in added.column_names]),
        added_vids=new_vids if len(new_vids) else None, added_subgraph=store.manifest["subgraphs"]["count"] + p)
    for name in bundle.edge_attributes:
        template = np.empty(len(eid), dtype=bundle.edge_attributes[name][0].dtype)
        template[bundle.local_rows] = bundle.edge_attributes[name][0]
        template[bundle.remote_rows] = bundle.edge_attributes[name][1]
        out.edge_attributes[name] = _edge_values(out, template, name)
    out.piece, out.piece_counts = _pieces(out)
    return out


def _padded(values: np.ndarray, count: int) -> np.ndarray:
    """A static vertex attribute with ``count`` missing values (NaN, or None) appended."""
    if not count:
        return values
    if values.dtype.kind in "iuf":
        return np.concatenate([values.astype(np.float64), np.full(count, np.nan)])
    return np.concatenate([values.astype(object), np.full(count, None, object)])


def _block_of(starts: np.ndarray, vids: np.ndarray) -> np.ndarray:
    """The block (partition or sub-graph) each vid lies in, given every block's first vid."""
    return np.searchsorted(starts, vids, side="right") - 1


def _subgraph_starts(store) -> np.ndarray:
    """First global vid of every sub-graph (vertices are numbered sub-graph-major)."""
    sizes = _column(files.read_columns(store.fs, layout.join(store.root, "template", "subgraphs.parquet"),
                                       ["num_vertices"]), "num_vertices")
    return np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)


def _pieces(bundle: PartitionBundle) -> tuple[np.ndarray, np.ndarray]:
    """Each vertex's weakly connected piece within its sub-graph (numbered by first vertex),
    and the number of pieces per sub-graph. (scipy is imported here, not with the module: a task
    whose bundle comes from the disk cache never builds one, and its worker starts faster.)"""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import connected_components

    n = bundle.num_vertices
    graph = sp.coo_matrix((np.ones(len(bundle.local_src), np.int8), (bundle.local_src, bundle.local_dst)),
                          shape=(n, n)).tocsr()
    _, labels = connected_components(graph, directed=True, connection="weak")
    _, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    rank = np.empty(len(first), np.int64)
    rank[np.argsort(first)] = np.arange(len(first))
    piece = rank[inverse]                                    # global piece number, in vertex order
    first_piece = np.searchsorted(np.sort(first), bundle.sg_starts)
    counts = np.diff(first_piece)
    sg = np.repeat(np.arange(bundle.num_subgraphs), np.diff(bundle.sg_starts))
    return (piece - first_piece[:-1][sg]).astype(np.int64), counts.astype(np.int64)


def _is_text(kind: pa.DataType) -> bool:
    return pa.types.is_string(kind) or pa.types.is_large_string(kind)


def _null_to_nan(column):
    import pyarrow.compute as pc

    if column.null_count and pa.types.is_floating(column.type):
        return pc.fill_null(column, float("nan")).to_numpy()
    if pa.types.is_dictionary(column.type):
        if column.null_count or not column.num_chunks:
            return _null_to_nan(column.cast(column.type.value_type))
        # one Python object per distinct value, shared by its rows (``to_numpy`` makes one per row)
        return np.concatenate([chunk.dictionary.to_numpy(zero_copy_only=False)[chunk.indices.to_numpy()]
                               for chunk in column.chunks])
    return files.numpy_values(column)
