"""Instances that add vertices beyond the template: stored, read back, and run on by Gopher.

Instance 0 adds five vertices: one joined to the template, two joined only to each other, one
joined to the first, one isolated; some template edges are removed and some vertices get values.
Instance 1 adds two of them again (they keep their internal ids) and a new one, instance 2 adds
none, instance 3 adds the first one alone again. Every result is checked against NetworkX on the
instance's own graph.
"""
from __future__ import annotations

import networkx as nx
import numpy as np
import pandas as pd
import pytest

from algorithms.components import ConnectedComponents
from gofs.errors import InputError
from gofs.instances import Instance
from gofs.vids import ADDED_STRIDE
from gopher.timeseries import run_independent
from tests import graphs

NEW = [1000, 1001, 1002, 1003, 1004]


def _instances(G):
    """(instances, the graph of each instance) for template ``G``."""
    template = sorted(G)
    removed = list(G.edges())[:4]
    added0 = [(1000, template[5], 1.5), (1000, 1001, 2.0), (1002, 1003, 0.5), (template[9], template[20], 1.0)]
    added1 = [(1001, template[30], 1.0), (1005, 1001, 3.0), (1003, 1005, 1.0)]
    instances = [
        Instance(0.0, 1.0, added_vertices=pd.DataFrame({"id": NEW}),
                 removed_edges=pd.DataFrame(removed, columns=["src", "dst"]),
                 added_edges=pd.DataFrame(added0, columns=["src", "dst", "weight"]),
                 vertex_values=pd.DataFrame({"id": [1000, 1003, template[0]], "heat": [1.0, 3.0, 7.0]})),
        Instance(1.0, 2.0, added_vertices=pd.DataFrame({"id": [1005, 1001, 1003]}),
                 added_edges=pd.DataFrame(added1, columns=["src", "dst", "weight"])),
        Instance(2.0, 3.0),
        Instance(3.0, 4.0, added_vertices=pd.DataFrame({"id": [1000]}))]
    H0 = G.copy()
    H0.remove_edges_from(removed)
    H0.add_nodes_from(NEW)
    H0.add_weighted_edges_from(added0)
    H1 = G.copy()
    H1.add_nodes_from([1005, 1001, 1003])
    H1.add_weighted_edges_from(added1)
    H3 = G.copy()
    H3.add_node(1000)
    return instances, [H0, H1, G, H3]


@pytest.fixture(scope="module", params=[False, True], ids=["undirected", "directed"])
def grown(request, spark, tmp_path_factory):
    G = graphs.random_graph(60, 90, seed=8, directed=request.param)
    g = graphs.ingest_nx(G, tmp_path_factory.mktemp("grown") / "g.gofs", spark, 3)
    instances, expected = _instances(G)
    assert g.append_instances(instances) == [0, 1, 2, 3]
    return g, expected


def test_vertices_and_edges_of_an_instance_include_the_added_ones(grown):
    g, expected = grown
    for iid, H in enumerate(expected):
        ids = [r["id"] for r in g.vertices(instance=iid).select("id").collect()]
        assert sorted(ids) == sorted(H)
        edges = [(r["src"], r["dst"]) for r in g.edges(instance=iid).select("src", "dst").collect()]
        key = (lambda e: e) if H.is_directed() else (lambda e: tuple(sorted(e)))
        assert sorted(map(key, edges)) == sorted(map(key, H.edges()))
    heat = {r["id"]: r["heat"] for r in g.vertices(["heat"], instance=0).collect()}
    assert (heat[1000], heat[1003], heat[1001]) == (1.0, 3.0, None)


def test_an_added_vertex_keeps_its_internal_id_and_partition(grown):
    g, _ = grown
    first, again = (g.vids_of([1001, 1003], g.instance_entry(i)) for i in (0, 1))
    assert list(first) == list(again)
    assert (first >= g.num_vertices).all()
    assert g.vid_of(1000, g.instance_entry(0)) == g.vid_of(1000, g.instance_entry(3))
    placed = (g.vid_of(1000, g.instance_entry(0)) - g.num_vertices) // ADDED_STRIDE
    neighbour = g.vid_of(sorted(g.vertex_ids.to_pylist())[5])          # 1000's first template neighbour
    offsets = [p["vertex_offset"] for p in g.partitions]
    assert placed == np.searchsorted(offsets, neighbour, side="right") - 1
    with pytest.raises(InputError, match="unknown vertex 1004"):
        g.vid_of(1004, g.instance_entry(1))


def test_components_of_instances_with_added_vertices(grown):
    g, expected = grown
    for iid in (0, 1):
        for transport in ("resident", "jobs"):
            got = graphs.column(g.connected_components(instance=iid, transport=transport, progress=False),
                                "component")
            assert graphs.as_partition(got) == graphs.weak_components(expected[iid]), (iid, transport)


def test_sssp_from_an_added_vertex(grown):
    g, (H0, *_) = grown
    got = graphs.column(g.sssp(1000, weight="weight", instance=0, progress=False), "distance")
    expected = nx.single_source_dijkstra_path_length(H0, 1000, weight="weight")
    assert set(got) == set(H0)
    assert {v for v, d in got.items() if np.isfinite(d)} == set(expected)
    for v, d in expected.items():
        assert got[v] == pytest.approx(d, rel=1e-12)


def test_pagerank_counts_the_added_vertices(grown):
    g, (H0, *_) = grown
    got = graphs.column(g.pagerank(instance=0, tol=1e-10, max_iter=200, progress=False), "pagerank")
    expected = nx.pagerank(H0, weight=None, tol=1e-10, max_iter=200)
    assert set(got) == set(expected)
    for v, r in expected.items():
        assert got[v] == pytest.approx(r, abs=1e-9)


def test_time_series_lanes_see_each_instance_vertex_set(grown):
    g, expected = grown
    rows = run_independent(g, ConnectedComponents(), instances=[0, 1, 2, 3], progress=False).dataframe.toPandas()
    for iid, H in enumerate(expected):
        labels = dict(rows[rows["instance"] == iid][["id", "component"]].itertuples(index=False))
        assert graphs.as_partition(labels) == graphs.weak_components(H)


@pytest.mark.parametrize("method", ["louvain", "leiden"])
def test_louvain_on_an_instance_with_added_vertices(grown, method):
    g, (H0, *_) = grown
    result = g.louvain(instance=0, progress=False, method=method)
    labels = graphs.column(result, "community")
    assert set(labels) == set(H0)
    U = nx.Graph()                                   # directed: u->v and v->u add up on {u, v}
    U.add_nodes_from(H0)
    for u, v in H0.edges():
        U.add_edge(u, v, weight=U.get_edge_data(u, v, {"weight": 0})["weight"] + 1)
    communities = [set(c) for c in graphs.as_partition(labels)]
    assert result.modularity[-1] == pytest.approx(nx.community.modularity(U, communities, weight="weight"), abs=1e-9)


@pytest.mark.parametrize("added, match", [
    (pd.DataFrame({"id": [1, 2000]}), "added vertices row 1, field 'id': 1 is already a vertex of the template"),
    (pd.DataFrame({"id": [2000, 2000]}), "added vertices row 2, field 'id': duplicate vertex id 2000"),
    (pd.DataFrame({"id": [2000], "heat": [1.0]}), "only an 'id' column"),
    (pd.DataFrame({"id": ["x"]}), "ids are (large_)?string but the graph's ids are int64"),
])
def test_bad_added_vertices_are_refused_and_nothing_is_committed(grown, added, match):
    g, _ = grown
    before = len(g.refresh().instances)
    with pytest.raises(InputError, match=match):
        g.append_instances([Instance(5.0, 6.0, added_vertices=added)])
    assert len(g.refresh().instances) == before


def test_an_added_edge_may_only_name_vertices_of_its_instance(grown):
    g, _ = grown
    before = len(g.refresh().instances)
    with pytest.raises(InputError, match="added edges row 1, field 'dst': unknown vertex 1005"):
        g.append_instances([Instance(5.0, 6.0, added_vertices=pd.DataFrame({"id": [2000]}),
                                     added_edges=pd.DataFrame({"src": [2000], "dst": [1005]}))])
    assert len(g.refresh().instances) == before


def test_gopher_sees_new_vertices_of_a_hatrick_snapshot(spark, tmp_path):
    """A stream that adds vertices the template lacks: the snapshot stores them, and Gopher's
    components of that instance equal the stream's live ones."""
    G = nx.path_graph(30)
    g = graphs.ingest_nx(G, tmp_path / "stream.gofs", spark, 2)
    s = g.stream()
    updates = [{"op": "add_vertex", "id": 500}, {"op": "add_edge", "src": 500, "dst": 3},
               {"op": "add_edge", "src": 501, "dst": 502}, {"op": "remove_edge", "src": 14, "dst": 15},
               {"op": "add_vertex", "id": 503}]
    s.push([{**u, "producer": "p", "seq": i, "time": float(i)} for i, u in enumerate(updates)])
    instance = s.snapshot()
    g.refresh()
    assert s.snapshots[-1].added_vertices == 4
    live = graphs.as_partition(dict(s.connected_components()[["id", "component"]].itertuples(index=False)))
    stored = graphs.as_partition(graphs.column(g.connected_components(instance=instance, progress=False),
                                               "component"))
    assert stored == live
    assert {503} in [set(c) for c in live] and any({500, 3} <= c for c in live)


def test_tdsp_through_a_vertex_that_some_instances_add(spark, tmp_path):
    """Sequential TDSP where a hub vertex beyond the template (with fast spokes to far-apart
    vertices) exists in instances 1 and 3 only: its arrival carries over the instance without it."""
    import pyarrow as pa

    from goffish.generators import road_network, road_travel_times
    from tests.test_tdsp import reference_tdsp

    graph, hours, step, hub = road_network(200, seed=5), 4, 10.0, 10**6
    g = graphs.ingest_input(graph, tmp_path / "road.gofs", spark, 3)
    tables = road_travel_times(graph, hours, seed=5)
    n = graph.vertices.num_rows
    spokes = np.array([0, n // 3, n // 2, n - 1])
    instances, union_times, windows = [], [], []
    for h in range(hours):
        present = h in (1, 3)
        spoke_times = np.full(len(spokes), 0.5 if present else np.inf)
        instances.append(Instance(h * step, (h + 1) * step, edge_values=tables[h],
                                  added_vertices=pd.DataFrame({"id": [hub]}) if present else None,
                                  added_edges=pd.DataFrame({"src": [hub] * len(spokes), "dst": spokes,
                                                            "travel_time": spoke_times}) if present else None))
        union_times.append(pa.table({"travel_time": np.r_[tables[h].column("travel_time").to_numpy(), spoke_times]}))
        windows.append((h * step, (h + 1) * step))
    g.append_instances(instances)
    union = type("Union", (), {"directed": False, "edges": pa.table({
        "src": np.r_[graph.edges.column("src").to_numpy(), np.full(len(spokes), hub)],
        "dst": np.r_[graph.edges.column("dst").to_numpy(), spokes]})})
    got = {row["id"]: row["arrival"] for row in g.tdsp(0, 0.0, progress=False).dataframe.collect()}
    expected = reference_tdsp(union, union_times, windows, 0, 0.0)
    assert hub in got and np.isfinite(got[hub])
    assert got == pytest.approx({v: expected.get(v, np.inf) for v in got}, abs=1e-9)
    without_hub = reference_tdsp(graph, tables, windows, 0, 0.0)
    assert any(abs(got[v] - without_hub.get(v, np.inf)) > 1e-9 for v in got if v != hub)


def test_string_ids_beyond_the_template(spark, tmp_path):
    G = graphs.string_ids(graphs.random_graph(40, 60, seed=3))
    g = graphs.ingest_nx(G, tmp_path / "s.gofs", spark, 3)
    t = sorted(G)
    g.append_instances([Instance(0.0, 1.0, added_vertices=pd.DataFrame({"id": ["new1", "new2", "lone"]}),
                                 added_edges=pd.DataFrame({"src": ["new1", "new2"], "dst": [t[0], "new1"]}))])
    H = G.copy()
    H.add_nodes_from(["new1", "new2", "lone"])
    H.add_edges_from([("new1", t[0]), ("new2", "new1")])
    assert sorted(r["id"] for r in g.vertices(instance=0).collect()) == sorted(H)
    got = graphs.column(g.connected_components(instance=0, progress=False), "component")
    assert graphs.as_partition(got) == graphs.weak_components(H)
    distance = graphs.column(g.sssp("new2", instance=0, progress=False), "distance")
    assert distance == nx.single_source_shortest_path_length(H, "new2") | {
        v: np.inf for v in H if not nx.has_path(H, "new2", v)}


def test_betweenness_of_an_instance_with_added_vertices(grown):
    """Exact and weighted betweenness on instance 0's own graph (edges removed, vertices
    added, one isolated), and the top vertices of instance 1, against NetworkX."""
    g, (H0, H1, *_) = grown
    for weight in (None, "weight"):
        got = graphs.column(g.betweenness(weight=weight, instance=0, progress=False), "betweenness")
        expected = nx.betweenness_centrality(H0, weight=weight)
        assert set(got) == set(expected)
        for v, b in expected.items():
            assert got[v] == pytest.approx(b, rel=1e-9, abs=1e-12), (weight, v)
    top = g.betweenness(top=3, epsilon=0.2, instance=1, progress=False)
    exact = nx.betweenness_centrality(H1)
    third = sorted(exact.values(), reverse=True)[2]
    rows = top.dataframe.collect()
    assert len(rows) == 3 and all(exact[r["id"]] >= third - top.aggregated["epsilon"] for r in rows)
