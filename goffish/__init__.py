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
    """Store a graph as GoFS (partitioned, sub-graphs found) and return its handle.

    Parameters
    ----------
    source
        A path (SNAP edge list, CSV, Parquet; ``.gz`` read as such), a NetworkX graph, a
        GraphFrame, a pandas DataFrame of edges, or a ``gofs.graph_input.GraphInput``.
    path : str
        Where the graph goes; an existing GoFS graph is replaced only with ``overwrite``.
    num_partitions : int
        Partitions (units of Spark parallelism); sub-graphs are found inside each.
    partitioner : str, optional
        ``"metis"``, ``"hash"``, ``"spark-lp"`` or ``"multilevel"``; default ``"metis"``
        locally and ``"multilevel"`` on Spark.
    engine : "auto", "local" or "spark"
        ``"local"`` reads, partitions and writes in this process; ``"spark"`` runs every
        stage on Spark (:mod:`gofs.ingest.spark`); ``"auto"`` uses Spark for input paths
        larger than ``engine_threshold`` bytes (default: the conf
        ``spark.goffish.ingest.localMaxBytes``, else 256 MiB). A Spark session is started
        only if a stage runs on Spark.
    read_options
        For the reader: ``directed``, ``weight``, ``attribute_names``, ``schema``, ``format`` ...

    Returns
    -------
    goffish.graph.Graph
        The stored graph, opened.

    Raises
    ------
    InputError
        The input is malformed: the message names the file, line and field.
    GraphExistsError
        ``path`` holds something and ``overwrite`` was not given (nothing is changed).

    Example
    -------
    >>> g = goffish.ingest("datasets/road-small.txt.gz", "/tmp/road.gofs", weight="length")  # doctest: +SKIP

    Nothing half-written is left behind: the graph is published by one atomic commit.
    """
    from gofs.ingest import ingest as ingest_graph

    ingest_graph(source, path, num_partitions=num_partitions, partitioner=partitioner, overwrite=overwrite,
                 name=name, seed=seed, spark=spark or session, engine=engine, engine_threshold=engine_threshold,
                 **read_options)
    return open(path, spark=spark)


def open(path: str, spark=None):  # noqa: A001 - mirrors goffish.open(path) in the design
    """Open a stored GoFS graph: read its manifest (no data file is read until asked).

    Parameters
    ----------
    path : str
        The graph's directory (local, ``file://`` or any filesystem pyarrow opens).
    spark : SparkSession, optional
        The session Spark reads and runs use (default: the active one, when first needed).

    Returns
    -------
    goffish.graph.Graph
        The handle: reads (``g.vertices()``, ``g.edges()``, ``g.num_vertices``), every
        registered algorithm as a method (``g.sssp(...)``), ``g.run(program)``, ``g.stream()``.

    Raises
    ------
    ManifestError
        No GoFS graph there, or its manifest is damaged (the message names the file).

    Example
    -------
    >>> g = goffish.open("/tmp/road.gofs")                               # doctest: +SKIP
    >>> print(g.info())
    """
    from goffish.graph import Graph

    return Graph(path, spark)


def query(graph_or_stream, text: str, params: dict | None = None, time_ordered: bool = False, **options):
    """Register a CGQL continuous query and return the topic its events go to.

    Parameters
    ----------
    graph_or_stream
        A stored graph (its instances are the past), a Hatrick stream (live updates; pass
        ``stream=`` with a graph for frames that straddle now), or recorded GraphViews.
    text : str
        CGQL: ``DETECT Cluster(...) | Reach(...) [WHERE ...] [FOR ...|SINCE ...]``, ``CANCEL topic``.
    params : dict, optional
        Binds the query's symbolic constants (``C``, ``d``, ``$x``).
    time_ordered : bool
        Sort each publication's events by time.
    options
        ``now``, ``time_unit``, ``stream``, ``directed``, ... (see :func:`hatrick.cgql.query`).

    Returns
    -------
    hatrick.cgql.Topic
        Iterable and subscribable events; ``topic.cancel()`` stops the query.

    Raises
    ------
    CGQLError
        The text is not CGQL or cannot run here (an InputError naming line and column).

    Example
    -------
    ::

        topic = goffish.query(g, "DETECT Cluster(sum(node.usage) > C) WHERE edge: {type = power}",
                              params={"C": 100}, now=24.0)
        for event in topic: print(event["time"], event["status"], event["members"])
    """
    from hatrick.cgql import query as register

    if _is_stored(graph_or_stream) and options.get("spark") is None:
        options["spark"] = session()          # past frames run as Gopher programs
    return register(graph_or_stream, text, params, time_ordered, **options)


def _is_stored(source) -> bool:
    """Whether ``source`` has stored instances (a path, a store, a graph handle or a stream over
    one): a query's past part over them runs on Gopher."""
    from gofs.store import GraphStore

    return isinstance(source, (str, GraphStore)) or isinstance(getattr(source, "store", None), GraphStore)


def __getattr__(name):
    if name == "Instance":
        from gofs.instances import Instance

        return Instance
    raise AttributeError(name)
