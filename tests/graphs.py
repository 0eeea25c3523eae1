"""Small graph builders shared by the engine, algorithm and CLI tests.

Every builder returns a NetworkX graph (the test oracle) or a
``gofs.graph_input.GraphInput`` together with its NetworkX twin; ``ingest_nx``
and ``ingest_input`` store them as GoFS under a test's ``tmp_path`` and open
them on the test session. All builders are deterministic given ``seed``.
"""
from __future__ import annotations

import math

import networkx as nx
import numpy as np

import goffish
from gofs.graph_input import GraphInput
from gofs.ingest.read_local import from_networkx

INF = math.inf


# --------------------------------------------------------------------------- builders

def _weigh(G, seed: int, low: float = 0.5, high: float = 5.0, name: str = "weight"):
    """Give every edge (every parallel edge of a multigraph) a weight drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    if G.is_multigraph():
        for u, v, k in sorted(G.edges(keys=True)):
            G.edges[u, v, k][name] = float(np.round(rng.uniform(low, high), 3))
    else:
        for u, v in sorted(G.edges()):
            G.edges[u, v][name] = float(np.round(rng.uniform(low, high), 3))
    return G


def integer_weights(G, seed: int = 0, high: int = 3, name: str = "weight"):
    """Replace every edge's weight with an integer in [0, high): zero-length edges included."""
    rng = np.random.default_rng(seed)
    for u, v in sorted(G.edges()):
        G.edges[u, v][name] = int(rng.integers(0, high))
    return G


def random_graph(n: int = 120, m: int = 150, seed: int = 1, directed: bool = False, weighted: bool = True):
    """A sparse G(n, m) graph: several components and isolated vertices at this density."""
    G = nx.gnm_random_graph(n, m, seed=seed, directed=directed)
    return _weigh(G, seed) if weighted else G


def with_extras(G, seed: int = 7):
    """Add what real inputs have: self-loops, isolated vertices, a separate small component.

    New vertices get ids above the existing ones; added edges get weights like the rest.
    """
    rng = np.random.default_rng(seed)
    n = max(G.nodes) + 1 if len(G) else 0
    weighted = any("weight" in d for _, _, d in G.edges(data=True))
    extra = {"weight": 1.25} if weighted else {}
    nodes = sorted(G.nodes)
    for u in rng.choice(nodes, size=3, replace=False):
        G.add_edge(int(u), int(u), **extra)                     # self-loops
    G.add_nodes_from([n, n + 1, n + 2])                         # isolated vertices
    G.add_edge(n + 3, n + 4, **extra)                           # a separate path component
    G.add_edge(n + 4, n + 5, **({"weight": 0.75} if weighted else {}))
    return G


def scale_free(n: int = 150, seed: int = 3):
    """A directed power-law multigraph (NetworkX's scale-free model): parallel edges and self-loops."""
    G = nx.MultiDiGraph(nx.scale_free_graph(n, seed=seed))
    return _weigh(G, seed)


def ring_of_cliques(cliques: int = 4, size: int = 5):
    """Cliques joined in a ring, plus an isolated vertex and a separate edge (undirected)."""
    G = nx.ring_of_cliques(cliques, size)
    n = cliques * size
    G.add_node(n)
    G.add_edge(n + 1, n + 2)
    return G


def string_ids(G, prefix: str = "v"):
    """The same graph with string vertex ids ``f"{prefix}{id}"``."""
    return nx.relabel_nodes(G, {v: f"{prefix}{v}" for v in G.nodes})


def input_to_networkx(graph: GraphInput, weight: str | None = None):
    """The NetworkX twin of a GraphInput (vertex table first, then edges with ``weight``)."""
    G = nx.DiGraph() if graph.directed else nx.Graph()
    if graph.vertices is not None:
        G.add_nodes_from(graph.vertices.column("id").to_pylist())
    src = graph.edges.column("src").to_pylist()
    dst = graph.edges.column("dst").to_pylist()
    if weight is None:
        G.add_edges_from(zip(src, dst))
    else:
        G.add_weighted_edges_from(zip(src, dst, graph.edges.column(weight).to_pylist()), weight=weight)
    return G


def road(n: int = 225, seed: int = 5):
    """``goffish.generators.road_network`` as (GraphInput, NetworkX twin weighted by ``length``)."""
    from goffish.generators import road_network

    graph = road_network(n, seed=seed)
    return graph, input_to_networkx(graph, "length")


def rmat(scale: int = 7, edge_factor: int = 3, seed: int = 2, directed: bool = True):
    """``goffish.generators.rmat`` as (GraphInput, NetworkX twin weighted by ``weight``)."""
    from goffish.generators import rmat as rmat_input

    graph = rmat_input(scale, edge_factor=edge_factor, seed=seed, directed=directed)
    return graph, input_to_networkx(graph, "weight")


# --------------------------------------------------------------------------- GoFS

def ingest_input(graph: GraphInput, path, spark, num_partitions: int = 2, partitioner: str = "metis",
                 seed: int = 0):
    """Store ``graph`` as GoFS at ``path`` and open it (a goffish.graph.Graph) on ``spark``."""
    return goffish.ingest(graph, str(path), num_partitions=num_partitions, partitioner=partitioner,
                          seed=seed, spark=spark)


def ingest_nx(G, path, spark, num_partitions: int = 2, partitioner: str = "metis", seed: int = 0):
    """Store the NetworkX graph ``G`` as GoFS at ``path`` (via gofs.ingest.read_local.from_networkx) and open it."""
    return ingest_input(from_networkx(G), path, spark, num_partitions, partitioner, seed)


def vertex_subgraphs(store) -> dict:
    """{original vertex id: sub-graph id} of a stored graph."""
    out = {}
    for p in range(store.num_partitions):
        table = store.read_vertex_partition(p, internal=True)
        out.update(zip(table.column("id").to_pylist(), table.column("sg").to_pylist()))
    return out


def metagraph(store):
    """The sub-graph adjacency as an undirected NetworkX graph (every sub-graph a node)."""
    M = nx.Graph()
    M.add_nodes_from(range(store.manifest["subgraphs"]["count"]))
    table = store.metagraph_table()
    M.add_edges_from(zip(table.column("sg").to_pylist(), table.column("nbr_sg").to_pylist()))
    return M


def metagraph_diameter(store) -> int:
    """The largest diameter over the meta-graph's connected components."""
    M = metagraph(store)
    return max(nx.diameter(M.subgraph(c)) for c in nx.connected_components(M))


# --------------------------------------------------------------------------- results

def column(result, name: str) -> dict:
    """{id: value} of one output column of a RunResult (or DataFrame)."""
    frame = getattr(result, "dataframe", result)
    return {row["id"]: row[name] for row in frame.select("id", name).collect()}


def as_partition(labels: dict) -> set:
    """A labelling {vertex: label} as a set of frozensets of vertices."""
    groups: dict = {}
    for vertex, label in labels.items():
        groups.setdefault(label, set()).add(vertex)
    return {frozenset(g) for g in groups.values()}


def weak_components(G) -> set:
    """Weakly connected components of ``G`` as a set of frozensets."""
    comps = nx.weakly_connected_components(G) if G.is_directed() else nx.connected_components(G)
    return {frozenset(c) for c in comps}
