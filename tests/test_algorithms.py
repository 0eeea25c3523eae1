"""Connected components, SSSP and PageRank on Gopher equal NetworkX.

Graph families: sparse random G(n, m) graphs (undirected and directed, with
self-loops, isolated vertices and several components), road-like graphs from
``goffish.generators.road_network``, power-law graphs (Graph500 R-MAT and
NetworkX's scale-free multigraph, with parallel edges), and string vertex ids;
stored with 1, 2 and 7 partitions, METIS and hash. Each dimension is covered
without taking the full product, to keep the file fast.
"""
import math
import sys

import networkx as nx
import numpy as np
import pytest
from pyspark import cloudpickle

import graphs
from algorithms.components import ConnectedComponents
from algorithms.pagerank import PowerIterationFailedConvergence
from gofs.errors import InputError

INF = math.inf
cloudpickle.register_pickle_by_value(sys.modules[__name__])      # its programs travel to the workers by value

# name: (builder -> nx graph or (GraphInput, nx twin), weight attribute, partitions, partitioner)
CASES = {
    "random-undirected-1-metis": (lambda: graphs.with_extras(graphs.random_graph(120, 150, seed=1)),
                                  "weight", 1, "metis"),
    "random-undirected-2-metis": (lambda: graphs.with_extras(graphs.random_graph(120, 150, seed=1)),
                                  "weight", 2, "metis"),
    "random-undirected-7-metis": (lambda: graphs.with_extras(graphs.random_graph(120, 150, seed=1)),
                                  "weight", 7, "metis"),
    "random-directed-2-hash": (lambda: graphs.with_extras(graphs.random_graph(100, 190, seed=2, directed=True)),
                               "weight", 2, "hash"),
    "random-directed-7-metis": (lambda: graphs.with_extras(graphs.random_graph(100, 190, seed=2, directed=True)),
                                "weight", 7, "metis"),
    "road-7-metis": (lambda: graphs.road(225, seed=5), "length", 7, "metis"),
    "road-2-hash": (lambda: graphs.road(150, seed=4), "length", 2, "hash"),
    "rmat-directed-7-hash": (lambda: graphs.rmat(7, edge_factor=3, seed=2), "weight", 7, "hash"),
    "scalefree-multi-2-metis": (lambda: graphs.scale_free(150, seed=3), "weight", 2, "metis"),
    # string ids; integer weights, a third of them zero
    "strings-undirected-2-hash": (lambda: graphs.string_ids(graphs.integer_weights(
        graphs.with_extras(graphs.random_graph(60, 70, seed=4)), seed=4)), "weight", 2, "hash"),
}


@pytest.fixture(scope="module")
def stored(spark, tmp_path_factory):
    """stored(name) -> (nx graph, GoFS graph, weight attribute), ingested once per module."""
    cache = {}
    root = tmp_path_factory.mktemp("algorithms")

    def get(name):
        if name not in cache:
            build, weight, k, partitioner = CASES[name]
            built = build()
            path = root / f"{name}.gofs"
            if isinstance(built, tuple):
                graph_input, G = built
                store = graphs.ingest_input(graph_input, path, spark, k, partitioner)
            else:
                G = built
                store = graphs.ingest_nx(G, path, spark, k, partitioner)
            assert store.num_partitions == k and store.num_vertices == G.number_of_nodes()
            cache[name] = (G, store, weight)
        return cache[name]

    return get


@pytest.fixture(scope="module")
def cc_runs(stored):
    """Connected-components runs, memoised: cc_runs(name) -> (G, store, RunResult)."""
    cache = {}

    def get(name):
        if name not in cache:
            G, store, _ = stored(name)
            cache[name] = (G, store, store.connected_components(progress=False))
        return cache[name]

    return get


def _source(G):
    """A deterministic, well-connected source: the highest-degree vertex (smallest id on ties)."""
    return min(G.nodes, key=lambda v: (-G.degree(v), str(v)))


def _assert_distances(got: dict, expected: dict, G):
    assert set(got) == set(G.nodes)
    wrong = {v: (got[v], expected.get(v, INF)) for v in G.nodes
             if not math.isclose(got[v], expected.get(v, INF), rel_tol=0, abs_tol=1e-9)}
    assert not wrong, f"{len(wrong)} wrong distances, e.g. {list(wrong.items())[:5]}"


def _assert_ranks(got: dict, expected: dict):
    assert set(got) == set(expected)
    worst = max(abs(got[v] - expected[v]) for v in expected)
    assert worst < 1e-6, f"largest difference {worst}"
    assert math.isclose(sum(got.values()), 1.0, abs_tol=1e-9)


# --------------------------------------------------------------------------- connected components

@pytest.mark.parametrize("name", list(CASES))
def test_connected_components_equal_networkx(cc_runs, name):
    G, store, result = cc_runs(name)
    labels = graphs.column(result, "component")
    assert set(labels) == set(G.nodes)
    assert graphs.as_partition(labels) == graphs.weak_components(G)
    # supersteps are bounded by the meta-graph's diameter, not the graph's
    assert result.metrics.num_supersteps <= graphs.metagraph_diameter(store) + 2


@pytest.mark.parametrize("name", ["road-7-metis", "road-2-hash"])
def test_connected_components_on_roads_within_metagraph_diameter_plus_two(cc_runs, name):
    G, store, result = cc_runs(name)
    diameter = graphs.metagraph_diameter(store)
    assert diameter >= 2, "the test graph should need label propagation across sub-graphs"
    assert nx.number_connected_components(G) > 1
    assert result.metrics.num_supersteps <= diameter + 2
    # far fewer supersteps than a vertex-centric run, which needs the graph's own diameter
    graph_diameter = max(nx.diameter(G.subgraph(c)) for c in nx.connected_components(G))
    assert result.metrics.num_supersteps < graph_diameter


def test_connected_components_of_a_single_partition_take_one_superstep(cc_runs):
    G, store, result = cc_runs("random-undirected-1-metis")
    assert graphs.metagraph_diameter(store) == 0
    assert result.metrics.num_supersteps == 1
    assert result.metrics.messages == 0


class _PartitionsOnly(ConnectedComponents):
    """Connected components that fail where a sub-graph would run or output on its own."""

    def compute(self, subgraph, messages, ctx):
        raise AssertionError("compute ran per sub-graph")

    def output(self, subgraph):
        raise AssertionError("output ran per sub-graph")


class _SubgraphsOnly(ConnectedComponents):
    """Connected components per sub-graph, as before the partition path."""

    def compute_partition(self, subgraphs, ctx):
        return False

    def output_partition(self, subgraphs):
        return None


@pytest.mark.parametrize("name", ["road-7-metis", "random-directed-7-metis", "rmat-directed-7-hash"])
def test_connected_components_run_once_per_partition_and_send_what_sub_graphs_would(stored, name):
    G, store, _ = stored(name)
    once = store.run(_PartitionsOnly(), progress=False)
    each = store.run(_SubgraphsOnly(), progress=False)
    assert graphs.as_partition(graphs.column(once, "component")) == graphs.weak_components(G)
    assert graphs.column(once, "component") == graphs.column(each, "component")
    assert [(s.active_subgraphs, s.messages) for s in once.metrics.supersteps] == \
        [(s.active_subgraphs, s.messages) for s in each.metrics.supersteps]


# --------------------------------------------------------------------------- shortest paths

@pytest.mark.parametrize("name", ["random-undirected-7-metis", "random-directed-2-hash", "road-7-metis",
                                  "rmat-directed-7-hash", "scalefree-multi-2-metis"])
def test_weighted_sssp_equals_dijkstra(stored, name):
    G, store, weight = stored(name)
    source = _source(G)
    result = store.sssp(source, weight=weight, progress=False)
    expected = nx.single_source_dijkstra_path_length(G, source, weight=weight)
    got = graphs.column(result, "distance")
    _assert_distances(got, expected, G)
    assert len(expected) > 1
    assert result.metrics.num_supersteps >= 1


@pytest.mark.parametrize("name", ["random-undirected-1-metis", "random-directed-7-metis"])
def test_unweighted_sssp_counts_hops(stored, name):
    G, store, _ = stored(name)
    source = _source(G)
    got = graphs.column(store.sssp(source, progress=False), "distance")
    expected = nx.single_source_shortest_path_length(G, source)
    _assert_distances(got, {v: float(d) for v, d in expected.items()}, G)
    unreachable = [v for v in G.nodes if v not in expected]
    assert unreachable and all(got[v] == INF for v in unreachable)


def test_sssp_results_are_keyed_by_string_ids(stored):
    G, store, weight = stored("strings-undirected-2-hash")
    result = store.sssp("v0", weight=weight, progress=False)
    got = graphs.column(result, "distance")
    assert all(isinstance(v, str) for v in got)
    assert got["v0"] == 0.0
    assert [(f["name"], f["type"]) for f in store.manifest["edge_schema"]] == [("weight", "int64")]
    assert any(w == 0 for _, _, w in G.edges(data="weight"))
    _assert_distances(got, nx.single_source_dijkstra_path_length(G, "v0", weight=weight), G)


def test_sssp_rejects_negative_weights(spark, tmp_path):
    G = nx.path_graph(5)
    nx.set_edge_attributes(G, 1.0, "cost")
    G.edges[2, 3]["cost"] = -0.5
    store = graphs.ingest_nx(G, tmp_path / "negative.gofs", spark, 2)
    with pytest.raises(InputError, match=r"negative edge weight -0\.5 in 'cost'"):
        store.sssp(0, weight="cost", progress=False)


def test_sssp_rejects_unknown_source_and_weight(spark, tmp_path):
    G = graphs.random_graph(20, 30, seed=9)
    store = graphs.ingest_nx(G, tmp_path / "small.gofs", spark, 2)
    with pytest.raises(InputError, match="unknown vertex 999"):
        store.sssp(999, progress=False)
    with pytest.raises(InputError, match="unknown vertex 'v1'"):
        store.sssp("v1", progress=False)
    with pytest.raises(InputError, match="no edge attribute 'length'"):
        store.sssp(0, weight="length", progress=False)


def _no_id_index(monkeypatch):
    """Make the driver-side index of every vertex id fail: run paths must not build it."""
    from gofs.store import GraphStore

    def refuse(self):
        raise AssertionError("a run path read every vertex id on the driver")

    monkeypatch.setattr(GraphStore, "vertex_ids", property(refuse))
    monkeypatch.setattr(GraphStore, "_id_index", property(refuse))


@pytest.mark.parametrize("name, source", [("strings-undirected-2-hash", "v7"), ("road-7-metis", None)])
def test_sssp_runs_without_an_index_of_all_ids(stored, monkeypatch, name, source):
    G, store, weight = stored(name)
    source = sorted(G.nodes())[len(G) // 3] if source is None else source
    expected = nx.single_source_dijkstra_path_length(G, source, weight=weight)
    _no_id_index(monkeypatch)
    store = type(store)(store.path)                          # a fresh handle: nothing cached
    got = graphs.column(store.sssp(source, weight=weight, progress=False), "distance")
    _assert_distances(got, expected, G)


def test_sssp_unknown_source_of_the_other_id_type_is_named(stored, monkeypatch):
    _, store, _ = stored("strings-undirected-2-hash")
    _no_id_index(monkeypatch)
    with pytest.raises(InputError, match="unknown vertex 7"):
        store.sssp(7, progress=False)
    with pytest.raises(InputError, match="unknown vertex 'v999'"):
        store.sssp("v999", progress=False)


@pytest.mark.parametrize("bad, message", [
    (None, r"'cost' has missing values \(partition \d, e\.g\. edge 2 -> 3\)"),
    (math.nan, r"'cost' has NaN values \(partition \d, e\.g\. edge 2 -> 3\)"),
    (-0.5, r"negative edge weight -0\.5 in 'cost' \(partition \d, e\.g\. edge 2 -> 3\)"),
    (math.inf, r"infinite edge weight in 'cost' \(partition \d, e\.g\. edge 2 -> 3\)"),
])
def test_sssp_bad_weight_is_named_before_any_run(spark, tmp_path, monkeypatch, bad, message):
    import algorithms.sssp

    G = nx.path_graph(6)
    nx.set_edge_attributes(G, 1.0, "cost")
    G.edges[2, 3]["cost"] = bad
    store = graphs.ingest_nx(G, tmp_path / "bad.gofs", spark, 2)

    def no_run(*args, **kwargs):
        raise AssertionError("the run started before the weights were checked")

    monkeypatch.setattr(algorithms.sssp, "run_program", no_run)
    with pytest.raises(InputError, match=message):
        store.sssp(0, weight="cost", progress=False)


# --------------------------------------------------------------------------- pagerank

@pytest.mark.parametrize("name", ["random-undirected-2-metis", "scalefree-multi-2-metis"])
def test_pagerank_equals_networkx(stored, name):
    G, store, _ = stored(name)
    # dangling vertices (no out-edges) spread their rank uniformly, as in NetworkX
    assert any(G.out_degree(v) == 0 for v in G) if G.is_directed() else any(G.degree(v) == 0 for v in G)
    result = store.pagerank(progress=False)
    _assert_ranks(graphs.column(result, "pagerank"), nx.pagerank(G, weight=None))
    assert result.metrics.num_supersteps > 2


def test_weighted_pagerank_equals_networkx(stored):
    G, store, weight = stored("rmat-directed-7-hash")
    # the same, looser tolerance on both sides: the two must stop at the very same iteration
    result = store.pagerank(weight=weight, tol=1e-4, progress=False)
    _assert_ranks(graphs.column(result, "pagerank"), nx.pagerank(G, weight=weight, tol=1e-4))


def test_pagerank_with_zero_tolerance_runs_exactly_max_iter_iterations(stored):
    G, store, _ = stored("random-directed-2-hash")
    result = store.pagerank(max_iter=3, tol=0, progress=False)
    assert result.metrics.num_supersteps == 4
    nodes = list(G.nodes)
    google = nx.google_matrix(G, alpha=0.85, nodelist=nodes, weight=None)
    x = np.full(len(nodes), 1.0 / len(nodes))
    for _ in range(3):
        x = x @ google
    got = graphs.column(result, "pagerank")
    assert max(abs(got[v] - x[i]) for i, v in enumerate(nodes)) < 1e-12


def test_pagerank_that_does_not_converge_raises(stored):
    G, store, _ = stored("random-directed-2-hash")
    with pytest.raises(PowerIterationFailedConvergence, match="in 2 iterations"):
        store.pagerank(max_iter=2, progress=False)
