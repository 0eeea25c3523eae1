"""The live graph split over workers by bucket: routing, per-worker state, boundary merge, migration.

Experimental step towards Hatrick on Spark executors (issue 21); :class:`hatrick.stream.Stream`
does not use it yet. Every worker runs the same :func:`hatrick.live.apply_batch` on its own
:class:`hatrick.live.State`; one worker holding every bucket is exactly the single-state graph.

Ownership: a vertex belongs to the worker owning ``bucket_of(id)``; an edge to the owner of its
source's bucket (undirected: the smaller of its endpoints' buckets), where its endpoints are
also kept as *ghosts* (vertices without attributes). Routing a batch (:func:`route`) is O(batch)
numpy work: edge ops go to the edge's owner, vertex ops to the vertex's owner, an ``add_edge``
also tells its endpoints' owners that they exist, and a ``remove_vertex`` goes to every worker
(each drops the vertex's edges it holds); the owner's verdict is the update's outcome.

Components: each worker labels its own vertices (ghosts included) with local components; the
driver joins labels only through ghosts (:func:`merge_components`), so what it handles grows with
the boundary between workers, not with the graph. Labels are original ids of one member (for
one worker, the smallest by arrival, as in :mod:`hatrick.live`). Undirected reachability
between selected vertices follows from the merged components.

The driver reaches workers only through :class:`Worker`'s methods, so a worker in another
process can stand in for one; today all of them live in the caller's process.

Migration (:meth:`Worker.extract` / :meth:`Worker.absorb`): the moved buckets' edges, owned
vertices and attributes travel as a :mod:`hatrick.datafile` payload from the old owner to the
new one; nothing else moves.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from hatrick import datafile
from hatrick.live import State, apply_batch, build_state, edge_frame, select_vertices
from hatrick.ring import bucket_of
from hatrick.updates import ADD_EDGE, ADD_VERTEX, REMOVE_VERTEX, VERTEX_OPS, UpdateBatch, empty_rejected


OWN, END_A, END_B, BROADCAST = range(4)     # why a worker gets a row


def route(batch: UpdateBatch, owner: np.ndarray, directed: bool) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per worker 0..W-1: the rows of ``batch`` it applies, in batch order, and why: ``OWN`` (its
    verdict is the update's), ``END_A``/``END_B`` (it owns that endpoint of an ``add_edge`` held
    elsewhere: the vertex exists) or ``BROADCAST`` (a ``remove_vertex`` of a vertex it does not own)."""
    workers = int(owner.max()) + 1 if len(owner) else 1
    n = len(batch)
    num_buckets = len(owner)
    is_vertex = np.isin(batch.op, VERTEX_OPS)
    bucket_a = bucket_of(batch.a, num_buckets)
    bucket_b = np.where(is_vertex, bucket_a, bucket_of(np.where(is_vertex, batch.a, batch.b), num_buckets))
    target = owner[np.where(is_vertex | directed, bucket_a, np.minimum(bucket_a, bucket_b))]
    rows, where, why = [np.arange(n)], [target], [np.full(n, OWN)]
    adds = np.flatnonzero(batch.op == ADD_EDGE)
    for code, end_bucket in ((END_A, bucket_a[adds]), (END_B, bucket_b[adds])):
        foreign = owner[end_bucket] != target[adds]
        rows.append(adds[foreign])
        where.append(owner[end_bucket][foreign])
        why.append(np.full(int(foreign.sum()), code))
    removals = np.flatnonzero(batch.op == REMOVE_VERTEX)
    for w in range(workers):
        others = removals[target[removals] != w]
        rows.append(others)
        where.append(np.full(len(others), w))
        why.append(np.full(len(others), BROADCAST))
    rows, where, why = np.concatenate(rows), np.concatenate(where), np.concatenate(why)
    order = np.lexsort((why, rows, where))                        # by worker, then batch order
    rows, where, why = rows[order], where[order], why[order]
    cuts = np.searchsorted(where, np.arange(1, workers))
    return list(zip(np.split(rows, cuts), np.split(why, cuts)))


def rows_for(batch: UpdateBatch, rows: np.ndarray, why: np.ndarray) -> UpdateBatch:
    """The updates a worker applies: an endpoint row becomes ``add_vertex`` of that endpoint."""
    part = batch.take(rows)
    ends = (why == END_A) | (why == END_B)
    if not ends.any():
        return part
    op, a = part.op.copy(), part.a.copy()
    op[ends] = ADD_VERTEX
    a[why == END_B] = part.b[why == END_B]
    return UpdateBatch(op, a, part.b, part.attribute, part.value, part.producer, part.seq, part.time,
                       part.text_values)


class Worker:
    """One worker's live state: the edges of the buckets it owns, their endpoints (owned or ghost),
    its owned vertices and their attributes. ``owner`` maps bucket -> worker (shared, replaced on
    rescale)."""

    def __init__(self, index: int, state: State, owner: np.ndarray):
        self.index = index
        self.state = state
        self.owner = owner

    def apply(self, batch: UpdateBatch):
        self.state, outcome = apply_batch(self.state, batch)
        return outcome

    def _owned_mask(self, vids: np.ndarray) -> np.ndarray:
        return self.owner[bucket_of(self.state.ids.to_numpy()[vids], len(self.owner))] == self.index

    def owned(self) -> np.ndarray:
        """Alive vids of this worker's state that it owns."""
        vids = np.flatnonzero(self.state.alive)
        return vids[self._owned_mask(vids)]

    def ghosts(self) -> tuple[np.ndarray, np.ndarray]:
        """(id, local label) of alive vertices held here that another worker owns: the boundary."""
        vids = np.flatnonzero(self.state.alive)
        vids = vids[~self._owned_mask(vids)]
        return self.state.ids.to_numpy()[vids], self.state.comp[vids]

    def labels_of(self, ids: np.ndarray) -> np.ndarray:
        """Local label of vertices ``ids`` (-1: not alive here)."""
        vids = self.state.vids_of(ids)
        return np.where(vids >= 0, self.state.comp[np.maximum(vids, 0)], -1)

    def num_labels(self) -> int:
        """Size of the local label space (labels are vids)."""
        return len(self.state.comp)

    def edge_frame(self) -> pd.DataFrame:
        return edge_frame(self.state)

    def vertex_ids(self) -> np.ndarray:
        return self.state.ids.to_numpy()[self.owned()]

    def owned_labels(self, selector=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(id, local label, id of the label's vertex) of owned alive vertices, all of them or those
        ``selector`` picks (as :func:`hatrick.live.select_vertices`)."""
        vids = self.owned()
        if isinstance(selector, dict) and set(selector) - {"id"} - set(self.state.vattrs):
            vids = vids[:0]                           # an attribute none of its vertices ever had
        elif selector is not None:
            vids = np.intersect1d(vids, select_vertices(self.state, selector))
        ids = self.state.ids.to_numpy()
        return ids[vids], self.state.comp[vids], ids[self.state.comp[vids]]

    def vertex_attributes(self) -> set:
        return set(self.state.vattrs)

    def empty(self, index: int) -> "Worker":
        """A new worker with no buckets yet and this one's attribute kinds and template."""
        return Worker(index, _rebuild(self.state, []), self.owner)

    def _edge_buckets(self) -> tuple[np.ndarray, np.ndarray]:
        return edge_buckets(self.state, len(self.owner))

    def extract(self, buckets: np.ndarray) -> bytes:
        """Remove buckets ``buckets`` from this worker and return them as a payload for their new
        owner: edges (with multiplicity and attributes) and owned vertices (with attributes)."""
        s = self.state
        moving = np.zeros(len(self.owner), bool)
        moving[buckets] = True
        slots, edge_bucket = self._edge_buckets()
        alive = np.flatnonzero(s.alive)
        alive = alive[self._owned_mask(alive)]
        vertex_moving = moving[bucket_of(s.ids.to_numpy()[alive], len(self.owner))]
        payload = _part(s, slots[moving[edge_bucket]], alive[vertex_moving])
        self.state = _rebuild(s, [_part(s, slots[~moving[edge_bucket]], alive[~vertex_moving])])
        return datafile.dumps(payload)

    def absorb(self, payload: bytes) -> None:
        """Take over buckets extracted by another worker."""
        s = self.state
        slots, _ = self._edge_buckets()
        alive = np.flatnonzero(s.alive)
        self.state = _rebuild(s, [_part(s, slots, alive[self._owned_mask(alive)]), datafile.loads(payload)])


def edge_buckets(s: State, num_buckets: int) -> tuple[np.ndarray, np.ndarray]:
    """Live edge slots of ``s`` and the bucket each belongs to (its source's; undirected: the
    smaller of its endpoints' buckets)."""
    slots = s.live_slots()
    ids = s.ids.to_numpy()
    bs = bucket_of(ids[s.src[slots]], num_buckets)
    if s.directed:
        return slots, bs
    return slots, np.minimum(bs, bucket_of(ids[s.dst[slots]], num_buckets))


def _part(s: State, slots: np.ndarray, vids: np.ndarray) -> dict:
    """Edges ``slots`` and vertices ``vids`` of ``s`` as plain arrays (ids, not vids)."""
    ids = s.ids.to_numpy()
    return {"src": ids[s.src[slots]], "dst": ids[s.dst[slots]], "mult": s.mult[slots],
            "eattrs": {n: {"values": c.values[slots], "present": c.present[slots]} for n, c in s.eattrs.items()},
            "vids": ids[vids],
            "vattrs": {n: {"values": c.values[vids], "present": c.present[vids]} for n, c in s.vattrs.items()}}


def _rebuild(like: State, parts: list[dict]) -> State:
    """A state holding ``parts`` (their vertices, edges with multiplicity, attributes), with the
    kinds, static names and template values of ``like``; components from scratch. (Edge ``touched``
    times restart at the state's time: aging counts from the move.)"""
    parts = parts or [_part(like, np.zeros(0, np.int64), np.zeros(0, np.int64))]
    src = np.concatenate([np.repeat(p["src"], p["mult"]) for p in parts])
    dst = np.concatenate([np.repeat(p["dst"], p["mult"]) for p in parts])
    vertex_ids = np.concatenate([p["vids"] for p in parts])
    all_ids = pd.unique(np.concatenate([vertex_ids, src, dst]))
    index = pd.Index(all_ids)
    vcols = {}
    for name, kind in like.vkinds.items():
        values = np.full(len(all_ids), None, dtype=object)
        for p in parts:
            column = p["vattrs"].get(name)
            if column is not None and len(p["vids"]):
                at = index.get_indexer(p["vids"])[column["present"]]
                values[at] = np.asarray(column["values"], dtype=object)[column["present"]]
        vcols[name] = (kind, values)
    ecols = {}
    for name, kind in like.ekinds.items():
        chunks = []
        for p in parts:
            column = p["eattrs"].get(name)
            if column is None:
                chunks.append(np.full(int(np.sum(p["mult"])), None, dtype=object))
            else:
                values = np.where(column["present"], np.asarray(column["values"], dtype=object), None)
                chunks.append(np.repeat(values, p["mult"]))
        ecols[name] = (kind, np.concatenate(chunks) if chunks else np.zeros(0, object))
    state = build_state(all_ids, src, dst, like.directed, vcols, ecols, like.static_vertex, like.static_edge,
                        like.time)
    return State(state.directed, state.ids, state.alive, state.comp, state.vattrs, dict(like.vkinds), state.keys,
                 state.key_slots, state.src, state.dst, state.mult, state.touched, state.eattrs, dict(like.ekinds),
                 like.static_vertex, like.static_edge, like.batch, like.time, state.free, like.template)


def merge_components(workers: list[Worker]) -> list[np.ndarray]:
    """Per worker, a global component number for each local label (indexed by vid), joined through
    ghosts only: the driver sees each worker's (ghost id, label) pairs and the owners' labels of
    those ids, so its work follows the boundary, not the graph."""
    owner = workers[0].owner
    offsets = np.cumsum([0] + [w.num_labels() for w in workers])
    left, right = [], []
    for w in workers:
        ids, labels = w.ghosts()
        if not len(ids):
            continue
        owners = owner[bucket_of(ids, len(owner))]
        for o in np.unique(owners):
            mine = owners == o
            theirs = workers[o].labels_of(ids[mine])
            known = theirs >= 0
            left.append(offsets[w.index] + labels[mine][known])
            right.append(offsets[o] + theirs[known])
    total = int(offsets[-1])
    group = np.arange(total)
    if left:
        u, v = np.concatenate(left), np.concatenate(right)
        group = connected_components(sp.csr_matrix((np.ones(len(u)), (u, v)), shape=(total, total)),
                                     directed=False)[1]
    return [group[offsets[w.index]:offsets[w.index + 1]] for w in workers]


class PartitionedGraph:
    """The live graph over in-process workers, bucket ``b`` on worker ``owner[b]`` (see the module
    docstring). One worker holds ``state`` itself."""

    def __init__(self, state: State, owner: np.ndarray):
        owner = np.asarray(owner, np.int64)
        self.directed = state.directed
        count = int(owner.max()) + 1
        if count == 1:
            self.workers = [Worker(0, state, owner)]
            return
        slots, edge_bucket = edge_buckets(state, len(owner))
        alive = np.flatnonzero(state.alive)
        vertex_owner = owner[bucket_of(state.ids.to_numpy()[alive], len(owner))]
        self.workers = [Worker(i, _rebuild(state, [_part(state, slots[owner[edge_bucket] == i],
                                                         alive[vertex_owner == i])]), owner)
                        for i in range(count)]

    @property
    def owner(self) -> np.ndarray:
        return self.workers[0].owner

    def apply(self, batch: UpdateBatch) -> tuple[int, pd.DataFrame]:
        """Apply ``batch`` on every worker; returns (updates applied, rejected ones) by the owners' verdicts."""
        applied, rejected = 0, []
        for w, (rows, why) in zip(self.workers, route(batch, self.owner, self.directed)):
            outcome = w.apply(rows_for(batch, rows, why))
            mine = outcome.rejected
            own = rows[why == OWN]
            if len(mine) and len(own) < len(rows):        # drop verdicts on rows another worker owns
                keys = pd.MultiIndex.from_arrays([batch.producer[own], batch.seq[own]])
                mine = mine[pd.MultiIndex.from_arrays([mine.producer, mine.seq]).isin(keys)]
            applied += len(own) - len(mine)
            if len(mine):
                rejected.append(mine)
        return applied, (pd.concat(rejected, ignore_index=True) if rejected else empty_rejected())

    def edges(self) -> pd.DataFrame:
        return pd.concat([w.edge_frame() for w in self.workers], ignore_index=True)

    def vertices(self) -> np.ndarray:
        return np.concatenate([w.vertex_ids() for w in self.workers])

    def components(self) -> pd.DataFrame:
        """``id`` and ``component`` (the original id of one member) of every alive vertex."""
        ids, group, rep = self._labelled(None, merge_components(self.workers))
        first = pd.Series(rep).groupby(group).first()              # workers in order, then arrival
        return pd.DataFrame({"id": ids, "component": first.reindex(group).to_numpy()})

    def _labelled(self, selector, groups) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(id, global component number, id of the local label's vertex) of the owned alive vertices
        ``selector`` picks (None: all), worker by worker."""
        out = [w.owned_labels(selector) for w in self.workers]
        return (np.concatenate([ids for ids, _, _ in out]),
                np.concatenate([group[labels] for group, (_, labels, _) in zip(groups, out)]),
                np.concatenate([rep for _, _, rep in out]))

    def reachable(self, sources, sinks) -> pd.DataFrame:
        """Pairs (``source``, ``sink``) joined by a path, for undirected graphs: both in one
        component after the boundary merge. Selectors as in :meth:`hatrick.stream.Stream.reachable`."""
        if self.directed:
            raise NotImplementedError("directed reachability across workers is not implemented yet")
        known = set().union(*(w.vertex_attributes() for w in self.workers)) | {"id"}
        for selector in (sources, sinks):
            if isinstance(selector, dict) and set(selector) - known:
                missing = sorted(set(selector) - known)[0]
                raise KeyError(f"no vertex attribute '{missing}' (have: {sorted(known - {'id'})})")
        groups = merge_components(self.workers)
        s_ids, s_group, _ = self._labelled(sources, groups)
        t_ids, t_group, _ = self._labelled(sinks, groups)
        pairs = pd.DataFrame({"source": s_ids, "g": s_group}).merge(pd.DataFrame({"sink": t_ids, "g": t_group}),
                                                                    on="g")
        return pairs[["source", "sink"]].reset_index(drop=True)

    def rescale(self, owner_after: np.ndarray) -> int:
        """Move the buckets whose owner changes, worker to worker (added workers start empty,
        removed ones hand everything over); returns the bytes sent."""
        owner_after = np.asarray(owner_after, np.int64)
        count = int(owner_after.max()) + 1
        while len(self.workers) < count:
            self.workers.append(self.workers[0].empty(len(self.workers)))
        moves = np.flatnonzero(owner_after != self.owner)
        sent, payloads = 0, []
        for w in self.workers:
            out = moves[self.owner[moves] == w.index]
            for target in np.unique(owner_after[out]):
                payload = w.extract(out[owner_after[out] == target])
                sent += len(payload)
                payloads.append((int(target), payload))
        self.workers = self.workers[:count]
        for w in self.workers:
            w.owner = owner_after
        for target, payload in payloads:
            self.workers[target].absorb(payload)
        return sent
