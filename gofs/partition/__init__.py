"""Vertex partitioners, one dispatch for both ingest engines.

``partition`` labels numpy edges on dense ids (the local engine);
``partition_frames`` labels Spark DataFrames (the Spark engine). Each method is
one module: :mod:`~gofs.partition.metis` (best cuts, one process),
:mod:`~gofs.partition.hashing` (the baseline, numpy and Spark forms equal),
:mod:`~gofs.partition.propagation` (balanced label propagation on Spark) and
:mod:`~gofs.partition.multilevel` (coarsen on Spark, METIS, refine).

Example
-------
>>> import numpy as np
>>> src, dst = np.array([0, 1, 2, 3]), np.array([1, 2, 3, 0])
>>> parts = partition("metis", 4, src, dst, 2)
>>> edge_cut(parts, src, dst), balance(parts, 2)
(2, 1.0)
"""
from __future__ import annotations

import numpy as np

from gofs.errors import InputError
from gofs.partition.arrays import balance, checked, edge_cut
from gofs.partition.hashing import hash_labels, hash_partition
from gofs.partition.metis import metis_partition
from gofs.partition.multilevel import MULTILEVEL_OPTIONS, multilevel_labels, multilevel_partition
from gofs.partition.propagation import spark_label_propagation, spark_lp_partition

__all__ = ["PARTITIONERS", "partition", "partition_frames", "check_partitioner", "edge_cut", "balance"]

PARTITIONERS = ("metis", "hash", "spark-lp", "multilevel")
NEEDS_SPARK = ("spark-lp", "multilevel")


def check_partitioner(method: str, options: dict) -> None:
    """Refuse an unknown method, or options it does not take, before any work is done."""
    if method not in PARTITIONERS:
        raise InputError(f"unknown partitioner {method!r}; choose one of {', '.join(PARTITIONERS)}")
    unknown = sorted(set(options) - MULTILEVEL_OPTIONS)
    if unknown:
        raise TypeError(f"unknown option(s) {', '.join(unknown)} for the partitioner")
    if options and method != "multilevel":
        raise InputError(f"options {sorted(options)} apply to the multilevel partitioner only")


def partition(method: str, num_vertices: int, src, dst, num_partitions: int, seed: int = 0,
              spark=None, **options) -> np.ndarray:
    """Partition the vertices with the named method (one of ``PARTITIONERS``).

    Parameters
    ----------
    method : "metis" (best cuts, runs on the driver), "hash" (no locality),
        "spark-lp" (label propagation as Spark jobs; needs ``spark``), or
        "multilevel" (coarsen on Spark, METIS on the coarse graph, refine on
        Spark: :mod:`gofs.partition.multilevel`; needs ``spark``).
    num_vertices, src, dst : the graph as dense indices; edges are read as undirected.
    num_partitions : k >= 1.
    seed : makes every method deterministic for a given value.
    spark : the SparkSession, used only by "spark-lp" and "multilevel".
    options : for "multilevel" (:func:`gofs.partition.multilevel.multilevel_labels`).

    Returns
    -------
    ``int32`` array of length ``num_vertices`` with values in ``[0, num_partitions)``.
    """
    check_partitioner(method, options)
    src, dst = checked(num_vertices, src, dst, num_partitions)
    if num_partitions == 1 or num_vertices == 0:
        return np.zeros(num_vertices, dtype=np.int32)
    if method == "metis":
        return metis_partition(num_vertices, src, dst, num_partitions, seed)
    if method == "hash":
        return hash_partition(num_vertices, src, dst, num_partitions, seed)
    if method == "multilevel":
        return multilevel_partition(num_vertices, src, dst, num_partitions, seed, spark, **options)
    return spark_lp_partition(num_vertices, src, dst, num_partitions, seed, spark)


def partition_frames(spark, method: str, edges, vertices, num_vertices: int, num_partitions: int,
                     seed: int = 0, **options):
    """The Spark form of :func:`partition`: the same methods and labels for DataFrames.

    ``edges`` has dense ``src``, ``dst`` (ids ``0..num_vertices-1``); ``vertices`` lists every ``vid`` once.
    "metis" collects the edges to the driver. Returns ``(vid, part)`` as a local
    checkpoint (release it with ``sparkshim.compat.release_local_checkpoint``).
    """
    import pandas as pd
    from pyspark.sql import functions as F

    check_partitioner(method, options)
    if num_partitions < 1:
        raise InputError(f"num_partitions must be >= 1, got {num_partitions}")
    if num_partitions == 1 or num_vertices == 0:
        return vertices.select("vid", F.lit(0).alias("part")).localCheckpoint()
    if method == "hash":
        return hash_labels(vertices, num_partitions, seed).localCheckpoint()
    if method == "metis":
        table = edges.select("src", "dst").toPandas()
        parts = metis_partition(num_vertices, table["src"].to_numpy(), table["dst"].to_numpy(), num_partitions, seed)
        frame = pd.DataFrame({"vid": np.arange(num_vertices, dtype=np.int64), "part": parts})
        return spark.createDataFrame(frame).localCheckpoint()
    if method == "spark-lp":
        loops = vertices.select(F.col("vid").alias("src"), F.col("vid").alias("dst"))
        return spark_label_propagation(spark, edges.select("src", "dst").unionByName(loops), num_partitions,
                                       seed=seed)
    return multilevel_labels(spark, edges.select("src", "dst"), num_partitions, num_vertices=num_vertices, seed=seed,
                             **options)
