"""The Hatrick benchmark measures what it claims: every run of ``--scaling`` streams the same
workload over the graph as built, and its live edges equal the workload replayed once."""
import argparse

import pytest

from benchmarks.bench_hatrick import COMMUNITY, EdgeWorkload, build_graph, scaling


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_every_scaling_run_starts_from_the_graph_as_built_after_forced_snapshots(tmp_path, spark):
    """A small buffer capacity makes each run overflow its buffer and snapshot into the graph; the
    next run must still start from the built graph (it once loaded the earlier runs' snapshots,
    so the workload's removals were refused and the later rows counted 2x and 3x the edges)."""
    n, m = 300, 600
    g, edges = build_graph(str(tmp_path / "g.gofs"), n, m, seed=0)
    args = argparse.Namespace(scaling=[1, 2], seed=0, batch=200, seconds=0.3, rate=2_000, max_batch=1_000,
                              rescale=False, capacity=500, graph="random", buckets="hash")
    rows = scaling(g, edges, n, args)
    assert set(rows) == {"1_workers", "2_workers", "in_driver"}
    for name, row in rows.items():
        assert row["snapshots"] >= 1, name                  # the capacity forced at least one
        assert (row["lost"], row["duplicated"], row["rejected"]) == (0, 0, 0), name
        assert row["live_edges"] == m, name                 # half adds, half removals of present edges


def test_the_community_graph_and_its_workload_keep_edges_inside_communities(tmp_path):
    """The locality graph: METIS partitions, stored and added edges mostly inside a community, the
    removals still the oldest present edges."""
    n, m = 4 * COMMUNITY, 8 * COMMUNITY
    g, edges = build_graph(str(tmp_path / "c.gofs"), n, m, seed=0, kind="community")
    assert g.manifest["partitioner"] == "metis" and g.num_partitions == 8
    assert 0.93 < ((edges.src // COMMUNITY) == (edges.dst // COMMUNITY)).mean() < 0.97
    work = EdgeWorkload(edges.src.to_numpy(), edges.dst.to_numpy(), n, 0, community=COMMUNITY)
    present = set(zip(work.q_src, work.q_dst))
    frame = work.batch(10_000)
    removed, added = frame[frame.op == "remove_edge"], frame[frame.op == "add_edge"]
    assert len(removed) == len(added) == 5_000
    assert set(zip(removed.src, removed.dst)) <= present
    assert 0.93 < ((added.src // COMMUNITY) == (added.dst // COMMUNITY)).mean() < 0.97
