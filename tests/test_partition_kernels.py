"""The multilevel partitioner's kernels: heavy-edge clusters, summed repeats, METIS's CSR and boundary refinement."""
import os

import networkx as nx
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp

from gofs.partition import edge_cut, metis_partition
from gofs.partition.arrays import summed_repeats
from gofs.partition.boundary import _ROUNDS, _refine_task, shares
from gofs.partition.matching import heavy_edge_clusters
from gofs.partition.metis import _weighted_csr
from tests.test_partitioners import grid


def symmetric(n, src, dst, w):
    both = sp.csr_matrix((np.r_[w, w], (np.r_[src, dst], np.r_[dst, src])), shape=(n, n))
    return both.indptr.astype(np.int64), both.indices.astype(np.int64), both.data.astype(np.float64)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_heavy_edge_clusters_are_connected_light_and_few(seed):
    rng = np.random.default_rng(seed)
    graph = nx.gnm_random_graph(600, 1500, seed=seed)
    src, dst = np.array(graph.edges()).T
    w = rng.integers(1, 4, src.size).astype(np.float64)
    vw = rng.integers(1, 3, 600).astype(np.float64)
    label = heavy_edge_clusters(*symmetric(600, src, dst, w), vw, 12.0, 120, seed)
    assert label.min() == 0 and np.unique(label).size == label.max() + 1
    assert np.bincount(label, weights=vw).max() <= 12
    assert label.max() + 1 < 600 / 2                                  # several passes ran
    for c in np.unique(label):                                        # every cluster induces a connected graph
        members = np.flatnonzero(label == c)
        assert nx.is_connected(graph.subgraph(members.tolist()))


def test_heavy_edge_clusters_stop_at_the_wanted_count_and_leave_isolated_vertices_alone():
    n, src, dst = grid(20, drop=0.0)
    label = heavy_edge_clusters(*symmetric(n, src, dst, np.ones(src.size)), np.ones(n), 64.0, 100, 0)
    assert 50 <= label.max() + 1 <= 100          # a pass at most halves the count: it stops between 50 and 100
    alone = heavy_edge_clusters(np.zeros(4, np.int64), np.zeros(0, np.int64), np.zeros(0), np.ones(3), 8.0, 1, 0)
    np.testing.assert_array_equal(alone, [0, 1, 2])


def refine(n, src, dst, parts, k, capacity_slack=0.05, rounds=5, min_moves=0, groups=1):
    """The refinement tasks on every group of the boundary, their edge ends read from a band file
    as the band's tasks write them (:func:`gofs.partition.boundary._band_ends`)."""
    import tempfile

    cut = parts[src] != parts[dst]
    boundary = np.zeros(n, bool)
    boundary[src[cut]] = boundary[dst[cut]] = True
    u, v = np.r_[src, dst], np.r_[dst, src]
    keep = boundary[u]
    u, v = u[keep], v[keep]
    sizes = np.bincount(parts, minlength=k)
    capacity = max(-(-n // k), int((1 + capacity_slack) * n / k))
    with tempfile.TemporaryDirectory() as directory:
        band = os.path.join(directory, "band.parquet")
        pq.write_table(pa.table({"u": u, "v": v, "pu": parts[u].astype(np.int32), "pv": parts[v].astype(np.int32),
                                 "w": np.ones(u.size, np.int64), "cu": u}), band)
        os.makedirs(os.path.join(directory, "moves"))
        table = pa.Table.from_batches(list(_refine_task(
            [band], sizes, capacity, groups, rounds, min_moves, 0, os.path.join(directory, "moves"),
            [pa.RecordBatch.from_pydict({"id": np.arange(groups)})])))
        moves = [pq.read_table(os.path.join(directory, "moves", name))
                 for name in sorted(os.listdir(os.path.join(directory, "moves")))]
    assert len(moves) == groups          # every group had edge ends, and wrote its moves
    out = parts.copy()
    for moved in moves:
        out[moved.column("vid").to_numpy()] = moved.column("part").to_numpy()
    kind, a, b = (table.column(c).to_numpy() for c in ("kind", "a", "b"))
    per_round = np.zeros(rounds, np.int64)
    np.add.at(per_round, a[kind == _ROUNDS], b[kind == _ROUNDS])
    return out, capacity, per_round


@pytest.mark.parametrize("low, span", [(0, 40), (-7, 3), (0, 3_037_000_499), (5, 1 << 40), (-(1 << 62), 1 << 63)])
def test_summed_repeats_sum_each_pair_once_in_order_for_small_and_huge_spans(low, span):
    """Within an int64 key's span one sort of it, beyond it a lexsort: the same answer as
    grouping the pairs one by one."""
    rng = np.random.default_rng(span % 1000)
    picks = rng.integers(0, 12, (2, 300))
    offsets = {0, span - 1, *(int(x) for x in rng.integers(0, span - 1, 10, dtype=np.uint64))}
    values = np.array(sorted(low + offset for offset in offsets), np.int64)
    a, b = values[picks[0] % values.size], values[picks[1] % values.size]
    w = rng.integers(1, 5, a.size)
    expected = {}
    for x, y, z in zip(a.tolist(), b.tolist(), w.tolist()):
        expected[x, y] = expected.get((x, y), 0) + z
    sa, sb, sw = summed_repeats(a, b, w)
    assert list(zip(sa.tolist(), sb.tolist())) == sorted(expected)
    assert sw.tolist() == [expected[pair] for pair in sorted(expected)]
    assert all(column.size == 0 for column in summed_repeats(a[:0], b[:0], w[:0]))


def test_weighted_csr_is_both_directions_with_sorted_neighbours_whatever_the_order():
    rng = np.random.default_rng(3)
    graph = nx.gnm_random_graph(200, 700, seed=3)
    src, dst = np.array(graph.edges()).T
    w = rng.integers(1, 9, src.size)
    order = rng.permutation(src.size)
    xadj, adjncy, eweights = _weighted_csr(200, src[order], dst[order], w[order], np.int32)
    assert xadj.dtype == adjncy.dtype == eweights.dtype == np.int32
    for u in range(200):
        neighbours = adjncy[xadj[u]:xadj[u + 1]]
        assert neighbours.tolist() == sorted(graph.neighbors(u))
        weight = {(min(x, y), max(x, y)): z for x, y, z in zip(src.tolist(), dst.tolist(), w.tolist())}
        assert eweights[xadj[u]:xadj[u + 1]].tolist() == [weight[min(u, v), max(u, v)] for v in neighbours.tolist()]


def test_boundary_refinement_reaches_a_local_optimum_within_capacity():
    n, src, dst = grid(40, drop=0.1)
    parts = metis_partition(n, src, dst, 4, 0)
    rng = np.random.default_rng(1)
    noisy = parts.copy()
    flip = rng.random(n) < 0.05
    noisy[flip] = rng.integers(0, 4, flip.sum())
    refined, capacity, per_round = refine(n, src, dst, noisy, 4)
    assert edge_cut(refined, src, dst) < 0.6 * edge_cut(noisy, src, dst)
    sizes = np.bincount(refined, minlength=4)
    assert sizes.max() <= capacity and per_round[-1] == 0
    # no vertex gains by moving to a partition with room (checked against the whole graph)
    adjacency = sp.csr_matrix((np.ones(2 * src.size), (np.r_[src, dst], np.r_[dst, src])), shape=(n, n))
    weights = np.stack([adjacency @ (refined == p) for p in range(4)], axis=1)
    own = weights[np.arange(n), refined]
    room = sizes < capacity
    assert not np.any((weights[:, room].max(axis=1) > own) & (weights.max(axis=1) > own)
                      & (weights.argmax(axis=1) != refined) & room[weights.argmax(axis=1)])


def test_boundary_refinement_pushes_an_overfull_partition_down_to_capacity(monkeypatch):
    """Only boundary vertices move: an overflow smaller than the boundary is pushed out, the
    vertices that lose least first (greedy rounds alone); FM then straightens the jagged cut
    that leaves, into the grid's best cut between two columns, without refilling the partition."""
    import gofs.partition.boundary as boundary

    n, src, dst = grid(30, drop=0.0)
    parts = (np.arange(n) % 30 >= 14).astype(np.int32)     # columns 0-13 vs 14-29: 420 / 480 vertices
    monkeypatch.setattr(boundary, "FM_PASSES", 0)
    pushed, capacity, _ = refine(n, src, dst, parts, 2)
    assert capacity == 472 and np.bincount(pushed, minlength=2).tolist() == [428, 472]
    assert edge_cut(pushed, src, dst) <= edge_cut(parts, src, dst) + 8     # each pushed vertex costs at most 1
    monkeypatch.undo()
    smoothed, _, _ = refine(n, src, dst, parts, 2)
    assert np.bincount(smoothed, minlength=2).max() <= capacity
    assert edge_cut(smoothed, src, dst) == 30 < edge_cut(pushed, src, dst)     # a straight cut: one edge per row


@pytest.mark.parametrize("groups", [2, 3])
def test_tasks_refining_at_once_share_the_room_and_keep_the_capacity(groups):
    sizes = np.array([50, 40, 70, 60])
    limit, target = shares(sizes, 60, groups)
    assert np.all(np.minimum(limit - sizes, 0) == 0) and np.all((limit - sizes) * groups <= np.maximum(60 - sizes, 0))
    assert target[2] <= 70 - -(-10 // groups) and np.all(target[[0, 1, 3]] == limit[[0, 1, 3]])
    n, src, dst = grid(40, drop=0.1)
    noisy = metis_partition(n, src, dst, 4, 0)
    noisy[np.random.default_rng(2).random(n) < 0.1] = 3
    refined, capacity, _ = refine(n, src, dst, noisy, 4, groups=groups)
    assert np.bincount(refined, minlength=4).max() <= max(capacity, np.bincount(noisy, minlength=4).max())
    assert edge_cut(refined, src, dst) < edge_cut(noisy, src, dst)
