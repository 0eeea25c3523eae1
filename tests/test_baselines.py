"""GraphFrames baselines and igraph references against NetworkX on small graphs."""
import math

import networkx as nx
import numpy as np
import pytest

from algorithms import baselines as bl

# Weak components {0..5} (with a self-loop, a dangling vertex 5 when directed),
# {6, 7, 8}, {9, 10, 12}, isolated 11 and 13.
N = 14
EDGES = [(0, 1, 2.0), (1, 2, 1.5), (2, 0, 0.5), (2, 3, 4.0), (0, 3, 7.0), (3, 4, 1.0), (4, 5, 0.25),
         (1, 5, 9.0), (3, 3, 1.0), (6, 7, 1.0), (7, 8, 2.0), (9, 10, 3.0), (12, 9, 1.0)]
SRC = np.array([e[0] for e in EDGES])
DST = np.array([e[1] for e in EDGES])
W = np.array([e[2] for e in EDGES])


def _nx(directed, edges=EDGES, n=N):
    graph = nx.DiGraph() if directed else nx.Graph()
    graph.add_nodes_from(range(n))
    graph.add_weighted_edges_from(edges)
    return graph


@pytest.fixture(scope="module")
def frames(spark):
    vertices = spark.createDataFrame([(i,) for i in range(N)], "id long")
    edges = spark.createDataFrame(EDGES, "src long, dst long, weight double")
    return vertices, edges


def _column(df, name):
    return {row["id"]: row[name] for row in df.collect()}


def _partition(labels):
    groups = {}
    for vertex, label in labels.items():
        groups.setdefault(label, set()).add(vertex)
    return {frozenset(group) for group in groups.values()}


def test_graphframes_connected_components(frames):
    result = bl.graphframes_connected_components(*frames)
    expected = {frozenset(c) for c in nx.weakly_connected_components(_nx(True))}
    assert _partition(_column(result, "component")) == expected


@pytest.mark.parametrize("directed, string_ids", [(True, False), (False, True)])
def test_graphframes_shortest_paths(spark, frames, directed, string_ids):
    vertices, edges = frames
    name = (lambda v: f"v{v}") if string_ids else (lambda v: v)
    if string_ids:
        vertices = spark.createDataFrame([(name(v),) for v in range(N)], "id string")
        edges = spark.createDataFrame([(name(u), name(v)) for u, v, _ in EDGES], "src string, dst string")
    result = _column(bl.graphframes_shortest_paths(vertices, edges, source=name(0), directed=directed), "distance")
    hops = nx.single_source_shortest_path_length(_nx(directed), 0)
    assert result == {name(v): float(hops.get(v, math.inf)) for v in range(N)}


@pytest.mark.parametrize("directed, checkpoint_interval", [(True, 5), (False, 2)])
def test_graphframes_weighted_sssp(frames, directed, checkpoint_interval):
    result = bl.graphframes_weighted_sssp(*frames, source=0, directed=directed,
                                          checkpoint_interval=checkpoint_interval)
    result = _column(result, "distance")
    expected = nx.single_source_dijkstra_path_length(_nx(directed), 0)
    assert set(result) == set(range(N))
    for v in range(N):
        assert result[v] == pytest.approx(expected.get(v, math.inf), abs=1e-9)


def test_graphframes_weighted_sssp_bad_input(spark, frames):
    vertices, edges = frames
    negative = spark.createDataFrame([(0, 1, 1.0), (1, 2, -0.5)], "src long, dst long, weight double")
    with pytest.raises(ValueError, match="negative"):
        bl.graphframes_weighted_sssp(vertices, negative, source=0, directed=True)
    with pytest.raises(ValueError, match="source"):
        bl.graphframes_weighted_sssp(vertices, edges, source=99, directed=True)


def test_graphframes_pagerank_with_dangling_vertices_converges_to_networkx(frames):
    # Dangling vertices 5, 8, 10, 11, 13: GraphFrames' handling differs per iteration,
    # but the normalised fixed point is NetworkX's.
    result = _column(bl.graphframes_pagerank(*frames, directed=True, max_iter=30), "pagerank")
    expected = nx.pagerank(_nx(True), weight=None, tol=1e-12)
    assert sum(result.values()) == pytest.approx(1.0, abs=1e-12)
    for v in range(N):
        assert result[v] == pytest.approx(expected[v], abs=1e-4)


def test_graphframes_pagerank_undirected(spark):
    # Two triangles joined by an edge plus a self-loop: no dangling vertices.
    edges = [(0, 1), (1, 2), (2, 0), (2, 3), (3, 4), (4, 5), (5, 3), (4, 4)]
    vertices = spark.createDataFrame([(i,) for i in range(6)], "id long")
    frame = spark.createDataFrame(edges, "src long, dst long")
    result = _column(bl.graphframes_pagerank(vertices, frame, directed=False, max_iter=20), "pagerank")
    expected = nx.pagerank(_nx(False, [(u, v, 1.0) for u, v in edges], 6), tol=1e-12)
    for v in range(6):
        assert result[v] == pytest.approx(expected[v], abs=1e-3)


def test_igraph_components():
    expected = np.empty(N, dtype=np.int64)
    for label, component in enumerate(nx.weakly_connected_components(_nx(True))):
        expected[list(component)] = label
    labels = bl.igraph_components(N, SRC, DST)
    np.testing.assert_array_equal(bl.canonical_components(labels), bl.canonical_components(expected))


def test_canonical_components():
    np.testing.assert_array_equal(bl.canonical_components(np.array([7, 3, 7, 3, 9])), [0, 1, 0, 1, 4])
    np.testing.assert_array_equal(bl.canonical_components(np.array([], dtype=np.int64)), [])


@pytest.mark.parametrize("directed", [True, False])
@pytest.mark.parametrize("weighted", [True, False])
def test_igraph_sssp(directed, weighted):
    graph = _nx(directed)
    if weighted:
        expected = nx.single_source_dijkstra_path_length(graph, 0)
    else:
        expected = nx.single_source_shortest_path_length(graph, 0)
    result = bl.igraph_sssp(N, SRC, DST, W if weighted else None, source=0, directed=directed)
    np.testing.assert_allclose(result, [expected.get(v, math.inf) for v in range(N)], atol=1e-9, rtol=0)


def test_igraph_sssp_negative_weights():
    with pytest.raises(ValueError, match="weights >= 0"):
        bl.igraph_sssp(3, np.array([0, 1]), np.array([1, 2]), np.array([1.0, -1.0]), 0, True)


# Undirected with a self-loop differs: see test_igraph_pagerank_undirected_self_loop.
@pytest.mark.parametrize("directed, self_loop", [(True, True), (True, False), (False, False)])
@pytest.mark.parametrize("weighted", [True, False])
def test_igraph_pagerank_matches_networkx(directed, self_loop, weighted):
    edges = EDGES if self_loop else [e for e in EDGES if e[0] != e[1]]
    src, dst, w = (np.array(c) for c in zip(*edges))
    expected = nx.pagerank(_nx(directed, edges), weight="weight" if weighted else None, tol=1e-12, max_iter=1000)
    result = bl.igraph_pagerank(N, src, dst, directed, weights=w if weighted else None)
    np.testing.assert_allclose(result, [expected[v] for v in range(N)], atol=1e-6, rtol=0)


def test_igraph_pagerank_undirected_self_loop():
    # igraph counts an undirected self-loop twice, NetworkX once.
    result = bl.igraph_pagerank(N, SRC, DST, directed=False)
    graph = _nx(False, [(u, v, 1.0) for u, v, _ in EDGES])
    once = nx.pagerank(graph, tol=1e-12, max_iter=1000)
    assert max(abs(result[v] - once[v]) for v in range(N)) > 1e-3
    graph[3][3]["weight"] = 2.0
    twice = nx.pagerank(graph, tol=1e-12, max_iter=1000)
    np.testing.assert_allclose(result, [twice[v] for v in range(N)], atol=1e-6, rtol=0)


def test_igraph_pagerank_restores_openmp_threads():
    def threads():
        return [runtime.omp_get_max_threads() for runtime in bl._igraph_openmp()]

    before = threads()
    bl.igraph_pagerank(N, SRC, DST, directed=True)
    assert threads() == before
