"""Baselines the sub-graph-centric algorithms are measured against.

Vertex-centric GraphFrames baselines (on the same Spark session) take a vertex
DataFrame with an ``id`` column and an edge DataFrame with ``src``, ``dst`` and,
for weighted SSSP, a weight column; they return Spark DataFrames keyed by ``id``.

Single-machine references run python-igraph (C kernels, one core) on numpy
arrays of dense vertex indices ``0..n-1``.

Semantics shared with NetworkX, and where they part:

- undirected graphs are given to GraphFrames as both directions of every edge,
  with a self-loop kept once (as in NetworkX's adjacency matrix);
- parallel edges count with their multiplicity (GraphFrames, igraph), whereas a
  NetworkX ``Graph``/``DiGraph`` collapses them;
- see :func:`graphframes_pagerank` and :func:`igraph_pagerank` for PageRank.
"""
from __future__ import annotations

import ctypes
import functools
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sparkshim.checkpoints import ensure_checkpoint_dir
from gofs.errors import InputError
from sparkshim.graphframes import require_graphframes

_INF = float("inf")


def _directed_edges(edges: DataFrame, directed: bool, reverse: bool = False,
                    extra: tuple[str, ...] = ()) -> DataFrame:
    """``src, dst, *extra`` edges to traverse: as given, reversed, or both directions if undirected.

    A self-loop is not duplicated when both directions are taken.
    """
    forward = edges.select("src", "dst", *extra)
    backward = edges.select(F.col("dst").alias("src"), F.col("src").alias("dst"), *extra)
    if directed:
        return backward if reverse else forward
    return forward.unionByName(backward.filter(F.col("src") != F.col("dst")))


@contextmanager
def _aqe_disabled(spark):
    """GraphFrames' settings for the block, then exactly what the user had: adaptive
    execution off (under it GraphFrames 0.8 has returned wrong components and BFS
    results, graphframes/graphframes#428, #453), and, where the user left Spark's
    default of 200 shuffle partitions, two per core (what AQE would otherwise have
    coalesced them to; 200 tiny tasks per join would make the baseline unfairly slow).
    Spark has no per-query setting, so these are the session's conf for the baseline's
    duration."""
    settings = {"spark.sql.adaptive.enabled": "false"}
    if spark.conf.get("spark.sql.shuffle.partitions") == "200":
        settings["spark.sql.shuffle.partitions"] = str(2 * spark.sparkContext.defaultParallelism)
    previous = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in previous.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def _check_source(vertices: DataFrame, source) -> None:
    if vertices.filter(F.col("id") == F.lit(source)).limit(1).count() == 0:
        raise InputError(f"source vertex {source!r} is not in the vertex DataFrame")


def graphframes_connected_components(vertices: DataFrame, edges: DataFrame, algorithm: str = "graphframes",
                                     checkpoint_interval: int = 2) -> DataFrame:
    """Weakly connected components with ``GraphFrame.connectedComponents``.

    Parameters
    ----------
    vertices, edges : DataFrames with ``id`` and ``src``, ``dst``.
    algorithm : ``"graphframes"`` (the default two-phase algorithm) or ``"graphx"``.
    checkpoint_interval : iterations between checkpoints (``"graphframes"`` only).

    Returns
    -------
    DataFrame ``(id, component)``; component labels are arbitrary long ids chosen by
    GraphFrames, equal within a component. Computed with AQE off and materialised.
    """
    GraphFrame = require_graphframes()
    spark = vertices.sparkSession
    ensure_checkpoint_dir(spark.sparkContext)
    graph = GraphFrame(vertices.select("id"), edges.select("src", "dst"))
    with _aqe_disabled(spark):
        result = graph.connectedComponents(algorithm=algorithm, checkpointInterval=checkpoint_interval)
        return result.select("id", "component").localCheckpoint()


def graphframes_shortest_paths(vertices: DataFrame, edges: DataFrame, source, directed: bool) -> DataFrame:
    """Unweighted hop distances from ``source`` with ``GraphFrame.shortestPaths``.

    GraphFrames measures distances from every vertex *to* a landmark along edge
    direction, so a directed graph is given reversed and an undirected one in both
    directions.

    Returns
    -------
    DataFrame ``(id, distance)`` with ``distance`` a double, ``inf`` if unreachable.

    Raises
    ------
    ValueError if ``source`` is not a vertex.
    """
    GraphFrame = require_graphframes()
    _check_source(vertices, source)
    graph = GraphFrame(vertices.select("id"), _directed_edges(edges, directed, reverse=True))
    with _aqe_disabled(vertices.sparkSession):
        result = graph.shortestPaths(landmarks=[source])
        hops = F.element_at(F.col("distances"), F.lit(source)).cast("double")
        return result.select("id", F.coalesce(hops, F.lit(_INF)).alias("distance")).localCheckpoint()


def _fresh_cached(df: DataFrame) -> DataFrame:
    """``df`` cached behind a new plan with default statistics (GraphFrames' utility)."""
    from graphframes.lib import AggregateMessages

    return AggregateMessages.getCachedDataFrame(df)


def graphframes_weighted_sssp(vertices: DataFrame, edges: DataFrame, source, directed: bool,
                              weight: str = "weight", max_iterations: int | None = None,
                              checkpoint_interval: int = 5) -> DataFrame:
    """Weighted single-source shortest paths: Bellman-Ford on ``aggregateMessages``.

    Each iteration, vertices whose distance fell in the previous one send
    ``distance + weight`` along their out-edges (both directions if undirected);
    every vertex keeps the minimum. Runs until no distance changes or
    ``max_iterations``, one Spark action per iteration.

    Each iteration's state goes through ``AggregateMessages.getCachedDataFrame``,
    which caches it behind a fresh query plan: a state read three times per
    iteration otherwise nests its plan three times over, and Spark's size
    estimate (a product over joins, kept even by ``localCheckpoint``) grows until
    planning runs out of driver memory (it did on a 30x30 grid). Every
    ``checkpoint_interval`` iterations the state is also locally checkpointed to
    cut the RDD lineage.

    Returns
    -------
    DataFrame ``(id, distance)``, ``inf`` if unreachable.

    Raises
    ------
    ValueError if a weight is negative or null, or ``source`` is not a vertex.
    """
    GraphFrame = require_graphframes()
    from graphframes.lib import AggregateMessages as AM

    if edges.filter(F.col(weight).isNull() | (F.col(weight) < 0)).limit(1).count() > 0:
        raise InputError(f"edge column {weight!r} has negative or null weights; SSSP needs weights >= 0")
    _check_source(vertices, source)
    weighted = edges.withColumn("weight", F.col(weight).cast("double"))
    traversed = _directed_edges(weighted, directed, extra=("weight",)).cache()
    is_source = F.col("id") == F.lit(source)
    state = vertices.select(
        "id",
        F.when(is_source, F.lit(0.0)).otherwise(F.lit(_INF)).alias("distance"),
        is_source.alias("active"),
    ).localCheckpoint()

    message = F.when(AM.src["active"], AM.src["distance"] + AM.edge["weight"])
    iteration = 0
    while max_iterations is None or iteration < max_iterations:
        candidates = GraphFrame(state, traversed).aggregateMessages(
            F.min(AM.msg).alias("candidate"), sendToDst=message)
        improved = F.coalesce(F.col("candidate") < F.col("distance"), F.lit(False))
        updated = state.join(candidates, "id", "left").select(
            "id",
            F.when(improved, F.col("candidate")).otherwise(F.col("distance")).alias("distance"),
            improved.alias("active"),
        )
        iteration += 1
        if iteration % checkpoint_interval == 0:
            updated = updated.localCheckpoint(eager=False)
        updated = _fresh_cached(updated)
        changed = updated.filter("active").count()
        state = updated
        if changed == 0:
            break
    traversed.unpersist()
    return state.select("id", "distance")


def graphframes_pagerank(vertices: DataFrame, edges: DataFrame, directed: bool, max_iter: int = 10,
                         reset_probability: float = 0.15) -> DataFrame:
    """PageRank with ``GraphFrame.pageRank(maxIter=...)``, normalised to sum 1.

    GraphFrames (GraphX) starts every rank at 1, drops the mass of dangling
    vertices (no out-edges) in each iteration and rescales the ranks to sum N only
    at the end; NetworkX hands dangling mass out uniformly in each iteration. Both
    have the same fixed point, so after normalisation the results agree once
    converged (observed: 1e-3 apart after 10 iterations, 1e-6 after 30, 1e-10
    after 60 on a 6-vertex graph with dangling vertices), but with few iterations
    and dangling vertices the comparison with NetworkX is only approximate.
    Undirected graphs are given in both directions (a self-loop once, as NetworkX).

    Returns
    -------
    DataFrame ``(id, pagerank)`` with ranks summing to 1.
    """
    GraphFrame = require_graphframes()
    graph = GraphFrame(vertices.select("id"), _directed_edges(edges, directed))
    with _aqe_disabled(vertices.sparkSession):
        ranks = graph.pageRank(resetProbability=reset_probability, maxIter=max_iter).vertices
        ranks = ranks.select("id", "pagerank").localCheckpoint()
    total = ranks.agg(F.sum("pagerank")).first()[0]
    return ranks.select("id", (F.col("pagerank") / F.lit(total)).alias("pagerank"))


def _igraph(n: int, src: np.ndarray, dst: np.ndarray, directed: bool) -> "igraph.Graph":
    """The reference's graph. igraph is imported here, not with the module: the algorithm
    registry imports this module in every job, and igraph (with the matplotlib it loads) costs
    ~0.85 CPU-s."""
    import igraph as ig

    return ig.Graph(n=int(n), edges=list(zip(np.asarray(src).tolist(), np.asarray(dst).tolist())),
                    directed=directed)


@functools.lru_cache(maxsize=None)
def _igraph_openmp() -> tuple:
    """The OpenMP runtime(s) bundled with the python-igraph wheel, if any (PRPACK uses OpenMP)."""
    import igraph as ig

    libs = Path(ig.__file__).resolve().parent.parent / "igraph.libs"
    return tuple(ctypes.CDLL(str(path)) for path in sorted(libs.glob("libgomp*.so*")))


@contextmanager
def _one_thread():
    """Run igraph's OpenMP regions on one thread: the reference is a one-core baseline, and
    PRPACK's default thread count made PageRank ~500x slower on a loaded 2-core machine."""
    runtimes = _igraph_openmp()
    previous = [runtime.omp_get_max_threads() for runtime in runtimes]
    for runtime in runtimes:
        runtime.omp_set_num_threads(1)
    try:
        yield
    finally:
        for runtime, threads in zip(runtimes, previous):
            runtime.omp_set_num_threads(threads)


def igraph_components(n: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Weakly connected component label (igraph's numbering) of each vertex ``0..n-1``."""
    graph = _igraph(n, src, dst, directed=True)
    return np.asarray(graph.connected_components(mode="weak").membership, dtype=np.int64)


def igraph_sssp(n: int, src: np.ndarray, dst: np.ndarray, weights: np.ndarray | None, source: int,
                directed: bool) -> np.ndarray:
    """Distances from ``source`` (Dijkstra; hop counts if ``weights`` is None), ``inf`` if unreachable.

    Raises ValueError on negative weights.
    """
    if weights is not None:
        weights = np.asarray(weights, dtype=np.float64)
        if (weights < 0).any():
            raise InputError("SSSP needs weights >= 0")
        weights = weights.tolist()
    graph = _igraph(n, src, dst, directed)
    return np.asarray(graph.distances(source=int(source), weights=weights, mode="out")[0], dtype=np.float64)


def igraph_pagerank(n: int, src: np.ndarray, dst: np.ndarray, directed: bool, damping: float = 0.85,
                    weights: np.ndarray | None = None) -> np.ndarray:
    """PageRank (PRPACK solver, one thread) of each vertex ``0..n-1``, summing to 1.

    Equals ``networkx.pagerank`` (to ~1e-13) on directed graphs, including dangling
    vertices and self-loops, and on undirected graphs without self-loops. On an
    undirected graph igraph counts a self-loop twice (as in the vertex degree)
    where NetworkX counts it once: igraph's result is NetworkX's with every
    self-loop's weight doubled. Parallel edges count with multiplicity.
    """
    if weights is not None:
        weights = np.asarray(weights, dtype=np.float64).tolist()
    graph = _igraph(n, src, dst, directed)
    with _one_thread():
        ranks = graph.pagerank(directed=directed, damping=damping, weights=weights, implementation="prpack")
    return np.asarray(ranks, dtype=np.float64)


def canonical_components(labels: np.ndarray) -> np.ndarray:
    """Relabel components by their smallest vertex index, so two labelings of one
    partition compare equal (``labels[i]`` is the component of vertex ``i``).

    >>> canonical_components(np.array([7, 3, 7, 3, 9]))
    array([0, 1, 0, 1, 4])
    """
    _, first, inverse = np.unique(np.asarray(labels), return_index=True, return_inverse=True)
    return first[inverse.reshape(-1)]
