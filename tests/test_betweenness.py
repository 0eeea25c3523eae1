"""Betweenness centrality (MS-BC, MSL-BC) equals ``networkx.betweenness_centrality``.

The distributed program runs on stored graphs with 1, 2 and 7 partitions:
undirected and directed, weighted and not, normalized and not, with trees,
stars, cycles, several components, isolated vertices, parallel edges,
self-loops and string ids; in exact, sampled (``k``) and top-k modes. Leaf
compression and the fused one-process Brandes
(:func:`algorithms.betweenness.local_betweenness`) run on hundreds of small
random graphs (hypothesis) where a Spark run per graph would be too slow, and
the program's phase kernels against Dijkstra and full sweeps.
"""
import networkx as nx
import numpy as np
import pyarrow.compute as pc
import pytest
import scipy.sparse as sp
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy.sparse.csgraph import dijkstra

import graphs
from algorithms import brandes_kernels as kernels
from algorithms.betweenness import (ShortestPathDag, SourceOrder, empty_distances, integral_weights,
                                    local_betweenness)
from algorithms.betweenness_gathered import PILOT_SAMPLES
from algorithms.betweenness_graph import arc_graph, compressed_graph
from algorithms.betweenness_sampling import Sampling, top_k_guarantee
from algorithms.leaf_compression import strip_leaves
from goffish.cli import main
from gofs import files, layout
from gofs.errors import InputError


def forest_with_cycles():
    """Trees, a star, a cycle with trees hanging off it, a path, an edge and an isolated vertex."""
    G = nx.disjoint_union_all([nx.random_labeled_tree(25, seed=3), nx.star_graph(6), nx.cycle_graph(8),
                               nx.path_graph(5), nx.path_graph(2), nx.empty_graph(1)])
    cycle = 25 + 7
    G.add_edges_from([(cycle, 100), (100, 101), (100, 102), (cycle + 3, 103)])
    return G


def positive_integer_weights(G, seed=5):
    rng = np.random.default_rng(seed)
    for u, v in sorted(G.edges()):
        G.edges[u, v]["weight"] = int(rng.integers(1, 4))
    return G


# name: (builder, weight, normalized, partitions, partitioner, batch size)
CASES = {
    "undirected-weighted-7": (lambda: graphs.with_extras(graphs.random_graph(35, 45, seed=1)),
                              "weight", False, 7, "metis", None),
    "undirected-strings-2": (lambda: graphs.string_ids(graphs.with_extras(graphs.random_graph(50, 55, seed=4,
                                                                                              weighted=False))),
                             None, True, 2, "hash", 30),
    "directed-weighted-2": (lambda: graphs.with_extras(graphs.random_graph(40, 90, seed=2, directed=True)),
                            "weight", True, 2, "metis", None),
    "multidigraph-1": (lambda: graphs.scale_free(50, seed=3), None, False, 1, "metis", None),
    "forest-7": (forest_with_cycles, None, False, 7, "metis", None),
    "integer-weights-2": (lambda: positive_integer_weights(graphs.with_extras(graphs.random_graph(45, 50, seed=6))),
                          "weight", True, 2, "metis", None),
}
#: graphs whose hanging trees leaf compression must strip (at least this many vertices)
STRIPPED = {"forest-7": 30, "undirected-strings-2": 10, "integer-weights-2": 10}


@pytest.fixture(scope="module")
def stored(spark, tmp_path_factory):
    cache = {}
    root = tmp_path_factory.mktemp("betweenness")

    def get(name):
        if name not in cache:
            build, weight, normalized, k, partitioner, batch = CASES[name]
            G = build()
            store = graphs.ingest_nx(G, root / f"{name}.gofs", spark, k, partitioner)
            assert store.num_partitions == k
            cache[name] = (G, store)
        return cache[name]

    return get


def assert_matches(got: dict, expected: dict):
    assert set(got) == set(expected)
    worst = max((abs(got[v] - expected[v]) for v in expected), default=0.0)
    assert worst <= 1e-9, worst


@pytest.mark.parametrize("gather", [False, True], ids=["paths-across-cuts", "gathered"])
@pytest.mark.parametrize("name", list(CASES))
def test_exact_equals_networkx(stored, name, gather):
    _, weight, normalized, _, _, batch = CASES[name]
    G, store = stored(name)
    keep = name != "forest-7"                        # recompute the working arrays every superstep
    result = store.betweenness(weight=weight, normalized=normalized, batch_size=batch, keep_arrays=keep,
                               gather=gather, progress=False)
    expected = nx.betweenness_centrality(G, weight=weight, normalized=normalized)
    assert_matches(graphs.column(result, "betweenness"), expected)
    assert result.aggregated["exact"] and result.aggregated["sources"] == len(G)
    if batch:
        assert result.aggregated["batches"] == (1 if gather else -(-len(G) // batch))
    assert result.aggregated["stripped"] >= STRIPPED.get(name, 0)
    if name not in STRIPPED:
        assert result.aggregated["stripped"] == 0       # directed, or fractional weights: not compressed


def test_sampled_sources_scale_like_networkx(stored):
    """``k`` sources: the sum over exactly those sources, scaled by n / k."""
    G, store = stored("directed-weighted-2")
    k, seed = 13, 4
    result = store.betweenness(k=k, normalized=False, weight="weight", seed=seed, progress=False)
    ids = store.vertex_ids.to_pylist()
    sources = [ids[x] for x in SourceOrder(store.num_vertices, seed)(np.arange(k))]
    partial = nx.betweenness_centrality_subset(G, sources, list(G.nodes), normalized=False, weight="weight")
    assert_matches(graphs.column(result, "betweenness"), {v: b * len(G) / k for v, b in partial.items()})
    assert result.aggregated["sources"] == k and not result.aggregated["exact"]


def test_top_k_holds_its_guarantee(spark, tmp_path):
    """Top-k from sampled sources: every reported vertex's exact normalised value is at least the
    exact k-th minus the reported epsilon, which is what the sampler stopped at."""
    graph, G = graphs.road(400, seed=3)
    store = graphs.ingest_input(graph, tmp_path / "road.gofs", spark, 2)
    top, epsilon = 10, 0.15
    result = store.betweenness(top=top, epsilon=epsilon, delta=0.1, progress=False)
    rows = result.dataframe.collect()
    values = [r["betweenness"] for r in rows]
    assert len(rows) == top and values == sorted(values, reverse=True)
    exact = nx.betweenness_centrality(G)
    kth = sorted(exact.values(), reverse=True)[top - 1]
    info = result.aggregated
    assert info["stop"] in ("separated", "epsilon") and info["delta"] == 0.1 and info["sample"] == "sources"
    assert info["samples"] == info["sources"] + PILOT_SAMPLES and not info["exact"]   # the pilot's set aside
    if info["stop"] == "epsilon":
        assert info["epsilon"] <= epsilon
    assert all(exact[r["id"]] >= kth - info["epsilon"] for r in rows)


def test_check_plans_split_delta_once_over_their_checks():
    """Even or planned from the pilot, the checks' shares of ``delta`` sum to 1, each check is
    reached by exactly one batch, and the planned window starts at 85% of the predicted stop."""
    sampler = Sampling(10_000, 100, 0.01, 0.1, 200_000, 0, pilot=2, candidates=40)
    for plan in (sampler.even_plan(), sampler.planned(30_000), sampler.planned(10 ** 9)):
        assert sum(plan.shares) == pytest.approx(1.0) and plan.points[-1] == sampler.max_samples - 200
        assert list(plan.points) == sorted(set(plan.points))
        shares = [sampler.check_share(b, plan) for b in range(sampler.max_samples // 100 + 2)]
        assert [x for x in shares if x is not None] == list(plan.shares)
    planned = sampler.planned(30_000)
    assert planned.points[0] == 25_500 and planned.points[1] in (26_775, 26_776)
    assert planned.shares[0] == pytest.approx(0.9 / 8) and len(set(planned.shares)) == 2
    assert len(sampler.even_plan().points) == sampler.checks


def test_top_k_guarantee_separated_or_within():
    """Separated intervals: the reported set is the true top-k (epsilon 0); overlapping ones:
    the k-th highest upper bound minus the lowest reported lower bound."""
    mean = np.array([0.5, 0.4, 0.1, 0.05])
    assert top_k_guarantee(mean, np.full(4, 0.1), np.full(4, 0.1), 2) == (0.0, True)
    reached, separated = top_k_guarantee(mean, np.array([0.1, 0.1, 0.0, 0.0]), np.array([0.1, 0.1, 0.25, 0.0]), 2)
    assert not separated and reached == pytest.approx(0.5 - 0.3)


@settings(max_examples=30, deadline=None)
@given(st.floats(0.0, 1.0), st.integers(10, 10 ** 6), st.floats(1.0, 30.0))
@example(0.0, 10, 1.76171875)        # at mean 0 the lower root cancels to -2e-17 in floating point
def test_bernstein_bounds_solve_their_equations(mean, m, log):
    """The interval's sides solve Bernstein's equations with the variance bounded by the mean:
    ``m u^2 = 2 L (mean + 4 u / 3)`` above, ``m l^2 = 2 L (mean - 2 l / 3)`` below (clipped at 0)."""
    sampler = Sampling(100, 10, 0.01, 0.1, 1000, 0)
    below, above = (float(x[0]) for x in sampler.bounds(np.array([mean * m]), m, log))
    assert m * above ** 2 == pytest.approx(2 * log * (mean + 4 * above / 3), rel=1e-9)
    if below < mean:
        assert m * below ** 2 == pytest.approx(2 * log * (mean - 2 * below / 3), rel=1e-9, abs=1e-12)
    assert 0 <= below <= above


def _pair_dependencies(G, s, t, weight):
    """``delta_st(v)`` for every v: the share of s-t shortest paths through v (NetworkX's paths)."""
    try:
        paths = list(nx.all_shortest_paths(G, s, t, weight=weight))
    except nx.NetworkXNoPath:
        return {}
    through = {}
    for path in paths:
        for v in path[1:-1]:
            through[v] = through.get(v, 0) + 1
    return {v: c / len(paths) for v, c in through.items()}


@pytest.mark.parametrize("gather", [False, True], ids=["pairs-across-cuts", "sources-gathered"])
@pytest.mark.parametrize("name", ["undirected-weighted-7", "directed-weighted-2"])
def test_samples_score_their_dependencies(stored, name, gather):
    """With sampling capped before any stop, the estimate sums the samples drawn as the sampler
    draws them: across cuts the pairs' dependencies (paths crossing partitions included) scaled
    by n (n - 1) / samples; gathered the sources' (with replacement: a source drawn twice counts
    twice; NetworkX's subset betweenness of each, which halves undirected values) by n / samples."""
    _, weight, *_ = CASES[name]
    G, store = stored(name)
    samples, unit = 40, "sources" if gather else "pairs"
    result = store.betweenness(epsilon=1e-6, max_samples=samples, batch_size=16, normalized=False,
                               weight=weight, seed=3, gather=gather, progress=False)
    info = result.aggregated
    assert info["samples"] == samples and info["stop"] == "max_samples" and info["sample"] == unit
    ids, n = store.vertex_ids.to_pylist(), len(G)
    sampler = Sampling(n, 16, 1e-6, 0.1, samples, 3, unit=unit)
    batches = range(-(-samples // 16))
    expected = dict.fromkeys(G, 0.0)
    if gather:
        drawn = np.concatenate([sampler.sources(batch) for batch in batches])
        assert len(drawn) == samples and len(set(drawn.tolist())) < samples
        for s in drawn:
            for v, x in nx.betweenness_centrality_subset(G, [ids[s]], list(G), normalized=False,
                                                         weight=weight).items():
                expected[v] += x * n / samples
    else:
        scale = n * (n - 1) / samples * (1.0 if G.is_directed() else 0.5)
        for batch in batches:
            for s, t in zip(*sampler.pairs(batch)):
                for v, share in _pair_dependencies(G, ids[s], ids[t], weight).items():
                    expected[v] += share * scale
    assert_matches(graphs.column(result, "betweenness"), expected)


def test_cli_run_betweenness(spark, stored, tmp_path, capsys):
    G, store = stored("multidigraph-1")
    out = tmp_path / "bc.parquet"
    code = main(["run", "betweenness", store.path, "--out", str(out), "--raw", "--quiet"])
    assert code == 0 and '"exact": true' in capsys.readouterr().out
    frame = spark.read.parquet(str(out))
    assert_matches(graphs.column(frame, "betweenness"), nx.betweenness_centrality(G, normalized=False))


# --------------------------------------------------------------------------- bad parameters

@pytest.fixture(scope="module")
def weighted_store(spark, tmp_path_factory):
    G = nx.path_graph(6)
    for i, (u, v) in enumerate(G.edges()):
        G.edges[u, v]["good"] = 1.0 + i / 4
        G.edges[u, v]["negative"] = -1.0 if i == 2 else 1.0
        G.edges[u, v]["zero"] = 0.0 if i == 4 else 2.0
        G.edges[u, v]["nan"] = float("nan") if i == 1 else 2.0
        G.edges[u, v]["name"] = f"road {i}"
        if i != 3:
            G.edges[u, v]["partial"] = 1.0
    return graphs.ingest_nx(G, tmp_path_factory.mktemp("bad") / "g.gofs", spark, 2)


@pytest.mark.parametrize("kwargs, message", [
    ({"weight": "missing"}, "no edge attribute 'missing'"),
    ({"weight": "negative"}, r"negative edge weight -1.0 in 'negative' \(partition \d\)"),
    ({"weight": "zero"}, r"edge weight 0 in 'zero' \(partition \d\); betweenness needs positive weights"),
    ({"weight": "nan"}, r"'nan' has NaN values \(partition \d\)"),
    ({"weight": "partial"}, r"'partial' has missing values \(partition \d\)"),
    ({"weight": "name"}, "'name' is string, not a number"),
    ({"k": 0}, "k=0"),
    ({"k": 7}, "k=7"),
    ({"top": -1}, "top=-1"),
    ({"top": 2.5}, "top=2.5"),
    ({"batch_size": 0}, "batch_size=0"),
    ({"epsilon": 0.0}, "epsilon=0.0"),
    ({"top": 2, "delta": 1.5}, "delta=1.5"),
    ({"top": 2, "k": 3}, "exclude each other"),
    ({"top": 2, "max_samples": 0}, "max_samples=0"),
])
def test_bad_parameters_fail_before_running(weighted_store, kwargs, message):
    with pytest.raises(InputError, match=message):
        weighted_store.betweenness(progress=False, **kwargs)


def test_weight_profile_one_row_per_partition(weighted_store):
    """The weight check runs on Spark: one summary row per partition, which together describe
    the whole column (the driver never reads it)."""
    rows = weighted_store.edge_attribute_profile("good")
    assert [r["partition"] for r in rows] == list(range(weighted_store.num_partitions))
    for row in rows:                       # the same numbers as reading each partition's file here
        edges = layout.template_edges(weighted_store.root, row["partition"])
        table = files.read_columns(weighted_store.fs, edges, ["good", "mirror"])
        values = table.filter(pc.invert(table.column("mirror"))).column("good").to_numpy()
        assert float(row["min"]) == values.min() and row["fractionals"] == np.count_nonzero(values % 1)
        assert row["nulls"] == row["nans"] == 0
    assert not integral_weights(rows) and integral_weights(weighted_store.edge_attribute_profile("zero"))
    assert max(r["nans"] for r in weighted_store.edge_attribute_profile("nan")) == 1


# --------------------------------------------------------------------------- kernels, many graphs

def _arrays(G, weight=None):
    nodes = {v: i for i, v in enumerate(G.nodes)}
    edges = list(G.edges(data=True))
    src = [nodes[u] for u, _, _ in edges]
    dst = [nodes[v] for _, v, _ in edges]
    weights = None if weight is None else [d[weight] for _, _, d in edges]
    return nodes, src, dst, weights


def _check_local(G, weight=None, normalized=True, compress=True):
    nodes, src, dst, weights = _arrays(G, weight)
    got = local_betweenness(len(nodes), src, dst, weights, G.is_directed(), normalized, compress)
    expected = nx.betweenness_centrality(G, weight=weight, normalized=normalized)
    assert_matches({v: got[i] for v, i in nodes.items()}, expected)


@st.composite
def small_graphs(draw):
    """Random multigraphs (self-loops, parallel edges) with trees hanging off and paths, stars, cycles beside."""
    n = draw(st.integers(1, 12))
    pairs = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=2 * n))
    G = nx.MultiGraph()
    G.add_nodes_from(range(n))
    G.add_edges_from(pairs)
    for _ in range(draw(st.integers(0, 3))):                    # hang a tree off a vertex
        size = draw(st.integers(1, 6))
        tree = nx.relabel_nodes(nx.random_labeled_tree(size, seed=draw(st.integers(0, 99))),
                                {i: len(G) + i for i in range(size)})
        G.add_edges_from(tree.edges())
        G.add_nodes_from(tree.nodes())
        G.add_edge(draw(st.integers(0, len(G) - size - 1)), len(G) - size)
    shape = draw(st.sampled_from([None, nx.path_graph, nx.star_graph, nx.cycle_graph]))
    if shape is not None:
        G = nx.disjoint_union(G, nx.MultiGraph(shape(draw(st.integers(2, 6)))))
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 16)))
    for u, v, key in G.edges(keys=True):
        G.edges[u, v, key]["int"] = int(rng.integers(1, 4))
        G.edges[u, v, key]["real"] = float(np.round(rng.uniform(0.1, 2.0), 2))
    return G


@settings(max_examples=150, deadline=None)
@given(small_graphs(), st.booleans())
def test_leaf_compression_exact_on_random_graphs(G, normalized):
    _check_local(G, None, normalized)
    _check_local(G, "int", normalized)              # whole-number weights: compressed
    _check_local(G, "real", normalized)             # fractional weights: traversed as they are


@settings(max_examples=60, deadline=None)
@given(small_graphs(), st.booleans())
def test_directed_kernels_on_random_graphs(G, normalized):
    D = nx.MultiDiGraph(G.edges(keys=True, data=True))
    D.add_nodes_from(G.nodes)
    _check_local(D, None, normalized)
    _check_local(D, "real", normalized)


def _source_scores(G, weight=None) -> np.ndarray:
    """Per source (rows) every vertex's score ``delta_s.(v) / (n - 1)`` (the sampler's X), from
    one compiled Brandes pass per source."""
    nodes, src, dst, w = _arrays(G, weight)
    n = len(nodes)
    src, dst = np.asarray(src, np.int64), np.asarray(dst, np.int64)
    w = np.ones(len(src)) if weight is None else np.asarray(w, np.float64)
    if not G.is_directed():
        src, dst, w = np.r_[src, dst], np.r_[dst, src], np.r_[w, w]
    graph, _ = arc_graph(n, src, dst, w, False)
    scores = np.zeros((n, n))
    for s in range(n):
        kernels.brandes_sources(graph.csr.indptr, graph.csr.indices, graph.csr.data, graph.unit,
                                np.array([s]), np.ones(n), scores[s], None)
    return scores / max(n - 1, 1)


@settings(max_examples=60, deadline=None)
@given(small_graphs(), st.integers(0, 2 ** 16))
def test_brandes_squares_each_sources_dependencies(G, seed):
    """Sampling sources, the pass adds each source's dependency to ``raw`` and its square to
    ``squares`` (a source drawn twice counts twice), equal to NetworkX's subset betweenness of
    that one source (which halves undirected values). Hop counts (the breadth-first layers) and
    lengths (Dijkstra) both."""
    D = nx.MultiDiGraph(G.edges(keys=True, data=True))
    D.add_nodes_from(G.nodes)
    for weight in (None, "real"):
        nodes, src, dst, w = _arrays(D, weight)
        n = len(nodes)
        if n < 2:
            return
        w = np.ones(len(src)) if weight is None else np.asarray(w, np.float64)
        graph, _ = arc_graph(n, np.asarray(src, np.int64), np.asarray(dst, np.int64), w, False)
        assert graph.unit or weight is not None                 # hop counts take the breadth-first path
        drawn = np.random.default_rng(seed).integers(0, n, 6)
        raw, squares = np.zeros(n), np.zeros(n)
        kernels.brandes_sources(graph.csr.indptr, graph.csr.indices, graph.csr.data, graph.unit, drawn, np.ones(n),
                                raw, squares)
        ids = list(nodes)
        per_source = {s: nx.betweenness_centrality_subset(D, [ids[s]], ids, normalized=False, weight=weight)
                      for s in set(drawn.tolist())}
        expected = np.array([[per_source[s][v] for v in ids] for s in drawn])
        np.testing.assert_allclose(raw, expected.sum(0), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(squares, (expected ** 2).sum(0), rtol=1e-12, atol=1e-12)


def test_source_intervals_hold_with_probability_delta():
    """The sampler's guarantee for sources, by simulation: on a cycle with a two-vertex tail,
    whose far end alone gives its neighbour a dependency near 1 (every other source ~1 / n),
    ``m`` sources drawn 400 times, every vertex's interval (``delta`` split over the vertices)
    must hold together in at least ``1 - delta`` of the draws. A bound that sees only the
    sample variance (no range term) fails whenever the tail's end is not drawn, in ~40% of
    the draws (measured: 39%)."""
    G = nx.cycle_graph(30)
    G.add_edges_from([(0, 30), (30, 31)])
    scores = _source_scores(G)
    n, m, delta = len(G), 30, 0.2
    truth = scores.mean(axis=0)
    sampler = Sampling(n, m, 0.01, delta, m, 0, unit="sources")
    rng = np.random.default_rng(11)
    failed = 0
    for _ in range(400):
        drawn = scores[rng.integers(0, n, m)]
        total, squares = drawn.sum(0), (drawn ** 2).sum(0)
        below, above = sampler.bounds(total, m, sampler.log_terms(None, 1.0), squares)
        mean = total / m
        failed += bool(((truth < mean - below) | (truth > mean + above)).any())
        no_range = np.sqrt(2 * np.maximum(squares - total * mean, 0) / (m - 1) * sampler.log_term / m)
        assert np.all(above >= no_range)
    assert failed <= delta * 400
    drawn = scores[np.r_[np.zeros(m - 1, int), 31]]                 # the tail's end drawn once
    below, above = sampler.bounds(drawn.sum(0), m, 3.0, (drawn ** 2).sum(0))
    variance = drawn.var(axis=0, ddof=1)
    wide = 3.0 + np.log(2)
    np.testing.assert_allclose(above, np.sqrt(2 * variance * wide / m) + 7 * wide / (3 * (m - 1)), rtol=1e-6)
    np.testing.assert_allclose(below, np.minimum(above, drawn.mean(0)), rtol=1e-6)


@settings(max_examples=40, deadline=None)
@given(small_graphs(), st.floats(1e-3, 1e3), st.booleans())
def test_levels_over_wide_length_ranges(G, scale, normalized):
    """Lengths spanning many orders of magnitude: the distance order and the exact DAG test
    still give NetworkX's values."""
    for u, v, key in G.edges(keys=True):
        G.edges[u, v, key]["wide"] = G.edges[u, v, key]["real"] ** 3 * scale
    _check_local(G, "wide", normalized)


def _random_local_graph(rng, n, m, lengths, directed=False):
    """A :class:`LocalGraph` on ``m`` random edges (both directions unless ``directed``), parallel
    edges at their shortest length, with ``lengths`` "hops", "whole" or "real"."""
    u, v = rng.integers(0, n, m), rng.integers(0, n, m)
    w = {"hops": np.ones(m), "whole": rng.integers(1, 4, m).astype(float), "real": rng.uniform(0.1, 2.0, m)}[lengths]
    rows, cols, w = (u, v, w) if directed else (np.r_[u, v], np.r_[v, u], np.r_[w, w])
    pairs = {}
    for a, b, x in zip(rows, cols, w):
        if a != b:
            pairs[(a, b)] = min(x, pairs.get((a, b), np.inf))
    src, dst = (np.array([p[i] for p in pairs], dtype=np.int64) for i in (0, 1))
    return compressed_graph(n, src, dst, np.array(list(pairs.values()), dtype=float), False)


def _seeded_dijkstra(graph, batch, v, col, d):
    """The oracle: scipy's Dijkstra from one virtual vertex per column, joined to the column's
    seeds by arcs of the seeds' distances (so lengths add up in the same order)."""
    n = graph.n
    coo = graph.csr.tocoo()
    rows, cols = np.r_[coo.row, n + col], np.r_[coo.col, v]
    keep = np.r_[np.ones(coo.nnz, bool), np.ones(len(v), bool)]
    lengths = np.r_[coo.data, d]
    first = {}
    for k in range(len(v)):                 # parallel seeds: the shortest, as the search keeps
        key = (col[k], v[k])
        if key in first and lengths[coo.nnz + first[key]] <= d[k]:
            keep[coo.nnz + k] = False
        else:
            if key in first:
                keep[coo.nnz + first[key]] = False
            first[key] = k
    augmented = sp.csr_matrix((lengths[keep] + 0.0, (rows[keep], cols[keep])), shape=(n + batch, n + batch))
    zero = augmented.data == 0              # scipy drops explicit zeros: seeds at 0 use a tiny stand-in
    augmented.data[zero] = np.finfo(float).tiny
    found = dijkstra(augmented, directed=True, indices=n + np.arange(batch))[:, :n].T
    return np.where(found < 1e-300, 0.0, found)


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 30), st.integers(0, 60), st.integers(1, 5), st.integers(0, 2 ** 16),
       st.sampled_from(["hops", "whole", "real"]), st.booleans())
def test_lowering_equals_dijkstra_from_all_seeds(n, m, batch, seed, lengths, directed):
    """Seeds arriving later (paths re-entering a sub-graph) lower distances exactly as a Dijkstra
    from all seeds would, and the mask it returns is the entries that dropped."""
    rng = np.random.default_rng(seed)
    graph = _random_local_graph(rng, n, m, lengths, directed)

    def seeds(k):
        d = rng.integers(0, 6, k).astype(float) if lengths != "real" else rng.uniform(0, 6, k)
        return rng.integers(0, n, k), rng.integers(0, batch, k), d

    first, later = seeds(int(rng.integers(1, 4))), seeds(int(rng.integers(1, 6)))
    dist = empty_distances(n, batch)
    assert np.array_equal(graph.lower(dist, *first), np.isfinite(dist))
    assert np.array_equal(dist, _seeded_dijkstra(graph, batch, *first))
    before = dist.copy()
    dropped = graph.lower(dist, *later)
    expected = _seeded_dijkstra(graph, batch, *(np.r_[a, b] for a, b in zip(first, later)))
    assert np.array_equal(dist, expected)
    assert np.array_equal(dropped, expected < before)


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 40), st.integers(1, 80), st.integers(1, 9), st.integers(0, 2 ** 16), st.booleans())
def test_increments_sweep_like_full_sweeps(n, m, batch, seed, weighted):
    """Sweeping an increment only from (or up to) where it enters gives what a sweep over every
    vertex gives."""
    rng = np.random.default_rng(seed)
    graph = _random_local_graph(rng, n, m, "whole" if weighted else "hops")
    dist = empty_distances(n, batch)
    graph.lower(dist, rng.integers(0, n, batch), np.arange(batch), np.zeros(batch))
    dag = ShortestPathDag(graph, dist)
    k = int(rng.integers(1, 2 * batch + 1))
    at_v, at_col = rng.integers(0, n, k), rng.integers(0, batch, k)
    reached = np.isfinite(dist[at_v, at_col])
    at_v, at_col = at_v[reached], at_col[reached]
    values = rng.random(len(at_v))
    for increment, sweep in ((dag.count_increment, dag.counts), (dag.dependency_increment, dag.accumulate)):
        cols, swept = increment(at_v, at_col, values)
        full = sweep(dag.scatter(at_v, at_col, values))
        assert np.array_equal(cols, np.unique(at_col))
        assert np.array_equal(swept, full[:, cols])
        assert not np.delete(full, cols, axis=1).any()


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 30), st.integers(1, 70), st.integers(1, 7), st.integers(0, 2 ** 16),
       st.sampled_from(["hops", "whole", "real"]), st.booleans())
def test_sweeps_follow_exactly_the_shortest_path_edges(n, m, batch, seed, lengths, directed):
    """The sweeps equal sums over the DAG written out edge by edge (every local edge ``u -> v``
    with ``dist(u) + w == dist(v)``), in distance order, on random injections."""
    rng = np.random.default_rng(seed)
    graph = _random_local_graph(rng, n, m, lengths, directed)
    dist = empty_distances(n, batch)
    graph.lower(dist, rng.integers(0, n, batch), np.arange(batch), np.zeros(batch))
    dag = ShortestPathDag(graph, dist)
    injected = np.where(np.isfinite(dist), rng.integers(0, 3, dist.shape), 0).astype(float)
    up, down = injected.copy(), injected.copy()
    for c in range(batch):
        arcs = [(a, b) for a, b, x in zip(graph.src, graph.dst, graph.w) if dist[a, c] + x == dist[b, c]]
        for a, b in sorted(arcs, key=lambda arc: dist[arc[0], c]):
            up[b, c] += up[a, c]
        for a, b in sorted(arcs, key=lambda arc: -dist[arc[1], c]):
            down[a, c] += down[b, c]
    assert np.allclose(dag.counts(injected.copy(order="F")), up, rtol=1e-12, atol=0)
    assert np.allclose(dag.accumulate(injected.copy(order="F")), down, rtol=1e-12, atol=0)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 5000), st.integers(0, 2 ** 32))
def test_source_order_is_a_permutation(n, seed):
    order = SourceOrder(n, seed)(np.arange(n))
    assert np.array_equal(np.sort(order), np.arange(n))


def test_source_order_prefixes_look_random():
    """A prefix of the order spreads over the ids like a random sample: the first 1,024 of 100,000
    fall evenly into 64 id ranges (chi-square), and they are no lattice (the sorted prefix of an
    affine order ``a x + b mod n`` has at most three distinct gaps, by the three-gap theorem)."""
    n, k = 100_000, 1024
    counts = np.bincount(SourceOrder(n, 0)(np.arange(k)) * 64 // n, minlength=64)
    chi2 = ((counts - k / 64) ** 2 / (k / 64)).sum()
    assert chi2 < 110                      # 63 degrees of freedom: p ~ 0.0002 above 110
    assert len(set(np.diff(np.sort(SourceOrder(n, 0)(np.arange(k)))).tolist())) > 100


@pytest.mark.parametrize("G", [nx.path_graph(2), nx.path_graph(7), nx.star_graph(5), nx.balanced_tree(2, 4),
                               nx.random_labeled_tree(30, seed=1)], ids=["edge", "path", "star", "binary", "random"])
def test_trees_collapse_to_one_vertex(G):
    """A tree is stripped to a single vertex and its closed form is all of its betweenness."""
    lc = strip_leaves(sp.csr_matrix(nx.to_scipy_sparse_array(G, nodelist=range(len(G)))))
    assert lc.alive.sum() == 1 and lc.reach[lc.alive][0] == len(G)
    expected = nx.betweenness_centrality(G, normalized=False)
    assert np.allclose(lc.tree_betweenness(len(G)) / 2, [expected[v] for v in range(len(G))], rtol=0, atol=1e-9)


def test_local_betweenness_of_source_chunks_sums_to_the_whole():
    G = graphs.with_extras(graphs.random_graph(40, 70, seed=5))
    nodes, src, dst, _ = _arrays(G, None)
    whole = local_betweenness(len(nodes), src, dst, normalized=False, compress=False)
    parts = sum(local_betweenness(len(nodes), src, dst, normalized=False, compress=False, sources=chunk)
                for chunk in np.array_split(np.arange(len(nodes)), 3))
    assert np.allclose(parts, whole, rtol=1e-12, atol=0)
    assert_matches({v: whole[i] for v, i in nodes.items()}, nx.betweenness_centrality(G, normalized=False))
    with pytest.raises(ValueError, match="compress=False"):
        local_betweenness(len(nodes), src, dst, sources=[0])
