"""GoFFish on Spark: temporal graph storage (GoFS), sub-graph-centric BSP (Gopher)
and streaming (Hatrick) on PySpark.

    import goffish
    spark = goffish.session()
    g = goffish.ingest("datasets/road-small.txt.gz", "/tmp/road.gofs", weight="length")
    g.connected_components().dataframe.show()
"""
from __future__ import annotations

from goffish.session import session

__all__ = ["session", "ingest", "open", "Instance", "query"]


def ingest(source, path: str, num_partitions: int = 4, partitioner: str | None = None, overwrite: bool = False,
           name: str | None = None, seed: int = 0, spark=None, engine: str = "auto",
           engine_threshold: int | None = None, **read_options):
    """Store a graph as GoFS and return its handle.

    ``source`` is a path (SNAP edge list, CSV, Parquet), a NetworkX graph, a
    GraphFrame, a pandas DataFrame of edges, or a ``gofs.graph_input.GraphInput``;
    ``read_options`` go to the reader (``directed``, ``weight``, ``schema`` ...).
    ``engine``: ``"local"`` (read, partition and write in this process),
    ``"spark"`` (every stage on Spark: :mod:`gofs.ingest.spark`), or ``"auto"``:
    Spark for input paths larger than ``engine_threshold`` bytes (default: the
    conf ``spark.goffish.ingest.localMaxBytes``, else 256 MiB). ``partitioner``
    defaults to ``"metis"`` locally and ``"multilevel"`` on Spark. A Spark
    session is started only if a stage runs on Spark (see :func:`gofs.ingest.ingest`).
    """
    from gofs.ingest import ingest as ingest_graph

    ingest_graph(source, path, num_partitions=num_partitions, partitioner=partitioner, overwrite=overwrite,
                 name=name, seed=seed, spark=spark or session, engine=engine, engine_threshold=engine_threshold,
                 **read_options)
    return open(path, spark=spark)


def open(path: str, spark=None):  # noqa: A001 - mirrors goffish.open(path) in the design
    """Open a stored GoFS graph."""
    from goffish.graph import Graph

    return Graph(path, spark)


def query(graph_or_stream, text: str, params: dict | None = None, time_ordered: bool = False, **options):
    """Register a CGQL query and return the topic its events go to (see :func:`hatrick.cgql.query`).

    ``graph_or_stream``: a stored graph (past instances), a Hatrick stream (live
    updates; pass ``stream=`` with a graph for frames that straddle now), or
    recorded GraphViews. ``params`` binds symbolic constants (``C``, ``d``, ``$x``).

        topic = goffish.query(g, "DETECT Cluster(sum(node.usage) > C) WHERE edge: {type = power}",
                              params={"C": 100}, now=24.0)
        for event in topic: print(event["time"], event["status"], event["members"])
    """
    from hatrick.cgql import query as register

    return register(graph_or_stream, text, params, time_ordered, **options)


def __getattr__(name):
    if name == "Instance":
        from gofs.instances import Instance

        return Instance
    raise AttributeError(name)
