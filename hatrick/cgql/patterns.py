"""CGQL patterns: from a graph snapshot to the pattern's state, and from two states to events.

A pattern (:class:`Pattern`) is pluggable: subclass it, set ``name``, implement
``check`` (argument validation at parse time), ``evaluate`` (snapshot ->
state, given the state at the previous snapshot and the states of the aliases
it uses) and ``diff`` (state before, state after -> event dicts), then
:func:`register_pattern` it. The engine evaluates every sub-query of a query
on every snapshot of the query's time frame, and delivers the events of a
sub-query only for snapshots inside its own frame; at the first snapshot of a
frame ``diff`` gets ``before=None`` and reports everything that holds.

Semantics (each decided here; the tests' brute-force oracles re-derive them):

``Reach(source: {...}, sink: {...})``
    State: the set of (source, sink) pairs, source != sink, both matching
    their conditions, with a path from source to sink over edges matching the
    WHERE edge condition (through any vertices; directed graphs follow edge
    direction). ``reachable`` when a pair enters the set, ``unreachable``
    when it leaves (path broken, endpoint removed or no longer matching).
    Vectorised: :func:`hatrick.reachability.reachable_pairs`, the kernel the
    live path and the Gopher program share.

``Cluster(conditions, aggregate conditions)``
    Members: vertices matching the vertex conditions (in the call and in a
    ``WHERE node: {...}``). Connecting edges: edges matching the WHERE edge
    condition with both ends members, taken undirected. Groups: connected
    components with at least ``min_size`` (2) members. A group is *reported*
    while it satisfies every aggregate condition (``sum/min/max/avg(node.a)``,
    ``count(...)``, ``size``, ``diameter`` in hops). Identity: a group keeps
    the id of the previous group it overlaps most when that group also
    overlaps it most (ties to the smaller id/label); otherwise it gets a new
    id. Events for each reported group: ``created`` (no previous group
    overlaps it, or its group was not reported before), ``merged`` (it
    overlaps two or more previous groups; ``parents``), ``split`` (its only
    parent overlaps two or more current groups; ``parents``), ``grew`` (its
    size reached ``grow_factor`` (1.5) times its size at its last event);
    ``disappeared`` for a group reported before that is gone or no longer
    satisfies its conditions, unless it was absorbed by a reported merge or
    split.

``Evolved(ALIAS) WHERE aggregate conditions [AND SUCCEEDS ALIAS | PREDATES ALIAS]``
    Over the groups tracked by the Cluster sub-query ``AS ALIAS`` (by their
    identity, reported or not). A group qualifies when the alias has
    reported it at some snapshot and its current members satisfy the WHERE
    aggregates; with ``SUCCEEDS ALIAS`` only at a snapshot strictly after the
    alias first reported it; with ``PREDATES ALIAS`` when it satisfied the
    WHERE before the alias first reported it (event at the report). An
    ``evolved`` event when a group starts qualifying.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components, dijkstra

from hatrick.cgql import nodes as n
from hatrick.cgql.errors import CGQLSyntaxError, located
from hatrick.cgql.views import Bindings, Snapshot, _plain
from hatrick.reachability import reachable_pairs

__all__ = ["Pattern", "Reach", "Cluster", "Evolved", "register_pattern", "PATTERNS", "check_clause"]

PATTERNS: dict = {}

_OPS = {"=": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal, ">": np.greater,
        ">=": np.greater_equal}


def register_pattern(cls):
    """Make a :class:`Pattern` subclass callable from CGQL under ``cls.name`` (case-insensitive)."""
    PATTERNS[cls.name.lower()] = cls
    return cls


def check_clause(clause: n.Clause, text: str = "") -> None:
    """Parse-time validation of one clause: the pattern exists and takes these arguments."""
    cls = PATTERNS.get(clause.pattern.name.lower())
    if cls is None:
        raise CGQLSyntaxError(f"unknown pattern {clause.pattern.name!r}; expected one of: "
                              + ", ".join(sorted(c.name for c in PATTERNS.values())),
                              clause.pattern.line, clause.pattern.column, clause.pattern.name,
                              [c.name for c in PATTERNS.values()])
    for temporal in clause.temporal:
        if not cls.takes_temporal:
            raise CGQLSyntaxError(f"{temporal.relation.upper()} applies to Evolved(...) only",
                                  temporal.line, temporal.column, temporal.relation.upper(), [])
    cls.check(clause)


def _bad_argument(node, pattern: str, message: str, token: str = ""):
    return CGQLSyntaxError(f"{pattern}: {message}", getattr(node, "line", 0), getattr(node, "column", 0),
                           token, [])


class Pattern:
    """One sub-query's pattern; subclasses implement ``check``, ``evaluate`` and ``diff``."""

    name = ""
    takes_temporal = False

    def __init__(self, clause: n.Clause, params: dict, options: dict):
        self.clause, self.params, self.options = clause, params, options

    @classmethod
    def check(cls, clause: n.Clause) -> None:
        """Raise CGQLSyntaxError if the clause's arguments do not fit the pattern."""

    def aliases(self) -> set:
        """Aliases whose states this pattern reads (evaluated before it on every snapshot)."""
        used = set()
        for conditions in self._vertex_condition_groups():
            used |= {c.value.alias for c in conditions if isinstance(c.value, n.Wildcard)}
        return used

    def _vertex_condition_groups(self):
        return []

    def vertex_attributes(self) -> set:
        found = {c.attribute for group in self._vertex_condition_groups() for c in group}
        found |= {c.aggregate.attribute for c in self.aggregate_conditions() if c.aggregate.attribute}
        return found - {"id"}

    def edge_attributes(self) -> set:
        edge = self.clause.edge
        return set() if edge is None else {c.attribute for c in edge.conditions}

    def aggregate_conditions(self) -> tuple:
        return self.clause.pattern.aggregates + self.clause.aggregates

    def bindings(self, aliases: dict) -> Bindings:
        return Bindings(self.params, aliases)

    def evaluate(self, snap: Snapshot, previous, aliases: dict):
        raise NotImplementedError

    def diff(self, before, after) -> list:
        raise NotImplementedError

    keeps_state = False     # whether its states survive a restart (state_to_tree / state_from_tree)

    def state_to_tree(self, state):
        """``state`` as checkpoint data (:mod:`hatrick.datafile`)."""
        raise NotImplementedError(f"{self.name} states are not kept in a checkpoint")

    def state_from_tree(self, tree):
        raise NotImplementedError(f"{self.name} states are not restored from a checkpoint")


# Reach ---------------------------------------------------------------------------------
@dataclass
class ReachState:
    """The reachable (source, sink) id pairs of one snapshot; ``records(ids)`` gives the attribute
    dicts of some of its vertices (for event payloads)."""
    pairs: pd.MultiIndex
    records: object


@register_pattern
class Reach(Pattern):
    name = "Reach"
    keeps_state = True

    @classmethod
    def check(cls, clause):
        call = clause.pattern
        keys = [k for k, _ in call.named]
        for key, value in call.named:
            if key not in ("source", "sink"):
                raise _bad_argument(value, "Reach", f"unknown argument {key!r}; expected source: {{...}} and "
                                                    "sink: {...}", key)
        for missing in ("source", "sink"):
            if missing not in keys:
                raise _bad_argument(call, "Reach", f"missing argument {missing}: {{...}}", call.name)
        extra = call.sets + call.conditions + call.aggregates
        if extra or call.aliases or len(keys) != len(set(keys)):
            raise _bad_argument(extra[0] if extra else call, "Reach",
                                "takes exactly source: {...} and sink: {...}", call.name)
        if clause.aggregates:
            raise _bad_argument(clause.aggregates[0], "Reach", "aggregate conditions apply to Cluster/Evolved",
                                str(clause.aggregates[0].aggregate))

    def _vertex_condition_groups(self):
        node = self.clause.node.conditions if self.clause.node else ()
        return [self.clause.pattern.argument("source").conditions + node,
                self.clause.pattern.argument("sink").conditions + node]

    def evaluate(self, snap, previous, aliases):
        b = self.bindings(aliases)
        sources_cond, sinks_cond = self._vertex_condition_groups()
        sources = np.flatnonzero(snap.vertex_mask(sources_cond, b))
        sinks = np.flatnonzero(snap.vertex_mask(sinks_cond, b))
        edges = snap.edge_mask(self.clause.edge, b)
        directed = snap.directed if self.options.get("directed") is None else bool(self.options["directed"])
        s, t = reachable_pairs(snap.num_vertices, snap.src[edges], snap.dst[edges], sources, sinks, directed)
        distinct = s != t
        s, t = s[distinct], t[distinct]
        pairs = pd.MultiIndex.from_arrays([snap.ids[s], snap.ids[t]], names=["source", "sink"])
        return ReachState(pairs, lambda ids: snap.records(snap.index.get_indexer(ids)))

    def diff(self, before, after):
        old = before.pairs if before is not None else after.pairs[:0]
        events = self._events(after.pairs.difference(old, sort=False), after.records, "reachable")
        if before is not None:
            events += self._events(old.difference(after.pairs, sort=False), before.records, "unreachable")
        return events

    def state_to_tree(self, state):
        """The pairs and the attribute records of their vertices (an ``unreachable`` event names them)."""
        ids = pd.unique(np.concatenate([state.pairs.get_level_values(0).to_numpy(),
                                        state.pairs.get_level_values(1).to_numpy()]))
        return {"source": state.pairs.get_level_values(0).to_numpy(), "sink": state.pairs.get_level_values(1).to_numpy(),
                "ids": np.asarray(ids), "records": json.dumps(state.records(ids) if len(ids) else [])}

    def state_from_tree(self, tree):
        index, records = pd.Index(tree["ids"]), json.loads(tree["records"])
        pairs = pd.MultiIndex.from_arrays([tree["source"], tree["sink"]], names=["source", "sink"])
        return ReachState(pairs, lambda ids: [records[i] for i in index.get_indexer(ids)])

    def _events(self, pairs: pd.MultiIndex, records, status: str) -> list:
        if len(pairs) == 0:
            return []
        order = np.lexsort((pairs.get_level_values(1), pairs.get_level_values(0)))
        source, sink = pairs.get_level_values(0)[order], pairs.get_level_values(1)[order]
        source_attrs, sink_attrs = records(source), records(sink)
        return [{"status": status, "source": _plain(a), "sink": _plain(z), "source_attributes": sa,
                 "sink_attributes": za}
                for a, z, sa, za in zip(source.tolist(), sink.tolist(), source_attrs, sink_attrs)]


# Cluster -------------------------------------------------------------------------------
@dataclass
class GroupTable:
    """One snapshot's groups, row i the group labelled i: cluster ``ids``, ``values`` ({"size",
    then each aggregate's column name: per-group array}) and ``reported`` flags. Plain arrays,
    not a pandas DataFrame: the rules read a few columns per instance and partition, and a
    DataFrame's build and column lookups cost more than the rules themselves (~40% of a past
    Cluster frame's task time at 200k)."""
    ids: np.ndarray
    values: dict
    reported: np.ndarray

    def __len__(self) -> int:
        return len(self.ids)


@dataclass
class Overlaps:
    """The overlapping (previous group, current group) pairs of a snapshot: ids and labels."""
    parent: np.ndarray
    child: np.ndarray
    parent_label: np.ndarray
    child_label: np.ndarray


@dataclass
class ClusterState:
    """Every tracked group of one snapshot: ``member_ids``/``positions``/``label``/``cluster``
    (aligned, one row per member; ``label`` 0..K-1 indexes ``table``, ``cluster`` is the id),
    ``table`` (:class:`GroupTable`: per group its id, size, aggregates, reported), ``overlap``
    (:class:`Overlaps`) with the previous snapshot's groups, sizes at each group's last event,
    first report times."""
    snap: Snapshot
    member_ids: np.ndarray
    positions: np.ndarray
    label: np.ndarray
    cluster: np.ndarray
    table: GroupTable
    overlap: Overlaps
    event_size: dict
    first_reported: dict
    adjacency: sp.csr_matrix = None
    local: np.ndarray = None
    member_lists: dict | None = None          # {cluster id: sorted member ids} when members were fetched
    fetch: object = None                      # cluster ids -> their sorted member lists, asked of the stream's
                                              # workers (hatrick.cgql.onworkers), where the members are
    follower_values: object = None            # (aggregate conditions) -> {column: per-group values}, from the
                                              # groups' partials where the members are not here

    @property
    def reported_ids(self) -> np.ndarray:
        return self.table.ids[self.table.reported]

    def reported_positions(self) -> np.ndarray:
        return self.positions[self.table.reported[self.label]] if len(self.label) else self.positions

    def members(self, cluster_ids) -> list:
        """Sorted member ids of each of ``cluster_ids``."""
        if self.member_lists is not None:
            return [self.member_lists[c] for c in np.asarray(cluster_ids).tolist()]
        if self.fetch is not None:
            return self.fetch(cluster_ids)
        if self.__dict__.get("_by_cluster") is None:
            order = np.argsort(self.cluster, kind="stable")     # member ids are sorted: stays sorted
            self.__dict__["_by_cluster"] = (self.cluster[order], self.member_ids[order].tolist())
        ordered, ids = self.__dict__["_by_cluster"]
        cluster_ids = np.asarray(cluster_ids)
        lo = np.searchsorted(ordered, cluster_ids, side="left").tolist()
        hi = np.searchsorted(ordered, cluster_ids, side="right").tolist()
        return [ids[a:b] for a, b in zip(lo, hi)]

    def rows(self, cluster_ids) -> list:
        """Size and aggregate values of each of ``cluster_ids`` as dicts."""
        at = positions_in(self.table.ids, np.asarray(cluster_ids, np.int64))
        columns = list(self.table.values)
        values = [self.table.values[c][at].tolist() for c in columns]
        return [{c: _plain(v) for c, v in zip(columns, row)} for row in zip(*values)]


@register_pattern
class Cluster(Pattern):
    name = "Cluster"

    @classmethod
    def check(cls, clause):
        call = clause.pattern
        if call.named or call.aliases:
            node = call.named[0][1] if call.named else call
            raise _bad_argument(node, "Cluster", "takes vertex conditions and aggregate conditions, e.g. "
                                                 "Cluster(age < 30, sum(node.usage) < 100, diameter < 4)",
                                call.named[0][0] if call.named else call.aliases[0])
        for c in call.aggregates + clause.aggregates:
            _check_aggregate(c, "Cluster")

    def _vertex_condition_groups(self):
        call = self.clause.pattern
        conditions = call.conditions + tuple(c for s in call.sets for c in s.conditions)
        if self.clause.node:
            conditions += self.clause.node.conditions
        return [conditions]

    def evaluate(self, snap, previous, aliases):
        b = self.bindings(aliases)
        (conditions,) = self._vertex_condition_groups()
        members = snap.vertex_mask(conditions, b)
        edges = snap.edge_mask(self.clause.edge, b) & members[snap.src] & members[snap.dst]
        positions = np.flatnonzero(members)
        local = np.full(snap.num_vertices, -1, np.int64)
        local[positions] = np.arange(len(positions))
        a, z = local[snap.src[edges]], local[snap.dst[edges]]
        m = len(positions)
        adjacency = sp.csr_matrix((np.ones(2 * len(a), bool), (np.concatenate([a, z]), np.concatenate([z, a]))),
                                  shape=(m, m))
        _, label = connected_components(adjacency, directed=False)
        sizes = np.bincount(label, minlength=label.max() + 1 if m else 0)
        keep = sizes[label] >= self.options.get("min_size", 2) if m else np.zeros(0, bool)
        positions, label, member_index = positions[keep], label[keep], np.flatnonzero(keep)
        # relabel the kept groups 0..K-1 in order of their smallest member id (vertices are sorted by id)
        _, label = np.unique(label, return_inverse=True)
        label = label.reshape(-1)
        k = int(label.max()) + 1 if len(label) else 0
        member_ids = snap.ids[positions]
        p, q, weight = _overlaps(previous, member_ids, label, k)
        partials = aggregate_partials(snap_columns(snap, positions, self.aggregate_conditions()), label, k)
        ids, overlap, table, event_size, first_reported = self.conclude(
            previous, snap.time, partials, p, q, weight, k, b,
            lambda satisfied, limits: diameters(adjacency, member_index, label, k, only=satisfied, limits=limits))
        return ClusterState(snap, member_ids, positions, label, ids[label] if k else np.empty(0, np.int64), table,
                            overlap, event_size, first_reported, adjacency, member_index)

    def conclude(self, previous, time: float, partials: dict, p, q, weight, k: int, b: Bindings,
                 diameter=None, number=None, inherited=None):
        """The rules that turn one snapshot's K groups (labelled 0..K-1 in order of their smallest
        member id) into tracked clusters, wherever the groups were found (a driver snapshot or a
        Gopher run): identities from the overlap counts (previous label p, label q, weight),
        aggregates from their partials, which groups are reported. ``diameter(satisfied, limits)``
        gives hop diameters (NaN where ruled out) for the groups that pass every other condition;
        ``number(fresh labels)`` gives the new groups' ids where some of a snapshot's groups are
        concluded elsewhere (default: the next ids in label order); ``inherited``: the groups'
        :func:`inherited_ids` where the caller has them already.
        Returns (ids, overlap, table, event sizes, first report times)."""
        ids, overlap = _identify(previous, p, q, weight, k, self.options, number, inherited)
        all_conditions = self.aggregate_conditions()
        cheap = tuple(c for c in all_conditions if c.aggregate.function != "diameter")
        values = derive_aggregates(partials, cheap, k)
        satisfied = satisfies(values, cheap, b, k)
        if len(cheap) < len(all_conditions):
            limits = [(c.op, b.scalar(c.value, "diameter")) for c in all_conditions
                      if c.aggregate.function == "diameter"]
            values["diameter"] = diameter(satisfied, limits)
            satisfied &= satisfies(values, all_conditions, b, k)
        table = GroupTable(ids, {"size": partials["size"], **values}, satisfied)
        event_size = _still(previous.event_size, ids) if previous is not None else {}
        first_reported = _still(previous.first_reported, ids) if previous is not None else {}
        for cid in ids[satisfied].tolist():
            first_reported.setdefault(cid, time)
        return ids, overlap, table, event_size, first_reported

    def diff(self, before, after):
        ids, status, gone = self.changes(before, after)
        return self.events(before, after, ids, status, gone)

    def changes(self, before, after):
        """(cluster ids with an event, their statuses, ids that disappeared): the event rules,
        which need no member lists; records the sizes at these events in ``after``."""
        reported = after.reported_ids
        sizes = after.table.values["size"][after.table.reported]
        if before is None:
            status = np.full(len(reported), "created", dtype=object)
        else:
            o = after.overlap
            rep_labels = np.flatnonzero(after.table.reported)
            child, parent = o.child_label, o.parent_label
            parents = np.bincount(child, minlength=len(after.table))[rep_labels]
            first_parent = np.full(len(after.table), -1, np.int64)
            first_parent[child] = parent              # read only where a group has exactly one parent
            children_of = np.bincount(parent, minlength=max(len(before.table), 1))
            first = first_parent[rep_labels]
            siblings = np.where(first >= 0, children_of[np.maximum(first, 0)], 0)
            was = among(reported, before.reported_ids)
            last = values_at(after.event_size, reported)
            last = np.where(np.isnan(last), sizes, last)
            grow = float(self.options.get("grow_factor", 1.5))
            status = np.select([parents == 0, parents >= 2, siblings >= 2, ~was, sizes >= grow * last],
                               ["created", "merged", "split", "created", "grew"], default="")
        emit = status != ""
        ids, status, sizes = reported[emit], status[emit], sizes[emit]
        after.event_size.update(zip(ids.tolist(), sizes.tolist()))
        gone = np.empty(0, np.int64)
        if before is not None:
            changed = ids[(status == "merged") | (status == "split")]
            absorbed = after.overlap.parent[among(after.overlap.child, changed)]
            gone = np.setdiff1d(np.setdiff1d(before.reported_ids, reported), absorbed)
        return ids, status, gone

    def events(self, before, after, ids, status, gone) -> list:
        """Event dicts for :meth:`changes`' verdicts (members of ``ids`` now, of ``gone`` before)."""
        events = []
        parents = _parents_of(after.overlap, ids[(status == "merged") | (status == "split")])
        for cid, st, members, row in zip(ids.tolist(), status.tolist(), after.members(ids), after.rows(ids)):
            event = {"status": st, "cluster": cid, "members": members, **row}
            if st in ("merged", "split"):
                event["parents"] = parents[cid]
            events.append(event)
        if len(gone):
            events += [{"status": "disappeared", "cluster": cid, "members": members, **row}
                       for cid, members, row in zip(gone.tolist(), before.members(gone), before.rows(gone))]
        return events


def _still(by_cluster: dict, ids: np.ndarray) -> dict:
    """The entries of ``by_cluster`` whose cluster id is among ``ids``."""
    keys = np.fromiter(by_cluster, np.int64, len(by_cluster))
    return {c: by_cluster[c] for c in keys[among(keys, ids)].tolist()}


def among(values: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """``np.isin(values, ids)`` for cluster or vertex ids: non-negative integers below the
    number of clusters or vertices ever made, so one lookup table over their range, not a hash
    or sort of all of ``ids`` (142k groups per instance at 1M)."""
    values, ids = np.asarray(values), np.asarray(ids)
    if values.dtype.kind in "iu" and ids.dtype.kind in "iu" and len(values) and len(ids):
        return np.isin(values, ids, kind="table")
    return np.isin(values, ids)


def values_at(by_cluster: dict, cid: np.ndarray) -> np.ndarray:
    """The values of ``by_cluster`` (a few clusters) at ``cid`` (every group, distinct), NaN
    elsewhere: the few keys looked up among the ids (:func:`positions_in`), not a pandas Series,
    a sort of every id or a search for each."""
    out = np.full(len(cid), np.nan)
    if by_cluster:
        keys = np.fromiter(by_cluster, np.int64, len(by_cluster))
        values = np.fromiter(by_cluster.values(), np.float64, len(by_cluster))
        present = among(keys, cid)
        out[positions_in(cid, keys[present])] = values[present]
    return out


def positions_in(values: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Where each of ``wanted`` (all among ``values``; both distinct cluster ids) is in ``values``:
    one :func:`among` lookup and a sort of the few found, not a hash of every value (a task's
    18k groups per instance at 1M for its tens of events)."""
    hit = np.flatnonzero(among(values, wanted))
    order = np.argsort(values[hit])
    return hit[order][np.searchsorted(values[hit][order], wanted)]


def _parents_of(overlap: Overlaps, children: np.ndarray) -> dict:
    """{child id: its sorted parent ids} for ``children``, from the overlap pairs in one sort."""
    child, parent = overlap.child, overlap.parent
    pick = among(child, children)
    child, parent = child[pick], parent[pick]
    order = np.lexsort((parent, child))
    child, parent = child[order], parent[order].tolist()
    bounds = np.searchsorted(child, children).tolist(), np.searchsorted(child, children, side="right").tolist()
    return {c: parent[a:b] for c, a, b in zip(np.asarray(children).tolist(), *bounds)}


def _check_aggregate(c: n.AggregateCondition, pattern: str) -> None:
    if isinstance(c.value, n.Wildcard):
        raise _bad_argument(c.value, pattern, "an aggregate compares with a number or a parameter",
                            f"{c.value.alias}.*")


def _overlaps(previous: ClusterState | None, member_ids: np.ndarray, label: np.ndarray, k: int):
    """(previous label, current label, shared members) for every pair of overlapping groups."""
    if previous is None or not len(previous.member_ids) or not k:
        return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int64)
    # member ids of a snapshot are sorted (vertices are sorted by id), so a search finds old groups
    at = np.minimum(np.searchsorted(previous.member_ids, member_ids), len(previous.member_ids) - 1)
    hit = previous.member_ids[at] == member_ids
    keys, weight = np.unique(previous.label[at[hit]] * k + label[hit], return_counts=True)
    return keys // k, keys % k, weight


def inherited_ids(previous: ClusterState | None, p, q, weight, k: int) -> np.ndarray:
    """The ids the K current groups inherit (a heir keeps its parent's id), -1 for a new group."""
    ids = np.full(k, -1, np.int64)
    if previous is not None and k and len(p):
        parent_id = previous.table.ids[p]
        best_parent = _best_pairs(q, k, weight, parent_id)           # most overlap, then the smaller id
        best_child = _best_pairs(p, len(previous.table), weight, q)  # most overlap, then the smaller label
        heir = best_parent & best_child
        ids[q[heir]] = parent_id[heir]
    return ids


def _identify(previous: ClusterState | None, p, q, weight, k: int, options: dict, number=None, inherited=None):
    """Cluster ids for the K current groups (heirs keep their parent's id, new groups get
    ``number(their labels)`` or the next ids), and the overlap pairs with the previous groups
    (:class:`Overlaps`)."""
    ids = inherited_ids(previous, p, q, weight, k) if inherited is None else inherited.copy()
    fresh = np.flatnonzero(ids < 0)
    if number is None:
        counter = options.setdefault("_next_cluster_id", [0])
        ids[fresh] = np.arange(counter[0], counter[0] + len(fresh))
        counter[0] += len(fresh)
    else:
        ids[fresh] = number(fresh)
    parent_ids = previous.table.ids[p] if len(p) else np.empty(0, np.int64)
    overlap = Overlaps(parent_ids, ids[q], p, q)
    return ids, overlap


def _best_pairs(group: np.ndarray, count: int, weight: np.ndarray, tie: np.ndarray) -> np.ndarray:
    """Mask of the pair each of ``count`` groups picks among its pairs: the most ``weight``, then
    the smallest ``tie`` (distinct within a group), by two scatter reductions instead of a sort."""
    most = np.zeros(count, weight.dtype)
    np.maximum.at(most, group, weight)
    top = weight == most[group]
    least = np.full(count, np.iinfo(np.int64).max, np.int64)
    np.minimum.at(least, group[top], tie[top])
    return top & (tie == least[group])


def snap_columns(snap: Snapshot, positions, conditions) -> dict:
    """{attribute: values at ``positions``} for the vertex attributes the aggregates read."""
    out = {}
    for c in conditions:
        agg = c.aggregate
        if agg.attribute is None or agg.function == "diameter" or agg.attribute in out:
            continue
        if agg.attribute not in snap.vertices.columns:
            raise located(agg, f"aggregate {agg}: vertex attribute {agg.attribute!r} is not in the graph")
        out[agg.attribute] = snap.vertices[agg.attribute].to_numpy()[positions]
    return out


def aggregate_partials(columns: dict, label: np.ndarray, k: int, kinds: dict | None = None) -> dict:
    """Per-group partial aggregates that combine across sub-graphs (:func:`combine_partials`):
    ``size`` and, per attribute, (a, "count") of present values and, for numeric ones,
    (a, "sum"), (a, "min"), (a, "max") (min/max +-inf where no value); with ``kinds``
    ({attribute: partials}, :func:`partial_kinds`) only those numeric partials."""
    out = {"size": np.bincount(label, minlength=k).astype(np.int64)}
    for name, column in columns.items():
        out[(name, "count")] = np.bincount(label, weights=~pd.isna(column), minlength=k).astype(np.int64)
        wanted = ("sum", "min", "max") if kinds is None else kinds.get(name, ())
        if not wanted:
            continue
        try:
            values = np.asarray(column).astype(np.float64)
        except (TypeError, ValueError):
            continue
        if "sum" in wanted:
            out[(name, "sum")] = np.bincount(label, weights=np.nan_to_num(values), minlength=k)
        for kind, reduce, empty in (("min", np.fmin, np.inf), ("max", np.fmax, -np.inf)):
            if kind in wanted:
                out[(name, kind)] = np.full(k, empty)
                reduce.at(out[(name, kind)], label, values)
    return out


def partial_kinds(conditions) -> dict:
    """{attribute: the numeric partials its aggregates in ``conditions`` need} (count is always kept)."""
    need = {"sum": ("sum",), "avg": ("sum",), "min": ("min",), "max": ("max",)}
    out: dict = {}
    for c in conditions:
        agg = c.aggregate
        if agg.attribute is not None:
            out.setdefault(agg.attribute, set()).update(need.get(agg.function, ()))
    return out


def combine_partials(keys: np.ndarray, partials: dict) -> tuple[np.ndarray, dict, np.ndarray]:
    """Partials given per (key, piece) rows, reduced to one row per distinct key
    (:func:`distinct_codes`): (distinct keys, reduced partials, row of each input)."""
    at, unique = distinct_codes(keys)
    out = {}
    for name, values in partials.items():
        kind = name[1] if isinstance(name, tuple) else "sum"
        if kind in ("min", "max"):
            reduced = np.full(len(unique), np.inf if kind == "min" else -np.inf)
            (np.fmin if kind == "min" else np.fmax).at(reduced, at, values)
        else:
            values = np.asarray(values)
            reduced = np.bincount(at, weights=values, minlength=len(unique)).astype(values.dtype)
        out[name] = reduced
    return unique, out, at


def distinct_codes(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the position of each key among the distinct keys, the distinct keys): sorted, by one
    table over their range, where the keys are dense non-negative integers (vertex ids);
    else in order of first appearance, by hashing."""
    keys = np.asarray(keys)
    if keys.dtype.kind in "iu" and len(keys) and keys.min() >= 0 and keys.max() < 8 * len(keys) + 1024:
        present = np.zeros(int(keys.max()) + 1, bool)
        present[keys] = True
        return (np.cumsum(present, dtype=np.int32) - 1)[keys].astype(np.int64), np.flatnonzero(present).astype(keys.dtype)
    return pd.factorize(keys)


def derive_aggregates(partials: dict, conditions, k: int) -> dict:
    """The aggregates in ``conditions`` (not diameter) from partials: {column name: length-k array}."""
    out = {}
    for c in conditions:
        agg = c.aggregate
        name = agg.column_name
        if name in out or agg.function == "diameter":
            continue
        if agg.function in ("count", "size") and agg.attribute is None:
            out[name] = partials["size"]
            continue
        count = partials[(agg.attribute, "count")]
        if agg.function == "count":
            out[name] = count
            continue
        if (agg.attribute, "sum" if agg.function == "avg" else agg.function) not in partials:
            raise located(agg, f"aggregate {agg}: vertex attribute {agg.attribute!r} is not numeric")
        present = count > 0
        if agg.function == "sum":
            out[name] = partials[(agg.attribute, "sum")]
        elif agg.function == "avg":
            out[name] = np.where(present, partials[(agg.attribute, "sum")] / np.maximum(count, 1), np.nan)
        else:
            out[name] = np.where(present, partials[(agg.attribute, agg.function)], np.nan)
    return out


def aggregate_values(snap: Snapshot, positions, label, k, conditions, adjacency=None, member_index=None) -> dict:
    """Per-group values of the aggregates in ``conditions``: {column name: array of length k}."""
    out = derive_aggregates(aggregate_partials(snap_columns(snap, positions, conditions), label, k), conditions, k)
    if any(c.aggregate.function == "diameter" for c in conditions):
        out["diameter"] = diameters(adjacency, member_index, label, k)
    return out


def satisfies(values: dict, conditions, bindings: Bindings, k: int) -> np.ndarray:
    ok = np.ones(k, dtype=bool)
    for c in conditions:
        bound = bindings.scalar(c.value, f"aggregate {c.aggregate}")
        if isinstance(bound, str):
            raise located(c.value, f"aggregate {c.aggregate} compares with a number, got {bound!r}")
        ok &= _OPS[c.op](values[c.aggregate.column_name], bound)
    return ok


def diameters(adjacency: sp.csr_matrix, member_index: np.ndarray, label: np.ndarray, k: int,
              only: np.ndarray | None = None, limits=()) -> np.ndarray:
    """Hop diameter of each group (undirected): the largest eccentricity of its members, from one
    igraph eccentricity call over the groups of three or more.

    Groups outside ``only``, and groups that ``limits`` ([(op, bound)], e.g. ("<", 6)) already
    rule out by the bounds ecc(r) <= diameter <= 2 ecc(r) from one BFS per group, get NaN."""
    import igraph as ig

    out = np.bincount(label, minlength=k).astype(np.float64) - 1   # 2 members: 1
    if only is not None:
        out[(out >= 2) & ~only] = np.nan
    if limits and (out >= 2).any():
        lower = _root_eccentricity(adjacency, member_index, label, k, out >= 2)
        upper = 2 * lower
        for op, bound in limits:
            ruled_out = {"<": lower >= bound, "<=": lower > bound, ">": upper <= bound, ">=": upper < bound,
                         "=": (lower > bound) | (upper < bound)}.get(op, np.zeros(k, bool))
            out[(out >= 2) & ruled_out] = np.nan
    big = out >= 2
    if not big.any():
        return out
    inside = big[label]
    vertices = member_index[inside]
    sub = sp.triu(adjacency[vertices][:, vertices], format="coo")
    graph = ig.Graph(n=len(vertices), edges=np.column_stack([sub.row, sub.col]).tolist(), directed=False)
    eccentricity = np.asarray(graph.eccentricity(), dtype=np.float64)
    largest = np.zeros(k)
    np.maximum.at(largest, label[inside], eccentricity)
    out[big] = largest[big]
    return out


def _root_eccentricity(adjacency, member_index, label, k, groups) -> np.ndarray:
    """Eccentricity of the first member of each selected group (one BFS from a hub joined to them)."""
    first = np.full(k, -1, np.int64)
    first[label] = member_index                    # any member will do: each gives valid bounds
    roots = first[groups]
    m = adjacency.shape[0]
    hub = sp.csr_matrix((np.ones(len(roots), bool), (np.full(len(roots), m), roots)), shape=(m + 1, m + 1))
    graph = sp.bmat([[adjacency, None], [None, sp.csr_matrix((1, 1), dtype=bool)]], format="csr") + hub
    distance = dijkstra(graph, directed=True, indices=m, unweighted=True)[member_index] - 1
    out = np.zeros(k)
    reached = np.isfinite(distance)
    np.maximum.at(out, label[reached], distance[reached])
    return out


# Evolved -------------------------------------------------------------------------------
@dataclass
class EvolvedState:
    alias: ClusterState
    qualifying: np.ndarray
    first_satisfied: dict = field(default_factory=dict)
    values: pd.DataFrame = None


@register_pattern
class Evolved(Pattern):
    name = "Evolved"
    takes_temporal = True

    @classmethod
    def check(cls, clause):
        call = clause.pattern
        if len(call.aliases) != 1 or call.named or call.sets or call.conditions or call.aggregates:
            raise _bad_argument(call, "Evolved", "takes one alias: Evolved(ALIAS)", call.name)
        for c in clause.aggregates:
            _check_aggregate(c, "Evolved")
        for t in clause.temporal:
            if t.alias != call.aliases[0]:
                raise _bad_argument(t, "Evolved", f"{t.relation.upper()} must name the evolved alias "
                                                  f"{call.aliases[0]!r}", t.alias)
        if len(clause.temporal) > 1:
            raise _bad_argument(clause.temporal[1], "Evolved", "takes one of SUCCEEDS / PREDATES",
                                clause.temporal[1].relation.upper())
        if clause.edge is not None or clause.node is not None:
            where = clause.edge or clause.node
            raise _bad_argument(where, "Evolved", "its groups come from the alias: give edge/node "
                                                  "conditions on the Cluster sub-query", "edge")

    @property
    def alias(self) -> str:
        return self.clause.pattern.aliases[0]

    def aliases(self) -> set:
        return {self.alias}

    def evaluate(self, snap, previous, aliases):
        state = aliases.get(self.alias)
        if not isinstance(state, ClusterState):
            raise located(self.clause.pattern, f"Evolved({self.alias}): {self.alias!r} must be the alias of a "
                                               "Cluster sub-query")
        ids = state.table.ids                  # in label order 0..k-1 (see Cluster.evaluate)
        values = state.follower_values(self.clause.aggregates) if state.follower_values is not None else \
            aggregate_values(snap, state.positions, state.label, len(ids), self.clause.aggregates,
                             state.adjacency, state.local)
        qualifying, first_satisfied, frame = self.conclude(
            ids, state.table.values["size"], values, state.first_reported,
            previous.first_satisfied if previous is not None else None, snap.time, self.bindings(aliases))
        return EvolvedState(state, qualifying, first_satisfied, frame)

    def conclude(self, ids: np.ndarray, size: np.ndarray, values: dict, first_reported: dict,
                 first_satisfied_before: dict | None, time: float, b: Bindings):
        """The rules over the alias's groups ``ids`` (their sizes, the WHERE aggregates' values,
        the alias's first report times), wherever the groups were found (a driver snapshot or a
        Gopher run): (qualifying ids, first times each satisfied the WHERE, the values table)."""
        holds = satisfies(values, self.clause.aggregates, b, len(ids))
        first_satisfied = _still(first_satisfied_before, ids) if first_satisfied_before is not None else {}
        for cid in ids[holds].tolist():
            first_satisfied.setdefault(cid, time)
        reported = values_at(first_reported, ids)
        satisfied_at = values_at(first_satisfied, ids)
        relation = self.clause.temporal[0].relation if self.clause.temporal else None
        ever_reported = ~np.isnan(reported)
        if relation == "succeeds":
            qualifying = holds & ever_reported & (reported < time)
        elif relation == "predates":
            qualifying = ever_reported & (np.nan_to_num(satisfied_at, nan=np.inf) < reported)
        else:
            qualifying = holds & ever_reported
        frame = pd.DataFrame({"size": size, **values}, index=pd.Index(ids, name="cluster"))
        return ids[qualifying], first_satisfied, frame

    def diff(self, before, after):
        new = np.setdiff1d(after.qualifying, before.qualifying if before is not None else np.empty(0, np.int64))
        at = after.values.index.get_indexer(new)
        columns = list(after.values.columns)
        values = [after.values[c].to_numpy()[at].tolist() for c in columns]
        return [{"status": "evolved", "cluster": cid, "alias": self.alias, "members": members,
                 **{c: _plain(v) for c, v in zip(columns, row)}, "reported_at": after.alias.first_reported[cid]}
                for cid, members, row in zip(new.tolist(), after.alias.members(new), zip(*values))]
