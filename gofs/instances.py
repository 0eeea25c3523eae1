"""Append time-stamped instances (attribute values and topology changes) to a graph.

Instance values are stored row-aligned with the template files of each
partition, so a reader zips columns instead of joining. All instances of one
call are validated first, written, and only then committed by one log entry
(:mod:`gofs.manifest`): a failed or killed append leaves the graph as it was.
"""
from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from gofs import files, housekeeping, layout, manifest as manifest_io
from gofs.errors import InputError
from gofs.ingest import _write


@dataclass
class Instance:
    """One instance: a time range and what changed in it.

    ``vertex_values``: table with an ``id`` column plus attributes.
    ``edge_values``: table with ``src``/``dst`` columns plus attributes, or
    exactly one row per input edge (in ingest order) and no ``src``/``dst``.
    ``added_edges`` (``src``, ``dst`` and optional attributes) and
    ``removed_edges`` (``src``, ``dst``) change the topology of this instance only.
    """

    start: float
    end: float | None = None
    vertex_values: pa.Table | pd.DataFrame | None = None
    edge_values: pa.Table | pd.DataFrame | None = None
    added_edges: pa.Table | pd.DataFrame | None = None
    removed_edges: pa.Table | pd.DataFrame | None = None


def _table(value) -> pa.Table | None:
    if value is None or isinstance(value, pa.Table):
        return value
    return pa.Table.from_pandas(pd.DataFrame(value), preserve_index=False)


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

    @functools.cached_property
    def id_index(self) -> pd.Index:
        ids = [files.read_columns(self.fs, layout.template_vertices(self.root, p), ["id"]).column("id")
               for p in range(self.k)]
        values = pa.chunked_array([c for column in ids for c in column.chunks]) if ids else pa.chunked_array([], pa.int64())
        return pd.Index(values.to_numpy())

    @functools.cached_property
    def edge_index(self) -> tuple[pd.MultiIndex, np.ndarray]:
        """(src, dst) of every input edge -> its eid; parallel edges map to the first one."""
        edges = pa.concat_tables([files.read_columns(self.fs, layout.template_edges(self.root, p),
                                                     ["eid", "src", "dst", "mirror"]) for p in range(self.k)])
        canon = edges.filter(pc.invert(edges.column("mirror")))
        index = pd.MultiIndex.from_arrays([canon.column("src").to_numpy(), canon.column("dst").to_numpy()])
        first = ~index.duplicated()
        return index[first], canon.column("eid").to_numpy()[first]

    def vids(self, ids: pa.ChunkedArray, where: str, field: str) -> np.ndarray:
        values = ids.to_numpy(zero_copy_only=False)
        graph_int = self.id_type == "int64"
        if ids.null_count == 0 and pa.types.is_integer(ids.type) != graph_int:
            raise InputError(f"{where}, field '{field}': ids are {ids.type} but the graph's ids are "
                             f"{'int64' if graph_int else 'string'}")
        vids = self.id_index.get_indexer(values)
        if (vids < 0).any():
            row = int(np.flatnonzero(vids < 0)[0])
            raise InputError(f"{where} row {row + 1}, field '{field}': unknown vertex {ids[row].as_py()!r}")
        return vids.astype(np.int64)

    def eids(self, table: pa.Table, where: str) -> np.ndarray:
        for column in ("src", "dst"):
            if column not in table.column_names:
                raise InputError(f"{where}: no '{column}' column (columns: {table.column_names})")
        src = self.vids(table.column("src"), where, "src")
        dst = self.vids(table.column("dst"), where, "dst")
        found = self._lookup(src, dst)
        if not self.directed:
            found = np.where(found < 0, self._lookup(dst, src), found)
        if (found < 0).any():
            row = int(np.flatnonzero(found < 0)[0])
            raise InputError(f"{where} row {row + 1}: no edge {table.column('src')[row].as_py()!r} -> "
                             f"{table.column('dst')[row].as_py()!r} in the graph")
        return found

    def _lookup(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        index, eids = self.edge_index
        pos = index.get_indexer(pd.MultiIndex.from_arrays([src, dst]))
        return np.where(pos >= 0, eids[pos] if len(eids) else -1, -1)


def _spread(values: pa.Table, index: np.ndarray, size: int) -> pa.Table:
    """Place row i of ``values`` at position index[i] of a ``size``-row table (nulls elsewhere)."""
    position = np.full(size, -1, dtype=np.int64)
    position[index] = np.arange(len(index))
    return values.take(pa.array(position, mask=position < 0))


def _check_schema(kind: str, table: pa.Table, known: dict, static: set, where: str) -> None:
    for f in table.schema:
        if f.name in static:
            raise InputError(f"{where}, field '{f.name}': clashes with a static {kind} attribute of the template")
        if f.name in known and not known[f.name].equals(f.type):
            raise InputError(f"{where}, field '{f.name}': type {f.type} differs from earlier instances ({known[f.name]})")


def append_instances(path: str, instances: list[Instance]) -> list[int]:
    """Validate, write and commit ``instances``; returns their ids.

    Files are written first, into instance directories no committed entry
    mentions; one log entry then commits them all. A writer killed at any
    point leaves the graph as it was (its files are orphans, removed by the
    next writer). Writers on a local disk take the graph's lock; elsewhere one
    writer at a time is supported and a second one gets CommitConflict.
    """
    fs, root = layout.filesystem(path)
    if not instances:
        return []
    with open_for_append(fs, root) as (snapshot, locked):
        data = layout.version_root(root, snapshot.version)
        prepared, schema = _prepare(fs, data, snapshot, instances,
                                    housekeeping.next_instance_id(fs, data, snapshot))
        written = []
        try:
            for iid, _, _, vertex_table, edge_table, topology in prepared:
                written.append(iid)
                _write_instance(fs, data, snapshot.manifest, iid, vertex_table, edge_table, topology)
            entry = {"op": "append", "data": snapshot.version, "instances": [
                _entry(iid, start, end, vertex_table, edge_table, topology)
                for iid, start, end, vertex_table, edge_table, topology in prepared],
                "instance_schema": schema}
            manifest_io.commit(fs, root, snapshot.head + 1, entry)
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
    vstatic = {f["name"] for f in manifest["vertex_schema"]} | {"id", "vid", "sg", "instance", "start", "end"}
    estatic = {f["name"] for f in manifest["edge_schema"]} | {"src", "dst", "eid", "instance", "start", "end"}
    last_start = manifest["instances"][-1]["start"] if manifest["instances"] else -np.inf
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
        vt = _table(inst.vertex_values)
        if vt is not None:
            if "id" not in vt.column_names:
                raise InputError(f"{where} vertex values: no 'id' column (columns: {vt.column_names})")
            vids = template.vids(vt.column("id"), f"{where} vertex values", "id")
            if pd.Index(vids).duplicated().any():
                row = int(np.flatnonzero(pd.Index(vids).duplicated())[0])
                raise InputError(f"{where} vertex values row {row + 1}, field 'id': vertex given twice")
            attrs = vt.drop(["id"])
            _check_schema("vertex", attrs, vschema, vstatic, f"{where} vertex values")
            vschema.update({f.name: f.type for f in attrs.schema})
            vertex_table = _spread(attrs, vids, template.n)
        et = _table(inst.edge_values)
        if et is not None:
            if "src" in et.column_names or "dst" in et.column_names:
                eids = template.eids(et, f"{where} edge values")
                attrs = et.drop([c for c in ("src", "dst") if c in et.column_names])
            elif et.num_rows == template.num_edges:
                eids, attrs = np.arange(template.num_edges), et
            else:
                raise InputError(f"{where} edge values: need 'src' and 'dst' columns, or exactly one row per "
                                 f"edge ({template.num_edges}), got {et.num_rows} rows")
            _check_schema("edge", attrs, eschema, estatic, f"{where} edge values")
            eschema.update({f.name: f.type for f in attrs.schema})
            edge_table = _spread(attrs, eids, template.num_edges)
        topology = _topology(template, _table(inst.added_edges), _table(inst.removed_edges), where)
        prepared.append((next_id + number, start, end, vertex_table, edge_table, topology))
    schema = {"vertex": manifest_io.schema_fields(pa.schema(list(vschema.items()))),
              "edge": manifest_io.schema_fields(pa.schema(list(eschema.items())))}
    return prepared, schema


def _write_instance(fs, data: str, manifest: dict, iid: int, vertex_table, edge_table, topology) -> None:
    k = manifest["num_partitions"]
    offsets = [pp["vertex_offset"] for pp in manifest["partitions"]] + [manifest["num_vertices"]]
    edge_rows = None
    for p in range(k):
        if vertex_table is not None:
            _write(fs, layout.instance_vertices(data, iid, p), vertex_table.slice(offsets[p], offsets[p + 1] - offsets[p]))
        if edge_table is not None:
            if edge_rows is None:
                edge_rows = _edge_rows(fs, data, k)
            _write(fs, layout.instance_edges(data, iid, p), edge_table.take(pa.array(edge_rows[p])))
    if topology is not None:
        _write(fs, layout.instance_topology(data, iid), topology)


def _edge_rows(fs, data: str, k: int) -> list[np.ndarray]:
    """Per partition, the input edge (eid) of each row of its template edge file."""
    return [files.read_columns(fs, layout.template_edges(data, p), ["eid"]).column("eid").to_numpy()
            for p in range(k)]


def _entry(iid, start, end, vertex_table, edge_table, topology) -> dict:
    return {"id": iid, "start": start, "end": end,
            "vertex_attributes": [] if vertex_table is None else vertex_table.column_names,
            "edge_attributes": [] if edge_table is None else edge_table.column_names,
            "topology": None if topology is None else {
                "added": int(pc.sum(pc.equal(topology.column("op"), "add")).as_py() or 0),
                "removed": int(pc.sum(pc.equal(topology.column("op"), "remove")).as_py() or 0)}}


def _topology(template: _Template, added: pa.Table | None, removed: pa.Table | None, where: str):
    """One table of topology changes: op ("add"/"remove"), eid (-1 for added), src/dst vids, attrs."""
    pieces = []
    if removed is not None:
        eids = template.eids(removed, f"{where} removed edges")
        pieces.append(pa.table({"op": pa.array(["remove"] * len(eids)), "eid": pa.array(eids, pa.int64())}))
    if added is not None:
        for column in ("src", "dst"):
            if column not in added.column_names:
                raise InputError(f"{where} added edges: no '{column}' column")
        src = template.vids(added.column("src"), f"{where} added edges", "src")
        dst = template.vids(added.column("dst"), f"{where} added edges", "dst")
        cols = {"op": pa.array(["add"] * len(src)), "eid": pa.array(np.full(len(src), -1, np.int64)),
                "add_src": pa.array(src), "add_dst": pa.array(dst)}
        for name in added.column_names:
            if name not in ("src", "dst"):
                cols[name] = added.column(name)
        pieces.append(pa.table(cols))
    if not pieces:
        return None
    return pa.concat_tables(pieces, promote_options="default")
