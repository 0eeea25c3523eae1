"""The live graph split over workers by bucket: routing, per-worker state, boundary merge, migration.

The live graph of every :class:`hatrick.stream.Stream` (issue 21): ``g.stream(workers=N)`` has N
workers; the embedded default is N = 1 of this same code. Every worker runs the same
:func:`hatrick.live.apply_batch` on its own :class:`hatrick.live.State`; one worker holding every
bucket is exactly the single-state graph (no ghosts, so the merges below are the identity and are
skipped).

Ownership: a vertex belongs to the worker owning its bucket (:mod:`hatrick.buckets`); an edge to the owner of its
source's bucket (undirected: one of its endpoints', :func:`undirected_bucket`), where its endpoints are
also kept as *ghosts* (vertices without attributes). Routing a batch (:func:`route`) is O(batch)
work on the driver (a hash pass per end and one numba pass that deals the rows out; each worker
then gets only its rows): edge ops go to the edge's owner, vertex ops to the vertex's owner, an
``add_edge`` also tells its endpoints' owners that they exist, and a ``remove_vertex`` goes to
every worker (each drops the vertex's edges it holds); the owner's verdict is the update's outcome.

Components: each worker labels its own vertices (ghosts included) with local components. The
workers send their ghosts' labels straight to the ghosts' owners (:meth:`Worker.send_ghosts`;
only those that changed since the last exchange, the owner keeps the rest), each owner sends the
pairs of labels they join, repeats dropped (:meth:`Worker.join_ghosts`), to one worker, the merger,
which joins them (:func:`merge_components`, :meth:`Worker.merge_labels`) and answers global
numbers for the labels the driver asks about (:meth:`Worker.global_labels`):
the boundary (on a graph without locality, a fixed share of V) never reaches the driver, which
holds only the labels of the vertices a result names. The exchange starts with the commit
of a batch that live results will read, and its merge is kept until the graph changes. Labels are original ids of one member (for
one worker, the smallest by arrival, as in :mod:`hatrick.live`). Undirected reachability
between selected vertices follows from the merged components; directed reachability from each
worker's pairs between its selected vertices and its boundary (entries and ghosts), followed
on the driver (:meth:`PartitionedGraph._ask_directed_reach`).

The driver reaches workers only through requests (:meth:`Worker.request`), so a worker in a
Spark task (:class:`hatrick.executors.RemoteWorker`, the same requests over a socket) stands in
for one in the driver's process; requests to all workers are sent before any answer is read,
so the workers of a batch run at once. A batch is applied
in two phases (:meth:`PartitionedGraph.stage`, then :meth:`~PartitionedGraph.commit` or
:meth:`~PartitionedGraph.abandon`), so the stream makes it durable before any worker shows it and
a failure on one worker changes none.

Snapshots are written by the workers, each staging its buckets' part
(:meth:`Worker.stage_instance_part`) and writing the aligned files of its share of the GoFS
partitions (:meth:`Worker.write_instance_partitions`); the driver commits the instance once.
CGQL's live Reach, Cluster and Evolved run on the workers named by an ``on_batch`` view
(:meth:`Worker.pattern_step`, :mod:`hatrick.cgql.onworkers`: summaries that grow with the
boundary, clusters and matched pairs reach the driver; what a query remembers of its members
moves with their buckets). The view's ``vertices()``/``edges()`` frames (read by other callbacks
and by queries with ``alias.*`` wildcards) are the workers' own frames, sent when first read:
O(graph) on the driver, though no state is rebuilt there; :meth:`PartitionedGraph.gather`
(``Worker.part`` from every worker, rebuilt: O(graph), free for one worker) is left for inspection.

Migration (:meth:`Worker.extract` / :meth:`Worker.absorb`): the moved buckets' edges, owned
vertices and attributes travel as a :mod:`hatrick.datafile` payload from the old owner to the
new one; nothing else moves.
"""
from __future__ import annotations

import dataclasses
import queue
import threading
import time

import numpy as np
import pandas as pd
from numba import njit

from gofs.numba_cache import serialise_compilation
from hatrick import datafile
from hatrick.live import (_SHIFT, GraphView, State, _link, apply_batch, build_state, components_frame, edge_frame,
                          reachable_frame, reachable_in, select_vertices, vertex_frame)
from hatrick.peers import Mailbox, Outbox
from hatrick.reachability import reachable_pairs, same_label_pairs
from hatrick.buckets import Buckets
from gofs.instance_parts import stage_part, write_partition, write_topology
from hatrick.snapshot import instance_part
from hatrick.statefile import write_state_file
from hatrick.updates import (ADD_EDGE, ADD_VERTEX, IS_VERTEX_OP, REMOVE_VERTEX, UpdateBatch, absent_column,
                             empty_rejected, is_absent)

serialise_compilation()  # one compilation at a time on this machine: numba's kernel cache stays whole


OWN, END_A, END_B, BROADCAST = range(4)     # why a worker gets a row
GHOSTS, JOINS, BUCKETS = b"g", b"j", b"b"    # what a payload between workers holds (its first byte)
MERGER = 0                                   # the worker that merges the boundary's label pairs
MOVE_SECONDS = 120.0                         # how long a worker waits for buckets sent to it


def route(batch: UpdateBatch, owner: np.ndarray, directed: bool, bucket_a: np.ndarray | None = None,
          buckets: Buckets | None = None) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per worker 0..W-1: the rows of ``batch`` it applies, in batch order, and why: ``OWN`` (its
    verdict is the update's), ``END_A``/``END_B`` (it owns that endpoint of an ``add_edge`` held
    elsewhere: the vertex exists) or ``BROADCAST`` (a ``remove_vertex`` of a vertex it does not own).
    A row reaches a worker for one reason at most (an edge's owner owns one of its ends), so the
    rows are dealt out in one pass over the batch (:func:`_deal`, which also finds each row's
    owners from the ends' buckets under ``buckets``, default hashed): no sort. ``bucket_a``: the
    buckets of ``batch.a``, where the caller has them (the stream's buffer counts the batch by them)."""
    return deal(batch, owner, directed, bucket_a, buckets)[0]


def deal(batch: UpdateBatch, owner: np.ndarray, directed: bool, bucket_a: np.ndarray | None = None,
         buckets: Buckets | None = None) -> tuple[list[tuple[np.ndarray, np.ndarray]], list[UpdateBatch]]:
    """(:func:`route`'s rows and reasons per worker, the updates each worker applies). An endpoint
    row becomes ``add_vertex`` of that endpoint. Every column is taken for all workers at once, in
    the pass that deals the rows out (:func:`_deal`; object-typed ids and the attribute and value
    columns by one numpy take over every worker's rows): each worker's columns are slices of
    those (its own rows; never views of the caller's batch)."""
    workers = int(owner.max()) + 1 if len(owner) else 1
    num_buckets = len(owner)
    buckets = buckets or Buckets()
    if bucket_a is None:
        bucket_a = buckets.of(batch.a, num_buckets)
    numeric_ids = batch.a.dtype == np.int64 and batch.b.dtype == np.int64
    codes, names = batch.producer_codes or (_NO_CODES, None)
    rows, why, offsets, op, a, b, seq, time, codes = _deal(
        batch.op, bucket_a, buckets.of(batch.b, num_buckets), owner, directed, workers, IS_VERTEX_OP,
        batch.a if numeric_ids else _NO_IDS, batch.b if numeric_ids else _NO_IDS, batch.seq, batch.time, codes)
    if not numeric_ids:
        a, b = batch.a[rows], batch.b[rows]
        end_b = np.flatnonzero(why == END_B)
        a[end_b] = b[end_b]
    attribute, value = (_column_part(column, rows, len(rows)) for column in (batch.attribute, batch.value))
    producer = batch.producer[rows] if names is None else None
    parts = []
    for w in range(workers):
        at = slice(offsets[w], offsets[w + 1])
        count = int(offsets[w + 1] - offsets[w])
        parts.append(UpdateBatch(op[at], a[at], b[at], _column_part(attribute, at, count),
                                 _column_part(value, at, count),
                                 None if producer is None else producer[at], seq[at], time[at],
                                 batch.text_values, None if names is None else (codes[at], names)))
    return [(rows[offsets[w]:offsets[w + 1]], why[offsets[w]:offsets[w + 1]]) for w in range(workers)], parts


def _column_part(column: np.ndarray, rows, count: int) -> np.ndarray:
    """``column[rows]`` (``count`` of them: a new array for an index array, a view for a slice); an
    absent column (:func:`hatrick.updates.absent_column`) stays one null."""
    return absent_column(count) if is_absent(column) else column[rows]


_NO_IDS = np.zeros(0, np.int64)             # object-typed ids: taken by numpy, not by _deal
_NO_CODES = np.zeros(0, np.int32)           # a batch without producer codes


@njit(cache=True, nogil=True)
def _deal(op, bucket_a, bucket_b, owner, directed, workers, is_vertex_op, a, b, seq, time, codes):
    """Rows and reasons of :func:`route`, worker after worker (worker w's at offsets[w]:offsets[w+1]),
    and the columns op, a, b, seq, time and producer codes of those rows, taken in the same pass
    (an endpoint row's op is ``add_vertex`` and its ``a`` that endpoint; ``a``/``b`` empty: not
    taken, nor ``codes`` where empty). A row's owner is its edge's (:func:`undirected_bucket`, or
    the source's), a vertex op's its vertex's (``bucket_b`` is not read for it). The owner is one
    of the ends' owners, so an ``add_edge``'s other end's owner is their sum less it: counted
    without a branch per row (an edge's owner is a coin flip, which a branch would mispredict
    half the time). Only an ``add_edge`` whose ends have two owners writes a second row: a branch
    costs less than writing every other row's end to a spare row (measured: half the time with
    buckets aligned to partitions, where few edges cross, a fifth less with hashed ones)."""
    n = len(op)
    target, other = np.empty(n, np.int64), np.empty(n, np.int64)
    counts = np.zeros(workers + 1, np.int64)
    broadcasts = 0
    for i in range(n):
        ba = bucket_a[i]
        bb = ba if is_vertex_op[op[i]] else bucket_b[i]
        oa, ob = owner[ba], owner[bb]
        t = oa if directed else owner[_edge_bucket(ba, bb)]
        o = oa + ob - t
        target[i], other[i] = t, o
        counts[t + 1] += 1
        counts[o + 1] += (op[i] == ADD_EDGE) & (o != t)
        broadcasts += op[i] == REMOVE_VERTEX
    if broadcasts:
        for i in range(n):
            if op[i] == REMOVE_VERTEX:
                counts[1:] += 1
                counts[target[i] + 1] -= 1
    offsets = np.cumsum(counts)
    total = offsets[-1]
    ids, coded = len(a) == n, len(codes) == n
    rows = np.empty(total, np.int64)
    why = np.empty(total, np.int8)
    op_out, seq_out, time_out = np.empty(total, op.dtype), np.empty(total, seq.dtype), np.empty(total, time.dtype)
    a_out, b_out = np.empty(total if ids else 0, a.dtype), np.empty(total if ids else 0, b.dtype)
    codes_out = np.empty(total if coded else 0, codes.dtype)
    fill = offsets[:-1].copy()
    for i in range(n):
        t, o = target[i], other[i]
        at = fill[t]
        rows[at], why[at], op_out[at], seq_out[at], time_out[at] = i, OWN, op[i], seq[i], time[i]
        if ids:
            a_out[at], b_out[at] = a[i], b[i]
        if coded:
            codes_out[at] = codes[i]
        fill[t] += 1
        if o != t and op[i] == ADD_EDGE:
            at = fill[o]
            end_b = owner[bucket_a[i]] != o
            rows[at], why[at], op_out[at], seq_out[at], time_out[at] = i, END_A + np.int8(end_b), ADD_VERTEX, \
                seq[i], time[i]
            if ids:
                a_out[at], b_out[at] = b[i] if end_b else a[i], b[i]
            if coded:
                codes_out[at] = codes[i]
            fill[o] += 1
        if op[i] == REMOVE_VERTEX:
            for w in range(workers):
                if w != t:
                    at = fill[w]
                    rows[at], why[at], op_out[at], seq_out[at], time_out[at] = i, BROADCAST, op[i], seq[i], time[i]
                    if ids:
                        a_out[at], b_out[at] = a[i], b[i]
                    if coded:
                        codes_out[at] = codes[i]
                    fill[w] += 1
    return rows, why, offsets, op_out, a_out, b_out, seq_out, time_out, codes_out


class Worker:
    """One worker's live state: the edges of the buckets it owns, their endpoints (owned or ghost),
    its owned vertices and their attributes. ``owner`` maps bucket -> worker (shared, replaced on
    rescale); ``buckets`` (:class:`hatrick.buckets.Buckets`, default hashed) puts each id in a bucket."""

    def __init__(self, index: int, state: State, owner: np.ndarray, buckets: Buckets | None = None):
        self.index = index
        self.state = state
        self.owner = owner
        self.buckets = buckets or Buckets()
        self._staged = None
        self.peer_address = None        # where other workers send it buckets (None: through the caller)
        self._mailbox, self._key = None, None
        self._outboxes: dict = {}       # by peer address: the channel this worker sends that peer payloads on
        self._writing: list[threading.Thread] = []
        self._written: queue.Queue = queue.Queue()
        self._entries = (None, np.zeros(0, np.int64))     # (ids of the state then, vids): see join_ghosts
        self._sent = {"ids": None, "owner": None, "label": None, "count": 0}   # the last send_ghosts, for changes
        self._staged_relabelled = (None, None)   # (the state a staged batch was applied to, the vids it relabels)
        self._relabelled = (None, None)          # (state now, vids relabelled by the batches committed since the
                                                 # last send_ghosts; None: unknown, e.g. a move rebuilt the state)
        self._held: dict = {}           # by sender: the ghosts it holds of vertices owned here (join_ghosts)
        self._firsts = (np.zeros(0, np.int64), np.zeros(0, np.int64))    # _ghost_pairs' per-label scratch, all -1
        self._early: dict = {}          # payloads that arrived before they were asked for, by kind
        self._joins: list = []          # on the merger: label pairs joined here, until merge_labels
        self._merged = None             # on the merger: the last merge_labels result
        self.patterns: dict = {}        # by live CGQL sub-query: what its evaluation here keeps (pattern_step)
        self._bucket_cache = (None, 0, np.zeros(0, np.int64))     # (ids hashed, bucket count, their buckets)
        self._owned_cache = (None, None, np.zeros(0, bool))       # (ids, owner map, which vids are owned here)
        self.busy: dict = {}            # seconds in requests by name, "cpu": their thread CPU time ("cpu:NAME" by
                                        # request); in a Spark task "answering" (wall) and "answering cpu" with the
                                        # (un)pickling, "process cpu": the process's CPU so far (every thread)

    def listen(self, host: str, key) -> tuple:
        """Take buckets straight from other workers on ``host`` (connections proving ``key``, a
        :class:`gopher.channel.RunKey`); returns the address to give them."""
        self._key, self._mailbox = key, Mailbox(host, key)
        self.peer_address = self._mailbox.address
        return self.peer_address

    def request(self, name: str, *args) -> "_Done":
        """Call method ``name`` now (or read attribute ``name``, e.g. ``state``); ``.result()`` is
        its value. The driver reaches every worker this way, so one in a Spark task
        (:class:`hatrick.executors.RemoteWorker`, the same requests over a socket) can stand in
        for this one."""
        clock, cpu = time.perf_counter(), time.thread_time()
        found = getattr(self, name)
        value = found(*args) if callable(found) else found
        cpu = time.thread_time() - cpu
        self.busy[name] = self.busy.get(name, 0.0) + time.perf_counter() - clock
        self.busy["cpu"] = self.busy.get("cpu", 0.0) + cpu
        self.busy[f"cpu:{name}"] = self.busy.get(f"cpu:{name}", 0.0) + cpu
        return _Done(value)

    def pattern_step(self, step: str, key: str, *args):
        """One step of a live CGQL pattern's evaluation over this worker's state (``step`` of
        :data:`hatrick.cgql.onworkers.STEPS`; ``key`` names the sub-query whose memory it uses)."""
        from hatrick.cgql.onworkers import STEPS

        return STEPS[step](self, key, *args)

    def forget_patterns(self, keys: list) -> None:
        """Drop what live CGQL sub-queries ``keys`` keep here (their query was cancelled)."""
        for key in keys:
            self.patterns.pop(key, None)

    def pattern_keys(self) -> list:
        """The live CGQL sub-queries whose memory this worker keeps."""
        return sorted(self.patterns)

    def set_owner(self, owner: np.ndarray) -> None:
        self.owner = owner

    def empty_state(self) -> State:
        """The state of a worker with no buckets yet and this one's attribute kinds and template."""
        return _rebuild(self.state, [])

    def close(self) -> None:
        """Finish sending payloads and writing state files, and stop taking payloads."""
        for outbox in self._outboxes.values():
            outbox.close()
        self._outboxes = {}
        for thread in self._writing:
            thread.join()
        if self._mailbox is not None:
            self._mailbox.close()

    def abort(self) -> None:
        self.close()

    def stage(self, batch: UpdateBatch) -> tuple[int, pd.DataFrame | None]:
        """Apply ``batch`` to a new version of the state, shown only after :meth:`commit`. Answers
        (updates applied here, the rejected ones or None where there are none: an empty frame
        costs a worker in a Spark task and the driver more to send and rebuild than the rest)."""
        self._staged, outcome = apply_batch(self.state, batch)
        self._staged_relabelled = (self.state, outcome.relabelled)
        return outcome.applied, outcome.rejected if len(outcome.rejected) else None

    def write_state(self, path: str, wait: bool) -> None:
        """Write the staged state (the committed one if none is staged) to ``path`` as a full
        checkpoint's state file (:func:`hatrick.statefile.write_state_file`): now, or (``wait``
        False) on a thread while this worker goes on with later batches; :meth:`written` reports it."""
        state = self._staged if self._staged is not None else self.state
        if wait:
            write_state_file(path, state)
            return
        thread = threading.Thread(target=self._write_behind, args=(path, state), daemon=True,
                                  name=f"hatrick-state-{self.index}")
        thread.start()
        self._writing = [t for t in self._writing if t.is_alive()] + [thread]

    def _write_behind(self, path: str, state: State) -> None:
        try:
            write_state_file(path, state)
            self._written.put((path, None))
        except Exception as exc:
            self._written.put((path, repr(exc)))

    def written(self, wait: bool = False) -> list:
        """``(path, error or None)`` of each state file :meth:`write_state` finished since last
        asked (``wait``: once those it is writing are done)."""
        for thread in self._writing if wait else []:
            thread.join()
        done = []
        while not self._written.empty():
            done.append(self._written.get_nowait())
        return done

    def commit(self) -> list:
        """Show the staged state; answers :meth:`written` (so the driver learns of finished state
        files with no request of its own)."""
        (applied_to, relabelled), (followed, since) = self._staged_relabelled, self._relabelled
        known = since is not None and followed is applied_to          # every state since the last exchange
        self._relabelled = (self._staged, since + [relabelled] if known else None)
        self.state, self._staged, self._staged_relabelled = self._staged, None, (None, None)
        return self.written()

    def abandon(self) -> None:
        self._staged = None

    def loaded_clock(self) -> tuple[bool, int, float]:
        """(directed, batches applied, latest event time) of the loaded graph."""
        return bool(self.state.directed), int(self.state.batch), float(self.state.time)

    def clock(self) -> tuple[int, float]:
        """(batches applied, latest event time applied here)."""
        return int(self.state.batch), float(self.state.time)

    def sizes(self) -> tuple[int, int]:
        """(owned alive vertices, live edge copies held here)."""
        return len(self.owned()), int(self.state.mult.sum())

    def held_edges(self) -> np.ndarray:
        """Live edge copies held here per bucket (what the planner evens out)."""
        slots, edge_bucket = self._edge_buckets()
        return np.bincount(edge_bucket, weights=self.state.mult[slots], minlength=len(self.owner))

    def keep(self, owner: np.ndarray) -> None:
        """Take ``owner`` and drop from the state every bucket it gives another worker (a worker
        that loaded the whole graph keeps its part; one owning every bucket keeps everything)."""
        self.owner = owner = np.asarray(owner, np.int64)
        if (owner == self.index).all():
            return
        s = self.state
        slots, edge_bucket = self._edge_buckets()
        self.state = _rebuild(s, [_part(s, slots[owner[edge_bucket] == self.index], self.owned())])

    def bucket_state(self) -> np.ndarray:
        """Live state per bucket held here: edge copies by edge bucket plus owned alive vertices."""
        b = len(self.owner)
        slots, edge_bucket = self._edge_buckets()
        owned = self.owned()
        return (np.bincount(edge_bucket, weights=self.state.mult[slots], minlength=b)
                + np.bincount(self._vid_buckets()[owned], minlength=b))

    def stale_edges(self, ttl: float, now: float) -> tuple[np.ndarray, np.ndarray]:
        """(src, dst) ids of every edge copy held here not added or set within ``ttl`` of ``now``."""
        s = self.state
        live = s.live_slots()
        stale = live[s.touched[live] < now - ttl]
        slots = np.repeat(stale, s.mult[stale])
        ids = s.ids.to_numpy()
        return ids[s.src[slots]], ids[s.dst[slots]]

    def vertex_frame(self) -> pd.DataFrame:
        """Owned alive vertices with their attributes."""
        return vertex_frame(self.state, self.owned())

    def stage_instance_part(self, target) -> tuple[dict, object, dict]:
        """Stage this worker's part of snapshot instance ``target`` (a
        :class:`gofs.instance_parts.Target`; :func:`hatrick.snapshot.instance_part`): its owned
        vertices, the edges it holds and the template edges of the buckets it owns (the template's
        vids are the same on every worker, so their buckets are found here). Answers (attribute
        types, the vertices it owns beyond the template with a partition hint, its counts)."""
        t = self.state.template
        rows = np.arange(len(t.keys))
        if not (self.owner == self.index).all():
            u, v = t.keys >> _SHIFT, t.keys & np.int64((1 << int(_SHIFT)) - 1)
            buckets = self._vid_buckets()
            edge_bucket = buckets[u] if self.state.directed else undirected_bucket(buckets[u], buckets[v])
            rows = rows[self.owner[edge_bucket] == self.index]
        part = instance_part(self.state, self.owned(), rows, target.offsets)
        return stage_part(target, self.index, part), part["added_vertices"], part["counts"]

    def write_instance_partitions(self, target, partitions: list[int], vertex_schema, edge_schema,
                                  added_edge_schema, topology: bool):
        """Write the row-aligned value files of ``partitions`` of instance ``target`` from every
        worker's staged part (:func:`gofs.instance_parts.write_partition`) and, if ``topology``,
        its topology file (answered: what the log entry records)."""
        for p in partitions:
            write_partition(target, p, vertex_schema, edge_schema)
        return write_topology(target, added_edge_schema) if topology else None

    def part(self) -> dict:
        """Everything this worker owns, as plain arrays (for :meth:`PartitionedGraph.gather`)."""
        return _part(self.state, self.state.live_slots(), self.owned())

    def _owned_vids(self) -> np.ndarray:
        """Whether this worker owns each vid of the state: kept until the ids or the owner map
        change, so the boundary exchange and the selections of every batch read it in O(1) per vid."""
        ids, owner = self.state.ids, self.owner
        cached_ids, cached_owner, owned = self._owned_cache
        if cached_ids is not ids or cached_owner is not owner:
            if (owner == self.index).all():                  # one worker: it owns everything (no hashing)
                owned = np.ones(len(ids), bool)
            else:
                owned = owner[self._vid_buckets()] == self.index
            self._owned_cache = (ids, owner, owned)
        return owned

    def _vid_buckets(self) -> np.ndarray:
        """The bucket of every vid of the state. Hashed once per vertex, not per batch: a batch
        only appends ids (a state rebuilt by a move is checked against the ids hashed before)."""
        ids, count = self.state.ids, len(self.owner)
        hashed, hashed_count, buckets = self._bucket_cache
        if ids is not hashed or count != hashed_count:
            known = len(hashed) if hashed is not None and count == hashed_count and len(hashed) <= len(ids) \
                and ids[:len(hashed)].equals(hashed) else 0
            buckets = np.concatenate([buckets[:known], self.buckets.of(ids.to_numpy()[known:], count)])
            self._bucket_cache = (ids, count, buckets)
        return buckets

    def _picked(self, selector) -> np.ndarray:
        """Owned alive vids ``selector`` picks (as :func:`hatrick.live.select_vertices`; none for an
        attribute none of this worker's vertices ever had)."""
        if _unknown(self.state, selector):
            return np.zeros(0, np.int64)
        vids = select_vertices(self.state, selector)
        return vids[self.state.alive[vids] & self._owned_vids()[vids]]

    def owned(self) -> np.ndarray:
        """Alive vids of this worker's state that it owns."""
        return np.flatnonzero(self.state.alive & self._owned_vids())

    def ghosts(self) -> np.ndarray:
        """Vids of the alive vertices held here that another worker owns: the boundary."""
        return np.flatnonzero(self.state.alive & ~self._owned_vids())

    def _template_size(self) -> int:
        """Vids below this are the loaded graph's ids in the same order on every worker."""
        return self.state.template.size if self.state.template is not None else 0

    def send_ghosts(self, peers: list) -> tuple[int, list, dict | None]:
        """First half of the boundary exchange: what changed among its :meth:`ghosts` with an edge
        here since the last exchange goes to their owners, worker ``o`` at ``peers[o]`` (one
        message to every other worker, empty ones too, on threads); with ``peers[o]`` None they
        are returned for the caller to hand over. A message holds (vid, id, local label) of each
        ghost whose label changed, appeared or went (label -1); the owner keeps the rest from
        earlier messages (:meth:`join_ghosts`), so a batch sends ~8% of the boundary on a random
        graph, not all of it. The changes are found among the vids the batches since relabelled
        (:func:`hatrick.live.apply_batch` reports them) and their labels' vertices
        (:func:`_ghost_updates`): work that follows what changed, not the vids. Everything is
        sent again (``full``) when the vids here were renumbered (a move rebuilt the state), the
        owner map changed or the states since are not known batch by batch.
        Answers (size of its label space, the vertex attributes it knows, those payloads)."""
        s, sent = self.state, self._sent
        followed, since = self._relabelled
        full = not self._same_ghost_numbering() or since is None or followed is not s
        n = len(s.comp)
        if full:
            candidates, before = np.arange(n, dtype=np.int64), np.zeros(0, np.int64)
            label, members = np.full(n, -1, np.int64), np.zeros(n, np.int64)
        else:
            candidates = _joined(since) if len(since) == 1 else np.unique(_joined(since))
            before, label, members = sent["comp"], _grown(sent["label"], n, -1), _grown(sent["members"], n, 0)
        changed = _ghost_updates(candidates, before, s.comp, s.alive, self._owned_vids(), members, label)
        self._sent = {"ids": s.ids, "owner": self.owner, "comp": s.comp, "label": label, "members": members,
                      "count": sent["count"] + 1}
        self._relabelled = (s, [])
        owners = self.owner[self._vid_buckets()[changed]]
        ids = s.ids.to_numpy()
        handed = {}
        for o, peer in enumerate(peers):
            if o != self.index:
                mine = changed[owners == o]
                payload = datafile.dumps({"sender": self.index, "full": full, "count": self._sent["count"],
                                          "ids": ids[mine], "vids": mine, "labels": label[mine],
                                          "labels_size": self.num_labels(), "template_size": self._template_size()})
                if peer is None:
                    handed[o] = payload
                else:
                    self._send(peer, GHOSTS, payload)
        return self.num_labels(), sorted(s.vattrs), handed or None

    def _same_ghost_numbering(self) -> bool:
        """Whether the last :meth:`send_ghosts` named vertices by the same vids as now and under the
        same owner map (a batch only appends ids; a move rebuilds the state and renumbers)."""
        sent = self._sent
        if sent["label"] is None or not np.array_equal(sent["owner"], self.owner):
            return False
        ids, before = self.state.ids, sent["ids"]
        return ids is before or (len(before) <= len(ids) and ids[:len(before)].equals(before))

    def join_ghosts(self, arriving: int, handed: list, merger=None) -> bytes | None:
        """Second half: from the ghosts other workers hold of vertices owned here (``arriving``
        messages sent by their :meth:`send_ghosts`, plus ``handed`` payloads, applied to what each
        sender sent before), the (sender, sender's label, label here) pairs they join, repeats
        dropped (:func:`_ghost_pairs`), so the merge follows label pairs, not the boundary's
        vertices. They go to the merger (worker :data:`MERGER`, at ``merger``; kept if this is
        it), so the driver never holds the boundary; with ``merger`` None they are returned for
        the caller to hand over. Those vertices are kept as this worker's entries (where paths
        come in, for :meth:`reach_summary`)."""
        messages = [datafile.loads(p) for p in handed] + [datafile.loads(self._receive(GHOSTS))
                                                          for _ in range(arriving)]
        self._held = {m["sender"]: self._held_ghosts(m) for m in messages}     # senders gone are dropped
        senders, theirs, mine, entries = [], [], [], []
        for sender, held in sorted(self._held.items()):
            label = held["label"]
            at = np.flatnonzero(label >= 0)                              # one vectorised pass, ascending
            split = min(held["template_size"], self._template_size())    # below: the same vid on both workers
            beyond = at[np.searchsorted(at, split):]
            vids_beyond = np.full(max(len(label) - split, 0), -1, np.int64)
            vids_beyond[beyond - split] = self.state.ids.get_indexer(held["ids"][beyond])
            their, my, here = _ghost_pairs(at, label, split, vids_beyond, self.state.alive, self.state.comp,
                                           *self._scratch(max(len(label), held["labels_size"])))
            senders.append(np.full(len(their), sender, np.int64))
            theirs.append(their)
            mine.append(my)
            entries.append(here)
        self._entries = (self.state.ids, _joined(entries))     # distinct per sender; ids only if a reach asks
        joins = {"owner": self.index, "size": self.num_labels(), "senders": _joined(senders),
                 "theirs": _joined(theirs), "mine": _joined(mine)}
        if self.index == MERGER:
            self._joins = [joins]
            return None
        payload = datafile.dumps(joins)
        if merger is None:
            return payload
        self._send(merger, JOINS, payload)
        return None

    def _scratch(self, their_labels: int) -> tuple[np.ndarray, np.ndarray]:
        """:func:`_ghost_pairs`' arrays by label (a sender's ``their_labels`` of them, and this worker's),
        all -1: kept between calls (each call sets back what it wrote), so a call costs the held
        ghosts, not two allocations the size of both label spaces."""
        first_mine, first_theirs = self._firsts
        if len(first_mine) < their_labels:
            first_mine = np.full(their_labels, -1, np.int64)
        if len(first_theirs) < self.num_labels():
            first_theirs = np.full(self.num_labels(), -1, np.int64)
        self._firsts = (first_mine, first_theirs)
        return self._firsts

    def exchange(self, peers: list, selectors: list) -> tuple:
        """The boundary exchange of a worker that reaches the others at ``peers``, in one request
        (one round trip from the driver, not four or more): :meth:`send_ghosts`,
        :meth:`join_ghosts` (its pairs to the merger), on the merger :meth:`merge_labels`, then
        :meth:`owned_labels` of each of ``selectors``; answers their answers in that order
        (None for merge_labels on the other workers)."""
        others = len(peers) - 1
        sent = self.send_ghosts(peers)
        joined = self.join_ghosts(others, [], peers[MERGER])
        merged = self.merge_labels(others, []) if self.index == MERGER else None
        return sent, joined, merged, [self.owned_labels(selector) for selector in selectors]

    def _held_ghosts(self, message: dict) -> dict:
        """What sender ``message["sender"]`` holds as ghosts of vertices owned here, by its vids
        (``label`` -1: none), after applying ``message`` to what it sent before."""
        held = None if message["full"] else self._held.get(message["sender"])
        if not message["full"] and (held is None or held["count"] + 1 != message["count"]):
            raise RuntimeError(f"hatrick worker {self.index}: ghost changes from worker {message['sender']} arrived "
                               f"out of order (message {message['count']}, held "
                               f"{None if held is None else held['count']})")
        vids = np.asarray(message["vids"], np.int64)
        size = int(vids.max()) + 1 if len(vids) else 0
        if held is None or size > len(held["label"]):       # grown by the vertices the sender added
            label = np.full(max(size, len(held["label"]) if held else 0), -1, np.int64)
            held_ids = np.empty(len(label), dtype=np.asarray(message["ids"]).dtype if held is None
                                else held["ids"].dtype)
            if held is not None:
                label[:len(held["label"])] = held["label"]
                held_ids[:len(held["ids"])] = held["ids"]
        else:                                               # updated in place: O(changes)
            label, held_ids = held["label"], held["ids"]
        label[vids] = message["labels"]
        held_ids[vids] = message["ids"]
        return {"label": label, "ids": held_ids, "count": message["count"],
                "labels_size": max(int(message["labels_size"]), held["labels_size"] if held else 0),
                "template_size": int(message["template_size"])}

    def merge_labels(self, arriving: int, handed: list) -> int:
        """On the merger, after its own :meth:`join_ghosts`: the other workers' label pairs
        (``arriving`` sent here, plus ``handed`` payloads) joined into global component numbers
        (:func:`merge_components`), kept for :meth:`global_labels`. Answers the number of
        boundary label pairs merged."""
        joins = self._joins + [datafile.loads(p) for p in handed] + [datafile.loads(self._receive(JOINS))
                                                                     for _ in range(arriving)]
        joins.sort(key=lambda j: j["owner"])
        offsets = np.cumsum([0] + [int(j["size"]) for j in joins])
        self._merged = merge_components(offsets, [(j["senders"], j["theirs"], j["mine"]) for j in joins],
                                        self._merged)
        self._joins = []
        return int(sum(len(j["mine"]) for j in joins))

    def global_labels(self, parts: list) -> list:
        """On the merger: the global component numbers of ``parts``, each (worker index, that
        worker's local labels), by the last :meth:`merge_labels`."""
        return [self._merged.of(index, labels) for index, labels in parts]

    def num_labels(self) -> int:
        """Size of the local label space (labels are vids)."""
        return len(self.state.comp)

    def edge_frame(self) -> pd.DataFrame:
        return edge_frame(self.state)

    def owned_labels(self, selector=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(id, local label, id of the label's vertex) of owned alive vertices, all of them or those
        ``selector`` picks (as :func:`hatrick.live.select_vertices`)."""
        if selector is None:
            vids = self.owned()
        else:
            vids = self._picked(selector)
        ids = self.state.ids.to_numpy()
        return ids[vids], self.state.comp[vids], ids[self.state.comp[vids]]

    def reach_summary(self, sources, sinks) -> tuple[np.ndarray, ...]:
        """This worker's part of a directed reachability query, as ids: pairs (u, v) with a path
        here from a selected source it owns or an entry (its vertices held as ghosts elsewhere,
        where paths come in, as the last :meth:`join_ghosts` found them) to a selected sink it
        owns or a ghost (where paths leave), then the selected sources and sinks it owns."""
        s = self.state
        picked = [self._picked(sel) for sel in (sources, sinks)]
        entry_ids, entry_vids = self._entries
        entry = s.vids_of(entry_ids.to_numpy()[entry_vids]) if entry_ids is not None else entry_vids
        u, v = reachable_in(s, np.union1d(picked[0], entry[entry >= 0]), np.union1d(picked[1], self.ghosts()))
        ids = s.ids.to_numpy()
        return ids[u], ids[v], ids[picked[0]], ids[picked[1]]

    def components_frame(self) -> pd.DataFrame:
        """Local components of every vertex held here (for one worker: the graph's components)."""
        return components_frame(self.state)

    def reachable(self, sources, sinks) -> pd.DataFrame:
        """Pairs joined by a path within this worker's state (for one worker: the graph's pairs)."""
        return reachable_frame(self.state, sources, sinks)

    def _edge_buckets(self) -> tuple[np.ndarray, np.ndarray]:
        return edge_buckets(self.state, self._vid_buckets())

    def extract(self, buckets: np.ndarray) -> bytes:
        """Remove buckets ``buckets`` from this worker and return them as a payload for their new
        owner: edges (with multiplicity and attributes) and owned vertices (with attributes)."""
        payload, staying = self._split(buckets)
        self.state = _rebuild(self.state, [staying])
        return datafile.dumps(payload)

    def _split(self, buckets: np.ndarray) -> tuple[dict, dict]:
        """(the part of buckets ``buckets``, the part of the others) of this worker's state; the
        moving part takes along what live CGQL patterns remember of its vertices
        (:func:`hatrick.cgql.onworkers.take_memory`)."""
        from hatrick.cgql.onworkers import take_memory

        s = self.state
        moving = np.zeros(len(self.owner), bool)
        moving[buckets] = True
        slots, edge_bucket = self._edge_buckets()
        alive = self.owned()
        vertex_moving = moving[self._vid_buckets()[alive]]
        payload = _part(s, slots[moving[edge_bucket]], alive[vertex_moving])
        payload["patterns"] = take_memory(self.patterns, payload["vids"])
        return payload, _part(s, slots[~moving[edge_bucket]], alive[~vertex_moving])

    def extract_to(self, buckets: np.ndarray, peer):
        """:meth:`extract` for the worker listening at ``peer``: the payload goes straight there
        (on a thread, so two workers sending each other never wait on one another) before this
        worker rebuilds what stays, so the new owner takes it in meanwhile; its size is
        returned. ``peer`` None returns the payload itself for the caller to hand over."""
        if peer is None:
            return self.extract(buckets)
        payload, staying = self._split(buckets)
        data = datafile.dumps(payload)
        self._send(peer, BUCKETS, data)
        self.state = _rebuild(self.state, [staying])
        return len(data)

    def _send(self, peer, kind: bytes, payload: bytes) -> None:
        """Send ``payload`` (what it holds: ``kind``, one of :data:`GHOSTS`, :data:`JOINS`,
        :data:`BUCKETS`) to the worker listening at ``peer``, over this worker's channel to it
        (:class:`hatrick.peers.Outbox`: sent on its thread, so two workers sending each other never
        wait on one another)."""
        peer = tuple(peer)
        if peer not in self._outboxes:
            self._outboxes[peer] = Outbox(peer, self._key, f"hatrick-send-{self.index}")
        self._outboxes[peer].put(kind + payload)

    def _receive(self, kind: bytes) -> memoryview:
        """The next payload of ``kind`` another worker sent here (payloads of other kinds that
        arrive first, e.g. a faster worker's label pairs before the last ghosts, are kept)."""
        early = self._early.get(kind)
        if early:
            return early.pop(0)
        while True:
            try:
                data = self._mailbox.get(MOVE_SECONDS)
            except queue.Empty:
                raise TimeoutError(f"hatrick worker {self.index}: a payload from another worker did not arrive "
                                   f"within {MOVE_SECONDS:g} s") from None
            if data[:1] == kind:
                return data[1:]
            self._early.setdefault(bytes(data[:1]), []).append(data[1:])

    def absorb_from(self, handed: list, arriving: int) -> None:
        """:meth:`absorb` the ``handed`` payloads and the next ``arriving`` ones other workers send
        here, in one rebuild (a new worker takes what every sender gives it at once)."""
        self.absorb(*handed, *[self._receive(BUCKETS) for _ in range(arriving)])

    def absorb(self, *payloads: bytes) -> None:
        """Take over buckets extracted by other workers."""
        from hatrick.cgql.onworkers import give_memory

        s = self.state
        slots, _ = self._edge_buckets()
        parts = [datafile.loads(payload) for payload in payloads]
        for part in parts:
            give_memory(self.patterns, part.get("patterns"))
        self.state = _rebuild(s, [_part(s, slots, self.owned()), *parts])


def warm_up(like: State) -> None:
    """Move a few of ``like``'s edges and vertices from one worker to another over a small copy,
    so that a process that has just started a worker has loaded what a move uses (numba's kernels
    from its cache, the modules that move live CGQL memory) before a rescale's pause needs them:
    in a new executor that loading took most of a scale-out's pause."""
    sample = dataclasses.replace(like, template=None)
    sample = _rebuild(sample, [_part(like, like.live_slots()[:4], np.flatnonzero(like.alive)[:4])])
    sender, receiver = Worker(0, sample, np.zeros(2, np.int64)), Worker(1, sample, np.array([0, 1]))
    receiver.absorb(sender.extract(np.array([1])))


def _unknown(s: State, selector) -> bool:
    """Whether ``selector`` names an attribute none of this state's vertices ever had."""
    return isinstance(selector, dict) and bool(set(selector) - {"id"} - set(s.vattrs))


def _grown(values: np.ndarray, size: int, fill: int) -> np.ndarray:
    """``values`` with ``fill`` appended up to ``size`` (itself where long enough)."""
    if len(values) >= size:
        return values
    return np.concatenate([values, np.full(size - len(values), fill, values.dtype)])


@njit(cache=True, nogil=True)
def _ghost_updates(candidates, before, comp, alive, owned, members, label):
    """Bring ``label`` (per vid: its local label where it is a ghost here, -1 for the others) and
    ``members`` (per label: the vertices that have it) from labels ``before`` (-1 past its end)
    to ``comp``, where only ``candidates`` (distinct vids) may have changed label (a vertex that
    dies or comes back does: a dead vertex's label is -1); returns the vids whose ``label``
    changed. A ghost is ``alive``, not ``owned``, and in a component of more than
    one vertex here: a vertex stays alive after its last edge goes, so a ghost left with no edge
    here (it joins nothing) would otherwise stay in the exchange for good: its messages, held
    ghosts and label pairs would grow with the stream's history, not with the boundary. A
    vertex that kept its label changes ghost status only if it is its label's vertex (a label is
    its component's smallest alive vid, a member of it) and the label's size crossed one, so the
    candidates and their old and new labels' vertices are all that is looked at: the work
    follows the relabelled vertices, not the vids (all vids, with ``before`` empty, ``label``
    all -1 and ``members`` 0: every ghost from scratch)."""
    known = len(before)
    for x in candidates:
        old = before[x] if x < known else -1
        if old >= 0:
            members[old] -= 1
        if comp[x] >= 0:
            members[comp[x]] += 1
    changed = np.empty(3 * len(candidates), np.int64)
    count = 0
    for x in candidates:
        old = before[x] if x < known else -1
        for y in (x, old, comp[x]):
            if y < 0:
                continue
            c = comp[y]
            now = c if alive[y] & (c >= 0) & ~owned[y] & (members[max(c, 0)] > 1) else -1
            if now != label[y]:
                label[y] = now
                changed[count] = y
                count += 1
    return changed[:count]


@njit(cache=True, nogil=True)
def _ghost_pairs(at, label, split, vids_beyond, alive, comp, first_mine, first_theirs):
    """From what a sender holds as ghosts of vertices owned here (``label`` by the sender's vids,
    -1: none; ``at``: the vids that hold one, ascending; a sender vid below ``split`` is the same
    vid here, one above it is ``vids_beyond[vid - split]`` here, -1: unknown): the (sender's
    label, label here) pairs of those alive here, less repeats of the first pair kept for either
    label, and their vids here. ``first_mine`` (by the sender's labels) and ``first_theirs`` (by
    labels here) are all -1, and are again on return: one pass over the held ghosts, with no
    array the size of a label space made or filled, so the work follows the boundary, not the
    vids. On a graph whose boundary lies mostly in one component nearly every ghost repeats that
    pair, so few are left, without hashing every ghost's pair (some repeats may stay: the merge's
    union-find takes them)."""
    here, their = np.empty(len(at), np.int64), np.empty(len(at), np.int64)
    held = 0
    for j in at:                                         # the held ghosts alive here, without a branch per ghost
        h = j if j < split else vids_beyond[j - split]
        here[held], their[held] = h, label[j]
        held += (h >= 0) & alive[max(h, 0)]
    out_theirs, out_mine = np.empty(held, np.int64), np.empty(held, np.int64)
    count = 0
    for i in range(held):
        t, m = their[i], comp[here[i]]
        if first_mine[t] == m or first_theirs[m] == t:
            continue
        if first_mine[t] < 0:
            first_mine[t] = m
        if first_theirs[m] < 0:
            first_theirs[m] = t
        out_theirs[count], out_mine[count] = t, m
        count += 1
    for i in range(count):                               # set back what was written: the scratch stays -1
        first_mine[out_theirs[i]] = -1
        first_theirs[out_mine[i]] = -1
    return out_theirs[:count], out_mine[:count], here[:held]


def _joined(parts: list) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


class _Part:
    """Item ``at`` (nested) of a combined request's answer (:meth:`Worker.exchange`), read when asked."""

    def __init__(self, answer, *at: int):
        self.answer, self.at = answer, at

    def result(self):
        value = self.answer.result()
        for i in self.at:
            value = value[i]
        return value


class _Done:
    """The value of a request answered in the caller's process."""

    def __init__(self, value):
        self.value = value

    def result(self):
        return self.value


def undirected_bucket(bucket_a: np.ndarray, bucket_b: np.ndarray) -> np.ndarray:
    """The bucket of an undirected edge between vertices of buckets ``bucket_a`` and ``bucket_b``:
    one of the two (so at most one end is a ghost), the smaller where their sum is even and the
    larger where it is odd. Every bucket gets about half of its vertices' edges, however its
    number ranks (always the smaller would pile the boundary on the low buckets' worker) and
    however ids rank (always the smaller id's would put all of a low-id hub's edges in one bucket)."""
    return _edge_buckets(np.asarray(bucket_a, np.int64), np.asarray(bucket_b, np.int64))


@njit(cache=True, nogil=True)
def _edge_bucket(bucket_a, bucket_b):
    """:func:`undirected_bucket` of one edge (the routing kernel :func:`_deal` uses it too)."""
    low, high = min(bucket_a, bucket_b), max(bucket_a, bucket_b)
    return low if (low + high) % 2 == 0 else high


@njit(cache=True, nogil=True)
def _edge_buckets(bucket_a, bucket_b):
    out = np.empty(len(bucket_a), np.int64)
    for i in range(len(bucket_a)):
        out[i] = _edge_bucket(bucket_a[i], bucket_b[i])
    return out


def edge_buckets(s: State, vid_buckets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Live edge slots of ``s`` and the bucket each belongs to (its source's; undirected:
    :func:`undirected_bucket`), given the bucket of each vid."""
    slots = s.live_slots()
    bs = vid_buckets[s.src[slots]]
    if s.directed:
        return slots, bs
    return slots, undirected_bucket(bs, vid_buckets[s.dst[slots]])


def _part(s: State, slots: np.ndarray, vids: np.ndarray) -> dict:
    """Edges ``slots`` and vertices ``vids`` of ``s`` as plain arrays (ids, not vids)."""
    ids = s.ids.to_numpy()
    return {"src": ids[s.src[slots]], "dst": ids[s.dst[slots]], "mult": s.mult[slots], "touched": s.touched[slots],
            "eattrs": {n: {"values": c.values[slots], "present": c.present[slots]} for n, c in s.eattrs.items()},
            "vids": ids[vids],
            "vattrs": {n: {"values": c.values[vids], "present": c.present[vids]} for n, c in s.vattrs.items()},
            "vkinds": dict(s.vkinds), "ekinds": dict(s.ekinds)}


def _rebuild(like: State, parts: list[dict]) -> State:
    """A state holding ``parts`` (their vertices, edges with multiplicity, attributes), with the
    kinds, static names and template values of ``like`` (the loaded graph's ids first, at the same
    vids, alive only where held); components from scratch; edges keep their ``touched`` times."""
    parts = parts or [_part(like, np.zeros(0, np.int64), np.zeros(0, np.int64))]
    src = np.concatenate([np.repeat(p["src"], p["mult"]) for p in parts])
    dst = np.concatenate([np.repeat(p["dst"], p["mult"]) for p in parts])
    vertex_ids = np.concatenate([p["vids"] for p in parts])
    size = like.template.size if like.template is not None else 0
    prefix = like.ids.to_numpy()[:size]               # the loaded graph's ids keep their vids (template keys)
    held = pd.unique(np.concatenate([vertex_ids, src, dst]))
    all_ids = pd.unique(np.concatenate([prefix, held]))
    index = pd.Index(all_ids)
    vkinds, ekinds = dict(like.vkinds), dict(like.ekinds)        # and attributes a part brings along
    for p in parts:
        vkinds.update({n: k for n, k in p.get("vkinds", {}).items() if n not in vkinds})
        ekinds.update({n: k for n, k in p.get("ekinds", {}).items() if n not in ekinds})
    vcols = {}
    for name, kind in vkinds.items():
        values = np.full(len(all_ids), None, dtype=object)
        column = like.vattrs.get(name)
        if name in like.static_vertex and column is not None and size:     # static values stay in place
            values[:size] = np.where(column.present[:size], column.values[:size].astype(object), None)
        for p in parts:
            column = p["vattrs"].get(name)
            if column is not None and len(p["vids"]):           # the owner's values, unset ones too
                at = index.get_indexer(p["vids"])
                values[at] = np.where(column["present"], np.asarray(column["values"], dtype=object), None)
        vcols[name] = (kind, values)
    ecols = {}
    for name, kind in ekinds.items():
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
    touched = state.touched
    if len(src):
        keys = state.key(index.get_indexer(np.concatenate([p["src"] for p in parts])),
                         index.get_indexer(np.concatenate([p["dst"] for p in parts])))
        touched = touched.copy()
        touched[state.key_index().lookup(keys)] = np.concatenate(
            [p.get("touched", np.full(len(p["src"]), like.time)) for p in parts])
    alive, comp = state.alive, state.comp
    if size:
        alive = alive.copy()
        alive[:size] = pd.Index(held).get_indexer(prefix) >= 0
        comp = np.where(alive, comp, -1)              # a template vertex not held here: dead, no label
    return State(state.directed, state.ids, alive, comp, state.vattrs, vkinds, state.index, state.src,
                 state.dst, state.mult, touched, state.eattrs, ekinds, like.static_vertex, like.static_edge,
                 like.batch, like.time, state.free, like.template, state.index_version)


def _all(workers: list, name: str, *args) -> list:
    """Request ``name`` of every worker at once; their answers in worker order."""
    return [answer.result() for answer in [w.request(name, *args) for w in workers]]


class MergedLabels:
    """Global component numbers of the workers' local labels: worker ``i``'s label ``l`` is number
    ``root[offsets[i] + l]``, the smallest joint label (offset + label) joined with it through
    ghosts. Held by the merger worker (with workers in Spark tasks, none of it on the driver).
    ``joined``: the joint labels the boundary pairs named, the only ones not their own root; the
    next merge resets them and reuses ``root`` (:func:`merge_components`), after which this one
    is stale."""

    def __init__(self, offsets: np.ndarray, root: np.ndarray, joined: np.ndarray):
        self.offsets, self.root, self.joined = offsets, root, joined

    def of(self, index: int, labels: np.ndarray) -> np.ndarray:
        """Global numbers of worker ``index``'s local ``labels``."""
        return self.root[self.offsets[index] + np.asarray(labels, np.int64)]


def merge_components(offsets: np.ndarray, joins: list, previous: MergedLabels | None = None) -> MergedLabels:
    """Local labels joined through ghosts: ``joins`` holds, per owner worker, the
    (sender, sender's label, owner's label) of its :meth:`Worker.join_ghosts`; one union-find
    pass over those pairs in the workers' joint label space (no sort or hashing of the pairs).
    The space's array is ``previous``'s, with only the labels it joined set back to their own
    (:func:`_join_pairs`): the work follows the boundary's label pairs, not the label space
    (filling it anew was ~1 ms a batch at 2 x 200k vids, on a boundary of ~2k pairs)."""
    left = [offsets[senders] + theirs for senders, theirs, _ in joins]
    right = [offsets[o] + mine for o, (_, _, mine) in enumerate(joins)]
    u, v = _joined(left), _joined(right)
    size = int(offsets[-1])
    root, stale = (previous.root, previous.joined) if previous is not None else (np.zeros(0, np.int64), u[:0])
    if len(root) < size:
        root = np.concatenate([root, np.arange(len(root), size, dtype=np.int64)])
    _join_pairs(root, stale, u, v)
    return MergedLabels(offsets, root, np.concatenate([u, v]))


@njit(cache=True, nogil=True)
def _join_pairs(parent: np.ndarray, stale: np.ndarray, u: np.ndarray, v: np.ndarray) -> None:
    """Set ``stale`` back to their own, then join ``u`` - ``v`` (union-find, :func:`hatrick.live._link`:
    a set's root is its smallest member) and point each of them at its root: every other entry is
    its own root, since only the roots of sets that hold a pair's end are ever linked."""
    for x in stale:
        parent[x] = x
    for i in range(len(u)):
        _link(parent, u[i], v[i])
    for ends in (u, v):
        for x in ends:
            r = x
            while parent[r] != r:
                r = parent[r]
            parent[x] = r


@dataclasses.dataclass
class Routed:
    """A batch dealt out to the workers (:meth:`PartitionedGraph.route`): the owners it was routed
    under, each worker's (rows, why) (None: one worker, every row its own), the updates it
    applies and the buckets of its rows' ``a`` ends (None: not computed, for one worker); once
    sent (:meth:`PartitionedGraph.send`), the workers' pending answers."""

    batch: UpdateBatch
    owner: np.ndarray
    rows: list | None
    parts: list
    bucket_a: np.ndarray | None = None
    answers: list | None = None


class PartitionedGraph:
    """The live graph over in-process workers, bucket ``b`` on worker ``owner[b]`` (see the module
    docstring), ids put in buckets by ``buckets`` (default hashed). One worker holds ``state`` itself."""

    def __init__(self, state: State, owner: np.ndarray, buckets: Buckets | None = None):
        owner = np.asarray(owner, np.int64)
        self.directed = state.directed
        count = int(owner.max()) + 1
        self.tasks = None
        self.buckets = buckets or Buckets()
        self._clock = (int(state.batch), float(state.time))
        self._summary, self._selected, self._committing = None, [], []
        self.workers = [Worker(i, state, owner, self.buckets) for i in range(count)]
        self._each("keep", owner)

    @classmethod
    def loaded(cls, workers: list, owner: np.ndarray, buckets: Buckets | None = None) -> "PartitionedGraph":
        """The live graph of ``workers`` that each hold the whole loaded graph (in Spark tasks:
        each loaded it from GoFS itself), once each has kept its part under ``owner``; ``buckets``
        is theirs."""
        graph = cls.__new__(cls)
        graph.workers, graph.tasks = workers, getattr(workers[0], "tasks", None)
        graph.buckets = buckets or Buckets()
        graph._summary, graph._selected, graph._committing = None, [], []
        graph.directed, batch, time = workers[0].request("loaded_clock").result()
        graph._clock = (batch, time)
        graph._each("keep", np.asarray(owner, np.int64))
        return graph

    @classmethod
    def restore(cls, states: list[State], owner: np.ndarray, buckets: Buckets | None = None) -> "PartitionedGraph":
        """Workers holding ``states`` as they were (from a checkpoint), bucket ``b`` on ``owner[b]``,
        ids in buckets by ``buckets`` (the ones the states were split by)."""
        graph = cls.__new__(cls)
        owner = np.asarray(owner, np.int64)
        graph.directed = states[0].directed
        graph.buckets = buckets or Buckets()
        graph.workers = [Worker(i, s, owner, graph.buckets) for i, s in enumerate(states)]
        graph.tasks = None
        graph._clock = (int(states[0].batch), max(float(s.time) for s in states))
        graph._summary, graph._selected, graph._committing = None, [], []
        return graph

    def place_on(self, tasks) -> None:
        """Move every worker into a Spark task of ``tasks`` (a :class:`hatrick.executors.WorkerTasks`):
        from now on each one's state lives in its task and the driver only sends it requests."""
        self.workers = tasks.start({w.index: w.state for w in self.workers}, self.owner, self.buckets)
        self.tasks = tasks
        self._summary, self._selected, self._committing = None, [], []

    def blank_state(self) -> State:
        """The state of a worker with no buckets yet (worker 0's attribute kinds and template)."""
        return self.workers[0].request("empty_state").result()

    def new_workers(self, indices, blank: State | None = None) -> list:
        """Workers ``indices`` holding ``blank`` (default :meth:`blank_state`), in Spark tasks if
        this graph's workers are (starting a task takes seconds: :meth:`Stream.rescale` starts
        them before the cut-over, outside its pause)."""
        blank = self.blank_state() if blank is None else blank
        if self.tasks is None:
            return [Worker(i, blank, self.owner, self.buckets) for i in indices]
        return self.tasks.start({i: blank for i in indices}, self.owner, self.buckets)

    def close(self) -> None:
        """End the workers' tasks (if they run in Spark tasks)."""
        for w in self.workers:
            w.close()

    def abort(self) -> None:
        """End the workers at once, without waiting for any (one was lost)."""
        for w in self.workers:
            w.abort()

    @property
    def owner(self) -> np.ndarray:
        return self.workers[0].owner

    @property
    def batch(self) -> int:
        """Batches applied (every worker applies every batch, possibly with no rows; kept here,
        so that reading it asks no worker)."""
        return self._clock[0]

    @property
    def time(self) -> float:
        """The latest event time applied on any worker (every update reaches its owner)."""
        return self._clock[1]

    def route(self, batch: UpdateBatch, bucket_a: np.ndarray | None = None) -> "Routed":
        """``batch`` dealt out to the workers under the owners of now (:func:`deal`):
        O(batch) driver work that :meth:`send` needs, done apart so that it can overlap the
        workers' application of the batch before. ``bucket_a`` as in :func:`route` (kept: a
        batch routed again after a rescale is not hashed again)."""
        if len(self.workers) == 1:                      # every row is the only worker's own
            return Routed(batch, self.owner, None, [batch], bucket_a)
        if bucket_a is None:
            bucket_a = self.buckets.of(batch.a, len(self.owner))
        routed, parts = deal(batch, self.owner, self.directed, bucket_a, self.buckets)
        return Routed(batch, self.owner, routed, parts, bucket_a)

    def send(self, batch: UpdateBatch, routed: "Routed | None" = None) -> "Routed":
        """Send ``batch`` to every worker to stage (shown only after :meth:`commit`), routed by
        ``routed`` if it was routed under the owners of now, else again; its outcome is
        :meth:`outcome`. Raises WorkerLost (nothing staged) if a worker's connection is gone."""
        if routed is None or routed.batch is not batch or len(routed.owner) != len(self.owner):
            routed = self.route(batch)
        elif not np.array_equal(routed.owner, self.owner):
            routed = self.route(batch, routed.bucket_a)
        batches, time = self._clock
        self._staged_clock = (batches + 1, max(time, float(batch.time.max())) if len(batch) else time)
        try:
            routed.answers = [w.request("stage", part) for w, part in zip(self.workers, routed.parts)]
        except BaseException:
            self.abandon()
            raise
        return routed

    def outcome(self, routed: "Routed") -> tuple[int, pd.DataFrame]:
        """(updates applied, rejected ones) of the batch :meth:`send` sent, by the owners' verdicts,
        once every worker staged it. Raises (with nothing staged) if any worker failed. Every row has
        one owner, so the rows applied are the batch less the owners' rejections: a worker that
        rejected none costs no pass over its rows."""
        try:
            if routed.rows is None:
                applied, mine = routed.answers[0].result()
                return applied, empty_rejected() if mine is None else mine
            batch, rejected = routed.batch, []
            for answer, (rows, why) in zip(routed.answers, routed.rows):
                mine = answer.result()[1]
                if mine is None:
                    continue
                own = rows[why == OWN]
                if len(own) < len(rows):                      # drop verdicts on rows another worker owns
                    keys = pd.MultiIndex.from_arrays([batch.producer[own], batch.seq[own]])
                    mine = mine[pd.MultiIndex.from_arrays([mine.producer, mine.seq]).isin(keys)]
                if len(mine):
                    rejected.append(mine)
        except BaseException:
            self.abandon()
            raise
        rejected = pd.concat(rejected, ignore_index=True) if rejected else empty_rejected()
        return len(batch) - len(rejected), rejected

    def stage(self, batch: UpdateBatch, meanwhile=None) -> tuple[int, pd.DataFrame]:
        """Apply ``batch`` on every worker, shown only after :meth:`commit` (:meth:`send`, then
        :meth:`outcome`); returns (updates applied, rejected ones). ``meanwhile()`` is called once
        the requests are out, while the workers apply the batch (what it asks them about their
        committed state is answered as before the batch)."""
        routed = self.send(batch)
        if meanwhile is not None:
            try:
                meanwhile()
            except BaseException:
                self.abandon()
                raise
        return self.outcome(routed)

    @property
    def staged_batch(self) -> int:
        """The number of the batch staged now."""
        return self._staged_clock[0]

    def written(self, wait: bool = False) -> list:
        """Every worker's :meth:`Worker.written` reports."""
        return [report for reports in self._each("written", wait) for report in reports]

    def write_staged(self, paths: list, wait: bool) -> None:
        """Each worker writes its staged state to its path of ``paths`` (:meth:`Worker.write_state`)."""
        for answer in [w.request("write_state", path, wait) for w, path in zip(self.workers, paths)]:
            answer.result()

    def states(self) -> list[State]:
        """Each worker's current (immutable) state, in worker order: what a full checkpoint holds."""
        return self._each("state")

    def commit(self, selections: list | None = None) -> None:
        """Show the staged batch on every worker, not waiting for their answers (:meth:`committed`
        reads them): the next batch's stage can follow at once (a worker answers requests in
        order, so it stages that batch on this one's state). ``selections`` (a list of selectors,
        for live results read right after): start the boundary exchange and ask for those
        selectors' :meth:`Worker.owned_labels` in the same wave, so a live result costs no more
        round trips."""
        self._committing = [w.request("commit") for w in self.workers]
        exchange, self._selected = None, []
        if selections is not None and len(self.workers) > 1:
            exchange = self._exchange([] if self.directed else selections)
        self._clock = self._staged_clock
        self._summary = exchange

    def committed(self) -> list:
        """Wait for the last :meth:`commit`'s answers, if not read yet; returns the workers' reports
        of state files written (:meth:`Worker.written`). Raises WorkerLost (a worker's task ended
        before it showed the batch) or the error a worker's commit raised."""
        answers, self._committing = self._committing, []
        return [report for answer in answers for report in answer.result()]

    def _owned_labels(self, selector) -> list:
        """Each worker's :meth:`Worker.owned_labels` of ``selector`` (asked with the commit if it
        is one of its selections, the same object)."""
        for asked, answers in self._selected:
            if asked is selector:
                return [a.result() for a in answers]
        return [a.result() for a in [w.request("owned_labels", selector) for w in self.workers]]

    def _exchange(self, selections: list = ()) -> tuple[list, list, list]:
        """Start the boundary exchange and merge (:meth:`Worker.send_ghosts`, :meth:`Worker.join_ghosts`,
        then :meth:`Worker.merge_labels` on the merger) and ask for the :meth:`Worker.owned_labels`
        of ``selections``: workers in Spark tasks send ghosts and label pairs to each other, all
        of it in one :meth:`Worker.exchange` request each, so nothing of the boundary passes
        through the driver; in-process ones hand theirs over through this caller.
        Returns the pending answers."""
        peers = [w.peer_address for w in self.workers]
        merger = self.workers[MERGER]
        if all(peer is not None for peer in peers):
            answers = [w.request("exchange", peers, list(selections)) for w in self.workers]
            if selections:
                self._selected = [(sel, [_Part(a, 3, j) for a in answers]) for j, sel in enumerate(selections)]
            return [_Part(a, 0) for a in answers], [_Part(a, 1) for a in answers], [_Part(answers[MERGER], 2)]
        sent = [w.request("send_ghosts", peers) for w in self.workers]
        handed = [answer.result()[2] or {} for answer in sent]
        joined = [w.request("join_ghosts", 0, [h[w.index] for h in handed if w.index in h]) for w in self.workers]
        pairs = [payload for payload in (answer.result() for answer in joined) if payload is not None]
        merged = [merger.request("merge_labels", 0, pairs)]
        if selections:
            self._selected = [(sel, [w.request("owned_labels", sel) for w in self.workers]) for sel in selections]
        return sent, joined, merged

    def _boundaries(self) -> list:
        """Each worker's :meth:`Worker.send_ghosts` answer for the graph now, once the merger holds
        the merged labels (the exchange started with the commit, or now); kept until the graph
        changes. Reading it also clears the exchange's answers from the workers' connections."""
        sent, joined, merged = self._summary or self._exchange()
        self._summary = tuple([_Done(a.result()) for a in answers] for answers in (sent, joined, merged))
        return [a.result() for a in self._summary[0]]

    def _ask_global(self, parts: list):
        """The merger's pending answer: global component numbers of ``parts`` (each (worker index,
        its local labels); one merge per committed batch, however many results read it)."""
        self._boundaries()
        return self.workers[MERGER].request("global_labels", parts)

    def abandon(self) -> None:
        self._each("abandon")

    def _each(self, name: str, *args) -> list:
        return _all(self.workers, name, *args)

    def apply(self, batch: UpdateBatch) -> tuple[int, pd.DataFrame]:
        """:meth:`stage`, :meth:`commit` and :meth:`committed`."""
        out = self.stage(batch)
        self.commit()
        self.committed()
        return out

    def sizes(self) -> np.ndarray:
        """Per worker: (owned alive vertices, live edge copies)."""
        return np.array(self._each("sizes"), np.int64).reshape(-1, 2)

    def bucket_state(self) -> np.ndarray:
        """Live state per bucket (edge copies by edge bucket plus alive vertices), summed over workers."""
        return np.sum(self._each("bucket_state"), axis=0)

    def stale_edges(self, ttl: float, now: float) -> tuple[np.ndarray, np.ndarray]:
        """(src, dst) of every edge copy not added or set within ``ttl`` of ``now``; with several
        workers sorted by (src, dst), so the same graph gives the same list however it is split."""
        parts = [w.stale_edges(ttl, now) for w in self.workers]
        if len(parts) == 1:
            return parts[0]
        src, dst = np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
        order = np.lexsort((dst, src))
        return src[order], dst[order]

    def gather(self) -> State:
        """THE GATHER: the whole graph as one :class:`hatrick.live.State` on the driver (every
        worker's :meth:`Worker.part`, rebuilt; O(graph)). Free for one worker (its own state). Used
        only for inspection (:attr:`hatrick.stream.Stream.state`) and to restore a checkpoint onto
        another bucket count. Component labels of a gathered state are its own."""
        if len(self.workers) == 1:
            return self.workers[0].state
        return _gather_states(self.states(), self.owner, self.buckets)

    def view(self) -> GraphView:
        """The graph now, for ``on_batch`` callbacks: time and seq at once; frames on first use,
        each the workers' own frames one after another (:meth:`Worker.vertex_frame`,
        :meth:`Worker.edge_frame`: no state is rebuilt on the driver); ``workers`` evaluate live
        CGQL patterns where the state is (:mod:`hatrick.cgql.onworkers`). Workers in this process:
        their states as they are now; workers in Spark tasks: asked when the frames are first read
        or a pattern is evaluated, which must be before the next batch."""
        time, seq = self.time, self.batch
        if all(isinstance(w, Worker) for w in self.workers):
            held = [_held(w) for w in self.workers]        # immutable states of now
            if len(held) == 1:
                return GraphView(held[0].state, workers=held, owner=self.owner, buckets=self.buckets, directed=self.directed,
                                 current_workers=self._current_workers)
            return GraphView(frames=lambda: _frames(held), time=time, seq=seq, workers=held, owner=self.owner, buckets=self.buckets,
                             directed=self.directed, current_workers=self._current_workers)

        def current() -> tuple[pd.DataFrame, pd.DataFrame]:   # workers in Spark tasks hold only their current state
            self._check_current(seq)
            return _frames(self.workers)
        return GraphView(frames=current, time=time, seq=seq, workers=[_Current(w, self, seq) for w in self.workers],
                         owner=self.owner, buckets=self.buckets, directed=self.directed, current_workers=self._current_workers)

    def _current_workers(self) -> list:
        return self.workers

    def _check_current(self, seq: int) -> None:
        if self.batch != seq:
            raise RuntimeError(f"hatrick: the view of batch {seq} was first read after batch {self.batch}; "
                               "with workers in Spark tasks, read it in the callback")

    def forget_patterns(self, keys: list) -> None:
        """Every worker drops what live CGQL sub-queries ``keys`` keep (:meth:`Worker.forget_patterns`)."""
        self._each("forget_patterns", list(keys))

    def pattern_keys(self) -> list:
        """Per worker, the live CGQL sub-queries whose memory it keeps."""
        return self._each("pattern_keys")

    def stage_instance(self, target) -> list[tuple]:
        """Every worker stages its part of snapshot instance ``target``
        (:meth:`Worker.stage_instance_part`); their answers in worker order."""
        return self._each("stage_instance_part", target)

    def write_instance(self, target, vertex_schema, edge_schema, added_edge_schema) -> dict:
        """Every worker writes the files of the GoFS partitions dealt to it (partition p to worker
        p mod N) from the staged parts, worker 0 also the topology (its answer is returned)."""
        n = len(self.workers)
        answers = [w.request("write_instance_partitions", target, list(range(i, target.partitions, n)),
                             vertex_schema, edge_schema, added_edge_schema, i == 0)
                   for i, w in enumerate(self.workers)]
        return [answer.result() for answer in answers][0]

    def edges(self) -> pd.DataFrame:
        return pd.concat([w.edge_frame() for w in self.workers], ignore_index=True)

    def vertices(self) -> pd.DataFrame:
        """``id`` and attributes of every alive vertex (worker by worker)."""
        frames = [w.vertex_frame() for w in self.workers]
        return frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)

    def components(self) -> pd.DataFrame:
        """``id`` and ``component`` (the original id of one member) of every alive vertex."""
        if len(self.workers) == 1:
            return self.workers[0].components_frame()
        (ids, group, rep), = self._labelled(self._owned_labels(None))
        first = pd.Series(rep).groupby(group).first()              # workers in order, then arrival
        return pd.DataFrame({"id": ids, "component": first.reindex(group).to_numpy()})

    def _labelled(self, *outs: list) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Per :meth:`Worker.owned_labels` answer list ``out`` (one answer per worker): (id, global
        component number, id of the local label's vertex), worker by worker; one request to the
        merger for all of them."""
        return self._ask_labelled(*outs)()

    def _ask_labelled(self, *outs: list):
        """:meth:`_labelled`, its request to the merger sent now; returns the function that reads
        the answer and makes the result."""
        answer = self._ask_global([(w.index, labels) for out in outs for w, (_, labels, _) in zip(self.workers, out)])

        def labelled() -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
            numbers = iter(answer.result())
            return [(np.concatenate([ids for ids, _, _ in out]),
                     np.concatenate([next(numbers) for _ in out]),
                     np.concatenate([rep for _, _, rep in out])) for out in outs]
        return labelled

    def reachable(self, sources, sinks) -> pd.DataFrame:
        """Pairs (``source``, ``sink``) joined by a path. Undirected: both in one component after
        the boundary merge; directed: :meth:`_ask_directed_reach`. Selectors as in
        :meth:`hatrick.stream.Stream.reachable`."""
        return self.ask_reachable(sources, sinks)()

    def ask_reachable(self, sources, sinks):
        """:meth:`reachable` of the graph as committed now, its last requests to the workers sent
        now; returns the function that reads their answers and joins them into the pairs. The
        stream asks before it commits the next batch and joins once that batch's commit and the
        stage after it are sent, so the workers never wait for the driver's join."""
        if len(self.workers) == 1:
            return self.workers[0].request("reachable", sources, sinks).result
        sent = self._boundaries()
        known = set().union(*[attributes for _, attributes, _ in sent]) | {"id"}
        for selector in (sources, sinks):
            if isinstance(selector, dict) and set(selector) - known:
                missing = sorted(set(selector) - known)[0]
                raise KeyError(f"no vertex attribute '{missing}' (have: {sorted(known - {'id'})})")
        if self.directed:
            return self._ask_directed_reach(sources, sinks)
        labelled = self._ask_labelled(self._owned_labels(sources), self._owned_labels(sinks))

        def pairs() -> pd.DataFrame:
            (s_ids, s_group, _), (t_ids, t_group, _) = labelled()
            source, sink = same_label_pairs(s_ids, s_group, t_ids, t_group)
            return pd.DataFrame({"source": source, "sink": sink})
        return pairs

    def _ask_directed_reach(self, sources, sinks):
        """Directed reachability over workers: each worker sends its local pairs from (sources,
        entries) to (sinks, ghosts) (:meth:`Worker.reach_summary`); a path leaves a worker only
        through a ghost and goes on at that vertex's owner, so the driver joins the summaries
        and follows them (its work grows with those pairs and the selection, not with V).
        The requests are sent now; returns the function that reads and follows them."""
        self._boundaries()                              # the workers' entries are the graph's now
        answers = [w.request("reach_summary", sources, sinks) for w in self.workers]

        def pairs() -> pd.DataFrame:
            u, v, picked_s, picked_t = (np.concatenate(part) for part in zip(*[a.result() for a in answers]))
            nodes = pd.Index(pd.unique(np.concatenate([picked_s, picked_t, u, v])))
            s, t = reachable_pairs(len(nodes), nodes.get_indexer(u), nodes.get_indexer(v),
                                   nodes.get_indexer(picked_s), nodes.get_indexer(picked_t))
            ids = nodes.to_numpy()
            return pd.DataFrame({"source": ids[s], "sink": ids[t]})
        return pairs

    def rescale(self, owner_after: np.ndarray, added: list | None = None) -> int:
        """Move the buckets whose owner changes, worker to worker (added workers start empty: those
        of ``added`` (from :meth:`new_workers`), else new ones; removed ones hand everything over);
        returns the bytes sent."""
        owner_after = np.asarray(owner_after, np.int64)
        count = int(owner_after.max()) + 1
        if len(self.workers) < count:
            self.workers += added or self.new_workers(range(len(self.workers), count))
        moves = np.flatnonzero(owner_after != self.owner)
        if self._summary:
            self._boundaries()                          # read what the last commit asked for
        self._summary, self._selected = None, []
        answers = []
        for w in self.workers:                          # every source extracts (and sends) first
            out = moves[self.owner[moves] == w.index]
            for target in np.unique(owner_after[out]):
                peer = self.workers[target].peer_address
                answers.append((int(target), w.request("extract_to", out[owner_after[out] == target], peer)))
        if all(w.peer_address is not None for w in self.workers[:count]):
            return self._move_directly(answers, owner_after, count)
        sent, deliveries = 0, []
        for target, answer in answers:
            value = answer.result()                     # a payload (through the caller) or its size (sent)
            sent += value if isinstance(value, int) else len(value)
            deliveries.append((target, None if isinstance(value, int) else value))
        for w in self.workers[count:]:
            w.close()
        self.workers = self.workers[:count]
        for w in self.workers:
            w.owner = owner_after
        handed = {}
        for target, payload in deliveries:            # None: sent to the target directly
            handed.setdefault(target, []).append(payload)
        for answer in [self.workers[target].request("absorb_from", [p for p in payloads if p is not None],
                                                    payloads.count(None))
                       for target, payloads in handed.items()]:
            answer.result()
        return sent

    def _move_directly(self, extracted: list, owner_after: np.ndarray, count: int) -> int:
        """The rest of :meth:`rescale` for workers that send buckets to each other: every kept
        worker takes the new owners and its payloads as soon as its own extracts are done (a
        worker answers requests in order), so receivers take buckets in while senders rebuild
        what stays; returns the bytes sent."""
        kept = self.workers[:count]
        owners = [w.request("set_owner", owner_after) for w in kept]
        arriving = np.bincount([target for target, _ in extracted], minlength=count)
        absorbed = [w.request("absorb_from", [], int(arriving[w.index])) for w in kept if arriving[w.index]]
        sent = sum(answer.result() for _, answer in extracted)
        for answer in owners + absorbed:
            answer.result()
        for w in self.workers[count:]:
            w.close()
        self.workers = kept
        return sent


def _held(w: Worker) -> Worker:
    """A worker over ``w``'s state of now (states are immutable), sharing its live patterns' memory."""
    held = Worker(w.index, w.state, w.owner, w.buckets)
    held.patterns = w.patterns
    return held


class _Current:
    """A worker in a Spark task as a view of batch ``seq`` sees it: its requests are refused once
    a later batch is applied (the task holds only its current state)."""

    def __init__(self, worker, graph: PartitionedGraph, seq: int):
        self.worker, self.graph, self.seq = worker, graph, seq

    def request(self, name: str, *args):
        self.graph._check_current(self.seq)
        return self.worker.request(name, *args)


def _frames(workers: list) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(vertices, edges) of the graph: every worker's owned vertices and held edges, asked at once."""
    vertices = [w.request("vertex_frame") for w in workers]
    edges = [w.request("edge_frame") for w in workers]
    return (pd.concat([a.result() for a in vertices], ignore_index=True),
            pd.concat([a.result() for a in edges], ignore_index=True))


def _gather_states(states: list[State], owner: np.ndarray, buckets: Buckets) -> State:
    """:meth:`PartitionedGraph.gather` of earlier worker states."""
    parts = [Worker(i, s, owner, buckets).part() for i, s in enumerate(states)]
    return dataclasses.replace(_rebuild(states[0], parts), time=max(float(s.time) for s in states))
