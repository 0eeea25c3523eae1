"""Partitioners: output contract, determinism, and cut quality against the hash baseline."""
import numpy as np
import pandas as pd
import pytest

from sparkshim.compat import release_local_checkpoint
from gofs.partition import PARTITIONERS, balance, edge_cut, partition
from gofs.partition.hashing import hash_partition
from gofs.partition.metis import metis_partition
from gofs.partition.propagation import spark_label_propagation, spark_lp_partition


def grid(side, drop=0.0, seed=0):
    """A side x side grid graph with a random fraction of its edges dropped."""
    idx = np.arange(side * side).reshape(side, side)
    src = np.concatenate([idx[:, :-1].ravel(), idx[:-1, :].ravel()])
    dst = np.concatenate([idx[:, 1:].ravel(), idx[1:, :].ravel()])
    keep = np.random.default_rng(seed).random(src.size) >= drop
    return side * side, src[keep], dst[keep]


@pytest.fixture(scope="module")
def big_grid():
    return grid(300, drop=0.1)


def assert_valid(parts, num_vertices, k):
    assert parts.dtype == np.int32
    assert parts.shape == (num_vertices,)
    assert parts.min() >= 0 and parts.max() < k


@pytest.mark.parametrize("method", ["metis", "hash"])
def test_driver_partitioners_are_valid_and_deterministic(big_grid, method):
    n, src, dst = big_grid
    parts = partition(method, n, src, dst, 8, seed=3)
    assert_valid(parts, n, 8)
    np.testing.assert_array_equal(parts, partition(method, n, src, dst, 8, seed=3))


def test_metis_is_balanced_and_cuts_a_tenth_of_hash(big_grid):
    n, src, dst = big_grid
    metis = metis_partition(n, src, dst, 8)
    assert balance(metis, 8) <= 1.1
    assert edge_cut(metis, src, dst) <= edge_cut(hash_partition(n, src, dst, 8), src, dst) / 10


def test_hash_is_roughly_uniform_and_seeded(big_grid):
    n, src, dst = big_grid
    parts = hash_partition(n, src, dst, 8)
    assert balance(parts, 8) < 1.02
    assert (parts != hash_partition(n, src, dst, 8, seed=1)).mean() > 0.8


def test_messy_edges_and_isolated_vertices():
    """Self-loops, duplicates, both directions, and vertices 30..39 with no edges at all."""
    n, src, dst = grid(5)
    src = np.concatenate([src, dst, src, [3, 7], np.arange(25, 30)])
    dst = np.concatenate([dst, src[:dst.size], dst, [3, 7], np.arange(26, 31)])
    for method in ("metis", "hash"):
        parts = partition(method, 40, src, dst, 4)
        assert_valid(parts, 40, 4)
    assert balance(partition("metis", 40, src, dst, 4), 4) <= 1.1


def test_edgeless_graph():
    parts = metis_partition(10, np.array([], np.int64), np.array([], np.int64), 3)
    assert_valid(parts, 10, 3)
    assert np.bincount(parts).max() <= 4


def test_more_partitions_than_vertices():
    src, dst = np.array([0, 1]), np.array([1, 2])
    np.testing.assert_array_equal(metis_partition(3, src, dst, 5), [0, 1, 2])
    assert_valid(hash_partition(3, src, dst, 5), 3, 5)


@pytest.mark.parametrize("method", PARTITIONERS)
def test_one_partition_is_all_zeros(method):
    n, src, dst = grid(4)
    np.testing.assert_array_equal(partition(method, n, src, dst, 1), np.zeros(n, np.int32))


def test_dispatcher_errors():
    n, src, dst = grid(3)
    with pytest.raises(ValueError, match="metis, hash, spark-lp"):
        partition("kahip", n, src, dst, 2)
    with pytest.raises(ValueError, match=">= 1"):
        partition("hash", n, src, dst, 0)
    with pytest.raises(ValueError, match=r"\[0, 9\)"):
        partition("metis", n, src, dst + 1, 2)
    with pytest.raises(ValueError, match="spark=<SparkSession>"):
        partition("spark-lp", n, src, dst, 2)


def test_edge_cut_and_balance():
    parts = np.array([0, 0, 1, 1], np.int32)
    assert edge_cut(parts, [0, 1, 2, 3, 3, 0], [1, 2, 3, 0, 3, 2]) == 3
    assert balance(parts, 2) == 1.0
    assert balance(parts, 4) == 2.0


def test_spark_lp_cuts_far_less_than_hash_within_capacity(spark):
    n, src, dst = grid(40, drop=0.1)
    lonely = np.arange(n, n + 20)  # vertices with no edges keep their hash partition
    hashed = hash_partition(n + 20, src, dst, 4)
    parts = spark_lp_partition(n + 20, src, dst, 4, spark=spark, iterations=5)
    assert_valid(parts, n + 20, 4)
    np.testing.assert_array_equal(parts[lonely], hashed[lonely])
    assert edge_cut(parts, src, dst) < 0.6 * edge_cut(hashed, src, dst)
    assert balance(parts, 4) <= 1.05 + 0.01


def test_move_plan_pushes_out_only_the_overflow_and_prefers_wanted_moves():
    from gofs.partition.propagation import _plan_moves

    nothing = np.zeros((3, 3), np.int64)
    pushed = np.array([[0, 5, 5], [0, 0, 0], [0, 0, 0]])
    moves = _plan_moves(nothing, pushed, np.array([10, 4, 4]), 7)
    assert moves[0].sum() == 3 and moves[1:].sum() == 0
    wanted = np.array([[0, 2, 0], [1, 0, 0], [0, 0, 0]])
    moves = _plan_moves(wanted, pushed, np.array([10, 4, 4]), 7)
    assert moves[0, 1] >= 2 and moves[0].sum() == 3      # the wanted ones first, then one push
    assert moves[1, 0] == 0                               # it would cost a push more than it gains
    nobody_over = _plan_moves(wanted, pushed, np.array([6, 6, 6]), 7)
    np.testing.assert_array_equal(nobody_over, wanted)           # every wanted move, no push
    np.testing.assert_array_equal(_plan_moves(nothing, nothing, np.array([10, 4, 4]), 7), nothing)


def test_refinement_pushes_an_overfull_start_down_to_capacity(spark):
    """A start with 40% of a grid in one of 3 column bands: the wanted moves alone would leave it
    over capacity (the bands are a local optimum); the boundary columns are pushed out instead."""
    from gofs.partition.propagation import refine_partition

    side = 30
    n, src, dst = grid(side)
    column = np.arange(n) % side
    start = np.select([column < 12, column < 21], [0, 1], 2)
    pairs = spark.createDataFrame(pd.DataFrame({"a": src, "b": dst}))
    initial = spark.createDataFrame(pd.DataFrame({"vid": np.arange(n), "part": start}))
    report = {}
    labels = refine_partition(spark, pairs, initial, 3, iterations=4, report=report)
    try:
        parts = labels.toPandas().sort_values("vid")["part"].to_numpy(np.int32)
    finally:
        release_local_checkpoint(labels)
    assert report["start_balance"] == pytest.approx(1.2)
    assert np.bincount(parts, minlength=3).max() == 315                 # floor(1.05 * 900 / 3), not above
    assert edge_cut(parts, src, dst) <= 1.5 * edge_cut(start, src, dst)


def test_spark_lp_starts_from_hash_and_ignores_data_layout(spark):
    """Any long ids work; the result depends on the seed only, not on how Spark splits the rows."""
    n, src, dst = grid(12, drop=0.1)
    edges = spark.createDataFrame(pd.DataFrame({"src": src, "dst": dst}))
    labels = spark_label_propagation(spark, edges, 3, iterations=0)
    start = labels.toPandas().sort_values("vid")
    release_local_checkpoint(labels)
    np.testing.assert_array_equal(start["part"], hash_partition(n, src, dst, 3))

    far = pd.DataFrame({"src": src * 1000 + 10**12, "dst": dst * 1000 + 10**12})
    runs = [spark_label_propagation(spark, spark.createDataFrame(far).repartition(slices), 3,
                                    iterations=2, seed=7).toPandas().sort_values("vid", ignore_index=True)
            for slices in (1, 3)]
    pd.testing.assert_frame_equal(runs[0], runs[1])
    assert sorted(runs[0]["vid"]) == sorted(np.arange(n) * 1000 + 10**12)
    assert runs[0]["part"].between(0, 2).all()


def _held(spark):
    """Cached RDDs (local checkpoints included) and files under the checkpoint directory."""
    import os

    from sparkshim.compat import persistent_rdd_ids

    directory = spark.sparkContext.getCheckpointDir().removeprefix("file:")
    files = {os.path.join(d, f) for d, _, names in os.walk(directory) for f in names}
    return persistent_rdd_ids(spark), files


def _new(spark, before):
    """What a run left behind: cached RDDs and checkpoint files that were not there before it."""
    rdds, files = _held(spark)
    return rdds - before[0], files - before[1]


def test_spark_lp_releases_every_checkpoint_on_success_and_failure(spark, monkeypatch):
    import gofs.partition.propagation as partitioners

    n, src, dst = grid(8, drop=0.1)
    before = _held(spark)
    parts = spark_lp_partition(n, src, dst, 3, spark=spark, iterations=2)
    assert_valid(parts, n, 3)
    assert _new(spark, before) == (set(), set())

    calls = []
    plan = partitioners._plan_moves

    def fail_in_second_iteration(*args):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("planner down")
        return plan(*args)

    monkeypatch.setattr(partitioners, "_plan_moves", fail_in_second_iteration)
    with pytest.raises(RuntimeError, match="planner down"):
        spark_lp_partition(n, src, dst, 3, spark=spark, iterations=2)
    assert len(calls) == 2 and _new(spark, before) == (set(), set())


def test_checkpoint_directory_is_ours_only_when_we_made_it(tmp_path):
    import os

    from sparkshim.checkpoints import ensure_checkpoint_dir, remove_created

    class Context:
        def __init__(self, directory=None):
            self.directory = directory

        def getCheckpointDir(self):
            return self.directory

        def setCheckpointDir(self, directory):
            self.directory = directory

    users = Context(str(tmp_path))
    assert ensure_checkpoint_dir(users) == str(tmp_path)
    fresh = Context()
    made = ensure_checkpoint_dir(fresh)
    assert os.path.isdir(made) and made != str(tmp_path)
    remove_created()
    assert not os.path.exists(made) and tmp_path.is_dir()


@pytest.mark.parametrize("ids", ["row-major", "shuffled"])
def test_multilevel_coarsens_below_the_budget_and_cuts_close_to_metis(spark, ids):
    """Row-major grid ids are local: levels cluster inside id ranges (heavy-edge matching per range);
    shuffled ids are not: levels fall back to size-constrained label propagation."""
    from gofs.partition.multilevel import coarse_graph_bytes, multilevel_partition

    n, src, dst = grid(24, drop=0.1)
    if ids == "shuffled":
        relabel = np.random.default_rng(5).permutation(n)
        src, dst = relabel[src], relabel[dst]
    budget = coarse_graph_bytes(150, 200)          # bytes: the budget is a memory size
    report = {}
    stop = 0.99 if ids == "shuffled" else 0.0      # any iteration moves < 99% of vertices: refinement stops after one
    before = _held(spark)
    parts = multilevel_partition(n, src, dst, 4, seed=1, spark=spark, driver_budget_bytes=budget, cluster_rounds=2,
                                 refine_iterations=3, refine_min_moves=stop, report=report)
    assert_valid(parts, n, 4)
    first, last = report["levels"][0], report["levels"][-1]
    assert len(report["levels"]) >= 2
    assert coarse_graph_bytes(last["vertices"], last["edges"]) <= budget < coarse_graph_bytes(first["vertices"],
                                                                                                first["edges"])
    assert [level["in_ranges"] for level in report["seconds"]["levels"]][0] == (ids == "row-major")
    assert len(report["refine_moves"]) == (1 if stop else 3)
    assert edge_cut(parts, src, dst) <= 1.5 * edge_cut(metis_partition(n, src, dst, 4), src, dst)
    assert balance(parts, 4) <= 1.05 + 4 / n
    assert _new(spark, before) == (set(), set())          # scratch files, checkpoints and caches all released


def test_multilevel_within_the_budget_is_metis_on_the_whole_graph_in_one_task(spark):
    """A graph that fits the METIS budget is not coarsened: one task runs METIS on it (repeated
    and reversed edges summed into weights), and its answer is the partition, unrefined."""
    from gofs.partition.metis import weighted_parts
    from gofs.partition.multilevel import multilevel_partition

    n, src, dst = grid(30, drop=0.1, seed=4)
    src, dst = np.r_[src, dst[:50], np.arange(5)], np.r_[dst, src[:50], np.arange(5)]   # repeats, loops
    report = {}
    before = _held(spark)
    parts = multilevel_partition(n, src, dst, 4, seed=3, spark=spark, report=report)
    keep = src != dst
    pair, weight = np.unique(np.c_[np.minimum(src, dst), np.maximum(src, dst)][keep], axis=0, return_counts=True)
    oracle = weighted_parts(n, pair[:, 0], pair[:, 1], weight, np.ones(n, np.int64), 4, 3, ufactor=10, tries=1)
    np.testing.assert_array_equal(parts, oracle)
    assert len(report["levels"]) == 1 and report["refine_moves"] == [] and "refine" not in report["jobs"]
    assert report["coarse_cut"] == weight[oracle[pair[:, 0]] != oracle[pair[:, 1]]].sum() > 0
    assert report["jobs"]["metis"]["jobs"] <= 5       # METIS task (shuffle, write), sizes, labels: was 2 + 13 refining
    assert balance(parts, 4) <= 1.05
    assert _new(spark, before) == (set(), set())


@pytest.mark.parametrize("rows_per_task", [1 << 21, 600])
def test_boundary_refinement_on_spark_in_one_task_or_several(spark, monkeypatch, rows_per_task):
    """From a noisy partition the boundary refinement cuts far less within the capacity, in one
    task or (a small ROWS_PER_TASK: 2 groups) in several at once, each with an even share
    of the room (many groups would leave each too little room to move much)."""
    import gofs.partition.boundary as boundary
    from gofs.spark_jobs import ScratchFrames

    monkeypatch.setattr(boundary, "ROWS_PER_TASK", rows_per_task)
    n, src, dst = grid(24, drop=0.1)
    rng = np.random.default_rng(3)
    noisy = metis_partition(n, src, dst, 4)
    flip = rng.random(n) < 0.1
    noisy[flip] = rng.integers(0, 4, flip.sum())
    a, b = np.minimum(src, dst), np.maximum(src, dst)
    in_band = np.zeros(n, bool)          # the band: the vertices with a cut edge
    in_band[a[noisy[a] != noisy[b]]] = in_band[b[noisy[a] != noisy[b]]] = True
    sizes = np.bincount(noisy, minlength=4)
    held, report = ScratchFrames(spark, "test"), {}
    try:        # each vertex its own cluster; the band's tasks read both tables' files
        labelled = held(spark.createDataFrame(pd.DataFrame({"a": a, "b": b, "w": np.ones(src.size, np.int64),
                                                            "ca": a, "cb": b})).repartition(3))
        clusters = held(spark.createDataFrame(pd.DataFrame({"vid": np.arange(n), "part": noisy.astype(np.int32),
                                                            "boundary": in_band})))
        moves = boundary.refine_boundary(labelled, clusters, sizes, 4, 4, 0, 0, 0.05, held, report).toPandas()
        assert report["band"] == in_band[a].sum() + in_band[b].sum()        # each edge end in the band, once
    finally:
        held.remove()
    assert moves["vid"].is_unique and in_band[moves["vid"]].all()        # band vertices only, each once
    parts = noisy.copy()
    parts[moves["vid"].to_numpy()] = moves["part"].to_numpy()
    assert (parts[moves["vid"].to_numpy()] != noisy[moves["vid"].to_numpy()]).all()
    capacity = max(-(-n // 4), int(1.05 * n / 4))
    assert np.bincount(parts, minlength=4).max() <= max(capacity, sizes.max())
    assert edge_cut(parts, src, dst) < 0.7 * edge_cut(noisy, src, dst)
    assert len(report["moves"]) == 4 and report["moves"][0] > 0


def test_multilevel_level_that_stalls_in_ranges_falls_back_to_label_propagation(spark, monkeypatch):
    """A level that stalls in ranges is retried in the widest ranges (one here: 256 vertices fit
    one task), and only then taken by label propagation."""
    import gofs.partition.multilevel as multilevel

    def no_clusters(ids, vw, heads, tails, w, cluster_weight, seed):
        return ids

    monkeypatch.setattr(multilevel, "_range_clusters", no_clusters)      # every in-range level stalls
    n, src, dst = grid(16)
    report = {}
    parts = multilevel.multilevel_partition(n, src, dst, 2, seed=1, spark=spark, cluster_rounds=1,
                                            driver_budget_bytes=multilevel.coarse_graph_bytes(200, 400),
                                            refine_iterations=0, report=report)
    assert_valid(parts, n, 2)
    levels = report["seconds"]["levels"]
    assert [(level.get("stalled", False), level["ranges"]) for level in levels[:3]] == [(True, 4), (True, 1), (False, None)]
    assert "contract" in levels[2]
    assert report["levels"][1]["vertices"] < 0.95 * n


def test_multilevel_argument_errors(spark):
    from gofs.partition.multilevel import multilevel_labels

    n, src, dst = grid(4)
    with pytest.raises(ValueError, match="spark=<SparkSession>"):
        partition("multilevel", n, src, dst, 2)
    with pytest.raises(ValueError, match="driver_budget_bytes must be >= 400"):
        multilevel_labels(spark, None, 4, 16, driver_budget_bytes=100)
    with pytest.raises(ValueError, match="refine_min_moves must be a share"):
        multilevel_labels(spark, None, 4, 16, refine_min_moves=1.5)


@pytest.mark.parametrize("seed, k", [(0, 5), (7, 3), (-3, 8)])
def test_hash_labels_on_spark_equal_the_numpy_hash(spark, seed, k):
    from gofs.partition.hashing import hash_labels

    n = 2000
    labels = hash_labels(spark.range(n).withColumnRenamed("id", "vid"), k, seed).toPandas().sort_values("vid")
    none = np.array([], dtype=np.int64)
    np.testing.assert_array_equal(labels["part"].to_numpy(), hash_partition(n, none, none, k, seed))


@pytest.mark.parametrize("dense", [False, True])
def test_level_in_ranges_equals_the_contraction_of_its_clusters(spark, dense):
    """One in-range level (clusters, their weights, the pairs labelled with both ends' clusters,
    edges between ranges included, and the coarse pairs its tasks contract) against the same
    contraction done in numpy; repeated input pairs are summed. Dense: unit weights on every id
    of the span, which the tasks list themselves (no vertex rows), their pairs sent by the pairs
    pass as exchange files to the narrowest ranges, taken two at a time by each range's task."""
    import gofs.partition.multilevel as multilevel
    from gofs.spark_jobs import ScratchFrames

    n, src, dst = grid(20, drop=0.1)
    a, b = np.minimum(src, dst), np.maximum(src, dst)
    weights_in = np.arange(1, a.size + 1, dtype=np.int64)
    repeat = np.arange(0, a.size, 7)                      # every 7th pair once more, inner and crossing ones
    pairs = spark.createDataFrame(pd.DataFrame({"a": np.r_[a, a[repeat]], "b": np.r_[b, b[repeat]],
                                                "w": np.r_[weights_in, 1000 + repeat]}))
    summed = weights_in.copy()
    summed[repeat] += 1000 + repeat
    vw = np.ones(n, np.int64) if dense else np.random.default_rng(2).integers(1, 4, n)
    weights = None if dense else spark.createDataFrame(pd.DataFrame({"vid": np.arange(n), "vw": vw}))
    held = ScratchFrames(spark, "test")
    try:
        exchange, width, count = None, 50, 8
        if dense:
            exchange, summary = multilevel._pairs_pass(pairs, {"vertices": n, "low": 0, "high": n - 1, "weight": n},
                                                       held)
            assert summary["weight"] == summed.sum() and abs(summary["edges"] - a.size) <= 0.05 * a.size
            narrow = exchange["width"]
            assert summary["inside"][exchange["count"]] == summed[a // narrow == b // narrow].sum()
            width, count = 2 * exchange["width"], -(-n // (2 * exchange["width"]))
        ranges = {"low": 0, "high": n - 1, "width": width, "count": count, "mean_weight": vw.mean(), "dense": dense}
        span = {"vertices": n, "low": 0, "high": n - 1, "weight": int(vw.sum())}
        clusters, coarse, labelled, coarse_pairs, (vertex_summary, pair_summary) = multilevel._level_in_ranges(
            pairs, weights, span, ranges, 12.0, 0, held, exchange=exchange)
        clusters, coarse, coarse_pairs = clusters.toPandas(), coarse.toPandas(), coarse_pairs.toPandas()
        labelled = labelled.toPandas().sort_values(["a", "b"])
    finally:
        held.remove()
    cluster = np.full(n, -1)
    cluster[clusters["vid"].to_numpy()] = clusters["c"].to_numpy()
    assert (cluster >= 0).all() and (cluster // width == np.arange(n) // width).all()    # every vertex, in its range
    assert (cluster[cluster] == cluster).all()                                     # c: an id of the cluster itself
    weight = np.bincount(cluster, weights=vw, minlength=n)
    assert weight.max() <= 12 and np.unique(cluster).size < n / 2
    assert sorted(zip(coarse["vid"], coarse["vw"])) == [(c, weight[c]) for c in np.unique(cluster)]
    order = np.lexsort((b, a))
    np.testing.assert_array_equal(labelled[["a", "b", "w"]].to_numpy(),
                                  np.c_[a[order], b[order], summed[order]])
    np.testing.assert_array_equal(labelled["ca"].to_numpy(), cluster[a[order]])
    np.testing.assert_array_equal(labelled["cb"].to_numpy(), cluster[b[order]])
    ca, cb = cluster[a], cluster[b]
    apart = ca != cb
    oracle = pd.DataFrame({"a": np.minimum(ca, cb)[apart], "b": np.maximum(ca, cb)[apart],
                           "w": summed[apart]}).groupby(["a", "b"], as_index=False)["w"].sum()
    from_tasks = coarse_pairs.sort_values(["a", "b"], ignore_index=True)     # each coarse pair once
    np.testing.assert_array_equal(from_tasks[["a", "b", "w"]].to_numpy(), oracle[["a", "b", "w"]].to_numpy())
    assert vertex_summary == {**span, "vertices": np.unique(cluster).size}     # the level's span kept
    counts = multilevel._range_counts(span, spark)
    inside = {c: oracle["w"][oracle["a"] // width == oracle["b"] // width].sum() for c, width in counts.items()}
    assert pair_summary == {"edges": len(oracle), "weight": summed[apart].sum(), "inside": inside, "widths": counts}


@pytest.mark.parametrize("dense", [False, True])
def test_label_propagation_level_equals_the_contraction_of_its_clusters(spark, dense):
    """One label-propagation level on ids without locality (a shuffled grid): every cluster within
    the bound (its room shared by the blocks moving at once), far fewer clusters than vertices,
    and the cluster weights, labelled pairs and coarse pairs its tasks contract equal the same
    contraction in numpy; repeated input pairs are summed. Dense: unit weights, the pairs taken
    from the multilevel pairs pass's exchange files; else sent to the blocks by the level itself."""
    import gofs.partition.multilevel as multilevel
    from gofs.partition.propagation import cluster_level
    from gofs.spark_jobs import ScratchFrames

    n, src, dst = grid(20, drop=0.1)
    relabel = np.random.default_rng(7).permutation(n)
    a, b = np.minimum(relabel[src], relabel[dst]), np.maximum(relabel[src], relabel[dst])
    repeat = np.arange(0, a.size, 5)
    weights_in = np.r_[np.arange(1, a.size + 1), np.full(repeat.size, 3)].astype(np.int64)
    pairs = spark.createDataFrame(pd.DataFrame({"a": np.r_[a, a[repeat]], "b": np.r_[b, b[repeat]], "w": weights_in}))
    summed = weights_in[:a.size].copy()
    summed[repeat] += 3
    vw = np.ones(n, np.int64) if dense else np.random.default_rng(2).integers(1, 4, n)
    weights = spark.createDataFrame(pd.DataFrame({"vid": np.arange(n), "vw": vw}))
    vertices = {"vertices": n, "low": 0, "high": n - 1, "weight": int(vw.sum())}
    bound = 12
    held = ScratchFrames(spark, "test")
    try:
        exchange = multilevel._pairs_pass(pairs, vertices, held)[0] if dense else None
        clusters, coarse, labelled, coarse_pairs = cluster_level(pairs, weights, vertices, a.size, bound, 3, 0, 1,
                                                                 held, True, exchange)
        clusters, coarse, coarse_pairs = clusters.toPandas(), coarse.toPandas(), coarse_pairs.toPandas()
        labelled = labelled.toPandas().sort_values(["a", "b"])
    finally:
        held.remove()
    cluster = np.full(n, -1)
    cluster[clusters["vid"].to_numpy()] = clusters["c"].to_numpy()
    assert (cluster >= 0).all() and len(clusters) == n
    weight = np.bincount(cluster, weights=vw, minlength=n)
    assert weight.max() <= bound and np.unique(cluster).size < 0.6 * n
    assert sorted(zip(coarse["vid"], coarse["vw"])) == [(c, weight[c]) for c in np.unique(cluster)]
    order = np.lexsort((b, a))
    np.testing.assert_array_equal(labelled[["a", "b", "w"]].to_numpy(), np.c_[a[order], b[order], summed[order]])
    np.testing.assert_array_equal(labelled["ca"].to_numpy(), cluster[a[order]])
    np.testing.assert_array_equal(labelled["cb"].to_numpy(), cluster[b[order]])
    ca, cb = cluster[a], cluster[b]
    apart = ca != cb
    oracle = pd.DataFrame({"a": np.minimum(ca, cb)[apart], "b": np.maximum(ca, cb)[apart],
                           "w": summed[apart]}).groupby(["a", "b"], as_index=False)["w"].sum()
    assert (coarse_pairs["a"] < coarse_pairs["b"]).all()
    from_tasks = coarse_pairs.groupby(["a", "b"], as_index=False)["w"].sum()     # blocks' pairs may repeat
    np.testing.assert_array_equal(from_tasks[["a", "b", "w"]].to_numpy(), oracle[["a", "b", "w"]].to_numpy())


def test_id_ranges_widen_where_narrow_ones_cut_a_coarse_level():
    """The narrowest ranges that hold 80% of the weight; else the widest that fit a task (the
    5.6M road's second level: 52% inside 8 ranges, 73% inside 2, all inside 1); none for ids
    without locality (under half inside the narrowest)."""
    from gofs.partition.multilevel import _id_ranges

    vertices = {"vertices": 452_888, "low": 0, "high": 3_957_578, "weight": 3_957_579}
    widths = {8: 494_698, 4: 989_395, 2: 1_978_790, 1: 3_957_579}
    pairs = {"edges": 647_646, "weight": 1000, "inside": {8: 521, 4: 593, 2: 730, 1: 1000}, "widths": widths}
    assert _id_ranges(vertices, pairs, False)["count"] == 1
    assert _id_ranges(vertices, {**pairs, "inside": {8: 906, 4: 920, 2: 947, 1: 1000}}, False)["count"] == 8
    assert _id_ranges(vertices, {**pairs, "inside": {8: 906, 4: 920, 2: 947, 1: 1000}}, True)["count"] == 1
    assert _id_ranges(vertices, {**pairs, "inside": {8: 240, 4: 380, 2: 620, 1: 1000}}, False) is None
    crowded = {**pairs, "edges": 9 << 20}                   # 9M pairs: at least 4 ranges of 4M
    assert _id_ranges(vertices, crowded, False)["count"] == 4
    assert not _id_ranges(vertices, pairs, False)["dense"]              # a coarse level: weights summed
    dense = {**vertices, "vertices": 3_957_579}                          # every id of the span, weight 1 each
    assert _id_ranges(dense, pairs, False)["dense"]
    assert not _id_ranges({**dense, "high": 3_957_579}, pairs, False)["dense"]      # one id missing
