"""Dataset generators: the structural properties each model promises, and their I/O."""
import gzip
import os

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from goffish.generators import (generate, lfr, rmat, road_network, road_travel_times,
                                social_posts, write_edge_list)


def endpoints(graph):
    return graph.edges.column("src").to_numpy(), graph.edges.column("dst").to_numpy()


def assert_simple(graph):
    """No self-loops, no repeated edges (in either orientation when undirected)."""
    src, dst = endpoints(graph)
    assert not np.any(src == dst)
    if not graph.directed:
        src, dst = np.minimum(src, dst), np.maximum(src, dst)
    assert np.unique(np.stack([src, dst]), axis=1).shape[1] == src.size


def degrees(graph):
    src, dst = endpoints(graph)
    return np.bincount(np.concatenate([src, dst]), minlength=graph.vertices.num_rows)


@pytest.fixture(scope="module")
def road():
    return road_network(20_000, seed=3)


def test_road_network_looks_like_a_road_network(road):
    n = 20_000
    src, dst = endpoints(road)
    assert road.vertices.column("id").to_pylist() == list(range(n))
    assert not road.directed
    assert 1.25 <= src.size / n <= 1.55
    adjacency = sp.coo_matrix((np.ones(src.size), (src, dst)), shape=(n, n))
    count, label = connected_components(adjacency, directed=False)
    assert count > 10
    assert np.bincount(label).max() > 0.5 * n
    assert_simple(road)
    assert (road.edges.column("length").to_numpy() > 0).all()
    assert road.edges.schema.field("length").type == pa.float64()
    assert {"x", "y"} <= set(road.vertex_attribute_names)


def test_road_network_is_deterministic(road):
    assert road_network(20_000, seed=3).edges.equals(road.edges)
    assert not road_network(20_000, seed=4).edges.equals(road.edges)


@pytest.mark.parametrize("n", [0, 1, 2, 7])
def test_road_network_tiny(n):
    graph = road_network(n)
    assert graph.vertices.num_rows == n
    assert_simple(graph)


def test_rmat_is_skewed_and_simple():
    graph = rmat(12, seed=5)
    assert graph.directed
    assert graph.vertices.num_rows == 4096
    assert_simple(graph)
    degree = degrees(graph)
    assert degree.max() > 10 * degree.mean()
    assert graph.edges.num_rows > 0.8 * 16 * 4096
    weight = graph.edges.column("weight").to_numpy()
    assert ((weight > 0) & (weight <= 1)).all()
    assert rmat(12, seed=5).edges.equals(graph.edges)


def test_rmat_undirected_keeps_one_orientation():
    graph = rmat(10, 8, seed=1, directed=False)
    src, dst = endpoints(graph)
    assert not graph.directed and (src < dst).all()
    assert_simple(graph)


@pytest.mark.parametrize("mu", [0.1, 0.4])
def test_lfr_mixing_matches_mu(mu):
    graph = lfr(5_000, mu=mu, seed=2)
    assert_simple(graph)
    src, dst = endpoints(graph)
    community = graph.vertices.column("community").to_numpy()
    assert graph.vertices.schema.field("community").type == pa.int64()
    assert abs(np.mean(community[src] != community[dst]) - mu) <= 0.1
    sizes = np.bincount(community)
    assert sizes.min() >= 20
    assert 6 <= degrees(graph).mean() <= 11


def test_travel_times_follow_the_day(road):
    hours = road_travel_times(road, 48, seed=1)
    assert len(hours) == 48
    times = np.stack([table.column("travel_time").to_numpy() for table in hours])
    assert all(table.column_names == ["travel_time"] for table in hours)
    assert times.shape == (48, road.edges.num_rows)
    assert (times > 0).all()
    mean = times.mean(axis=1)
    rush = mean[[7, 8, 9, 16, 17, 18, 31, 32, 41]].mean()
    night = mean[[1, 2, 3, 4, 25, 26, 27]].mean()
    assert rush > 1.2 * night
    assert np.array_equal(times, np.stack([t.column("travel_time").to_numpy()
                                           for t in road_travel_times(road, 48, seed=1)]))


def test_travel_times_need_length():
    with pytest.raises(ValueError, match="length"):
        road_travel_times(rmat(4), 2)


def carriers(table, tag):
    """Vertex rows whose hashtag list holds ``tag``."""
    column = table.column("hashtags").combine_chunks()
    rows = pc.list_parent_indices(column).to_numpy()
    return np.unique(rows[pc.equal(pc.list_flatten(column), tag).to_numpy(zero_copy_only=False)])


def test_memes_spread_only_along_edges():
    graph = lfr(3_000, seed=4)
    n = graph.vertices.num_rows
    tables = social_posts(graph, 12, hashtags=20, memes=3, seed=7)
    assert len(tables) == 12
    assert all(t.num_rows == n and t.schema.field("hashtags").type == pa.list_(pa.string())
               for t in tables)
    src, dst = endpoints(graph)
    adjacency = sp.coo_matrix((np.ones(2 * src.size), (np.r_[src, dst], np.r_[dst, src])),
                              shape=(n, n)).tocsr()
    for meme in range(3):
        posted = [carriers(t, f"#meme{meme}") for t in tables]
        first = next(i for i, rows in enumerate(posted) if rows.size)
        assert 1 <= posted[first].size <= 3
        earlier = np.zeros(n, dtype=bool)
        earlier[posted[first]] = True
        for rows in posted[first + 1:]:
            exposed = adjacency @ earlier.astype(float) > 0
            assert exposed[rows].all()
            earlier[rows] = True
        assert earlier.sum() > 3
    tags = pc.list_flatten(tables[0].column("hashtags")).to_pylist()
    assert tags.count("#tag0") > tags.count("#tag19")


def test_generate_dispatches_by_name():
    assert generate("road", 500, seed=2).edges.equals(road_network(500, seed=2).edges)
    assert generate("rmat", 6, seed=1, edge_factor=4).vertices.num_rows == 64
    assert generate("lfr", 400, seed=1, mu=0.2).vertices.num_rows == 400
    with pytest.raises(ValueError, match="lfr, rmat, road"):
        generate("smallworld", 10)


@pytest.mark.parametrize("name, attrs", [("g.txt.gz", True), ("g.txt", False)])
def test_write_edge_list_round_trip(tmp_path, name, attrs):
    graph = road_network(1_000, seed=6)
    path = str(tmp_path / name)
    write_edge_list(graph, path, attrs=attrs)
    assert os.listdir(tmp_path) == [name]
    opener = gzip.open if name.endswith(".gz") else open
    with opener(path, "rt") as f:
        header = [line for line in f if line.startswith("#")]
    assert "# Nodes: 1000 Edges: %d\n" % graph.edges.num_rows in header
    frame = pd.read_csv(path, sep=r"\s+", comment="#", header=None)
    expected = graph.edges.to_pandas() if attrs else graph.edges.select(["src", "dst"]).to_pandas()
    frame.columns = expected.columns
    pd.testing.assert_frame_equal(frame, expected)
