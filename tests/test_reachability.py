"""hatrick.reachability against NetworkX: whole-graph pairs (directed and undirected, sources in one
batch or many) and the per-sub-graph worklist spread the Gopher Reach program runs on cyclic graphs."""
import networkx as nx
import numpy as np
import scipy.sparse as sp
from hypothesis import given, settings, strategies as st

from hatrick import reachability
from hatrick.reachability import reachable_pairs, set_bits, source_bits, spread_bits

graphs = st.integers(1, 40).flatmap(lambda n: st.tuples(
    st.just(n),
    st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=3 * n),
    st.lists(st.integers(0, n - 1), min_size=0, max_size=n, unique=True),
    st.lists(st.integers(0, n - 1), min_size=0, max_size=n, unique=True)))


def oracle(n, edges, sources, sinks, directed) -> list:
    g = (nx.DiGraph if directed else nx.Graph)()
    g.add_nodes_from(range(n))
    g.add_edges_from(edges)
    wanted = set(sinks)
    return [(s, t) for s in sources for t in sorted((nx.descendants(g, s) | {s}) & wanted)]


@settings(max_examples=150, deadline=None)
@given(graph=graphs, directed=st.booleans())
def test_pairs_equal_networkx_in_source_then_sink_order(graph, directed):
    n, edges, sources, sinks = graph
    sources, sinks = sorted(sources), sorted(sinks)
    src = np.array([e[0] for e in edges], np.int64)
    dst = np.array([e[1] for e in edges], np.int64)
    s, t = reachable_pairs(n, src, dst, np.array(sources, np.int64), np.array(sinks, np.int64), directed)
    assert list(zip(s.tolist(), t.tolist())) == oracle(n, edges, sources, sinks, directed)


def test_sources_past_one_batch_and_one_word():
    """200 sources over a graph of long cycles and chains: several 64-bit words, and with a small
    table several batches, give NetworkX's pairs."""
    rng = np.random.default_rng(3)
    n = 600
    src, dst = rng.integers(0, n, 900), rng.integers(0, n, 900)
    sources, sinks = np.sort(rng.choice(n, 200, replace=False)), np.sort(rng.choice(n, 150, replace=False))
    expected = oracle(n, list(zip(src.tolist(), dst.tolist())), sources.tolist(), sinks.tolist(), True)
    before = reachability.TABLE_BYTES
    for table in (before, 8):                      # one batch of 4 words; batches of 64 sources
        reachability.TABLE_BYTES = table
        try:
            s, t = reachable_pairs(n, src, dst, sources, sinks)
        finally:
            reachability.TABLE_BYTES = before
        assert list(zip(s.tolist(), t.tolist())) == expected


@settings(max_examples=100, deadline=None)
@given(graph=graphs, split=st.integers(0, 40))
def test_worklist_spread_from_some_rows_then_the_rest_closes_the_bit_sets(graph, split):
    """As the Gopher program does: spread from the sources' rows, then OR more bits into some rows
    (as if they arrived from another partition) and spread again from those rows only; every
    vertex ends with exactly the sources that reach it (directed, cycles included)."""
    n, edges, sources, _ = graph
    first, later = sources[:split], sources[split:]
    src = np.array([e[0] for e in edges], np.int64)
    dst = np.array([e[1] for e in edges], np.int64)
    csr = sp.csr_matrix((np.ones(len(src), bool), (src, dst)), shape=(n, n))
    indptr, indices = csr.indptr.astype(np.int64), csr.indices.astype(np.int64)
    count = len(sources)
    bits = source_bits(n, np.array(first, np.int64), np.arange(len(first)), count)
    spread_bits(indptr, indices, bits, np.array(first, np.int64))
    arrived = source_bits(n, np.array(later, np.int64), np.arange(len(first), count), count)
    bits |= arrived
    spread_bits(indptr, indices, bits, np.array(later, np.int64))
    row, bit = set_bits(bits)
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    g.add_edges_from(edges)
    expected = sorted((v, i) for i, s in enumerate(sources) for v in nx.descendants(g, s) | {s})
    assert list(zip(row.tolist(), bit.tolist())) == expected
