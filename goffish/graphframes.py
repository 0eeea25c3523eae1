"""GraphFrames' API on GoFS: change ``from graphframes import GraphFrame`` to
``from goffish.graphframes import GraphFrame`` and nothing else.

A :class:`GraphFrame` is a pair of DataFrames, as in GraphFrames (directed,
vertices with ``id``, edges with ``src`` and ``dst``). The first accelerated
call ingests it on Spark into a temporary GoFS store (removed with the object) and runs
the sub-graph-centric algorithm there; results have GraphFrames' columns. The
accelerated methods come from the algorithm registry (an algorithm's
``GraphFramesMethod`` declarations: ``connectedComponents``, ``louvain``,
``betweenness``), plus ``pageRank`` and ``shortestPaths`` (weighted too), whose
results GraphFrames shapes differently; ``degrees``/``inDegrees``/``outDegrees``
are the same DataFrame queries GraphFrames runs. The rest
(``labelPropagation``, ``triangleCount``, ``stronglyConnectedComponents``,
``bfs``, ``find``, ``aggregateMessages``, ...) delegate to the real GraphFrames
when its jar is on the session, and say so when it is not.

Where the semantics differ from GraphFrames: ``connectedComponents`` labels
are the same partition with other label values; ``pageRank(maxIter=k)`` runs k
NetworkX-style iterations (dangling mass handed out each iteration, GraphFrames
drops it and rescales at the end: the same ranks once converged, close after a
few iterations); ``pageRank(tol=t)`` stops when the mean change per vertex is
below ``t`` (GraphFrames: the largest change).
"""
from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from goffish.temporary import partitions_for, remove_with, temporary_store
from gofs.errors import InputError

DELEGATED = ("labelPropagation", "triangleCount", "stronglyConnectedComponents", "bfs", "find",
             "aggregateMessages", "pregel", "filterVertices", "filterEdges", "dropIsolatedVertices",
             "triplets", "svdPlusPlus", "parallelPersonalizedPageRank", "powerIterationClustering")
"""GraphFrames methods this class does not accelerate: they run on the real GraphFrames."""


class GraphFrame:
    """A graph as GraphFrames sees it: ``GraphFrame(vertices, edges)``."""

    def __init__(self, v: DataFrame, e: DataFrame):
        for frame, columns, what in ((v, ("id",), "vertices"), (e, ("src", "dst"), "edges")):
            missing = [c for c in columns if c not in frame.columns]
            if missing:
                raise InputError(f"GraphFrame {what} DataFrame has no column {missing[0]!r} "
                                 f"(columns: {frame.columns})")
        self._vertices, self._edges = v, e
        self._stores: dict = {}

    @classmethod
    def from_graphframe(cls, gf) -> "GraphFrame":
        """The same graph as a ``graphframes.GraphFrame`` (its DataFrames, not a copy)."""
        return cls(gf.vertices, gf.edges)

    @property
    def vertices(self) -> DataFrame:
        return self._vertices

    @property
    def edges(self) -> DataFrame:
        return self._edges

    def __repr__(self) -> str:
        return f"GraphFrame(v:{self._vertices.schema.simpleString()}, e:{self._edges.schema.simpleString()})"

    # ------------------------------------------------------------------ degrees: GraphFrames' own queries
    @property
    def outDegrees(self) -> DataFrame:  # noqa: N802 - GraphFrames' names
        return self._edges.groupBy(F.col("src").alias("id")).agg(F.count("*").cast("int").alias("outDegree"))

    @property
    def inDegrees(self) -> DataFrame:  # noqa: N802
        return self._edges.groupBy(F.col("dst").alias("id")).agg(F.count("*").cast("int").alias("inDegree"))

    @property
    def degrees(self) -> DataFrame:
        ends = self._edges.select(F.explode(F.array("src", "dst")).alias("id"))
        return ends.groupBy("id").agg(F.count("*").cast("int").alias("degree"))

    # ------------------------------------------------------------------ accelerated
    def pageRank(self, resetProbability: float = 0.15, sourceId=None, maxIter: int | None = None,  # noqa: N802,N803
                 tol: float | None = None) -> "GraphFrame":
        """GraphFrames' PageRank: vertices get ``pagerank`` (summing to the vertex count), edges
        ``weight`` (1 / the source's out-degree). ``sourceId`` (personalised) runs on GraphFrames."""
        if (maxIter is None) == (tol is None):
            raise InputError("pageRank: exactly one of maxIter or tol should be set")
        if sourceId is not None:
            return self._delegate("pageRank")(resetProbability=resetProbability, sourceId=sourceId,
                                              maxIter=maxIter, tol=tol)
        store = self._store()
        n = store.vertex_count()
        if maxIter is not None:
            result = store.pagerank(alpha=1.0 - resetProbability, max_iter=int(maxIter), tol=0.0)
        else:
            result = store.pagerank(alpha=1.0 - resetProbability, max_iter=10_000, tol=float(tol) / n)
        ranks = result.dataframe.select("id", (F.col("pagerank") * F.lit(float(n))).alias("pagerank"))
        out = self.outDegrees
        weights = self._edges.join(out.select(F.col("id").alias("src"), "outDegree"), "src") \
            .withColumn("weight", F.lit(1.0) / F.col("outDegree")).drop("outDegree")
        return GraphFrame(self._vertices.join(ranks, "id"), weights.select(*self._edges.columns, "weight"))

    def shortestPaths(self, landmarks, weight: str | None = None) -> DataFrame:  # noqa: N802
        """GraphFrames' shortestPaths: vertices get ``distances``, a map from each landmark they reach
        (along edge direction) to the hop count; with ``weight`` (an edge column of non-negative
        lengths, which GraphFrames lacks) to the shortest weighted length."""
        store = self._store(reversed_edges=True)
        value_type = T.DoubleType() if weight else T.IntegerType()
        found = []
        for landmark in landmarks:
            try:
                store.vid_of(landmark)
            except Exception:
                continue                          # not a vertex: reaches nobody, as in GraphFrames
            distances = store.sssp(landmark, weight=weight).dataframe
            found.append(distances.filter(F.col("distance") < float("inf")).select(
                "id", F.struct(F.lit(landmark).alias("key"), F.col("distance").cast(value_type).alias("value"))
                .alias("entry")))
        key_type = self._vertices.schema["id"].dataType
        empty = F.create_map().cast(T.MapType(key_type, value_type))
        if not found:
            return self._vertices.withColumn("distances", empty)
        entries = found[0]
        for more in found[1:]:
            entries = entries.unionByName(more)
        maps = entries.groupBy("id").agg(F.map_from_entries(F.collect_list("entry")).alias("distances"))
        return self._vertices.join(maps, "id", "left").withColumn("distances", F.coalesce("distances", empty))

    def _store(self, reversed_edges: bool = False):
        """The graph (or its reverse) as a temporary GoFS store, ingested once by the Spark ingest
        engine: the DataFrames never come to the driver."""
        if reversed_edges not in self._stores:
            numeric = [f.name for f in self._edges.schema.fields
                       if f.name not in ("src", "dst") and isinstance(f.dataType, T.NumericType)]
            ends = (F.col("dst").alias("src"), F.col("src").alias("dst")) if reversed_edges else ("src", "dst")
            store, directory = temporary_store(self._edges.select(*ends, *numeric),
                                               partitions_for(self._vertices.count()), self._vertices.sparkSession,
                                               engine="spark", directed=True, vertices=self._vertices.select("id"))
            remove_with(self, directory)
            self._stores[reversed_edges] = store
        return self._stores[reversed_edges]

    # ------------------------------------------------------------------ the real GraphFrames for the rest
    def _delegate(self, name: str):
        from sparkshim.graphframes import require_graphframes

        try:
            real = require_graphframes()
        except RuntimeError as exc:
            raise RuntimeError(f"GraphFrame.{name} is not accelerated by goffish and runs on GraphFrames, "
                               f"which is not available here: {exc}") from None
        return getattr(real(self._vertices, self._edges), name)

    def __getattr__(self, name: str):
        if name in DELEGATED:
            return self._delegate(name)
        raise AttributeError(f"'GraphFrame' object has no attribute {name!r}")

    def cache(self) -> "GraphFrame":
        self._vertices.cache()
        self._edges.cache()
        return self

    def persist(self, storageLevel=None) -> "GraphFrame":  # noqa: N803
        for frame in (self._vertices, self._edges):
            frame.persist() if storageLevel is None else frame.persist(storageLevel)
        return self

    def unpersist(self, blocking: bool = False) -> "GraphFrame":
        self._vertices.unpersist(blocking)
        self._edges.unpersist(blocking)
        return self


def _vertex_method(algorithm, declaration):
    """A GraphFrames-style method that adds the algorithm's result column to the vertices."""

    def method(self, **params) -> DataFrame:
        unknown = set(params) - set(declaration.params) - set(declaration.ignored)
        if unknown:
            raise TypeError(f"{declaration.name}() got an unexpected keyword argument {sorted(unknown)[0]!r}")
        options = {ours: params[theirs] for theirs, ours in declaration.params.items() if theirs in params}
        result = algorithm.function(self._store(), **options)
        column = result.dataframe.select("id", F.col(declaration.ours).alias(declaration.column))
        return self._vertices.join(column, "id")

    method.__name__ = declaration.name
    accepted = ", ".join(list(declaration.params) + list(declaration.ignored)) or "no parameters"
    method.__doc__ = (f"{algorithm.summary}: the vertices with ``{declaration.column}`` "
                      f"(keyword parameters: {accepted}; see goffish's ``{algorithm.name}``).")
    return method


def _install() -> None:
    from algorithms.registry import algorithms

    for algorithm in algorithms().values():
        for declaration in algorithm.graphframes:
            setattr(GraphFrame, declaration.name, _vertex_method(algorithm, declaration))


_install()
