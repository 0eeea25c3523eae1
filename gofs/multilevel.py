"""Multilevel partitioning for graphs larger than the driver: coarsen on Spark, METIS, refine on Spark.

METIS gives the best cuts but needs the whole graph in one process. This
partitioner keeps METIS's quality at scale the way METIS itself does, by
working on a smaller graph with the same structure:

1. **Coarsen on Spark.** Size-constrained label propagation (Meyerhenke,
   Sanders and Schulz, "Partitioning Complex Networks via Size-constrained
   Clustering", SEA 2014) groups vertices into clusters of at most ``U``
   vertex weight: every round a random half of the vertices join the
   neighbouring cluster they share the heaviest edges with, if it has room.
   Each cluster becomes one coarse vertex (weight: its size), parallel edges
   between clusters one coarse edge (weight: their count). Levels repeat until
   the coarse graph fits the driver budget: a fixed memory size
   (``driver_budget_bytes``), checked against the measured driver cost of a
   coarse vertex and a coarse edge (:func:`coarse_graph_bytes`), so the
   driver's peak does not grow with the input graph.
2. **METIS on the driver**, on the coarse graph with vertex and edge weights:
   the only data the driver ever holds, bounded by the budget.
3. **Project and refine on Spark.** Each vertex takes its cluster's
   partition, then balanced label propagation
   (:func:`gofs.partitioners.spark_label_propagation`, Ugander and Backstrom,
   WSDM 2013) starts from that partition and moves boundary vertices to the
   partition most of their neighbours are in, within the capacity.

Example
-------
>>> from goffish.generators import road_network             # doctest: +SKIP
>>> parts = partition("multilevel", n, src, dst, 8, spark=spark)   # doctest: +SKIP
"""
from __future__ import annotations

import math
import uuid

import numpy as np
import pyarrow as pa

from gofs import layout

DRIVER_BUDGET_BYTES = 48 << 20
"""Default driver memory the coarse graph may cost (collected, as CSR, and inside METIS)."""
BYTES_PER_COARSE_VERTEX = 100
BYTES_PER_COARSE_EDGE = 150
"""Driver peak growth per coarse vertex / undirected coarse edge during the METIS step (Arrow
columns, CSR in both directions, METIS's own work space), rounded up from measurements of road-like
graphs of 0.1M-0.6M vertices: about 133 bytes per vertex-or-edge, on top of a fixed ~46 MiB the
first METIS call costs at any size."""

_CLUSTERS_PER_PARTITION = 16    # cluster size bound U = n / (16 k): fine enough for METIS to balance
_ACTIVE_SHARE = 0.5             # vertices that may move per clustering round (breaks label swaps)
_COIN_BITS = 20
_MAX_LEVELS = 12
_STALLED = 0.95                 # a level keeping more than this share of vertices has stopped coarsening


def multilevel_partition(num_vertices: int, src, dst, num_partitions: int, seed: int = 0, spark=None,
                         **options) -> np.ndarray:
    """:func:`multilevel_labels` for numpy edges on dense ids; returns the driver-side array.

    Used by ``partition("multilevel", ...)`` (the local ingest engine and
    comparisons with METIS); the Spark ingest engine calls
    :func:`multilevel_labels` on its DataFrames directly.
    """
    if spark is None:
        raise ValueError("the 'multilevel' partitioner runs on Spark: pass spark=<SparkSession>")
    import pandas as pd

    edges = spark.createDataFrame(pd.DataFrame({"src": np.asarray(src, np.int64), "dst": np.asarray(dst, np.int64)}))
    vertices = spark.range(num_vertices).withColumnRenamed("id", "vid")
    from gofs.partitioners import collect_labels

    labels = multilevel_labels(spark, edges, num_partitions, vertices=vertices, seed=seed, **options)
    return collect_labels(labels, num_vertices)


def coarse_graph_bytes(num_vertices: int, num_edges: int) -> int:
    """Driver memory the METIS step needs for a coarse graph of this many vertices and
    undirected edges (a measured upper estimate; the coarsening stops once it fits the budget)."""
    return int(num_vertices) * BYTES_PER_COARSE_VERTEX + int(num_edges) * BYTES_PER_COARSE_EDGE


def multilevel_labels(spark, edges_df, num_partitions: int, vertices=None, seed: int = 0,
                      driver_budget_bytes: int = DRIVER_BUDGET_BYTES, driver_budget_edges: int | None = None,
                      cluster_rounds: int = 4, refine_iterations: int = 5, capacity_slack: float = 0.05,
                      report: dict | None = None):
    """Partition the graph of ``edges_df`` into ``num_partitions`` parts, never collecting more
    than the coarse graph (at most ``driver_budget_bytes`` of driver memory) to the driver.

    Parameters
    ----------
    edges_df : DataFrame with integer columns ``src``, ``dst`` (any ids); read as undirected.
    vertices : optional DataFrame with a ``vid`` column listing every vertex (isolated ones too);
        by default the endpoints of ``edges_df``.
    driver_budget_bytes : coarsen until the coarse graph's METIS step fits this much driver
        memory (:func:`coarse_graph_bytes`); a fixed size, so the driver's peak does not
        grow with the graph.
    driver_budget_edges : optionally, also coarsen until at most this many undirected edges.
    cluster_rounds : label propagation rounds per coarsening level.
    refine_iterations : balanced label propagation iterations after projection.
    capacity_slack : partitions hold at most ``(1 + slack) n / k`` vertices after refinement
        (or, if the projection was heavier, no more than it).
    report : if given, receives ``levels`` (vertices and edges per level) and ``coarse_cut``.

    Returns
    -------
    DataFrame ``(vid long, part int)``, a local checkpoint: release it with
    ``gofs.spark_compat.release_local_checkpoint`` when done.
    """
    from pyspark.sql import functions as F

    from gofs.partitioners import spark_label_propagation

    k = int(num_partitions)
    if k < 1:
        raise ValueError(f"num_partitions must be >= 1, got {k}")
    if driver_budget_bytes < coarse_graph_bytes(k, 0):
        raise ValueError(f"driver_budget_bytes must be >= {coarse_graph_bytes(k, 0)} (k coarse vertices), "
                         f"got {driver_budget_bytes}")
    if driver_budget_edges is not None and driver_budget_edges < 1:
        raise ValueError(f"driver_budget_edges must be >= 1, got {driver_budget_edges}")

    def too_big(level: dict) -> bool:
        return coarse_graph_bytes(level["vertices"], level["edges"]) > driver_budget_bytes \
            or (driver_budget_edges is not None and level["edges"] > driver_budget_edges)

    report = {} if report is None else report
    edges = edges_df.select(F.col("src").cast("long").alias("src"), F.col("dst").cast("long").alias("dst"))
    if vertices is None:
        vertices = edges.select(F.col("src").alias("vid")).union(edges.select(F.col("dst").alias("vid")))
    vertices = vertices.select(F.col("vid").cast("long").alias("vid")).distinct()
    held = _Scratch(spark)
    try:
        weights = held(vertices.select("vid", F.lit(1).cast("long").alias("vw")))
        pairs = edges.where(F.col("src") != F.col("dst")) \
            .select(F.least("src", "dst").alias("a"), F.greatest("src", "dst").alias("b")) \
            .groupBy("a", "b").agg(F.count(F.lit(1)).alias("w"))
        adjacency = held(_both_ways(pairs))
        n = weights.count()
        bound = max(1, math.ceil(n / (k * _CLUSTERS_PER_PARTITION)))
        mappings, levels, attempts = [], [{"vertices": n, "edges": adjacency.count() // 2}], 0
        while too_big(levels[-1]):
            attempts += 1
            if attempts > _MAX_LEVELS:
                raise RuntimeError(f"multilevel: the graph did not coarsen to the driver budget in {_MAX_LEVELS} "
                                   f"levels (last: {levels[-1]['vertices']:,} vertices, {levels[-1]['edges']:,} "
                                   "edges); raise driver_budget_bytes / driver_budget_edges")
            clusters = _cluster(adjacency, weights, bound, cluster_rounds, seed, attempts, held)
            coarse_weights = held(clusters.join(weights, "vid").groupBy(F.col("c").alias("vid"))
                                   .agg(F.sum("vw").alias("vw")))
            coarse_n = coarse_weights.count()
            if coarse_n > _STALLED * levels[-1]["vertices"]:
                bound *= 2          # the clusters are full: allow bigger ones on the next try
                continue
            adjacency = held(_contract(adjacency, clusters))
            weights = coarse_weights
            mappings.append(clusters)
            levels.append({"vertices": coarse_n, "edges": adjacency.count() // 2})
        coarse = _metis_on_driver(spark, weights, adjacency, k, seed, report)
        projected = coarse
        for clusters in reversed(mappings):
            projected = clusters.join(projected.withColumnRenamed("vid", "c"), "c").select("vid", "part")
        loops = vertices.select(F.col("vid").alias("src"), F.col("vid").alias("dst"))
        labels = spark_label_propagation(spark, edges.unionByName(loops), k, iterations=refine_iterations,
                                         seed=seed, capacity_slack=capacity_slack, initial=projected)
    finally:
        held.remove()
    report["levels"] = levels
    return labels


class _Scratch:
    """Intermediate frames written as Parquet under the session's checkpoint directory.

    Each round's labels and each level's graph are written and read back, not
    checkpointed or cached: Spark 3.5 gives a local checkpoint the size
    estimate of the plan it came from, and a join's estimate is the product of
    its inputs', so over rounds and levels the estimates grow to numbers with
    millions of digits and planning takes minutes; a chain of cached frames
    instead prints (and plans) the whole history in every query. Files read
    back have their real size and no history. Removed when partitioning ends.
    """

    def __init__(self, spark):
        from gofs.checkpoints import ensure_checkpoint_dir

        self.spark = spark
        base = ensure_checkpoint_dir(spark.sparkContext)
        self.root = f"{base.rstrip('/')}/goffish-multilevel-{uuid.uuid4().hex[:12]}"
        self.count = 0

    def __call__(self, frame):
        path = f"{self.root}/{self.count:04d}"
        self.count += 1
        frame.write.parquet(path)
        return self.spark.read.parquet(path)

    def remove(self) -> None:
        root = self.root[len("file:"):] if self.root.startswith("file:") else self.root
        try:
            fs, path = layout.filesystem(root)
            layout.remove(fs, path)
        except (OSError, pa.ArrowException):
            pass        # a filesystem pyarrow cannot reach: Spark's own checkpoint clean-up applies


def _both_ways(pairs):
    """Undirected weighted pairs (a < b) as a symmetric adjacency ``(src, dst, w)``."""
    from pyspark.sql import functions as F

    return pairs.select(F.col("a").alias("src"), F.col("b").alias("dst"), "w") \
        .unionByName(pairs.select(F.col("b").alias("src"), F.col("a").alias("dst"), "w"))


def _cluster(adjacency, weights, bound: int, rounds: int, seed: int, level: int, held: _Scratch):
    """Size-constrained label propagation: ``(vid, c)``, c the id of a vertex of the same cluster.

    Each round, a random half of the vertices (hash of seed, level, round, id)
    move to the neighbouring cluster with the heaviest edges to them among
    those whose weight plus theirs stays within ``bound`` (their own cluster is
    always allowed; ties keep it, else break by hash). Moves are simultaneous,
    so a cluster may overshoot the bound a little.
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    slices = int(adjacency.sparkSession.conf.get("spark.sql.shuffle.partitions"))
    # Split by target once per level: each round's join with the neighbours' clusters
    # then moves only the (small) cluster table, not the edges.
    by_target = adjacency.repartition(slices, "dst").persist(StorageLevel.DISK_ONLY)
    labels = held(weights.select("vid", F.col("vid").alias("c"), "vw"))
    try:
        for round_ in range(rounds):
            coin = F.xxhash64(F.lit(seed).cast("long"), F.lit(level).cast("long"), F.lit(round_).cast("long"),
                              F.col("src"))
            active = F.pmod(coin, F.lit(1 << _COIN_BITS)) < int(_ACTIVE_SHARE * (1 << _COIN_BITS))
            sizes = labels.groupBy("c").agg(F.sum("vw").alias("cw"))
            near = labels.join(sizes, "c").select(F.col("vid").alias("dst"), F.col("c").alias("to"), "cw")
            own = labels.select(F.col("vid").alias("src"), "c", "vw").where(active)
            # Only the active half's edges are shuffled, once, by source: the aggregation,
            # the join with the mover and the choice below reuse that split.
            scores = by_target.where(active).join(near, "dst").repartition(slices, "src") \
                .groupBy("src", "to").agg(F.sum("w").alias("s"), F.max("cw").alias("cw")) \
                .join(own, "src")
            preference = F.struct(F.col("s"), (F.col("to") == F.col("c")).alias("stays"),
                                  F.xxhash64(F.col("src"), F.col("to")).alias("tie"), F.col("to"))
            moves = scores.where((F.col("to") == F.col("c")) | (F.col("cw") + F.col("vw") <= bound)) \
                .groupBy("src", "c").agg(F.max(preference).alias("best")) \
                .where(F.col("best.to") != F.col("c")) \
                .select(F.col("src").alias("vid"), F.col("best.to").alias("moved"))
            labels = held(labels.join(moves, "vid", "left")
                           .select("vid", F.coalesce("moved", "c").alias("c"), "vw"))
    finally:
        by_target.unpersist()
    return labels.select("vid", "c")


def _contract(adjacency, clusters):
    """The coarse adjacency: edges between clusters, weights summed, inner edges dropped."""
    from pyspark.sql import functions as F

    return adjacency.join(clusters.select(F.col("vid").alias("src"), F.col("c").alias("cs")), "src") \
        .join(clusters.select(F.col("vid").alias("dst"), F.col("c").alias("cd")), "dst") \
        .where(F.col("cs") != F.col("cd")) \
        .groupBy(F.col("cs").alias("src"), F.col("cd").alias("dst")).agg(F.sum("w").alias("w"))


def _metis_on_driver(spark, weights, adjacency, k: int, seed: int, report: dict):
    """METIS with vertex and edge weights on the coarse graph; returns ``(vid, part)`` on Spark.

    Collects each coarse edge once (``src < dst``) as Arrow columns, and builds the
    symmetric CSR METIS wants without a pandas or COO detour: together with METIS's
    own work space this is what :data:`BYTES_PER_COARSE_EDGE` measures.
    """
    import pandas as pd
    import pymetis
    from pyspark.sql import functions as F

    from gofs.spark_compat import collect_arrow

    vertex_table = collect_arrow(weights.select("vid", "vw"))
    order = np.argsort(vertex_table.column("vid").to_numpy(), kind="stable")
    ids = vertex_table.column("vid").to_numpy()[order]
    vw = vertex_table.column("vw").to_numpy()[order]
    del vertex_table
    edge_table = collect_arrow(adjacency.where(F.col("src") < F.col("dst")).select("src", "dst", "w"))
    rows = np.searchsorted(ids, edge_table.column("src").to_numpy())
    cols = np.searchsorted(ids, edge_table.column("dst").to_numpy())
    w = edge_table.column("w").to_numpy()
    del edge_table
    nc = ids.size
    if k == 1 or nc <= 1:
        parts = np.zeros(nc, dtype=np.int32)
    elif rows.size == 0:
        parts = _heaviest_first(vw, k)
    else:
        idx = pymetis.zero_copy_dtype()
        xadj, adjncy, eweights = _symmetric_csr(nc, rows, cols, np.minimum(w, np.iinfo(np.int32).max), idx)
        _, parts = pymetis.part_graph(k, xadj=xadj, adjncy=adjncy, vweights=vw.astype(idx), eweights=eweights,
                                      recursive=False, options=pymetis.Options(seed=seed, ufactor=10))
        del xadj, adjncy, eweights
        parts = np.asarray(parts, dtype=np.int32)
    report["coarse_cut"] = int(w[parts[rows] != parts[cols]].sum()) if rows.size else 0
    return spark.createDataFrame(pd.DataFrame({"vid": ids, "part": parts}))


def _symmetric_csr(n: int, rows: np.ndarray, cols: np.ndarray, weights: np.ndarray, dtype):
    """CSR arrays (xadj, adjncy, eweights) of the undirected graph with each edge given once;
    neighbours sorted, so METIS sees the same input whatever order Spark collected the rows in."""
    heads, tails = np.concatenate([rows, cols]), np.concatenate([cols, rows])
    order = np.lexsort((tails, heads))
    adjncy = tails[order].astype(dtype)
    del tails
    eweights = np.concatenate([weights, weights])[order].astype(dtype)
    del order
    xadj = np.zeros(n + 1, dtype=dtype)
    np.cumsum(np.bincount(heads, minlength=n), out=xadj[1:])
    return xadj, adjncy, eweights


def _heaviest_first(weights: np.ndarray, k: int) -> np.ndarray:
    """Balanced assignment of weighted vertices with no edges: heaviest first, dealt out
    0, 1, .., k-1, k-1, .., 0 (a snake), so every part gets one of each k heaviest."""
    order = np.argsort(-weights, kind="stable")
    lap = np.arange(order.size) % (2 * k)
    parts = np.empty(weights.size, dtype=np.int32)
    parts[order] = np.where(lap < k, lap, 2 * k - 1 - lap)
    return parts
