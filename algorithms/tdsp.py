"""Time-dependent shortest paths (TDSP): earliest arrival over hourly (or any) travel times.

Semantics. Instance i covers ``[start_i, end_i)`` and gives every edge a travel
time ``tt_i``. The traveller leaves ``source`` at ``departure``. Traversing an
edge that starts at time t, with ``start_i <= t < end_i``, arrives at
``t + tt_i(e)``, even when that is after ``end_i``. Waiting at a vertex is
allowed, so from a vertex reached at time a the traveller may leave at any
t >= a: within one instance leaving at once is best, and in every later
instance j leaving at ``start_j`` is an option. The earliest arrival at every
vertex is the result; ``inf`` means unreachable before the last selected
instance ends. A vertex reached at or after the last instance's end keeps that
arrival time, and nothing propagates from it.

Algorithm (sequentially dependent pattern, Simmhan et al., "Distributed
Programming over Time-series Graphs", IPDPS 2015). Within instance i a
sub-graph runs one multi-source Dijkstra (scipy, C) on instance i's travel
times, truncated at ``end_i``: it is seeded with the vertices whose arrival
falls in the instance, and with the vertices reached earlier whose neighbours
are still later than ``start_i`` (leaving at ``start_i``: the waiting
option); vertices at or beyond ``end_i`` are recorded but not expanded. They
form the frontier that instance i+1 continues from, kept in the sub-graph's
state. Arrivals over remote edges are messages: within the instance when they
fall before ``end_i``, forward to instance i+1 otherwise.
A sub-graph with frontier or waiting work left keeps itself alive with a
forward message to itself, so the run ends once the wave has stopped.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import scipy.sparse as sp

from algorithms.registry import Algorithm, Flag, register
from algorithms.sssp import seeded_dijkstra
from gofs.errors import InputError
from gopher.timeseries import TimeSeriesProgram, TimeSeriesResult, run_sequential, select_instances


def _truncated_dijkstra(adjacency: sp.csr_matrix, seeds: np.ndarray, times: np.ndarray, end: float) -> np.ndarray:
    """Arrival times strictly before ``end`` from ``seeds`` leaving at ``times`` (inf elsewhere)."""
    base = min(0.0, float(times.min()))          # csgraph needs non-negative edge lengths
    return seeded_dijkstra(adjacency, seeds, times - base, np.nextafter(end - base, -np.inf)) + base


def pair_codes(src: np.ndarray, dst: np.ndarray, query_src: np.ndarray, query_dst: np.ndarray):
    """Integer codes for (src, dst) pairs, equal exactly when the pairs are equal (no bit packing,
    so no collision however large the ids): (codes of the first list, codes of the queries)."""
    pairs = np.stack([np.concatenate([src, query_src]), np.concatenate([dst, query_dst])], axis=1).astype(np.int64)
    _, codes = np.unique(pairs, axis=0, return_inverse=True)
    codes = codes.ravel()
    return codes[:len(src)], codes[len(src):]


class TimeDependentShortestPaths(TimeSeriesProgram):
    """Earliest arrival times from ``source_vid`` (dense id) leaving at ``departure``.

    Remote arrivals travel as one payload per neighbouring sub-graph: (target
    vertex ids, source vertex ids, arrival times at the targets, arrival times
    at the sources). The receiver keeps, per remote edge, the best arrival it
    was told for the vertex at the other end (``known``), and never sends an
    arrival there that cannot improve it: messages that would change nothing
    cost no extra superstep.
    """

    output_schema = {"arrival": pa.float64()}
    wake_at_instance_start = False       # sub-graphs with work left wake themselves (forward messages)

    def __init__(self, source_vid: int, departure: float, travel_time: str = "travel_time",
                 topology_changes: bool = False):
        self.source_vid = int(source_vid)
        # an edge that appears in a later instance can extend a path from any vertex reached
        # so far: then every instance is visited and every sub-graph looks again at its start
        self.wake_at_instance_start = topology_changes
        self.stop_when_quiet = not topology_changes
        self.departure = float(departure)
        self.travel_time = travel_time
        self.instance_edge_attributes = (travel_time,)

    def compute(self, subgraph, messages, ctx):
        state = subgraph.state
        n = subgraph.num_vertices
        if "arrival" not in state:
            remote = subgraph.remote_edges
            state.update(arrival=np.full(n, np.inf), sent=np.full(len(remote), np.inf),
                         known=np.full(len(remote), np.inf), vids=subgraph.vertex_ids,
                         edges=(subgraph.vertex_ids[remote.src], remote.dst), instance=ctx.instance["id"])
            local = int(subgraph.local_index([self.source_vid])[0])
            if local >= 0:
                state["arrival"][local] = self.departure
        elif state["instance"] != ctx.instance["id"]:
            self._align(subgraph)
            state["instance"] = ctx.instance["id"]
        start, end = ctx.instance["start"], ctx.instance["end"]
        arrival = state["arrival"]
        improved = self._receive(subgraph, messages.payloads)
        if not np.isfinite(arrival).any():              # not reached yet: nothing to do
            ctx.vote_to_halt()
            return
        adjacency = subgraph.adjacency(self.travel_time)
        rows = np.repeat(np.arange(n), np.diff(adjacency.indptr))
        if ctx.superstep == 0:
            self._check(subgraph, adjacency, ctx.instance)
            waiting = np.zeros(n, dtype=bool)
            waiting[rows[(arrival[rows] < start) & (arrival[adjacency.indices] > start)]] = True
            seeds = (arrival < end) & ((arrival >= start) | waiting)
        else:
            seeds = np.zeros(n, dtype=bool)
            seeds[improved] = True
            seeds &= arrival < end
        if seeds.any():
            self._relax(adjacency, rows, arrival, np.flatnonzero(seeds), start, end)
        self._send(subgraph, ctx, arrival, start, end)
        if self._pending(subgraph, adjacency, rows, arrival, end):
            ctx.send_forward_to_subgraph(subgraph.id, None)
        ctx.vote_to_halt()

    @staticmethod
    def _align(subgraph) -> None:
        """Carry the state over to this instance, whose topology may differ from the last one's:
        arrivals by vertex id (the sub-graph of vertices an instance adds may hold others now; a
        new vertex is not reached yet), the per-remote-edge state (``sent``, ``known``) by (local
        end, remote end); a new edge starts knowing nothing."""
        state, remote, vids = subgraph.state, subgraph.remote_edges, subgraph.vertex_ids
        if not np.array_equal(state["vids"], vids):
            before = state["vids"]
            at = np.minimum(np.searchsorted(before, vids), max(len(before) - 1, 0))
            kept = (before[at] == vids) if len(before) else np.zeros(len(vids), bool)
            arrival = np.full(len(vids), np.inf)
            arrival[kept] = state["arrival"][at[kept]]
            state["arrival"], state["vids"] = arrival, vids
        src, dst = state["edges"]
        now_src = vids[remote.src]
        if np.array_equal(src, now_src) and np.array_equal(dst, remote.dst):
            return
        before, now = pair_codes(src, dst, now_src, remote.dst)
        size = int(max(before.max(initial=-1), now.max(initial=-1))) + 1
        for name in ("sent", "known"):
            best = np.full(size, np.inf)
            np.minimum.at(best, before, state[name])
            state[name] = best[now]
        state["edges"] = (now_src, remote.dst)

    def _check(self, subgraph, adjacency, instance) -> None:
        remote = subgraph.remote_edges.attribute(self.travel_time)
        for values in (adjacency.data, remote):
            if np.isnan(values).any() or (values < 0).any():
                raise InputError(f"edge attribute '{self.travel_time}' of instance {instance['id']} has missing or "
                                 "negative travel times")

    @staticmethod
    def _receive(subgraph, payloads) -> np.ndarray:
        """Apply remote arrivals; note the senders' own arrivals on their remote edges; return improved vertices."""
        batches = [p for p in payloads if p is not None]
        if not batches:
            return np.empty(0, np.int64)
        targets, sources, values, reported = (np.concatenate(c) for c in zip(*batches))
        local = subgraph.local_index(targets)
        state, remote = subgraph.state, subgraph.remote_edges
        keys, wanted = pair_codes(remote.src, remote.dst, local, sources)
        order = np.argsort(keys, kind="stable")
        at = np.minimum(np.searchsorted(keys, wanted, sorter=order), len(keys) - 1)
        edge = order[at]
        known = keys[edge] == wanted
        np.minimum.at(state["known"], edge[known], reported[known])
        arrival = state["arrival"]
        before = arrival[local]
        np.minimum.at(arrival, local, values)
        return np.unique(local[arrival[local] < before])

    @staticmethod
    def _relax(adjacency, rows, arrival, seeds, start, end) -> None:
        found = _truncated_dijkstra(adjacency, seeds, np.maximum(arrival[seeds], start), end)
        np.minimum(arrival, found, out=arrival)
        hop = np.isfinite(found[rows])              # one edge beyond the instance: the frontier
        np.minimum.at(arrival, adjacency.indices[hop], found[rows[hop]] + adjacency.data[hop])

    def _send(self, subgraph, ctx, arrival, start, end) -> None:
        """Arrivals over remote edges that could still improve the other side: within this instance
        before ``end`` (and in the last instance), forward to the next instance otherwise."""
        state, remote = subgraph.state, subgraph.remote_edges
        leaving = arrival[remote.src]
        candidate = np.maximum(leaving, start) + remote.attribute(self.travel_time)
        rows = (remote.outgoing(subgraph.directed) & (leaving < end) & (candidate < state["sent"])
                & (candidate < state["known"]))
        state["sent"][rows] = candidate[rows]
        last = ctx.instance_index == ctx.num_instances - 1
        now = rows & ((candidate < end) | last)
        for chosen, send in ((now, ctx.send_to_subgraph), (rows & ~now, ctx.send_forward_to_subgraph)):
            picked = np.flatnonzero(chosen)
            picked = picked[np.argsort(remote.dst_subgraph[picked], kind="stable")]
            target = remote.dst_subgraph[picked]
            bounds = np.flatnonzero(np.r_[True, target[1:] != target[:-1], True]) if len(picked) else []
            for a, b in zip(bounds[:-1], bounds[1:]):
                r = picked[a:b]
                send(int(target[a]), (remote.dst[r], subgraph.vertex_ids[remote.src[r]], candidate[r],
                                      leaving[r]))

    def _pending(self, subgraph, adjacency, rows, arrival, end) -> bool:
        """Work for the next instance: a frontier, or a reached vertex whose neighbour may be later than ``end``."""
        if (np.isfinite(arrival) & (arrival >= end)).any():
            return True
        if ((arrival[rows] < end) & (arrival[adjacency.indices] > end)).any():
            return True
        state, remote = subgraph.state, subgraph.remote_edges
        return bool((remote.outgoing(subgraph.directed) & np.isfinite(arrival[remote.src])
                     & (np.minimum(state["sent"], state["known"]) > end)).any())

    def output(self, subgraph):
        return {"arrival": subgraph.state["arrival"]}


def tdsp(store, source, departure: float, travel_time: str = "travel_time", instances=None, time=None,
         **engine_options) -> TimeSeriesResult:
    """Earliest arrival times from ``source`` leaving at ``departure`` over time-varying travel times.

    Parameters
    ----------
    source : original id of the source vertex.
    departure : departure time, in the unit of the instances' ``start``/``end``
        (and of the travel times; minutes for ``goffish.temporal`` road graphs).
    travel_time : per-instance edge attribute with non-negative travel times.
    instances, time : which instances to use (ids, or a time / (start, end) range;
        default all); those ending at or before ``departure`` are skipped.

    Returns a TimeSeriesResult whose ``dataframe`` has ``id`` and ``arrival``
    (``inf`` where unreachable). Edges are followed in their direction on a
    directed graph, both ways on an undirected one. See the module docstring
    for the exact semantics (waiting allowed, instance boundaries).

    Example
    -------
    >>> g = goffish.temporal.road_with_travel_times("/tmp/road.gofs", 10_000, hours=24)
    >>> g.tdsp(source=0, departure=7 * 60).dataframe.orderBy("arrival").show()
    """
    if travel_time not in store.instance_edge_attributes:
        raise InputError(f"{store.path}: no per-instance edge attribute '{travel_time}' "
                         f"(instance edge attributes: {store.instance_edge_attributes})")
    selected = [i for i in select_instances(store, instances, time) if i["end"] > departure]
    if not selected:
        raise InputError(f"{store.path}: no selected instance ends after departure {departure}")
    lacking = [i["id"] for i in selected if travel_time not in i["edge_attributes"]]
    if lacking:
        raise InputError(f"{store.path}: instance {lacking[0]} has no '{travel_time}' values")
    program = TimeDependentShortestPaths(store.vid_of(source), departure, travel_time,
                                         topology_changes=any(i.get("topology") for i in selected))
    return run_sequential(store, program, instances=[i["id"] for i in selected], **engine_options)


register(Algorithm(
    name="tdsp", function=tdsp, cli="tdsp", timeseries=True,
    summary="earliest arrival times over per-instance travel times (id, arrival)", returns=("arrival",),
    flags={"source": Flag("source vertex id", kind="vertex"), "departure": Flag("departure time at --source"),
           "travel_time": Flag("per-instance edge travel-time attribute"),
           "instances": Flag("comma-separated instance ids (default: all)", kind="instances"),
           "time": Flag("instances covering TIME or overlapping START,END", kind="time")},
))
