"""Balanced label propagation on Spark (Ugander and Backstrom, WSDM 2013), for graphs that
do not fit the driver: ``spark-lp`` starts it from the hash partition, the multilevel
partitioner from its projected METIS partition.
"""
from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog

from gofs.errors import InputError
from gofs.partition.arrays import checked, collect_labels
from gofs.partition.hashing import hash_labels
from sparkshim.compat import release_local_checkpoint

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
