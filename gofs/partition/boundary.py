"""Refinement of a projected partition in a band around its boundary, in as few tasks as the band needs.

A partition projected from METIS's answer on the coarse graph is already close to a local
optimum: only vertices near a neighbour in another partition can gain by moving, and on a road
graph they are a small share of millions. The *band* is the vertices of the clusters (of the
first coarsening level: whole clusters share a partition after projection) that hold a cut
edge, on both sides of the boundary: several hops wide, about one cluster (the caller marks
them: the multilevel partitioner from the coarse graph METIS cut). So instead of a
Spark job per propagation step over every edge, the edges that touch the band (picked by tasks
that read the labelled edges' files with the clusters' table, :func:`_band`) are sent, with
both ends' partitions, to one task (more only when they exceed :data:`ROWS_PER_TASK`), where
numba kernels move band vertices to the partition holding most of their edge weight, one at a
time (no two-cycles), rounds until nothing gains, push an over-full partition's cheapest
vertices out, and then run k-way FM passes (:func:`gofs.partition.fm.fm_passes`), which also
take losing moves to smooth the boundary. Several tasks split each partition's room (and its
excess) evenly, so the capacity holds whatever they do at the same time.
"""
from __future__ import annotations

import contextlib
import functools
import math
import uuid

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from numba import njit

from gofs.numba_cache import serialise_compilation
from gofs import files, layout
from gofs.partition.fm import fm_passes
from gofs.partition.matching import splitmix
from gofs.spark_jobs import over_files
from sparkshim.compat import forgets_zip_importers

serialise_compilation()  # one compilation at a time on this machine: numba's kernel cache stays whole

ROWS_PER_TASK = 1 << 21
"""Boundary edge ends one refinement task holds at most (about 64 MiB of numpy arrays)."""
FM_PASSES = 8
"""FM passes a refinement task runs at most after its greedy rounds."""
FM_PATIENCE = 1000
"""An FM pass stops after this many moves without a better cut (road grids: 300 or more
reach the same cut)."""
_ROUNDS, _GAINS = 0, 1       # kinds of rows a refinement task returns
_RESULT = "kind int, a long, b long"
_MOVES_SCHEMA = "vid long, part int"


@njit(cache=True, nogil=True)
def _weights_by_partition(i, indptr, neighbour, fixed, weight, part, counts):
    for e in range(indptr[i], indptr[i + 1]):
        j = neighbour[e]
        counts[part[j] if j >= 0 else fixed[e]] += weight[e]


@njit(cache=True, nogil=True)
def _best_with_room(counts, own, sizes, limit):
    """The other partition with most of the vertex's edge weight among those under their
    limit: ``(partition or -1, its weight)``."""
    best, most = -1, -1.0
    for q in range(counts.size):
        if q != own and sizes[q] < limit[q] and counts[q] > most:
            best, most = q, counts[q]
    return best, most


@njit(cache=True, nogil=True)
def refine_rounds(indptr, neighbour, fixed, weight, part, ids, sizes, limit, target, rounds, min_moves, seed):
    """Move boundary vertices in place; returns the moves of each round run.

    Vertex ``i`` (global id ``ids[i]``, partition ``part[i]``) has the edges
    ``indptr[i]:indptr[i+1]``: to vertex ``neighbour[e]`` of this task, or (``-1``) to a vertex
    fixed in partition ``fixed[e]``, of weight ``weight[e]``. Each round visits the vertices in
    an order hashed from ``seed``, the round and the id, and moves each to the partition with
    most of its edge weight if that beats its own and the partition is under its ``limit``;
    then partitions above ``target`` push out the vertices that lose least. ``sizes`` (updated)
    counts every vertex of each partition. Stops after ``rounds``, or earlier once a round moved
    fewer than ``min_moves`` (> 0) and no partition is above its target.
    """
    n, k = part.size, sizes.size
    counts = np.zeros(k, np.float64)
    moves = np.zeros(rounds, np.int64)
    keys = np.empty(n, np.uint64)
    for r in range(rounds):
        salt = splitmix(np.uint64(seed) * np.uint64(1000003) + np.uint64(r))
        for i in range(n):
            keys[i] = splitmix(np.uint64(ids[i]) ^ salt)
        order = np.argsort(keys)
        moved = 0
        for i in order:
            own = part[i]
            counts[:] = 0.0
            _weights_by_partition(i, indptr, neighbour, fixed, weight, part, counts)
            best, most = _best_with_room(counts, own, sizes, limit)
            if best >= 0 and most > counts[own]:
                part[i] = best
                sizes[own] -= 1
                sizes[best] += 1
                moved += 1
        if np.any(sizes > target):
            loss = np.empty(n, np.float64)
            for i in range(n):
                counts[:] = 0.0
                _weights_by_partition(i, indptr, neighbour, fixed, weight, part, counts)
                own = part[i]
                most = -1.0
                for q in range(k):
                    if q != own and counts[q] > most:
                        most = counts[q]
                loss[i] = counts[own] - most
            for i in np.argsort(loss, kind="mergesort"):
                own = part[i]
                if sizes[own] <= target[own]:
                    continue
                counts[:] = 0.0
                _weights_by_partition(i, indptr, neighbour, fixed, weight, part, counts)
                best, _ = _best_with_room(counts, own, sizes, limit)
                if best >= 0:
                    part[i] = best
                    sizes[own] -= 1
                    sizes[best] += 1
                    moved += 1
        moves[r] = moved
        if min_moves > 0 and moved < min_moves and not np.any(sizes > target):
            return moves[:r + 1]
    return moves


def shares(sizes: np.ndarray, capacity: int, groups: int) -> tuple[np.ndarray, np.ndarray]:
    """``(limit, target)`` for one of ``groups`` tasks refining at once: each partition's room
    under ``capacity`` (or, over it, its excess) split evenly between the tasks. A task may
    fill a partition up to ``limit`` and must bring it down to ``target``."""
    sizes = np.asarray(sizes, np.int64)
    room = np.maximum(capacity - sizes, 0) // groups
    excess = -(-np.maximum(sizes - capacity, 0) // groups)
    over = sizes > capacity
    limit = np.where(over, sizes, sizes + room)
    return limit, np.where(over, sizes - excess, limit)


def _refine_task(band_files: list, sizes: np.ndarray, capacity: int, groups: int, rounds: int, min_moves: int,
                 seed: int, directory: str, batches):
    """Task g: its group of the band's edge ends (those whose cluster ``cu`` hashes to g), read from
    the band tasks' files ``band_files`` and refined by :func:`_refine_group`, its moves written
    under ``directory``."""
    limit, target = shares(sizes, capacity, groups)
    for batch in batches:
        for g in batch.column(0).to_pylist():
            ends = pa.concat_tables([_group_of(files.read_columns(*layout.filesystem(path), None), g, groups, seed)
                                     for path in band_files] or [_ENDS_SCHEMA.empty_table()])
            if ends.num_rows:
                    yield from _refine_group(ends, sizes, limit, target, rounds, math.ceil(min_moves / groups), seed,
                                         layout.join(directory, layout.part_file(g)))


def _group_of(ends: pa.Table, g: int, groups: int, seed: int) -> pa.Table:
    """The edge ends of group g of ``groups``: a vertex's ends all in one group, its cluster's too."""
    if groups == 1:
        return ends
    with np.errstate(over="ignore"):
        hashed = (ends.column("cu").to_numpy().astype(np.uint64) ^ np.uint64(seed % 2**64)) \
            * np.uint64(0x9E3779B97F4A7C15)
    return ends.filter(pa.array((hashed >> np.uint64(32)) % np.uint64(groups) == np.uint64(g)))


def _refine_group(rows: pa.Table, sizes, limit, target, rounds: int, min_moves: int, seed: int, path: str):
    """One group's band refined: its moves ``(vid, part)`` go to the Parquet file ``path``; yields
    the greedy moves per round ``(ROUNDS, round, moves)`` and the cut weight each FM pass removed
    ``(GAINS, pass, weight)``.

    A module-level function, so that a task's closure names it (cloudpickle ships it by
    reference) instead of carrying the numba kernels it calls: a kernel shipped by value is
    rebuilt in the worker without its on-disk cache and compiled again by every ingest (about
    28 s of the refine task on a 200K-edge road grid at load 11)."""
    u, v = rows.column("u").to_numpy(), rows.column("v").to_numpy()
    order = np.lexsort((v, u))
    u, v = u[order], v[order]
    pu, pv = rows.column("pu").to_numpy()[order], rows.column("pv").to_numpy()[order]
    weight = rows.column("w").to_numpy()[order].astype(np.float64)
    ids, first = np.unique(u, return_index=True)
    indptr = np.r_[first, u.size].astype(np.int64)
    at = np.minimum(np.searchsorted(ids, v), ids.size - 1)
    neighbour = np.where(ids[at] == v, at, -1).astype(np.int64)
    start = pu[first].astype(np.int64)
    part = start.copy()
    fixed, counts = pv.astype(np.int64), np.asarray(sizes, np.int64).copy()
    moves = refine_rounds(indptr, neighbour, fixed, weight, part, ids, counts, limit, target, rounds,
                          min_moves, seed)
    # FM fills a partition only up to its target: no losing move refills an over-full one.
    gains = fm_passes(indptr, neighbour, fixed, weight, part, ids, counts, target, FM_PASSES, FM_PATIENCE, seed)
    changed = np.flatnonzero(part != start)
    files.put_table(*layout.filesystem(path), pa.table({"vid": ids[changed].astype(np.int64),
                                                        "part": part[changed].astype(np.int32)}))
    yield pa.RecordBatch.from_pydict({"kind": np.full(moves.size, _ROUNDS, np.int32),
                                      "a": np.arange(moves.size, dtype=np.int64), "b": moves})
    yield pa.RecordBatch.from_pydict({"kind": np.full(gains.size, _GAINS, np.int32),
                                      "a": np.arange(gains.size, dtype=np.int64), "b": gains.astype(np.int64)})


def refine_boundary(labelled, clusters, sizes: np.ndarray, k: int, rounds: int, min_moves: int, seed: int,
                    capacity_slack: float, held, report: dict | None = None, step=None):
    """The moves that refine a partition in the band, as ``(vid, part)``: each moved vertex and its
    new partition (a frame of the refinement tasks' own Parquet files, read by
    :func:`gofs.partition.multilevel._projected_labels`'s tasks).

    ``labelled`` ``(a, b, w, ca, cb)``: each undirected edge (repeats may stay apart: their
    weights add up), no self-loops, with both ends' clusters (each end's first-level cluster,
    whose vertices all share a partition; the ends themselves for a band of just the boundary
    vertices); ``clusters`` ``(vid, part, boundary)``: each cluster's partition and whether it
    is in the band (it holds a cut edge, or lies inside a coarser one that does); both frames
    read Parquet files only (:func:`_band` reads them in its tasks); ``sizes``: the
    vertices the partition puts in each part; ``held``
    (:class:`gofs.spark_jobs.ScratchFrames`) keeps the intermediate frames. Partitions end with at
    most ``(1 + capacity_slack) n / k`` vertices, as far as their boundary vertices allow.
    ``report`` receives ``moves`` (greedy moves per round, summed over the tasks), ``fm_gains``
    (cut weight removed per FM pass, summed), ``band`` (edge ends sent to the tasks) and
    ``start_balance``. ``step`` (:meth:`gofs.spark_jobs.JobProfile.step`), if given, times and counts
    the band's selection and its refinement.
    """
    report = {} if report is None else report
    sizes = np.asarray(sizes, np.int64)
    n = int(sizes.sum())
    report["start_balance"] = float(sizes.max() * k / n) if n else 1.0
    capacity = max(math.ceil(n / k), math.floor((1 + capacity_slack) * n / k))
    step = step or (lambda name: contextlib.nullcontext())
    spark = labelled.sparkSession
    directory = held.directory()
    fs, root = layout.filesystem(directory)
    for kind in ("band", "moves"):
        fs.create_dir(layout.join(root, kind), recursive=True)     # read back even if no task writes there
    with step("band"):
        written = _band(labelled, clusters, layout.join(directory, "band")).collect()
        report["band"] = sum(rows for _, rows in written)
    groups = max(1, math.ceil(report["band"] / ROWS_PER_TASK))
    band_files = sorted(path for path, rows in written if rows)
    with step("refine tasks"):
        task = functools.partial(_refine_task, band_files, sizes, capacity, groups, rounds, min_moves, seed,
                                 layout.join(directory, "moves"))
        counted = spark.range(0, groups, 1, groups).mapInArrow(forgets_zip_importers(task), _RESULT).collect()
    per_round, per_pass = np.zeros(rounds, np.int64), np.zeros(FM_PASSES, np.int64)
    ran = passes = 0
    for kind, r, count in counted:
        if kind == _ROUNDS:
            per_round[r] += count
            ran = max(ran, r + 1)
        else:
            per_pass[r] += count
            passes = max(passes, r + 1)
    report["moves"], report["fm_gains"] = per_round[:ran].tolist(), per_pass[:passes].tolist()
    return spark.read.schema(_MOVES_SCHEMA).parquet(layout.join(directory, "moves"))


def _band(labelled, clusters, directory: str):
    """The band's edge ends ``(u, v, pu, pv, w, cu)``: each end of a labelled edge whose cluster
    is in the band, with both ends' partitions, as one Parquet file per task under ``directory``;
    a frame of each file's ``(path, rows)``. The tasks read the edges' files and the clusters'
    table themselves, and the refinement's tasks read theirs (no row passes through Spark): two
    joins with the clusters, an explode of both ends and a filter in Spark cost ~7 JVM CPU-s on
    the 5.6M road's edges, writing the ends through Spark and reading them back ~1.5 at 1M."""
    task = functools.partial(_band_ends, sorted(clusters.inputFiles()), directory)
    return over_files(labelled.sparkSession, sorted(labelled.inputFiles()), task, "path string, rows long")


def _band_ends(cluster_files: list, directory: str, paths: list):
    """Task: the band's edge ends of the labelled edge files ``paths``, given every cluster's
    ``(vid, part, boundary)`` in ``cluster_files``, written to a file of the task's own under
    ``directory``; yields its ``(path, rows)``."""
    clusters = pa.concat_tables([files.read_columns(*layout.filesystem(path), ["vid", "part", "boundary"])
                                for path in cluster_files])
    ids = clusters.column("vid").to_numpy()
    order = np.argsort(ids, kind="stable")
    ids = ids[order]
    part = clusters.column("part").to_numpy()[order].astype(np.int32)
    in_band = clusters.column("boundary").to_numpy(zero_copy_only=False)[order].astype(bool)
    ends = []
    for path in paths:
        fs, where = layout.filesystem(path)
        with fs.open_input_file(where) as file:
            for rows in pq.ParquetFile(file).iter_batches(columns=["a", "b", "w", "ca", "cb"]):
                a, b, w, ca, cb = (rows.column(i).to_numpy() for i in range(5))
                at_a, at_b = np.searchsorted(ids, ca), np.searchsorted(ids, cb)
                for u, v, at_u, at_v, cu in ((a, b, at_a, at_b, ca), (b, a, at_b, at_a, cb)):
                    keep = in_band[at_u]
                    ends.append(pa.RecordBatch.from_pydict({
                        "u": u[keep], "v": v[keep], "pu": part[at_u[keep]], "pv": part[at_v[keep]],
                        "w": w[keep], "cu": cu[keep]}, schema=_ENDS_SCHEMA))
    table = pa.Table.from_batches(ends, _ENDS_SCHEMA)
    path = layout.join(directory, f"part-{uuid.uuid4().hex}.parquet")
    files.put_table(*layout.filesystem(path), table)
    yield pa.RecordBatch.from_pydict({"path": [path], "rows": [table.num_rows]})


_ENDS_SCHEMA = pa.schema([("u", pa.int64()), ("v", pa.int64()), ("pu", pa.int32()), ("pv", pa.int32()),
                          ("w", pa.int64()), ("cu", pa.int64())])
