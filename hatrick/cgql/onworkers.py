"""CGQL's live Reach, Cluster and Evolved evaluated by the stream's workers, where the state is.

A live view of a partitioned stream (:meth:`hatrick.partitioned.PartitionedGraph.view`) names
the workers holding its batch; :func:`on_workers` wraps it as a :class:`WorkerSnapshot` for a
query whose sub-queries all have a worker evaluation (:func:`evaluates_on_workers`), and
:func:`evaluate` gives the pattern's state from the workers' summaries. The driver never reads
the graph's frames; what reaches it grows with the boundary between workers, the clusters and
the matched vertices and pairs, not with V.

Each worker (:meth:`hatrick.partitioned.Worker.pattern_step`, the steps in :data:`STEPS`) decides
the WHERE conditions on what it holds: vertex conditions on the vertices it owns, edge conditions
on the edges it holds. Every edge it holds has an owned end; the other end may be a *ghost*
(owned elsewhere). Two rounds then join the workers' parts at the boundary:

Reach
    round 1: each worker names the ghosts its kept edges touch; the driver asks their owners
    about them (they are *entries* there). Round 2, undirected: each worker labels the pieces of
    its kept edges (ghosts included: a path may pass any vertex) and sends the pieces of its
    boundary vertices (touched ghosts and asked entries) and of its selected sources and sinks;
    the driver joins pieces holding the same vertex and pairs sources and sinks of one joined
    piece. Directed: each worker sends its pairs from (sources, boundary) to (sinks, boundary)
    over its kept edges; the driver follows them (:func:`hatrick.reachability.reachable_pairs`), as
    :meth:`~hatrick.partitioned.PartitionedGraph._directed_reach` does for ``s.reachable``.
    Attribute records travel for the selected sources and sinks only.
Cluster
    round 1: members are the owned vertices passing the vertex conditions; each worker labels the
    pieces of its kept edges between owned members and sends, per kept edge to a ghost, (its
    piece, the ghost's id); round 2: a ghost's owner says whether it is a member and in which
    piece; each worker sends per piece that may belong to a group (big enough alone, or on a
    kept boundary edge) its size, smallest member id, aggregate partials
    (:func:`hatrick.cgql.patterns.aggregate_partials`, also those its Evolved followers read) and
    its overlap counts with the previous batch's clusters (each worker remembers the cluster id
    of its members, by id, one batch back). The driver joins pieces across kept boundary
    edges (union-find over pieces, not vertices), combines partials
    (:func:`~hatrick.cgql.patterns.combine_partials`), numbers groups by smallest member id
    and applies the pattern's rules (:meth:`hatrick.cgql.patterns.Cluster.conclude`), then
    tells each worker its pieces' cluster ids. Members travel only for the clusters of events.

``alias.*`` wildcards (``{usage = C1.*}``: the vertices whose ``usage`` equals that of a member
of a cluster ``C1`` reports in this batch): the alias's Cluster is evaluated first and each
worker remembers its members' cluster ids; the driver asks the workers for the distinct values
of the compared attributes among the members of the reported clusters (none for ``id``) and
hands them, with the reported cluster ids, to every worker, which decides the condition on its
own vertices by the past path's rule (:class:`hatrick.cgql.views.ReportedMembers`).

Diameter: a group that is one piece of one worker is measured there, exactly, over its kept
edges (:func:`hatrick.cgql.patterns.diameters`, the pattern's kernel, with the same bounds);
for a group that spans workers the workers send only that group's members and kept edges and
the driver measures it with the same kernel: its cost grows with the groups that straddle the
boundary, not with V (routing them to one worker instead, like the past path's keeper
sub-graph, would keep even those off the driver).

What a worker keeps for a sub-query (its pending round, its members' cluster ids) is freed when
the query is cancelled (:func:`memory_keys`). A worker's memory of its members' cluster ids moves with their buckets when the stream rescales
(:func:`take_memory` / :func:`give_memory`, in the buckets' payload), so identities survive the move. A query whose previous state
came from elsewhere (a past part, or a stream restored from a checkpoint) seeds the workers' memory
from that state's members once.
"""
from __future__ import annotations

import uuid

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from hatrick.cgql import nodes as n
from hatrick.cgql.errors import located
from hatrick.cgql.patterns import (Cluster, ClusterState, Evolved, Reach, ReachState, aggregate_partials,
                                   derive_aggregates, diameters, partial_kinds, positions_in)
from hatrick.cgql.views import (Bindings, ReportedMembers, _alias_state, _plain, edge_condition_mask,
                                vertex_conditions_mask)
from hatrick.live import _column_out, smallest_members
from hatrick.reachability import reachable_pairs, same_label_pairs

__all__ = ["WorkerSnapshot", "on_workers", "evaluate", "memory_keys", "STEPS"]


class WorkerSnapshot:
    """A live view evaluated by its workers: ``time``, ``seq``, whether Reach follows edge
    direction, the workers holding the batch, the bucket owner map and ``current_workers()`` (the
    stream's workers later on, which keep the members of the batch before) and the bucket
    function ``buckets``."""

    def __init__(self, view, directed: bool, the_plan):
        self.time, self.seq = float(view.time), int(view.seq)
        self.directed = bool(directed)
        self.workers, self.owner, self.plan = view.workers, view.owner, the_plan
        self.buckets = view.buckets
        self.current_workers = view.current_workers


def evaluates_on_workers(the_plan) -> bool:
    """Whether every sub-query of a plan has a worker evaluation: Reach, Cluster (``alias.*``
    wildcards included: their alias is a Cluster, evaluated first) and Evolved over a Cluster's
    alias (the others read the view's frames)."""
    clusters = {sq.clause.alias for sq in the_plan.subqueries if type(sq.pattern) is Cluster}
    for sq in the_plan.subqueries:
        if type(sq.pattern) is Evolved:
            if sq.pattern.alias not in clusters:
                return False
        elif type(sq.pattern) not in (Cluster, Reach):
            return False
    return True


def on_workers(view, directed, the_plan) -> WorkerSnapshot | None:
    """A :class:`WorkerSnapshot` of ``view`` when its workers can evaluate every sub-query of
    ``the_plan`` (else None: the query reads the view's frames)."""
    if getattr(view, "workers", None) is None or not evaluates_on_workers(the_plan):
        return None
    return WorkerSnapshot(view, bool(view.directed if directed is None else directed), the_plan)


def evaluate(pattern, snap: WorkerSnapshot, previous, aliases: dict):
    """The state of ``pattern`` at ``snap``, as :meth:`hatrick.cgql.patterns.Pattern.evaluate` gives it."""
    if type(pattern) is Reach:
        return _reach(pattern, snap, aliases)
    if type(pattern) is Cluster:
        return _cluster(pattern, snap, previous, aliases)
    return pattern.evaluate(snap, previous, aliases)        # Evolved reads its alias's summaries


def _ask(workers: list, step: str, key: str, per_worker=None) -> list:
    """Request ``step`` of every worker at once (``per_worker[i]``: worker i's arguments)."""
    answers = [w.request("pattern_step", step, key, *(per_worker[i] if per_worker else ()))
               for i, w in enumerate(workers)]
    return [a.result() for a in answers]


def _key(pattern) -> str:
    """The name under which the workers keep this sub-query's memory."""
    if "_workers_key" not in pattern.options:
        pattern.options["_workers_key"] = uuid.uuid4().hex
    return pattern.options["_workers_key"]


def memory_keys(the_plan) -> list[str]:
    """The names under which workers keep the memory of ``the_plan``'s sub-queries (those
    evaluated on workers so far): what a cancelled query frees (``Stream.forget_patterns``)."""
    return [sq.pattern.options["_workers_key"] for sq in the_plan.subqueries if "_workers_key" in sq.pattern.options]


def _owners(snap: WorkerSnapshot, ids: np.ndarray) -> np.ndarray:
    return snap.owner[snap.buckets.of(np.asarray(ids), len(snap.owner))]


def _by_owner(snap: WorkerSnapshot, ids: np.ndarray) -> list:
    """``ids`` (distinct) split by owning worker."""
    ids = pd.unique(np.asarray(ids))
    owners = _owners(snap, ids) if len(ids) else np.zeros(0, np.int64)
    return [ids[owners == w] for w in range(len(snap.workers))]


def _wildcards(conditions, snap: WorkerSnapshot, aliases: dict) -> dict:
    """What the workers need to decide the ``alias.*`` wildcards of ``conditions``: per alias,
    its Cluster's memory key, this batch, the cluster ids it reports, and {compared attribute:
    the distinct values its reported members have} (gathered from the workers; ``id`` needs
    none). Grows with the reported clusters' values, not with V."""
    compared = {}
    for c in conditions:
        if isinstance(c.value, n.Wildcard):
            _alias_state(c, Bindings({}, aliases))          # the driver path's error for an unknown alias
            compared.setdefault(c.value.alias, set()).add(c.attribute)
    out = {}
    for alias, attributes in compared.items():
        state = aliases[alias]
        members, cids, names = state.fetch, np.asarray(state.reported_ids, np.int64), sorted(attributes - {"id"})
        values = {}
        if names:
            answers = _ask(snap.workers, "reported_values", members.key, [(members.seq, cids, names)] * len(snap.workers))
            values = {name: pd.unique(np.concatenate([np.asarray(a[name], dtype=object) for a in answers]))
                      for name in names}
        out[alias] = {"key": members.key, "seq": int(members.seq), "cids": cids, "values": values}
    return out


def _bindings(params: dict, wildcards: dict, masks: dict | None = None) -> Bindings:
    """Bindings whose aliases are :class:`ReportedMembers` (``masks``: {alias: which rows are
    reported members}; default none, for checking attribute names)."""
    return Bindings(params, {alias: ReportedMembers((masks or {}).get(alias, np.zeros(0, bool)), w["values"])
                             for alias, w in wildcards.items()})


def _check_known(conditions, edge, aggregates, known_vertex: set, known_edge: set, bindings) -> None:
    """Raise the driver path's error for an attribute no worker's graph has."""
    vertex_conditions_mask(pd.DataFrame(columns=["id", *sorted(known_vertex)]), conditions, bindings)
    if edge is not None:
        edge_condition_mask(pd.DataFrame(columns=["src", "dst", *sorted(known_edge)]), edge, bindings)
    for c in aggregates:
        attribute = c.aggregate.attribute
        if attribute and c.aggregate.function != "diameter" and attribute not in known_vertex and attribute != "id":
            raise located(c.aggregate, f"aggregate {c.aggregate}: vertex attribute {attribute!r} is not in the graph")


# Reach: driver -----------------------------------------------------------------------------------
def _reach(pattern: Reach, snap: WorkerSnapshot, aliases: dict) -> ReachState:
    sources, sinks = pattern._vertex_condition_groups()
    directed = snap.directed if pattern.options.get("directed") is None else bool(pattern.options["directed"])
    wildcards = _wildcards(sources + sinks, snap, aliases)
    spec = {"sources": sources, "sinks": sinks, "edge": pattern.clause.edge, "params": pattern.params,
            "vertex": sorted({c.attribute for c in sources + sinks} - {"id"}), "wildcards": wildcards,
            "edge_columns": _edge_columns(pattern.clause.edge), "directed": directed}
    key = _key(pattern)
    started = _ask(snap.workers, "reach_start", key, [(spec,)] * len(snap.workers))
    _check_known(sources + sinks, pattern.clause.edge, (), set().union(*[a["vertex_known"] for a in started]),
                 set().union(*[a["edge_known"] for a in started]), _bindings(pattern.params, wildcards))
    entries = _by_owner(snap, np.concatenate([a["ghosts"] for a in started]))
    parts = _ask(snap.workers, "reach_finish", key, [(e,) for e in entries])
    records = pd.concat([p["records"] for p in parts], ignore_index=True).drop_duplicates("id")
    if directed:
        u, v, picked_s, picked_t = (np.concatenate([p[f] for p in parts]) for f in ("u", "v", "sources", "sinks"))
        nodes = pd.Index(pd.unique(np.concatenate([picked_s, picked_t, u, v])))
        s, t = reachable_pairs(len(nodes), nodes.get_indexer(u), nodes.get_indexer(v),
                               nodes.get_indexer(picked_s), nodes.get_indexer(picked_t))
        ids = nodes.to_numpy()
        source, sink = ids[s], ids[t]
    else:
        source, sink = _undirected_pairs(parts)
    keep = source != sink
    pairs = pd.MultiIndex.from_arrays([source[keep], sink[keep]], names=["source", "sink"])
    return ReachState(pairs, _records_of(records))


def _undirected_pairs(parts: list) -> tuple[np.ndarray, np.ndarray]:
    """(source, sink) ids in one joined piece: pieces of the workers holding one vertex are joined
    (union-find over the pieces named, numbered densely: the boundary's and the selection's)."""
    offsets = np.cumsum([0] + [p["pieces"] for p in parts])

    def nodes(field: str) -> np.ndarray:
        return np.concatenate([offsets[i] + p[field] for i, p in enumerate(parts)])
    named = [nodes("boundary_piece"), nodes("source_piece"), nodes("sink_piece")]
    dense, _ = pd.factorize(np.concatenate(named))
    boundary, s_node, t_node = np.split(dense.astype(np.int64), np.cumsum([len(x) for x in named])[:-1])
    code, _ = pd.factorize(np.concatenate([p["boundary"] for p in parts]))
    order = np.argsort(code, kind="stable")
    same = code[order][1:] == code[order][:-1]
    root = smallest_members(int(dense.max()) + 1 if len(dense) else 0, boundary[order][:-1][same],
                            boundary[order][1:][same])
    s_ids = np.concatenate([p["sources"] for p in parts])
    t_ids = np.concatenate([p["sinks"] for p in parts])
    return same_label_pairs(s_ids, root[s_node], t_ids, root[t_node])


def _records_of(frame: pd.DataFrame):
    """``records(ids)``: attribute dicts (without ``id``) of the selected vertices, for events."""
    index = pd.Index(frame["id"].to_numpy())
    columns = [c for c in frame.columns if c != "id"]
    arrays = {c: frame[c].to_numpy() for c in columns}

    def records(ids):
        at = index.get_indexer(np.asarray(ids))
        values = [arrays[c][at].tolist() for c in columns]
        return [{c: _plain(v) for c, v in zip(columns, row)} for row in zip(*values)]
    return records


def _edge_columns(edge) -> list:
    if edge is None:
        return []
    return sorted({c.attribute for c in edge.conditions} | ({"type", "label"} if edge.labels else set()))


# Cluster: driver ---------------------------------------------------------------------------------
def _cluster(pattern: Cluster, snap: WorkerSnapshot, previous, aliases: dict) -> ClusterState:
    b = pattern.bindings({})
    (conditions,) = pattern._vertex_condition_groups()
    wildcards = _wildcards(conditions, snap, aliases)
    followers = [sq.pattern for sq in snap.plan.subqueries
                 if type(sq.pattern) is Evolved and sq.pattern.alias == pattern.clause.alias]
    aggregates = pattern.aggregate_conditions() + tuple(c for f in followers for c in f.clause.aggregates)
    min_size = int(pattern.options.get("min_size", 2))
    spec = {"conditions": conditions, "edge": pattern.clause.edge, "params": pattern.params,
            "vertex": sorted({c.attribute for c in conditions} - {"id"}),
            "aggregates": sorted({c.aggregate.attribute for c in aggregates
                                  if c.aggregate.attribute and c.aggregate.function != "diameter"}),
            "kinds": {a: sorted(k) for a, k in partial_kinds(aggregates).items()},
            "edge_columns": _edge_columns(pattern.clause.edge), "min_size": min_size, "wildcards": wildcards}
    key, workers = _key(pattern), snap.workers
    seed = None
    if previous is not None and not (isinstance(previous.fetch, _Members) and previous.fetch.key == key):
        seed = (previous.member_ids, previous.cluster)       # a state from elsewhere: its members, once
    started = _ask(workers, "cluster_start", key, [(spec, seed)] * len(workers))
    _check_known(conditions, pattern.clause.edge, aggregates, set().union(*[a["vertex_known"] for a in started]),
                 set().union(*[a["edge_known"] for a in started]), _bindings(pattern.params, wildcards))
    asked = _by_owner(snap, np.concatenate([a["cross_ghost"] for a in started]))
    parts = _ask(workers, "cluster_pieces", key, [(asked[w],) for w in range(len(workers))])
    groups = _join_pieces(started, asked, parts, min_size)
    k = groups.k
    p, q, weight = _overlap_counts(previous, parts, groups)
    partials = groups.partials

    def diameter(satisfied, limits):
        return _diameters(workers, key, groups, satisfied, limits)
    ids, overlap, table, event_size, first_reported = pattern.conclude(previous, snap.time, partials, p, q, weight,
                                                                       k, b, diameter)
    cids = [np.where(lab >= 0, ids[np.maximum(lab, 0)], -1) if k else np.full(len(lab), -1, np.int64)
            for lab in groups.piece_label]
    _ask(workers, "cluster_commit", key, [(snap.seq, parts[w]["pieces"], cids[w]) for w in range(len(workers))])
    empty = np.empty(0, np.int64)
    state = ClusterState(snap, empty, empty, empty, empty, table, overlap, event_size, first_reported,
                         fetch=_Members(key, snap.seq, snap.current_workers))
    state.follower_values = lambda conds: _follower_values(partials, conds, k, diameter)
    return state


class _Pieces:
    """The workers' pieces joined into groups: per worker, the group label of each piece it
    reported (-1: in no group); per group (label order: smallest member id), combined partials,
    and which (worker, piece) is a group's only piece (-1 when it spans several)."""

    def __init__(self, k, pieces, piece_label, partials, single_worker, single_piece):
        self.k, self.pieces, self.piece_label, self.partials = k, pieces, piece_label, partials
        self.single_worker, self.single_piece = single_worker, single_piece


def _join_pieces(started: list, asked: list, parts: list, min_size: int) -> _Pieces:
    """Union-find over the reported pieces joined by kept boundary edges whose ghost is a member."""
    counts = [len(p["pieces"]) for p in parts]
    offsets = np.cumsum([0] + counts)
    total = int(offsets[-1])
    node_of = [lambda pieces, i=i: offsets[i] + np.searchsorted(parts[i]["pieces"], pieces)
               for i in range(len(parts))]
    # the owner's piece of every asked ghost (-1: not a member)
    asked_ids = np.concatenate(asked) if asked else np.zeros(0, np.int64)
    asked_node = np.concatenate([np.where(p["asked_piece"] >= 0, node_of[i](np.maximum(p["asked_piece"], 0)), -1)
                                 for i, p in enumerate(parts)]) if parts else np.zeros(0, np.int64)
    at = pd.Index(asked_ids).get_indexer(np.concatenate([s["cross_ghost"] for s in started])) \
        if len(asked_ids) else np.zeros(0, np.int64)
    left = np.concatenate([node_of[i](s["cross_piece"]) for i, s in enumerate(started)])
    right = asked_node[at] if len(at) else np.zeros(0, np.int64)
    joined = right >= 0
    root = smallest_members(total, left[joined].astype(np.int64), right[joined].astype(np.int64))
    size = np.concatenate([p["size"] for p in parts]).astype(np.int64)
    group_size = np.bincount(root, weights=size, minlength=total)
    kept = group_size[root] >= min_size
    smallest = np.concatenate([p["smallest"] for p in parts])
    roots = np.unique(root[kept])
    first = pd.Series(smallest[kept]).groupby(root[kept]).min().reindex(roots).to_numpy()
    rank = np.empty(len(roots), np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(roots))
    label = np.full(total, -1, np.int64)
    label[kept] = rank[np.searchsorted(roots, root[kept])]
    k = len(roots)
    names = set().union(*[p["partials"].keys() for p in parts]) if parts else set()
    partials = {"size": np.bincount(label[kept], weights=size[kept], minlength=k).astype(np.int64)}
    for name in names - {"size"}:
        values = _column(parts, name)
        if values is None:
            continue
        kind = name[1]
        if kind in ("min", "max"):
            out = np.full(k, np.inf if kind == "min" else -np.inf)
            (np.fmin if kind == "min" else np.fmax).at(out, label[kept], values[kept])
        else:
            out = np.bincount(label[kept], weights=values[kept], minlength=k)
            out = out.astype(np.int64) if kind == "count" else out
        partials[name] = out
    pieces_per_group = np.bincount(label[kept], minlength=k)
    worker_of = np.repeat(np.arange(len(parts)), counts)
    piece_of = np.concatenate([p["pieces"] for p in parts]) if parts else np.zeros(0, np.int64)
    single_worker, single_piece = np.full(k, -1, np.int64), np.full(k, -1, np.int64)
    alone = kept & (pieces_per_group[np.maximum(label, 0)] == 1)
    single_worker[label[alone]], single_piece[label[alone]] = worker_of[alone], piece_of[alone]
    return _Pieces(k, [p["pieces"] for p in parts], [label[offsets[i]:offsets[i + 1]] for i in range(len(parts))], partials,
                   single_worker, single_piece)


def _column(parts: list, name) -> np.ndarray | None:
    """Partial ``name`` over every worker's pieces; a worker without it (no value of the
    attribute there) adds its identity; None when a worker with values could not make it
    (the attribute is not numeric there: the rules then say so)."""
    kind, attribute = name[1], name[0]
    chunks = []
    for p in parts:
        if name in p["partials"]:
            chunks.append(np.asarray(p["partials"][name], np.float64))
        elif not np.any(p["partials"].get((attribute, "count"), np.zeros(0))):
            chunks.append(np.full(len(p["pieces"]), {"min": np.inf, "max": -np.inf}.get(kind, 0.0)))
        else:
            return None
    return np.concatenate(chunks) if chunks else np.zeros(0)


def _overlap_counts(previous, parts: list, groups: _Pieces):
    """(previous label, group label, shared members) from the workers' counts per piece."""
    if previous is None or not groups.k:
        return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int64)
    cid = np.concatenate([p["overlap_cid"] for p in parts])
    q = np.concatenate([groups.piece_label[i][np.searchsorted(p["pieces"], p["overlap_piece"])]
                        for i, p in enumerate(parts)])
    count = np.concatenate([p["overlap_count"] for p in parts])
    keep = q >= 0
    cid, q, count = cid[keep], q[keep], count[keep]
    if not len(cid):
        return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int64)
    p = positions_in(previous.table.ids, cid)
    keys, at = np.unique(p * groups.k + q, return_inverse=True)
    weight = np.bincount(at.reshape(-1), weights=count).astype(np.int64)
    return keys // groups.k, keys % groups.k, weight


def _diameters(workers: list, key: str, groups: _Pieces, satisfied, limits) -> np.ndarray:
    """Hop diameters of the groups (NaN where not asked or ruled out, as
    :func:`hatrick.cgql.patterns.diameters`): one piece of one worker is measured there;
    a group over several pieces from its members and kept edges, gathered here."""
    k = groups.k
    size = groups.partials["size"]
    out = size.astype(np.float64) - 1
    wanted = size >= 3 if satisfied is None else (size >= 3) & satisfied
    out[(size >= 3) & ~wanted] = np.nan
    local = wanted & (groups.single_worker >= 0)
    spanning = wanted & (groups.single_worker < 0)
    asks = []
    for w in range(len(workers)):
        mine = np.flatnonzero(local & (groups.single_worker == w))
        span_at = np.flatnonzero(np.isin(groups.piece_label[w], np.flatnonzero(spanning)))
        asks.append((mine, groups.single_piece[mine], groups.pieces[w][span_at], span_at))
    answers = _ask(workers, "cluster_measure", key, [(a[1], list(limits), a[2]) for a in asks])
    for (labels, _, _, _), answer in zip(asks, answers):
        out[labels] = answer["diameters"]
    if spanning.any():
        out[spanning] = _spanning_diameters(answers, asks, groups, spanning, limits)
    return out


def _spanning_diameters(answers: list, asks: list, groups: _Pieces, spanning, limits) -> np.ndarray:
    members = np.concatenate([a["member_ids"] for a in answers])
    group = np.concatenate([groups.piece_label[w][ask[3][a["member_piece"]]] for w, (a, ask)
                            in enumerate(zip(answers, asks))])
    index = pd.Index(members)
    u = index.get_indexer(np.concatenate([a["u"] for a in answers]))
    v = index.get_indexer(np.concatenate([a["v"] for a in answers]))
    keep = (u >= 0) & (v >= 0)                  # an edge to a ghost that is no member joins nothing
    u, v = u[keep], v[keep]
    m = len(members)
    adjacency = sp.csr_matrix((np.ones(2 * len(u), bool), (np.concatenate([u, v]), np.concatenate([v, u]))),
                              shape=(m, m))
    chosen = np.flatnonzero(spanning)
    compact = np.searchsorted(chosen, group)
    return diameters(adjacency, np.arange(m), compact, len(chosen), limits=limits)


def _follower_values(partials: dict, conditions, k: int, diameter) -> dict:
    """An Evolved follower's WHERE aggregates over its alias's groups."""
    values = derive_aggregates(partials, conditions, k)
    if any(c.aggregate.function == "diameter" for c in conditions):
        values["diameter"] = diameter(None, ())
    return values


class _Members:
    """``ClusterState.fetch``: sorted member ids of some clusters of batch ``seq``, asked of the
    stream's workers as they are now (``workers()``; each keeps its members' cluster ids two
    batches back, and a rescale moves them with the buckets)."""

    def __init__(self, key: str, seq: int, workers):
        self.key, self.seq, self.workers = key, seq, workers

    def __call__(self, cluster_ids) -> list:
        wanted = np.asarray(cluster_ids, np.int64)
        if not len(wanted):
            return []
        workers = self.workers()
        answers = _ask(workers, "cluster_members", self.key, [(self.seq, wanted)] * len(workers))
        ids = np.concatenate([a[0] for a in answers])
        cid = np.concatenate([a[1] for a in answers])
        order = np.lexsort((ids, cid))
        ids, cid = ids[order], cid[order]
        lo, hi = np.searchsorted(cid, wanted), np.searchsorted(cid, wanted, side="right")
        listed = ids.tolist()
        return [listed[a:b] for a, b in zip(lo.tolist(), hi.tolist())]


# worker steps ------------------------------------------------------------------------------------
def _vertex_columns(s, vids: np.ndarray, names: list) -> tuple[pd.DataFrame, set]:
    """``id`` and ``names`` of vertices ``vids`` (an attribute this worker never saw: all missing)."""
    frame = {"id": s.ids.to_numpy()[vids]}
    for name in (name for name in names if name != "id"):
        column = s.vattrs.get(name)
        frame[name] = _column_out(column, vids) if column is not None else np.full(len(vids), None, object)
    return pd.DataFrame(frame), set(s.vattrs)


def _kept_edges(s, spec: dict, params: dict) -> tuple[np.ndarray, np.ndarray, set]:
    """(src vids, dst vids) of the live edges held here passing the WHERE edge condition."""
    slots = s.live_slots()
    edge = spec["edge"]
    if edge is not None and len(slots):
        frame = {"src": np.zeros(len(slots)), "dst": np.zeros(len(slots))}
        for name in spec["edge_columns"]:
            column = s.eattrs.get(name)
            if column is not None:
                frame[name] = _column_out(column, slots)
        if edge.labels and not {"type", "label"} & set(frame):
            frame["type"] = np.full(len(slots), None, object)
        for c in edge.conditions:
            frame.setdefault(c.attribute, np.full(len(slots), None, object))
        slots = slots[edge_condition_mask(pd.DataFrame(frame), edge, Bindings(params))]
    return s.src[slots], s.dst[slots], set(s.eattrs)


def _reported_here(w, wildcard: dict) -> np.ndarray:
    """Ids of this worker's members of the clusters an ``alias.*`` wildcard's alias reports."""
    generation = _memory(w, wildcard["key"])["generations"].get(wildcard["seq"])
    if generation is None:
        raise RuntimeError(f"hatrick worker {w.index}: the members of batch {wildcard['seq']} are no longer kept")
    return generation["ids"][np.isin(generation["cids"], wildcard["cids"])]


def _bindings_here(w, spec: dict, ids: np.ndarray) -> Bindings:
    """The parameters, and each ``alias.*`` wildcard's alias as which of ``ids`` (owned vertices)
    are its reported members with the values every worker's members have."""
    masks = {alias: pd.Index(_reported_here(w, wildcard)).get_indexer(ids) >= 0
             for alias, wildcard in spec["wildcards"].items()}
    return _bindings(spec["params"], spec["wildcards"], masks)


def reported_values(w, key: str, seq: int, cids: np.ndarray, names: list) -> dict:
    """{attribute: the distinct values this worker's members of clusters ``cids`` (at batch ``seq``
    of the Cluster kept under ``key``) have}, for an ``alias.*`` wildcard."""
    s = w.state
    ids = _reported_here(w, {"key": key, "seq": int(seq), "cids": cids})
    vids = s.vids_of(np.asarray(ids, dtype=s.ids.dtype)) if len(ids) else np.zeros(0, np.int64)
    frame, _ = _vertex_columns(s, vids[vids >= 0], names)
    return {name: pd.unique(frame[name].dropna().to_numpy(dtype=object)) for name in names}


def _memory(w, key: str) -> dict:
    return w.patterns.setdefault(key, {"generations": {}})


def reach_start(w, key: str, spec: dict) -> dict:
    """Round 1 of Reach: select, keep edges, name the ghosts the kept edges touch."""
    s = w.state
    owned = w.owned()
    frame, vertex_known = _vertex_columns(s, owned, spec["vertex"])
    b = _bindings_here(w, spec, frame["id"].to_numpy())
    sources = owned[vertex_conditions_mask(frame, spec["sources"], b)]
    sinks = owned[vertex_conditions_mask(frame, spec["sinks"], b)]
    a, z, edge_known = _kept_edges(s, spec, spec["params"])
    is_owned = w._owned_vids()
    ghost_a, ghost_z = np.unique(a[~is_owned[a]]), np.unique(z[~is_owned[z]])
    ghosts = np.union1d(ghost_a, ghost_z)
    _memory(w, key)["pending"] = {"a": a, "z": z, "sources": sources, "sinks": sinks, "ghosts": ghosts,
                                  "ghost_a": ghost_a, "ghost_z": ghost_z, "directed": spec["directed"]}
    return {"ghosts": s.ids.to_numpy()[ghosts], "vertex_known": vertex_known, "edge_known": edge_known}


def reach_finish(w, key: str, entries: np.ndarray) -> dict:
    """Round 2 of Reach: this worker's part over its boundary (touched ghosts and ``entries``)."""
    s = w.state
    pending = _memory(w, key).pop("pending")
    entry = s.vids_of(np.asarray(entries, dtype=s.ids.dtype)) if len(entries) else np.zeros(0, np.int64)
    boundary = np.union1d(pending["ghosts"], entry[entry >= 0])
    ids = s.ids.to_numpy()
    sources, sinks = pending["sources"], pending["sinks"]
    records = pd.DataFrame({"id": ids[np.union1d(sources, sinks)]})
    for name, column in s.vattrs.items():
        records[name] = _column_out(column, np.union1d(sources, sinks))
    size = len(s.alive)
    a, z = pending["a"], pending["z"]
    if pending["directed"]:             # paths come in at entries and ghosts with kept out-edges here
        entry = entry[entry >= 0]
        u, v = reachable_pairs(size, a, z, np.union1d(sources, np.union1d(pending["ghost_a"], entry)),
                               np.union1d(sinks, np.union1d(pending["ghost_z"], entry)))
        return {"u": ids[u], "v": ids[v], "sources": ids[sources], "sinks": ids[sinks], "records": records}
    graph = sp.csr_matrix((np.ones(len(a), bool), (a, z)), shape=(size, size))
    pieces, piece = connected_components(graph, directed=False)
    return {"pieces": int(pieces), "boundary": ids[boundary], "boundary_piece": piece[boundary],
            "sources": ids[sources], "source_piece": piece[sources], "sinks": ids[sinks],
            "sink_piece": piece[sinks], "records": records}


def cluster_start(w, key: str, spec: dict, seed) -> dict:
    """Round 1 of Cluster: members, their pieces over kept edges between owned members, and
    (piece, ghost id) of each kept edge from a member to a ghost. ``seed``: (member ids, cluster
    ids) of a previous state found elsewhere, remembered for the owned ones."""
    s = w.state
    memory = _memory(w, key)
    if seed is not None:
        ids, cids = np.asarray(seed[0]), np.asarray(seed[1], np.int64)
        mine = _owners_here(w, ids) == w.index if len(ids) else np.zeros(0, bool)
        memory["generations"] = {-1: _generation(ids[mine], cids[mine])}
    owned = w.owned()
    frame, vertex_known = _vertex_columns(s, owned, sorted(set(spec["vertex"]) | set(spec["aggregates"])))
    chosen = vertex_conditions_mask(frame, spec["conditions"], _bindings_here(w, spec, frame["id"].to_numpy()))
    members = owned[chosen]
    local = np.full(len(s.alive), -1, np.int64)
    local[members] = np.arange(len(members))
    a, z, edge_known = _kept_edges(s, spec, spec["params"])
    la, lz = local[a], local[z]
    is_owned = w._owned_vids()
    inside = (la >= 0) & (lz >= 0)
    m = len(members)
    adjacency = sp.csr_matrix((np.ones(2 * int(inside.sum()), bool),
                               (np.concatenate([la[inside], lz[inside]]), np.concatenate([lz[inside], la[inside]]))),
                              shape=(m, m))
    _, piece = connected_components(adjacency, directed=False)
    to_ghost = np.concatenate([(la >= 0) & ~is_owned[z], (lz >= 0) & ~is_owned[a]])
    member_end = np.concatenate([la, lz])[to_ghost]
    ghost = np.concatenate([z, a])[to_ghost]
    ids = s.ids.to_numpy()
    cross = pd.unique(piece[member_end] * np.int64(len(ids) + 1) + ghost) if len(ghost) else np.zeros(0, np.int64)
    cross_piece, cross_ghost = cross // (len(ids) + 1), cross % (len(ids) + 1)
    columns = {name: frame[name].to_numpy()[chosen] for name in spec["aggregates"]}
    memory["pending"] = {"members": members, "piece": piece, "adjacency": adjacency, "cross_piece": cross_piece,
                         "edge_member": member_end, "edge_ghost": ghost, "columns": columns,
                         "min_size": spec["min_size"], "kinds": spec["kinds"]}
    return {"cross_piece": cross_piece, "cross_ghost": ids[cross_ghost], "vertex_known": vertex_known,
            "edge_known": edge_known}


def _owners_here(w, ids: np.ndarray) -> np.ndarray:
    return w.owner[w.buckets.of(np.asarray(ids), len(w.owner))]


def cluster_pieces(w, key: str, asked: np.ndarray) -> dict:
    """Round 2 of Cluster: the pieces of ``asked`` (owned vertices that are ghosts on a kept edge
    elsewhere; -1: not a member), and per piece that may be in a group its size, smallest member
    id, partials and overlap counts with the previous batch's clusters."""
    s = w.state
    memory = _memory(w, key)
    pending = memory["pending"]
    members, piece = pending["members"], pending["piece"]
    pieces_here = int(piece.max()) + 1 if len(piece) else 0
    local = np.full(len(s.alive), -1, np.int64)
    local[members] = np.arange(len(members))
    asked_vids = s.vids_of(np.asarray(asked, dtype=s.ids.dtype)) if len(asked) else np.zeros(0, np.int64)
    asked_local = np.where(asked_vids >= 0, local[np.maximum(asked_vids, 0)], -1)
    asked_piece = np.where(asked_local >= 0, piece[np.maximum(asked_local, 0)], -1)
    size = np.bincount(piece, minlength=pieces_here)
    wanted = size >= pending["min_size"]
    wanted[pending["cross_piece"]] = True
    wanted[asked_piece[asked_piece >= 0]] = True
    pieces = np.flatnonzero(wanted)
    at = np.full(pieces_here, -1, np.int64)
    at[pieces] = np.arange(len(pieces))
    in_piece = at[piece] >= 0
    label = at[piece[in_piece]]
    kinds = {a: tuple(k) for a, k in pending["kinds"].items()}
    columns = {name: values[in_piece] for name, values in pending["columns"].items()}
    partials = aggregate_partials(columns, label, len(pieces), kinds)
    ids = s.ids.to_numpy()
    member_ids = ids[members[in_piece]]
    smallest = pd.Series(member_ids).groupby(label).min().reindex(np.arange(len(pieces))).to_numpy()
    cid, overlap_piece, count = _overlap_here(_latest(memory), member_ids, pieces[label])
    return {"pieces": pieces, "asked_piece": asked_piece, "size": size[pieces], "smallest": smallest,
            "partials": partials, "overlap_cid": cid, "overlap_piece": overlap_piece, "overlap_count": count}


def _overlap_here(latest, member_ids: np.ndarray, member_piece: np.ndarray):
    """(previous cluster id, piece, members shared) over this worker's members."""
    empty = np.zeros(0, np.int64)
    if latest is None or not len(latest["ids"]) or not len(member_ids):
        return empty, empty, empty
    at = latest["index"].get_indexer(member_ids)
    hit = at >= 0
    pairs = pd.DataFrame({"cid": latest["cids"][at[hit]], "piece": member_piece[hit]})
    counted = pairs.groupby(["cid", "piece"], sort=False).size()
    return (counted.index.get_level_values(0).to_numpy(np.int64), counted.index.get_level_values(1).to_numpy(np.int64),
            counted.to_numpy(np.int64))


def cluster_measure(w, key: str, local_pieces: np.ndarray, limits: list, span_pieces: np.ndarray) -> dict:
    """Diameters of ``local_pieces`` (each a whole group) over the kept edges here, and the
    members and kept edges (ids) of ``span_pieces`` (parts of groups over several pieces)."""
    s = w.state
    pending = _memory(w, key)["pending"]
    piece, adjacency, members = pending["piece"], pending["adjacency"], pending["members"]
    count = int(piece.max()) + 1 if len(piece) else 0
    out = np.zeros(0)
    if len(local_pieces):
        only = np.zeros(count, bool)
        only[local_pieces] = True
        out = diameters(adjacency, np.arange(len(members)), piece, count, only=only, limits=tuple(limits))
        out = out[local_pieces]
    ids = s.ids.to_numpy()
    at = np.full(count, -1, np.int64)
    at[span_pieces] = np.arange(len(span_pieces))
    chosen = np.flatnonzero(at[piece] >= 0) if len(piece) else np.zeros(0, np.int64)
    sub = sp.triu(adjacency[chosen][:, chosen], format="coo")
    em, eg = pending["edge_member"], pending["edge_ghost"]
    pick = at[piece[em]] >= 0 if len(em) else np.zeros(0, bool)
    chosen_ids = ids[members[chosen]]
    return {"diameters": out, "member_ids": chosen_ids, "member_piece": at[piece[chosen]],
            "u": np.concatenate([chosen_ids[sub.row], ids[members[em[pick]]]]),
            "v": np.concatenate([chosen_ids[sub.col], ids[eg[pick]]])}


def cluster_commit(w, key: str, seq: int, pieces: np.ndarray, cids: np.ndarray) -> None:
    """Remember each member's cluster id at batch ``seq`` (the two latest batches are kept)."""
    s = w.state
    memory = _memory(w, key)
    pending = memory["pending"]
    at = np.full(int(pending["piece"].max()) + 1 if len(pending["piece"]) else 0, -1, np.int64)
    at[pieces] = cids
    cid = at[pending["piece"]] if len(pending["piece"]) else np.zeros(0, np.int64)
    keep = cid >= 0
    ids = s.ids.to_numpy()[pending["members"][keep]]
    generations = memory["generations"]
    generations[int(seq)] = _generation(ids, cid[keep])
    for old in sorted(generations)[:-2]:
        del generations[old]


def cluster_members(w, key: str, seq: int, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(member id, cluster id) of this worker's members of clusters ``wanted`` at batch ``seq``."""
    generation = _memory(w, key)["generations"].get(int(seq))
    if generation is None:
        raise RuntimeError(f"hatrick worker {w.index}: the members of batch {seq} are no longer kept")
    hit = np.isin(generation["cids"], wanted)
    return generation["ids"][hit], generation["cids"][hit]


def _generation(ids, cids) -> dict:
    ids, cids = np.asarray(ids), np.asarray(cids, np.int64)
    return {"ids": ids, "cids": cids, "index": pd.Index(ids)}


def _latest(memory: dict):
    generations = memory["generations"]
    return generations[max(generations)] if generations else None


def take_memory(patterns: dict, moving_ids: np.ndarray) -> dict:
    """The remembered cluster ids of vertices ``moving_ids`` (leaving this worker with their
    buckets), taken out of ``patterns``, as a :mod:`hatrick.datafile` tree for :func:`give_memory`."""
    out = {}
    for key, memory in patterns.items():
        for seq, generation in list(memory.get("generations", {}).items()):
            moving = np.isin(generation["ids"], moving_ids)
            if moving.any():
                out.setdefault(key, {})[str(seq)] = {"ids": generation["ids"][moving],
                                                     "cids": generation["cids"][moving]}
                memory["generations"][seq] = _generation(generation["ids"][~moving], generation["cids"][~moving])
    return out


def give_memory(patterns: dict, incoming: dict | None) -> None:
    """Add what :func:`take_memory` took on another worker to this worker's ``patterns``."""
    for key, generations in (incoming or {}).items():
        memory = patterns.setdefault(key, {"generations": {}})
        for seq, part in generations.items():
            here = memory["generations"].get(int(seq))
            ids, cids = np.asarray(part["ids"]), np.asarray(part["cids"], np.int64)
            if here is not None:
                ids, cids = np.concatenate([here["ids"], ids]), np.concatenate([here["cids"], cids])
            memory["generations"][int(seq)] = _generation(ids, cids)


STEPS = {"reach_start": reach_start, "reach_finish": reach_finish, "cluster_start": cluster_start,
         "reported_values": reported_values,
         "cluster_pieces": cluster_pieces, "cluster_measure": cluster_measure, "cluster_commit": cluster_commit,
         "cluster_members": cluster_members}
