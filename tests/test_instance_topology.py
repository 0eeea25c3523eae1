"""Gopher programs on an instance's topology: the template's edges minus the removed ones plus the
added ones, checked against NetworkX on the same edge list.

The changes are chosen so that every case the engine distinguishes occurs: a sub-graph split in
two by a removed edge, an added edge inside a sub-graph, one between two sub-graphs of the same
partition, one between partitions, and an added self-loop.
"""
from __future__ import annotations

import networkx as nx
import numpy as np
import pandas as pd
import pytest

from algorithms.components import ConnectedComponents
from gofs.errors import InputError
from gofs.instances import Instance
from gopher.timeseries import run_independent
from tests import graphs


def _changes(G, store, seed: int):
    """(removed, added) edge lists of one instance, covering every placement case."""
    rng = np.random.default_rng(seed)
    sg = graphs.vertex_subgraphs(store)
    offsets = [p["subgraph_offset"] for p in store.partitions] + [store.manifest["subgraphs"]["count"]]
    part = {v: int(np.searchsorted(offsets, s, side="right") - 1) for v, s in sg.items()}
    inside = [(u, v) for u, v in G.edges() if sg[u] == sg[v] and u != v]
    bridges = set(nx.bridges(nx.Graph(G.subgraph([w for w in G if sg[w] == sg[inside[0][0]]]))))
    # a bridge of the sub-graph holding the first local edge: removing it splits that sub-graph
    split = next(e for e in inside if (e in bridges or e[::-1] in bridges))
    removed = [split] + [inside[i] for i in rng.choice(len(inside), 6, replace=False) if inside[i] != split]
    vertices = sorted(G)
    cases = {"same subgraph": lambda u, v: sg[u] == sg[v],
             "same partition": lambda u, v: sg[u] != sg[v] and part[u] == part[v],
             "across partitions": lambda u, v: part[u] != part[v]}
    added = []
    for test in cases.values():
        pairs = [(u, v) for u in vertices for v in vertices
                 if u != v and test(u, v) and not G.has_edge(u, v) and (u, v) not in added]
        assert pairs, "the graph has no pair for one of the placement cases"
        for i in rng.choice(len(pairs), min(3, len(pairs)), replace=False):
            added.append(pairs[i])
    added.append((vertices[3], vertices[3]))
    return removed, added


def _instance_graph(G, removed, added, weights):
    H = G.copy()
    H.remove_edges_from(removed)
    H.add_weighted_edges_from((u, v, w) for (u, v), w in zip(added, weights))
    return H


@pytest.fixture(scope="module", params=[False, True], ids=["undirected", "directed"])
def changed(request, spark, tmp_path_factory):
    """(template G, instance H, graph, instance id) with weights on template and added edges."""
    directed = request.param
    G = graphs.random_graph(70, 110, seed=4, directed=directed)
    g = graphs.ingest_nx(G, tmp_path_factory.mktemp("topology") / "g.gofs", spark, 3)
    removed, added = _changes(G, g, seed=1)
    weights = np.round(np.random.default_rng(2).uniform(0.5, 3.0, len(added)), 3)
    g.append_instances([
        Instance(0.0, 1.0, removed_edges=pd.DataFrame(removed, columns=["src", "dst"]),
                 added_edges=pd.DataFrame({"src": [u for u, _ in added], "dst": [v for _, v in added],
                                           "weight": weights})),
        Instance(1.0, 2.0)])
    H = _instance_graph(G, removed, added, weights)
    return G, H, g, 0


def test_a_removed_edge_splits_a_subgraph_into_pieces(changed):
    G, H, g, iid = changed
    sg = graphs.vertex_subgraphs(g)
    pieces = {s: nx.number_weakly_connected_components(H.subgraph([v for v in H if sg[v] == s]))
              if H.is_directed() else nx.number_connected_components(H.subgraph([v for v in H if sg[v] == s]))
              for s in set(sg.values())}
    assert max(pieces.values()) > 1


def test_components_follow_the_instance_topology(changed):
    G, H, g, iid = changed
    on_instance = graphs.as_partition(graphs.column(g.connected_components(instance=iid, progress=False),
                                                    "component"))
    assert on_instance == graphs.weak_components(H)
    assert on_instance != graphs.weak_components(G)
    on_template = g.connected_components(progress=False)
    assert graphs.as_partition(graphs.column(on_template, "component")) == graphs.weak_components(G)


def test_both_transports_agree_on_an_instance(changed):
    _, H, g, iid = changed
    jobs = g.connected_components(instance=iid, transport="jobs", progress=False)
    assert graphs.as_partition(graphs.column(jobs, "component")) == graphs.weak_components(H)


def test_sssp_uses_added_edges_and_their_weights(changed):
    G, H, g, iid = changed
    source = sorted(H)[0]
    got = graphs.column(g.sssp(source, weight="weight", instance=iid, progress=False), "distance")
    expected = nx.single_source_dijkstra_path_length(H, source, weight="weight")
    assert {v for v, d in got.items() if np.isfinite(d)} == set(expected)
    for v, d in expected.items():
        assert got[v] == pytest.approx(d, rel=1e-12)


def test_pagerank_on_an_instance_equals_networkx(changed):
    _, H, g, iid = changed
    got = graphs.column(g.pagerank(instance=iid, tol=1e-10, max_iter=200, progress=False), "pagerank")
    expected = nx.pagerank(H, weight=None, tol=1e-10, max_iter=200)
    for v, r in expected.items():
        assert got[v] == pytest.approx(r, abs=1e-9)


def test_time_series_lanes_each_see_their_own_topology(changed):
    G, H, g, _ = changed
    result = run_independent(g, ConnectedComponents(), instances=[0, 1], progress=False)
    rows = result.dataframe.toPandas()
    for iid, expected in ((0, H), (1, G)):
        labels = dict(rows[rows["instance"] == iid][["id", "component"]].itertuples(index=False))
        assert graphs.as_partition(labels) == graphs.weak_components(expected)


def test_gopher_sees_a_hatrick_snapshot(spark, tmp_path):
    """Updates streamed through Hatrick, snapshotted as an instance: Gopher's components of that
    instance equal the stream's live components."""
    G = nx.path_graph(40)
    G.add_edges_from([(0, 20), (5, 30)])
    g = graphs.ingest_nx(G, tmp_path / "stream.gofs", spark, 2)
    s = g.stream()
    updates = [("remove_edge", 9, 10), ("remove_edge", 24, 25), ("add_edge", 39, 12), ("add_edge", 2, 7),
               ("remove_edge", 0, 20), ("remove_edge", 5, 30), ("add_edge", 33, 33)]
    s.push([{"op": op, "src": u, "dst": v, "producer": "p", "seq": i, "time": float(i)}
            for i, (op, u, v) in enumerate(updates)])
    instance = s.snapshot()
    g.refresh()
    live = graphs.as_partition(dict(s.connected_components()[["id", "component"]].itertuples(index=False)))
    stored = graphs.as_partition(graphs.column(g.connected_components(instance=instance, progress=False),
                                               "component"))
    assert stored == live
    assert len(live) == 2


def test_an_instance_must_be_one_known_id(changed):
    _, _, g, _ = changed
    with pytest.raises(InputError, match="no instance 7"):
        g.connected_components(instance=7, progress=False)
    with pytest.raises(InputError, match="one instance id"):
        g.connected_components(instance=[0, 1], progress=False)


def test_tdsp_follows_each_instance_topology(spark, tmp_path):
    """Sequential TDSP over instances that each remove some road segments and open new ones:
    a segment is usable only during the instances that have it."""
    from types import SimpleNamespace

    import pyarrow as pa

    from goffish.generators import road_network, road_travel_times
    from tests.test_tdsp import reference_tdsp

    graph, hours, step = road_network(300, seed=21), 6, 10.0
    g = graphs.ingest_input(graph, tmp_path / "road.gofs", spark, 3)
    tables = road_travel_times(graph, hours, seed=21)
    src, dst = graph.edges.column("src").to_numpy(), graph.edges.column("dst").to_numpy()
    rng = np.random.default_rng(3)
    extra = rng.integers(0, graph.vertices.num_rows, (4, 2))
    extra = extra[extra[:, 0] != extra[:, 1]]
    windows, union_times, instances = [], [], []
    for h in range(hours):
        start, end = h * step, (h + 1) * step
        gone = rng.random(len(src)) < 0.1
        opened = rng.random(len(extra)) < 0.6
        extra_times = np.round(rng.uniform(0.5, 4.0, len(extra)), 2)
        instances.append(Instance(start, end, edge_values=tables[h],
                                  removed_edges=pd.DataFrame({"src": src[gone], "dst": dst[gone]}),
                                  added_edges=pd.DataFrame({"src": extra[opened, 0], "dst": extra[opened, 1],
                                                            "travel_time": extra_times[opened]})))
        times = np.where(gone, np.inf, tables[h].column("travel_time").to_numpy())
        union_times.append(pa.table({"travel_time": np.r_[times, np.where(opened, extra_times, np.inf)]}))
        windows.append((start, end))
    g.append_instances(instances)
    union = SimpleNamespace(directed=False, edges=pa.table({"src": np.r_[src, extra[:, 0]],
                                                            "dst": np.r_[dst, extra[:, 1]]}))
    got = {row["id"]: row["arrival"] for row in g.tdsp(0, 0.0, progress=False).dataframe.collect()}
    expected = reference_tdsp(union, union_times, windows, 0, 0.0)
    assert got == pytest.approx({v: expected.get(v, np.inf) for v in got}, abs=1e-9)
    template_only = reference_tdsp(graph, tables, windows, 0, 0.0)
    assert any(abs(got[v] - template_only.get(v, np.inf)) > 1e-9 for v in got)


def test_goffish_run_on_an_instance(changed, tmp_path):
    import pyarrow.parquet as pq

    from goffish.cli import main

    _, H, g, iid = changed
    out = str(tmp_path / "cc")
    assert main(["run", "cc", g.path, "--out", out, "--instance", str(iid), "--quiet"]) == 0
    table = pq.read_table(out)
    labels = dict(zip(table.column("id").to_pylist(), table.column("component").to_pylist()))
    assert graphs.as_partition(labels) == graphs.weak_components(H)


def test_louvain_on_an_instance_scores_the_instance_edges(changed):
    G, H, g, iid = changed
    result = g.louvain(instance=iid, progress=False)
    labels = graphs.column(result, "community")
    U = nx.Graph(H)                                  # directed graphs count as undirected, weight 1
    nx.set_edge_attributes(U, 1.0, "weight")
    communities = [set(c) for c in graphs.as_partition(labels)]
    assert result.modularity[-1] == pytest.approx(nx.community.modularity(U, communities, weight=None), abs=1e-9)
    assert abs(result.modularity[-1] - nx.community.modularity(nx.Graph(G), communities, weight=None)) > 1e-6
    assert result.modularity[-1] >= 0.95 * nx.community.modularity(
        U, nx.community.louvain_communities(U, weight=None, seed=0), weight=None)


def test_betweenness_of_an_instance_uses_its_edges(changed):
    G, H, g, iid = changed
    got = graphs.column(g.betweenness(instance=iid, progress=False), "betweenness")
    expected = nx.betweenness_centrality(H)
    assert set(got) == set(expected)
    for v, b in expected.items():
        assert got[v] == pytest.approx(b, rel=1e-9, abs=1e-12), v
    assert got != pytest.approx(nx.betweenness_centrality(G), rel=1e-6, abs=1e-9)


def test_weights_of_an_instance_are_checked_on_its_own_edges(spark, tmp_path):
    """A negative weight on an edge an instance adds is refused before the run, naming the edge;
    a bad template edge the instance removes no longer counts."""
    G = graphs.random_graph(20, 30, seed=3)
    first = next(iter(G.edges()))
    G.edges[first]["weight"] = -2.0
    g = graphs.ingest_nx(G, tmp_path / "g.gofs", spark, 2)
    u, v = next((u, v) for u in sorted(G) for v in sorted(G) if u < v and not G.has_edge(u, v))
    g.append_instances([
        Instance(0.0, 1.0, removed_edges=pd.DataFrame([first], columns=["src", "dst"])),
        Instance(1.0, 2.0, removed_edges=pd.DataFrame([first], columns=["src", "dst"]),
                 added_edges=pd.DataFrame({"src": [u], "dst": [v], "weight": [-1.5]}))])
    H = G.copy()
    H.remove_edge(*first)
    got = graphs.column(g.betweenness(weight="weight", instance=0, progress=False), "betweenness")
    expected = nx.betweenness_centrality(H, weight="weight")
    assert got == pytest.approx(expected, rel=1e-9, abs=1e-12)
    for run in (lambda **kw: g.betweenness(weight="weight", **kw), lambda **kw: g.sssp(u, weight="weight", **kw)):
        with pytest.raises(InputError, match="negative edge weight -2"):
            run(progress=False)
        with pytest.raises(InputError, match=f"negative edge weight -1.5 .* e.g. edge {u} -> {v}|"
                                             f"negative edge weight -1.5 in 'weight'"):
            run(instance=1, progress=False)



def test_each_row_naming_a_parallel_edge_names_one_more_copy(tmp_path):
    """Three copies of 0-1 (given both ways round): two removal rows leave one; three value rows
    set all three; naming more copies than the graph has is refused, naming the edge."""
    import goffish
    from gofs.ingest.read_local import from_pandas

    edges = pd.DataFrame({"src": [0, 1, 0, 1], "dst": [1, 0, 1, 2]})
    g = goffish.ingest(from_pandas(edges, pd.DataFrame({"id": [0, 1, 2]})), str(tmp_path / "g.gofs"),
                       num_partitions=2, partitioner="hash")
    pair = pd.DataFrame({"src": [0, 1, 0], "dst": [1, 0, 1]})
    cut, valued = g.append_instances([Instance(0.0, removed_edges=pair[:2]),
                                      Instance(1.0, edge_values=pair.assign(w=[1.0, 2.0, 3.0]))])

    def stored(iid):
        frame = pd.concat([g.read_edge_partition(p, instance=iid).to_pandas() for p in range(g.num_partitions)])
        return sorted((min(u, v), max(u, v), w) for u, v, w in
                      zip(frame.src, frame.dst, frame.get("w", pd.Series(np.nan, frame.index)).fillna(-1)))

    assert stored(cut) == [(0, 1, -1), (1, 2, -1)]
    assert stored(valued) == [(0, 1, 1.0), (0, 1, 2.0), (0, 1, 3.0), (1, 2, -1)]
    with pytest.raises(InputError, match="removed edges row 4: edge 1 -> 0 is named 4 times, the graph has 3 copies"):
        g.append_instances([Instance(2.0, removed_edges=pd.DataFrame({"src": [0, 1, 0, 1], "dst": [1, 0, 1, 0]}))])
