"""SSSP's re-relaxation (issue 25): a sub-graph that already has distances lowers only where they
drop, and gets what a whole Dijkstra from the new seeds would give, bit for bit."""
import math

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.csgraph import dijkstra

import graphs
from algorithms.sssp import Potential, SeededArcs, lower_distances, seeded_dijkstra
from gopher.subgraph import Subgraph, _block_arcs, _block_entries, _csr_layout


def _graph(n: int, m: int, seed: int, directed: bool, integral: bool) -> sp.csr_matrix:
    """Random arcs (some parallel: the smallest length counts, as Subgraph.adjacency keeps it),
    lengths whole numbers 0..3 or reals with some zeros; undirected ones symmetric."""
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    lengths = rng.integers(0, 4, m).astype(float) if integral else np.where(rng.random(m) < 0.1, 0.0,
                                                                              rng.uniform(0.1, 5.0, m))
    if not directed:
        src, dst, lengths = np.r_[src, dst], np.r_[dst, src], np.r_[lengths, lengths]
    order = np.lexsort((lengths, dst, src))
    src, dst, lengths = src[order], dst[order], lengths[order]
    first = np.r_[True, (src[1:] != src[:-1]) | (dst[1:] != dst[:-1])]
    indptr = np.r_[0, np.cumsum(np.bincount(src[first], minlength=n))]
    return sp.csr_matrix((lengths[first], dst[first], indptr), shape=(n, n))      # explicit zeros are arcs


def _whole_dijkstra(adjacency, seeds, seed_dist) -> np.ndarray:
    """The plain way: every vertex from the seeds, through a virtual source."""
    n = adjacency.shape[0]
    rows = np.r_[np.repeat(np.arange(n), np.diff(adjacency.indptr)), np.full(len(seeds), n)]
    augmented = sp.csr_matrix((np.r_[adjacency.data, seed_dist], (rows, np.r_[adjacency.indices, seeds])),
                              shape=(n + 1, n + 1))
    augmented.sum_duplicates()
    return dijkstra(augmented, directed=True, indices=n)[:n]


@pytest.mark.parametrize("kept", [False, True])
@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("integral", [True, False])
def test_lowering_round_after_round_equals_a_whole_dijkstra_each_time(directed, integral, kept):
    """``kept``: one :class:`Potential` across the rounds (as a run keeps it), taken afresh only
    when too stale: the same distances as a potential taken each round."""
    n = 400
    adjacency = _graph(n, 700 if directed else 450, seed=11 + directed + 2 * integral, directed=directed,
                       integral=integral)
    rng = np.random.default_rng(3)
    dist = np.full(n, np.inf)
    potential = Potential.of(adjacency) if kept else None
    taken = []
    first = np.array([int(np.argmax(np.diff(adjacency.indptr)))])
    regions = []
    for round_ in range(12):
        if round_ in (0, 8):             # the best-connected vertex, from nowhere, then far lower: a big region
            seeds = first
            seed_dist = np.array([30.0]) if round_ == 0 else np.maximum(dist[first] - 25.0, 0.0)
        elif round_ == 4:                # nothing better than what the seeds have
            seeds = rng.choice(n, 3, replace=False)
            seed_dist = dist[seeds] + 1.0
        else:                            # mostly a little below what a seed has (a boundary improves), some new
            seeds = rng.choice(n, int(rng.integers(1, 6)), replace=False)
            seed_dist = np.where(np.isfinite(dist[seeds]), dist[seeds] - rng.choice([0.0, 1.0, 2.0, 7.0], len(seeds)),
                                 rng.integers(0, 40, len(seeds)))
            seed_dist = np.maximum(seed_dist if integral else seed_dist - rng.random(len(seeds)), 0.0)
        expected = np.minimum(dist, _whole_dijkstra(adjacency, seeds, seed_dist))
        before = dist.copy()
        lowered = lower_distances(adjacency, dist, seeds, seed_dist, integral, potential)
        np.testing.assert_array_equal(dist, expected)
        np.testing.assert_array_equal(lowered, expected < before)
        regions.append(int(lowered.sum()))
        if kept:
            taken.append(potential.stale == int(lowered.sum()))
    # none lowered, a few, more than half: every path through the function ran
    assert regions[4] == 0 and max(regions[1:]) > n // 2 and any(0 < r < n // 10 for r in regions), regions
    if kept:                             # the kept potential served some rounds and was taken afresh in others
        assert not all(taken[1:]) and any(taken[1:]), taken


@pytest.mark.parametrize("integral", [True, False])
def test_a_kept_potential_serves_distances_restored_from_an_earlier_checkpoint(integral):
    """A restart puts back older (higher) distances: the potential taken from later ones is not above
    them, so it is taken afresh, and the lowering still equals a whole Dijkstra."""
    n = 300
    adjacency = _graph(n, 400, seed=21, directed=False, integral=integral)
    potential = Potential.of(adjacency)
    dist = np.full(n, np.inf)
    lower_distances(adjacency, dist, np.array([0]), np.array([50.0]), integral, potential)
    checkpoint = dist.copy()
    far = np.flatnonzero(np.isfinite(dist))[-5:]
    lower_distances(adjacency, dist, far, np.maximum(dist[far] - 20.0, 0.0), integral, potential)
    assert (dist < checkpoint).any()
    dist = checkpoint.copy()                           # resumed from the checkpoint
    seeds = np.flatnonzero(np.isfinite(dist))[:3]
    seed_dist = np.maximum(dist[seeds] - 3.0, 0.0)
    expected = np.minimum(dist, _whole_dijkstra(adjacency, seeds, seed_dist))
    lower_distances(adjacency, dist, seeds, seed_dist, integral, potential)
    np.testing.assert_array_equal(dist, expected)
    assert np.array_equal(potential.values[np.isfinite(checkpoint)], checkpoint[np.isfinite(checkpoint)])


def test_whole_lengths_beyond_exact_floats_take_the_marked_region_path():
    """Whole lengths whose sums float64 cannot hold exactly: the region is only marked, then lowered
    by Dijkstra over its own arcs."""
    adjacency = _graph(200, 400, seed=5, directed=False, integral=True)
    adjacency.data = adjacency.data * 2.0 ** 50
    dist = np.full(200, np.inf)
    lower_distances(adjacency, dist, np.array([0]), np.array([0.0]), True)
    seeds, seed_dist = np.array([150, 7]), np.maximum(dist[[150, 7]] - 2.0 ** 51, 0.0)
    expected = np.minimum(dist, _whole_dijkstra(adjacency, seeds, seed_dist))
    lower_distances(adjacency, dist, seeds, seed_dist, True)
    np.testing.assert_array_equal(dist, expected)


def test_whole_lengths_with_a_fraction_from_a_cut_edge_are_lowered_exactly():
    """Local lengths whole, a seed's distance not (it came over a cut edge of fractional length):
    no exact sums to rely on, and an improvement under one is still made."""
    adjacency = _graph(200, 300, seed=6, directed=False, integral=True)
    dist = np.full(200, np.inf)
    lower_distances(adjacency, dist, np.array([0]), np.array([3.0]), True)
    seeds = np.flatnonzero(np.isfinite(dist) & (dist > 2))[:3]
    seed_dist = dist[seeds] - 0.25
    expected = np.minimum(dist, _whole_dijkstra(adjacency, seeds, seed_dist))
    lowered = lower_distances(adjacency, dist, seeds, seed_dist, True)
    np.testing.assert_array_equal(dist, expected)
    assert lowered.sum() >= 3


@pytest.mark.parametrize("directed", [False, True])
def test_kept_arcs_take_each_dijkstras_seeds_into_their_room_without_copying_the_arcs(directed):
    """A :class:`SeededArcs` kept between Dijkstras (a potential's) writes each call's seeds after the
    arcs: while they fit, no buffer is made anew; more seeds grow the room; every call gives what a
    whole Dijkstra from those seeds gives, the arcs left as they were."""
    n = 300
    adjacency = _graph(n, 500, seed=31 + directed, directed=directed, integral=False)
    arcs = SeededArcs(adjacency, room=4)
    arcs.arc_lengths[:] = adjacency.data
    held = arcs.indices, arcs.lengths
    rng = np.random.default_rng(2)
    for count, limit, grows in [(4, np.inf, False), (1, 3.0, False), (3, np.inf, False), (40, np.inf, True),
                                (2, 5.0, False), (40, np.inf, False)]:
        seeds = rng.choice(n, count, replace=False)
        seed_dist = rng.uniform(0.0, 4.0, count)
        got = arcs.distances(seeds, seed_dist, limit)
        expected = _whole_dijkstra(adjacency, seeds, seed_dist)
        np.testing.assert_array_equal(got, np.where(expected <= limit, expected, np.inf))
        np.testing.assert_array_equal(seeded_dijkstra(adjacency, seeds, seed_dist, limit), got)
        assert (arcs.indices is not held[0], arcs.lengths is not held[1]) == (grows, grows)
        held = arcs.indices, arcs.lengths
    assert len(arcs.indices) == adjacency.nnz + 40 and arcs.nbytes > nbytes_of(adjacency)
    np.testing.assert_array_equal(arcs.indices[:adjacency.nnz], adjacency.indices)
    np.testing.assert_array_equal(arcs.arc_lengths, adjacency.data)


def nbytes_of(matrix) -> int:
    return matrix.data.nbytes + matrix.indices.nbytes + matrix.indptr.nbytes


@pytest.fixture(scope="module")
def grid(spark, tmp_path_factory):
    """A 24 x 24 grid in 5 METIS partitions, lengths 1..3 with a few long ones (``whole``; ``length``
    adds a fraction): a partition first reached the long way round hears of a shorter way later."""
    G = nx.grid_2d_graph(24, 24)
    G = nx.convert_node_labels_to_integers(G)
    rng = np.random.default_rng(8)
    for u, v in G.edges:
        G[u][v]["whole"] = float(rng.choice([1.0, 2.0, 3.0, 40.0], p=[0.45, 0.3, 0.2, 0.05]))
        G[u][v]["length"] = G[u][v]["whole"] + rng.random() * 0.5
    path = tmp_path_factory.mktemp("sssp") / "grid.gofs"
    return G, graphs.ingest_nx(G, path, spark, 5, "metis")


@pytest.mark.parametrize("weight", ["length", "whole", None])
def test_sssp_on_a_grid_whose_boundaries_improve_later_equals_networkx(grid, weight):
    G, store = grid
    result = store.sssp(0, weight=weight, progress=False)
    got = graphs.column(result, "distance")
    expected = nx.single_source_dijkstra_path_length(G, 0, weight=weight) if weight else \
        {v: float(d) for v, d in nx.single_source_shortest_path_length(G, 0).items()}
    wrong = {v: (got[v], expected[v]) for v in G.nodes if got[v] != expected[v]
             and not (weight and math.isclose(got[v], expected[v], rel_tol=1e-12))}
    assert not wrong, f"{len(wrong)} wrong distances, e.g. {list(wrong.items())[:5]}"
    # some sub-graph heard again after it had distances: more relaxations than sub-graphs to reach
    relaxing = sum(s.active_subgraphs for s in result.metrics.supersteps[1:])
    assert relaxing > store.num_subgraphs - 1


@pytest.mark.parametrize("symmetric", [False, True])
def test_a_local_csr_holds_each_arc_once_with_its_smallest_length(symmetric):
    """What ``Subgraph.adjacency`` builds from its layout: one entry per (row, column), columns in
    order within each row, the smallest length of parallel arcs (self-loops included)."""
    rng = np.random.default_rng(5)
    n, m = 40, 600                                   # many parallel arcs and self-loops
    src, dst, length = rng.integers(0, n, m), rng.integers(0, n, m), rng.random(m)
    edge, starts, indptr, indices = _csr_layout(src, dst, n, symmetric)
    got = sp.csr_matrix((np.fmin.reduceat(length[edge], starts), indices, indptr), shape=(n, n))
    if symmetric:
        src, dst, length = np.r_[src, dst], np.r_[dst, src], np.r_[length, length]
    expected = np.full((n, n), np.inf)
    np.minimum.at(expected, (src, dst), length)
    assert got.has_sorted_indices and got.nnz == np.isfinite(expected).sum()
    dense = np.full((n, n), np.inf)
    dense[np.repeat(np.arange(n), np.diff(got.indptr)), got.indices] = got.data
    np.testing.assert_array_equal(dense, expected)


def test_a_hop_count_matrix_has_the_weighted_ones_arcs_each_of_length_one(grid):
    """Without a weight, ``Subgraph.adjacency`` takes only its block's arcs (no lengths to take
    the smallest of): every local edge both ways, once, of length 1.0, as with a weight."""
    from gofs.bundle import load_partition

    G, store = grid
    ids = store.vertex_ids.to_numpy()
    for p in range(store.num_partitions):
        bundle = load_partition(store, p, edge_attributes=["whole"])
        for k in range(bundle.num_subgraphs):
            sg = Subgraph(bundle, k)
            hops, weighted = sg.adjacency(), sg.adjacency("whole")
            np.testing.assert_array_equal(hops.indptr, weighted.indptr)
            np.testing.assert_array_equal(hops.indices, weighted.indices)
            assert hops.data.dtype == np.float64 and (hops.data == 1.0).all()
            local = ids[sg.vertex_ids]
            rows = np.repeat(np.arange(sg.num_vertices), np.diff(hops.indptr))
            assert sorted(zip(local[rows].tolist(), local[hops.indices].tolist())) == \
                sorted((u, v) for u, v in nx.subgraph(G, local.tolist()).to_directed().edges)


def test_a_hop_count_matrix_reads_only_the_arcs_kept_for_its_partition(grid, tmp_path):
    """One sort keeps both parts of a partition's layout; a later process's hop-count matrix
    reads only its arcs, a weighted one the entries too (to take the smallest parallel length)."""
    from gofs.bundle import load_partition
    from gopher.cache import DiskCache

    _, store = grid
    disk = DiskCache(str(tmp_path / "kept"))

    def matrix(weight):                  # as a fresh process builds it: nothing held in memory
        asked = []
        sg = Subgraph(load_partition(store, 1, edge_attributes=["whole"]), 0,
                      kept=lambda key, build: asked.append(key[0]) or disk.get(("grid", 1, key), build))
        return sg.adjacency(weight), asked

    first, asked = matrix(None)
    assert asked == ["csr arcs", "csr entries"]
    again, asked = matrix(None)
    assert asked == ["csr arcs"] and (again != first).nnz == 0
    _, asked = matrix("whole")
    assert asked == ["csr arcs", "csr entries"]


@pytest.mark.parametrize("symmetric", [False, True])
def test_a_blocks_layout_taken_from_its_partitions_is_its_own(symmetric):
    """A sub-graph's rows of its partition's layout (``Subgraph.adjacency`` sorts once per
    partition) are the layout of its own edges: blocks of vertices whose edges stay inside, edges
    sorted by source as a bundle holds them, empty blocks and blocks without edges included."""
    rng = np.random.default_rng(7)
    bounds = np.array([0, 5, 5, 6, 30, 31, 50])           # vertices of each block
    src, dst = [], []
    for a, b in zip(bounds[:-1], bounds[1:]):
        if b - a > 1:                                     # parallel arcs and self-loops too
            m = 4 * (b - a)
            src.append(rng.integers(a, b, m))
            dst.append(rng.integers(a, b, m))
    src, dst = np.concatenate(src), np.concatenate(dst)
    order = np.argsort(src, kind="stable")
    src, dst = src[order], dst[order]
    edges = np.searchsorted(src, bounds)
    whole = _csr_layout(src, dst, bounds[-1], symmetric)
    for k in range(len(bounds) - 1):
        (v0, v1), (e0, e1) = bounds[k:k + 2], edges[k:k + 2]
        got = (*_block_entries(whole[:2], whole[2], v0, v1, e0), *_block_arcs(whole[2:], v0, v1))
        own = _csr_layout(src[e0:e1] - v0, dst[e0:e1] - v0, v1 - v0, symmetric)
        for a, b in zip(got, own):
            np.testing.assert_array_equal(a, b)
