"""Balanced label propagation on Spark (Ugander and Backstrom, WSDM 2013), for graphs that
do not fit the driver: ``spark-lp`` starts it from the hash partition, the multilevel
partitioner from its projected METIS partition.
"""
from __future__ import annotations

import functools
import math

import numpy as np
import pyarrow as pa
import scipy.sparse as sp
from numba import njit
from scipy.optimize import linprog

from gofs import files, layout
from gofs.errors import InputError
from gofs.numba_cache import serialise_compilation
from gofs.partition.arrays import checked, collect_labels, summed_repeats
from gofs.partition.hashing import hash_labels
from gofs.partition.matching import splitmix
from gofs.spark_jobs import put_exchange, take_exchange, task_columns
from sparkshim.compat import forgets_zip_importers, release_local_checkpoint

serialise_compilation()  # one compilation at a time on this machine: numba's kernel cache stays whole

# Synchronous label propagation makes neighbours swap labels back and forth on
# bipartite-like graphs (grids, meshes); letting only a random 70% of vertices
# move per iteration breaks the two-cycle and gave the lowest cuts in trials.
_MOVE_PROBABILITY = 0.7
_COIN_BITS = 20
# Cells (from, to, bucket) in the per-iteration histogram collected to the driver.
_HISTOGRAM_CELLS = 1 << 16
# Vertices pushed out of an over-full partition go fewest lost neighbours first; losses
# of this many and more share the last class.
_LOSS_CLASSES = 8
# An iteration's moves up to this many are sent to every task (built in the driver, ~16 MiB);
# more relabel the edges through a shuffle.
_BROADCAST_MOVES = 1 << 19
# Labelled pairs per task: a vote's partial counts hold about one entry per pair end, and
# on R-MAT at 20M edges, tasks of ~2.5M pairs ran a 1-2 GiB local-mode heap out of memory.
_PAIRS_PER_TASK = 1 << 19



def spark_lp_partition(num_vertices: int, src, dst, num_partitions: int, seed: int = 0,
                       spark=None, iterations: int = 10) -> np.ndarray:
    """Run ``spark_label_propagation`` on numpy edges and return the driver-side array.

    Vertices without edges are sent as self-loops so that they count towards
    partition sizes; having no neighbours, they keep their hash partition.
    """
    if spark is None:
        raise InputError("the 'spark-lp' partitioner runs on Spark: pass spark=<SparkSession>")
    import pandas as pd

    src, dst = checked(num_vertices, src, dst, num_partitions)
    lonely = np.flatnonzero(np.bincount(np.concatenate([src, dst]), minlength=num_vertices) == 0)
    edges = pd.DataFrame({"src": np.concatenate([src, lonely]), "dst": np.concatenate([dst, lonely])})
    labels = spark_label_propagation(spark, spark.createDataFrame(edges), num_partitions,
                                     iterations=iterations, seed=seed)
    return collect_labels(labels, num_vertices)


def spark_label_propagation(spark, edges_df, num_partitions: int, iterations: int = 10, seed: int = 0,
                            capacity_slack: float = 0.05, initial=None):
    """Balanced label propagation computed with Spark joins, for graphs too big for the driver.

    Starts from the hash partition. In each iteration a random 70% of the
    vertices (hash of seed, iteration and id) look at their neighbours' labels and
    want the most common one (ties keep the current label). As in Ugander &
    Backstrom, "Balanced label propagation for partitioning massive graphs"
    (WSDM 2013), the driver then solves a small linear program over the k x k
    counts of wanted moves: move as many vertices as possible while no partition
    exceeds ``capacity = (1 + capacity_slack) * n / k``. A partition that starts
    over capacity (a hash start, or a projection of heavy coarse vertices) also
    offers its boundary vertices to their best other partition, those losing the
    fewest neighbours first, and the program pushes out as many as the overflow
    needs. Which vertices of a (from, to) pair move is decided by gain class and
    hash, and exactly as many as the program allows, so the capacity holds
    exactly. Only k x k x buckets counts reach the driver, never vertices or edges.

    Parameters
    ----------
    edges_df : DataFrame with integer columns ``src`` and ``dst`` (any ids, not
        necessarily dense); read as undirected; self-loops only make a vertex known.
    num_partitions : k >= 1.
    iterations : rounds of propagation; each runs a handful of Spark jobs.
    capacity_slack : allowed excess of a partition over n / k, as a fraction.
    initial : optional DataFrame ``(vid long, part int)`` with one row per vertex
        of ``edges_df`` to start from instead of the hash partition (the
        multilevel partitioner refines its projected METIS partition this way).

    Returns
    -------
    DataFrame ``(vid long, part int)`` with one row per vertex in ``edges_df``, a local
    checkpoint: its blocks stay cached until ``sparkshim.compat.release_local_checkpoint``
    (every other checkpoint and cache made on the way is released, also on failure).
    """
    from pyspark.sql import functions as F

    if num_partitions < 1:
        raise InputError(f"num_partitions must be >= 1, got {num_partitions}")
    edges = edges_df.select(F.col("src").cast("long").alias("src"), F.col("dst").cast("long").alias("dst"))
    pairs = edges.where(F.col("src") != F.col("dst")) \
        .select(F.least("src", "dst").alias("a"), F.greatest("src", "dst").alias("b")).distinct()
    if initial is None:
        vertices = edges.select(F.col("src").alias("vid")).union(edges.select(F.col("dst").alias("vid"))).distinct()
        initial = hash_labels(vertices, num_partitions, seed)
    return refine_partition(spark, pairs, initial, num_partitions, iterations=iterations, seed=seed,
                            capacity_slack=capacity_slack)


def refine_partition(spark, pairs, initial, num_partitions: int, iterations: int = 10, seed: int = 0,
                     capacity_slack: float = 0.05, min_moves: int = 0, report: dict | None = None,
                     num_pairs: int | None = None, sizes=None):
    """Balanced label propagation (see :func:`spark_label_propagation`) from a given partition.

    Parameters
    ----------
    pairs : DataFrame ``(a, b)``: every undirected edge once (either way round), no self-loops.
    initial : DataFrame ``(vid, part)`` with one row per vertex, isolated ones included.
    iterations : at most this many rounds of propagation.
    min_moves : stop after an iteration that moved fewer vertices than this and left no
        partition over capacity.
    report : if given, receives ``moves`` (vertices moved in each iteration) and
        ``start_balance`` (the initial partition's largest size over the mean).
    num_pairs : the number of pairs, if known: the labelled pairs are split into tasks of at most
        ``_PAIRS_PER_TASK`` (else into ``spark.sql.shuffle.partitions``), which bounds the memory
        of each task's vote.
    sizes : the number of vertices ``initial`` puts in each partition, if known (saves a job).

    Returns
    -------
    DataFrame ``(vid long, part int)``, a local checkpoint (release it with
    ``sparkshim.compat.release_local_checkpoint``).
    """
    from pyspark.sql import functions as F

    if num_partitions < 1:
        raise InputError(f"num_partitions must be >= 1, got {num_partitions}")
    k = num_partitions
    report = {} if report is None else report
    moves = report["moves"] = []
    held = []           # checkpoints and cached frames made here; all but the result are released
    labels = None
    try:
        labels = initial.select(F.col("vid").cast("long").alias("vid"),
                                F.col("part").cast("int").alias("part")).localCheckpoint()
        held.append(labels)
        # Every edge carries both endpoints' labels: an iteration's vote then needs no join,
        # and its moves (a few vertices, once the partition is good) relabel the edges
        # where they lie instead of shuffling them again.
        slices = max(int(spark.conf.get("spark.sql.shuffle.partitions")),
                     math.ceil((num_pairs or 0) / _PAIRS_PER_TASK))
        edges = _labelled_pairs(pairs, labels).repartition(slices, "a").localCheckpoint()
        held.append(edges)

        if sizes is None:
            sizes = np.zeros(k, dtype=np.int64)
            for part, count in labels.groupBy("part").count().collect():
                sizes[part] = count
        sizes = np.array(sizes, dtype=np.int64)
        n = int(sizes.sum())
        report["start_balance"] = float(sizes.max() * k / n) if n else 1.0
        capacity = max(math.ceil(n / k), math.floor((1 + capacity_slack) * n / k))
        buckets = int(np.clip(_HISTOGRAM_CELLS // (2 * k * k), _LOSS_CLASSES, 1024))
        for iteration in range(iterations):
            overfull = np.flatnonzero(sizes > capacity).tolist()
            candidates = _move_candidates(edges, iteration, seed, buckets, overfull).persist()
            held.append(candidates)
            histogram = np.zeros((k, k, 2 * buckets), dtype=np.int64)
            cells = candidates.groupBy("part", "to", "bucket").count().collect()
            if cells:
                part, to, bucket, count = np.array(cells, dtype=np.int64).T
                histogram[part, to, bucket] = count
            planned = _plan_moves(histogram[..., :buckets].sum(axis=-1), histogram[..., buckets:].sum(axis=-1),
                                  sizes, capacity)
            moves.append(int(planned.sum()))
            sizes += planned.sum(axis=0) - planned.sum(axis=1)
            last = iteration == iterations - 1 \
                or (min_moves > 0 and moves[-1] < min_moves and sizes.max() <= capacity)
            if moves[-1]:
                moved = _chosen_moves(spark, candidates, histogram, planned).localCheckpoint()
                held.append(moved)
                small = moves[-1] <= _BROADCAST_MOVES
                labels = _replaced(held, labels, _relabelled(labels, moved, small).localCheckpoint())
                if not last:
                    edges = _replaced(held, edges, _relabelled_pairs(edges, moved, small).localCheckpoint())
                held.remove(moved)
                release_local_checkpoint(moved)
            held.remove(candidates)
            candidates.unpersist()
            if last:
                break
    except BaseException:
        _release(held)
        raise
    held.remove(labels)
    _release(held)
    return labels


def _replaced(held: list, previous, current):
    """Swap a checkpoint for its successor among the held frames, releasing the old one."""
    held.append(current)
    held.remove(previous)
    release_local_checkpoint(previous)
    return current


def _release(frames) -> None:
    for frame in frames:
        if frame.storageLevel.useMemory or frame.storageLevel.useDisk:
            frame.unpersist()
        else:
            release_local_checkpoint(frame)


def _labelled_pairs(pairs, labels):
    """``(a, b, pa, pb)``: each undirected edge with its endpoints' partitions."""
    from pyspark.sql import functions as F

    return pairs.select(F.col("a").cast("long").alias("a"), F.col("b").cast("long").alias("b")) \
        .join(labels.select(F.col("vid").alias("a"), F.col("part").alias("pa")), "a") \
        .join(labels.select(F.col("vid").alias("b"), F.col("part").alias("pb")), "b")


def _move_candidates(edges, iteration: int, seed: int, buckets: int, overfull: list):
    """Vertices that would rather be elsewhere, or must leave: ``(vid, part, to, coin, bucket)``.

    ``coin`` is a hash of (seed, iteration, vid): its low bits pick who may move
    this iteration, its high bits the bucket that orders the moves of a pair.
    A vertex that may move and has more neighbours in another partition than
    in its own wants to go there (bucket below ``buckets``). A vertex of an
    ``overfull`` partition that does not want to move is offered to the
    partition holding most of its other neighbours, in a bucket at or above
    ``buckets`` whose class is the number of neighbours it would lose, so the
    cheapest go first. Each labelled pair votes at both ends; the counts are
    summed before any shuffle, so a shuffle carries about one row per voting
    vertex and label.
    """
    from pyspark.sql import functions as F

    ends = F.explode(F.array(F.struct(F.col("a").alias("src"), F.col("pa").alias("ps"), F.col("pb").alias("pd")),
                             F.struct(F.col("b").alias("src"), F.col("pb").alias("ps"), F.col("pa").alias("pd"))))
    coin = F.xxhash64(F.lit(seed).cast("long"), F.lit(iteration).cast("long"), F.col("src"))
    may_move = F.pmod(F.col("coin"), F.lit(1 << _COIN_BITS)) < int(_MOVE_PROBABILITY * (1 << _COIN_BITS))
    must_shrink = F.col("ps").isin(overfull) if overfull else F.lit(False)
    counts = edges.select(ends.alias("end")).select("end.*").withColumn("coin", coin).where(may_move | must_shrink) \
        .groupBy("src", "coin", "ps", "pd").count()
    # max over (count, random) = the most common other label; moving there gains if it beats the own count.
    elsewhere = F.struct(F.col("count"), F.xxhash64(F.col("coin"), F.col("pd")).alias("tie"), F.col("pd").alias("to"))
    votes = counts.groupBy("src", "ps", "coin").agg(
        F.sum(F.when(F.col("pd") == F.col("ps"), F.col("count")).otherwise(0)).alias("own"),
        F.max(F.when(F.col("pd") != F.col("ps"), elsewhere)).alias("best"))
    wants = may_move & (F.col("best.count") > F.col("own"))
    high = F.shiftright(F.col("coin"), _COIN_BITS)
    per_class = buckets // _LOSS_CLASSES
    loss_class = F.least(F.greatest(F.col("own") - F.col("best.count"), F.lit(0)), F.lit(_LOSS_CLASSES - 1))
    pushed = buckets + loss_class * per_class + F.pmod(high, F.lit(per_class))
    return votes.where(F.col("best").isNotNull() & (wants | must_shrink)) \
        .select(F.col("src").alias("vid"), F.col("ps").alias("part"), F.col("best.to").alias("to"), "coin",
                F.when(wants, F.pmod(high, F.lit(buckets))).otherwise(pushed).cast("int").alias("bucket"))


def _plan_moves(wanted: np.ndarray, pushed: np.ndarray, sizes: np.ndarray, capacity: int) -> np.ndarray:
    """How many vertices to move from partition i to j: the Ugander-Backstrom linear program.

    Maximise the wanted moves, bounded by ``wanted[i, j]``, subject to each
    partition's net inflow keeping it within ``capacity``. A partition already
    over capacity gets an overflow variable, and its vertices may also be
    ``pushed[i, j]`` out at a cost. A pushed move costs 2, more than a wanted
    move gains, so the program pushes only to shrink overflow, and only once the
    wanted moves of that pair are used up; overflow costs 4k, more than any chain
    of moves it could enable or spare, so it shrinks first. The constraint matrix
    is a network matrix (totally unimodular), so the simplex optimum is integral.
    Returns the sum of both kinds: the wanted candidates of a pair come first in
    bucket order.
    """
    k = len(sizes)
    demand = np.concatenate([wanted.ravel(), pushed.ravel()])
    flows = np.flatnonzero(demand)
    if flows.size == 0:
        return np.zeros((k, k), dtype=np.int64)
    rows, cols = np.divmod(flows % (k * k), k)
    columns = np.arange(flows.size)
    overflow = flows.size + np.arange(k)
    a_ub = sp.coo_matrix((np.concatenate([np.ones(flows.size), -np.ones(flows.size), -np.ones(k)]),
                          (np.concatenate([cols, rows, np.arange(k)]), np.concatenate([columns, columns, overflow]))),
                         shape=(k, flows.size + k))
    cost = np.concatenate([np.where(flows < k * k, -1.0, 2.0), np.full(k, 4.0 * k)])
    bounds = np.column_stack([np.zeros(flows.size + k), np.concatenate([demand[flows], np.full(k, np.inf)])])
    result = linprog(cost, A_ub=a_ub, b_ub=capacity - sizes, bounds=bounds, method="highs-ds")
    if not result.success:
        raise RuntimeError(f"label propagation move planning failed: {result.message}")
    moves = np.zeros(k * k, dtype=np.int64)
    np.add.at(moves, flows % (k * k), np.rint(result.x[:flows.size]).astype(np.int64))
    return moves.reshape(k, k)


def _chosen_moves(spark, candidates, histogram: np.ndarray, moves: np.ndarray):
    """``(vid, to)``: exactly ``moves[i, j]`` candidates from i to j, whole buckets, then the first of the next.

    Only the one partly taken bucket of each pair is ranked, so no task sorts
    all the candidates of a pair.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    cumulative = histogram.cumsum(axis=-1)
    whole = (cumulative <= moves[..., None]).sum(axis=-1)
    taken = np.take_along_axis(cumulative, np.maximum(whole - 1, 0)[..., None], axis=-1)[..., 0]
    rest = moves - np.where(whole > 0, taken, 0)
    parts, tos = np.nonzero(moves)
    plan = spark.createDataFrame(
        [(int(p), int(t), int(whole[p, t]), int(rest[p, t])) for p, t in zip(parts, tos)],
        "part int, to int, whole int, rest long")
    chosen = candidates.join(F.broadcast(plan), ["part", "to"])
    in_whole = chosen.where(F.col("bucket") < F.col("whole"))
    rank = F.row_number().over(Window.partitionBy("part", "to").orderBy("coin", "vid"))
    in_rest = chosen.where(F.col("bucket") == F.col("whole")).withColumn("rank", rank) \
        .where(F.col("rank") <= F.col("rest"))
    return in_whole.select("vid", "to").unionByName(in_rest.select("vid", "to"))


def _relabelled(labels, moved, small: bool):
    """``(vid, part)`` after the moves; ``small`` moves go to every task (no shuffle of ``labels``)."""
    from pyspark.sql import functions as F

    moved = F.broadcast(moved) if small else moved
    return labels.join(moved, "vid", "left").select("vid", F.coalesce(F.col("to"), F.col("part")).alias("part"))


def _relabelled_pairs(edges, moved, small: bool):
    """Labelled pairs with the moved vertices' new partitions at either end; ``small`` moves
    go to every task, so no edge moves."""
    from pyspark.sql import functions as F

    at_a = moved.select(F.col("vid").alias("a"), F.col("to").alias("ta"))
    at_b = moved.select(F.col("vid").alias("b"), F.col("to").alias("tb"))
    if small:
        at_a, at_b = F.broadcast(at_a), F.broadcast(at_b)
    return edges.join(at_a, "a", "left").join(at_b, "b", "left") \
        .select("a", "b", F.coalesce("ta", "pa").alias("pa"), F.coalesce("tb", "pb").alias("pb"))


# --------------------------------------------------------------------------- coarsening by clustering
#
# A level of the multilevel partitioner for graphs whose ids have no locality (R-MAT, social
# graphs): size-constrained label propagation (Meyerhenke, Sanders and Schulz, SEA 2014) in
# blocks of consecutive ids, each block's vertices moved by one numba pass per round in the
# task that holds the block's edges, labels and cluster weights exchanged between rounds as
# Arrow files (:func:`gofs.spark_jobs.put_exchange`), never as Spark rows.

_ACTIVE_SHARE = 0.5     # vertices that may move per round: breaks swaps between blocks moving at once
_BLOCK_PAIRS = 1 << 21  # a coarse level's blocks hold about this many pairs at most
_PAIRS_SCHEMA = pa.schema([("a", pa.int64()), ("b", pa.int64()), ("w", pa.int64())])
_VERTICES_SCHEMA = pa.schema([("vid", pa.int64()), ("vw", pa.int64())])
_LABELS_SCHEMA = pa.schema([("c", pa.int64())])
_PARTIALS_SCHEMA = pa.schema([("c", pa.int64()), ("s", pa.int64()), ("w", pa.int64())])
_WEIGHTS_SCHEMA = pa.schema([("c", pa.int64()), ("w", pa.int64())])
_VERTEX_ROWS = "vid long, vw long"
_PAIR_ROWS = "a long, b long, w long"
_MOVES_ROWS = "block long, moved long"
_MEMBERS_SCHEMA = "vid long, c long"
_LABELLED_SCHEMA = "a long, b long, w long, ca long, cb long"


@njit(cache=True, nogil=True)
def _join_clusters(indptr, neighbour, weight, label, vw, ids, clusters, share, salt, active):
    """One round of one block, in place: each active local vertex (in an order hashed from
    ``salt`` and its id) joins the cluster its edges weigh most towards, if more than towards
    its own and if the block's net additions to that cluster stay within ``share`` (this
    block's part of the cluster's room); ties go to a hash of vertex and cluster.

    ``label`` holds a cluster index (into ``clusters``, their ids) per local vertex, then per
    ghost (a neighbour in another block); ``neighbour[indptr[i]:indptr[i+1]]`` are positions in
    ``label``. A vertex leaving a cluster gives the block back its weight. Returns the moves."""
    n = vw.size
    score = np.zeros(clusters.size, np.float64)
    touched = np.empty(clusters.size, np.int64)
    net = np.zeros(clusters.size, np.int64)
    keys = np.empty(n, np.uint64)
    for i in range(n):
        keys[i] = splitmix(np.uint64(ids[i]) ^ salt)
    moved = 0
    for i in np.argsort(keys):
        if keys[i] % np.uint64(1 << _COIN_BITS) >= active:
            continue
        count = 0
        for e in range(indptr[i], indptr[i + 1]):
            c = label[neighbour[e]]
            if score[c] == 0.0:
                touched[count] = c
                count += 1
            score[c] += weight[e]
        own = label[i]
        best, most, tie = -1, score[own], np.uint64(0)
        for t in range(count):
            c = touched[t]
            if c != own and net[c] + vw[i] <= share[c]:
                mix = splitmix(np.uint64(ids[i]) ^ splitmix(np.uint64(clusters[c]) ^ salt))
                if score[c] > most or (score[c] == most and best >= 0 and mix > tie):
                    best, most, tie = c, score[c], mix
        for t in range(count):
            score[touched[t]] = 0.0
        if best >= 0:
            label[i] = best
            net[own] -= vw[i]
            net[best] += vw[i]
            moved += 1
    return moved


def cluster_level(pairs, weights, vertices: dict, edges: int, bound: int, rounds: int, seed: int, level: int, held,
                  labelled: bool, exchange: dict | None = None):
    """One coarsening level by size-constrained label propagation: ``(clusters, coarse weights,
    labelled pairs, coarse pairs)`` as ``(vid, c)``, ``(vid, vw)``, ``(a, b, w, ca, cb)`` (None
    unless ``labelled``) and ``(a, b, w)`` frames, c the id of a vertex of the cluster.

    The vertices are split into blocks of consecutive ids; each block's task holds its vertices'
    edges. Every round, a random half of each block's vertices, one at a time, join the
    neighbouring cluster their edges weigh most towards (:func:`_join_clusters`), seeing the
    moves made before them in the block and the other blocks' labels as they were at the round's
    start. A cluster's room under ``bound`` (its weight summed by the block owning its id, sent to
    every block that holds or neighbours one of its vertices) is shared evenly between the
    blocks, so no cluster ever exceeds the bound. Each round is two Spark jobs of one task per
    block (moves, then the clusters' weights); the last one also contracts: each cluster's
    weight, the pairs between clusters (summed within a block; repeats are summed where they meet
    next) and, as files, each vertex's cluster and the pairs labelled with both clusters.

    ``pairs`` ``(a, b, w)`` (``a < b``, repeats allowed; about ``edges`` distinct ones) and
    ``weights`` ``(vid, vw)`` on the ids ``vertices`` summarises (``low``, ``high``); ``exchange``, if given, holds the
    same pairs as the multilevel pairs pass sent them (dense ids of weight 1, blocks: its
    narrowest id ranges), and nothing is sent again.
    """
    spark = pairs.sparkSession
    directory = held.directory()
    fs, root = layout.filesystem(directory)
    for kind in ("members", "labelled", "vertices", "pairs"):
        fs.create_dir(layout.join(root, kind), recursive=True)     # read back even if no task writes there
    if exchange is not None:
        source = {"low": exchange["low"], "width": exchange["width"], "count": exchange["count"],
                  "high": vertices["high"], "directory": exchange["directory"], "near": exchange["near"],
                  "far": exchange["far"], "vertices": None}
    else:
        source = _sent(pairs, weights, vertices, edges, directory)
    blocks = source["count"]

    def run(task, *arguments):
        job = functools.partial(task, source, directory, *arguments)
        return spark.range(0, blocks, 1, blocks).mapInArrow(forgets_zip_importers(job), _MOVES_ROWS).collect()

    run(_start_blocks)
    for round_ in range(rounds):
        run(_sum_weights, round_)
        salt = int(splitmix(np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(level * 1009 + round_)))
        run(_move_vertices, round_, bound, salt)
    run(_contracted, rounds, labelled)
    clusters = spark.read.schema(_MEMBERS_SCHEMA).parquet(layout.join(directory, "members"))
    coarse_weights = spark.read.schema(_VERTEX_ROWS).parquet(layout.join(directory, "vertices"))
    coarse_pairs = spark.read.schema(_PAIR_ROWS).parquet(layout.join(directory, "pairs"))
    inner = spark.read.schema(_LABELLED_SCHEMA).parquet(layout.join(directory, "labelled")) if labelled else None
    return clusters, coarse_weights, inner, coarse_pairs


def _sent(pairs, weights, vertices: dict, edges: int, directory: str) -> dict:
    """One job: the pairs and the vertices sent to blocks of consecutive ids as exchange files
    (``near``: each pair to the block of a; ``far``: a pair between blocks also to the block of b;
    ``vertices``: each vertex to its block), as the multilevel pairs pass sends the input pairs."""
    from pyspark.sql import functions as F

    low, high = int(vertices["low"] or 0), int(vertices["high"] if vertices["high"] is not None else 0)
    spark = pairs.sparkSession
    count = max(int(spark.conf.get("spark.sql.shuffle.partitions")),
                math.ceil(edges / _BLOCK_PAIRS), 1)
    width = max(1, math.ceil((high - low + 1) / count))
    count = -(-(high - low + 1) // width)
    rows = pairs.select("a", "b", "w").unionByName(
        weights.select(F.col("vid").alias("a"), F.lit(-1).cast("long").alias("b"), F.col("vw").alias("w")))
    task = forgets_zip_importers(functools.partial(_send_rows, directory, low, width, count))
    sent = sorted(t for t, _ in rows.mapInArrow(task, _MOVES_ROWS).collect())
    fs, root = layout.filesystem(directory)
    paths = {side: [layout.join(root, "sent", side, layout.part_file(t)) for t in sent]
             for side in ("near", "far", "vertices")}
    return {"low": low, "width": width, "count": count, "high": high, "directory": directory, **paths}


def _send_rows(directory: str, low: int, width: int, count: int, batches):
    """Task of :func:`_sent`: rows ``(a, b, w)``, vertices as ``(vid, -1, vw)``."""
    rows = task_columns(batches, "abw")
    if rows is None:
        return
    t, (a, b, w) = rows
    fs, root = layout.filesystem(directory)
    vertex = b < 0
    put_exchange(fs, layout.join(root, "sent", "vertices", layout.part_file(t)),
                 pa.Table.from_arrays([a[vertex], w[vertex]], schema=_VERTICES_SCHEMA), (a[vertex] - low) // width,
                 count)
    a, b, w = a[~vertex], b[~vertex], w[~vertex]
    near, far = (a - low) // width, (b - low) // width
    apart = near != far
    put_exchange(fs, layout.join(root, "sent", "near", layout.part_file(t)),
                 pa.Table.from_arrays([a, b, w], schema=_PAIRS_SCHEMA), near, count)
    put_exchange(fs, layout.join(root, "sent", "far", layout.part_file(t)),
                 pa.Table.from_arrays([a[apart], b[apart], w[apart]], schema=_PAIRS_SCHEMA), far[apart], count)
    yield pa.RecordBatch.from_pydict({"block": np.array([t], np.int64), "moved": np.zeros(1, np.int64)})


def _path(directory: str, kind: str, step, d: int) -> str:
    return layout.join(layout.filesystem(directory)[1], kind, str(step), layout.part_file(d))


def _put(fs, path: str, table: pa.Table, destination=None, count: int = 1) -> None:
    put_exchange(fs, path, table, np.zeros(table.num_rows, np.int64) if destination is None else destination, count)


def _take_all(fs, directory: str, kind: str, step, blocks: int, d: int, schema: pa.Schema) -> pa.Table:
    """Batch d of every block's exchange file ``kind/step``."""
    return take_exchange(fs, [_path(directory, kind, step, t) for t in range(blocks)], d, schema)


def _blocks(batches):
    for batch in batches:
        yield from batch.column(0).to_pylist()


def _start_blocks(source: dict, directory: str, batches):
    """Job 1 of a level: each block's graph (its vertices, their edges as positions among the
    block's vertices and its ghosts, which blocks each vertex's label goes to) built from the
    sent pairs and kept as files for the rounds; every vertex starts as its own cluster."""
    fs, _ = layout.filesystem(directory)
    source_fs, _ = layout.filesystem(source["directory"])
    low, width, blocks = source["low"], source["width"], source["count"]
    for d in _blocks(batches):
        if source["vertices"] is None:      # dense ids of weight 1
            ids = np.arange(low + d * width, min(low + (d + 1) * width, source["high"] + 1), dtype=np.int64)
            vw = np.ones(ids.size, np.int64)
        else:
            vertices = take_exchange(source_fs, source["vertices"], d, _VERTICES_SCHEMA)
            ids, vw = vertices.column("vid").to_numpy(), vertices.column("vw").to_numpy()
            order = np.argsort(ids, kind="stable")
            ids, vw = ids[order], vw[order]
        near = take_exchange(source_fs, source["near"], d, _PAIRS_SCHEMA)
        far = take_exchange(source_fs, source["far"], d, _PAIRS_SCHEMA)
        na, nb, nw = (near.column(c).to_numpy() for c in "abw")
        fa, fb, fw = (far.column(c).to_numpy() for c in "abw")
        inside = (nb - low) // width == d
        u, v, w = summed_repeats(np.r_[na, nb[inside], fb], np.r_[nb, na[inside], fa], np.r_[nw, nw[inside], fw])
        local = (v - low) // width == d
        ghosts = np.unique(v[~local])
        position = np.where(local, np.searchsorted(ids, v), ids.size + np.searchsorted(ghosts, v))
        degree = np.bincount(np.searchsorted(ids, u), minlength=ids.size)
        sends = np.unique(np.c_[(v[~local] - low) // width, np.searchsorted(ids, u[~local])], axis=0) \
            if ghosts.size else np.empty((0, 2), np.int64)
        _put(fs, _path(directory, "graph", "vertices", d), pa.table({"vid": ids, "vw": vw, "degree": degree}))
        _put(fs, _path(directory, "graph", "edges", d), pa.table({"at": position.astype(np.int64), "w": w,
                                                                   "b": v}))
        _put(fs, _path(directory, "graph", "ghosts", d), pa.table({"vid": ghosts}))
        _put(fs, _path(directory, "graph", "sends", d), pa.table({"block": sends[:, 0].astype(np.int64),
                                                                   "at": sends[:, 1].astype(np.int64)}))
        _labels_out(fs, directory, 0, d, vw, ids, sends[:, 0].astype(np.int64), sends[:, 1].astype(np.int64), low,
                    width, blocks)
        yield pa.RecordBatch.from_pydict({"block": np.array([d], np.int64), "moved": np.zeros(1, np.int64)})


def _labels_out(fs, directory: str, step: int, d: int, vw, label, send_block, send_at, low: int, width: int,
                blocks: int) -> None:
    """A block's labels after ``step`` rounds (``label``: each local vertex's cluster id), sent on:
    its own file, each ghost's label to the blocks it neighbours, and to each cluster's owner
    (the block of its id) the block's weight in it and the blocks that must learn its weight."""
    _put(fs, _path(directory, "labels", step, d), pa.table({"c": label}))
    _put(fs, _path(directory, "ghosts", step, d), pa.table({"c": label[send_at]}), send_block, blocks)
    c = np.r_[label, label[send_at]]
    s = np.r_[np.full(label.size, d, np.int64), send_block]
    c, s, w = summed_repeats(c, s, np.r_[vw, np.zeros(send_at.size, np.int64)])
    _put(fs, _path(directory, "partials", step, d), pa.table({"c": c, "s": s, "w": w}), (c - low) // width, blocks)


def _sum_weights(source: dict, directory: str, step: int, batches):
    """The first job of a round: each block sums the weights of the clusters it owns and sends
    each to the blocks that hold or neighbour one of its vertices."""
    fs, _ = layout.filesystem(directory)
    blocks = source["count"]
    for d in _blocks(batches):
        partials = _take_all(fs, directory, "partials", step, blocks, d, _PARTIALS_SCHEMA)
        c, s, w = summed_repeats(*(partials.column(name).to_numpy() for name in ("c", "s", "w")))
        clusters, at = np.unique(c, return_inverse=True)
        total = np.bincount(at, weights=w, minlength=clusters.size).astype(np.int64)
        _put(fs, _path(directory, "weights", step, d), pa.table({"c": c, "w": total[at]}), s, blocks)
        yield pa.RecordBatch.from_pydict({"block": np.array([d], np.int64), "moved": np.zeros(1, np.int64)})


def _block_state(fs, directory: str, step: int, d: int, blocks: int):
    """A block's graph (:func:`_start_blocks`) and every position's cluster id after ``step``
    rounds: its vertices' then its ghosts' (in id order: the blocks' batches, block by block)."""
    graph = {}
    for kind in ("vertices", "edges", "ghosts", "sends"):
        table = take_exchange(fs, [_path(directory, "graph", kind, d)], 0)
        graph.update({f"{kind}.{name}": table.column(name).to_numpy() for name in table.column_names})
    local = take_exchange(fs, [_path(directory, "labels", step, d)], 0).column("c").to_numpy()
    ghosts = _take_all(fs, directory, "ghosts", step, blocks, d, _LABELS_SCHEMA).column("c").to_numpy()
    if ghosts.size != graph["ghosts.vid"].size:
        raise RuntimeError(f"label propagation: block {d} got {ghosts.size} ghost labels for "
                           f"{graph['ghosts.vid'].size} ghosts")
    return graph, np.r_[local, ghosts]


def _move_vertices(source: dict, directory: str, step: int, bound: int, salt: int, batches):
    """The second job of a round: each block's vertices moved (:func:`_join_clusters`), within
    its share of each cluster's room, and its labels sent on (:func:`_labels_out`)."""
    fs, _ = layout.filesystem(directory)
    low, width, blocks = source["low"], source["width"], source["count"]
    for d in _blocks(batches):
        graph, label = _block_state(fs, directory, step, d, blocks)
        clusters, index = np.unique(label, return_inverse=True)
        index = index.astype(np.int64)       # moved in place
        weights = _take_all(fs, directory, "weights", step, blocks, d, _WEIGHTS_SCHEMA)
        known, weight = weights.column("c").to_numpy(), weights.column("w").to_numpy()
        order = np.argsort(known)
        known, weight = known[order], weight[order]
        at = np.minimum(np.searchsorted(known, clusters), max(known.size - 1, 0))
        if clusters.size and (known.size == 0 or (known[at] != clusters).any()):
            raise RuntimeError(f"label propagation: block {d} lacks the weight of a cluster it sees")
        share = (bound - weight[at]) // blocks if clusters.size else np.zeros(0, np.int64)
        ids, vw = graph["vertices.vid"], graph["vertices.vw"]
        indptr = np.r_[0, np.cumsum(graph["vertices.degree"])].astype(np.int64)
        moved = _join_clusters(indptr, graph["edges.at"], graph["edges.w"].astype(np.float64), index,
                               vw, ids, clusters, share.astype(np.int64), np.uint64(salt),
                               np.uint64(int(_ACTIVE_SHARE * (1 << _COIN_BITS))))
        _labels_out(fs, directory, step + 1, d, vw, clusters[index[:ids.size]], graph["sends.block"],
                    graph["sends.at"], low, width, blocks)
        yield pa.RecordBatch.from_pydict({"block": np.array([d], np.int64), "moved": np.array([moved], np.int64)})


def _contracted(source: dict, directory: str, rounds: int, labelled: bool, batches):
    """The level's last job: each block writes the weights of the clusters it owns, the pairs
    between clusters of its edges (each edge once: by the block of its smaller end, summed), its
    vertices' clusters and (if ``labelled``) its edges with both clusters, as files that the next
    level and the METIS task read themselves."""
    fs, root = layout.filesystem(directory)
    blocks = source["count"]
    for d in _blocks(batches):
        partials = _take_all(fs, directory, "partials", rounds, blocks, d, _PARTIALS_SCHEMA)
        c, w = partials.column("c").to_numpy(), partials.column("w").to_numpy()
        clusters, at = np.unique(c, return_inverse=True)
        total = np.bincount(at, weights=w, minlength=clusters.size).astype(np.int64)
        files.put_table(fs, layout.join(root, "vertices", layout.part_file(d)),
                        pa.table({"vid": clusters.astype(np.int64), "vw": total}))
        graph, label = _block_state(fs, directory, rounds, d, blocks)
        ids = graph["vertices.vid"]
        files.put_table(fs, layout.join(root, "members", layout.part_file(d)),
                        pa.table({"vid": ids, "c": label[:ids.size]}))
        a = np.repeat(ids, graph["vertices.degree"])
        b, w = graph["edges.b"], graph["edges.w"]
        once = a < b
        a, b, w = a[once], b[once], w[once]
        ca, cb = np.repeat(label[:ids.size], graph["vertices.degree"])[once], label[graph["edges.at"][once]]
        if labelled:
            files.put_table(fs, layout.join(root, "labelled", layout.part_file(d)),
                            pa.table({"a": a, "b": b, "w": w, "ca": ca, "cb": cb}))
        apart = ca != cb
        coarse_pairs = summed_repeats(np.minimum(ca, cb)[apart], np.maximum(ca, cb)[apart], w[apart])
        files.put_table(fs, layout.join(root, "pairs", layout.part_file(d)), pa.table(
            {name: column.astype(np.int64) for name, column in zip("abw", coarse_pairs)}))
        yield pa.RecordBatch.from_pydict({"block": np.array([d], np.int64), "moved": np.zeros(1, np.int64)})
