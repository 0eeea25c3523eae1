"""Partitioned Louvain: NetworkX's modularity formula per level, igraph's quality, determinism, errors.

Tolerances: with one partition the result must be exactly the sequential
igraph run on the same sub-graph; with several partitions on these small
graphs (a few hundred to two thousand vertices) modularity must be within 1%
of igraph's multilevel on the whole graph (the issue asks 0.5% on 100k+
vertex graphs, measured by ``benchmarks/bench_louvain.py``).
"""
from __future__ import annotations

import igraph as ig
import networkx as nx
import numpy as np
import pytest

from algorithms.louvain import connected_pieces, modularity, nmi, subgraph_seed
from algorithms.louvain_kernels import local_moving, moving_from
from gofs.bundle import load_partition
from gofs.errors import InputError
from gofs.ingest.read_local import from_networkx
from goffish.generators import lfr
from gopher.subgraph import Subgraph
from tests.graphs import as_partition, ingest_input, ingest_nx, string_ids

QUALITY_TOLERANCE = 0.01


def _communities(frame, column: str = "community") -> list[set]:
    rows = frame.select("id", column).collect()
    return [set(group) for group in as_partition({r["id"]: r[column] for r in rows})]


def _planted(n_groups=12, size=40, p_in=0.3, p_out=0.01, seed=4, weighted=True):
    G = nx.planted_partition_graph(n_groups, size, p_in, p_out, seed=seed)
    rng = np.random.default_rng(seed)
    for u, v in sorted(G.edges()):
        G.edges[u, v]["weight"] = float(rng.integers(1, 5)) if weighted else 1.0
    return G


def _igraph_modularity(G, weight="weight", resolution=1.0, seeds=range(5)) -> float:
    """The best of a few igraph multilevel runs' modularity on the whole graph (NetworkX's formula)."""
    h = ig.Graph.from_networkx(G)
    best = -1.0
    for seed in seeds:
        import random

        random.seed(seed)
        clustering = h.community_multilevel(weights=weight, resolution=resolution)
        groups = [set(h.vs[i]["_nx_name"] for i in c) for c in clustering]
        best = max(best, nx.community.modularity(G, groups, weight=weight, resolution=resolution))
    return best


@pytest.fixture(scope="module")
def planted(spark, tmp_path_factory):
    G = _planted()
    return G, ingest_nx(G, tmp_path_factory.mktemp("louvain") / "planted.gofs", spark, num_partitions=4)


def test_one_partition_is_sequential_louvain(spark, tmp_path):
    G = _planted(n_groups=8, size=30, seed=2)
    assert nx.is_connected(G)
    g = ingest_nx(G, tmp_path / "one.gofs", spark, num_partitions=1)
    result = g.louvain(weight="weight", seed=3, levels=[1])
    bundle = load_partition(g, 0, (), ("weight",))
    assert bundle.num_subgraphs == 1
    sg = Subgraph(bundle, 0)
    sequential = local_moving(sg.num_vertices, sg.edge_src, sg.edge_dst, sg.edge_attribute("weight"),
                              1.0, subgraph_seed(3, sg.id))
    expected = as_partition(dict(zip(sg.ids.tolist(), sequential.tolist())))
    assert {frozenset(c) for c in _communities(result.dataframe, "level_1")} == expected
    got = _communities(result.dataframe)
    assert result.modularity[-1] == pytest.approx(nx.community.modularity(G, got, weight="weight"), abs=1e-12)
    assert result.modularity[-1] >= _igraph_modularity(G) * (1 - QUALITY_TOLERANCE)


@pytest.mark.parametrize("graph", [nx.karate_club_graph(), _planted(n_groups=4, size=12, seed=8)])
def test_local_moving_kernel_reaches_a_local_optimum(graph):
    """Level 1's numba kernel: no single vertex can move to a neighbour's community and raise
    NetworkX's modularity (self-loops added to check their 2w degree)."""
    G = nx.Graph(graph)
    G.add_edge(0, 0, weight=3.0)
    src, dst = (np.array(x, dtype=np.int64) for x in zip(*G.edges()))
    w = np.array([G.edges[u, v].get("weight", 1.0) for u, v in zip(src, dst)])
    labels = local_moving(G.number_of_nodes(), src, dst, w, 1.0, seed=2)
    assert sorted(set(labels.tolist())) == list(range(labels.max() + 1))
    best = nx.community.modularity(G, as_partition(dict(enumerate(labels.tolist()))), weight="weight")
    assert best == pytest.approx(modularity(labels, src, dst, w), abs=1e-12)
    for v in G:
        for u in G[v]:
            moved = labels.copy()
            moved[v] = labels[u]
            q = nx.community.modularity(G, as_partition(dict(enumerate(moved.tolist()))), weight="weight")
            assert q <= best + 1e-12, (v, u)
    assert best > nx.community.modularity(G, [{v} for v in G], weight="weight")


def test_moving_from_holds_fixed_neighbours_and_reaches_a_local_optimum():
    """Leiden's second-iteration kernel: the first half of a planted graph moves from a given
    partition while the second half stays in its communities (edges to it given as fixed
    neighbours); after it no moving vertex can join a neighbour's community and raise
    NetworkX's modularity of the whole graph."""
    G = _planted(n_groups=4, size=12, seed=8)
    n = G.number_of_nodes()
    src, dst = (np.array(x, dtype=np.int64) for x in zip(*G.edges()))
    w = np.array([G.edges[u, v]["weight"] for u, v in zip(src, dst)])
    start = np.random.default_rng(1).integers(0, 6, n)
    degree = np.bincount(src, w, n) + np.bincount(dst, w, n)
    half = n // 2
    inner = (src < half) & (dst < half)
    a, b = np.where(src < half, src, dst), np.where(src < half, dst, src)
    cut = ((src < half) != (dst < half))
    labels = moving_from(start[:half], np.bincount(start, degree, 6), src[inner], dst[inner], w[inner],
                         (a[cut], start[b[cut]], w[cut]), 1.0, seed=3, two_m=float(degree.sum()))
    whole = np.concatenate([labels, start[half:]])
    best = modularity(whole, src, dst, w)
    assert best > modularity(start, src, dst, w)
    assert best == pytest.approx(nx.community.modularity(G, as_partition(dict(enumerate(whole.tolist()))),
                                                         weight="weight"), abs=1e-12)
    for v in range(half):
        for u in G[v]:
            moved = whole.copy()
            moved[v] = whole[u]
            assert modularity(moved, src, dst, w) <= best + 1e-12, (v, u)


@pytest.fixture(scope="module")
def planted_result(planted):
    return planted[1].louvain(weight="weight", resolution=1.0, seed=0, levels=True)


def test_levels_match_networkx_modularity_and_igraph_quality(planted, planted_result):
    G, g = planted
    result = planted_result
    frame = result.dataframe
    columns = [c for c in frame.columns if c.startswith("level_")]
    assert columns == [f"level_{k}" for k in range(1, len(result.modularity) + 1)]
    assert frame.count() == G.number_of_nodes()
    for k, column in enumerate(columns):
        q = nx.community.modularity(G, _communities(frame, column), weight="weight")
        assert result.modularity[k] == pytest.approx(q, abs=1e-9), column
        assert result.level_sizes[k] == len(_communities(frame, column))
    final = _communities(frame)
    assert {frozenset(c) for c in final} == {frozenset(c) for c in _communities(frame, columns[-1])}
    assert sorted(r["community"] for r in frame.select("community").distinct().collect()) == list(range(len(final)))
    assert result.modularity[-1] >= _igraph_modularity(G) * (1 - QUALITY_TOLERANCE)
    assert result.modularity == sorted(result.modularity)       # every level improves


@pytest.fixture(scope="module")
def hashed(spark, tmp_path_factory):
    """Hash partitioning splits every planted group over all partitions: level 1 sees fragments."""
    G = _planted(n_groups=6, size=40, p_in=0.4, seed=6)
    return G, ingest_nx(G, tmp_path_factory.mktemp("louvain") / "hashed.gofs", spark, num_partitions=4,
                        partitioner="hash")


def test_partitioned_again_when_over_driver_budget(hashed):
    G, g = hashed
    unrefined = g.louvain(weight="weight", seed=0, refine=False)
    partitioned = g.louvain(weight="weight", seed=0, levels=True, driver_budget_edges=5)
    assert unrefined.partitioned_levels == 0 and partitioned.partitioned_levels >= 1
    # 74% of this graph's edges are cut: level 1 sees fragments, and only the refinement
    # recovers igraph's quality here (measured: 0.674 unrefined, 0.730 refined and igraph)
    assert unrefined.modularity[-1] < partitioned.modularity[-1]
    assert unrefined.modularity[-1] == pytest.approx(
        nx.community.modularity(G, _communities(unrefined.dataframe), weight="weight"), abs=1e-9)
    assert partitioned.level_sizes == sorted(partitioned.level_sizes, reverse=True)
    for k, q in enumerate(partitioned.modularity):
        got = _communities(partitioned.dataframe, f"level_{k + 1}")
        assert q == pytest.approx(nx.community.modularity(G, got, weight="weight"), abs=1e-9)
        assert partitioned.level_sizes[k] == len(got)
    assert partitioned.modularity[-1] >= _igraph_modularity(G) * (1 - QUALITY_TOLERANCE)


def test_lfr_recovers_planted_communities(spark, tmp_path):
    graph = lfr(2000, avg_degree=12, max_degree=40, mu=0.1, min_community=30, max_community=80, seed=5)
    g = ingest_input(graph, tmp_path / "lfr.gofs", spark, num_partitions=4)
    result = g.louvain(seed=1)
    rows = result.dataframe.select("id", "community").toPandas()
    ours = np.empty(2000, dtype=np.int64)
    ours[rows["id"].to_numpy()] = rows["community"].to_numpy()
    src, dst = graph.edges.column("src").to_numpy(), graph.edges.column("dst").to_numpy()
    planted = graph.vertices.column("community").to_numpy()
    assert modularity(ours, src, dst, np.ones(len(src))) == pytest.approx(result.modularity[-1], abs=1e-12)
    h = ig.Graph(n=2000, edges=np.column_stack([src, dst]))
    reference = h.community_multilevel()
    assert result.modularity[-1] >= reference.modularity * (1 - QUALITY_TOLERANCE)
    assert nmi(ours, planted) > 0.9
    assert nmi(ours, planted) == pytest.approx(ig.compare_communities(ours.tolist(), planted.tolist(), "nmi"))


def test_directed_string_ids_isolated_vertices(spark, tmp_path):
    """Directed edges count as undirected ones (u->v and v->u summed); isolated vertices are
    their own communities; string ids come back as they were."""
    U = string_ids(nx.ring_of_cliques(5, 6))
    D = nx.DiGraph()
    for u, v in U.edges():
        D.add_edge(u, v, weight=1.0)
        if (int(u[1:]) + int(v[1:])) % 3 == 0:
            D.add_edge(v, u, weight=2.0)
    D.add_nodes_from(["lonely", "alone"])
    g = ingest_nx(D, tmp_path / "directed.gofs", spark, num_partitions=3)
    result = g.louvain(weight="weight", seed=0)
    undirected = nx.Graph()
    undirected.add_nodes_from(D.nodes)
    for u, v, w in D.edges(data="weight"):
        previous = undirected.get_edge_data(u, v, {"weight": 0.0})["weight"]
        undirected.add_edge(u, v, weight=previous + w)
    got = _communities(result.dataframe)
    assert set().union(*got) == set(D.nodes)
    assert {"lonely"} in got and {"alone"} in got
    assert {frozenset(c) for c in got if len(c) > 1} == {frozenset(f"v{6 * i + j}" for j in range(6))
                                                        for i in range(5)}
    assert result.modularity[-1] == pytest.approx(nx.community.modularity(undirected, got, weight="weight"),
                                                  abs=1e-12)


def test_unweighted_and_resolution(planted):
    G, g = planted
    low = g.louvain(resolution=0.2, seed=7)
    high = g.louvain(resolution=3.0, seed=7)
    unweighted = nx.Graph(G.edges())
    for result, gamma in ((low, 0.2), (high, 3.0)):
        got = _communities(result.dataframe)
        assert result.modularity[-1] == pytest.approx(
            nx.community.modularity(unweighted, got, weight=None, resolution=gamma), abs=1e-9)
    assert len(_communities(high.dataframe)) > len(_communities(low.dataframe))


@pytest.mark.parametrize("kwargs, message", [
    ({"weight": "nope"}, "weight='nope'"),
    ({"resolution": 0}, "resolution"),
    ({"resolution": float("nan")}, "resolution"),
    ({"resolution": "1"}, "resolution"),
    ({"seed": -1}, "seed"),
    ({"seed": 1.5}, "seed"),
    ({"levels": "all"}, "levels"),
    ({"levels": [0]}, "levels"),
    ({"driver_budget_edges": 0}, "driver_budget_edges"),
])
def test_bad_parameters_raise_before_any_spark_job(spark, planted, kwargs, message):
    _, g = planted
    tracker = spark.sparkContext.statusTracker()
    spark.sparkContext.setJobGroup("louvain-bad-parameters", "must stay empty")
    try:
        with pytest.raises(InputError, match=message):
            g.louvain(**kwargs)
        assert tracker.getJobIdsForGroup("louvain-bad-parameters") == []
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)


def test_negative_weight_is_refused(spark, tmp_path):
    G = nx.path_graph(5)
    nx.set_edge_attributes(G, {(1, 2): -1.0, (0, 1): 1.0, (2, 3): 1.0, (3, 4): 1.0}, "weight")
    g = ingest_input(from_networkx(G), tmp_path / "negative.gofs", spark, num_partitions=1)
    with pytest.raises(InputError, match=r"negative edge weight -1\.0 in .weight. \(partition 0, e\.g\. edge 1 -> 2\)"):
        g.louvain(weight="weight")


def test_cli_run_louvain_is_deterministic(planted, planted_result, tmp_path, capsys):
    """The CLI run repeats the DSL run with the same seed exactly (every level's labels)."""
    import json

    import pandas as pd

    from goffish.cli import main

    G, g = planted
    assert main(["run", "louvain", g.path, "--weight", "weight", "--levels", "--seed", "0", "--quiet",
                 "--out", str(tmp_path / "communities")]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    frame = pd.read_parquet(tmp_path / "communities")
    assert sorted(frame.columns) == sorted(["id", "community"] + [f"level_{k + 1}" for k in
                                                                  range(len(summary["modularity"]))])
    groups = [set(part["id"]) for _, part in frame.groupby("community")]
    assert summary["modularity"][-1] == pytest.approx(nx.community.modularity(G, groups, weight="weight"), abs=1e-9)
    expected = planted_result.dataframe.toPandas()
    assert summary["modularity"] == planted_result.modularity
    columns = sorted(expected.columns)
    assert (frame[columns].sort_values("id").to_numpy() == expected[columns].sort_values("id").to_numpy()).all()
    assert main(["run", "louvain", g.path, "--resolution", "-1", "--out", str(tmp_path / "bad")]) == 2
    assert "resolution" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()


# --------------------------------------------------------------------------- Leiden

def _disconnected(G, groups) -> int:
    return sum(1 for group in groups if not nx.is_connected(G.subgraph(group)))


def test_connected_pieces_split_communities_without_losing_modularity():
    G = nx.gnm_random_graph(80, 120, seed=3)
    src, dst = (np.array(x, dtype=np.int64) for x in zip(*G.edges()))
    membership = np.random.default_rng(3).integers(0, 5, 80)         # random groups: mostly disconnected
    pieces = connected_pieces(membership, src, dst)
    groups = as_partition(dict(enumerate(pieces.tolist())))
    assert _disconnected(G, groups) == 0 and _disconnected(G, as_partition(dict(enumerate(membership.tolist())))) > 0
    assert all(len(set(membership[list(group)])) == 1 for group in groups)   # pieces of the same communities
    weight = np.ones(len(src))
    assert modularity(pieces, src, dst, weight) >= modularity(membership, src, dst, weight)


def test_leiden_communities_are_connected_where_louvain_splits_one(spark, tmp_path, capsys):
    """On this hash-partitioned planted graph (most edges cut) our Louvain returns a
    disconnected community (its cut-vertex refinement moves a bridge out); ``goffish run
    leiden`` returns none, at no less modularity."""
    import json

    import pandas as pd

    from goffish.cli import main

    G = nx.planted_partition_graph(10, 30, 0.08, 0.01, seed=1)
    g = ingest_nx(G, tmp_path / "planted.gofs", spark, num_partitions=4, partitioner="hash")
    louvain = g.louvain(seed=0)
    assert _disconnected(G, _communities(louvain.dataframe)) >= 1
    assert main(["run", "leiden", g.path, "--seed", "0", "--quiet", "--out", str(tmp_path / "leiden")]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    frame = pd.read_parquet(tmp_path / "leiden")
    groups = [set(part["id"]) for _, part in frame.groupby("community")]
    assert _disconnected(G, groups) == 0
    assert summary["modularity"][-1] == pytest.approx(nx.community.modularity(G, groups), abs=1e-9)
    assert summary["modularity"][-1] >= louvain.modularity[-1] * (1 - QUALITY_TOLERANCE)


def test_leiden_quality_close_to_igraph_leiden(planted):
    """METIS-partitioned planted graph: connected communities, NetworkX's modularity, within 1% of
    the best of five igraph Leiden runs on the whole graph."""
    G, g = planted
    result = g.leiden(weight="weight", seed=0)
    groups = _communities(result.dataframe)
    assert _disconnected(G, groups) == 0
    assert result.modularity[-1] == pytest.approx(nx.community.modularity(G, groups, weight="weight"), abs=1e-9)
    h = ig.Graph.from_networkx(G)
    best = max(h.modularity(h.community_leiden(objective_function="modularity", weights="weight",
                                               n_iterations=-1).membership, weights="weight") for _ in range(5))
    assert result.modularity[-1] >= best * (1 - QUALITY_TOLERANCE)


def test_leiden_second_iteration_recovers_what_level_1_cut(hashed):
    """Hash-partitioned: level 1 sees fragments of every planted group. Leiden's second iteration
    (vertices moved against their neighbours in other sub-graphs, refined units, igraph's Leiden
    from their communities) brings it within 0.5% of the best of five whole-graph igraph Leiden
    runs, every community connected."""
    G, g = hashed
    result = g.leiden(weight="weight", seed=0, levels=True)
    groups = _communities(result.dataframe)
    assert _disconnected(G, groups) == 0
    for k, q in enumerate(result.modularity):        # level 1's fragments, then the final communities
        level = _communities(result.dataframe, f"level_{k + 1}")
        assert q == pytest.approx(nx.community.modularity(G, level, weight="weight"), abs=1e-9)
        assert result.level_sizes[k] == len(level)
    assert {frozenset(c) for c in _communities(result.dataframe, "level_2")} == {frozenset(c) for c in groups}
    h = ig.Graph.from_networkx(G)
    best = max(h.modularity(h.community_leiden(objective_function="modularity", weights="weight",
                                               n_iterations=-1).membership, weights="weight") for _ in range(5))
    assert result.modularity[-1] >= best * (1 - 0.005)
