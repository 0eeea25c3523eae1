"""Append time-stamped instances (attribute values and topology changes) to a graph.

Instance values are stored row-aligned with the template files of each
partition, so a reader zips columns instead of joining. All instances of one
call are validated first, staged, moved into place, and only then listed in
the manifest: a failed append leaves the graph exactly as it was.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from gofs import files, layout, manifest as manifest_io
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
    """The parts of the template that alignment needs: ids and edge keys."""

    def __init__(self, fs, root: str, manifest: dict):
        k = manifest["num_partitions"]
        self.n = manifest["num_vertices"]
        self.directed = manifest["directed"]
        ids = pa.concat_arrays([files.read_columns(fs, layout.template_vertices(root, p), ["id"])
                                .column("id").combine_chunks() for p in range(k)]) if k else pa.array([])
        self.id_index = pd.Index(ids.to_numpy(zero_copy_only=False))
        edges = [files.read_columns(fs, layout.template_edges(root, p), ["eid", "src", "dst", "mirror"])
                 for p in range(k)]
        self.edge_rows = [t.column("eid").to_numpy() for t in edges]
        canon = pa.concat_tables(edges).filter(pc.invert(pa.concat_tables(edges).column("mirror")))
        self.num_edges = canon.num_rows
        eid = canon.column("eid").to_numpy()
        key = canon.column("src").to_numpy() * max(self.n, 1) + canon.column("dst").to_numpy()
        order = np.argsort(key, kind="stable")
        self.keys, self.key_eids = key[order], eid[order]

    def vids(self, ids: pa.ChunkedArray, where: str, field: str) -> np.ndarray:
        values = ids.to_numpy(zero_copy_only=False)
        if ids.null_count == 0 and pa.types.is_integer(ids.type) != pd.api.types.is_integer_dtype(self.id_index.dtype):
            raise InputError(f"{where}, field '{field}': ids are {ids.type} but the graph's ids are "
                             f"{'int64' if pd.api.types.is_integer_dtype(self.id_index.dtype) else 'string'}")
        vids = self.id_index.get_indexer(values)
        if (vids < 0).any():
            row = int(np.flatnonzero(vids < 0)[0])
            raise InputError(f"{where} row {row + 1}, field '{field}': unknown vertex {ids[row].as_py()!r}")
        return vids.astype(np.int64)

    def eids(self, table: pa.Table, where: str) -> np.ndarray:
        src = self.vids(table.column("src"), where, "src")
        dst = self.vids(table.column("dst"), where, "dst")
        found = self._lookup(src * max(self.n, 1) + dst)
        if not self.directed:
            found = np.where(found < 0, self._lookup(dst * max(self.n, 1) + src), found)
        if (found < 0).any():
            row = int(np.flatnonzero(found < 0)[0])
            raise InputError(f"{where} row {row + 1}: no edge {table.column('src')[row].as_py()!r} -> "
                             f"{table.column('dst')[row].as_py()!r} in the graph")
        return found

    def _lookup(self, keys: np.ndarray) -> np.ndarray:
        pos = np.searchsorted(self.keys, keys)
        pos_c = np.minimum(pos, max(len(self.keys) - 1, 0))
        hit = (pos < len(self.keys)) & (self.keys[pos_c] == keys) if len(self.keys) else np.zeros(len(keys), bool)
        return np.where(hit, self.key_eids[pos_c] if len(self.keys) else -1, -1)


def _spread(values: pa.Table, index: np.ndarray, size: int) -> pa.Table:
    """Place row i of ``values`` at position index[i] of a ``size``-row table (nulls elsewhere)."""
    position = np.full(size, -1, dtype=np.int64)
    position[index] = np.arange(len(index))
    return values.take(pa.array(position, mask=position < 0))


def _check_schema(kind: str, table: pa.Table, known: dict, static: set, where: str) -> None:
    for f in table.schema:
        if f.name in static:
            raise InputError(f"{where}, field '{f.name}': clashes with a static {kind} attribute of the template")
        if f.name in known and known[f.name] != str(f.type):
            raise InputError(f"{where}, field '{f.name}': type {f.type} differs from earlier instances ({known[f.name]})")


def append_instances(path: str, instances: list[Instance]) -> list[int]:
    """Validate, write and commit ``instances``; returns their ids."""
    fs, root = layout.filesystem(path)
    manifest = manifest_io.read(fs, root)
    template = _Template(fs, root, manifest)
    k = manifest["num_partitions"]
    offsets = [pp["vertex_offset"] for pp in manifest["partitions"]] + [manifest["num_vertices"]]
    vschema = {f["name"]: f["type"] for f in manifest["instance_schema"]["vertex"]}
    eschema = {f["name"]: f["type"] for f in manifest["instance_schema"]["edge"]}
    vstatic = {f["name"] for f in manifest["vertex_schema"]} | {"id", "vid", "sg", "instance", "start", "end"}
    estatic = {f["name"] for f in manifest["edge_schema"]} | {"src", "dst", "eid", "instance", "start", "end"}
    last_start = manifest["instances"][-1]["start"] if manifest["instances"] else -np.inf
    next_id = manifest["instances"][-1]["id"] + 1 if manifest["instances"] else 0

    prepared = []
    for number, inst in enumerate(instances):
        where = f"instance {number} (start={inst.start})"
        try:
            start = float(inst.start)
            end = float(inst.end if inst.end is not None else inst.start)
        except (TypeError, ValueError):
            raise InputError(f"{where}: start/end must be numbers") from None
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
            vschema.update({f.name: str(f.type) for f in attrs.schema})
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
            eschema.update({f.name: str(f.type) for f in attrs.schema})
            edge_table = _spread(attrs, eids, template.num_edges)
        topology = _topology(template, _table(inst.added_edges), _table(inst.removed_edges), where)
        prepared.append((next_id + number, start, end, vertex_table, edge_table, topology))

    batch = layout.join(root, "instances", f".batch-{uuid.uuid4().hex[:12]}")
    committed = []
    try:
        for iid, start, end, vertex_table, edge_table, topology in prepared:
            staged = layout.join(batch, f"i-{iid:06d}")
            fs.create_dir(staged, recursive=True)
            for p in range(k):
                if vertex_table is not None:
                    _write(fs, layout.join(staged, "vertices", layout.part_file(p)),
                           vertex_table.slice(offsets[p], offsets[p + 1] - offsets[p]))
                if edge_table is not None:
                    _write(fs, layout.join(staged, "edges", layout.part_file(p)),
                           edge_table.take(pa.array(template.edge_rows[p])))
            if topology is not None:
                _write(fs, layout.join(staged, "topology.parquet"), topology)
        for iid, *_ in prepared:
            fs.move(layout.join(batch, f"i-{iid:06d}"), layout.instance_dir(root, iid))
            committed.append(iid)
        for iid, start, end, vertex_table, edge_table, topology in prepared:
            manifest["instances"].append({
                "id": iid, "start": start, "end": end,
                "vertex_attributes": [] if vertex_table is None else vertex_table.column_names,
                "edge_attributes": [] if edge_table is None else edge_table.column_names,
                "topology": None if topology is None else {
                    "added": int(pc.sum(pc.equal(topology.column("op"), "add")).as_py() or 0),
                    "removed": int(pc.sum(pc.equal(topology.column("op"), "remove")).as_py() or 0)},
            })
        manifest["instance_schema"] = {"vertex": [{"name": n, "type": t} for n, t in vschema.items()],
                                       "edge": [{"name": n, "type": t} for n, t in eschema.items()]}
        manifest_io.write(fs, root, manifest)
    except BaseException:
        for iid in committed:
            layout.remove(fs, layout.instance_dir(root, iid))
        raise
    finally:
        layout.remove(fs, batch)
    return [iid for iid, *_ in prepared]


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
