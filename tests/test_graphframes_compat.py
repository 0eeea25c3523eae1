"""goffish.graphframes.GraphFrame against the real GraphFrames 0.8.2 on the same graphs."""
import networkx as nx
import pytest
from pyspark.sql import functions as F

from algorithms import baselines as bl
from goffish.graphframes import GraphFrame

# weak components {0..5} (a self-loop, dangling 5), {6, 7, 8}, {9, 10, 12}, isolated 11 and 13
N = 14
EDGES = [(0, 1, 2.0), (1, 2, 1.5), (2, 0, 0.5), (2, 3, 4.0), (0, 3, 7.0), (3, 4, 1.0), (4, 5, 0.25),
         (1, 5, 9.0), (3, 3, 1.0), (6, 7, 1.0), (7, 8, 2.0), (9, 10, 3.0), (12, 9, 1.0)]


@pytest.fixture(scope="module")
def graphs(spark):
    from sparkshim.graphframes import require_graphframes

    vertices = spark.createDataFrame([(i, f"v{i}") for i in range(N)], "id long, name string")
    edges = spark.createDataFrame(EDGES, "src long, dst long, length double")
    return GraphFrame(vertices, edges), require_graphframes()(vertices, edges)


def _rows(df, *columns):
    return sorted(tuple(row[c] for c in columns) for row in df.collect())


def _partition(df, label):
    groups = {}
    for row in df.collect():
        groups.setdefault(row[label], set()).add(row["id"])
    return sorted(map(sorted, groups.values()))


def _types(df):
    return [(f.name, f.dataType.simpleString()) for f in df.schema.fields]


def test_connected_components_partition_and_columns_equal_graphframes(spark, graphs):
    ours, real = graphs
    with bl._aqe_disabled(spark):
        expected = real.connectedComponents()
        assert _types(ours.connectedComponents(checkpointInterval=2)) == _types(expected)
        assert _partition(ours.connectedComponents(), "component") == _partition(expected, "component")


def test_pagerank_equals_graphframes(spark, graphs):
    ours, real = graphs
    converged = ours.pageRank(resetProbability=0.15, tol=1e-7)
    expected = real.pageRank(resetProbability=0.15, tol=1e-7)
    assert _types(converged.vertices) == _types(expected.vertices)
    got, want = dict(_rows(converged.vertices, "id", "pagerank")), dict(_rows(expected.vertices, "id", "pagerank"))
    assert got.keys() == want.keys()
    assert all(abs(got[v] - want[v]) < 1e-4 * want[v] for v in want)
    fixed = ours.pageRank(maxIter=5)
    assert _rows(fixed.edges, "src", "dst", "length", "weight") == \
        _rows(real.pageRank(maxIter=5).edges, "src", "dst", "length", "weight")
    assert sum(r for _, r in _rows(fixed.vertices, "id", "pagerank")) == pytest.approx(N)
    with pytest.raises(ValueError, match="exactly one of maxIter or tol"):
        ours.pageRank(maxIter=5, tol=0.1)


def test_shortest_paths_equal_graphframes(graphs):
    ours, real = graphs
    landmarks = [0, 3, 9, 99]
    got = ours.shortestPaths(landmarks=landmarks)
    expected = real.shortestPaths(landmarks=landmarks)
    assert [name for name, _ in _types(got)] == [name for name, _ in _types(expected)]
    assert _types(got) == _types(expected)
    assert _rows(got, "id", "distances") == _rows(expected, "id", "distances")


def test_weighted_shortest_paths_equal_networkx_on_the_reversed_graph(graphs):
    ours, _ = graphs
    reverse = nx.DiGraph()
    reverse.add_nodes_from(range(N))
    reverse.add_weighted_edges_from((v, u, w) for u, v, w in EDGES)
    got = dict(_rows(ours.shortestPaths([0, 9], weight="length"), "id", "distances"))
    for landmark in (0, 9):
        want = nx.single_source_dijkstra_path_length(reverse, landmark)
        assert {v: d[landmark] for v, d in got.items() if landmark in d} == pytest.approx(want)


def test_degrees_equal_graphframes(graphs):
    ours, real = graphs
    for name in ("degrees", "inDegrees", "outDegrees"):
        assert _types(getattr(ours, name)) == _types(getattr(real, name))
        assert _rows(getattr(ours, name), *getattr(real, name).columns) == \
            _rows(getattr(real, name), *getattr(real, name).columns)


def test_methods_not_accelerated_run_on_graphframes(spark, graphs):
    ours, real = graphs
    assert _rows(ours.triangleCount(), "id", "count") == _rows(real.triangleCount(), "id", "count")
    with bl._aqe_disabled(spark):
        assert _partition(ours.stronglyConnectedComponents(maxIter=10), "component") == \
            _partition(real.stronglyConnectedComponents(maxIter=10), "component")
    with pytest.raises(AttributeError, match="no attribute 'pageRankk'"):
        ours.pageRankk


def test_louvain_and_betweenness_which_graphframes_lacks(graphs):
    ours, _ = graphs
    directed = nx.DiGraph()
    directed.add_nodes_from(range(N))
    directed.add_edges_from((u, v) for u, v, _ in EDGES)
    got = dict(_rows(ours.betweenness(), "id", "betweenness"))
    assert got == pytest.approx(nx.betweenness_centrality(directed))
    communities = ours.louvain(seed=1)
    assert communities.columns == ["id", "name", "community"]
    partition = [set(c) for c in _partition(communities, "community")]
    undirected = directed.to_undirected()
    assert nx.community.modularity(undirected, partition) == pytest.approx(
        nx.community.modularity(undirected, nx.community.louvain_communities(undirected, seed=1)), abs=0.02)
    with pytest.raises(TypeError, match="unexpected keyword argument 'alpha'"):
        ours.louvain(alpha=1)


def test_from_graphframe_and_bad_columns(spark, graphs):
    _, real = graphs
    assert GraphFrame.from_graphframe(real).edges is real.edges
    with pytest.raises(ValueError, match="edges DataFrame has no column 'dst'"):
        GraphFrame(real.vertices, real.edges.select("src", F.col("dst").alias("to")))
