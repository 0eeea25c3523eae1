"""Single-source shortest paths on non-negative weights, sub-graph-centric.

Each superstep, a sub-graph whose boundary distances improved runs one
multi-source Dijkstra (scipy.sparse.csgraph, C) over its local edges, seeded
with the improved distances through a virtual source, then sends
``distance + weight`` along its remote edges; a min combiner merges those
messages before the shuffle. Supersteps grow with the number of partition
crossings on shortest paths, not with hop counts (GoFFish, Euro-Par 2014).
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import scipy.sparse as sp
from scipy.sparse.csgraph import dijkstra

from algorithms.weights import reject_bad_weights
from algorithms.registry import Algorithm, Flag, NetworkX, register
from gopher.engine import RunResult, run_program
from gopher.program import SubgraphProgram


def _seeded_dijkstra(adjacency: sp.csr_matrix, seeds: np.ndarray, seed_dist: np.ndarray) -> np.ndarray:
    """Distances from a virtual vertex joined to ``seeds`` by edges of length ``seed_dist``."""
    n = adjacency.shape[0]
    indptr = np.concatenate([adjacency.indptr, [adjacency.indptr[-1] + len(seeds)]])
    indices = np.concatenate([adjacency.indices, seeds])
    data = np.concatenate([adjacency.data, seed_dist])
    augmented = sp.csr_matrix((data, indices, indptr), shape=(n + 1, n + 1))
    return dijkstra(augmented, directed=True, indices=n)[:n]


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
        found = _seeded_dijkstra(subgraph.adjacency(self.weight), seeds, seed_dist)
        changed = found < dist
        dist[changed] = found[changed]
        remote = subgraph.remote_edges
        rows = remote.outgoing(subgraph.directed) & changed[remote.src]
        if rows.any():
            w = remote.attribute(self.weight)[rows] if self.weight else 1.0
            ctx.send_to_vertices(remote.dst[rows], dist[remote.src[rows]] + w)

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
