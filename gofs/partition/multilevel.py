"""Multilevel partitioning for graphs larger than the driver: coarsen on Spark, METIS in one task, refine on Spark.

METIS gives the best cuts but needs the whole graph in one process. This
partitioner keeps METIS's quality at scale the way METIS itself does, by
working on a smaller graph with the same structure:

1. **Coarsen on Spark.** Each level groups vertices into clusters of at most
   ``U`` vertex weight, in one of two ways:

   - *inside id ranges*, when the vertex ids are local (at least half of the
     edge weight joins ids of the same range of consecutive ids, as for road
     networks numbered by position, or an edge list whose file order has
     locality, since the ingest numbers ids by first appearance): each range's
     graph is clustered in the one task that holds it by repeated heavy-edge
     matching (:mod:`gofs.partition.matching`, METIS's own coarsening, in numba)
     until its clusters reach a chosen weight, and contracted there (only edges
     between ranges meet again, by exchange files). Two Python jobs per level,
     shrinking the graph up to 64x with connected clusters. A coarse level
     takes wider (fewer) ranges where narrow ones cut too much of its weight,
     and a level that stalls in ranges is retried in the widest before label
     propagation takes it;
   - otherwise by size-constrained label propagation (Meyerhenke, Sanders and
     Schulz, "Partitioning Complex Networks via Size-constrained Clustering",
     SEA 2014): every round a random half of the vertices join the
     neighbouring cluster they share the heaviest edges with, if it has room,
     one numba pass per block of ids, two Spark jobs per round, labels and
     weights exchanged as files, contracted in the level's last job
     (:func:`gofs.partition.propagation.cluster_level`; R-MAT: about 4.5x
     smaller at the first level of 4 rounds, 2.4x at the second).

   Each cluster becomes one coarse vertex (weight: its size), parallel edges
   between clusters one coarse edge (weight: their count). Levels repeat until
   the coarse graph fits the METIS budget: a fixed memory size
   (``driver_budget_bytes``, named when METIS ran on the driver), checked
   against the measured cost of a coarse vertex and a coarse edge
   (:func:`coarse_graph_bytes`). A graph that fits from the start is not
   coarsened at all.
2. **METIS in one task**, on the coarse graph with vertex and edge weights
   (the best of one try per core, at most :data:`_METIS_TRIES`, each task
   holding the whole coarse graph): each task reads the coarse graph's files itself,
   and the driver holds only k partition sizes per task, so its peak does
   not grow with the graph or the budget. Without a coarsening level this is
   the answer (METIS partitioned the graph itself, as the local engine does),
   in one Spark job whose task reads the pairs pass's exchange files.

Before any level, one pass over the input pairs (:func:`_pairs_pass`) sends them
to the narrowest id ranges as exchange files and sums what the first decisions
need (weight inside each candidate count of ranges, a sketch of the distinct
pairs): the first level's range tasks, or the whole graph's METIS task, read
those files instead of scanning and shuffling the pairs again.
3. **Project and refine on Spark** (after coarsening). Each vertex takes its cluster's
   partition; then only the *band* around the boundary is refined: the
   vertices of the first level's clusters inside a coarse vertex METIS left
   with a cut edge (after one level: the clusters that hold a cut edge), on
   both sides, with the edges that touch them, in one task (more only for a band too big
   for one: :mod:`gofs.partition.boundary`): each moves to the partition
   holding most of its edge weight, within the capacity, one at a time, for
   rounds until an iteration moves fewer than ``refine_min_moves`` of the
   vertices; an over-full partition pushes its cheapest vertices out; then
   k-way FM passes (:mod:`gofs.partition.fm`) smooth the boundary, taking
   losing moves on the way to a better cut (on a 400K-vertex road grid, 8
   partitions: 1.29x METIS's cut with the greedy moves alone on the
   boundary, 1.13x with FM on the band).

Example
-------
>>> from goffish.generators import road_network             # doctest: +SKIP
>>> parts = partition("multilevel", n, src, dst, 8, spark=spark)   # doctest: +SKIP
"""
from __future__ import annotations

import functools
import math
import time

import numpy as np
import pyarrow as pa

from gofs import files, layout
from gofs.errors import InputError
from gofs.partition.arrays import collect_labels, summed_repeats as _summed_repeats
from gofs.partition.matching import heavy_edge_clusters
from gofs.partition.metis import weighted_parts
from gofs.partition.propagation import cluster_level
from gofs.partition.boundary import refine_boundary
from sparkshim.compat import forgets_zip_importers
from gofs.spark_jobs import JobProfile, ScratchFrames, over_files, put_exchange, rows_by, shuffled, take_exchange, \
    task_columns

DRIVER_BUDGET_BYTES = 256 << 20
"""Default memory the coarse graph may cost the one task that runs METIS on it (its rows, as CSR,
and inside METIS): about a million vertices and edges, so road-like graphs up to a million edges
(R-MAT's up to about 1.5 million) skip coarsening, and a 5.6M-edge road grid needs one level (48 MiB
when METIS ran on the driver: each level below the budget costs about ten Spark jobs)."""
BYTES_PER_COARSE_VERTEX = 100
BYTES_PER_COARSE_EDGE = 150
"""Peak growth of the process running METIS per coarse vertex / undirected coarse edge (Arrow
columns, CSR in both directions, METIS's own work space), rounded up from measurements of road-like
graphs of 0.1M-0.6M vertices: about 133 bytes per vertex-or-edge, on top of a fixed ~46 MiB the
first METIS call costs at any size."""

_CLUSTERS_PER_PARTITION = 16    # cluster size bound U = n / (16 k): fine enough for METIS to balance
_MAX_LEVELS = 12
_STALLED = 0.95                 # a level keeping more than this share of vertices has stopped coarsening
_RANGE_SHARE = 0.5              # cluster inside id ranges when at least this share of edge weight lies within them
_RANGE_LOCAL = 0.8              # ranges narrower than the widest must hold at least this share of edge weight
_RANGE_VERTICES = 1 << 20       # at most about this many vertices per id range (one task's clustering input)
_RANGE_EDGES = 1 << 22          # and at most about this many pairs
_RANGE_CONTRACTION = 64         # an in-range clustering level shrinks the vertex count by at most this factor
_DISTINCT_RSD = 0.02            # relative error of the distinct pair count (HyperLogLog++, no shuffle)
_PIECES_PER_PART = 2            # matching leaves clusters of about half the weight it may reach
_METIS_TRIES = 8
"""At most this many METIS tries on a coarse graph, the best cut kept (:func:`_metis_tries`)."""
_METIS_TASK_WORK = 2_000_000
"""Coarse vertices plus edges one task's METIS tries may take together: about one try on the
5.6M road's coarse graph (762K vertices, 1.25M edges: ~0.6 CPU-s a try)."""
MULTILEVEL_OPTIONS = {"driver_budget_bytes", "driver_budget_edges", "cluster_rounds", "refine_iterations",
                      "refine_min_moves", "capacity_slack", "report"}
"""The keyword options of :func:`multilevel_labels` an ingest passes on."""
REFINE_MIN_MOVES = 0.001
"""Default share of the vertices below which a refinement iteration's moves end the refinement."""


def multilevel_partition(num_vertices: int, src, dst, num_partitions: int, seed: int = 0, spark=None,
                         **options) -> np.ndarray:
    """:func:`multilevel_labels` for numpy edges on dense ids; returns the driver-side array.

    Used by ``partition("multilevel", ...)`` (the local ingest engine and
    comparisons with METIS); the Spark ingest engine calls
    :func:`multilevel_labels` on its DataFrames directly.
    """
    if spark is None:
        raise InputError("the 'multilevel' partitioner runs on Spark: pass spark=<SparkSession>")
    import pandas as pd

    edges = spark.createDataFrame(pd.DataFrame({"src": np.asarray(src, np.int64), "dst": np.asarray(dst, np.int64)}))
    labels = multilevel_labels(spark, edges, num_partitions, num_vertices=num_vertices, seed=seed, **options)
    return collect_labels(labels, num_vertices)


def coarse_graph_bytes(num_vertices: int, num_edges: int) -> int:
    """Driver memory the METIS step needs for a coarse graph of this many vertices and
    undirected edges (a measured upper estimate; the coarsening stops once it fits the budget)."""
    return int(num_vertices) * BYTES_PER_COARSE_VERTEX + int(num_edges) * BYTES_PER_COARSE_EDGE


def multilevel_labels(spark, edges_df, num_partitions: int, num_vertices: int, seed: int = 0,
                      driver_budget_bytes: int = DRIVER_BUDGET_BYTES, driver_budget_edges: int | None = None,
                      cluster_rounds: int = 4, refine_iterations: int = 5, refine_min_moves: float = REFINE_MIN_MOVES,
                      capacity_slack: float = 0.05, report: dict | None = None):
    """Partition the graph of ``edges_df`` into ``num_partitions`` parts, never collecting more
    than k partition sizes to the driver (METIS runs in one task, on a coarse graph of at most
    ``driver_budget_bytes``).

    Parameters
    ----------
    edges_df : DataFrame with integer columns ``src``, ``dst``; read as undirected.
    num_vertices : the ids are exactly ``0..num_vertices-1`` (dense ids, as the ingest numbers them).
    driver_budget_bytes : coarsen until the coarse graph's METIS step fits this much memory
        (:func:`coarse_graph_bytes`) of the one task that runs it; the driver holds only the
        partition sizes.
    driver_budget_edges : optionally, also coarsen until at most this many undirected edges.
    cluster_rounds : label propagation rounds per coarsening level (levels not clustered
        inside id ranges).
    refine_iterations : at most this many rounds of boundary refinement after projection.
    refine_min_moves : refinement stops after an iteration that moved fewer than this share of
        the vertices (the projected METIS partition is already nearly a local optimum).
    capacity_slack : partitions hold at most ``(1 + slack) n / k`` vertices after refinement
        (a heavier projection is pushed down to it, as far as its boundary vertices allow).
    report : if given, receives ``levels`` (vertices and edges per level), ``coarse_cut``,
        ``projected_balance`` (of METIS's partition, projected), ``refine_moves`` (vertices
        moved per greedy refinement iteration), ``refine_fm_gains`` (cut weight removed per FM
        pass), ``refine_band`` (edge ends refined), ``seconds`` (``prelude``, ``coarsen``, ``levels``: one
        entry per coarsening attempt, ``metis``, ``refine``) and ``jobs`` (the Spark jobs, stages and
        tasks of each of those steps: :class:`gofs.spark_jobs.JobProfile`) and ``steps`` (the same for each
        step inside them, in order: :meth:`gofs.spark_jobs.JobProfile.steps`).

    Returns
    -------
    DataFrame ``(vid long, part int)``, a local checkpoint: release it with
    ``sparkshim.compat.release_local_checkpoint`` when done.
    """
    from pyspark.sql import functions as F

    k = int(num_partitions)
    if k < 1:
        raise InputError(f"num_partitions must be >= 1, got {k}")
    if driver_budget_bytes < coarse_graph_bytes(k, 0):
        raise InputError(f"driver_budget_bytes must be >= {coarse_graph_bytes(k, 0)} (k coarse vertices), "
                         f"got {driver_budget_bytes}")
    if driver_budget_edges is not None and driver_budget_edges < 1:
        raise InputError(f"driver_budget_edges must be >= 1, got {driver_budget_edges}")
    if not 0 <= refine_min_moves < 1:
        raise InputError(f"refine_min_moves must be a share in [0, 1), got {refine_min_moves}")

    report = {} if report is None else report
    seconds = report["seconds"] = {"levels": []}
    profile = JobProfile(spark, seconds)
    edges = edges_df.select(F.col("src").cast("long").alias("src"), F.col("dst").cast("long").alias("dst"))
    n = int(num_vertices)
    held = ScratchFrames(spark, "multilevel")
    try:
        with profile.stage("prelude"):
            weights = spark.range(n).select(F.col("id").alias("vid"), F.lit(1).cast("long").alias("vw"))
            summary = {"vertices": n, "low": 0 if n else None, "high": n - 1, "weight": n}
            # Repeated pairs stay apart (weight 1 each) and are summed where they meet: in a
            # range task, a contraction's grouping or METIS's task; no shuffle of the input here.
            pairs = edges.where(F.col("src") != F.col("dst")) \
                .select(F.least("src", "dst").alias("a"), F.greatest("src", "dst").alias("b"),
                        F.lit(1).cast("long").alias("w"))
            with profile.step("pairs pass"):
                exchange, pair_summary = _pairs_pass(pairs, summary, held)
            level = {"vertices": summary["vertices"], "edges": pair_summary["edges"]}
        with profile.stage("coarsen"):
            coarse_weights, coarse_pairs, mappings, labelled, levels = _coarsen(
                weights, pairs, exchange, level, (summary, pair_summary), k, cluster_rounds, seed, driver_budget_bytes,
                driver_budget_edges, held, seconds["levels"], profile.step)
        with profile.stage("metis"):
            tries = _metis_tries(spark, levels[-1]) if mappings else 1     # the whole graph: one, as the local engine
            with profile.step("metis task"):
                projected, sizes, report["coarse_cut"] = _metis_in_task(
                    coarse_weights, coarse_pairs, k, seed, tries, held, None if mappings else (exchange, n))
            if not mappings:        # METIS partitioned the graph itself: nothing projected to refine
                labels = projected.select("vid", "part").localCheckpoint()
                refined = {"moves": [], "fm_gains": [], "band": 0,
                           "start_balance": float(sizes.max() * k / sizes.sum()) if sizes.sum() else 1.0}
        if mappings:
            with profile.stage("refine"):
                for clusters in reversed(mappings[1:]):
                    projected = shuffled(clusters).join(projected.withColumnRenamed("vid", "c"), "c") \
                        .select("vid", "part", "boundary")
                projected = held(projected) if len(mappings) > 1 else projected
                refined = {}
                moves = refine_boundary(labelled, projected, sizes, k, refine_iterations,
                                        math.ceil(refine_min_moves * level["vertices"]), seed, capacity_slack, held,
                                        refined, profile.step)
                with profile.step("labels"):
                    labels = _projected_labels(mappings[0], projected, moves).localCheckpoint()
        report["refine_moves"], report["projected_balance"] = refined["moves"], refined["start_balance"]
        report["refine_fm_gains"], report["refine_band"] = refined["fm_gains"], refined["band"]
    finally:
        held.remove()
    report["jobs"], report["steps"] = profile.summary(), profile.steps()
    report["levels"] = levels
    return labels


def _projected_labels(members, coarse, moves):
    """``(vid, part)``: each input vertex's partition, its first-level cluster's ``(vid, part)`` in
    ``coarse``, or where ``moves`` ``(vid, part)`` moved it. Tasks read the three frames' files (a
    cluster's members are the files of the first level's ranges or clusters) and look the
    partitions up in numpy: two joins of every vertex in Spark cost ~3 JVM CPU-s at 1M road edges."""
    task = functools.partial(_labels_of_members, sorted(coarse.inputFiles()), sorted(moves.inputFiles()))
    return over_files(members.sparkSession, sorted(members.inputFiles()), task, "vid long, part int")


def _labels_of_members(coarse_files: list, move_files: list, paths: list):
    """Task of :func:`_projected_labels`: the labels of the members in the files ``paths``."""
    def lookup(table_files):
        ids, part = _read_files(table_files, ["vid", "part"])
        order = np.argsort(ids, kind="stable")
        return ids[order], part[order].astype(np.int32)

    coarse_ids, coarse_part = lookup(coarse_files)
    moved_ids, moved_to = lookup(move_files)
    for path in paths:
        vid, c = _read_files([path], ["vid", "c"])
        part = coarse_part[np.searchsorted(coarse_ids, c)]
        if moved_ids.size:
            at = np.minimum(np.searchsorted(moved_ids, vid), moved_ids.size - 1)
            moved = moved_ids[at] == vid
            part[moved] = moved_to[at[moved]]
        yield pa.RecordBatch.from_pydict({"vid": vid, "part": part})


def _coarsen(weights, pairs, exchange: dict, level: dict, summaries: tuple, k: int, rounds: int, seed: int,
             budget_bytes: int, budget_edges: int | None, held, seconds: list, step):
    """Cluster and contract until the coarse graph fits the budget: the coarse ``(vid, vw)`` and
    ``(a, b, w)`` frames, the cluster mapping of every level (finest first), the input pairs
    with their first-level clusters ``(a, b, w, ca, cb)`` (None if no level) and the level sizes.
    ``exchange``: the input pairs as the pairs pass sent them (:func:`_pairs_pass`), for the first
    level's range tasks or label propagation. ``summaries`` are the vertex and pair summaries of
    ``weights`` and ``pairs`` (:func:`_pairs_pass`); ``step`` (:meth:`gofs.spark_jobs.JobProfile.step`)
    times and counts each level's steps."""
    def too_big(level: dict) -> bool:
        return coarse_graph_bytes(level["vertices"], level["edges"]) > budget_bytes \
            or (budget_edges is not None and level["edges"] > budget_edges)

    summary, pair_summary = summaries
    bound = max(1, math.ceil(level["vertices"] / (k * _CLUSTERS_PER_PARTITION)))
    mappings, levels, attempts, first_labelled = [], [level], 0, None
    stalled = None          # after a level that stalled: "ranges" (retry in the widest), "widest" (propagate)
    while too_big(levels[-1]):
        attempts += 1
        if attempts > _MAX_LEVELS:
            sizes = ", ".join(f"{level['vertices']:,}/{level['edges']:,}" for level in levels)
            raise RuntimeError(f"multilevel: the graph did not coarsen to the METIS budget in {_MAX_LEVELS} "
                               f"attempts (vertices/edges per level: {sizes}); raise driver_budget_bytes / "
                               "driver_budget_edges")
        clock = time.perf_counter()
        ranges = None if stalled == "widest" else _id_ranges(summary, pair_summary, stalled == "ranges")
        if ranges is not None:
            wanted = budget_bytes / (BYTES_PER_COARSE_VERTEX + 3 * BYTES_PER_COARSE_EDGE)   # ~3 edges each
            if budget_edges is not None and levels[-1]["edges"]:       # as many edges per vertex as now
                wanted = min(wanted, budget_edges * levels[-1]["vertices"] / levels[-1]["edges"])
            shrink = min(_RANGE_CONTRACTION, max(2.0, _PIECES_PER_PART * levels[-1]["vertices"] / wanted))
            with step(f"level {attempts} ranges"):
                clusters, coarse_weights, labelled, coarse_pairs, (coarse_summary, coarse_pair_summary) = \
                    _level_in_ranges(pairs, weights, summary, ranges, min(bound, shrink * ranges["mean_weight"]),
                                     seed, held, not mappings, exchange)
        else:
            with step(f"level {attempts} propagation"):
                clusters, coarse_weights, labelled, coarse_pairs = cluster_level(
                    pairs, weights, summary, pair_summary["edges"], bound, rounds, seed, attempts, held, not mappings,
                    None if mappings else exchange)
            with step(f"level {attempts} summary"):      # vertices and pairs at once: the pairs are at hand
                coarse_summary, coarse_pair_summary = _summaries(coarse_weights, coarse_pairs, summary)
        coarse_n = coarse_summary["vertices"]
        clustered = time.perf_counter() - clock
        if coarse_n > _STALLED * levels[-1]["vertices"]:
            # In ranges: the ranges cut what was left to merge; the widest ranges take this
            # level, then label propagation. Else the clusters are full: allow bigger ones.
            stalled = "ranges" if ranges is not None and not ranges["widest"] else "widest"
            bound *= 1 if ranges is not None else 2
            seconds.append({"cluster": clustered, "stalled": True, "in_ranges": ranges is not None,
                            "ranges": ranges and ranges["count"]})
            continue
        stalled = None
        if not mappings:
            first_labelled = labelled
        weights, summary, pairs, pair_summary = coarse_weights, coarse_summary, coarse_pairs, coarse_pair_summary
        mappings.append(clusters)
        levels.append({"vertices": coarse_n, "edges": pair_summary["edges"]})
        seconds.append({"cluster": clustered, "contract": time.perf_counter() - clock - clustered,
                        "in_ranges": ranges is not None, "ranges": ranges and ranges["count"]})
    return weights, pairs, mappings, first_labelled, levels


def _summaries(weights, pairs, span: dict) -> tuple[dict, dict]:
    """One job: the vertices of a ``(vid, vw)`` frame ``weights`` (their number, smallest and largest
    id and total weight) and the pairs' summary: the number of distinct ``(a, b)`` of the ``(a, b, w)``
    pairs (estimated within a few per cent: repeats need no shuffle to be counted once), their total
    weight and, for each candidate count of id ranges (:func:`_range_counts`), the weight inside those
    ranges (what :func:`_id_ranges` decides by). Label propagation's levels use it; a range level
    sums its summaries in its tasks.

    The ranges are laid over ``span`` (``low``, ``high``) and sized by its vertex count: a coarse
    level's by the level before's (coarse ids are ids of the level before, so they lie in its
    span), and its summary keeps that span."""
    from pyspark.sql import functions as F

    counts = _range_counts(span, pairs.sparkSession)
    low = span["low"]
    is_pair = F.col("b").isNotNull()
    pairs = pairs.select("a", "b", "w").unionByName(
        weights.select(F.col("vid").alias("a"), F.lit(None).cast("long").alias("b"), F.col("vw").alias("w")))
    inside = [F.sum(F.when(is_pair & (F.floor((F.col("a") - low) / width) == F.floor((F.col("b") - low) / width)),
                           F.col("w")).otherwise(0)) for width in counts.values()]
    count, total, vertices, vertex_weight, *within = pairs.agg(
        F.approx_count_distinct(F.when(is_pair, F.xxhash64("a", "b")), _DISTINCT_RSD),
        F.sum(F.when(is_pair, F.col("w"))), F.count(F.when(~is_pair, 1)), F.sum(F.when(~is_pair, F.col("w"))),
        *inside).first()
    summary = {"vertices": int(vertices), "low": span["low"], "high": span["high"], "weight": vertex_weight}
    return summary, {"edges": int(count), "weight": total or 0, "inside": dict(zip(counts, within)),
                     "widths": counts}


_SENT_ROW = "t long, weight long, inside array<long>, ranks binary"   # one row per task of the pairs pass
_PASS_ROWS = "kind int, key long, value long"
_SKETCH_BITS = 12       # HyperLogLog registers 2^12: distinct pairs within ~1.6%
_EXCHANGE_SCHEMA = pa.schema([("a", pa.int64()), ("b", pa.int64()), ("w", pa.int64())])


def _pairs_pass(pairs, vertices: dict, held) -> tuple[dict, dict]:
    """One job over the input pairs ``(a, b, w)`` on dense ids: each task sends its pairs to the
    narrowest id ranges (:func:`_range_counts`) as exchange files (:func:`gofs.spark_jobs.put_exchange`:
    ``near``, every pair to the range of a; ``far``, a pair between ranges also to the range of b)
    and returns its part of the pairs' summary (as :func:`_summaries`: the weight inside each
    candidate count of ranges, the total weight, a HyperLogLog sketch of the distinct pairs) as
    one row, summed here. Returns ``(exchange, pair summary)``: the first level's range tasks
    and a whole-graph METIS task read the files (no shuffle of the pairs), and the summary needs
    no job of its own (a Spark aggregation over the pairs cost ~5 JVM CPU-s per million edges;
    a grouping of the tasks' rows, one more stage and shuffle)."""
    counts = _range_counts(vertices, pairs.sparkSession)
    low = vertices["low"] or 0
    count = max(counts, default=1)
    width = counts.get(count, 1)
    directory = held.directory()
    task = forgets_zip_importers(functools.partial(_send_pairs, directory, low, width, count, counts))
    rows = pairs.select("a", "b", "w").mapInArrow(task, _SENT_ROW).collect()
    registers = np.zeros(1 << _SKETCH_BITS, np.uint8)
    inside, total, sent = np.zeros(len(counts), np.int64), 0, []
    for t, weight, within, ranks in rows:
        sent.append(int(t))
        total += int(weight)
        inside += np.asarray(within, np.int64)
        np.maximum(registers, np.frombuffer(ranks, np.uint8), out=registers)
    inside = dict(zip(counts, inside.tolist()))
    fs, root = layout.filesystem(directory)
    paths = {side: [layout.join(root, side, layout.part_file(t)) for t in sorted(sent)] for side in ("near", "far")}
    exchange = {"directory": directory, "low": low, "width": width, "count": count, **paths}
    return exchange, {"edges": _distinct_estimate(registers) if total else 0, "weight": total, "inside": inside,
                      "widths": counts}


def _send_pairs(directory: str, low: int, width: int, count: int, counts: dict, batches):
    """Task of :func:`_pairs_pass`: one Spark partition's pairs ``(a, b, w)``, its files named by
    its partition (:func:`gofs.spark_jobs.task_columns`)."""
    rows = task_columns(batches, "abw")
    if rows is None:
        return
    t, (a, b, w) = rows
    near, far = (a - low) // width, (b - low) // width
    apart = near != far
    fs, root = layout.filesystem(directory)
    put_exchange(fs, layout.join(root, "near", layout.part_file(t)),
                 pa.Table.from_arrays([a, b, w], schema=_EXCHANGE_SCHEMA), near, count)
    put_exchange(fs, layout.join(root, "far", layout.part_file(t)),
                 pa.Table.from_arrays([a[apart], b[apart], w[apart]], schema=_EXCHANGE_SCHEMA), far[apart], count)
    inside = [int(w[(a - low) // c_width == (b - low) // c_width].sum()) for c_width in counts.values()]
    hashed = _pair_hash(a, b)
    register = (hashed >> np.uint64(64 - _SKETCH_BITS)).astype(np.int64)
    _, exponent = np.frexp((hashed & np.uint64((1 << (64 - _SKETCH_BITS)) - 1)).astype(np.float64))
    rank = np.zeros(1 << _SKETCH_BITS, np.uint8)
    np.maximum.at(rank, register, (65 - _SKETCH_BITS - exponent).astype(np.uint8))  # leading zeros + 1 of the low bits
    yield pa.RecordBatch.from_pydict({"t": pa.array([t], pa.int64()), "weight": pa.array([int(w.sum())], pa.int64()),
                                      "inside": pa.array([inside], pa.list_(pa.int64())),
                                      "ranks": pa.array([rank.tobytes()], pa.binary())})


def _pair_hash(a, b) -> np.ndarray:
    """A well-spread 64-bit hash of each pair ``(a, b)`` (splitmix64's finaliser)."""
    with np.errstate(over="ignore"):
        x = a.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15) ^ b.astype(np.uint64)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def _distinct_estimate(registers: np.ndarray) -> int:
    """HyperLogLog's estimate of the distinct items behind ``registers`` (linear counting while
    many registers are empty)."""
    m = registers.size
    estimate = 0.7213 / (1 + 1.079 / m) * m * m / np.sum(np.exp2(-registers.astype(np.float64)))
    empty = int(np.count_nonzero(registers == 0))
    if estimate <= 2.5 * m and empty:
        estimate = m * math.log(m / empty)
    return int(round(estimate))


def _range_counts(vertices: dict, spark) -> dict:
    """Candidate counts of id ranges for a level, narrowest ranges first, each with its width
    (none without vertices): from at least ``spark.sql.shuffle.partitions`` ranges, doubling the
    width down to the fewest that keep about ``_RANGE_VERTICES`` vertices in each. Each range is
    a whole number of the narrowest ranges, so the tasks of any count take the narrowest ranges'
    exchange files (:func:`_pairs_pass`)."""
    if vertices["low"] is None:
        return {}
    span = vertices["high"] - vertices["low"] + 1
    fewest = math.ceil(vertices["vertices"] / _RANGE_VERTICES)
    width = max(1, math.ceil(span / max(int(spark.conf.get("spark.sql.shuffle.partitions")), fewest, 2)))
    counts = {}
    while True:
        count = -(-span // width)
        counts[count] = width
        if count <= fewest or count == 1:
            return counts
        width *= 2


def _id_ranges(vertices: dict, pairs: dict, widest: bool) -> dict | None:
    """Ranges of vertex ids to cluster in, if the ids are local.

    Many inputs number their vertices with locality (road networks by position, web
    graphs by URL, and the ingest's dense ids keep the file's order; coarse ids are
    the smallest id of their cluster, so they keep it too). Then ranges of consecutive
    ids hold nearly all edges, and each range can be clustered as a whole graph in one
    task. The ids count as local when at least ``_RANGE_SHARE`` of the edge weight lies
    inside the narrowest ranges. The ranges are then the narrowest that hold ``_RANGE_LOCAL`` of
    the weight with at most ``_RANGE_EDGES`` pairs each, else (or if ``widest``, after a
    level stalled in narrower ones) the widest: a coarse level's vertices that no range
    could merge (their edges all leave it, as for ids that appear only as an edge's
    destination) keep their weight crossing narrow ranges, and stall them. Decided from
    the level's summaries (:func:`_summaries`), without a job.
    Returns ``{"low", "high", "width", "mean_weight", "count", "widest", "dense"}`` (range r holds the ids
    ``low + r * width`` up to the next range; dense: the vertices are every id of the span, each
    of weight 1, as the ingest's dense ids before the first level), or None (e.g. R-MAT's ids).
    """
    inside = pairs["inside"]
    if not inside or not pairs["weight"]:
        return None
    counts = list(inside)
    if inside[counts[0]] < _RANGE_SHARE * pairs["weight"]:
        return None
    fitting = [c for c in counts if pairs["edges"] <= c * _RANGE_EDGES] or counts[:1]
    chosen = fitting[-1] if widest else next(
        (c for c in fitting if inside[c] >= _RANGE_LOCAL * pairs["weight"]), fitting[-1])
    span = int(vertices["high"]) - int(vertices["low"]) + 1
    width = pairs["widths"][chosen]
    return {"low": int(vertices["low"]), "high": int(vertices["high"]), "width": int(width),
            "mean_weight": vertices["weight"] / vertices["vertices"], "count": -(-span // width),
            "widest": chosen == fitting[-1], "dense": vertices["vertices"] == vertices["weight"] == span}


_MEMBERS_SCHEMA = "vid long, c long"
_INNER_SCHEMA = "a long, b long, w long, ca long, cb long"
_COARSE_SCHEMA = "vid long, vw long"
_PAIRS_SCHEMA = "a long, b long, w long"
_HALF_SCHEMA = pa.schema([("a", pa.int64()), ("b", pa.int64()), ("w", pa.int64()), ("c", pa.int64())])
_VERTEX_ROW = -1      # b of a range task's input row that is a vertex, not an edge
_HELD, _VERTEX_COUNT, _VERTEX_WEIGHT, _PAIR_COUNT, _PAIR_WEIGHT, _PAIR_INSIDE = range(6)   # a level's summary rows


def _level_in_ranges(pairs, weights, span: dict, ranges: dict, cluster_weight: float, seed: int, held,
                     labelled: bool = True, exchange: dict | None = None):
    """One coarsening level clustered inside id ranges: ``(clusters, coarse weights, labelled
    pairs, coarse pairs, summaries)`` as ``(vid, c)``, ``(vid, vw)``, ``(a, b, w, ca, cb)`` (None
    unless ``labelled``: only the first level's are refined) and ``(a, b, w)`` frames, and the
    coarse level's vertex and pair summaries (as :func:`_summaries` gives them, laid over
    ``span``, the level's own vertex summary; the pairs counted exactly).

    Each range's graph (its vertices, the edges inside it) is clustered by heavy-edge matching
    (:func:`gofs.partition.matching.heavy_edge_clusters`) into clusters of at most
    ``cluster_weight`` vertex weight, in the task that holds the range; c is the smallest id of
    the cluster. A cluster never leaves its range, so the same task also sums its clusters'
    weights, labels its inner edges with both ends' clusters and contracts them into coarse pairs.
    An edge between two ranges reaches both (a < b: range of a first); each task names its own
    end's cluster, and the half that knows b's is sent, as an exchange file, to the range of a,
    whose task of a second Python job pairs the halves up (:func:`_crossing_of_range`): coarse
    pairs are then each in one file once (ca < cb lies in the range of a), so the level's
    summary is the tasks' counts summed, without a Spark job. Every row stays in the tasks' own
    files (members, coarse vertices and pairs, labelled edges), read back as frames: through
    Spark's rows, groupings and a summary aggregation the 1M road's first level cost ~15 JVM
    CPU-s, ten times the numpy work. Coarse vertex ids keep the ids' locality for the next level.
    Dense ranges (the first level) take their pairs from the pairs pass's ``exchange`` files
    (:func:`_pairs_pass`) and list their ids themselves: no scan or shuffle of the pairs here.
    """
    from pyspark.sql import functions as F

    low, width, count = ranges["low"], ranges["width"], ranges["count"]
    spark = pairs.sparkSession
    counts = _range_counts(span, spark)
    directory = held.directory()
    fs, root = layout.filesystem(directory)
    for kind in ("members", "inner", "crossing", "vertices", "pairs", "crossing-pairs", "halves", "sent"):
        fs.create_dir(layout.join(root, kind), recursive=True)     # read back even if no task writes there
    task = functools.partial(_range_rows, clusters_of=_range_clusters, cluster_weight=cluster_weight, seed=seed,
                             directory=directory, labelled=labelled, ranges=ranges, summary=(span["low"], counts))

    def range_of(column):
        return F.floor((F.col(column) - low) / width)

    if ranges["dense"]:
        level = spark.range(0, count, 1, count).mapInArrow(forgets_zip_importers(functools.partial(
            _exchanged_ranges, exchange, ranges, task)), _PASS_ROWS)
    else:
        vertex_rows = weights.select(range_of("vid").alias("r"), F.col("vid").alias("a"),
                                     F.lit(_VERTEX_ROW).cast("long").alias("b"), F.col("vw").alias("w"))
        edge_rows = pairs.select(range_of("a").alias("r"), "a", "b", "w")
        far_ends = pairs.where(range_of("a") != range_of("b")).select(range_of("b").alias("r"), "a", "b", "w")
        level = vertex_rows.unionByName(edge_rows).unionByName(far_ends).repartition(count, "r") \
            .mapInArrow(forgets_zip_importers(functools.partial(_clustered_ranges, task)), _PASS_ROWS)
    rows = level.collect()
    held_ranges = sorted(int(key) for kind, key, _ in rows if kind == _HELD)
    rows += spark.range(0, count, 1, count).mapInArrow(forgets_zip_importers(functools.partial(
        _crossing_of_range, directory, held_ranges, labelled, (span["low"], counts))), _PASS_ROWS).collect()
    totals = {}
    for kind, key, value in rows:
        totals[kind, key] = totals.get((kind, key), 0) + value
    summaries = ({"vertices": totals.get((_VERTEX_COUNT, 0), 0), "low": span["low"], "high": span["high"],
                  "weight": totals.get((_VERTEX_WEIGHT, 0), 0)},
                 {"edges": totals.get((_PAIR_COUNT, 0), 0), "weight": totals.get((_PAIR_WEIGHT, 0), 0),
                  "inside": {c: totals.get((_PAIR_INSIDE, c), 0) for c in counts}, "widths": counts})

    def read(schema, *kinds):
        return spark.read.schema(schema).parquet(*(layout.join(directory, kind) for kind in kinds))

    return (read(_MEMBERS_SCHEMA, "members"), read(_COARSE_SCHEMA, "vertices"),
            read(_INNER_SCHEMA, "inner", "crossing") if labelled else None,
            read(_PAIRS_SCHEMA, "pairs", "crossing-pairs"), summaries)


def _range_clusters(ids, vw, heads, tails, w, cluster_weight: float, seed: int) -> np.ndarray:
    """The cluster of each of one range's vertices ``ids`` (sorted, weights ``vw``), given its
    inner edges as positions ``heads``, ``tails`` in ``ids`` with weights ``w``: the smallest id
    of the cluster."""
    import scipy.sparse as sp

    w = w.astype(np.float64)
    both = sp.csr_matrix((np.r_[w, w], (np.r_[heads, tails], np.r_[tails, heads])), shape=(ids.size, ids.size))
    wanted = math.ceil(2 * vw.sum() / cluster_weight)
    label = heavy_edge_clusters(both.indptr.astype(np.int64), both.indices.astype(np.int64),
                                both.data.astype(np.float64), vw.astype(np.float64), float(cluster_weight), wanted,
                                seed)
    _, first, cluster = np.unique(label, return_index=True, return_inverse=True)
    return ids[first][cluster]


def _clustered_ranges(task, batches):
    """Task: for each id range it holds (rows by ``r``: vertices ``(vid, -1, vw)``, edges ``(a, b, w)``,
    ``a < b``, with at least one end in the range), :func:`_range_rows`."""
    for r, rows in rows_by(batches, "r"):
        a, b, w = (rows.column(name).to_numpy() for name in ("a", "b", "w"))
        is_vertex = b == _VERTEX_ROW
        order = np.argsort(a[is_vertex], kind="stable")
        yield task(r, a[is_vertex][order], w[is_vertex][order], a[~is_vertex], b[~is_vertex], w[~is_vertex])


def _exchanged_ranges(exchange: dict, ranges: dict, task, batches):
    """Task: for each dense id range r named by ``batches``, :func:`_range_rows`, its pairs taken
    from the narrowest ranges' exchange files it covers (:func:`_pairs_pass`); a pair sent to both
    ends' narrow ranges counts once, where its end a lies."""
    exchange_fs, _ = layout.filesystem(exchange["directory"])
    low, width = ranges["low"], ranges["width"]
    per = width // exchange["width"]
    for batch in batches:
        for r in batch.column(0).to_pylist():
            narrow = range(r * per, min((r + 1) * per, exchange["count"]))
            near = [take_exchange(exchange_fs, exchange["near"], d) for d in narrow if exchange["near"]]
            far = [take_exchange(exchange_fs, exchange["far"], d) for d in narrow if exchange["far"]]
            far = pa.concat_tables(far or [_EXCHANGE_SCHEMA.empty_table()])
            far = far.filter(pa.array((far.column("a").to_numpy() - low) // width != r))
            rows = pa.concat_tables([*near, far])
            ids = np.arange(low + r * width, min(low + (r + 1) * width, ranges["high"] + 1), dtype=np.int64)
            yield task(r, ids, np.ones(ids.size, np.int64), *(rows.column(c).to_numpy() for c in "abw"))


def _range_rows(r: int, ids, vw, a, b, w, clusters_of, cluster_weight: float, seed: int, directory: str,
                labelled: bool, ranges: dict, summary: tuple) -> pa.RecordBatch:
    """One id range of :func:`_level_in_ranges`, given its vertices ``ids`` (sorted, weights ``vw``)
    and the edges ``(a, b, w)`` with an end among them: each vertex's cluster (``clusters_of``:
    :func:`_range_clusters`), each cluster's weight, the coarse pairs of the inner edges and (if
    ``labelled``) the inner edges with both ends' clusters go to the range's files, an edge to
    another range with this end's cluster to ``halves/`` (a here) or to the range of a (``sent/``);
    returns the range's summary rows (:func:`_pair_summary_rows`, laid over ``summary``)."""
    fs, root = layout.filesystem(directory)
    a, b, w = _summed_repeats(a, b, w)
    (at_a, in_a), (at_b, in_b) = _positions(ids, a), _positions(ids, b)
    inner = in_a & in_b
    cluster = clusters_of(ids, vw, at_a[inner], at_b[inner], w[inner], cluster_weight, seed)
    name = layout.part_file(r)
    files.put_table(fs, layout.join(root, "members", name), pa.table({"vid": ids.astype(np.int64),
                                                                      "c": cluster.astype(np.int64)}))
    coarse, members = np.unique(cluster, return_inverse=True)
    coarse_weight = np.bincount(members, weights=vw).astype(np.int64)
    files.put_table(fs, layout.join(root, "vertices", name), pa.table({"vid": coarse, "vw": coarse_weight}))
    ca, cb = cluster[at_a[inner]], cluster[at_b[inner]]
    if labelled:
        files.put_table(fs, layout.join(root, "inner", name), pa.table(
            {"a": a[inner], "b": b[inner], "w": w[inner], "ca": ca, "cb": cb}))
    apart = ca != cb
    coarse_pairs = _summed_repeats(np.minimum(ca, cb)[apart], np.maximum(ca, cb)[apart], w[inner][apart])
    files.put_table(fs, layout.join(root, "pairs", name), pa.table(dict(zip("abw", coarse_pairs))))
    only_a, only_b = in_a & ~in_b, in_b & ~in_a
    files.put_table(fs, layout.join(root, "halves", name), pa.Table.from_arrays(
        [a[only_a], b[only_a], w[only_a], cluster[at_a[only_a]]], schema=_HALF_SCHEMA))
    put_exchange(fs, layout.join(root, "sent", name), pa.Table.from_arrays(
        [a[only_b], b[only_b], w[only_b], cluster[at_b[only_b]]], schema=_HALF_SCHEMA),
        (a[only_b] - ranges["low"]) // ranges["width"], ranges["count"])
    return _pair_summary_rows(*coarse_pairs, *summary, [(_HELD, r, 1), (_VERTEX_COUNT, 0, coarse.size),
                                                        (_VERTEX_WEIGHT, 0, int(coarse_weight.sum()))])


def _positions(ids, x) -> tuple:
    """Where each of ``x`` lies in the sorted ``ids`` (clipped into them) and whether it is there:
    by subtraction where the ids are consecutive (a dense range), else by binary search."""
    if ids[-1] - ids[0] + 1 == ids.size:
        at = np.clip(x - ids[0], 0, ids.size - 1)
    else:
        at = np.minimum(np.searchsorted(ids, x), ids.size - 1)
    return at, ids[at] == x


def _crossing_of_range(directory: str, held_ranges: list, labelled: bool, summary: tuple, batches):
    """Task of :func:`_level_in_ranges`'s second job: for each range r named by ``batches``, its
    edges to later ranges with this end's cluster (``halves/``) met with the same edges, as the
    ranges of their other ends sent them (``sent/``), in ``(a, b)`` order on both sides (each
    side summed the same repeats); their coarse pairs (and, if ``labelled``, the edges with both
    ends' clusters) go to r's files; yields the coarse pairs' summary rows."""
    fs, root = layout.filesystem(directory)
    sent = [layout.join(root, "sent", layout.part_file(s)) for s in held_ranges]
    for batch in batches:
        for r in batch.column(0).to_pylist():
            if r not in held_ranges:
                continue
            name = layout.part_file(r)
            own = files.read_columns(fs, layout.join(root, "halves", name), None)
            other = take_exchange(fs, sent, r, _HALF_SCHEMA)
            (a, b, w, ca), (a_other, b_other, _, cb) = (_by_pair(table) for table in (own, other))
            if not (np.array_equal(a, a_other) and np.array_equal(b, b_other)):
                raise RuntimeError(f"multilevel: range {r}'s edges to other ranges differ from theirs")
            if labelled:
                files.put_table(fs, layout.join(root, "crossing", name), pa.table(
                    {"a": a, "b": b, "w": w, "ca": ca, "cb": cb}))
            coarse_pairs = _summed_repeats(ca, cb, w)        # ca < cb: ca lies in r, cb in a later range
            files.put_table(fs, layout.join(root, "crossing-pairs", name),
                            pa.table(dict(zip("abw", coarse_pairs))))
            yield _pair_summary_rows(*coarse_pairs, *summary)


def _by_pair(table: pa.Table) -> list:
    """The columns ``a, b, w, c`` of a table of edge halves, in ``(a, b)`` order."""
    columns = [table.column(c).to_numpy() for c in "abwc"]
    order = np.lexsort((columns[1], columns[0]))
    return [column[order] for column in columns]


def _pair_summary_rows(a, b, w, low: int, counts: dict, rows=()) -> pa.RecordBatch:
    """Summary rows ``(kind, key, value)`` of coarse pairs given once each (:func:`_summaries`'s
    pair summary, exact: their count, weight and weight inside each candidate count of ranges
    laid from ``low``), after ``rows``."""
    inside = [(_PAIR_INSIDE, c, int(w[(a - low) // width == (b - low) // width].sum())) for c, width in counts.items()]
    rows = [*rows, (_PAIR_COUNT, 0, a.size), (_PAIR_WEIGHT, 0, int(w.sum())), *inside]
    kind, key, value = zip(*rows)
    return pa.RecordBatch.from_pydict({"kind": np.array(kind, np.int32), "key": np.array(key, np.int64),
                                       "value": np.array(value, np.int64)})


_SIZE, _CUT = range(2)     # kinds of the METIS task's rows
_METIS_ROWS = "kind int, a long, b long, g long"
_LABELS_SCHEMA = "vid long, part int, boundary boolean"


def _metis_tries(spark, coarse: dict) -> int:
    """How many METIS tries a coarse graph of ``coarse`` vertices and edges gets: one per core
    (one task each, so they cost the wall of one), more per task while they stay within
    :data:`_METIS_TASK_WORK`, at most :data:`_METIS_TRIES`. Eight on two cores, on the 5.6M road's
    coarse graph, cost 7.5 CPU-s against 2.5 for two, for a final cut of 1.02x local METIS's
    against 1.09x; a small coarse graph (R-MAT's after two levels) gets all eight for little."""
    per_task = max(1, _METIS_TASK_WORK // max(1, coarse["vertices"] + coarse["edges"]))
    return min(_METIS_TRIES, spark.sparkContext.defaultParallelism * per_task)


def _metis_in_task(weights, pairs, k: int, seed: int, tries: int, held, whole: tuple | None = None):
    """METIS with vertex and edge weights on the coarse graph, in as many tasks as there are
    cores for its ``tries`` (each task the best of its share, the best task's answer kept):
    ``(labels, sizes, cut)``, labels ``(vid, part, boundary)`` of the coarse vertices as the task's
    Parquet file (boundary: the vertex has a cut edge; the refinement's band is what it covers),
    sizes the partitions' input vertices (their coarse vertices' weights summed), cut the coarse cut.

    Each task reads the coarse vertices ``(vid, vw)`` and pairs ``(a, b, w)`` (frames of Parquet
    files, as the coarsening leaves them) from their files itself: the driver holds only k
    numbers per task, and no row passes through Spark (an explode to each task and a shuffle cost
    ~2.7 JVM CPU-s at 1M road edges, the METIS tries 1). The coarsening stops at a size one task
    runs METIS on (:func:`coarse_graph_bytes`). A graph that fits from the start (``whole``: the
    pairs pass's exchange files and the number of dense ids) is partitioned whole, as the local
    engine would, by one task that reads the files.
    """
    spark = pairs.sparkSession
    groups = max(1, min(tries, spark.sparkContext.defaultParallelism))
    directory = held.directory()
    fs, root = layout.filesystem(directory)
    fs.create_dir(root, recursive=True)
    if whole is not None:
        task = functools.partial(_metis_of_exchange, *whole, k, seed, tries, groups, directory)
    else:
        task = functools.partial(_metis_of_files, sorted(weights.inputFiles()), sorted(pairs.inputFiles()), k, seed,
                                 tries, groups, directory)
    answers = spark.range(0, groups, 1, groups).mapInArrow(forgets_zip_importers(task), _METIS_ROWS)
    sizes, cuts = np.zeros((groups, k), np.int64), np.zeros(groups, np.int64)
    for kind, a, b, g in answers.collect():
        if kind == _SIZE:
            sizes[g, a] = b
        else:
            cuts[g] = b
    best = int(np.argmin(cuts))
    labels = spark.read.schema(_LABELS_SCHEMA).parquet(layout.join(directory, layout.part_file(best)))
    return labels, sizes[best], int(cuts[best])


def _read_files(paths: list, columns: list) -> list:
    """In a task: the ``columns`` of the Parquet files ``paths`` (URIs), each as one numpy array."""
    tables = [files.read_columns(*layout.filesystem(path), columns) for path in paths]
    if not tables:
        return [np.zeros(0, np.int64) for _ in columns]
    table = pa.concat_tables(tables)
    return [table.column(name).to_numpy() for name in columns]


def _metis_of_files(vertex_files: list, pair_files: list, k: int, seed: int, tries: int, groups: int,
                    directory: str, batches):
    """Task g of :func:`_metis_in_task`: the coarse graph read from its files; with METIS's own
    work space this is what :data:`BYTES_PER_COARSE_EDGE` measures."""
    ids, vw = _read_files(vertex_files, ["vid", "vw"])
    order = np.argsort(ids, kind="stable")
    ids, vw = ids[order], vw[order]
    a, b, w = _read_files(pair_files, ["a", "b", "w"])
    rows, cols = np.searchsorted(ids, a), np.searchsorted(ids, b)
    del a, b
    for batch in batches:
        for g in batch.column(0).to_pylist():
            yield _metis_answer(ids, vw, rows, cols, w, k, seed, tries, groups, g, directory)


def _metis_of_exchange(exchange: dict, n: int, k: int, seed: int, tries: int, groups: int, directory: str,
                       batches):
    """Task g of :func:`_metis_in_task` for the whole graph: its pairs (dense ids, so their own
    positions) from the pairs pass's ``near`` exchange files (:func:`_pairs_pass`)."""
    fs, _ = layout.filesystem(exchange["directory"])
    pairs = pa.concat_tables([take_exchange(fs, exchange["near"], d) for d in range(exchange["count"])
                              if exchange["near"]] or [_EXCHANGE_SCHEMA.empty_table()])
    a, b, w = (pairs.column(c).to_numpy() for c in "abw")
    del pairs
    ids = np.arange(n, dtype=np.int64)
    for batch in batches:
        for g in batch.column(0).to_pylist():
            yield _metis_answer(ids, np.ones(n, np.int64), a, b, w, k, seed, tries, groups, g, directory)


def _metis_answer(ids, vw, rows, cols, w, k: int, seed: int, tries: int, groups: int, g: int, directory: str):
    """METIS in task g of ``groups``: its share of the ``tries`` from its own seed, on the graph of
    the vertices ``ids`` (weights ``vw``) and the edges between positions ``rows``, ``cols`` (weights
    ``w``, repeats summed here); the labels (and whether each vertex has a cut edge) go to the
    task's Parquet file under ``directory``, each partition's size and the cut weight are returned."""
    rows, cols, w = _summed_repeats(rows, cols, w)
    share = tries // groups + (g < tries % groups)
    parts = weighted_parts(ids.size, rows, cols, w, vw, k, seed + g, ufactor=10, tries=share)
    is_cut = parts[rows] != parts[cols]
    cut = int(w[is_cut].sum())
    boundary = np.zeros(ids.size, np.bool_)
    boundary[rows[is_cut]] = boundary[cols[is_cut]] = 1
    sizes = np.bincount(parts, weights=vw, minlength=k).astype(np.int64)
    fs, root = layout.filesystem(directory)
    files.put_table(fs, layout.join(root, layout.part_file(g)), pa.table(
        {"vid": ids.astype(np.int64), "part": parts.astype(np.int32), "boundary": boundary.astype(bool)}))
    return pa.RecordBatch.from_pydict({"kind": np.r_[np.full(k, _SIZE), _CUT].astype(np.int32),
                                       "a": np.arange(k + 1, dtype=np.int64), "b": np.r_[sizes, cut].astype(np.int64),
                                       "g": np.full(k + 1, g, np.int64)})


