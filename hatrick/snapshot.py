"""Turn the live graph into a GoFS instance, written by the workers where the state is.

A GoFS instance stores its topology as a change against the template (added
and removed edges) and its values as per-instance attributes, so a snapshot
writes the live state relative to the template: that equals the previous
snapshot with the buffered updates applied, and each instance is readable on
its own by ``g.edges(instance=...)`` / ``g.vertices(instance=...)``.

Each worker builds the part of its buckets (:func:`instance_part`: its owned vertices, the edges
it holds, the template edges its buckets own) in the template's internal ids (vids, eids: every
worker holds the template's keys and eids), stages it and writes the row-aligned files of its
share of the GoFS partitions (:mod:`gofs.instance_parts`); the driver only places the vertices
the stream added beyond the template and commits the instance: nothing of the size of the graph
reaches it. Those added vertices keep their internal id from snapshot to snapshot (see
:mod:`gofs.vids`), with the edges touching them as added edges. A static value the stream
changed (a vertex's, or a template edge's: set, unset, or carried by an add that brought the
edge back) is written into the instance, which then overrides the template's column there
(:mod:`gofs.instances`); the edge keeps its template eid. What an instance cannot carry (a
documented limit of the GoFS format, not worked around here): a removed template vertex loses
its edges and values but stays listed.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

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
    parts: list = field(default_factory=list)     # each worker's counts

    @classmethod
    def of_parts(cls, parts: list[dict], start: float, end: float) -> "SnapshotReport":
        """The report of the workers' parts (their :func:`instance_part` counts)."""
        return cls(start=start, end=end, parts=parts, **{name: sum(part[name] for part in parts) for name in _COUNTS})


def _arrow(column: Column, rows: np.ndarray, kind: str) -> pa.Array:
    return pa.array(column.values[rows], type=_ARROW[kind], mask=~column.present[rows])


def _differs(live: Column, rows: np.ndarray, original: Column | None, at: np.ndarray, hit: np.ndarray) -> np.ndarray:
    """Whether ``live``'s value at each of ``rows`` differs from ``original``'s at ``at`` (where
    ``hit``; elsewhere the original has no value): a value set, unset or changed."""
    was = hit & original.present[at] if original is not None and len(original.present) else np.zeros(len(rows), bool)
    now = live.present[rows]
    same_value = np.zeros(len(rows), bool)
    both = np.flatnonzero(was & now)
    same_value[both] = live.values[rows[both]] == original.values[at[both]]
    return (was != now) | (was & now & ~same_value)


def _static_changes(live: dict, names, rows: np.ndarray, original: dict, at: np.ndarray, hit: np.ndarray) -> dict:
    """{static name: which of ``rows`` of the ``live`` columns hold a value other than the
    template's (``original`` at ``at``, where ``hit``; elsewhere none)} for the names of ``names``
    that some row changed: what the instance overrides."""
    changes = {}
    for name in sorted(names):
        changed = _differs(live[name], rows, original.get(name), at, hit)
        if changed.any():
            changes[name] = changed
    return changes


def _static_vertex_changes(state: State, vids: np.ndarray) -> dict:
    """:func:`_static_changes` of ``vids`` (a vertex beyond the template compares with none)."""
    t = state.template
    hit = vids < t.vertices
    return _static_changes(state.vattrs, state.static_vertex & set(state.vattrs), vids, t.vertex,
                           np.where(hit, vids, 0), hit)


def _static_edge_changes(state: State, slots: np.ndarray, keys: np.ndarray) -> dict:
    """:func:`_static_changes` of template edges (live ``slots`` with their ``keys``)."""
    t = state.template
    at = np.minimum(np.searchsorted(t.keys, keys), max(len(t.keys) - 1, 0))
    hit = (t.keys[at] == keys) if len(t.keys) else np.zeros(len(keys), bool)
    return _static_changes(state.eattrs, state.static_edge & set(state.eattrs), slots, t.edge, at, hit)


_COUNTS = ("added_vertices", "added_edges", "removed_edges", "vertex_rows", "edge_rows")


def instance_part(state: State, vids: np.ndarray, template_rows: np.ndarray, offsets: np.ndarray) -> dict:
    """One worker's part of a snapshot instance against the template ``state.template``, in the
    template's internal ids (what :func:`gofs.instance_parts.stage_part` takes): ``vids`` are the
    alive vertices it owns, every live edge of ``state`` is its own, and ``template_rows``
    (positions in the template's sorted keys) are the template edges its buckets own; ``offsets``
    (first vid of every GoFS partition, then the template's vertex count) place a vertex the
    stream added near a template neighbour. Also ``added_vertices`` (``id``, ``hint``: that
    partition or -1) and the counts of a :class:`SnapshotReport`."""
    t = state.template
    if t.eids is None:
        raise RuntimeError("hatrick: this live state has no template edge ids (a checkpoint written before "
                           "they were kept); restart the stream from the graph's latest instance to snapshot it")
    ids = state.ids.to_numpy()
    out = {}
    new_vertices = vids[vids >= t.vertices]

    first_eid = np.cumsum(t.counts) - t.counts          # where each template key's eids start
    t_keys, t_counts, t_first = t.keys[template_rows], t.counts[template_rows], first_eid[template_rows]
    live = state.live_slots()
    keys = state.key(state.src[live], state.dst[live])
    order = np.argsort(keys)
    live, keys = live[order], keys[order]
    at = np.searchsorted(t_keys, keys)
    at_c = np.minimum(at, max(len(t_keys) - 1, 0))
    found = (at < len(t_keys)) & (t_keys[at_c] == keys) if len(t_keys) else np.zeros(len(keys), bool)
    have = np.where(found, t_counts[at_c] if len(t_keys) else 0, 0)
    now = state.mult[live]

    kept = np.minimum(now, have)                          # template copies that stay (changed values override)
    added_slots = np.repeat(live, now - kept)
    still = np.zeros(len(t_keys), np.int64)
    still[at_c[found]] = kept[found]
    gone = t_counts - still                               # GoFS removes a key's first copies (smallest eids)
    out["removed"] = pa.table({"eid": pa.array(t.eids[_ranges(t_first, gone)])}) if gone.any() else None

    dynamic_e = [n for n in state.eattrs if n not in state.static_edge]
    dynamic_v = [n for n in state.vattrs if n not in state.static_vertex]
    out["added_edges"] = None
    hint = np.full(len(new_vertices), -1, np.int64)
    if len(added_slots):
        src, dst = state.src[added_slots], state.dst[added_slots]
        cols = {"src": pa.array(np.where(src < t.vertices, src, -1)), "dst": pa.array(np.where(dst < t.vertices, dst, -1)),
                "src_id": pa.array(ids[src]), "dst_id": pa.array(ids[dst])}
        for name in state.eattrs:                       # static ones too: an added edge carries its own
            cols[name] = _arrow(state.eattrs[name], added_slots, state.ekinds[name])
        out["added_edges"] = pa.table(cols)
        for mine, other in ((src, dst), (dst, src)) if len(new_vertices) else ():   # placed near a template neighbour
            near = np.flatnonzero((mine >= t.vertices) & (other < t.vertices))
            at_new = np.minimum(np.searchsorted(new_vertices, mine[near]), len(new_vertices) - 1)
            ok = new_vertices[at_new] == mine[near]
            np.maximum.at(hint, at_new[ok], np.searchsorted(offsets, other[near[ok]], side="right") - 1)
    out["added_vertices"] = pa.table({"id": pa.array(ids[new_vertices]), "hint": pa.array(hint)}) \
        if len(new_vertices) else None

    out["edge_values"] = None
    edge_rows = vertex_rows = 0
    slots, copies, first = live[kept > 0], kept[kept > 0], at_c[kept > 0]
    static_e = _static_edge_changes(state, slots, keys[kept > 0])     # written too: the instance overrides them
    if dynamic_e or static_e:
        any_set = np.zeros(len(slots), bool)
        for name in dynamic_e:
            any_set |= state.eattrs[name].present[slots]
        for changed in static_e.values():
            any_set |= changed
        slots, copies, first = slots[any_set], copies[any_set], first[any_set]
        eids = t.eids[_ranges(t_first[first] + t_counts[first] - copies, copies)]   # the copies kept: the last ones
        slots = np.repeat(slots, copies)                # every kept template copy of a key has its values
        cols = {"eid": pa.array(eids), "src": pa.array(state.src[slots]), "dst": pa.array(state.dst[slots])}
        for name in [*dynamic_e, *static_e]:
            cols[name] = _arrow(state.eattrs[name], slots, state.ekinds[name])
        out["edge_values"] = pa.table(cols)
        edge_rows = len(slots)

    out["vertex_values"] = out["added_values"] = None
    static_v = _static_vertex_changes(state, vids)      # written too: the instance overrides them
    if dynamic_v or static_v:
        any_set = np.zeros(len(vids), bool)
        for name in dynamic_v:
            any_set |= state.vattrs[name].present[vids]
        for changed in static_v.values():
            any_set |= changed
        picked = vids[any_set]
        for table, rows, key in (("vertex_values", picked[picked < t.vertices], "vid"),
                                 ("added_values", picked[picked >= t.vertices], "id")):
            cols = {key: pa.array(rows if key == "vid" else ids[rows])}
            for name in [*dynamic_v, *static_v]:
                cols[name] = _arrow(state.vattrs[name], rows, state.vkinds[name])
            out[table] = pa.table(cols)
        vertex_rows = len(picked)
    out["counts"] = dict(zip(_COUNTS, (len(new_vertices), len(added_slots), int(gone.sum()), vertex_rows, edge_rows)))
    return out


def _ranges(first: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """first[i], first[i] + 1, ..., first[i] + lengths[i] - 1, for every i, one after another."""
    lengths = np.asarray(lengths, np.int64)
    total = int(lengths.sum())
    if not total:
        return np.zeros(0, np.int64)
    starts = np.repeat(np.asarray(first, np.int64) - (np.cumsum(lengths) - lengths), lengths)
    return starts + np.arange(total)
