"""Past frames as Gopher programs: a CGQL pattern over stored instances, run where the data is.

Cluster is described below; Reach (:class:`ReachProgram`) numbers the sources,
spreads bit sets of them over the kept edges and returns the (source, sink)
pairs with the endpoints' attributes (numbering and pairs once per partition).

A past frame (or the past part of a straddling one) is a sequentially dependent
analysis whose dependent part is small: what one instance's groups or pairs are
does not depend on the instance before, only the identities and events do. So
every instance it covers is a lane of the same supersteps
(:func:`gopher.timeseries.run_independent`): the lanes label or spread side by
side, and Cluster's summary of an instance reads the previous instance's
settled labels and groups from that lane (:meth:`gopher.worker.TimeSeriesContext.state_before`);
the instances are concluded one superstep apart, in time order. Reach compares
the instances' pairs in time order on the driver. Each sub-graph reads
only the attributes the query names, text edge values as their stored dictionary
codes (``text_as_categorical``: a condition is decided once per distinct value).
The supersteps of a partition that received no messages run once per partition
(:meth:`gopher.program.SubgraphProgram.compute_partition`), vectorised over all
its sub-graphs, each of which only takes its slices; a sub-graph sleeps until
messages arrive (the partition's first stays awake to run the partition-wide
phases). Cluster and Reach read their messages over the whole partition too
(``partition_messages``): none of their supersteps runs per sub-graph. Cluster
per instance, in supersteps:

``label``
    superstep 0: the vertex and edge conditions (:func:`hatrick.cgql.views.vertex_conditions_mask` /
    :func:`~hatrick.cgql.views.edge_condition_mask`, the live path's rules) and
    the members' pieces over the kept local edges (one csgraph call) are worked
    out once per partition and instance (:meth:`gopher.subgraph.Subgraph.partition_pass`);
    every piece starts with its smallest vertex id and tells it over the kept
    remote edges. Later label supersteps: smallest-label propagation between
    the partition's pieces (:func:`algorithms.components.propagate_labels`, the
    components program's kernel, over the partition as one sub-graph) until no
    label changes; then the lane waits until the previous instance's lane has
    been concluded.
``summary``
    the overlaps of the previous instance's groups with this one's (its pieces
    matched to this instance's rows vertex by vertex: instances may add
    different vertices, :func:`_carried_at`) join them into components; a component whose groups all lie inside this partition is
    decided here, the others go to the driver: their groups' partial aggregates
    (:func:`hatrick.cgql.patterns.aggregate_partials`), smallest member ids and
    overlaps, and the previous groups' states. The driver's ``master`` reduces
    them, applies the pattern's rules (:meth:`hatrick.cgql.patterns.Cluster.conclude` /
    ``changes``) and numbers every new group of the instance.
``rules``
    the same rules over the partition's own components, new groups numbered
    as the driver said; their events with their members, and the member ids of
    the driver's groups that have an event (now, or before for ``disappeared``).
    At the last instance of a frame that goes live every group goes to the
    driver (the state handed to the live part).

``diameter`` (hops) is asked of the groups that pass every other condition (of
every group where an Evolved reads it). A group decided on its partition's task
is measured there over the partition's kept edges. For the driver's groups a
boundary step runs between ``summary`` and the driver's rules: ``edges`` (each
partition sends its pieces' members and kept edges, as vertex ids, to the keeper
sub-graph of the partition that holds most of the group) and ``diameters`` (that
task measures them with :func:`hatrick.cgql.patterns.diameters`, the pattern's
kernel); only (group label, diameter) pairs reach the driver.

An ``Evolved`` sub-query follows its alias's Cluster run (``followers``): its
rules (:meth:`hatrick.cgql.patterns.Evolved.conclude`, the live path's) run
wherever a group is decided, its first satisfied time and qualifying flag
travel with the group's record from instance to instance, like its event size.

An ``alias.*`` wildcard (``{name = C1.*}``: the vertices whose ``name`` equals
that of a member of a group the Cluster ``AS C1`` reports in the same instance)
ties its sub-query to its alias's: both run as stages of one run
(:class:`StagedProgram`), the Cluster first in every lane. At its ``rules``
superstep each partition marks its members of reported groups (its own groups
by their record, the driver's by the labels the driver names) and sends the
distinct values they have of the compared attributes to every partition (none
for ``id``); the next stage reads both as the alias's
:class:`hatrick.cgql.views.ReportedMembers` through the live path's condition
rules. The driver sees only the reported boundary groups' labels.

Only the summaries of groups that touch a partition boundary, overlap pairs,
diameters and events reach the driver; vertices and edges never do.
"""
from __future__ import annotations

import operator

import numpy as np
import pandas as pd
from scipy.sparse import csr_matrix
from numba import njit
from scipy.sparse.csgraph import connected_components

from algorithms.components import propagate_labels, tell_labels
from gofs.numba_cache import serialise_compilation
from gopher.aggregators import Aggregator
from gopher.context import MasterContext
from gopher.timeseries import TimeSeriesProgram, run_independent
from hatrick.cgql import nodes as n
from hatrick.cgql.errors import located
from hatrick.cgql.patterns import (Cluster, ClusterState, Evolved, EvolvedState, GroupTable, Reach, ReachState,
                                   aggregate_partials, among,
                                   combine_partials, derive_aggregates, diameters, inherited_ids, partial_kinds,
                                   satisfies, values_at)
from hatrick.cgql.views import (Bindings, ReportedMembers, _plain, edge_condition_mask, text_frame,
                                vertex_conditions_mask)
from hatrick.reachability import set_bits, source_bits, spread_bits

serialise_compilation()  # one compilation at a time on this machine: numba's kernel cache stays whole

__all__ = ["ClusterProgram", "ReachProgram", "StagedProgram", "run_past"]

def _stacked(parts: list) -> list:
    """A task's list of per-sub-graph parts as one part: arrays concatenated field by field
    (through tuples, lists and dicts), so a few large arrays travel instead of many small ones."""
    def stack(values):
        first = values[0]
        if isinstance(first, dict):
            return {k: stack([v[k] for v in values]) for k in first}
        if isinstance(first, (tuple, list)):
            return type(first)(stack([v[i] for v in values]) for i in range(len(first)))
        return np.concatenate(values)
    return [stack(parts)] if len(parts) > 1 else parts


_CONCAT = Aggregator(operator.add, [], pack=_stacked)
_LIST = Aggregator(operator.add, [])


class PatternProgram(TimeSeriesProgram):
    """What the pattern programs share: the attributes they load (only those the query names,
    static or per instance as the store keeps them, text edge values as their stored codes) and
    each sub-graph's view of the conditions."""

    text_as_categorical = True

    def _declare(self, store, vertex: set, edge) -> None:
        edge_names = set(self.pattern.edge_attributes()) | _label_column(store, edge)
        dynamic_v, dynamic_e = set(store.instance_vertex_attributes), set(store.instance_edge_attributes)
        self.edge = edge
        self.vertex_columns = tuple(sorted(vertex)) or ("id",)    # a frame has a column: it has a length
        self.instance_vertex_attributes = tuple(sorted((vertex - {"id"}) & dynamic_v))
        self.vertex_attributes = tuple(sorted((vertex - {"id"}) - dynamic_v))
        self.instance_edge_attributes = tuple(sorted(edge_names & dynamic_e))
        self.edge_attributes = tuple(sorted(edge_names - dynamic_e))

    def _bindings(self, keeper) -> Bindings:
        """The parameters and, for ``alias.*`` wildcards, what the partition holds of each alias
        in this instance (:class:`hatrick.cgql.views.ReportedMembers`, left by :class:`StagedProgram`)."""
        return Bindings(self.pattern.params, keeper.state.get("aliases"))

    def _pass(self, keeper) -> dict:
        """The partition's pass of this instance (:meth:`gopher.subgraph.Subgraph.partition_pass`)."""
        return keeper.partition_pass(self._pass_key, lambda whole: self._partition(whole, self._bindings(keeper)))

    def run(self, store, instances: list, **engine_options) -> list:
        """Run over ``instances`` (manifest entries in time order), each a lane of the same
        supersteps; returns, per instance, (instance, state, in frame, events), the state only
        at the last instance (see :meth:`start` and :meth:`finish`)."""
        globals_ = self.start(instances)
        self.metrics = run_independent(store, self, instances=[i["id"] for i in instances], globals_=globals_,
                                       **engine_options).metrics
        return self.finish(instances)

    def _rows(self, subgraph, local: np.ndarray, usable: np.ndarray):
        """(vertex frame, kept local edges, kept remote edges): ``local``/``usable`` narrowed by
        the WHERE edge condition."""
        b = Bindings(self.pattern.params)
        frame = text_frame({a: subgraph.ids if a == "id" else subgraph.vertex_attribute(a)
                            for a in self.vertex_columns})
        if self.edge is not None:
            names = self.edge_attributes + self.instance_edge_attributes
            remote = subgraph.remote_edges
            pairs = {a: (subgraph.edge_attribute(a), remote.attribute(a)) for a in names}
            joined = {a: _joinable(*pair) for a, pair in pairs.items()}
            if all(v is not None for v in joined.values()):     # one decision over local, then remote rows
                kept = edge_condition_mask(text_frame(joined), self.edge, b)
                return frame, local & kept[:len(local)], usable & kept[len(local):]
            local = local & edge_condition_mask(text_frame({a: v[0] for a, v in pairs.items()}), self.edge, b)
            usable = usable & edge_condition_mask(text_frame({a: v[1] for a, v in pairs.items()}), self.edge, b)
        return frame, local, usable


class ClusterProgram(PatternProgram):
    """One Cluster sub-query over a sequence of instances (see the module docstring)."""

    message_dtype = "int64"
    combiner = "min"
    partition_messages = True
    aggregators = {"changed": "sum", "summary": _LIST, "events": _LIST, "evolved": _LIST, "members": _CONCAT,
                   "diameters": _CONCAT}

    def __init__(self, pattern: Cluster, store, in_frame, keep_last: bool, followers=(), shared=None):
        self.pattern = pattern
        # the attributes the ``alias.*`` wildcards over this Cluster compare (None: no wildcard reads it)
        self.shared = None if shared is None else tuple(sorted(shared))
        self.followers = list(followers)         # [(Evolved pattern over this alias, its in_frame)]
        (self.conditions,) = pattern._vertex_condition_groups()
        self.aggregates = pattern.aggregate_conditions() + tuple(c for f, _ in self.followers for c in f.clause.aggregates)
        self.columns = sorted({c.aggregate.attribute for c in self.aggregates if c.aggregate.attribute})
        self._declare(store, {c.attribute for c in self.conditions} | set(self.columns) | set(self.shared or ()),
                      pattern.clause.edge)
        self.min_size = int(pattern.options.get("min_size", 2))
        self.diameter = any(c.aggregate.function == "diameter" for c in self.aggregates)
        # a follower's diameter is every group's, exact (the alias's own only where it may be reported)
        self.exact = any(c.aggregate.function == "diameter" for f, _ in self.followers for c in f.clause.aggregates)
        self._pass_key = _pass_key(pattern, self.min_size, self.shared)
        self.template_vertices = store.num_vertices     # vids from here on: vertices instances add
        # driver side only (master): the boundary groups' state and the events, instance by instance
        self._in_frame, self._keep_last = in_frame, keep_last
        self.results: dict = {}
        self._state = self._held = None
        self._inside = False

    # task side ----------------------------------------------------------------------------
    def compute_partition(self, subgraphs, ctx):
        """Every superstep, once per partition (labels that arrived included: ``partition_messages``):
        the first label superstep, the later ones, the summary and the rules. The partition's
        pieces, labels and groups are one ``lane`` in its first sub-graph's state; that sub-graph
        stays awake so that the phases run, the others sleep (labels arriving for their vertices
        wake them only to be read here, over the whole partition)."""
        if not subgraphs:
            return False
        votes = np.ones(len(subgraphs), bool)
        votes[0] = False
        phase = ctx.globals["phase"]
        if phase == "wait":
            return votes
        keeper = subgraphs[0]
        whole = self._pass(keeper)
        if ctx.superstep == 0:
            keeper.state["lane"] = lane = {"piece": whole["piece"], "usable": whole["usable"], "added": whole["added"],
                                           # vids grow with the row: a piece's first is its smallest
                                           "labels": whole["vertex_ids"][whole["starts"]]}
            changed = np.ones(len(whole["starts"]), bool)
            tell_labels(_Pieces(lane, whole), ctx, lane["labels"], changed, lane["piece"], lane["usable"])
            ctx.aggregate("changed", len(changed))
            return votes
        lane = keeper.state["lane"]
        if phase == "label":
            messages = ctx.partition_messages()
            ctx.aggregate("changed", propagate_labels(_Pieces(lane, whole), messages, ctx, len(lane["labels"]),
                                                      lane["piece"], lane["usable"]) if len(messages.vertices) else 0)
            return votes
        if phase == "edges":
            _send_groups(ctx, whole, lane, ctx.globals["measure"])
            return votes
        if phase == "diameters":
            ctx.aggregate("diameters", [_gathered_diameters(ctx.partition_messages().payloads, ctx.globals["limits"])])
            return votes
        before = ctx.state_before(keeper)
        previous = None if before is None else before.get("lane")
        if phase == "summary":
            ctx.aggregate("summary", [{**self._summary(whole, lane, previous, ctx.globals), "keeper": keeper.id}])
        else:
            events, evolved = self._rules(whole, lane, previous, ctx.globals)
            ctx.aggregate("events", events)
            ctx.aggregate("evolved", evolved)
            ctx.aggregate("members", [self._members(whole, lane, previous, ctx.globals)])
            if self.shared is not None:
                self._share_members(ctx, whole, lane)
        return votes

    def _share_members(self, ctx, whole: dict, lane: dict) -> None:
        """What the ``alias.*`` wildcards over this Cluster read of this instance: which of the
        partition's vertices are members of a reported group (``lane["reported"]``: the groups
        decided here by their record, the driver's by the labels it named), and the distinct
        values the members have of each shared attribute, sent to every partition (read by
        :meth:`reported_members` there; only tasks see them)."""
        reported = lane["record"]["reported"] | among(lane["labels"], ctx.globals["reported_boundary"])
        piece = lane["piece"]
        inside = np.flatnonzero(piece >= 0)
        mask = np.zeros(len(piece), bool)
        mask[inside] = reported[piece[inside]]
        lane["reported"] = mask
        for attribute, values in whole["shared"].items():
            distinct = pd.unique(values[mask])
            ctx.send_to_all(("members", self.pattern.clause.alias, attribute, distinct[pd.notna(distinct)]))

    def reported_members(self, state: dict, payloads: list) -> ReportedMembers:
        """This Cluster's :class:`hatrick.cgql.views.ReportedMembers` in a partition, from its
        lane's ``state`` and the values every partition sent (:meth:`_share_members`)."""
        alias = self.pattern.clause.alias
        values = {a: [] for a in self.shared if a != "id"}
        for p in payloads:
            if isinstance(p, tuple) and len(p) == 4 and p[0] == "members" and p[1] == alias:
                values[p[2]].append(p[3])
        return ReportedMembers(state["lane"]["reported"],
                               {a: pd.unique(np.concatenate(v)) if v else np.empty(0) for a, v in values.items()})

    def _partition(self, whole, b: Bindings) -> dict:
        """Members, kept edges and their pieces over the whole partition in a few compiled passes (pieces
        never cross sub-graphs: local edges do not), numbered so that each sub-graph's pieces are
        consecutive: {"piece" (-1 outside), "members" (rows in a piece), "starts" (each piece's
        first row), "usable" remote rows, "columns" (aggregated attributes at the members)}."""
        src, dst = whole.edge_src, whole.edge_dst
        remote = whole.remote_edges
        frame, local, usable = self._rows(whole, np.ones(len(src), bool), np.ones(len(remote), bool))
        members = vertex_conditions_mask(frame, self.conditions, b)
        usable &= members[remote.src]
        size = whole.num_vertices
        indptr, indices, touched = kept_adjacency(src, dst, local, members, size)
        if self.min_size < 2:
            touched |= members
        touched[remote.src[usable]] = True
        graph = csr_matrix((np.ones(len(indices)), indices, indptr), shape=(size, size))
        count, piece = connected_components(graph, directed=True, connection="weak")   # float data: used as is
        out, starts = first_row_numbering(piece, touched, count)
        rows = np.flatnonzero(touched)
        kept = np.flatnonzero(local & members[src] & members[dst]) if self.diameter else None
        first_added = int(np.searchsorted(whole.vertex_ids, self.template_vertices))
        return {"piece": out, "members": rows, "usable": usable, "starts": starts, "ids": whole.ids,
                # the rows past the template's: the vertices this instance adds here (vids, ids)
                "added": (whole.vertex_ids[first_added:].copy(), whole.ids[first_added:].copy()),
                "vertex_ids": whole.vertex_ids, "remote_src": remote.src, "remote_dst": remote.dst,
                "columns": {a: frame[a].to_numpy()[rows] for a in self.columns},
                "kinds": partial_kinds(self.aggregates),
                # diameter: the kept local edges, as rows and as a symmetric adjacency of the partition
                "kept": (src[kept], dst[kept]) if self.diameter else None,
                "adjacency": (graph + graph.T).tocsr() if self.diameter else None,
                "shared": {a: frame[a].to_numpy() for a in self.shared or () if a != "id"}}

    def _summary(self, whole: dict, lane: dict, previous, globals_: dict) -> dict:
        """Split the partition's groups between here and the driver, and report the driver's part.

        A piece is *local* when it is a whole group (no kept edge leaves the partition and no
        label came in). The overlaps between the previous instance's groups and this one's join
        them into components; a component of local groups only is *clean*: every overlap of its
        groups is here, so the pattern's rules decide it here (:meth:`_rules`). The others, with
        their overlaps, partials and the previous groups' states, go to the driver; so do the
        smallest ids of the clean component's new groups (the driver numbers every new group of
        the instance in the order of its smallest member, as the rules do)."""
        piece, labels = lane["piece"], lane["labels"]
        count, rows = len(labels), whole["members"]
        at = piece[rows]
        partials = aggregate_partials(whole["columns"], at, count, whole["kinds"])
        ids = whole["ids"][rows]
        smallest = smallest_in_pieces(ids.astype(np.int64), at, count) if ids.dtype.kind in "iu" else \
            _smallest(ids, at, count)
        crossing = np.zeros(count, bool)
        crossing[piece[whole["remote_src"][whole["usable"]]]] = True
        lane["local"] = (labels == whole["vertex_ids"][whole["starts"]]) & ~crossing
        gather = bool(globals_["gather"])            # every group to the driver (the state handed to the live part)
        local = lane["local"] & (not gather)
        node = ~local | (partials["size"] >= self.min_size)          # local groups too small are no groups
        known = previous is not None
        before_count = len(previous["labels"]) if known else 0
        before_local = previous["local"] if known else np.zeros(0, bool)
        before_node = ~before_local | (previous["record"]["cid"] >= 0) if known else before_local
        pair = np.empty((0, 3), np.int64)
        if before_count and count:
            before_at = _carried_at(previous["piece"], previous["added"][0], whole["added"][0], rows)
            row, col, shared = overlap_counts(before_at, at, before_count, count)
            keep = before_node[row] & node[col]
            pair = np.column_stack([row[keep], col[keep], shared[keep]])
        total = before_count + count
        joined = csr_matrix((np.ones(len(pair)), (pair[:, 0], before_count + pair[:, 1])), shape=(total, total))
        _, component = connected_components(joined, directed=False)
        seeds = np.r_[before_node & (~before_local | gather), ~local]
        dirty = np.zeros(total, bool)
        dirty[component[seeds]] = True
        dirty = dirty[component]
        before_dirty, now_dirty = dirty[:before_count] & before_node & before_local, dirty[before_count:] & node
        clean_before = np.flatnonzero(before_node & before_local & ~dirty[:before_count])
        clean_now = np.flatnonzero(node & ~dirty[before_count:])
        clean_now = clean_now[np.argsort(smallest[clean_now], kind="stable")]
        clean_pair = pair[~dirty[pair[:, 0]]]
        p = _rank(clean_before, before_count)[clean_pair[:, 0]]
        q = _rank(clean_now, count)[clean_pair[:, 1]]
        prior_record = _pick(previous["record"], clean_before) if known else None
        prior = _state_of(prior_record)
        heirs = inherited_ids(prior, p, q, clean_pair[:, 2], len(clean_now))
        lane["clean"] = (prior_record, prior, clean_before, clean_now, p, q, clean_pair[:, 2], heirs,
                         {k: v[clean_now] for k, v in partials.items()}, smallest[clean_now])
        driver_pair = pair[dirty[pair[:, 0]]]
        return {"label": labels[now_dirty], "local": local[now_dirty], "smallest": smallest[now_dirty],
                "partials": {k: v[now_dirty] for k, v in partials.items()},
                "before": _pick(previous["record"], np.flatnonzero(before_dirty)) if known else None,
                "pairs": np.column_stack([previous["labels"][driver_pair[:, 0]], labels[driver_pair[:, 1]],
                                          driver_pair[:, 2]]) if known else pair,
                "fresh": _narrow(smallest[clean_now][heirs < 0])}

    def _rules(self, whole: dict, lane: dict, previous, globals_: dict) -> list:
        """The pattern's rules over the clean components (:meth:`_summary`), with the new groups
        numbered as the driver said; the partition's local groups' states for the next instance
        (those of the other components as the driver decided them). Returns the events as
        (0, smallest member id, event) and, for ``disappeared``, (1, cluster id, event): the
        order the driver path gives them in; and the followers' ``evolved`` events as (follower,
        cluster id, event)."""
        prior_record, prior, clean_before, clean_now, p, q, weight, heirs, partials, smallest = lane.pop("clean")
        fresh, base = globals_["fresh"], globals_["base"]
        exact = _clean_diameters(whole, lane, clean_now) if self.exact else None

        def diameter(satisfied, limits):
            if exact is not None:
                return _unless(exact, satisfied)
            return _clean_diameters(whole, lane, clean_now, satisfied, limits)

        ids, overlap, table, event_size, first_reported = self.pattern.conclude(
            prior, globals_["time"], partials, p, q, weight, len(clean_now), Bindings(self.pattern.params),
            diameter=diameter, number=lambda new: base + np.searchsorted(fresh, smallest[new]), inherited=heirs)
        after = ClusterState(None, *[np.empty(0, np.int64)] * 4, table, overlap, event_size, first_reported,
                             member_lists={})
        out = []
        follow = self._follow(prior_record, after, partials, globals_["time"], exact)
        news = _new_qualifying(follow, globals_["follow_inside"], globals_["follow_before_inside"])
        changed = np.empty(0, np.int64)
        if globals_["inside"]:
            before = prior if globals_["before_inside"] else None
            changed, status, gone = self.pattern.changes(before, after)
        evented = among(ids, np.concatenate([changed, *news]))
        after.member_lists = _piece_members(whole["ids"], lane["piece"], clean_now[evented], ids[evented])
        if globals_["inside"]:
            if len(gone):
                before_ids = before.table.ids
                before.member_lists = _piece_members(_ids_before(whole, previous), previous["piece"],
                                                     clean_before[among(before_ids, gone)],
                                                     before_ids[among(before_ids, gone)])
            out = _in_driver_order(self.pattern.events(before, after, changed, status, gone), ids, smallest)
        evolved = self._evolved_events(follow, globals_["follow_inside"], globals_["follow_before_inside"])
        record = _empty_record(lane["labels"], table, len(self.followers))
        _put(record, clean_now, _record_of(after, None, follow))
        decided = globals_["decided"]
        if decided is not None and len(decided["label"]):
            where = np.searchsorted(decided["label"], lane["labels"])
            hit = np.flatnonzero(lane["local"] & (where < len(decided["label"]))
                                 & (decided["label"][np.minimum(where, len(decided["label"]) - 1)] == lane["labels"]))
            _put(record, hit, _pick(decided, where[hit]))
        lane["record"] = record
        return out, evolved

    def _follow(self, before: dict | None, after: ClusterState, partials: dict, time: float, exact) -> list:
        """The followers' rules over ``after``'s groups (:meth:`hatrick.cgql.patterns.Evolved.conclude`),
        their previous states from the groups' ``before`` record, ``exact``: the groups' hop
        diameters where a follower reads them: [(before, after) EvolvedState]."""
        ids = after.table.ids
        out = []
        for i, (f, _) in enumerate(self.followers):
            first, was = None, np.empty(0, np.int64)
            if before is not None:
                first = _as_dict(before["cid"], before[f"first_satisfied{i}"])
                was = before["cid"][before[f"qualifying{i}"]]
            values = derive_aggregates(partials, f.clause.aggregates, len(ids))
            if any(c.aggregate.function == "diameter" for c in f.clause.aggregates):
                values["diameter"] = exact
            qualifying, first_satisfied, frame = f.conclude(ids, after.table.values["size"], values,
                                                            after.first_reported, first, time, Bindings(f.params))
            out.append((EvolvedState(None, was, first or {}), EvolvedState(after, qualifying, first_satisfied, frame)))
        return out

    def _evolved_events(self, follow: list, inside: list, before_inside: list) -> list:
        """(follower, cluster id, event) of the followers in frame (members from their alias's state)."""
        return [(i, e["cluster"], e) for i, ((f, _), (before, after)) in enumerate(zip(self.followers, follow))
                if inside[i] for e in f.diff(before if before_inside[i] else None, after)]

    @staticmethod
    def _members(whole: dict, lane: dict, previous, globals_: dict):
        """(label, member id) pairs of the wanted groups now and before."""
        out = []
        for have, wanted in ((lane, globals_["want_now"]), (previous, globals_["want_before"])):
            if have is None or not len(wanted):
                out.append((np.empty(0, np.int64), whole["ids"][:0]))
                continue
            ids = whole["ids"] if have is lane else _ids_before(whole, previous)
            piece, labels = have["piece"], have["labels"]
            hit = np.isin(labels, wanted)
            at = np.flatnonzero(piece >= 0)
            at = at[hit[piece[at]]]
            out.append((labels[piece[at]], ids[at]))
        return out

    # driver side ----------------------------------------------------------------------------
    def master(self, ctx):
        """Per lane: label until nothing changes, wait until the previous instance's lane has
        been concluded (this lane reads its settled labels and groups, the driver its boundary
        groups), then summary and rules. A lane's summary runs in the superstep of the previous
        lane's rules, after them (a task steps its lanes in order), so the instances are
        concluded one superstep apart while the later lanes still label."""
        phase = ctx.globals["phase"]
        position = self._positions[ctx.instance["id"]]
        if phase == "label" and not ctx.aggregated["changed"]:
            phase = ctx.globals["phase"] = "wait"
        if phase == "wait" and (position == 0 or position - 1 in self._concluded):
            ctx.globals.update(phase="summary", gather=self._keep_last and ctx.instance["id"] == self._last["id"])
        elif phase == "summary":
            parts = ctx.aggregated.pop("summary")        # popped: the next plan would carry it to the tasks
            groups = _combined(parts, self.min_size)
            measure = self._to_measure(parts, groups) if self.diameter else None
            if measure is not None and len(measure["label"]):
                self._parked[ctx.instance["id"]] = (parts, groups)
                ctx.globals.update(phase="edges", measure=measure, limits=[] if self.exact else self._limits())
            else:
                self._conclude(ctx, parts, groups, None)
                self._concluded.add(position)
                ctx.globals["phase"] = "rules"
        elif phase == "edges":
            ctx.globals["phase"] = "diameters"
        elif phase == "diameters":
            parts, groups = self._parked.pop(ctx.instance["id"])
            measured = ctx.aggregated.pop("diameters")
            labels = _joined([m[0] for m in measured], np.empty(0, np.int64))
            values = np.concatenate([m[1] for m in measured]) if measured else np.empty(0)
            order = np.argsort(labels)
            self._conclude(ctx, parts, groups, (labels[order], values[order]))
            for name in ("measure", "limits"):
                ctx.globals.pop(name)
            self._concluded.add(position)
            ctx.globals["phase"] = "rules"
        elif phase == "rules":
            self._publish(ctx)
            ctx.halt()

    def _limits(self) -> list:
        """[(op, bound)] of the diameter conditions, as :meth:`hatrick.cgql.patterns.Cluster.conclude` reads them."""
        b = Bindings(self.pattern.params)
        return [(c.op, b.scalar(c.value, "diameter")) for c in self.pattern.aggregate_conditions()
                if c.aggregate.function == "diameter"]

    def _cheap(self, partials: dict, k: int) -> np.ndarray:
        """Which of ``k`` groups satisfy every aggregate condition but the diameter (the groups
        ``conclude`` asks a diameter of)."""
        cheap = tuple(c for c in self.pattern.aggregate_conditions() if c.aggregate.function != "diameter")
        return satisfies(derive_aggregates(partials, cheap, k), cheap, Bindings(self.pattern.params), k)

    def _to_measure(self, parts: list, groups: dict) -> dict:
        """The driver's groups whose diameter ``conclude`` will ask for (three or more members,
        every other condition satisfied) and where each is measured: the partition that holds
        most of its members (its keeper sub-graph), which the others send their pieces' kept
        edges to (:func:`_send_groups`); {"label": sorted group labels, "target": sub-graph ids}."""
        partials = groups["final_partials"]
        need = (self._cheap(partials, len(groups["final"])) | self.exact) & (partials["size"] >= 3)
        wanted = groups["kept"][need]                     # rows of the combined groups
        rows = np.flatnonzero(np.isin(groups["at"], wanted))
        if not len(rows):
            return {"label": np.empty(0, np.int64), "target": np.empty(0, np.int64)}
        keeper = np.repeat([p["keeper"] for p in parts], [len(p["label"]) for p in parts])
        size = _field(parts, "partials", "size")
        order = np.lexsort((-size[rows], groups["at"][rows]))        # by group, largest piece first
        rows = rows[order]
        first = rows[np.r_[True, groups["at"][rows][1:] != groups["at"][rows][:-1]]]
        by_label = np.argsort(groups["labels"][first])
        return {"label": groups["labels"][first][by_label], "target": keeper[first][by_label]}

    def _conclude(self, ctx, parts: list, groups: dict, measured) -> None:
        """The pattern's rules over the groups the tasks could not decide (those of components
        with a boundary group) and what the tasks need for theirs: the numbering of the new
        groups, and the states of the local groups decided here. ``measured``: (sorted labels,
        hop diameters) of the groups :meth:`_to_measure` picked."""
        vids, smallest, is_local, partials = groups["final"], groups["smallest"], groups["is_local"], groups["final_partials"]
        k = len(vids)
        start = float(ctx.instance["start"])
        position = self._positions[ctx.instance["id"]]
        previous = before_labels = record = None
        p = q = weight = np.empty(0, np.int64)
        index = _Positions(vids)
        if position:
            sent = [part["before"] for part in parts if part["before"] is not None and len(part["before"]["label"])]
            record = _concat_records(([self._held] if self._held is not None else []) + sent)
            previous = _state_of(record)
            before_labels = record["label"] if record is not None else np.empty(0, np.int64)
            overlap = np.concatenate([part["pairs"] for part in parts]).astype(np.int64)
            if len(overlap) and k and len(before_labels):
                before_at = _Positions(before_labels).get_indexer(overlap[:, 0])
                now_at = index.get_indexer(overlap[:, 1])
                both = (before_at >= 0) & (now_at >= 0)
                key, pq = pd.factorize(before_at[both] * k + now_at[both])
                weight = np.bincount(key, weights=overlap[both, 2], minlength=len(pq)).astype(np.int64)
                p, q = pq // k, pq % k
        elsewhere = _field(parts, "fresh")
        counter = self.pattern.options.setdefault("_next_cluster_id", [0])
        numbered = {}

        def number(new):
            numbered["fresh"] = np.sort(np.concatenate([elsewhere, smallest[new]]))
            return counter[0] + np.searchsorted(numbered["fresh"], smallest[new])

        exact = partials["size"] - 1.0               # the measured groups' diameters, sizes - 1 for the rest
        if measured is not None and len(measured[0]):
            at = np.minimum(np.searchsorted(measured[0], vids), len(measured[0]) - 1)
            hit = measured[0][at] == vids
            exact[hit] = measured[1][at[hit]]

        def diameter(satisfied, limits):       # limits were applied where measured
            return _unless(exact, satisfied)

        ids, overlap_frame, table, event_size, first_reported = self.pattern.conclude(
            previous, start, partials, p, q, weight, k, Bindings(self.pattern.params), diameter=diameter,
            number=number)
        base, counter[0] = counter[0], counter[0] + len(numbered["fresh"])
        empty = np.empty(0, np.int64)
        after = ClusterState(None, empty, empty, empty, empty, table, overlap_frame, event_size, first_reported,
                             member_lists={})
        inside = self._in_frame(start)
        before = previous if self._inside else None
        changed, status, gone = self.pattern.changes(before, after) if inside else (empty, np.empty(0, object), empty)
        follow = self._follow(record, after, partials, start, exact)
        follow_inside = [in_frame(start) for _, in_frame in self.followers]
        news = _new_qualifying(follow, follow_inside, self._follow_inside)
        wanted = ids if ctx.globals["gather"] else np.concatenate([changed, *news])
        mine = _record_of(after, vids, follow)
        ctx.globals.update(fresh=numbered["fresh"], base=base, time=start, inside=inside, before_inside=self._inside,
                           follow_inside=follow_inside, follow_before_inside=self._follow_inside,
                           decided=_pick(mine, np.flatnonzero(is_local)[np.argsort(vids[is_local])]),
                           want_now=np.sort(vids[among(ids, wanted)]),
                           want_before=np.sort(before_labels[among(previous.table.ids, gone)])
                           if len(gone) else empty)
        if self.shared is not None:
            ctx.globals["reported_boundary"] = np.sort(vids[~is_local & table.reported])
        self._pending[ctx.instance["id"]] = (before, before_labels, after, ids, index, smallest, changed, status,
                                             gone, inside, follow, follow_inside, self._follow_inside)
        self._held = _pick(mine, np.flatnonzero(~is_local))
        self._state, self._inside, self._follow_inside = after, inside, follow_inside

    def _publish(self, ctx) -> None:
        """The instance's events: the driver's (members as the tasks reported them) and the
        tasks', in the order of the driver path (groups by smallest member, then ``disappeared``
        by cluster id)."""
        before, before_labels, after, ids, vids, smallest, changed, status, gone, inside, follow, follow_inside, \
            follow_before_inside = self._pending.pop(ctx.instance["id"])
        (now_labels, now_ids), (gone_labels, gone_ids) = _gathered(ctx.aggregated.pop("members", None) or [])
        after.member_lists = _lists(now_labels, now_ids, vids, ids)
        if before is not None and len(gone):
            before.member_lists = _lists(gone_labels, gone_ids, _Positions(before_labels), before.table.ids)
        events = []
        if inside:
            events = _in_driver_order(self.pattern.events(before, after, changed, status, gone), ids, smallest)
            events += ctx.aggregated.pop("events", None) or []
            events.sort(key=lambda e: (e[0], e[1]))
        if ctx.instance["id"] == self._last["id"] and self._keep_last:
            _spell_out(after, ids)
        self.results[ctx.instance["id"]] = (ctx.instance, None, inside, [e for _, _, e in events])
        evolved = self._evolved_events(follow, follow_inside, follow_before_inside)
        evolved += ctx.aggregated.pop("evolved", None) or []
        evolved.sort(key=lambda e: (e[0], e[1]))
        for i, results in enumerate(self.follower_results):
            results[ctx.instance["id"]] = (ctx.instance, None, follow_inside[i], [e for f, _, e in evolved if f == i])
        self._follow_states = [after_state for _, after_state in follow]
        for name in ("want_now", "want_before", "fresh", "decided", "reported_boundary"):
            ctx.globals.pop(name, None)

    def start(self, instances: list) -> dict:
        """The driver's bookkeeping for a run over ``instances`` (manifest entries in time order);
        returns each lane's first globals."""
        self._last, self._positions = instances[-1], {i["id"]: k for k, i in enumerate(instances)}
        self._concluded, self._pending, self._parked = set(), {}, {}
        self._follow_inside, self._follow_states = [False] * len(self.followers), []
        self.follower_results = [{} for _ in self.followers]
        return {"phase": "label", "gather": False}

    def finish(self, instances: list) -> list:
        """Per instance, (instance, ClusterState, in frame, events): the last instance's state
        holds its groups decided on the driver (every group where the frame goes live:
        ``keep_last``); the followers' results in ``followed``."""
        self.followed = [_with_last_state([results[i["id"]] for i in instances], state)
                         for results, state in zip(self.follower_results, self._follow_states)]
        return _with_last_state([self.results[i["id"]] for i in instances], self._state)


def _clean_diameters(whole: dict, lane: dict, pieces: np.ndarray, only=None, limits=()) -> np.ndarray:
    """Hop diameters of the partition's ``pieces`` (whole groups: no kept edge leaves them) over
    its kept edges, by the pattern's kernel (``only``/``limits`` as it takes them)."""
    rank = _rank(pieces, len(lane["labels"]))
    rows = whole["members"]
    rows = rows[rank[lane["piece"][rows]] >= 0]
    return diameters(whole["adjacency"], rows, rank[lane["piece"][rows]], len(pieces), only=only, limits=limits)


def _carried_at(values: np.ndarray, before_vids: np.ndarray, now_vids: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The previous instance's per-row ``values`` of the partition (a piece per row) at this
    instance's ``rows``, vertex by vertex, -1 for a vertex the previous instance lacked. A
    partition's rows are its template vertices (the same in every instance), then the vertices
    the instance adds there in vid order (:func:`gofs.bundle.instance_bundle`; ``*_vids``: those
    vids), so template rows carry over as they are and added ones are matched by vid; where
    both instances add the same vertices (none, commonly) the rows are the same."""
    if np.array_equal(before_vids, now_vids):
        return values[rows]
    template = len(values) - len(before_vids)
    out = np.full(len(rows), -1, values.dtype)
    added = rows >= template
    out[~added] = values[rows[~added]]
    if len(before_vids):
        vids = now_vids[rows[added] - template]
        at = np.minimum(np.searchsorted(before_vids, vids), len(before_vids) - 1)
        hit = before_vids[at] == vids
        out[np.flatnonzero(added)[hit]] = values[template + at[hit]]
    return out


def _ids_before(whole: dict, previous: dict) -> np.ndarray:
    """The original id of each row of the partition in the previous instance: the template's,
    then the vertices that instance added here (kept in its lane, see :func:`_carried_at`)."""
    (before_vids, before_ids), now_vids = previous["added"], whole["added"][0]
    if np.array_equal(before_vids, now_vids):
        return whole["ids"]
    head = whole["ids"][:len(whole["ids"]) - len(now_vids)]
    return np.concatenate([head, before_ids] if head.dtype == before_ids.dtype
                          else [head.astype(object), before_ids.astype(object)])


def _unless(exact: np.ndarray, satisfied: np.ndarray) -> np.ndarray:
    """Exact diameters as ``Cluster.conclude`` asks them: NaN for the groups of three or more that
    fail another condition (a follower needed every group's)."""
    return np.where((exact >= 2) & ~satisfied, np.nan, exact)


def _combined(parts: list, min_size: int) -> dict:
    """The partitions' summaries as the driver's groups: rows (``labels``, ``at`` their group),
    and the groups of ``min_size`` or more in the order of their smallest member (``kept``:
    which groups; ``final`` their labels, ``smallest``, ``is_local``, ``final_partials``)."""
    labels = _field(parts, "label")
    local = _field(parts, "local")
    names = parts[0]["partials"].keys()
    vids, partials, at = combine_partials(labels, {k: _field(parts, "partials", k) for k in names})
    smallest = _smallest(_field(parts, "smallest"), at, len(vids))
    is_local = np.zeros(len(vids), bool)
    is_local[at[local]] = True
    keep = np.flatnonzero(partials["size"] >= min_size)
    keep = keep[np.argsort(smallest[keep], kind="stable")]
    return {"labels": labels, "at": at, "kept": keep, "final": vids[keep], "smallest": smallest[keep],
            "is_local": is_local[keep], "final_partials": {k: v[keep] for k, v in partials.items()}}


def _send_groups(ctx, whole: dict, lane: dict, measure: dict) -> None:
    """The boundary step of diameter: send the members and kept edges (local, and remote ones
    out of them) of this partition's pieces of the ``measure`` groups, as vertex ids, to the
    sub-graph that measures each group; one payload per target. Only tasks see them."""
    wanted, targets = measure["label"], measure["target"]
    labels, piece, vids = lane["labels"], lane["piece"], whole["vertex_ids"]
    at = np.minimum(np.searchsorted(wanted, labels), max(len(wanted) - 1, 0))
    target = np.where(wanted[at] == labels, targets[at], -1) if len(wanted) else np.full(len(labels), -1)
    target = np.r_[target, -1]                            # piece -1 (no piece) reads the last: none
    rows = whole["members"]
    rows = rows[target[piece[rows]] >= 0]
    kept_src, kept_dst = whole["kept"]
    inner = target[piece[kept_src]] >= 0
    out = np.flatnonzero(whole["usable"])
    out = out[target[piece[whole["remote_src"][out]]] >= 0]
    src = np.concatenate([vids[kept_src[inner]], vids[whole["remote_src"][out]]])
    dst = np.concatenate([vids[kept_dst[inner]], whole["remote_dst"][out]])
    edge_target = np.concatenate([target[piece[kept_src[inner]]], target[piece[whole["remote_src"][out]]]])
    member_target = target[piece[rows]]
    chosen = np.unique(member_target)
    ctx.send_to_subgraphs(chosen, [(labels[piece[rows[member_target == t]]], vids[rows[member_target == t]],
                                    src[edge_target == t], dst[edge_target == t]) for t in chosen.tolist()])


def _gathered_diameters(payloads: list, limits: list):
    """(group labels, hop diameters) of the groups whose pieces arrived here (:func:`_send_groups`),
    by the pattern's own kernel (:func:`hatrick.cgql.patterns.diameters`) over their kept edges;
    an edge to a vertex that is no member of the same group is none of its edges."""
    if not payloads:
        return np.empty(0, np.int64), np.empty(0)
    labels = np.concatenate([p[0] for p in payloads]).astype(np.int64)
    vids = np.concatenate([p[1] for p in payloads]).astype(np.int64)
    src = np.concatenate([p[2] for p in payloads]).astype(np.int64)
    dst = np.concatenate([p[3] for p in payloads]).astype(np.int64)
    order = np.argsort(vids)
    vids, labels = vids[order], labels[order]
    distinct, group = np.unique(labels, return_inverse=True)
    a = np.minimum(np.searchsorted(vids, src), len(vids) - 1)
    b = np.minimum(np.searchsorted(vids, dst), len(vids) - 1)
    edge = (vids[a] == src) & (vids[b] == dst) & (labels[a] == labels[b])
    a, b, m = a[edge], b[edge], len(vids)
    adjacency = csr_matrix((np.ones(2 * len(a), bool), (np.r_[a, b], np.r_[b, a])), shape=(m, m))
    return distinct, diameters(adjacency, np.arange(m), group.reshape(-1), len(distinct), limits=limits)


def _in_driver_order(events: list, ids: np.ndarray, smallest: np.ndarray) -> list:
    """Events as (0, smallest member id, event) and, for ``disappeared``, (1, cluster id, event):
    sorted by these keys they come in the driver path's order. ``ids`` and ``smallest``: every
    group's; only the events' are looked up (a partition has 18k groups and tens of events at 1M)."""
    hit = among(ids, np.fromiter((e["cluster"] for e in events if e["status"] != "disappeared"), np.int64))
    position = dict(zip(ids[hit].tolist(), smallest[hit].tolist()))
    return [(1, e["cluster"], e) if e["status"] == "disappeared" else (0, position[e["cluster"]], e) for e in events]


def _rank(chosen: np.ndarray, size: int) -> np.ndarray:
    """Each of ``size`` items' position among ``chosen`` (-1 elsewhere)."""
    out = np.full(size, -1, np.int64)
    out[chosen] = np.arange(len(chosen))
    return out


# A group's state between instances, as arrays: label, cid (-1: no group), reported,
# event_size and first_reported (NaN: none), values ({table column: values}, size first).
def _record_of(state: ClusterState, labels: np.ndarray | None = None, follow: list = ()) -> dict:
    """A :class:`ClusterState`'s groups as a record (``labels``: theirs, in table order), with
    each follower's first satisfied times and qualifying flags (``follow``: (before, after) states)."""
    table = state.table
    cid = table.ids
    out = {"label": cid if labels is None else labels, "cid": cid, "reported": table.reported,
           "event_size": values_at(state.event_size, cid), "first_reported": values_at(state.first_reported, cid),
           "values": dict(table.values)}
    for i, (_, after) in enumerate(follow):
        out[f"first_satisfied{i}"] = values_at(after.first_satisfied, cid)
        out[f"qualifying{i}"] = among(cid, after.qualifying)
    return out


def _state_of(record: dict | None) -> ClusterState | None:
    """The record's groups as the previous :class:`ClusterState` the pattern's rules read."""
    if record is None:
        return None
    cid = record["cid"]
    table = GroupTable(cid, record["values"], record["reported"])
    empty = np.empty(0, np.int64)
    return ClusterState(None, empty, empty, empty, empty, table, None, _as_dict(cid, record["event_size"]),
                        _as_dict(cid, record["first_reported"]), member_lists={})


def _as_dict(cid: np.ndarray, values: np.ndarray) -> dict:
    have = ~np.isnan(values)
    return dict(zip(cid[have].tolist(), values[have].tolist()))


def _pick(record: dict | None, at: np.ndarray) -> dict | None:
    if record is None:
        return None
    return {k: ({c: v[at] for c, v in value.items()} if isinstance(value, dict) else value[at])
            for k, value in record.items()}


def _put(record: dict, at: np.ndarray, values: dict) -> None:
    for k, value in values.items():
        if k == "values":
            for c, v in value.items():
                record["values"][c][at] = v
        elif k != "label":
            record[k][at] = value


def _empty_record(labels: np.ndarray, table: GroupTable, followers: int) -> dict:
    """A partition's record of its pieces (``labels``), none a group yet (columns as ``table``'s)."""
    count = len(labels)
    out = {"label": labels, "cid": np.full(count, -1, np.int64), "reported": np.zeros(count, bool),
           "event_size": np.full(count, np.nan), "first_reported": np.full(count, np.nan),
           "values": {c: np.zeros(count, v.dtype) for c, v in table.values.items()}}
    for i in range(followers):
        out[f"first_satisfied{i}"], out[f"qualifying{i}"] = np.full(count, np.nan), np.zeros(count, bool)
    return out


def _new_qualifying(follow: list, inside: list, before_inside: list) -> list:
    """Per follower in frame, the ids that start qualifying (their members are wanted)."""
    return [np.setdiff1d(after.qualifying, before.qualifying if before_inside[i] else np.empty(0, np.int64))
            for i, (before, after) in enumerate(follow) if inside[i]]


def _concat_records(records: list) -> dict | None:
    records = [r for r in records if r is not None]
    if not records:
        return None
    out = {k: np.concatenate([r[k] for r in records]) for k in records[0] if k != "values"}
    out["values"] = {c: np.concatenate([r["values"][c] for r in records]) for c in records[0]["values"]}
    return out


def _field(parts: list, name: str, key=None) -> np.ndarray:
    """One field of the partitions' summaries, joined at full width (empty parts skipped:
    their dtype says nothing)."""
    arrays = [part[name] if key is None else part[name][key] for part in parts]
    full = [a for a in arrays if len(a)]
    return _joined(full, arrays[0][:0] if arrays else np.empty(0, np.int64))


def _piece_members(ids: np.ndarray, piece: np.ndarray, pieces: np.ndarray, cluster_ids: np.ndarray) -> dict:
    """{cluster id: sorted member ids} of the partition's ``pieces`` (one cluster id each): one
    sort of their members' rows."""
    if not len(pieces):
        return {}
    chosen = np.zeros(int(piece.max()) + 2, bool)       # piece -1 (no piece) reads the last: False
    chosen[pieces] = True
    rows = np.flatnonzero(chosen[piece])
    order = np.lexsort((ids[rows], piece[rows]))
    at, members = piece[rows][order], ids[rows][order].tolist()
    starts = np.flatnonzero(np.r_[True, at[1:] != at[:-1]])
    cid = np.empty(len(chosen), np.int64)
    cid[pieces] = cluster_ids
    bounds = np.r_[starts, len(at)].tolist()
    return {c: members[a:b] for c, a, b in zip(cid[at[starts]].tolist(), bounds[:-1], bounds[1:])}



class _Pieces:
    """A partition's pieces as :func:`algorithms.components.propagate_labels` reads a sub-graph:
    ``state`` (the lane: a label per piece) and the remote edges (rows of the partition)."""

    def __init__(self, lane: dict, whole: dict):
        self.state = lane
        self.remote_edges = _RemoteRows(whole["remote_src"], whole["remote_dst"])


class _RemoteRows:
    def __init__(self, src: np.ndarray, dst: np.ndarray):
        self.src, self.dst = src, dst


class ReachProgram(PatternProgram):
    """One Reach sub-query over a sequence of instances: per instance, the sources are numbered
    (``select``), every vertex gathers the set of sources that reach it as a bit set, spread
    inside a partition by :func:`hatrick.reachability.spread_bits` (the live path's kernel) and
    across partitions over the kept remote edges (``spread``), and the sinks report their
    (source, sink) pairs with the endpoints' attributes (``summary``). Only the pairs reach the
    driver."""

    partition_messages = True
    aggregators = {"changed": "sum", "sources": _CONCAT, "pairs": _CONCAT}

    def __init__(self, pattern: Reach, store, in_frame, records: list):
        self.pattern = pattern
        self.sources, self.sinks = pattern._vertex_condition_groups()
        override = pattern.options.get("directed")
        self.directed = bool(store.directed if override is None else override)
        self.records = [a for a in records if a != "id"]
        self._declare(store, {c.attribute for c in self.sources + self.sinks} | set(self.records), pattern.clause.edge)
        self._in_frame = in_frame
        self._pass_key = _pass_key(pattern, self.directed, tuple(self.records))
        self.results: list = []
        self._state, self._inside = None, False

    # task side ----------------------------------------------------------------------------
    def compute_partition(self, subgraphs, ctx):
        """Every superstep, once per partition (bit sets that arrived included:
        ``partition_messages``): numbering the sources (superstep 0), the first spread (1), the
        later spreads and reporting the pairs (summary). The partition's bit sets live in its
        first sub-graph's state; that sub-graph stays awake so that the phases run, the others sleep."""
        if not subgraphs:
            return False
        votes = np.ones(len(subgraphs), bool)
        votes[0] = False
        keeper = subgraphs[0]
        whole = self._pass(keeper)
        if ctx.superstep == 0:
            source = whole["is_source"]
            ctx.aggregate("sources", [(whole["vertex_ids"][source], whole["records"]["id"][source],
                                       {a: v[source] for a, v in whole["records"].items()})])
        elif ctx.superstep == 1:
            keeper.state["bits"] = bits = self._sources_bits(whole, ctx.globals["sources"])
            ctx.aggregate("changed", _spread(ctx, whole, bits, np.flatnonzero(whole["is_source"])))
        elif ctx.globals["phase"] != "summary":
            bits = keeper.state["bits"]
            ctx.aggregate("changed", _spread(ctx, whole, bits, _receive(whole, bits, ctx.partition_messages())))
        else:
            ctx.aggregate("pairs", [self._pairs(keeper.state["bits"], whole, ctx.globals["sources"])])
        return votes

    def _partition(self, whole, b: Bindings) -> dict:
        """The kept local edges as one CSR over the partition, the kept remote rows, the sources,
        the sinks and the attribute rows events carry: one pass for all the partition's sub-graphs."""
        src, dst = whole.edge_src, whole.edge_dst
        remote = whole.remote_edges
        frame, local, usable = self._rows(whole, np.ones(len(src), bool), remote.outgoing(self.directed))
        indices, indptr = _adjacency(src[local], dst[local], whole.num_vertices, not self.directed)
        return {"indptr": indptr, "indices": indices,
                "usable": usable, "is_source": vertex_conditions_mask(frame, self.sources, b),
                "is_sink": vertex_conditions_mask(frame, self.sinks, b),
                "records": {"id": whole.ids, **{a: frame[a].to_numpy() for a in self.records}},
                "vertex_ids": whole.vertex_ids, "remote_src": remote.src, "remote_dst": remote.dst,
                "remote_dst_subgraph": remote.dst_subgraph}

    @staticmethod
    def _sources_bits(whole: dict, numbered: np.ndarray) -> np.ndarray:
        """The partition's bit sets at superstep 1: each source has its own bit."""
        local = np.flatnonzero(whole["is_source"])
        return source_bits(len(whole["is_source"]), local, np.searchsorted(numbered, whole["vertex_ids"][local]),
                           len(numbered))

    @staticmethod
    def _pairs(bits: np.ndarray, whole: dict, numbered: np.ndarray):
        """(source vid, sink id) pairs at the partition's sinks, and the sinks' attribute rows."""
        sinks = np.flatnonzero(whole["is_sink"] & bits.any(axis=1))
        row, bit = set_bits(bits[sinks])
        records = {a: v[sinks] for a, v in whole["records"].items()}
        return numbered[bit], records["id"][row], records

    # driver side ----------------------------------------------------------------------------
    def master(self, ctx):
        """Per lane: number the sources, spread until nothing changes, report the pairs; the
        instances' states are compared in time order as they become available."""
        key = ctx.instance["id"]
        if ctx.superstep == 0:
            parts = ctx.aggregated.pop("sources")    # popped: the next plan would carry it to the tasks
            vids = np.concatenate([p[0] for p in parts]) if parts else np.empty(0, np.int64)
            order = np.argsort(vids)
            ctx.globals["sources"] = vids[order]
            self._sources[key] = ((np.concatenate([p[1] for p in parts]) if parts else np.empty(0))[order],
                                  [p[2] for p in parts])
            ctx.globals["phase"] = "spread"
        elif ctx.globals["phase"] == "spread" and not ctx.aggregated["changed"]:
            ctx.globals["phase"] = "summary"
        elif ctx.globals["phase"] == "summary":
            self._reached[key] = self._reach_state(ctx, *self._sources.pop(key))
            ctx.globals.pop("sources")
            ctx.halt()
            self._compare_in_order()

    def _reach_state(self, ctx, source_ids: np.ndarray, source_rows: list) -> ReachState:
        """The lane's instance as a :class:`ReachState` from its reported pairs."""
        parts = ctx.aggregated.pop("pairs")
        source_vids = np.concatenate([p[0] for p in parts]) if parts else np.empty(0, np.int64)
        sink_ids = np.concatenate([p[1] for p in parts]) if parts else np.empty(0, np.int64)
        numbered = ctx.globals["sources"]
        source_ids = source_ids[np.searchsorted(numbered, source_vids)] if len(source_vids) else sink_ids[:0]
        keep = source_ids != sink_ids
        pairs = pd.MultiIndex.from_arrays([source_ids[keep], sink_ids[keep]], names=["source", "sink"])
        return ReachState(pairs, _records(_attribute_table(source_rows + [p[2] for p in parts])))

    def _compare_in_order(self) -> None:
        """The pattern's diff for every instance whose predecessor's state is known, in time
        order; a state is dropped once its successor has been compared with it."""
        while len(self.results) < len(self._instances) and self._instances[len(self.results)]["id"] in self._reached:
            instance = self._instances[len(self.results)]
            after = self._reached.pop(instance["id"])
            inside = self._in_frame(float(instance["start"]))
            events = self.pattern.diff(self._state if self._inside else None, after) if inside else []
            self.results.append((instance, None, inside, events))     # states: only the last is kept
            self._state, self._inside = after, inside

    def start(self, instances: list) -> dict:
        """The driver's bookkeeping for a run over ``instances``; returns each lane's first globals."""
        self._instances, self._sources, self._reached = instances, {}, {}
        return {"phase": "spread"}

    def finish(self, instances: list) -> list:
        """Per instance, (instance, ReachState, in frame, events)."""
        return _with_last_state(self.results, self._state)


def _adjacency(src: np.ndarray, dst: np.ndarray, size: int, symmetric: bool) -> tuple:
    """(indices, indptr) of the CSR of edges ``src`` -> ``dst`` (and back when ``symmetric``)
    over ``size`` vertices, in linear time: a partition's local edges come sorted by source, and
    the way back is scipy's transpose, so no sort is needed (duplicates are kept)."""
    indptr = np.zeros(size + 1, np.int64)
    np.cumsum(np.bincount(src, minlength=size), out=indptr[1:])
    indices = dst.astype(np.int64)
    if not symmetric:
        return indices, indptr
    back = csr_matrix((np.ones(len(src), bool), indices, indptr), shape=(size, size)).T.tocsr()
    ahead, behind = np.diff(indptr), np.diff(back.indptr)
    merged = indptr + back.indptr                                 # each row: its edges out, then in
    out = np.empty(len(indices) + len(back.indices), np.int64)
    out[np.repeat(merged[:-1] - indptr[:-1], ahead) + np.arange(len(indices))] = indices
    out[np.repeat(merged[:-1] + ahead - back.indptr[:-1], behind) + np.arange(len(back.indices))] = back.indices
    return out, merged


def _receive(whole: dict, bits: np.ndarray, messages) -> np.ndarray:
    """OR the bit sets that arrived into the partition's rows; the rows that gained a source
    (vids grow with the row within a partition, so a sorted search finds the rows)."""
    if not messages.payloads:
        return np.empty(0, np.int64)
    vids = np.concatenate([p[0] for p in messages.payloads])
    rows = np.concatenate([p[1] for p in messages.payloads])
    local = np.searchsorted(whole["vertex_ids"], vids)
    before = bits[local].copy()
    np.bitwise_or.at(bits, local, rows)
    return np.unique(local[(bits[local] != before).any(axis=1)])


def _spread(ctx, whole: dict, bits: np.ndarray, start: np.ndarray) -> int:
    """Close the partition's ``bits`` over its CSR of kept local edges from the rows ``start``,
    then send every gain over the kept remote edges, one payload per neighbouring sub-graph."""
    if not len(start):
        return 0
    src, dst, dst_subgraph = whole["remote_src"], whole["remote_dst"], whole["remote_dst_subgraph"]
    gained = spread_bits(whole["indptr"], whole["indices"], bits, start.astype(np.int64))
    usable = np.flatnonzero(whole["usable"])
    rows = usable[gained[src[usable]]]
    if len(rows):
        targets = dst_subgraph[rows]
        order = np.argsort(targets, kind="stable")
        rows, targets = rows[order], targets[order]
        cut = np.flatnonzero(np.r_[True, targets[1:] != targets[:-1]])
        groups = np.split(rows, cut[1:])
        ctx.send_to_subgraphs(targets[cut], [(dst[g], bits[src[g]]) for g in groups])
    return int(gained.sum())


class StagedProgram(TimeSeriesProgram):
    """Pattern programs one after another in every lane (instance) of one run: where a sub-query
    has an ``alias.*`` wildcard, it needs, per instance, the members of the groups its alias's
    Cluster reports in that instance, which that Cluster's program leaves on the tasks
    (:meth:`ClusterProgram._share_members`). So the Cluster runs first in the lane, and when its
    ``master`` halts the lane goes on with the next program from its superstep 0, whose
    partition pass reads the alias as :class:`hatrick.cgql.views.ReportedMembers`.

    Each stage sees its own superstep count, globals, aggregators and sub-graph state (the
    ``k``-th entry of the real state; :meth:`gopher.worker.TimeSeriesContext.state_before`
    gives the previous instance's entry), as if it ran alone; the stages' programs keep
    their own driver-side bookkeeping. Lanes of different instances may be in different stages."""

    text_as_categorical = True
    partition_messages = True

    def __init__(self, stages: list):
        self.stages = list(stages)
        vertex_messages = {(p.message_dtype, p.combiner) for p in self.stages if isinstance(p, ClusterProgram)}
        (self.message_dtype, self.combiner), = vertex_messages or {("int64", None)}
        self.aggregators = {f"{k}:{name}": spec for k, p in enumerate(self.stages) for name, spec in p.aggregators.items()}
        for name in ("vertex_attributes", "instance_vertex_attributes", "edge_attributes", "instance_edge_attributes"):
            setattr(self, name, tuple(sorted(set().union(*(getattr(p, name) for p in self.stages)))))
        # what a stage's alias left decides its pass: keyed by the aliases' keys too
        by_alias = {p.pattern.clause.alias: p for p in self.stages if p.pattern.clause.alias}
        for p in self.stages:
            used = sorted(p.pattern.aliases())
            p._pass_key = (*p._pass_key, tuple(by_alias[a]._pass_key for a in used))

    # task side ----------------------------------------------------------------------------
    def compute_partition(self, subgraphs, ctx):
        if not subgraphs:
            return False
        k, superstep = ctx.globals["stage"], ctx.superstep - ctx.globals["offset"]
        real = subgraphs[0]
        if superstep == 0 and k:
            aliases = real.state.setdefault("aliases", {})
            before = self.stages[k - 1]
            if isinstance(before, ClusterProgram) and before.shared is not None:
                aliases[before.pattern.clause.alias] = before.reported_members(real.state[k - 1],
                                                                               ctx.partition_messages().payloads)
        state = real.state.setdefault(k, {})
        state["aliases"] = real.state.get("aliases")
        stage_globals = _unprefixed(ctx.globals, k)
        return self.stages[k].compute_partition(_StageSubgraphs(subgraphs, _StageSubgraph(real, state)),
                                                _StageContext(ctx, k, superstep, stage_globals))

    # driver side ----------------------------------------------------------------------------
    def master(self, ctx):
        """The lane's stage's ``master``; when it halts, the next stage starts (the lane ends
        after the last)."""
        k = ctx.globals["stage"]
        prefix = f"{k}:"
        aggregated = {name[len(prefix):]: ctx.aggregated.pop(name) for name in list(ctx.aggregated)
                      if name.startswith(prefix)}
        stage_globals = _unprefixed(ctx.globals, k)
        stage = MasterContext(ctx.superstep - ctx.globals["offset"], aggregated, stage_globals, ctx.metrics,
                              ctx.instance)
        self.stages[k].master(stage)
        ctx.aggregated.update({prefix + name: value for name, value in aggregated.items()})
        for name in [name for name in ctx.globals if name.startswith(prefix)]:
            del ctx.globals[name]
        if not stage.halted:
            ctx.globals.update({prefix + name: value for name, value in stage_globals.items()})
        elif k + 1 < len(self.stages):
            ctx.globals.update(stage=k + 1, offset=ctx.superstep + 1)
        else:
            ctx.halt()

    def run(self, store, instances: list, **engine_options) -> list:
        """Every stage over ``instances`` in one run; returns each stage's per-instance results
        (:meth:`PatternProgram.run`)."""
        globals_ = {"stage": 0, "offset": 0}
        for k, p in enumerate(self.stages):
            globals_.update({f"{k}:{name}": value for name, value in p.start(instances).items()})
        self.metrics = run_independent(store, self, instances=[i["id"] for i in instances], globals_=globals_,
                                       **engine_options).metrics
        for p in self.stages:
            p.metrics = self.metrics
        return [p.finish(instances) for p in self.stages]


def _unprefixed(globals_: dict, k: int) -> dict:
    """Stage ``k``'s globals (kept as ``"k:name"`` in the lane's: a lane's first globals are
    copied flat, so a nested dict would be shared by the lanes)."""
    prefix = f"{k}:"
    return {name[len(prefix):]: value for name, value in globals_.items() if name.startswith(prefix)}


class _StageSubgraph:
    """A stage's view of the partition's first sub-graph (the one the pattern programs keep
    their partition's state in): its own ``state``, everything else the sub-graph's."""

    def __init__(self, real, state: dict):
        self._real, self.state = real, state

    def __getattr__(self, name):
        return getattr(self._real, name)


class _StageSubgraphs:
    """A partition's active sub-graphs as a stage sees them (the first through :class:`_StageSubgraph`)."""

    def __init__(self, subgraphs, first: _StageSubgraph):
        self._subgraphs, self._first = subgraphs, first

    def __len__(self) -> int:
        return len(self._subgraphs)

    def __getitem__(self, i):
        return self._first if i == 0 else self._subgraphs[i]


class _StageContext:
    """A stage's compute context: its superstep count, globals and aggregators (prefixed with
    its number in the run's), its entry of the previous instance's state; the rest the task's."""

    def __init__(self, real, k: int, superstep: int, globals_: dict):
        self._real, self._k, self.superstep, self.globals = real, k, superstep, globals_

    def __getattr__(self, name):
        return getattr(self._real, name)

    def aggregate(self, name: str, value) -> None:
        self._real.aggregate(f"{self._k}:{name}", value)

    def state_before(self, subgraph) -> dict | None:
        before = self._real.state_before(subgraph._real)
        return None if before is None else before.get(self._k)


def wildcard_attributes(subqueries: list) -> dict:
    """{alias: the attributes ``alias.*`` wildcards compare} over the sub-queries."""
    out: dict = {}
    for sq in subqueries:
        for c in (c for group in sq.pattern._vertex_condition_groups() for c in group):
            if isinstance(c.value, n.Wildcard):
                out.setdefault(c.value.alias, set()).add(c.attribute)
    return out


def run_past(store, subqueries: list, instances: list, keep_last: bool, records: list, **engine_options):
    """The sub-queries' past over ``instances`` on Gopher, one run per Reach or Cluster (an Evolved
    sub-query follows its alias's Cluster run), except that the sub-queries an ``alias.*``
    wildcard ties together run as the stages of one run (:class:`StagedProgram`), in the plan's
    dependency order: ({name: [(instance, state, in frame, events)]}, {name: the run's metrics})."""
    for sq in subqueries:
        if not isinstance(sq.pattern, (Reach, Cluster, Evolved)):
            raise located(sq.clause.pattern, f"pattern {sq.clause.pattern.name} has no Gopher program: its past "
                                              "frames cannot run over a stored graph")
    followers: dict = {}
    for sq in subqueries:
        if isinstance(sq.pattern, Evolved):
            followers.setdefault(sq.pattern.alias, []).append(sq)
    shared = wildcard_attributes(subqueries)
    programs = {}
    for sq in subqueries:
        if isinstance(sq.pattern, Evolved):
            continue
        follow = followers.get(sq.clause.alias, []) if sq.clause.alias else []
        if isinstance(sq.pattern, Reach):
            programs[sq.name] = ReachProgram(sq.pattern, store, sq.in_frame, records)
        else:
            programs[sq.name] = ClusterProgram(sq.pattern, store, sq.in_frame, keep_last,
                                               [(f.pattern, f.in_frame) for f in follow], shared.get(sq.clause.alias))
    tied = [name for name, sq in ((sq.name, sq) for sq in subqueries) if name in programs
            and (sq.clause.alias in shared or sq.pattern.aliases())]
    runs, metrics = {}, {}
    if tied:
        staged = StagedProgram([programs[name] for name in tied])
        runs.update(zip(tied, staged.run(store, instances, **engine_options)))
    for name, program in programs.items():
        if name not in runs:
            runs[name] = program.run(store, instances, **engine_options)
        metrics[name] = program.metrics
        for f, followed in zip(followers.get(program.pattern.clause.alias, []) if program.pattern.clause.alias else [],
                               getattr(program, "followed", [])):
            runs[f.name], metrics[f.name] = followed, program.metrics
    return runs, metrics


def _attribute_table(parts: list) -> pd.DataFrame:
    """One attribute row per vertex id from the sub-graphs' {column: values} parts."""
    parts = [p for p in parts if len(p["id"])]
    if not parts:
        return pd.DataFrame()
    frame = pd.DataFrame({a: np.concatenate([p[a] for p in parts]) for a in parts[0]})
    return frame.drop_duplicates("id").set_index("id")


def _records(rows: pd.DataFrame):
    """``records(ids)`` of a ReachState from an attribute table indexed by vertex id."""
    def records(ids):
        at = rows.reindex(np.asarray(ids))
        columns = list(at.columns)
        values = [at[c].to_numpy().tolist() for c in columns]
        return [{c: _plain(v) for c, v in zip(columns, row)} for row in zip(*values)]
    return records


def _with_last_state(results: list, state) -> list:
    """Per-instance results with the last instance's state (the one the live part or a caller
    reads); earlier states are dropped as the run goes, so the driver holds one at a time."""
    if results:
        instance, _, inside, events = results[-1]
        results[-1] = (instance, state, inside, events)
    return results


def _pass_key(pattern, *settings) -> tuple:
    """What a partition pass depends on besides the partition, instance and program class: the
    clause, the parameters and the program's settings."""
    return (repr(pattern.clause), repr(sorted(pattern.params.items())), settings)


def _narrow(values: np.ndarray) -> np.ndarray:
    """``values`` as int32 where they are int64 that fit (half the bytes to ship and unpickle)."""
    if values.dtype == np.int64 and values.size and -2**31 <= values.min() and values.max() < 2**31:
        return values.astype(np.int32)
    return values.copy() if values.dtype == np.int64 else values


def _joined(arrays: list, empty: np.ndarray) -> np.ndarray:
    """Arrays that travelled :func:`_narrow`-ed, joined at their full width (``empty`` for none)."""
    if not arrays:
        return empty
    return np.concatenate(arrays, dtype=np.int64 if arrays[0].dtype.kind in "iu" else None)


def _smallest(ids: np.ndarray, piece: np.ndarray, count: int) -> np.ndarray:
    """The smallest of ``ids`` in each of ``count`` pieces (every piece has one)."""
    if ids.dtype.kind not in "iu":
        return pd.Series(ids).groupby(piece).min().to_numpy()
    out = np.full(count, np.iinfo(np.int64).max, np.int64)
    np.minimum.at(out, piece, ids)
    return out


@njit(cache=True, nogil=True)
def smallest_in_pieces(ids, piece, count):
    """The smallest of ``ids`` per ``piece`` (0..count-1) in one pass, on the tasks (``np.minimum.at``
    took 16 ms per partition and instance at 1M; the driver keeps to :func:`_smallest` over its
    few groups: loading a kernel costs a process 24 MB)."""
    out = np.full(count, np.iinfo(np.int64).max, np.int64)
    for i in range(len(ids)):
        if ids[i] < out[piece[i]]:
            out[piece[i]] = ids[i]
    return out


@njit(cache=True, nogil=True)
def kept_adjacency(src, dst, kept, members, size):
    """(indptr, indices) of the CSR of the local edges ``src`` -> ``dst`` that the WHERE clause
    keeps (``kept``) between two members, in their order, and the mask of the vertices they
    touch: the kept edges listed in one pass without a branch (half the edges are kept, at
    random: a branch would mispredict), then counted and placed."""
    chosen = np.empty(len(src), np.int64)
    m = 0
    for e in range(len(src)):
        chosen[m] = e
        m += kept[e] & members[src[e]] & members[dst[e]]
    indptr = np.zeros(size + 1, np.int64)
    touched = np.zeros(size, np.bool_)
    for i in range(m):
        e = chosen[i]
        indptr[src[e] + 1] += 1
        touched[src[e]] = True
        touched[dst[e]] = True
    for v in range(size):
        indptr[v + 1] += indptr[v]
    indices = np.empty(m, np.int64)
    fill = indptr[:-1].copy()
    for i in range(m):
        e = chosen[i]
        indices[fill[src[e]]] = dst[e]
        fill[src[e]] += 1
    return indptr, indices, touched


@njit(cache=True, nogil=True)
def first_row_numbering(piece, touched, count):
    """The touched rows' pieces (``piece``: 0..count-1 per row) renumbered in the order of their
    first touched row, -1 for a row not touched, and each renumbered piece's first row: so
    each sub-graph's pieces are consecutive and a piece's first row is its smallest vertex."""
    renumbered = np.full(count, -1, np.int64)
    out = np.full(len(piece), -1, np.int64)
    starts = np.empty(count, np.int64)
    n = 0
    for v in range(len(piece)):
        if touched[v]:
            p = piece[v]
            if renumbered[p] < 0:
                renumbered[p] = n
                starts[n] = v
                n += 1
            out[v] = renumbered[p]
    return out, starts[:n]


@njit(cache=True, nogil=True)
def overlap_counts(before, now, before_count, count):
    """(previous piece, piece, rows shared) for every pair of pieces that share a row, ordered
    by previous piece, then piece (``before``: -1 where a row was in none); one counting sort
    of the rows by previous piece, in place of a sparse matrix's build, sort and summing."""
    start = np.zeros(before_count + 1, np.int64)
    for i in range(len(before)):
        if before[i] >= 0:
            start[before[i] + 1] += 1
    for b in range(before_count):
        start[b + 1] += start[b]
    order = np.empty(start[before_count], np.int64)
    fill = start[:-1].copy()
    for i in range(len(before)):
        if before[i] >= 0:
            order[fill[before[i]]] = i
            fill[before[i]] += 1
    slot = np.full(count, -1, np.int64)        # where a piece's pair with the current previous piece is
    row, col, shared = np.empty(len(order), np.int64), np.empty(len(order), np.int64), np.empty(len(order), np.int64)
    m = 0
    for b in range(before_count):
        first = m
        for j in range(start[b], start[b + 1]):
            c = now[order[j]]
            if slot[c] < first:
                slot[c] = m
                row[m], col[m], shared[m] = b, c, 1
                m += 1
            else:
                shared[slot[c]] += 1
        for x in range(first + 1, m):          # a previous piece meets a few pieces: insertion sort
            c, w = col[x], shared[x]
            y = x - 1
            while y >= first and col[y] > c:
                col[y + 1], shared[y + 1] = col[y], shared[y]
                y -= 1
            col[y + 1], shared[y + 1] = c, w
    return row[:m], col[:m], shared[:m]


def _joinable(local, remote):
    """An edge attribute's local values followed by its remote ones, where both are of one kind
    (numpy arrays of one dtype, or Categoricals over the same values: then by their codes),
    so the WHERE condition is decided in one pass; None otherwise."""
    if isinstance(local, pd.Categorical) and isinstance(remote, pd.Categorical) and local.dtype == remote.dtype:
        return pd.Categorical.from_codes(np.concatenate([local.codes, remote.codes]), dtype=local.dtype)
    if isinstance(local, np.ndarray) and isinstance(remote, np.ndarray) and local.dtype == remote.dtype:
        return np.concatenate([local, remote])
    return None


def _label_column(store, edge) -> set:
    if edge is None or not edge.labels:
        return set()
    known = set(store.edge_attributes) | set(store.instance_edge_attributes)
    return {next((c for c in ("type", "label") if c in known), "type")}


def _gathered(parts: list):
    """The (label, id) pairs of every sub-graph, now and before, concatenated."""
    out = []
    for side in (0, 1):
        labels = [p[side][0] for p in parts]
        ids = [p[side][1] for p in parts]
        out.append((np.concatenate(labels) if labels else np.empty(0, np.int64),
                    np.concatenate(ids) if ids else np.empty(0, np.int64)))
    return out


class _Positions:
    """An instance's group labels (vertex ids, non-negative) and the position of a label among
    them (``get_indexer`` as ``pandas.Index`` has it: -1 for a label not there). Template ids are
    dense: one table over the label range is cheaper than hashing 142k labels per instance at 1M.
    Ids an instance adds lie ``p * 2**32`` past the template's, so where the range is far wider
    than the labels the position is found by search in the sorted labels instead."""

    DENSE_SLACK = 1024

    def __init__(self, labels: np.ndarray):
        self.labels = labels
        top = int(labels.max()) + 1 if len(labels) else 0
        if top <= 4 * len(labels) + self.DENSE_SLACK:
            self._table = np.full(top, -1, np.int32)
            self._table[labels] = np.arange(len(labels), dtype=np.int32)
        else:
            self._table = None
            self._order = np.argsort(labels, kind="stable")
            self._sorted = labels[self._order]

    def get_indexer(self, values) -> np.ndarray:
        values = np.asarray(values, np.int64)
        out = np.full(len(values), -1, np.int64)
        if self._table is not None:
            inside = (values >= 0) & (values < len(self._table))
            out[inside] = self._table[values[inside]]
            return out
        at = np.minimum(np.searchsorted(self._sorted, values), len(self._sorted) - 1)
        found = self._sorted[at] == values
        out[found] = self._order[at[found]]
        return out

    def to_numpy(self) -> np.ndarray:
        return self.labels


def _lists(labels, member_ids, vids: _Positions, cluster_ids) -> dict:
    """{cluster id: sorted member ids} from (group label, member id) pairs: one sort by id,
    then a stable one by cluster (ids may be text)."""
    cluster = np.asarray(cluster_ids)[vids.get_indexer(labels)]
    member_ids = np.asarray(member_ids)
    order = np.argsort(member_ids, kind="stable")
    order = order[np.argsort(cluster[order], kind="stable")]
    cluster, members = cluster[order], member_ids[order].tolist()
    starts = np.flatnonzero(np.r_[True, cluster[1:] != cluster[:-1]]) if len(cluster) else np.empty(0, np.int64)
    bounds = np.r_[starts, len(cluster)].tolist()
    return {c: members[a:b] for c, a, b in zip(cluster[starts].tolist(), bounds[:-1], bounds[1:])}


def _spell_out(state: ClusterState, ids: np.ndarray) -> None:
    """Give the last past state the per-member arrays the live evaluation reads as ``previous``."""
    lists = [np.asarray(state.member_lists.get(cid, [])) for cid in ids.tolist()]
    member_ids = np.concatenate(lists) if lists else np.empty(0, np.int64)
    label = np.repeat(np.arange(len(lists)), [len(m) for m in lists]).astype(np.int64)
    order = np.argsort(member_ids, kind="stable")
    state.member_ids, state.label = member_ids[order], label[order]
    state.cluster = ids[state.label] if len(order) else np.empty(0, np.int64)
