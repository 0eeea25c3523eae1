"""The live graph: current vertices, edges (with multiplicity) and attributes, updated batch by batch.

State is copy-on-write: applying a batch builds a new :class:`State` from the
old one and the caller swaps it in with one assignment, so a reader (a
:class:`GraphView`, a snapshot, a checkpoint) never sees a half-applied batch,
and a failure while applying leaves the old state untouched.

Semantics, in the order updates are applied (event time, then arrival):
- ``add_edge`` creates missing endpoints; adding an existing edge raises its
  multiplicity; ``remove_edge`` lowers it and needs the edge to exist;
- ``remove_vertex`` removes the vertex, its attributes and all its edges;
  ``add_vertex`` of a live vertex does nothing;
- an edge's attributes belong to the edge while it exists (removing its last
  copy drops them); ``set_*`` needs the vertex/edge to exist; a null value unsets;
  ``add_edge`` may carry one attribute value (``attribute``/``value``), set as
  the edge is added (a value of the wrong kind refuses the whole add);
- a static (template) attribute's value can be set (an edge's also carried by an
  add) like any other, of the template's kind; a snapshot writes the changed values
  into its instance, which overrides the template's there (:mod:`gofs.instances`);
  a template edge or vertex that is removed and comes back gets its template
  values back; a new attribute takes the kind of its first value and later
  values must be of that kind.
A bad update is rejected whole, with its producer and seq.

Connected components (weak, for directed graphs) are kept incrementally:
additions merge labels (:func:`smallest_members` on the graph of touched
labels); removals recompute only the components that held a removed edge or
vertex, from scratch on that region. When that region is most of the graph (a
removal in the giant component), all components are recomputed in one
:func:`smallest_members` pass over the live edge slots. Local searches from the
removed edges' endpoints do not pay off there: at 100k vertices and 200k edges,
breadth-first balls around 100 removed edges (all searches level by level until
one is left per component) already cover ~46% of the vertices, because a random
graph expands by ~3x per level. Labels are the smallest vid of a component.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np
import pandas as pd
from numba import njit

from gofs.errors import InputError
from gofs.numba_cache import serialise_compilation
from hatrick.keyindex import KeyIndex, build as build_index
from hatrick.reachability import reachable_pairs, same_label_pairs
from hatrick.updates import (ADD_EDGE, ADD_VERTEX, DTYPES, REMOVE_EDGE, REMOVE_VERTEX, SET_EDGE, SET_VERTEX,
                             UpdateBatch, coerce, empty_rejected, infer_kind, is_absent)

serialise_compilation()  # one compilation at a time on this machine: numba's kernel cache stays whole

_SHIFT = np.int64(31)
MAX_VERTICES = 1 << 31


@dataclass(frozen=True)
class Column:
    """Values of one attribute aligned with vids (vertex) or slots (edge); ``present`` marks set ones."""

    values: np.ndarray
    present: np.ndarray

    @cached_property
    def set_rows(self) -> np.ndarray:
        """Rows whose value is set, found once per column: a batch writes a column only as its own
        copy (:meth:`_Draft.own`), so a selection reads its candidates, not a pass over every row."""
        return np.flatnonzero(self.present)

    def grown(self, size: int) -> "Column":
        extra = size - len(self.values)
        if extra <= 0:
            return self
        fill = np.zeros(extra, dtype=self.values.dtype) if self.values.dtype != object else np.full(extra, None)
        return Column(np.concatenate([self.values, fill]), np.concatenate([self.present, np.zeros(extra, bool)]))


def empty_column(kind: str, size: int) -> Column:
    dtype = DTYPES[kind]
    values = np.full(size, None, dtype=object) if dtype is object else np.zeros(size, dtype=dtype)
    return Column(values, np.zeros(size, bool))


@dataclass(frozen=True)
class TemplateValues:
    """The template's static attribute values, for template edges and vertices that come back
    after a removal, and what a snapshot compares the live values with: ``keys`` (sorted edge
    keys), ``edge`` (name -> Column aligned with keys), ``vertex`` (name -> Column by vid: the
    GoFS template's values, none for the vertices beyond it),
    ``size``: vids 0..size-1 are the graph's ids as loaded (template first), the same in every
    state derived from it (:mod:`hatrick.partitioned` keeps them on every worker), so these vids
    and keys mean the same everywhere. What a snapshot writes against (:mod:`hatrick.snapshot`):
    ``counts`` (the template's copies of each key), ``eids`` (the GoFS edge id of every copy, key
    by key in ``keys`` order, ascending within a key: GoFS names a key's k-th copy by its k-th
    smallest eid) and ``vertices`` (the GoFS template's vertex count: vids from there on are
    vertices an instance or the stream added)."""

    keys: np.ndarray
    edge: dict
    vertex: dict
    size: int = 0
    counts: np.ndarray | None = None
    vertices: int = 0
    eids: np.ndarray | None = None


@dataclass(frozen=True)
class State:
    """One consistent version of the live graph.

    Vertices are dense vids (``ids`` maps vid -> original id; a removed vertex
    keeps its vid with ``alive`` False). Each distinct edge key has a slot: its
    endpoints, multiplicity (0: absent), last time it was added or set, attributes.
    ``index`` (:mod:`hatrick.keyindex`) finds the slot of a present key; the next state derived
    from this one changes it in place, so it is read through :meth:`key_index` (``index_version``
    says whether it is still this state's; None: built when first read). When a key's last copy
    goes, its slot leaves the index and joins ``free``, to be reused by the next new key, so the
    slot arrays stay the size of the largest live edge set rather than of all keys ever seen.
    """

    directed: bool
    ids: pd.Index
    alive: np.ndarray
    comp: np.ndarray
    vattrs: dict
    vkinds: dict
    index: KeyIndex | None
    src: np.ndarray
    dst: np.ndarray
    mult: np.ndarray
    touched: np.ndarray
    eattrs: dict
    ekinds: dict
    static_vertex: frozenset = frozenset()
    static_edge: frozenset = frozenset()
    batch: int = 0
    time: float = float("-inf")
    free: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    template: TemplateValues | None = None
    index_version: int = 0

    @property
    def num_vertices(self) -> int:
        return int(self.alive.sum())

    @property
    def num_edges(self) -> int:
        return int(self.mult.sum())

    def key(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        if not self.directed:
            u, v = np.minimum(u, v), np.maximum(u, v)
        return (u.astype(np.int64) << _SHIFT) | v.astype(np.int64)

    def vids_of(self, ids) -> np.ndarray:
        """Vid of each original id (-1 if unknown or removed)."""
        vids = self.ids.get_indexer(np.asarray(ids))
        alive = np.zeros(len(vids), bool)
        known = vids >= 0
        alive[known] = self.alive[vids[known]]
        return np.where(alive, vids, -1)

    def live_slots(self) -> np.ndarray:
        return np.flatnonzero(self.mult > 0)

    def key_index(self) -> KeyIndex:
        """The key index as of this state: ``index`` while no later state has changed it, else
        one built from this state's live slots."""
        if self.index is not None and self.index.version == self.index_version:
            return self.index
        live = self.live_slots()
        return build_index(self.key(self.src[live], self.dst[live]), live)


def build_state(ids, src_ids, dst_ids, directed: bool, vertex_columns: dict | None = None,
                edge_columns: dict | None = None, static_vertex=(), static_edge=(), time: float = float("-inf"),
                template_edges: tuple | None = None, template_vertices: int | None = None,
                template_eids: np.ndarray | None = None, template_vertex_values: dict | None = None) -> State:
    """The state of a graph given as original ids: all vertices, edges (parallel ones add
    multiplicity; attributes of the last copy win) and attribute columns (name -> (kind, values
    with None/NaN for missing)). Components are computed from scratch. ``template_edges``
    (src ids, dst ids, {static name: values}) are the template's edges whose static values come
    back with them (default: these edges and their static columns), ``template_eids`` their GoFS
    edge ids (what a snapshot names removed and valued copies by); ``template_vertices``: how many
    of ``ids`` the GoFS template has (default all); ``template_vertex_values``: {static name: the
    template's values of those vertices} where the vertex columns hold other values (a loaded
    instance that overrides them; default: the vertex columns' own)."""
    index = pd.Index(np.asarray(ids))
    if not index.is_unique:
        raise InputError("build_state: vertex ids are not unique")
    n = len(index)
    u, v = index.get_indexer(np.asarray(src_ids)), index.get_indexer(np.asarray(dst_ids))
    if (u < 0).any() or (v < 0).any():
        raise InputError("build_state: an edge names a vertex that is not in ids")
    base = State(directed, index, np.ones(n, bool), np.arange(n, dtype=np.int64), {}, {},
                 build_index(np.zeros(0, np.int64), np.zeros(0, np.int64)), np.zeros(0, np.int64),
                 np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), {}, {}, frozenset(static_vertex),
                 frozenset(static_edge), 0, time)
    keys = base.key(u, v)
    uniq, first, counts = np.unique(keys, return_index=True, return_counts=True)
    last = len(keys) - 1 - np.unique(keys[::-1], return_index=True)[1]
    vattrs, vkinds = {}, {}
    for name, (kind, values) in (vertex_columns or {}).items():
        col, null = _column_from(kind, values)
        vattrs[name], vkinds[name] = Column(col, ~null), kind
    eattrs, ekinds = {}, {}
    for name, (kind, values) in (edge_columns or {}).items():
        col, null = _column_from(kind, np.asarray(values, dtype=object)[last] if len(last) else values)
        eattrs[name], ekinds[name] = Column(col, ~null), kind
    slots = np.arange(len(uniq), dtype=np.int64)
    state = replace(base, vattrs=vattrs, vkinds=vkinds, index=build_index(uniq, slots),
                    src=u[first].astype(np.int64), dst=v[first].astype(np.int64), mult=counts.astype(np.int64),
                    touched=np.full(len(uniq), time), eattrs=eattrs, ekinds=ekinds)
    eids = None
    if template_edges is None:
        t_keys, t_counts = uniq, counts.astype(np.int64)
        t_columns = {name: eattrs[name] for name in static_edge if name in eattrs}
    else:
        t_src, t_dst, t_values = template_edges
        t_all = base.key(index.get_indexer(np.asarray(t_src)), index.get_indexer(np.asarray(t_dst)))
        t_keys, t_first, t_counts = np.unique(t_all[::-1], return_index=True, return_counts=True)
        t_last = len(t_all) - 1 - t_first
        t_columns = {}
        for name, values in t_values.items():
            col, null = _column_from(ekinds[name], np.asarray(values, dtype=object)[t_last])
            t_columns[name] = Column(col, ~null)
        if template_eids is not None:
            template_eids = np.asarray(template_eids, np.int64)
            eids = template_eids[np.lexsort((template_eids, t_all))]
    t_vertices = n if template_vertices is None else int(template_vertices)
    t_vertex = {}
    for name in static_vertex:
        if name not in vattrs:
            continue
        column = Column(vattrs[name].values.copy(), vattrs[name].present.copy())
        column.present[t_vertices:] = False
        if name in (template_vertex_values or {}):
            values, null = _column_from(vkinds[name], template_vertex_values[name])
            column.values[:t_vertices], column.present[:t_vertices] = values, ~null
        t_vertex[name] = column
    template = TemplateValues(t_keys, t_columns, t_vertex, n, t_counts.astype(np.int64), t_vertices, eids)
    return replace(state, comp=components_from_scratch(state), template=template)


def _column_from(kind: str, values) -> tuple[np.ndarray, np.ndarray]:
    """(values, missing) of one attribute column. Kept as a numpy object array throughout: a
    pandas Series of text would be converted to Arrow strings and back (most of a rebuild)."""
    values = np.asarray(values, dtype=object)
    null = pd.isna(values)
    if DTYPES[kind] is object:
        return np.where(null, None, values), null
    return np.where(null, 0, values).astype(DTYPES[kind]), null


def components_from_scratch(state: State) -> np.ndarray:
    """Component label (smallest vid) of every alive vertex, -1 for removed ones."""
    n = len(state.alive)
    live = state.live_slots()
    comp = smallest_members(n, state.src[live], state.dst[live])
    comp[~state.alive] = -1
    return comp


@dataclass
class Outcome:
    """What applying one batch did."""

    applied: int = 0
    rejected: pd.DataFrame = field(default_factory=empty_rejected)
    relabelled: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))   # vids whose label changed


class _Draft:
    """Mutable copies of a state's arrays while one batch is applied."""

    def __init__(self, s: State):
        self.s = s
        self.ids = s.ids
        self.alive, self.comp = s.alive.copy(), s.comp.copy()
        self.vattrs = dict(s.vattrs)
        self.vkinds = dict(s.vkinds)
        self.index = s.key_index()
        self.index.version += 1           # changed in place from here on: no earlier state reads it
        self.src, self.dst = s.src, s.dst
        self.mult, self.touched = s.mult.copy(), s.touched.copy()
        self.eattrs = dict(s.eattrs)
        self.ekinds = dict(s.ekinds)
        self.free = s.free
        self._owned: set = set()
        self._own_ends = False
        self.added_pairs: list = []        # (u, v) edges that went from absent to present
        self.affected: list = []           # labels (before this batch's merges) of components that may split
        self.rejected: list = []
        self.applied = 0

    def own(self, kind: str, name: str) -> Column:
        """A column that may be written in place (copied once per batch)."""
        table = self.vattrs if kind == "v" else self.eattrs
        if (kind, name) not in self._owned:
            column = table[name]
            table[name] = Column(column.values.copy(), column.present.copy())
            self._owned.add((kind, name))
        return table[name]

    def own_ends(self) -> None:
        """Make ``src``/``dst`` writable in place (copied once per batch)."""
        if not self._own_ends:
            self.src, self.dst = self.src.copy(), self.dst.copy()
            self._own_ends = True

    def freeze(self, batch_no: int, time: float) -> State:
        return State(self.s.directed, self.ids, self.alive, self.comp, self.vattrs, self.vkinds, self.index,
                     self.src, self.dst, self.mult, self.touched, self.eattrs, self.ekinds, self.s.static_vertex,
                     self.s.static_edge, batch_no, time, self.free, self.s.template, self.index.version)


def apply_batch(state: State, batch: UpdateBatch) -> tuple[State, Outcome]:
    """Apply ``batch`` in order to ``state``; returns the new state (``state`` is untouched)."""
    draft = _Draft(state)
    if len(batch):
        removing = batch.op == REMOVE_VERTEX
        cuts = np.flatnonzero(np.diff(removing.astype(np.int8))) + 1
        for run in np.split(np.arange(len(batch)), cuts):
            (_remove_vertices if removing[run[0]] else _apply_run)(draft, batch, run)
    relabelled = _update_components(draft)
    time = max(state.time, float(batch.time.max())) if len(batch) else state.time
    new = draft.freeze(state.batch + 1, time)
    rejected = pd.concat(draft.rejected, ignore_index=True) if draft.rejected else empty_rejected()
    return new, Outcome(draft.applied, rejected, relabelled)


def _grow_vertices(d: _Draft, new_ids: np.ndarray) -> None:
    if not len(new_ids):
        return
    start = len(d.ids)
    if start + len(new_ids) > MAX_VERTICES:
        raise OverflowError(f"the live graph holds at most {MAX_VERTICES} vertices")
    d.ids = d.ids.append(pd.Index(new_ids))
    size = len(d.ids)
    d.alive = np.concatenate([d.alive, np.zeros(len(new_ids), bool)])
    d.comp = np.concatenate([d.comp, np.full(len(new_ids), -1, np.int64)])
    for name in list(d.vattrs):
        d.vattrs[name] = d.vattrs[name].grown(size)


def _min_per_key(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct keys and the smallest value of each."""
    order = np.lexsort((values, keys))
    keys, values = keys[order], values[order]
    first = np.r_[True, keys[1:] != keys[:-1]] if len(keys) else np.zeros(0, bool)
    return keys[first], values[first]


def _shown(value) -> str:
    return repr(value.item() if isinstance(value, np.generic) else value)


def _gather(values: np.ndarray, index: np.ndarray, missing) -> np.ndarray:
    """values[index], with ``missing`` where index is -1."""
    out = np.full(len(index), missing, dtype=values.dtype)
    known = index >= 0
    out[known] = values[index[known]]
    return out


def _resolve(d: _Draft, ids: np.ndarray) -> np.ndarray:
    return d.ids.get_indexer(ids) if len(ids) else np.zeros(0, np.int64)


def _apply_run(d: _Draft, batch: UpdateBatch, rows: np.ndarray) -> None:
    """Apply updates ``rows`` (none of them removes a vertex)."""
    op = batch.op[rows]
    pos = np.arange(len(rows))
    is_edge = (op == ADD_EDGE) | (op == REMOVE_EDGE) | (op == SET_EDGE)
    # every vertex reference: (position, id, creates?)
    ref_pos = np.concatenate([pos, pos[is_edge]])
    ref_ids = np.concatenate([batch.a[rows], batch.b[rows][is_edge]])
    ref_creates = np.concatenate([(op == ADD_VERTEX) | (op == ADD_EDGE), op[is_edge] == ADD_EDGE])
    vid = _resolve(d, ref_ids)
    unknown_creating = (vid < 0) & ref_creates
    if unknown_creating.any():
        _grow_vertices(d, pd.unique(ref_ids[unknown_creating]))
        vid = np.where(vid < 0, _resolve(d, ref_ids), vid)
    dead = (vid >= 0) & ~_gather(d.alive, vid, True)
    creating = dead & ref_creates
    revived, created_at = _min_per_key(vid[creating], ref_pos[creating])     # per dead vid: its first creation
    exists = (vid >= 0) & ~dead
    exists[dead] = _created_by(revived, created_at, vid[dead], ref_pos[dead])
    row_ok = np.ones(len(rows), bool)
    row_ok[ref_pos[~exists]] = False
    bad = ~row_ok
    if bad.any():
        missing = ~exists
        first_missing = np.full(len(rows), -1)
        first_missing[ref_pos[missing][::-1]] = np.flatnonzero(missing)[::-1]
        reasons = [f"unknown vertex {_shown(ref_ids[i])}" for i in first_missing[bad]]
        d.rejected.append(batch.rejected(rows[bad], np.array(reasons, dtype=object)))
    a_vid = vid[: len(rows)]
    b_vid = np.full(len(rows), -1, np.int64)
    b_vid[is_edge] = vid[len(rows):]

    d.alive[revived] = True
    d.comp[revived] = revived
    _restore_template_vertices(d, revived)
    added_vertices = (op == ADD_VERTEX) & row_ok
    d.applied += int(added_vertices.sum())
    carried = np.zeros(len(rows), bool) if is_absent(batch.attribute) else \
        (op == ADD_EDGE) & row_ok & _names_attribute(batch.attribute[rows])     # absent: no row names one
    if carried.any():
        row_ok &= ~_refuse_carried_values(d, batch, rows, carried)
    _apply_edges(d, batch, rows, op, a_vid, b_vid, row_ok & is_edge, carried)
    _apply_vertex_sets(d, batch, rows, a_vid, row_ok & (op == SET_VERTEX))


def _created_by(created: np.ndarray, created_at: np.ndarray, vid: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """Whether dead vertices ``vid``, referenced at positions ``pos``, exist by then: one of
    ``created`` (sorted, distinct) created at or before ``pos``. A search per reference, so the
    pass is O(batch), not a lookup table over every vid."""
    at = np.minimum(np.searchsorted(created, vid), max(len(created) - 1, 0))
    if not len(created):
        return np.zeros(len(vid), bool)
    return (created[at] == vid) & (created_at[at] <= pos)


def _names_attribute(attribute: np.ndarray) -> np.ndarray:
    named = pd.notna(attribute)
    at = np.flatnonzero(named)
    if len(at):
        named[at] = [isinstance(a, str) and a != "" for a in attribute[at]]
    return named


def _refuse_carried_values(d: _Draft, batch: UpdateBatch, rows, carried: np.ndarray) -> np.ndarray:
    """Adds carrying a value the attribute cannot hold (of another kind) are refused whole,
    before anything is applied; returns which rows those are."""
    refused = np.zeros(len(rows), bool)
    at = np.flatnonzero(carried)
    names = batch.attribute[rows[at]].astype(str)
    for name in pd.unique(names):
        mine = at[names == name]
        values = batch.value[rows[mine]]
        kind = d.ekinds.get(name)
        if kind is None:
            present = values[pd.notna(pd.Series(values, dtype=object)).to_numpy()]
            kind = infer_kind(present[0], batch.text_values) if len(present) else "double"
        ok = coerce(values, kind, batch.text_values)[2] if kind else np.zeros(len(mine), bool)
        if (~ok).any():
            refused[mine[~ok]] = True
            d.rejected.append(batch.rejected(rows[mine[~ok]], f"attribute '{name}' holds {kind} values"))
    return refused


def _restore_template_edges(d: _Draft, slots: np.ndarray, keys: np.ndarray) -> None:
    """Template edges that came back (new slots or cleared ones) get their static values back."""
    t = d.s.template
    if t is None or not t.edge or not len(t.keys) or not len(slots):
        return
    at = np.minimum(np.searchsorted(t.keys, keys), len(t.keys) - 1)
    hit = t.keys[at] == keys
    if hit.any():
        for name, column in t.edge.items():
            own = d.own("e", name)
            own.values[slots[hit]] = column.values[at[hit]]
            own.present[slots[hit]] = column.present[at[hit]]


def _restore_template_vertices(d: _Draft, vids: np.ndarray) -> None:
    """Template vertices that came back get their static values back."""
    t = d.s.template
    if t is None or not t.vertex or not len(vids):
        return
    for name, column in t.vertex.items():
        mine = vids[vids < len(column.present)]
        if len(mine):
            own = d.own("v", name)
            own.values[mine] = column.values[mine]
            own.present[mine] = column.present[mine]


def _apply_edges(d: _Draft, batch: UpdateBatch, rows, op, u, v, ok, carried) -> None:
    sel = np.flatnonzero(ok)
    if not len(sel):
        return
    keys = d.s.key(u[sel], v[sel])
    group, uniq = pd.factorize(keys)                   # keys numbered by first appearance: O(batch), no sort
    slot = d.index.lookup(uniq)
    m0, first, valid, keep, final, last_reset, latest, applied = _walk(group, op[sel], carried[sel], slot, d.mult,
                                                                       batch.time[rows[sel]])
    if not valid.all():
        d.rejected.append(batch.rejected(rows[sel[~valid]], "no such edge"))
    d.applied += applied
    gone, dropped, fresh = _fates(slot, m0, final)
    if len(gone):
        d.affected.append(d.comp[d.src[slot[gone]]])
    if len(dropped):
        _free(d, slot[dropped])
        slot[dropped] = -1
    if len(fresh):
        firsts = sel[first[fresh]]
        slot[fresh] = _allocate(d, u[firsts], v[firsts], len(firsts))
    d.index.update(uniq[dropped], uniq[fresh], slot[fresh])
    if d.eattrs or (d.s.template is not None and d.s.template.edge):
        _reset_edge_values(d, slot, uniq, fresh, last_reset)
    appeared = _settle(slot, m0, final, latest, d.mult, d.touched, d.src, d.dst)
    if len(appeared[0]):
        d.added_pairs.append(appeared)
    if keep.any():                     # attribute sets after the key's last reset, on a key present at the end
        _set_values(d, "e", batch, rows[sel[keep]], slot[group[keep]])


def _reset_edge_values(d: _Draft, slot, uniq, fresh, last_reset) -> None:
    """Keys (``uniq``, held in ``slot``) whose last copy went during the batch and came back lose
    their values; those and the ``fresh`` ones get their template values back, if any."""
    cleared = np.flatnonzero((slot >= 0) & (last_reset >= 0))
    if len(cleared):
        for name in list(d.eattrs):
            d.own("e", name).present[slot[cleared]] = False
    back = np.union1d(fresh, cleared)
    if len(back):
        _restore_template_edges(d, slot[back], uniq[back])


@njit(cache=True, nogil=True)
def _walk(group, op, carried, slot, mult, time):
    """Edge updates ``op`` in apply order (an add adds a copy of its key ``group``, a removal takes
    one, a set none; ``carried``: an add that carries a value, which sets it too), the keys held in
    ``slot`` (-1: absent; multiplicities ``mult`` by slot): per key its multiplicity before and its
    first position; per update whether it applies (a removal or a set of an absent edge does not)
    and whether its value is kept (a set, or a carried value, after its key's last reset, on a key
    present at the end); per key its final multiplicity, the position of its last removal of the
    last copy (-1: none) and the latest time it was added or set (-inf: never); the count of
    updates applied that are not sets."""
    m0 = np.zeros(len(slot), np.int64)
    for g in range(len(slot)):
        if slot[g] >= 0:
            m0[g] = mult[slot[g]]
    final = m0.copy()
    first = np.full(len(slot), -1, np.int64)
    valid = np.empty(len(group), np.bool_)
    last_reset = np.full(len(slot), -1, np.int64)
    latest = np.full(len(slot), -np.inf)
    for i in range(len(group)):
        g = group[i]
        delta = 1 if op[i] == ADD_EDGE else -1 if op[i] == REMOVE_EDGE else 0
        if first[g] < 0:
            first[g] = i
        valid[i] = delta == 1 or final[g] > 0
        if valid[i]:
            final[g] += delta
            if delta == -1 and final[g] == 0:
                last_reset[g] = i
            if delta >= 0 and time[i] > latest[g]:
                latest[g] = time[i]
    keep = np.empty(len(group), np.bool_)
    applied = 0
    for i in range(len(group)):
        g = group[i]
        setting = (op[i] != ADD_EDGE and op[i] != REMOVE_EDGE) or carried[i]
        applied += valid[i] and not setting
        keep[i] = valid[i] and setting and i > last_reset[g] and final[g] > 0
    return m0, first, valid, keep, final, last_reset, latest, applied


@njit(cache=True, nogil=True)
def _fates(slot, m0, final):
    """Per key (held in ``slot``, -1: absent; multiplicity ``m0`` before and ``final`` after): the
    keys whose last copy went (their components may split), those to drop from the index (held,
    none left) and those to give a slot (absent, some added), as ascending key numbers."""
    gone, dropped, fresh = np.empty(len(slot), np.int64), np.empty(len(slot), np.int64), np.empty(len(slot), np.int64)
    g_count = d_count = f_count = 0
    for g in range(len(slot)):
        if slot[g] >= 0:
            if final[g] == 0:
                dropped[d_count] = g
                d_count += 1
                if m0[g] > 0:
                    gone[g_count] = g
                    g_count += 1
        elif final[g] > 0:
            fresh[f_count] = g
            f_count += 1
    return gone[:g_count], dropped[:d_count], fresh[:f_count]


@njit(cache=True, nogil=True)
def _settle(slot, m0, final, latest, mult, touched, src, dst):
    """Write each present key's (``slot`` >= 0) final multiplicity and latest add or set time
    (:func:`_walk`) into ``mult`` and ``touched`` (a later time only), in one pass over the keys
    (not a masked gather and scatter per array); returns the (src, dst) of those absent before the
    batch (``m0`` 0): the edges whose ends it may join."""
    u, v = np.empty(len(slot), np.int64), np.empty(len(slot), np.int64)
    count = 0
    for g in range(len(slot)):
        s = slot[g]
        if s < 0:
            continue
        mult[s] = final[g]
        if latest[g] > touched[s]:
            touched[s] = latest[g]
        if m0[g] == 0:
            u[count], v[count] = src[s], dst[s]
            count += 1
    return u[:count], v[:count]


def _release(d: _Draft, slots: np.ndarray, keys: np.ndarray) -> None:
    """Remove the (present) ``keys`` held in ``slots`` from the index; their slots become free."""
    _free(d, slots)
    d.index.update(keys, np.zeros(0, np.int64), np.zeros(0, np.int64))


def _free(d: _Draft, slots: np.ndarray) -> None:
    """Empty ``slots`` (no multiplicity, no attributes) and make them free (not out of the index)."""
    d.mult[slots] = 0
    for name in list(d.eattrs):
        d.own("e", name).present[slots] = False
    d.free = np.concatenate([d.free, slots])


def _allocate(d: _Draft, u: np.ndarray, v: np.ndarray, count: int) -> np.ndarray:
    """Slots for ``count`` new edges with endpoints ``u``, ``v``: free slots first, then new ones
    at the end. A slot comes with multiplicity 0 and no attributes (not in the index yet)."""
    reused = d.free[len(d.free) - min(count, len(d.free)):]
    d.free = d.free[:len(d.free) - len(reused)]
    extra = count - len(reused)
    if extra:
        size = len(d.src) + extra
        d.src = np.concatenate([d.src, np.zeros(extra, np.int64)])
        d.dst = np.concatenate([d.dst, np.zeros(extra, np.int64)])
        d._own_ends = True
        d.mult = np.concatenate([d.mult, np.zeros(extra, np.int64)])
        d.touched = np.concatenate([d.touched, np.full(extra, -np.inf)])
        for name in list(d.eattrs):
            d.eattrs[name] = d.eattrs[name].grown(size)
            d._owned.add(("e", name))
    slots = np.concatenate([reused, np.arange(len(d.src) - extra, len(d.src), dtype=np.int64)])
    d.own_ends()
    d.src[slots], d.dst[slots] = u, v
    d.touched[reused] = -np.inf
    return slots


def _apply_vertex_sets(d: _Draft, batch: UpdateBatch, rows, vid, ok) -> None:
    sel = np.flatnonzero(ok)
    if len(sel):
        _set_values(d, "v", batch, rows[sel], vid[sel])


def _set_values(d: _Draft, kind: str, batch: UpdateBatch, rows: np.ndarray, targets: np.ndarray) -> None:
    """Set attribute values (rows in apply order; the last per target and attribute wins)."""
    kinds = d.vkinds if kind == "v" else d.ekinds
    table = d.vattrs if kind == "v" else d.eattrs
    size = len(d.ids) if kind == "v" else len(d.src)
    names = batch.attribute[rows].astype(str)
    for name in pd.unique(names):
        mine = names == name
        r, t = rows[mine], targets[mine]
        values = batch.value[r]
        if name not in kinds:
            present = values[pd.notna(pd.Series(values, dtype=object)).to_numpy()]
            if not len(present):
                d.applied += len(r)
                continue
            new_kind = infer_kind(present[0], batch.text_values)
            if new_kind is None:
                d.rejected.append(batch.rejected(r, f"attribute '{name}': unsupported value type "
                                                    f"{type(present[0]).__name__}"))
                continue
            kinds[name] = new_kind
            table[name] = empty_column(new_kind, size)
            d._owned.add((kind, name))
        typed, null, ok = coerce(values, kinds[name], batch.text_values)
        if (~ok).any():
            d.rejected.append(batch.rejected(r[~ok], f"attribute '{name}' holds {kinds[name]} values"))
        typed, null, t = typed[ok], null[ok], t[ok]
        d.applied += int(ok.sum())
        last = len(t) - 1 - np.unique(t[::-1], return_index=True)[1]
        column = d.own(kind, name)
        column.values[t[last]] = typed[last]
        column.present[t[last]] = ~null[last]


def _remove_vertices(d: _Draft, batch: UpdateBatch, rows: np.ndarray) -> None:
    ids = batch.a[rows]
    vid = _resolve(d, ids)
    alive = (vid >= 0) & _gather(d.alive, vid, False)
    first = np.zeros(len(rows), bool)
    if alive.any():
        first[np.flatnonzero(alive)[np.unique(vid[alive], return_index=True)[1]]] = True
    bad = ~first
    if bad.any():
        d.rejected.append(batch.rejected(rows[bad], np.array(
            [f"unknown vertex {_shown(i)}" if not a else f"vertex {_shown(i)} was already removed" for i, a in
             zip(ids[bad], alive[bad])], dtype=object)))
    gone = vid[first]
    d.applied += len(gone)
    if not len(gone):
        return
    d.affected.append(d.comp[gone])
    d.alive[gone] = False
    d.comp[gone] = -1                                     # a removed vertex has no label, from here on
    for name in list(d.vattrs):
        d.own("v", name).present[gone] = False
    dead = np.zeros(len(d.ids), bool)
    dead[gone] = True
    cut = np.flatnonzero((d.mult > 0) & (dead[d.src] | dead[d.dst]))
    if len(cut):
        _release(d, cut, d.s.key(d.src[cut], d.dst[cut]))


def _update_components(d: _Draft) -> np.ndarray:
    """Merge labels over added edges, then recompute the components a removal touched; returns the
    vids whose label (-1: dead) differs from the state's before the batch, which a worker's
    boundary exchange follows (:meth:`hatrick.partitioned.Worker.send_ghosts`) instead of
    comparing every vid.

    When the touched components hold most of the alive vertices (a removal in the giant
    component), all components are recomputed in one numba pass over the edge slots
    (:func:`_slot_components`, which finds the relabelled vids as it writes the labels), which
    is cheaper than cutting the region out first."""
    alive = int(np.count_nonzero(d.alive)) if d.affected else 0
    if (d.affected and _mostly_affected(d, alive)) or not _merge_and_cut_out(d, alive):
        return _slot_components(d.src, d.dst, d.mult, d.alive, d.comp, d.s.comp)
    return _relabelled(d.s.comp, d.comp)


def _merge_and_cut_out(d: _Draft, alive: int) -> bool:
    """:func:`_update_components` by merging labels over the added edges and recomputing the
    region of the components a removal touched; False (nothing recomputed) where that region
    holds most of the ``alive`` vertices."""
    comp = d.comp
    remap = None
    if d.added_pairs:
        u = np.concatenate([p[0] for p in d.added_pairs])
        v = np.concatenate([p[1] for p in d.added_pairs])
        still = d.index.lookup(d.s.key(u, v)) >= 0      # an edge added, then removed later in the batch, joins nothing
        u, v = u[still], v[still]
    if d.added_pairs and len(u):
        lu, lv = comp[u], comp[v]
        labels, inverse = np.unique(np.concatenate([lu, lv]), return_inverse=True)
        k = len(labels)
        smallest = labels[smallest_members(k, inverse[: len(u)], inverse[len(u):])]     # labels ascend
        remap = np.arange(len(comp), dtype=np.int64)
        remap[labels] = smallest
        live = comp >= 0
        comp[live] = remap[comp[live]]
    if d.affected:
        labels = np.concatenate(d.affected)
        labels = np.unique(remap[labels] if remap is not None else labels)
        labels = labels[labels >= 0]
        marked = np.zeros(len(comp) + 1, bool)
        marked[labels] = True
        region = marked[comp]                             # removed vertices hold -1: the unmarked slot
        members = np.flatnonzero(region)
        if not len(members):
            return True
        if 2 * len(members) > alive:
            return False
        live = np.flatnonzero(d.mult > 0)
        local = np.full(len(comp), -1, np.int64)
        local[members] = np.arange(len(members))
        inside = live[region[d.src[live]]]
        comp[members] = members[smallest_members(len(members), local[d.src[inside]], local[d.dst[inside]])]
    return True


@njit(cache=True, nogil=True)
def _relabelled(before: np.ndarray, comp: np.ndarray) -> np.ndarray:
    """Vids whose label in ``comp`` differs from ``before`` (-1 past its end: vids added since)."""
    out = np.empty(len(comp), np.int64)
    count = 0
    for x in range(len(comp)):
        out[count] = x
        count += comp[x] != (before[x] if x < len(before) else -1)
    return out[:count]


@njit(cache=True, nogil=True)
def _link(parent: np.ndarray, a: int, b: int) -> None:
    """Union-find step: link the roots of ``a`` and ``b``, the larger under the smaller (halving
    the paths found), so a root is its set's smallest member and every parent is below its child."""
    while parent[a] != a:
        parent[a] = parent[parent[a]]
        a = parent[a]
    while parent[b] != b:
        parent[b] = parent[parent[b]]
        b = parent[b]
    if a < b:
        parent[b] = a
    elif b < a:
        parent[a] = b


@njit(cache=True, nogil=True)
def smallest_members(n: int, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """For each of ``n`` vertices joined by edges ``u - v`` (direction ignored: weak components),
    the smallest vertex of its component. Union-find (:func:`_link`): every parent is below its
    child, so one ascending pass then resolves all of them. O(edges + n) with a small constant
    (a scipy ``connected_components`` call builds a CSR and its transpose first: ~4x slower at 200k)."""
    parent = np.arange(n)
    for i in range(len(u)):
        _link(parent, u[i], v[i])
    for x in range(n):
        parent[x] = parent[parent[x]]
    return parent


def _mostly_affected(d: _Draft, alive: int) -> bool:
    """Whether the components touched by removals (before this batch's merges, so at most the
    region after them) already hold more than half of the ``alive`` vertices. Alive, not all vids:
    a worker's vids include every template vertex, dead there where it holds none of their edges
    (~38% on a worker of three in the 200k-vertex bench), so its giant component (~70% of its
    alive vertices) passed for a minority, and cutting it out cost 2.3x the pass over every slot."""
    return _members_over(d.comp, np.concatenate(d.affected), alive // 2)


@njit(cache=True, nogil=True)
def _members_over(comp: np.ndarray, labels: np.ndarray, bound: int) -> bool:
    """Whether more than ``bound`` vids have one of ``labels`` (-1s ignored) in ``comp``: one mark
    array by label and one pass over the vids, with no gathered mask nor sum over it (those were
    ~0.5 ms a batch at 200k vids, paid on every worker whatever its share), stopped where the
    count passes ``bound`` (a giant component passes half the alive vertices half-way through)."""
    marked = np.zeros(len(comp), np.bool_)
    for label in labels:
        if label >= 0:
            marked[label] = True
    count = 0
    for x in range(len(comp)):
        count += comp[x] >= 0 and marked[comp[x]]
        if count > bound:
            return True
    return False


@njit(cache=True, nogil=True)
def _slot_components(src: np.ndarray, dst: np.ndarray, mult: np.ndarray, alive: np.ndarray,
                     comp: np.ndarray, before: np.ndarray) -> np.ndarray:
    """Write into ``comp`` the components (as :func:`smallest_members`) of the graph whose edges
    are the slots with a multiplicity, -1 for removed vertices: one pass over the slots and two
    over the vids, with no copy of the live edges; returns the vids whose label differs from
    ``before`` (as :func:`_relabelled`, found in the same pass). The union-find's parents are
    32-bit (vids are below :data:`MAX_VERTICES`): its random accesses touch half the memory,
    ~20% faster at 200k vids."""
    parent = np.empty(len(comp), np.int32)
    for x in range(len(comp)):
        parent[x] = x
    for s in range(len(mult)):
        if mult[s] > 0:
            _link(parent, src[s], dst[s])
    relabelled = np.empty(len(comp), np.int64)
    count = 0
    for x in range(len(comp)):
        root = parent[parent[x]]
        parent[x] = root
        label = root if alive[x] else -1
        comp[x] = label
        relabelled[count] = x
        count += label != (before[x] if x < len(before) else -1)
    return relabelled[:count]


# reading a state -----------------------------------------------------------------------------------
def _column_out(column: Column, rows: np.ndarray) -> np.ndarray:
    values, present = column.values[rows], column.present[rows]
    if values.dtype == object:
        return np.where(present, values, None)
    if values.dtype.kind == "f":
        return np.where(present, values, np.nan)
    out = values.astype(object)
    out[~present] = None
    return out


def vertex_frame(state: State, vids: np.ndarray | None = None) -> pd.DataFrame:
    """``id`` and attributes of alive vertices (or of vertices ``vids``)."""
    vids = np.flatnonzero(state.alive) if vids is None else vids
    frame = {"id": state.ids.to_numpy()[vids]}
    for name, column in state.vattrs.items():
        frame[name] = _column_out(column, vids)
    return pd.DataFrame(frame)


def edge_frame(state: State) -> pd.DataFrame:
    """One row per edge copy (a multiplicity of 2 gives two rows)."""
    slots = np.repeat(state.live_slots(), state.mult[state.mult > 0])
    ids = state.ids.to_numpy()
    frame = {"src": ids[state.src[slots]], "dst": ids[state.dst[slots]]}
    for name, column in state.eattrs.items():
        frame[name] = _column_out(column, slots)
    return pd.DataFrame(frame)


def components_frame(state: State) -> pd.DataFrame:
    """``id`` and ``component`` (the original id of the component's smallest vid)."""
    vids = np.flatnonzero(state.alive)
    ids = state.ids.to_numpy()
    return pd.DataFrame({"id": ids[vids], "component": ids[state.comp[vids]]})


class GraphView:
    """The graph after one batch, for callbacks: ``time`` (the largest event time applied so far,
    which is the batch's max event time when batches arrive in time order), ``seq``
    (the batch number), ``vertices()`` and ``edges()`` as pandas DataFrames, built on first use
    and cached. The state is immutable, so a view stays valid after later batches. Instead of
    ``state``, ``frames`` may be a function returning (vertices, edges) (then ``time`` and ``seq``
    are given): it is called on first use of the frames (a partitioned graph asks its workers for
    their parts of that batch's frames then). A partitioned graph's view also names the
    ``workers`` holding the batch, the bucket ``owner`` map and the ``buckets`` function
    (:class:`hatrick.buckets.Buckets`), whether it is ``directed`` and
    ``current_workers()`` (the stream's workers later on), so live CGQL patterns are evaluated on
    the workers (:mod:`hatrick.cgql.onworkers`)."""

    def __init__(self, state: State | None = None, time: float | None = None, seq: int | None = None,
                 frames=None, workers: list | None = None, owner=None, directed: bool | None = None,
                 current_workers=None, buckets=None):
        self._state, self._frames = state, frames
        self.workers, self.owner, self.current_workers = workers, owner, current_workers
        self.buckets = buckets
        self.directed = bool(state.directed) if directed is None and state is not None else directed
        self.time = float(state.time if time is None else time)
        self.seq = int(state.batch if seq is None else seq)
        self._vertices = self._edges = None

    def _resolve(self) -> None:
        if self._frames is not None:
            self._vertices, self._edges = self._frames()
        else:
            self._vertices, self._edges = vertex_frame(self._state), edge_frame(self._state)
        self._state = self._frames = None

    def vertices(self) -> pd.DataFrame:
        if self._vertices is None:
            self._resolve()
        return self._vertices

    def edges(self) -> pd.DataFrame:
        if self._edges is None:
            self._resolve()
        return self._edges


# selection and reachability --------------------------------------------------------------------------
def select_vertices(state: State, selector) -> np.ndarray:
    """Vids picked by ``selector``: a list/array of original ids, or a dict ``{attribute: value}``
    (a list value means any of them); all conditions must hold. A dict's conditions narrow a list
    of vids (the first attribute's set ones), so a selection costs its candidates, not a pass of
    masks over every vertex."""
    if isinstance(selector, dict):
        chosen = None                                   # vids every condition so far picks (None: every alive one)
        for name, wanted in selector.items():
            if name == "id":
                picked = select_vertices(state, wanted)
                chosen = picked if chosen is None else chosen[np.isin(chosen, picked, assume_unique=True)]
                continue
            if name not in state.vattrs:
                raise KeyError(f"no vertex attribute '{name}' (have: {sorted(state.vattrs)})")
            column = state.vattrs[name]
            options = list(wanted) if isinstance(wanted, (list, tuple, set, np.ndarray)) else [wanted]
            rows = column.set_rows[state.alive[column.set_rows]] if chosen is None else chosen[column.present[chosen]]
            chosen = rows[_among(column.values[rows], options)]
        return np.flatnonzero(state.alive) if chosen is None else chosen
    vids = state.vids_of(np.atleast_1d(np.asarray(selector)))
    return np.unique(vids[vids >= 0])


def _among(values: np.ndarray, options: list) -> np.ndarray:
    """Whether each of ``values`` (set ones: never null) equals one of ``options``, by Python's ``==``
    as pandas' ``isin`` on objects: one numpy comparison per option for a few of them (a Series and
    its hash table cost more than the selection itself, and the live results select every batch),
    pandas' ``isin`` for many."""
    if len(options) > _FEW_OPTIONS:
        return pd.Series(values, dtype=object).isin(options).to_numpy()
    hit = np.zeros(len(values), bool)
    for option in options:
        hit |= values == option
    return hit


_FEW_OPTIONS = 8


def reachable_in(state: State, sources: np.ndarray, sinks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pairs (source vid, sink vid) with a path from source to sink (undirected: same component,
    from the components kept here; directed: :func:`hatrick.reachability.reachable_pairs`)."""
    if not len(sources) or not len(sinks):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    if not state.directed:
        return same_label_pairs(sources, state.comp[sources], sinks, state.comp[sinks])
    live = state.live_slots()
    return reachable_pairs(len(state.alive), state.src[live], state.dst[live], sources, sinks)


def reachable_frame(state: State, sources, sinks) -> pd.DataFrame:
    s, t = reachable_in(state, select_vertices(state, sources), select_vertices(state, sinks))
    ids = state.ids.to_numpy()
    return pd.DataFrame({"source": ids[s], "sink": ids[t]})
