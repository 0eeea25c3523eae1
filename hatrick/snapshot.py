"""Turn the live graph into a GoFS instance (through the public ``gofs.instances`` API).

A GoFS instance stores its topology as a change against the template (added
and removed edges) and its values as per-instance attributes, so a snapshot
writes the live state relative to the template: that equals the previous
snapshot with the buffered updates applied, and each instance is readable on
its own by ``g.edges(instance=...)`` / ``g.vertices(instance=...)``.

Vertices the stream added beyond the template are stored as the instance's
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
from hatrick.live import Column, State

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


class Template:
    """The template's vertex count and edge multiset, in the live graph's vids and keys."""

    def __init__(self, num_vertices: int, keys: np.ndarray, counts: np.ndarray):
        self.num_vertices = num_vertices
        self.keys, self.counts = keys, counts

    @classmethod
    def of(cls, state: State, src_vids: np.ndarray, dst_vids: np.ndarray, num_vertices: int) -> "Template":
        keys, counts = np.unique(state.key(src_vids, dst_vids), return_counts=True)
        return cls(num_vertices, keys, counts)


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


def build_instance(state: State, template: Template, start: float, end: float) -> tuple[Instance, SnapshotReport]:
    """The instance holding ``state`` (topology against ``template``, dynamic attribute values)."""
    n0 = template.num_vertices
    ids = state.ids.to_numpy()
    report = SnapshotReport(start=start, end=end)
    new_vertices = n0 + np.flatnonzero(state.alive[n0:])
    report.added_vertices = len(new_vertices)
    added_vertices = pa.table({"id": pa.array(ids[new_vertices])}) if len(new_vertices) else None

    live = state.live_slots()
    keys = state.key(state.src[live], state.dst[live])
    order = np.argsort(keys)
    live, keys = live[order], keys[order]
    at = np.searchsorted(template.keys, keys)
    at_c = np.minimum(at, max(len(template.keys) - 1, 0))
    found = (at < len(template.keys)) & (template.keys[at_c] == keys) if len(template.keys) else np.zeros(len(keys), bool)
    have = np.where(found, template.counts[at_c] if len(template.keys) else 0, 0)
    now = state.mult[live]

    changed = found & _static_values_changed(state, live, keys)
    kept = np.where(changed, 0, np.minimum(now, have))   # template copies that stay as they are
    added_slots = np.repeat(live, now - kept)
    still = np.zeros(len(template.keys), np.int64)
    still[at_c[found]] = kept[found]
    gone = np.repeat(np.arange(len(template.keys)), template.counts - still)
    shift, mask = np.int64(31), np.int64((1 << 31) - 1)
    removed = None
    if len(gone):                         # one row per removed copy: GoFS names the k-th copy by the k-th row
        u, v = template.keys[gone] >> shift, template.keys[gone] & mask
        removed = pa.table({"src": pa.array(ids[u]), "dst": pa.array(ids[v])})
    report.removed_edges = len(gone)

    dynamic_e = [n for n in state.eattrs if n not in state.static_edge]
    dynamic_v = [n for n in state.vattrs if n not in state.static_vertex]
    added = None
    if len(added_slots):
        cols = {"src": pa.array(ids[state.src[added_slots]]), "dst": pa.array(ids[state.dst[added_slots]])}
        for name in state.eattrs:                       # static ones too: an added edge carries its own
            cols[name] = _arrow(state.eattrs[name], added_slots, state.ekinds[name])
        added = pa.table(cols)
    report.added_edges = len(added_slots)

    edge_values = None
    if dynamic_e:
        slots = live[kept > 0]
        any_set = np.zeros(len(slots), bool)
        for name in dynamic_e:
            any_set |= state.eattrs[name].present[slots]
        slots = np.repeat(slots[any_set], kept[kept > 0][any_set])      # every template copy of a key has its values
        cols = {"src": pa.array(ids[state.src[slots]]), "dst": pa.array(ids[state.dst[slots]])}
        for name in dynamic_e:
            cols[name] = _arrow(state.eattrs[name], slots, state.ekinds[name])
        edge_values = pa.table(cols)
        report.edge_rows = len(slots)

    vertex_values = None
    if dynamic_v:
        vids = np.flatnonzero(state.alive)
        any_set = np.zeros(len(vids), bool)
        for name in dynamic_v:
            any_set |= state.vattrs[name].present[vids]
        vids = vids[any_set]
        cols = {"id": pa.array(ids[vids])}
        for name in dynamic_v:
            cols[name] = _arrow(state.vattrs[name], vids, state.vkinds[name])
        vertex_values = pa.table(cols)
        report.vertex_rows = len(vids)
    return Instance(start, end, vertex_values, edge_values, added, removed, added_vertices), report
