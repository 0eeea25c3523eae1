"""The NetworkX backend 'goffish': dispatch, NetworkX's types, GoFS handles, can_run/should_run.

NetworkX's own test modules run through the backend as a separate command
(``python -m goffish.nx_conformance``), not in this suite: each call is a Spark run.
"""
import gc
import os

import networkx as nx
import pytest

import goffish
from algorithms.registry import algorithms
from goffish import nx_backend
from goffish.nx_backend import GoffishGraph
from goffish.nx_info import declared_functions


@pytest.fixture(scope="module")
def graph(spark):
    """Two components with non-integer nodes (tuples, strings), weights, and an isolated node."""
    G = nx.karate_club_graph()
    G = nx.relabel_nodes(G, {0: ("hub", 0), 33: "other hub"})
    for i, (u, v) in enumerate(sorted(G.edges(), key=str)):
        G.edges[u, v]["weight"] = 1 + i % 4
    G.add_edge("a", "b", weight=2.5)
    G.add_node("alone")
    return G


def test_components_in_networkx_types(graph):
    got = nx.connected_components(graph, backend="goffish")
    assert iter(got) is got
    assert sorted(map(sorted, map(list, map(lambda s: map(str, s), got)))) == \
        sorted(map(sorted, map(list, map(lambda s: map(str, s), nx.connected_components(graph)))))
    assert nx.number_connected_components(graph, backend="goffish") == 3
    assert nx.is_connected(graph, backend="goffish") is False
    assert nx.node_connected_component(graph, "a", backend="goffish") == {"a", "b"}
    with pytest.raises(nx.NetworkXNotImplemented):
        nx.connected_components(nx.DiGraph(graph), backend="goffish")


def test_weak_components_and_reachability_on_a_digraph(spark):
    D = nx.gnp_random_graph(25, 0.06, directed=True, seed=3)
    assert sorted(map(sorted, nx.weakly_connected_components(D, backend="goffish"))) == \
        sorted(map(sorted, nx.weakly_connected_components(D)))
    for target in (1, 7, 24):
        assert nx.has_path(D, 0, target, backend="goffish") == nx.has_path(D, 0, target)
    with pytest.raises(nx.NodeNotFound):
        nx.has_path(D, 0, "nowhere", backend="goffish")


def test_pagerank_and_betweenness_equal_networkx(graph):
    pr, want = nx.pagerank(graph, backend="goffish"), nx.pagerank(graph)
    assert type(pr) is dict and pr == pytest.approx(want, abs=1e-9)
    assert all(type(v) is float for v in pr.values())
    assert nx.betweenness_centrality(graph, weight="weight", backend="goffish") == \
        pytest.approx(nx.betweenness_centrality(graph, weight="weight"))
    k = graph.number_of_nodes()            # k = n sources: NetworkX's sample is everything, so exact
    assert nx.betweenness_centrality(graph, k=k, seed=1, backend="goffish") == \
        pytest.approx(nx.betweenness_centrality(graph, k=k, seed=1))


@pytest.mark.parametrize("normalized", [True, False])
def test_sampled_betweenness_draws_networkx_sources_from_the_seed(graph, normalized):
    """k < n: the same sources as NetworkX for the seed, sources and the rest scaled apart (>= 3.5)."""
    got = nx.betweenness_centrality(graph, k=7, seed=11, normalized=normalized, weight="weight", backend="goffish")
    assert got == pytest.approx(nx.betweenness_centrality(graph, k=7, seed=11, normalized=normalized, weight="weight"))
    star = nx.star_graph(4)              # k=1 draws leaf 1: NetworkX leaves its value undefined (NaN)
    assert nx.betweenness_centrality(star, k=1, seed=1, backend="goffish") == \
        pytest.approx({0: 1.0, 1: float("nan"), 2: 0.0, 3: 0.0, 4: 0.0}, nan_ok=True)
    with pytest.raises(ValueError, match="larger"):
        nx.betweenness_centrality(star, k=9, backend="goffish")


def test_shortest_path_lengths_equal_networkx(graph):
    source = ("hub", 0)
    hops = nx.single_source_shortest_path_length(graph, source, backend="goffish")
    assert hops == nx.single_source_shortest_path_length(graph, source)
    assert all(type(v) is int for v in hops.values())
    assert nx.single_source_shortest_path_length(graph, source, cutoff=1, backend="goffish") == \
        nx.single_source_shortest_path_length(graph, source, cutoff=1)
    assert nx.single_source_dijkstra_path_length(graph, source, backend="goffish") == \
        pytest.approx(nx.single_source_dijkstra_path_length(graph, source))
    with pytest.raises(nx.NodeNotFound):
        nx.single_source_dijkstra_path_length(graph, "nobody", backend="goffish")


def test_louvain_communities_cover_the_graph_with_networkx_modularity(graph):
    communities = nx.community.louvain_communities(graph, seed=1, backend="goffish")
    assert type(communities) is list and set().union(*communities) == set(graph)
    assert nx.community.modularity(graph, communities) == pytest.approx(
        nx.community.modularity(graph, nx.community.louvain_communities(graph, seed=1)), abs=0.03)


def test_leiden_communities_which_networkx_leaves_to_backends_are_connected(graph):
    communities = nx.community.leiden_communities(graph, seed=1, backend="goffish")
    assert type(communities) is list and set().union(*communities) == set(graph)
    assert sum(map(len, communities)) == graph.number_of_nodes()
    assert all(nx.is_connected(graph.subgraph(c)) for c in communities)
    assert nx.community.modularity(graph, communities) == pytest.approx(
        nx.community.modularity(graph, nx.community.louvain_communities(graph, seed=1)), abs=0.03)


def test_a_gofs_handle_dispatches_by_type(spark, tmp_path):
    G = nx.path_graph(6)
    G.add_edge(10, 11)
    store = goffish.ingest(G, str(tmp_path / "g.gofs"), num_partitions=2)
    handle = GoffishGraph(store)
    assert sorted(map(sorted, nx.connected_components(handle))) == [[0, 1, 2, 3, 4, 5], [10, 11]]
    assert nx.pagerank(handle) == pytest.approx(nx.pagerank(G))
    as_networkx = nx.to_dict_of_lists(handle, backend="networkx")    # other functions: collected into NetworkX
    assert {v: sorted(ns) for v, ns in as_networkx.items()} == nx.to_dict_of_lists(G)


def test_can_run_and_should_run_are_honest(graph):
    assert nx_backend.can_run("pagerank", (graph,), {"personalization": {"a": 1}}) == \
        "personalization={'a': 1} is not supported (only None)"
    assert "weight function" in nx_backend.can_run("single_source_dijkstra_path_length", (graph, "a"),
                                                   {"weight": lambda u, v, d: 1})
    assert nx_backend.can_run("pagerank", (nx.MultiGraph(graph),), {}).startswith("pagerank on a multigraph")
    assert nx_backend.can_run("pagerank", (graph,), {}) is True
    assert nx_backend.should_run("pagerank", (graph,), {}).startswith("79 edges < min_edges=1000000")
    assert nx_backend.should_run("pagerank", (GoffishGraph(None, [], directed=False),), {}) is True
    with nx.config.backends.goffish(min_edges=10):
        assert nx_backend.should_run("pagerank", (graph,), {}) is True


def test_backend_info_lists_what_the_registry_declares():
    declared = sorted(d.name for a in algorithms().values() for d in a.networkx)
    assert declared_functions() == declared
    assert set(declared) <= set(nx.utils.backends.backend_info["goffish"]["functions"])


def test_converted_store_is_removed_with_its_handle(spark):
    handle = nx_backend.convert_from_nx(nx.path_graph(3))
    directory = os.path.dirname(handle.store.path)
    assert os.path.isdir(directory)
    del handle
    gc.collect()
    assert not os.path.exists(directory)
