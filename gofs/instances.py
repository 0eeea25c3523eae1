"""Append time-stamped instances (attribute values and topology changes) to a graph.

Instance values are stored row-aligned with the template files of each
partition, so a reader zips columns instead of joining. All instances of one
call are validated first, written, and only then committed by one log entry
(:mod:`gofs.manifest`): a failed or killed append leaves the graph as it was.

A value given for a static (template) attribute overrides the template's for that instance
only: the instance's files hold the whole column (the template's values copied where the
instance gives none) and its log entry lists the name (:func:`gofs.manifest.overridden`), so a
reader takes one column from one file either way. This module owns the instance format; the
writers that align values elsewhere (:mod:`gofs.instance_parts`, :mod:`gofs.frame_instances`)
use its public helpers.
"""
from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from gofs import files, housekeeping, layout, manifest as manifest_io, vids as vid_space
from gofs.errors import InputError
from gofs.ingest.formats import unique_vertex_ids


@dataclass
class Instance:
    """One instance: a time range and what changed in it.

    ``vertex_values``: table with an ``id`` column plus attributes.
    ``edge_values``: table with ``src``/``dst`` columns plus attributes, or
    exactly one row per input edge (in ingest order) and no ``src``/``dst``.
    A column named like a static attribute of the template overrides it in this instance for
    the rows given (a null given is a null); the other rows keep the template's value.
    ``added_edges`` (``src``, ``dst`` and optional attributes) and
    ``removed_edges`` (``src``, ``dst``) change the topology of this instance only.
    ``added_vertices`` (an ``id`` column) are vertices this instance has beyond the
    template, for this instance only like added edges; its added edges and vertex
    values may name them. A vertex keeps its internal id in every instance that adds
    it (:mod:`gofs.vids`).
    """

    start: float
    end: float | None = None
    vertex_values: pa.Table | pd.DataFrame | None = None
    edge_values: pa.Table | pd.DataFrame | None = None
    added_edges: pa.Table | pd.DataFrame | None = None
    removed_edges: pa.Table | pd.DataFrame | None = None
    added_vertices: pa.Table | pd.DataFrame | None = None


def _table(value, where: str) -> pa.Table | None:
    """An instance's table as Arrow: a pyarrow Table, a pandas DataFrame or a dict of columns."""
    if value is None or isinstance(value, pa.Table):
        return value
    if not isinstance(value, (pd.DataFrame, dict)):
        raise InputError(f"{where}: must be a pyarrow Table, a pandas DataFrame or a dict of columns, "
                         f"got {type(value).__name__} {value!r:.80}")
    try:
        return pa.Table.from_pandas(pd.DataFrame(value), preserve_index=False)
    except (ValueError, TypeError, pa.ArrowException) as exc:
        raise InputError(f"{where}: not a table of columns ({exc})") from None


class _Template:
    """What aligning instance values needs, each read on first use: the id index
    (vertex values and edge endpoints) and the edge index (edge values and
    removed edges). A vertex-only append never reads an edge file."""

    def __init__(self, fs, root: str, manifest: dict):
        self.fs, self.root = fs, root
        self.k = manifest["num_partitions"]
        self.n = manifest["num_vertices"]
        self.num_edges = manifest["num_edges"]
        self.directed = manifest["directed"]
        self.id_type = manifest["id_type"]
        self.vertex_offsets = np.array([q["vertex_offset"] for q in manifest["partitions"]] + [self.n], np.int64)

    @functools.cached_property
    def id_index(self) -> pd.Index:
        ids = [files.read_columns(self.fs, layout.template_vertices(self.root, p), ["id"]).column("id")
               for p in range(self.k)]
        values = pa.chunked_array([c for column in ids for c in column.chunks]) if ids else pa.chunked_array([], pa.int64())
        return pd.Index(values.to_numpy())

    @functools.cached_property
    def edge_index(self) -> tuple[np.ndarray, np.ndarray]:
        """(sorted pair keys, eids in that order) of every input edge: parallel copies of a pair
        sit side by side (in input order), so the k-th row naming a pair can name the k-th copy."""
        edges = pa.concat_tables([files.read_columns(self.fs, layout.template_edges(self.root, p),
                                                     ["eid", "src", "dst", "mirror"]) for p in range(self.k)])
        canon = edges.filter(pc.invert(edges.column("mirror")))
        eids = canon.column("eid").to_numpy()
        keys = self._pair_keys(canon.column("src").to_numpy(), canon.column("dst").to_numpy())
        order = np.lexsort((eids, keys))
        return keys[order], eids[order]

    def static_column(self, kind: str, name: str, rows: int) -> pa.Array:
        """The template's values of static ``kind`` attribute ``name`` by vid (vertices) or eid
        (edges), padded with nulls to ``rows`` (the vertices an instance adds have none)."""
        if kind == "vertex":
            column = pa.chunked_array([c for p in range(self.k) for c in files.read_columns(
                self.fs, layout.template_vertices(self.root, p), [name]).column(name).chunks])
        else:
            edges = pa.concat_tables([files.read_columns(self.fs, layout.template_edges(self.root, p),
                                                         ["eid", "mirror", name]) for p in range(self.k)])
            edges = edges.filter(pc.invert(edges.column("mirror")))
            column = _spread(edges.select([name]), edges.column("eid").to_numpy(), self.num_edges).column(name)
        column = column.combine_chunks()
        return pa.concat_arrays([column, pa.nulls(rows - len(column), column.type)]) if rows > len(column) else column

    def _pair_keys(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        if not self.directed:
            src, dst = np.minimum(src, dst), np.maximum(src, dst)
        return src.astype(np.int64) * np.int64(max(self.n, 1)) + dst.astype(np.int64)

    def vids(self, ids: pa.ChunkedArray, where: str, field: str, added: "AddedVertices | None" = None) -> np.ndarray:
        """Internal ids of ``ids``: template vertices, else the instance's ``added`` ones."""
        values = self._check_type(ids, where, field).to_numpy(zero_copy_only=False)
        vids = self.id_index.get_indexer(values)
        if added is not None and (vids < 0).any():
            vids = np.where(vids < 0, added.vids_of(values), vids)
        if (vids < 0).any():
            row = int(np.flatnonzero(vids < 0)[0])
            raise InputError(f"{where} row {row + 1}, field '{field}': unknown vertex {ids[row].as_py()!r}")
        return vids.astype(np.int64)

    def _check_type(self, ids, where: str, field: str):
        graph_int = self.id_type == "int64"
        if ids.null_count == 0 and pa.types.is_integer(ids.type) != graph_int:
            raise InputError(f"{where}, field '{field}': ids are {ids.type} but the graph's ids are "
                             f"{'int64' if graph_int else 'string'}")
        return ids

    def eids(self, table: pa.Table, where: str) -> np.ndarray:
        """The eid each row names: the k-th row naming a pair names its k-th parallel copy
        (an undirected pair in either orientation), so removing two copies takes two rows."""
        for column in ("src", "dst"):
            if column not in table.column_names:
                raise InputError(f"{where}: no '{column}' column (columns: {table.column_names})")
        keys = self._pair_keys(self.vids(table.column("src"), where, "src"),
                               self.vids(table.column("dst"), where, "dst"))
        index, eids = self.edge_index
        first, end = np.searchsorted(index, keys, "left"), np.searchsorted(index, keys, "right")
        order = np.argsort(keys, kind="stable")
        starts = np.r_[0, np.flatnonzero(np.diff(keys[order])) + 1] if len(keys) else np.zeros(0, np.int64)
        rank = np.empty(len(keys), np.int64)
        rank[order] = np.arange(len(keys)) - np.repeat(starts, np.diff(np.r_[starts, len(keys)]))
        bad = first + rank >= end
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            edge = f"{table.column('src')[row].as_py()!r} -> {table.column('dst')[row].as_py()!r}"
            copies = int(end[row] - first[row])
            raise InputError(f"{where} row {row + 1}: no edge {edge} in the graph" if not copies else
                             f"{where} row {row + 1}: edge {edge} is named {int(rank[row]) + 1} times, "
                             f"the graph has {copies} cop{'y' if copies == 1 else 'ies'}")
        return eids[first + rank]


class AddedVertices:
    """The vertices one instance adds beyond the template, ordered by vid (so by partition)."""

    def __init__(self, ids: np.ndarray, vids: np.ndarray, num_vertices: int):
        order = np.argsort(vids, kind="stable")
        self.ids, self.vids = ids[order], vids[order]
        self.partitions = (self.vids - num_vertices) // vid_space.ADDED_STRIDE
        self._index = pd.Index(self.ids)

    def __len__(self) -> int:
        return len(self.vids)

    def vids_of(self, values: np.ndarray) -> np.ndarray:
        """Vid of each of ``values`` (original ids), -1 where the instance does not add it."""
        at = self._index.get_indexer(values)
        return np.where(at >= 0, self.vids[np.maximum(at, 0)] if len(self.vids) else -1, -1)

    def rows_of(self, vids: np.ndarray, num_vertices: int) -> np.ndarray:
        """Row of each vid in values spread over the template's rows then these vertices'."""
        return np.where(vids < num_vertices, vids, num_vertices + np.searchsorted(self.vids, vids))

    def table(self, id_type: pa.DataType) -> pa.Table:
        return pa.table({"vid": pa.array(self.vids, pa.int64()), "id": pa.array(self.ids, id_type)})


class Registry:
    """Vertices earlier instances added, with their vids: a vertex added again keeps its
    vid, a new one gets the next free vid of its partition (:mod:`gofs.vids`). An instance
    that places new vertices stores the whole registry after it, so an append reads one
    file, however many instances came before."""

    def __init__(self, fs, data: str, manifest: dict):
        self.n, self.k = manifest["num_vertices"], manifest["num_partitions"]
        latest = [e["id"] for e in manifest["instances"] if (e.get("topology") or {}).get("registry")]
        self.ids, self.vids = np.empty(0, object), np.empty(0, np.int64)
        if latest:
            table = files.read_columns(fs, layout.instance_vertex_registry(data, latest[-1]), ["vid", "id"])
            self.ids = table.column("id").to_numpy(zero_copy_only=False)
            self.vids = table.column("vid").to_numpy()
        self.placed = np.zeros(self.k, np.int64)
        self._note(self.vids)
        self.grew = False

    def _note(self, vids: np.ndarray) -> None:
        offset = vids - self.n
        np.maximum.at(self.placed, offset // vid_space.ADDED_STRIDE, offset % vid_space.ADDED_STRIDE + 1)

    def vids_for(self, ids: np.ndarray, partition_hint: np.ndarray) -> np.ndarray:
        """Vids of ``ids``: known ones keep theirs; new ones go to ``partition_hint`` (-1: by a stable hash)."""
        index = pd.Index(self.ids)
        known = index.get_indexer(ids) if len(index) else np.full(len(ids), -1)
        out = np.where(known >= 0, self.vids[np.maximum(known, 0)] if len(self.vids) else -1, -1)
        new = np.flatnonzero(known < 0)
        if len(new):
            hashed = (pd.util.hash_array(np.asarray(ids[new])) % np.uint64(self.k)).astype(np.int64)
            part = np.where(partition_hint[new] >= 0, partition_hint[new], hashed)
            order = np.argsort(part, kind="stable")
            counts = np.bincount(part, minlength=self.k)
            within = np.arange(len(new)) - np.repeat(np.cumsum(counts) - counts, counts)
            index_in_part = np.empty(len(new), np.int64)
            index_in_part[order] = within + self.placed[part[order]]
            out[new] = vid_space.added_vid(self.n, part, index_in_part)
            self.ids = np.concatenate([self.ids, ids[new]]) if len(self.ids) else np.asarray(ids[new])
            self.vids = np.concatenate([self.vids, out[new]])
            self._note(out[new])
            self.grew = True
        return out

    def table_if_grown(self, id_type: str) -> pa.Table | None:
        """The registry as it is now, if it grew since the last call (else None)."""
        if not self.grew:
            return None
        self.grew = False
        return pa.table({"vid": pa.array(self.vids, pa.int64()),
                         "id": pa.array(self.ids, pa.int64() if id_type == "int64" else pa.string())})


def _spread(values: pa.Table, index: np.ndarray, size: int) -> pa.Table:
    """Place row i of ``values`` at position index[i] of a ``size``-row table (nulls elsewhere)."""
    position = np.full(size, -1, dtype=np.int64)
    position[index] = np.arange(len(index))
    return values.take(pa.array(position, mask=position < 0))


#: column names of the value files and read frames that no attribute may take
RESERVED = {"vertex": {"id", "vid", "sg", "instance", "start", "end"},
            "edge": {"src", "dst", "eid", "instance", "start", "end"}}


def static_types(manifest: dict, kind: str) -> dict:
    """{name: Arrow type} of the template's static ``kind`` attributes (what an instance may override)."""
    return manifest_io.field_types(manifest[f"{kind}_schema"], f"{kind} schema")


def check_schema(kind: str, table: pa.Table, known: dict, static: dict, where: str) -> list[str]:
    """Check ``table``'s attribute columns against the per-instance types ``known`` so far and the
    template's ``static`` types; returns the names that override a static attribute (their values
    must convert to the template's type, :func:`with_template_values`)."""
    for f in table.schema:
        if f.name in RESERVED[kind]:
            raise InputError(f"{where}, field '{f.name}': clashes with a key column of the {kind} files")
        if f.name not in static and f.name in known and not known[f.name].equals(f.type):
            raise InputError(f"{where}, field '{f.name}': type {f.type} differs from earlier instances ({known[f.name]})")
    return [f.name for f in table.schema if f.name in static]


def with_template_values(given: pa.Array, chosen: np.ndarray, template: pa.Array, where: str) -> pa.Array:
    """An override column: ``given`` where ``chosen``, else the template's value (same rows)."""
    try:
        given = given.cast(template.type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise InputError(f"{where}: values do not fit the template's type {template.type} ({exc})") from None
    return pc.if_else(pa.array(chosen, pa.bool_()), given, template)


def time_range(start, end, manifest: dict, where: str) -> tuple[float, float]:
    """(start, end) of one instance appended after the graph's last one, checked."""
    try:
        start = float(start)
        end = float(end if end is not None else start)
    except (TypeError, ValueError):
        raise InputError(f"{where}: start/end must be numbers") from None
    if not (np.isfinite(start) and np.isfinite(end)) or end < start:
        raise InputError(f"{where}: need finite start <= end, got start {start}, end {end}")
    if manifest["instances"] and start < manifest["instances"][-1]["start"]:
        raise InputError(f"{where}: starts before the previous instance ({manifest['instances'][-1]['start']}); "
                         "instances are appended in time order")
    return start, end


def append_instances(path: str, instances: list[Instance]) -> list[int]:
    """Validate, write and commit ``instances``; returns their ids.

    Files are written first, into instance directories no committed entry
    mentions; one log entry then commits them all. A writer killed at any
    point leaves the graph as it was (its files are orphans, removed by the
    next writer). Writers on a local disk take the graph's lock; elsewhere one
    writer at a time is supported and a second one gets CommitConflict.
    """
    if not isinstance(instances, (list, tuple)):
        raise InputError(f"append_instances: instances must be a list of Instance, got {type(instances).__name__}")
    for number, inst in enumerate(instances):
        if not isinstance(inst, Instance):
            raise InputError(f"append_instances: instances[{number}] must be an Instance, got {inst!r:.80}")
    fs, root = layout.filesystem(path)
    if not instances:
        return []
    with open_for_append(fs, root) as (snapshot, locked):
        data = layout.version_root(root, snapshot.version)
        prepared, schema = _prepare(fs, data, snapshot, instances,
                                    housekeeping.next_instance_id(fs, data, snapshot))
        written = []
        try:
            for iid, _, _, vertex_table, edge_table, changes, _ in prepared:
                written.append(iid)
                _write_instance(fs, data, snapshot.manifest, iid, vertex_table, edge_table, changes)
            entry = {"op": "append", "data": snapshot.version, "instances": [
                log_entry(iid, start, end, vertex_table, edge_table, changes, overrides)
                for iid, start, end, vertex_table, edge_table, changes, overrides in prepared],
                "instance_schema": schema}
            manifest_io.commit(fs, root, snapshot.head + 1, entry,
                               durable=[layout.instance_dir(data, iid) for iid in written])
        except manifest_io.CommitConflict:
            raise               # the files may be a concurrent writer's too: delete nothing
        except BaseException:
            for iid in written:
                layout.remove(fs, layout.instance_dir(data, iid))
            raise
        after_commit(fs, root, locked)
    return [iid for iid, *_ in prepared]


def after_commit(fs, root: str, locked: bool) -> None:
    """Fold a long log into one entry and, holding the lock, remove what is superseded."""
    snapshot = manifest_io.compact_if_due(fs, root, manifest_io.read(fs, root))
    if locked:
        housekeeping.clean(fs, root, snapshot)


@contextlib.contextmanager
def open_for_append(fs, root: str):
    """(latest snapshot, whether the writer lock is held) for one writer: the lock taken
    where the filesystem has one, a format-1 graph migrated, killed writers' leftovers cleaned."""
    with manifest_io.writer_lock(fs, root) as locked:
        snapshot = manifest_io.read(fs, root)
        if snapshot.head < 0:
            snapshot = _migrate_format1(fs, root, snapshot)
        if locked:
            housekeeping.clean(fs, root, snapshot)
        yield snapshot, locked


def _migrate_format1(fs, root: str, snapshot):
    """Give a format-1 graph a commit log: one create entry with its data in place and its instances."""
    graph = {k: v for k, v in snapshot.manifest.items() if k not in ("format", "version", "instances",
                                                                    "instance_schema")}
    manifest_io.commit(fs, root, 0, {"op": "create", "data": "", "graph": graph,
                                     "instances": snapshot.manifest["instances"],
                                     "instance_schema": snapshot.manifest["instance_schema"]})
    return manifest_io.read(fs, root)


def _prepare(fs, data: str, snapshot, instances: list[Instance], next_id: int):
    """Validate every instance and align its values with the template; nothing is written."""
    manifest = snapshot.manifest
    template = _Template(fs, data, manifest)
    where = f"{data}: instance schema"
    vschema = manifest_io.field_types(manifest["instance_schema"]["vertex"], where)
    eschema = manifest_io.field_types(manifest["instance_schema"]["edge"], where)
    vstatic, estatic = static_types(manifest, "vertex"), static_types(manifest, "edge")
    last_start = manifest["instances"][-1]["start"] if manifest["instances"] else -np.inf
    registry = Registry(fs, data, manifest)
    prepared = []
    for number, inst in enumerate(instances):
        where = f"instance {number} (start={inst.start})"
        try:
            start = float(inst.start)
            end = float(inst.end if inst.end is not None else inst.start)
        except (TypeError, ValueError):
            raise InputError(f"{where}: start/end must be numbers") from None
        if not (np.isfinite(start) and np.isfinite(end)):
            raise InputError(f"{where}: start/end must be finite numbers")
        if end < start:
            raise InputError(f"{where}: end {end} is before start {start}")
        if start < last_start:
            raise InputError(f"{where}: starts before the previous instance ({last_start}); instances are appended in time order")
        last_start = start
        vertex_table = edge_table = None
        overrides = {"vertex": [], "edge": []}
        added_edges = _table(inst.added_edges, f"{where} added_edges")
        added = _added_vertices(template, registry, _table(inst.added_vertices, f"{where} added_vertices"),
                                added_edges, where)
        vt = _table(inst.vertex_values, f"{where} vertex_values")
        if vt is not None:
            if "id" not in vt.column_names:
                raise InputError(f"{where} vertex values: no 'id' column (columns: {vt.column_names})")
            vids = template.vids(vt.column("id"), f"{where} vertex values", "id", added)
            if pd.Index(vids).duplicated().any():
                row = int(np.flatnonzero(pd.Index(vids).duplicated())[0])
                raise InputError(f"{where} vertex values row {row + 1}, field 'id': vertex given twice")
            attrs = vt.drop(["id"])
            overrides["vertex"] = check_schema("vertex", attrs, vschema, vstatic, f"{where} vertex values")
            vschema.update({f.name: f.type for f in attrs.schema if f.name not in vstatic})
            rows = vids if added is None else added.rows_of(vids, template.n)
            vertex_table = _with_overrides(template, "vertex", _spread(attrs, rows, template.n + (0 if added is None else len(added))),
                                           rows, overrides["vertex"], f"{where} vertex values")
        et = _table(inst.edge_values, f"{where} edge_values")
        if et is not None:
            if "src" in et.column_names or "dst" in et.column_names:
                eids = template.eids(et, f"{where} edge values")
                attrs = et.drop([c for c in ("src", "dst") if c in et.column_names])
            elif et.num_rows == template.num_edges:
                eids, attrs = np.arange(template.num_edges), et
            else:
                raise InputError(f"{where} edge values: need 'src' and 'dst' columns, or exactly one row per "
                                 f"edge ({template.num_edges}), got {et.num_rows} rows")
            overrides["edge"] = check_schema("edge", attrs, eschema, estatic, f"{where} edge values")
            eschema.update({f.name: f.type for f in attrs.schema if f.name not in estatic})
            edge_table = _with_overrides(template, "edge", _spread(attrs, eids, template.num_edges), eids,
                                         overrides["edge"], f"{where} edge values")
        topology = _topology(template, added_edges, _table(inst.removed_edges, f"{where} removed_edges"), added, where)
        changes = (topology, added, registry.table_if_grown(template.id_type))
        prepared.append((next_id + number, start, end, vertex_table, edge_table, changes, overrides))
    schema = {"vertex": manifest_io.schema_fields(pa.schema(list(vschema.items()))),
              "edge": manifest_io.schema_fields(pa.schema(list(eschema.items())))}
    return prepared, schema


def _with_overrides(template: _Template, kind: str, table: pa.Table, rows: np.ndarray, names: list[str],
                    where: str) -> pa.Table:
    """``table`` (spread over every row) with each override column completed from the template
    where ``rows`` gave no value."""
    chosen = np.zeros(table.num_rows, bool)
    chosen[rows] = True
    for name in names:
        column = with_template_values(table.column(name).combine_chunks(), chosen,
                                      template.static_column(kind, name, table.num_rows), f"{where}, field '{name}'")
        table = table.set_column(table.column_names.index(name), name, column)
    return table


def _write_instance(fs, data: str, manifest: dict, iid: int, vertex_table, edge_table, changes) -> None:
    """Per partition, its rows of the values (template vertices, then the ones the instance
    adds there, in vid order); the topology changes and added vertices once."""
    topology, added, registry = changes
    k, n = manifest["num_partitions"], manifest["num_vertices"]
    offsets = [pp["vertex_offset"] for pp in manifest["partitions"]] + [n]
    extra = np.zeros(k + 1, np.int64) if added is None else np.searchsorted(added.partitions, np.arange(k + 1))
    edge_rows = None
    for p in range(k):
        if vertex_table is not None:
            rows = np.r_[offsets[p]:offsets[p + 1], n + extra[p]:n + extra[p + 1]]
            files.write_table(fs, layout.instance_vertices(data, iid, p), vertex_table.take(pa.array(rows, pa.int64())))
        if edge_table is not None:
            if edge_rows is None:
                edge_rows = _edge_rows(fs, data, k)
            files.write_table(fs, layout.instance_edges(data, iid, p), edge_table.take(pa.array(edge_rows[p])))
    if topology is not None:
        files.write_table(fs, layout.instance_topology(data, iid), topology)
    if added is not None:
        id_type = pa.int64() if manifest["id_type"] == "int64" else pa.string()
        files.write_table(fs, layout.instance_added_vertices(data, iid), added.table(id_type))
    if registry is not None:
        files.write_table(fs, layout.instance_vertex_registry(data, iid), registry)


def _edge_rows(fs, data: str, k: int) -> list[np.ndarray]:
    """Per partition, the input edge (eid) of each row of its template edge file."""
    return [files.read_columns(fs, layout.template_edges(data, p), ["eid"]).column("eid").to_numpy()
            for p in range(k)]


def log_entry(iid, start, end, vertex_table, edge_table, changes, overrides: dict | None = None) -> dict:
    """The log entry of one instance: its time range, the attributes its value files hold (those
    of ``overrides``, {kind: names}, listed as overriding the template's), topology counts."""
    topology, added, registry = changes
    overrides = overrides or {}
    entry = {"id": iid, "start": start, "end": end}
    for kind, table in (("vertex", vertex_table), ("edge", edge_table)):
        shadowing = overrides.get(kind) or []
        entry[f"{kind}_attributes"] = [] if table is None else [c for c in table.column_names if c not in shadowing]
    for kind in ("vertex", "edge"):
        if overrides.get(kind):
            entry[f"{kind}_overrides"] = list(overrides[kind])
    entry["topology"] = None if topology is None else {
        "added": int(pc.sum(pc.equal(topology.column("op"), "add")).as_py() or 0),
        "removed": int(pc.sum(pc.equal(topology.column("op"), "remove")).as_py() or 0)}
    if added is not None:
        entry["topology"]["added_vertices"] = len(added)
        entry["topology"]["registry"] = registry is not None
    return entry


def _added_vertices(template: _Template, registry: Registry, table: pa.Table | None,
                    added_edges: pa.Table | None, where: str) -> AddedVertices | None:
    """The instance's added vertices with their vids. A vertex no earlier instance added is
    placed in the partition of its first template neighbour among the added edges (else by
    a stable hash of its id)."""
    if table is None or table.num_rows == 0:
        return None
    where = f"{where} added vertices"
    if table.column_names != ["id"]:
        raise InputError(f"{where}: only an 'id' column is allowed (columns: {table.column_names}); "
                         "their attribute values go in vertex_values")
    column = template._check_type(table.column("id"), where, "id")
    ids = unique_vertex_ids(column, lambda row: f"{where} row {row + 1}, field 'id'")
    known = template.id_index.get_indexer(ids)
    if (known >= 0).any():
        row = int(np.flatnonzero(known >= 0)[0])
        raise InputError(f"{where} row {row + 1}, field 'id': {column[row].as_py()!r} is already a vertex of the template")
    hint = np.full(len(ids), -1, np.int64)
    if added_edges is not None and all(c in added_edges.column_names for c in ("src", "dst")):
        index = pd.Index(ids)
        for mine, other in (("src", "dst"), ("dst", "src")):
            at = index.get_indexer(added_edges.column(mine).to_numpy(zero_copy_only=False))
            neighbour = template.id_index.get_indexer(added_edges.column(other).to_numpy(zero_copy_only=False))
            rows = np.flatnonzero((at >= 0) & (neighbour >= 0))
            first = rows[np.unique(at[rows], return_index=True)[1]]
            free = hint[at[first]] < 0
            hint[at[first][free]] = np.searchsorted(template.vertex_offsets, neighbour[first][free], side="right") - 1
    return AddedVertices(ids, registry.vids_for(ids, hint), template.n)


def _topology(template: _Template, added: pa.Table | None, removed: pa.Table | None,
              vertices: AddedVertices | None, where: str):
    """One table of topology changes: op ("add"/"remove"), eid (-1 for added), src/dst vids, attrs.
    An instance that only adds vertices gets an empty one."""
    pieces = []
    if removed is not None:
        eids = template.eids(removed, f"{where} removed edges")
        pieces.append(pa.table({"op": pa.array(["remove"] * len(eids)), "eid": pa.array(eids, pa.int64())}))
    if added is not None:
        for column in ("src", "dst"):
            if column not in added.column_names:
                raise InputError(f"{where} added edges: no '{column}' column")
        src = template.vids(added.column("src"), f"{where} added edges", "src", vertices)
        dst = template.vids(added.column("dst"), f"{where} added edges", "dst", vertices)
        cols = {"op": pa.array(["add"] * len(src)), "eid": pa.array(np.full(len(src), -1, np.int64)),
                "add_src": pa.array(src), "add_dst": pa.array(dst)}
        for name in added.column_names:
            if name not in ("src", "dst"):
                cols[name] = added.column(name)
        pieces.append(pa.table(cols))
    if not pieces:
        if vertices is None:
            return None
        pieces.append(pa.table({"op": pa.array([], pa.string()), "eid": pa.array([], pa.int64())}))
    return pa.concat_tables(pieces, promote_options="default")
