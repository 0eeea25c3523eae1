"""Bad parameters of the public algorithms and bad instances: every case is refused with an
error naming the parameter or field and its value, writes nothing, and the graph stays readable.

One small graph serves every case: two 4-cliques joined by a bridge (METIS cuts the bridge),
with a good weight ``w`` and one attribute per kind of bad weight, set on the bridge.
"""
from __future__ import annotations

import math
from pathlib import Path

import networkx as nx
import numpy as np
import pyarrow as pa
import pytest

import goffish
import graphs
from gofs.errors import InputError

BRIDGE = (3, 4)
BAD_WEIGHTS = {"w_nan": math.nan, "w_inf": math.inf, "w_neg": -5.0, "w_null": None}


def _bridged_cliques() -> nx.Graph:
    G = nx.union(nx.complete_graph(4), nx.relabel_nodes(nx.complete_graph(4), lambda v: v + 4))
    G.add_edge(*BRIDGE)
    for u, v in G.edges():
        G[u][v]["w"] = 1.0 + (u + v) % 3
        for name in BAD_WEIGHTS:
            G[u][v][name] = 1.0
    for name, bad in BAD_WEIGHTS.items():
        G.edges[BRIDGE][name] = bad
    return G


def _files(root: Path) -> dict:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file() and p.name != "lock"}


@pytest.fixture(scope="module")
def bridged(spark, tmp_path_factory):
    G = _bridged_cliques()
    g = graphs.ingest_nx(G, tmp_path_factory.mktemp("faults-inputs") / "bridged.gofs", spark, 2)
    parts = graphs.vertex_subgraphs(g)
    assert g.num_partitions == 2 and parts[BRIDGE[0]] != parts[BRIDGE[1]], "the bridge must be a cut edge"
    return G, g


@pytest.fixture
def untouched(bridged):
    """Yields the graph; afterwards its files are byte for byte what they were and it still reads."""
    G, g = bridged
    before = _files(Path(g.path))
    yield g
    assert _files(Path(g.path)) == before
    again = goffish.open(g.path)
    assert again.num_vertices == G.number_of_nodes() and again.num_edges == G.number_of_edges()
    assert sum(again.read_vertex_partition(p).num_rows for p in range(again.num_partitions)) == len(G)


# --------------------------------------------------------------------------- issue 24, item 4: PageRank and Louvain weights

@pytest.mark.parametrize("attribute, message", [
    ("w_nan", r"'w_nan' has NaN values \(partition \d, e\.g\. edge 3 -> 4\)"),
    ("w_inf", r"infinite edge weight in 'w_inf' \(partition \d, e\.g\. edge 3 -> 4\)"),
    ("w_neg", r"negative edge weight -5\.0 in 'w_neg' \(partition \d, e\.g\. edge 3 -> 4\)"),
    ("w_null", r"'w_null' has missing values \(partition \d, e\.g\. edge 3 -> 4\)"),
])
@pytest.mark.parametrize("algorithm", ["pagerank", "louvain"])
def test_pagerank_and_louvain_refuse_bad_weights_on_cut_edges(untouched, monkeypatch, algorithm, attribute, message):
    """Item 4: NaN/inf/negative/missing weights (here on the cut edge, which Louvain's level-1 check
    never saw) are refused before any run, naming the attribute, the value and an edge."""
    import algorithms.louvain
    import algorithms.pagerank

    def no_run(*args, **kwargs):
        raise AssertionError("the run started before the weights were checked")

    monkeypatch.setattr(getattr(algorithms, algorithm), "run_program", no_run)
    with pytest.raises(InputError, match=message):
        getattr(untouched, algorithm)(weight=attribute, progress=False)


def test_pagerank_of_huge_weights_equals_networkx_on_scaled_weights(spark, tmp_path):
    """Item 4: weights whose sum overflows (1e308 + 1e308) gave NaN/lost rank; ranks are
    invariant under scaling a vertex's out-weights, so the oracle is NetworkX on weights / 1e308."""
    G = nx.gnm_random_graph(30, 80, seed=3, directed=True)
    for u, v in G.edges():
        G[u][v]["w"] = 1e308 / 3 * (1 + (u * v) % 3)
    g = graphs.ingest_nx(G, tmp_path / "huge.gofs", spark, 2)
    got = graphs.column(g.pagerank(weight="w", tol=1e-10, max_iter=300, progress=False), "pagerank")
    scaled = nx.DiGraph(G)
    for u, v in scaled.edges():
        scaled[u][v]["w"] /= 1e308
    expected = nx.pagerank(scaled, weight="w", tol=1e-10, max_iter=300)
    assert set(got) == set(expected)
    assert max(abs(got[v] - expected[v]) for v in expected) < 1e-9
    assert sum(got.values()) == pytest.approx(1.0, abs=1e-9)


def test_pagerank_of_an_empty_graph_is_empty_as_in_networkx(spark, tmp_path):
    g = graphs.ingest_nx(nx.Graph(), tmp_path / "empty.gofs", spark, 1)
    result = g.pagerank(progress=False)
    assert nx.pagerank(nx.Graph()) == {}
    assert result.dataframe.count() == 0 and result.dataframe.columns == ["id", "pagerank"]
