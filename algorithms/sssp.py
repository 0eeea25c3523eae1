"""Single-source shortest paths on non-negative weights, sub-graph-centric.

Each superstep, a sub-graph whose boundary distances improved runs one
multi-source Dijkstra (scipy.sparse.csgraph, C) over its local edges, seeded
with the improved distances through a virtual source, then sends
``distance + weight`` along its remote edges; a min combiner merges those
messages before the shuffle. Supersteps grow with the number of partition
crossings on shortest paths, not with hop counts (GoFFish, Euro-Par 2014).

A sub-graph that already has distances explores only where they drop
(:func:`lower_distances`): most later supersteps improve a few hundred of its
vertices, and a whole Dijkstra over it cost ~20 ms each at 125k vertices. It stays
scipy's C: in a fresh worker (after a connected-components task's imports), importing
scipy.sparse.csgraph cost 0.22-0.30 CPU-s, importing numba and loading one cached kernel
0.57-0.89, more than a numba Dijkstra could save over this worker's share of the 1M road
grid's SSSP (its Dijkstras and lowerings ~0.25 CPU-s).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import scipy.sparse as sp
from scipy.sparse.csgraph import dijkstra

from algorithms.weights import reject_bad_weights
from algorithms.registry import Algorithm, Flag, NetworkX, register
from gopher.engine import RunResult, run_program
from gopher.program import SubgraphProgram


def seeded_dijkstra(adjacency: sp.csr_matrix, seeds: np.ndarray, seed_dist: np.ndarray,
                    limit: float = np.inf, lengths: np.ndarray | None = None) -> np.ndarray:
    """Distances from a virtual vertex joined to ``seeds`` by edges of length ``seed_dist``
    (``inf`` beyond ``limit``: scipy explores no further), over ``lengths`` (one per arc of
    ``adjacency``) where given, else the matrix's own."""
    arcs = SeededArcs(adjacency, room=len(seeds))
    arcs.arc_lengths[:] = adjacency.data if lengths is None else lengths
    return arcs.distances(seeds, seed_dist, limit)


class SeededArcs:
    """An adjacency's arcs, with lengths written through :attr:`arc_lengths`, and room after them
    for the arcs of a virtual vertex ``n`` to the seeds of a Dijkstra (:meth:`distances`). Kept
    between Dijkstras over the same arcs (a :class:`Potential`'s reduced lengths), it takes each
    call's seeds into that room instead of copying every arc into a new matrix (~0.5-1.3 ms of a
    small lowering's 2-10 ms on a 125k-vertex sub-graph). The room grows, doubling, for a call with
    more seeds than it holds."""

    def __init__(self, adjacency: sp.csr_matrix, room: int = 0):
        self.n, self.m = adjacency.shape[0], adjacency.nnz
        index = adjacency.indices.dtype            # kept: scipy copies 64-bit indices to 32 bits on every call
        self.indptr = np.append(adjacency.indptr, adjacency.indptr[-1])
        self.indices = np.empty(self.m + room, index)
        self.indices[:self.m] = adjacency.indices
        self.lengths = np.empty(self.m + room)

    @property
    def arc_lengths(self) -> np.ndarray:
        """The arcs' lengths, a view to write them in place."""
        return self.lengths[:self.m]

    @property
    def nbytes(self) -> int:
        return self.indptr.nbytes + self.indices.nbytes + self.lengths.nbytes

    def distances(self, seeds: np.ndarray, seed_dist: np.ndarray, limit: float = np.inf) -> np.ndarray:
        """:func:`seeded_dijkstra` over these arcs and their lengths."""
        end = self.m + len(seeds)
        if end > len(self.indices):
            self._grow(max(len(seeds), 2 * (len(self.indices) - self.m)))
        self.indices[self.m:end] = seeds
        self.lengths[self.m:end] = seed_dist
        self.indptr[-1] = end
        augmented = sp.csr_matrix((self.lengths[:end], self.indices[:end], self.indptr),
                                  shape=(self.n + 1, self.n + 1))
        return dijkstra(augmented, directed=True, indices=self.n, limit=limit)[:self.n]

    def _grow(self, room: int) -> None:
        indices, lengths = np.empty(self.m + room, self.indices.dtype), np.empty(self.m + room)
        indices[:self.m], lengths[:self.m] = self.indices[:self.m], self.lengths[:self.m]
        self.indices, self.lengths = indices, lengths


#: a region of more than this share of the vertices gets the plain Dijkstra over the whole matrix
_WHOLE = 0.5
#: the reduced lengths are rebuilt once this share of the vertices has been lowered since (see :class:`Potential`)
_STALE = 1 / 16


@dataclass
class Potential:
    """Johnson's potential for one adjacency, and its reduced lengths, kept between lowerings.

    Any earlier fixpoint of the arcs stays a feasible potential (the lengths never change), and
    while the distances are at or below it, a vertex drops only where its new distance is under
    its potential too: one limited Dijkstra over these reduced lengths still finds every vertex
    that drops, plus at most those lowered since the potential was taken. So a small lowering
    skips the O(arcs) rebuild (a third of its CPU time on a 125k-vertex grid sub-graph) until
    that share passes :data:`_STALE`, or the distances are not below it (another run, a restart)."""

    values: np.ndarray               # per vertex: the distances it was taken from; ``above`` where unreached
    arcs: SeededArcs                 # the adjacency's arcs with their reduced lengths: per arc,
                                     # length + values[source] - values[target], at least 0 (while
                                     # not taken, any lengths: a first Dijkstra runs over them)
    lengths_sum: float
    above: float = np.inf            # over every distance a lowering may find (where set)
    whole: bool = False              # every finite value a whole number
    stale: int = -1                  # vertices lowered since it was taken (-1: never taken)

    @classmethod
    def of(cls, adjacency: sp.csr_matrix) -> "Potential":
        """Not taken yet; its arrays' sizes, for the task cache's account."""
        return cls(np.empty(adjacency.shape[0]), SeededArcs(adjacency), float(adjacency.data.sum()))

    def fit(self, adjacency: sp.csr_matrix, dist: np.ndarray, finite: np.ndarray, seed_dist: np.ndarray) -> None:
        """Take ``dist`` (a fixpoint) as the potential unless the kept one still serves."""
        if (0 <= self.stale <= _STALE * len(dist) and seed_dist.max() + self.lengths_sum < self.above
                and np.all(dist <= self.values)):
            return
        self.above = dist[finite].max() + self.lengths_sum + seed_dist.max() + 1.0   # no distance here reaches it
        self.values = np.where(finite, dist, self.above)
        reduced = self.arcs.arc_lengths
        np.add(np.repeat(self.values, np.diff(adjacency.indptr)), adjacency.data, out=reduced)
        reduced -= self.values[adjacency.indices]
        np.maximum(reduced, 0.0, out=reduced)
        self.whole = _whole(self.values)
        self.stale = 0


def lower_distances(adjacency: sp.csr_matrix, dist: np.ndarray, seeds: np.ndarray, seed_dist: np.ndarray,
                    integral: bool, potential: Potential | None = None) -> np.ndarray:
    """Lower ``dist`` in place to the distances from ``seeds`` (at ``seed_dist``) over
    ``adjacency`` where they are shorter; returns the mask of lowered entries. ``integral``:
    every length is a whole number (hop counts): with whole distances, sums below 2**53 are exact.
    ``potential``: the one kept for ``adjacency`` between calls (default: taken afresh).

    ``dist`` is a fixpoint of the arcs (all inf, or left by an earlier call), so a vertex drops
    only if every vertex on its new shortest path drops too: Dijkstra need not go beyond them.
    scipy's Dijkstra has no per-vertex bound, only a global ``limit``; over Johnson's reduced
    lengths ``w + p[v] - p[u]`` (>= 0 for a potential ``p`` that was a fixpoint: ``dist`` now or
    earlier, :class:`Potential`) a vertex drops only where its reduced distance from the seeds,
    each started at ``seed_dist - p[seed] + c``, is under ``c`` (the largest seed improvement),
    so one limited Dijkstra visits only those vertices. Unreached vertices take a potential above
    every distance. Whole lengths give the distances from it exactly; otherwise it only marks the
    region (with a margin for rounding) and a second Dijkstra over the region's own arcs gives
    them as the plain Dijkstra would."""
    n = len(dist)
    better = seed_dist < dist[seeds]
    seeds, seed_dist = seeds[better], seed_dist[better]
    lowered = np.zeros(n, dtype=bool)
    if not len(seeds):
        return lowered
    finite = np.isfinite(dist)
    if not finite.any():
        if potential is None:
            found = seeded_dijkstra(adjacency, seeds, seed_dist)
        else:                                # the potential's arcs, given the plain lengths: no copy of the arcs
            potential.arcs.arc_lengths[:] = adjacency.data
            found = potential.arcs.distances(seeds, seed_dist)
            potential.stale = -1             # distances that start over: take the potential afresh
        lowered = found < dist
        dist[lowered] = found[lowered]
        return lowered
    if potential is None:
        potential = Potential.of(adjacency)
    potential.fit(adjacency, dist, finite, seed_dist)
    start = seed_dist - potential.values[seeds]
    c = -start.min()
    top = potential.values.max()
    exact = integral and top + c < 2.0 ** 53 and _whole(seed_dist) and potential.whole
    if exact:
        limit = c - 0.5
    else:                                    # rounding of the reduced lengths along a path of up to n arcs
        limit = c + 4.0 * n * np.finfo(np.float64).eps * (top + adjacency.data.max(initial=0.0) + c)
    found = potential.arcs.distances(seeds, start + c, limit)
    region = np.flatnonzero(np.isfinite(found))
    if exact:
        values = found[region] + potential.values[region] - c
    elif len(region) > _WHOLE * n:
        values = seeded_dijkstra(adjacency, seeds, seed_dist)[region]
    else:
        local = np.full(n, -1, dtype=np.int64)
        local[region] = np.arange(len(region))
        values = seeded_dijkstra(adjacency[region][:, region], local[seeds], seed_dist)
    drop = values < dist[region]
    lowered[region[drop]] = True
    dist[region[drop]] = values[drop]
    potential.stale += int(drop.sum())
    return lowered


def _whole(values: np.ndarray) -> bool:
    return bool(np.all(np.floor(values) == values))


class SingleSourceShortestPaths(SubgraphProgram):
    """Superstep 0 runs once per partition (:meth:`compute_partition`): only the source's
    sub-graph does any work; a sub-graph gets its distances when a message first reaches it, and
    a partition's column is put together at once (:meth:`output_partition`)."""

    combiner = "min"
    output_schema = {"distance": pa.float64()}

    def __init__(self, source_vid: int, weight: str | None = None):
        self.source_vid = int(source_vid)
        self.weight = weight
        self.edge_attributes = (weight,) if weight else ()

    def compute_partition(self, subgraphs, ctx):
        if ctx.superstep:
            return False
        # vids grow with the sub-graph number (those an instance adds come last): one candidate
        at = int(np.searchsorted(subgraphs.first_vertex_ids, self.source_vid, side="right")) - 1
        if at >= 0:
            subgraph = subgraphs[at]
            local = int(subgraph.local_index([self.source_vid])[0])
            if local >= 0:
                self._relax(subgraph, np.array([local]), np.array([0.0]), ctx)
        return np.ones(len(subgraphs), dtype=bool)

    def compute(self, subgraph, messages, ctx):
        dist = self._distances(subgraph)
        better = messages.values < dist[messages.vertices]
        if better.any():
            self._relax(subgraph, messages.vertices[better], messages.values[better], ctx)
        ctx.vote_to_halt()

    def _distances(self, subgraph) -> np.ndarray:
        state = subgraph.state
        if "dist" not in state:
            state["dist"] = np.full(subgraph.num_vertices, np.inf)
        return state["dist"]

    def _relax(self, subgraph, seeds: np.ndarray, seed_dist: np.ndarray, ctx) -> None:
        """Shorten ``subgraph``'s distances from ``seeds`` (at ``seed_dist``) over its local edges
        and send the improved ones over its remote edges."""
        dist = self._distances(subgraph)
        adjacency, integral, potential = subgraph.derived(("sssp arcs", self.weight), lambda: self._arcs(subgraph))
        changed = lower_distances(adjacency, dist, seeds, seed_dist, integral, potential)
        remote = subgraph.remote_edges
        rows = remote.outgoing(subgraph.directed) & changed[remote.src]
        if rows.any():
            w = remote.attribute(self.weight)[rows] if self.weight else 1.0
            ctx.send_to_vertices(remote.dst[rows], dist[remote.src[rows]] + w)

    def _arcs(self, subgraph) -> tuple[sp.csr_matrix, bool, Potential]:
        """The local adjacency with 32-bit indices where they fit (scipy's Dijkstra copies wider
        ones to 32 bits on every call: a third of a small re-relaxation's time), whether every
        length is a whole number (hop counts are), and its :class:`Potential`."""
        adjacency = subgraph.adjacency(self.weight)
        if adjacency.indices.dtype != np.int32 and adjacency.nnz + adjacency.shape[0] < 2 ** 31 - 1:
            adjacency = sp.csr_matrix((adjacency.data, adjacency.indices.astype(np.int32),
                                       adjacency.indptr.astype(np.int32)), shape=adjacency.shape)
        return adjacency, self.weight is None or _whole(adjacency.data), Potential.of(adjacency)

    def output_partition(self, subgraphs):
        ends = np.cumsum(subgraphs.vertex_counts)
        distance = np.full(int(ends[-1]) if len(ends) else 0, np.inf)
        for state, end, count in zip(subgraphs.states, ends.tolist(), subgraphs.vertex_counts.tolist()):
            if "dist" in state:
                distance[end - count:end] = state["dist"]
        return {"distance": distance}

    def output(self, subgraph):
        return {"distance": self._distances(subgraph)}


_WEIGHT_PROBLEMS = (
    ("null", "{path}: edge attribute '{weight}' has missing values (partition {partition}, e.g. edge {example})"),
    ("nan", "{path}: edge attribute '{weight}' has NaN values (partition {partition}, e.g. edge {example})"),
    ("negative", "{path}: negative edge weight {low} in '{weight}' (partition {partition}, e.g. edge {example}); "
                 "shortest paths here need non-negative weights"),
    ("infinite", "{path}: infinite edge weight in '{weight}' (partition {partition}, e.g. edge {example}); "
                 "shortest paths here need finite weights"),
)


def check_weights(store, weight: str, instance=None) -> None:
    """Reject a missing or non-numeric attribute, and null, NaN, negative or infinite weights
    (of ``instance``'s edges if given), before any work starts (checked on Spark, one task per
    partition); the error names the partition and an edge that has the problem."""
    reject_bad_weights(store, weight, _WEIGHT_PROBLEMS, instance)


def sssp(store, source, weight: str | None = None, **engine_options) -> RunResult:
    """Shortest-path distances from ``source``, as ``networkx.single_source_dijkstra_path_length``.

    Parameters
    ----------
    source
        An original vertex id of the graph.
    weight : str, optional
        A static edge attribute holding non-negative lengths; None counts hops.
    engine_options
        :class:`gopher.engine.EngineOptions` keywords; ``instance=ID`` uses its edges and lengths.

    Returns
    -------
    RunResult
        ``dataframe`` has ``id`` and ``distance`` (``inf`` where unreachable). Edges are
        followed in their direction on a directed graph, both ways on an undirected one.

    Raises
    ------
    InputError
        ``source`` is not a vertex of the graph, or ``weight`` is not a numeric attribute,
        or some length is negative, NaN or null (the error names the partition and an edge).

    Example
    -------
    >>> g = goffish.open("road.gofs")                                    # doctest: +SKIP
    >>> g.sssp(0, weight="length").dataframe.show(3)

    Each sub-graph runs Dijkstra locally (scipy) per superstep and sends improved distances
    over cut edges: supersteps grow with how often shortest paths cross partitions, not with
    the diameter (Simmhan et al., "GoFFish", Euro-Par 2014).
    """
    if weight is not None:
        check_weights(store, weight, engine_options.get("instance"))
    return run_program(store, SingleSourceShortestPaths(
        store.vid_of(source, store.instance_entry(engine_options.get("instance"))), weight), **engine_options)


register(Algorithm(
    name="sssp", function=sssp, cli="sssp",
    summary="single-source shortest-path distances (id, distance; inf = unreachable)", returns=("distance",),
    flags={"source": Flag("source vertex id", kind="vertex"),
           "weight": Flag("edge attribute of non-negative lengths (default: hops)")},
    networkx=(NetworkX("single_source_shortest_path_length", "distances", params={"source": "source"}),
              NetworkX("single_source_dijkstra_path_length", "distances", params={"source": "source"},
                       weight="weight"),
              NetworkX("has_path", "reaches", params={"source": "source"}),
              NetworkX("tournament.is_reachable", "reaches", params={"s": "source"}, graphs="directed")),
))
