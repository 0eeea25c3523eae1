"""Append one instance written in parts by several writers, aligned where the parts are.

:func:`gofs.instances.append_instances` takes an instance keyed by original ids and aligns it
with the template in the calling process, which reads the template's ids and edge index: O(V + E)
there. Writers that already know the template's internal ids (Hatrick's stream workers, each
holding a part of the live graph) give their part in those terms instead, and the driver of the
append (:func:`append_parts`) never holds more than the parts' summaries:

1. every writer stages its part (:func:`stage_part`): sparse tables keyed by template vid / eid,
   split by the GoFS partition they land in, under the new instance's ``_parts/`` directory;
2. the driver places the vertices the instance adds beyond the template (:mod:`gofs.vids`: their
   registry, O(added vertices)) and writes their files;
3. the writers write each partition's row-aligned value files from the staged rows of that
   partition (:func:`write_partition`, reading only that partition's template edge ids), and one
   of them the topology changes (:func:`write_topology`);
4. the driver removes ``_parts/`` and commits one log entry. A failure at any step removes the
   instance directory; one killed leaves an uncommitted directory that the next writer removes.

The files and the entry are exactly those :func:`gofs.instances.append_instances` writes for the
same instance, so readers see no difference. That includes static attributes a writer gives
values for: the instance overrides them, and a row no writer staged a value for (a piece without
that column counts as none) keeps the template's value.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from gofs import files, housekeeping, layout, manifest as manifest_io
from gofs.errors import InputError
from gofs.instances import (AddedVertices, Registry, after_commit, check_schema, log_entry, open_for_append,
                            static_types, time_range, with_template_values)
from gofs.vids import partition_of_vids

PARTS = "_parts"
_VERTEX, _EDGE = "v", "e"                            # per-partition staged files
_WHOLE = ("added_values", "removed", "added_edges")  # staged once per writer


@dataclass(frozen=True)
class Target:
    """Where a writer puts its part of instance ``iid`` (small and picklable: it goes to every writer).
    ``offsets``: the first template vid of every partition, then the template's vertex count.
    ``overrides``: {kind: static attribute names} the instance overrides, known once every part
    is staged (what :func:`write_partition` completes from the template)."""

    path: str
    data: str
    iid: int
    offsets: np.ndarray
    overrides: dict = dataclasses.field(default_factory=dict)

    @property
    def partitions(self) -> int:
        return len(self.offsets) - 1

    def parts_dir(self) -> str:
        return layout.join(layout.instance_dir(self.data, self.iid), PARTS)

    def staged(self, kind: str, p: int, writer: int) -> str:
        return layout.join(self.parts_dir(), f"{kind}-{p:05d}-w{writer:05d}.parquet")


def stage_part(target: Target, writer: int, part: dict) -> dict:
    """Stage one writer's ``part``: ``vertex_values`` (``vid`` of template vertices, attributes),
    ``added_values`` (``id`` of vertices beyond the template, attributes), ``edge_values`` (``eid``
    of template edge copies, their ``src``/``dst`` vids, attributes), ``removed`` (``eid``) and
    ``added_edges`` (``src``/``dst`` vids, -1 for vertices beyond the template, ``src_id``/``dst_id``,
    attributes); each a Table or None. Returns what the driver needs: the attribute types
    (name -> Arrow type, per kind) and the row counts."""
    fs, _ = layout.filesystem(target.path)
    for kind, name, keys in ((_VERTEX, "vertex_values", ("vid",)), (_EDGE, "edge_values", ("src", "dst"))):
        table = part.get(name)
        if table is None or not table.num_rows:
            continue
        where = [_partition_of(target, table.column(k).to_numpy()) for k in keys]
        for p in np.unique(np.concatenate(where)):
            rows = np.flatnonzero(np.logical_or.reduce([w == p for w in where]))
            files.put_table(fs, target.staged(kind, int(p), writer), table.take(pa.array(rows)))
    for name in _WHOLE:
        table = part.get(name)
        if table is not None and table.num_rows:
            files.put_table(fs, layout.join(target.parts_dir(), f"{name}-w{writer:05d}.parquet"), table)
    types = {"vertex": {}, "edge": {}}
    for kind, names, keys in (("vertex", ("vertex_values", "added_values"), {"vid", "id"}),
                              ("edge", ("edge_values",), {"eid", "src", "dst"})):
        for name in names:
            if part.get(name) is not None:
                types[kind].update({f.name: f.type for f in part[name].schema if f.name not in keys})
    if part.get("added_edges") is not None:
        types["added_edges"] = {f.name: f.type for f in part["added_edges"].schema
                                if f.name not in ("src", "dst", "src_id", "dst_id")}
    return types


def _partition_of(target: Target, vids: np.ndarray) -> np.ndarray:
    return np.searchsorted(target.offsets, vids, side="right") - 1


def _staged(fs, target: Target, prefix: str) -> list[pa.Table]:
    return [files.read_columns(fs, info.path, None) for info in layout.listing(fs, target.parts_dir())
            if info.base_name.startswith(prefix)]


def write_partition(target: Target, p: int, vertex_schema: pa.Schema | None, edge_schema: pa.Schema | None) -> None:
    """Partition ``p``'s value files, row-aligned with its template files: vertex rows are its
    template vertices then the vertices the instance adds there (vid order, as
    :func:`gofs.instances.append_instances` writes them); edge rows follow its template edge file
    (mirror rows included). Rows no writer staged are null, except in the static columns the
    instance overrides (``target.overrides``): there they hold the template's value."""
    fs, _ = layout.filesystem(target.path)
    overrides = target.overrides
    if vertex_schema is not None:
        first, size = int(target.offsets[p]), int(target.offsets[p + 1] - target.offsets[p])
        position = np.full(size, -1, np.int64)
        pieces = _staged(fs, target, f"{_VERTEX}-{p:05d}-")
        values, given = _conform(pieces, vertex_schema)
        if values.num_rows:
            position[pa.chunked_array(pieces_column(pieces, "vid")).to_numpy() - first] = np.arange(values.num_rows)
        table, chosen = _placed(values, given, position)
        added = _added_here(fs, target, p)
        if added is not None and added.num_rows:
            pieces = _staged(fs, target, "added_values-")
            at = np.full(added.num_rows, -1, np.int64)
            extra, extra_given = _conform(pieces, vertex_schema)
            if extra.num_rows:
                ids = pa.chunked_array(pieces_column(pieces, "id")).cast(added.column("id").type)
                found = pc.index_in(added.column("id"), value_set=ids).to_numpy(zero_copy_only=False)
                hit = ~np.isnan(found.astype(float))
                at[hit] = found[hit].astype(np.int64)
            extra, extra_chosen = _placed(extra, extra_given, at)
            table = pa.concat_tables([table, extra])
            chosen = {name: np.concatenate([chosen[name], extra_chosen[name]]) for name in chosen}
        names = overrides.get("vertex", [])
        template = files.read_columns(fs, layout.template_vertices(target.data, p), names) if names else None
        files.put_table(fs, layout.instance_vertices(target.data, target.iid, p),
                        _with_template(table, chosen, template, f"instance {target.iid} vertex values"))
    if edge_schema is not None:
        names = overrides.get("edge", [])
        template = files.read_columns(fs, layout.template_edges(target.data, p), ["eid", *names])
        eids = template.column("eid").to_numpy()
        pieces = _staged(fs, target, f"{_EDGE}-{p:05d}-")
        values, given = _conform(pieces, edge_schema)
        position = np.full(len(eids), -1, np.int64)
        if values.num_rows:
            staged = pa.chunked_array(pieces_column(pieces, "eid")).to_numpy()
            order = np.argsort(staged)
            at = np.minimum(np.searchsorted(staged[order], eids), len(staged) - 1)
            hit = staged[order][at] == eids
            position[hit] = order[at[hit]]
        table, chosen = _placed(values, given, position)
        files.put_table(fs, layout.instance_edges(target.data, target.iid, p),
                        _with_template(table, chosen, template.select(names) if names else None,
                                       f"instance {target.iid} edge values"))


def _placed(values: pa.Table, given: dict, position: np.ndarray) -> tuple[pa.Table, dict]:
    """Row i of the result is ``values``' row position[i] (null where -1), and per column which
    result rows a writer gave a value for."""
    chosen = {name: np.zeros(len(position), bool) for name in given}
    hit = position >= 0
    for name, mask in given.items():
        chosen[name][hit] = mask[position[hit]]
    return values.take(pa.array(position, mask=~hit)), chosen


def _with_template(table: pa.Table, chosen: dict, template: pa.Table | None, where: str) -> pa.Table:
    """``table`` with each of ``template``'s columns (an override) completed from it where no
    writer gave a value; the template has no rows for vertices the instance adds (null there)."""
    if template is None:
        return table
    for name in template.column_names:
        base = template.column(name).combine_chunks()
        base = pa.concat_arrays([base, pa.nulls(table.num_rows - len(base), base.type)]) \
            if table.num_rows > len(base) else base
        column = with_template_values(table.column(name).combine_chunks(), chosen[name], base, f"{where}, field '{name}'")
        table = table.set_column(table.column_names.index(name), name, column)
    return table


def pieces_column(pieces: list[pa.Table], name: str) -> list[pa.Array]:
    return [chunk for piece in pieces for chunk in piece.column(name).chunks]


def _conform(pieces: list[pa.Table], schema: pa.Schema) -> tuple[pa.Table, dict]:
    """The staged ``pieces`` one after another with ``schema``'s columns (null where a writer had
    none), and per column which rows a writer gave (its piece has the column)."""
    given = {f.name: np.concatenate([np.full(piece.num_rows, f.name in piece.column_names) for piece in pieces])
             if pieces else np.zeros(0, bool) for f in schema}
    if not pieces:
        return schema.empty_table(), given
    return pa.concat_tables([pa.table({f.name: piece.column(f.name).cast(f.type) if f.name in piece.column_names
                                       else pa.nulls(piece.num_rows, f.type) for f in schema}, schema=schema)
                             for piece in pieces]), given


def _added_here(fs, target: Target, p: int) -> pa.Table | None:
    """(vid, id) of the vertices the instance adds in partition ``p`` (vid order), if any."""
    path = layout.instance_added_vertices(target.data, target.iid)
    if not layout.exists(fs, path):
        return None
    added = files.read_columns(fs, path, ["vid", "id"])
    return added.filter(pa.array(partition_of_vids(target.offsets, added.column("vid").to_numpy()) == p))


def write_topology(target: Target, attributes: pa.Schema) -> dict:
    """The instance's topology file from every writer's removed and added edges (added vertices'
    ends by their vids); returns the counts its log entry records. Written even when empty if the
    instance adds vertices (a reader then expects it)."""
    fs, _ = layout.filesystem(target.path)
    removed = [t.column("eid") for t in _staged(fs, target, "removed-")]
    added = _staged(fs, target, "added_edges-")
    pieces = []
    eids = pa.chunked_array([c for column in removed for c in column.chunks], pa.int64())
    if len(eids):
        pieces.append(pa.table({"op": pa.array(["remove"] * len(eids)), "eid": eids.combine_chunks()}))
    if added:
        table = pa.concat_tables(added, promote_options="default")
        src, dst = (table.column(c).to_numpy().copy() for c in ("src", "dst"))
        if (src < 0).any() or (dst < 0).any():
            vertices = files.read_columns(fs, layout.instance_added_vertices(target.data, target.iid), ["vid", "id"])
            for vids, column in ((src, "src_id"), (dst, "dst_id")):
                beyond = np.flatnonzero(vids < 0)
                at = pc.index_in(table.column(column).take(pa.array(beyond)).cast(vertices.column("id").type),
                                 value_set=vertices.column("id")).to_numpy(zero_copy_only=False)
                vids[beyond] = vertices.column("vid").to_numpy()[at.astype(np.int64)]
        cols = {"op": pa.array(["add"] * len(src)), "eid": pa.array(np.full(len(src), -1, np.int64)),
                "add_src": pa.array(src), "add_dst": pa.array(dst)}
        for f in attributes:
            cols[f.name] = table.column(f.name).cast(f.type) if f.name in table.column_names \
                else pa.nulls(table.num_rows, f.type)
        pieces.append(pa.table(cols))
    has_added_vertices = layout.exists(fs, layout.instance_added_vertices(target.data, target.iid))
    if not pieces and not has_added_vertices:
        return {"removed": 0, "added": 0, "written": False}
    if not pieces:
        pieces.append(pa.table({"op": pa.array([], pa.string()), "eid": pa.array([], pa.int64())}))
    topology = pa.concat_tables(pieces, promote_options="default")
    files.put_table(fs, layout.instance_topology(target.data, target.iid), topology)
    return {"removed": len(eids), "added": topology.num_rows - len(eids), "written": True}


def append_parts(path: str, start: float, end: float, stage, write) -> int:
    """Append one instance written by several writers; returns its id.

    ``stage(target)``: every writer runs :func:`stage_part` for ``target`` (a :class:`Target`) and
    the answers come back as a list of (types, added vertices: a Table of ``id`` and ``hint``, the
    partition of a template neighbour or -1, or None). ``write(target, vertex_schema,
    edge_schema, added_edge_schema)``: the writers run :func:`write_partition` for every
    partition between them and one runs :func:`write_topology`, whose answer ``write`` returns.
    Raises InputError (nothing committed) if a time or an attribute type does not fit the graph.
    """
    fs, root = layout.filesystem(path)
    with open_for_append(fs, root) as (snapshot, locked):
        manifest = snapshot.manifest
        where = f"instance (start={start})"
        start, end = time_range(start, end, manifest, where)
        data = layout.version_root(root, snapshot.version)
        iid = housekeeping.next_instance_id(fs, data, snapshot)
        offsets = np.array([q["vertex_offset"] for q in manifest["partitions"]] + [manifest["num_vertices"]], np.int64)
        target = Target(path, data, iid, offsets)
        try:
            answers = stage(target)
            vschema, eschema = (manifest_io.field_types(manifest["instance_schema"][kind], f"{path}: instance schema")
                                for kind in ("vertex", "edge"))
            new = {kind: _merged_types([types[kind] for types, _ in answers], f"{where} {kind} values")
                   for kind in ("vertex", "edge")}
            overrides = {}
            for kind, known in (("vertex", vschema), ("edge", eschema)):
                static = static_types(manifest, kind)
                overrides[kind] = check_schema(kind, pa.schema(list(new[kind].items())).empty_table(), known, static,
                                               f"{where} {kind} values")
                new[kind].update({name: static[name] for name in overrides[kind]})
                known.update({name: type_ for name, type_ in new[kind].items() if name not in static})
            added_edge_types = _merged_types([types.get("added_edges", {}) for types, _ in answers],
                                             f"{where} added edges")
            added = _place_added(fs, data, manifest, target, [a for _, a in answers if a is not None])
            vertex_schema = pa.schema(list(new["vertex"].items())) if new["vertex"] else None
            edge_schema = pa.schema(list(new["edge"].items())) if new["edge"] else None
            target = dataclasses.replace(target, overrides=overrides)
            topology = write(target, vertex_schema, edge_schema, pa.schema(list(added_edge_types.items())))
            layout.remove(fs, target.parts_dir())
            entry = log_entry(iid, start, end, vertex_schema.empty_table() if vertex_schema else None,
                              edge_schema.empty_table() if edge_schema else None, (None, None, None), overrides)
            if topology["written"]:
                entry["topology"] = {"added": topology["added"], "removed": topology["removed"]}
            if added is not None:
                entry["topology"]["added_vertices"] = len(added[0])
                entry["topology"]["registry"] = added[1]
            manifest_io.commit(fs, root, snapshot.head + 1, {
                "op": "append", "data": snapshot.version, "instances": [entry],
                "instance_schema": {"vertex": manifest_io.schema_fields(pa.schema(list(vschema.items()))),
                                    "edge": manifest_io.schema_fields(pa.schema(list(eschema.items())))}},
                durable=[layout.instance_dir(data, iid)])
        except manifest_io.CommitConflict:
            raise               # the files may be a concurrent writer's too: delete nothing
        except BaseException:
            layout.remove(fs, layout.instance_dir(data, iid))
            raise
        after_commit(fs, root, locked)
    return iid


def _merged_types(answers: list[dict], where: str) -> dict:
    """One type per attribute over every writer's answer; two writers disagreeing is an error."""
    merged = {}
    for types in answers:
        for name, type_ in types.items():
            if name in merged and not merged[name].equals(type_):
                raise InputError(f"{where}, field '{name}': writers hold {merged[name]} and {type_} values")
            merged[name] = type_
    return merged


def _place_added(fs, data: str, manifest: dict, target: Target, tables: list[pa.Table]):
    """Vids of the vertices the instance adds beyond the template (each keeps the vid an earlier
    instance gave it; a new one goes to its hinted partition), written as its added-vertex file and,
    when it grew, the registry. Returns (AddedVertices, whether the registry was written) or None."""
    if not tables or not sum(t.num_rows for t in tables):
        return None
    table = pa.concat_tables(tables)
    id_type = pa.int64() if manifest["id_type"] == "int64" else pa.string()
    ids = table.column("id").cast(id_type).to_numpy(zero_copy_only=False)
    hints = table.column("hint").to_numpy()
    unique = np.unique(ids)
    best = np.full(len(unique), -1, np.int64)              # any writer's hint (the largest one)
    np.maximum.at(best, np.searchsorted(unique, ids), hints)
    registry = Registry(fs, data, manifest)
    added = AddedVertices(unique, registry.vids_for(unique, best), manifest["num_vertices"])
    files.put_table(fs, layout.instance_added_vertices(data, target.iid), added.table(id_type))
    grown = registry.table_if_grown(manifest["id_type"])
    if grown is not None:
        files.put_table(fs, layout.instance_vertex_registry(data, target.iid), grown)
    return added, grown is not None
