"""Turn the live graph into a GoFS instance (through the public ``gofs.instances`` API).

A GoFS instance stores its topology as a change against the template (added
and removed edges) and its values as per-instance attributes, so a snapshot
writes the live state relative to the template: that equals the previous
snapshot with the buffered updates applied, and each instance is readable on
its own by ``g.edges(instance=...)`` / ``g.vertices(instance=...)``.

Each worker builds the part of its buckets (:func:`instance_part`: its owned vertices, the edges
it holds, the template edges its buckets own) where its state is; the driver only concatenates
those changes (:func:`combine_parts`) and commits the one instance. Vertices the stream added beyond the template are stored as the instance's
added vertices (each keeps its internal id from snapshot to snapshot, see
:mod:`gofs.vids`), with the edges touching them as added edges. What an
instance cannot carry (documented limits of the GoFS format, not worked around
here): a removed template vertex loses its edges and values but stays listed;
static vertex attributes are read-only for streams. A template edge whose static value the
stream changed is written as removed and added again with its values (instance values
cannot shadow a template column), so in that instance it is an added edge.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from gofs.instances import Instance
from hatrick.live import Column, State, _SHIFT

_ARROW = {"double": pa.float64(), "int64": pa.int64(), "bool": pa.bool_(), "string": pa.string()}


@dataclass
class SnapshotReport:
    """What one snapshot wrote and what the format could not hold."""

    instance: int | None = None
    start: float = 0.0
    end: float = 0.0
    buffered_updates: int = 0
    added_vertices: int = 0
    added_edges: int = 0
    removed_edges: int = 0
    vertex_rows: int = 0
    edge_rows: int = 0
    seconds: float = 0.0


def _arrow(column: Column, rows: np.ndarray, kind: str) -> pa.Array:
    return pa.array(column.values[rows], type=_ARROW[kind], mask=~column.present[rows])


def _static_values_changed(state: State, slots: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Which live edges (``slots`` with their sorted ``keys``) hold a static attribute value other
    than their template value (an edge that is not a template edge compares with no value)."""
    changed = np.zeros(len(slots), bool)
    t = state.template
    if t is None or not t.edge:
        return changed
    at = np.minimum(np.searchsorted(t.keys, keys), max(len(t.keys) - 1, 0))
    hit = (t.keys[at] == keys) if len(t.keys) else np.zeros(len(keys), bool)
    for name, original in t.edge.items():
        live = state.eattrs[name]
        was = hit & original.present[at] if len(t.keys) else hit
        now = live.present[slots]
        same_value = np.zeros(len(slots), bool)
        both = np.flatnonzero(was & now)
        same_value[both] = live.values[slots[both]] == original.values[at[both]]
        changed |= (was != now) | (was & now & ~same_value)
    return changed


PART_TABLES = ("vertex_values", "edge_values", "added_edges", "removed_edges", "added_vertices")
_COUNTS = ("added_vertices", "added_edges", "removed_edges", "vertex_rows", "edge_rows")


def instance_part(state: State, vids: np.ndarray, template_rows: np.ndarray) -> dict:
    """One worker's part of a snapshot instance, against the template ``state.template``:
    ``vids`` are the alive vertices it owns, every live edge of ``state`` is its own, and
    ``template_rows`` (positions in the template's sorted keys) are the template edges its
    buckets own. Returns the :data:`PART_TABLES` (Arrow tables or None) and the counts of a
    :class:`SnapshotReport`."""
    t = state.template
    ids = state.ids.to_numpy()
    out = dict.fromkeys(PART_TABLES)
    new_vertices = vids[vids >= t.vertices]
    out["added_vertices"] = pa.table({"id": pa.array(ids[new_vertices])}) if len(new_vertices) else None

    t_keys, t_counts = t.keys[template_rows], t.counts[template_rows]
    live = state.live_slots()
    keys = state.key(state.src[live], state.dst[live])
    order = np.argsort(keys)
    live, keys = live[order], keys[order]
    at = np.searchsorted(t_keys, keys)
    at_c = np.minimum(at, max(len(t_keys) - 1, 0))
    found = (at < len(t_keys)) & (t_keys[at_c] == keys) if len(t_keys) else np.zeros(len(keys), bool)
    have = np.where(found, t_counts[at_c] if len(t_keys) else 0, 0)
    now = state.mult[live]

    changed = found & _static_values_changed(state, live, keys)
    kept = np.where(changed, 0, np.minimum(now, have))   # template copies that stay as they are
    added_slots = np.repeat(live, now - kept)
    still = np.zeros(len(t_keys), np.int64)
    still[at_c[found]] = kept[found]
    gone = np.repeat(np.arange(len(t_keys)), t_counts - still)
    if len(gone):                         # one row per removed copy: GoFS names the k-th copy by the k-th row
        mask = np.int64((1 << int(_SHIFT)) - 1)
        u, v = t_keys[gone] >> np.int64(_SHIFT), t_keys[gone] & mask
        out["removed_edges"] = pa.table({"src": pa.array(ids[u]), "dst": pa.array(ids[v])})

    dynamic_e = [n for n in state.eattrs if n not in state.static_edge]
    dynamic_v = [n for n in state.vattrs if n not in state.static_vertex]
    if len(added_slots):
        cols = {"src": pa.array(ids[state.src[added_slots]]), "dst": pa.array(ids[state.dst[added_slots]])}
        for name in state.eattrs:                       # static ones too: an added edge carries its own
            cols[name] = _arrow(state.eattrs[name], added_slots, state.ekinds[name])
        out["added_edges"] = pa.table(cols)

    edge_rows = vertex_rows = 0
    if dynamic_e:
        slots = live[kept > 0]
        any_set = np.zeros(len(slots), bool)
        for name in dynamic_e:
            any_set |= state.eattrs[name].present[slots]
        slots = np.repeat(slots[any_set], kept[kept > 0][any_set])      # every template copy of a key has its values
        cols = {"src": pa.array(ids[state.src[slots]]), "dst": pa.array(ids[state.dst[slots]])}
        for name in dynamic_e:
            cols[name] = _arrow(state.eattrs[name], slots, state.ekinds[name])
        out["edge_values"] = pa.table(cols)
        edge_rows = len(slots)

    if dynamic_v:
        any_set = np.zeros(len(vids), bool)
        for name in dynamic_v:
            any_set |= state.vattrs[name].present[vids]
        picked = vids[any_set]
        cols = {"id": pa.array(ids[picked])}
        for name in dynamic_v:
            cols[name] = _arrow(state.vattrs[name], picked, state.vkinds[name])
        out["vertex_values"] = pa.table(cols)
        vertex_rows = len(picked)
    out["counts"] = dict(zip(_COUNTS, (len(new_vertices), len(added_slots), len(gone), vertex_rows, edge_rows)))
    return out


def combine_parts(parts: list[dict], start: float, end: float) -> tuple[Instance, SnapshotReport]:
    """The instance of the workers' :func:`instance_part` answers: each table the parts'
    tables one after another (a column one worker never saw is null in its rows)."""
    tables = {}
    for name in PART_TABLES:
        present = [part[name] for part in parts if part[name] is not None]
        tables[name] = pa.concat_tables(present, promote_options="default") if present else None
    report = SnapshotReport(start=start, end=end,
                            **{name: sum(part["counts"][name] for part in parts) for name in _COUNTS})
    return Instance(start, end, tables["vertex_values"], tables["edge_values"], tables["added_edges"],
                    tables["removed_edges"], tables["added_vertices"]), report
