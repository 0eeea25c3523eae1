"""GoFS ingest: one front door, two engines, one commit.

:func:`ingest` reads a graph (paths, in-memory graphs, Spark DataFrames),
partitions it (:mod:`gofs.partition`), finds its sub-graphs and commits it as a
GoFS graph. The *local* engine reads into this process
(:mod:`gofs.ingest.read_local`, :mod:`gofs.ingest.local`); the *Spark* engine
runs every stage as Spark jobs (:mod:`gofs.ingest.spark`). Both take their
format rules and error texts from :mod:`gofs.ingest.formats` and commit through
:mod:`gofs.ingest.commit`, so the same input gives the same graph or the same
error on either.
"""
from __future__ import annotations

import os
import time

import pyarrow as pa
import pyarrow.fs as pafs

from gofs import layout
from gofs.errors import InputError
from gofs.graph_input import GraphInput
import gofs.ingest.formats as formats

__all__ = ["ingest", "choose_engine", "ENGINES"]

ENGINES = ("auto", "local", "spark")
LOCAL_MAX_BYTES = 256 << 20
"""Inputs larger than this (uncompressed estimate) are ingested on Spark when ``engine="auto"``."""
LOCAL_MAX_BYTES_CONF = "spark.goffish.ingest.localMaxBytes"
_GZIP_EXPANSION = 4         # a gzip edge list is about this many times larger once decompressed


def ingest(source, path: str, num_partitions: int = 4, partitioner: str | None = None, overwrite: bool = False,
           name: str | None = None, seed: int = 0, spark=None, engine: str = "auto",
           engine_threshold: int | None = None, report: dict | None = None, **options) -> dict:
    """Store ``source`` as a GoFS graph at ``path``; returns the committed manifest.

    Parameters
    ----------
    source : a path or list of paths (SNAP edge list, CSV, Parquet; ``.gz`` text), a NetworkX
        graph, a GraphFrame, a pandas or Spark DataFrame of edges, or a :class:`GraphInput`.
    engine : ``"local"`` (read, partition and write in this process), ``"spark"`` (every
        stage on Spark), or ``"auto"``: Spark for input paths larger than ``engine_threshold``
        bytes (default: the conf ``spark.goffish.ingest.localMaxBytes``, else 256 MiB).
    partitioner : defaults to ``"metis"`` locally and ``"multilevel"`` on Spark.
    spark : the SparkSession, or a function that starts one; called only if a stage runs on Spark.
    report : if given, receives ``engine`` (the one that ran) and ``seconds`` per stage; on
        Spark also ``spark_jobs``, the jobs, stages and tasks each stage ran.
    options : for the reader (``directed``, ``weight``, ``schema``, ``format`` ...) and, on
        Spark, the multilevel partitioner (``driver_budget_edges`` ...).

    Raises
    ------
    InputError naming the file, line and field of bad input (nothing is written);
    GraphExistsError if ``path`` holds a graph and not ``overwrite``, or anything else.

    Example
    -------
    >>> ingest("roadNet-CA.txt.gz", "/tmp/ca.gofs", num_partitions=8, weight="length")   # doctest: +SKIP
    """
    # the engines and partitioners are imported here, not with the package: gofs.instances
    # uses gofs.ingest.formats in every job, and the partitioners' numba, scipy.optimize and
    # pymetis cost ~0.8 CPU-s that a job reading a stored graph never needs
    from gofs.ingest.local import ingest_graph
    from gofs.ingest.read_local import read_graph
    from gofs.ingest.spark import ingest_on_spark
    from gofs.partition import NEEDS_SPARK, check_partitioner
    from gofs.partition.multilevel import MULTILEVEL_OPTIONS

    report = {} if report is None else report
    seconds = report.setdefault("seconds", {})
    if isinstance(source, GraphInput):
        if engine == "spark":
            raise InputError("engine='spark' reads paths or Spark DataFrames; a GraphInput is already in memory")
        chosen = "local"
    else:
        chosen = choose_engine(source, engine, engine_threshold, spark if _is_session(spark) else None)
    report["engine"] = chosen
    if chosen == "spark":
        return ingest_on_spark(_session(spark), source, path, num_partitions=num_partitions,
                               partitioner=partitioner, overwrite=overwrite, name=name, seed=seed,
                               timings=seconds, jobs=report.setdefault("spark_jobs", {}), **options)
    partitioner = partitioner or "metis"
    partitioner_options = {k: options.pop(k) for k in list(options) if k in MULTILEVEL_OPTIONS}
    check_partitioner(partitioner, partitioner_options)
    clock = time.perf_counter()
    graph = source if isinstance(source, GraphInput) else read_graph(source, **options)
    seconds["read"] = time.perf_counter() - clock
    session = _session(spark) if partitioner in NEEDS_SPARK else _session_if_given(spark)
    return ingest_graph(graph, path, num_partitions=num_partitions, partitioner=partitioner,
                        overwrite=overwrite, name=name, seed=seed, spark=session, timings=seconds,
                        partitioner_options=partitioner_options)


def _is_session(spark) -> bool:
    return spark is not None and not callable(spark)


def _session(spark):
    if spark is None:
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession()
        if spark is None:
            raise InputError("this ingest runs stages on Spark: pass spark=<SparkSession>")
        return spark
    return spark() if callable(spark) else spark


def _session_if_given(spark):
    return spark if _is_session(spark) else None


def choose_engine(source, engine: str = "auto", threshold: int | None = None, spark=None) -> str:
    """``"local"`` or ``"spark"``: as asked, or for ``"auto"`` by the input's size.

    Paths (files, directories, globs' parents) larger than ``threshold`` bytes
    (gzip counted at 4x) go to Spark; so do paths pyarrow cannot size (a
    filesystem only Spark reaches). In-memory inputs (NetworkX, pandas,
    Spark DataFrames, GraphInput) stay local unless ``engine="spark"``.
    ``threshold`` defaults to the Spark conf ``spark.goffish.ingest.localMaxBytes``,
    else :data:`LOCAL_MAX_BYTES`.
    """
    if engine not in ENGINES:
        raise InputError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    readable = isinstance(source, (str, os.PathLike, list, tuple)) or formats.is_spark_frame(source)
    if engine == "spark" and not readable:
        raise InputError(f"engine='spark' reads paths or Spark DataFrames, not a {type(source).__name__} "
                         "(already in this process: use engine='local')")
    if engine != "auto":
        return engine
    if not isinstance(source, (str, os.PathLike, list, tuple)):
        return "local"
    if threshold is None:
        if spark is None:
            from pyspark.sql import SparkSession

            spark = SparkSession.getActiveSession()
        configured = spark.conf.get(LOCAL_MAX_BYTES_CONF, None) if spark is not None else None
        threshold = int(configured) if configured is not None else LOCAL_MAX_BYTES
    size = input_bytes(source)
    return "spark" if size is None or size > threshold else "local"


def input_bytes(source) -> int | None:
    """Estimated uncompressed bytes of the input path(s); None if pyarrow cannot tell."""
    total = 0
    for path in formats.paths_of(source):
        try:
            fs, root = layout.filesystem(path)
            info = fs.get_file_info(root)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError):
            return None
        if info.type == pafs.FileType.NotFound:
            raise InputError(f"{path}: no such file or directory")
        infos = fs.get_file_info(pafs.FileSelector(root, recursive=True)) \
            if info.type == pafs.FileType.Directory else [info]
        total += sum((i.size or 0) * (_GZIP_EXPANSION if i.path.endswith(".gz") else 1) for i in infos)
    return total
