"""The NetworkX backend ``goffish``: ``nx.pagerank(G, backend="goffish")`` runs on Spark.

Its graph type, :class:`GoffishGraph`, is a handle on a GoFS graph: wrap
``goffish.open(path)`` and a graph that never fits the driver is analysed
without building an ``nx.Graph``; a NetworkX graph given to a dispatched
function is ingested into a temporary GoFS store (:func:`convert_from_nx`),
removed when the handle is garbage-collected. Which NetworkX functions it runs,
and how each answer is shaped, comes from the algorithm registry
(:mod:`algorithms.registry`): an algorithm's ``NetworkX(...)`` declarations are
this backend's dispatch table. Results come back in NetworkX's types: dicts and
sets keyed by the original nodes, Python numbers.

``should_run`` keeps graphs below ``nx.config.backends.goffish.min_edges`` edges
in NetworkX (a Spark job costs more than NetworkX on them) unless the backend
is named (``backend="goffish"``) or the graph already is a GoFS handle.
"""
from __future__ import annotations

import functools
import inspect
import random

import numpy as np

BACKEND = "goffish"
from goffish.nx_info import DEFAULT_CONFIG
from goffish.temporary import partitions_for, remove_with, temporary_store
from gofs.store import as_store


# ----------------------------------------------------------------------------- the graph type

class GoffishGraph:
    """A GoFS graph seen by NetworkX: ``GoffishGraph(goffish.open("road.gofs"))``.

    ``nodes`` maps the store's vertex ids 0..n-1 back to NetworkX nodes when the
    store was built from a NetworkX graph; for a handle on any stored graph it is
    None and the nodes are the stored vertex ids.
    """

    __networkx_backend__ = BACKEND

    def __init__(self, store, nodes=None, directed: bool | None = None, multigraph: bool = False,
                 graph_attributes: dict | None = None):
        self.store, self.nodes = (None if store is None else as_store(store)), nodes
        self.directed = self.store.directed if directed is None else directed
        self.multigraph = multigraph
        self.graph = dict(graph_attributes or {})
        self._index = None

    def is_directed(self) -> bool:
        return self.directed

    def is_multigraph(self) -> bool:
        return self.multigraph

    def number_of_nodes(self) -> int:
        if self.store is None:
            return 0
        return len(self.nodes) if self.nodes is not None else int(self.store.num_vertices)

    __len__ = number_of_nodes

    def __iter__(self):
        """The nodes in NetworkX's order: the converted graph's, or the stored ids in vertex order."""
        if self.store is None:
            return iter(())
        if self.nodes is not None:
            return iter(self.nodes.tolist())
        from sparkshim.compat import collect_arrow

        return iter(self.nodes_of(collect_arrow(self.store.vertex_id_frame()).column("id").combine_chunks()))

    def id_of(self, node):
        """The stored vertex id of a NetworkX node (NodeNotFound if it has none)."""
        import networkx as nx

        if self.store is None:
            raise nx.NodeNotFound(f"Node {node} not found in graph")
        if self.nodes is None:
            try:
                self.store.vid_of(node)
            except Exception:
                raise nx.NodeNotFound(f"Node {node} not found in graph") from None
            return node
        if self._index is None:
            self._index = {v: i for i, v in enumerate(self.nodes)}
        try:
            return self._index[node]
        except (KeyError, TypeError):
            raise nx.NodeNotFound(f"Node {node} not found in graph") from None

    def nodes_of(self, ids) -> list:
        """NetworkX nodes of stored vertex ids (an Arrow array)."""
        import pyarrow as pa

        if self.nodes is None:
            return ids.to_numpy().tolist() if pa.types.is_integer(ids.type) else ids.to_pylist()
        return self.nodes[ids.to_numpy()].tolist()

    def to_networkx(self):
        """Collect the stored edges into a NetworkX graph (for functions this backend does not run)."""
        import networkx as nx

        from sparkshim.compat import collect_arrow

        graph = nx.DiGraph() if self.directed else nx.Graph()
        graph.graph.update(self.graph)
        if self.store is None:
            return graph
        vertices = collect_arrow(self.store.vertex_id_frame())
        graph.add_nodes_from(self.nodes_of(vertices.column("id").combine_chunks()))
        attributes = list(self.store.edge_attributes)
        edges = collect_arrow(self.store.edges(attributes))
        src = self.nodes_of(edges.column("src").combine_chunks())
        dst = self.nodes_of(edges.column("dst").combine_chunks())
        values = [edges.column(a).to_pylist() for a in attributes]
        graph.add_edges_from((u, v, dict(zip(attributes, row))) for u, v, *row in zip(src, dst, *values))
        return graph


def convert_from_nx(graph, edge_attrs=None, node_attrs=None, preserve_edge_attrs=False,
                    preserve_node_attrs=False, preserve_graph_attrs=False, name=None, graph_name=None):
    """Ingest a NetworkX graph into a temporary GoFS store and return its handle.

    Nodes become vertex ids 0..n-1 in iteration order (any hashable node works);
    the edge attributes NetworkX asks for (``edge_attrs``: name -> default for
    edges that lack it) become numeric edge columns.
    """
    import networkx as nx
    import pyarrow as pa

    import goffish
    from gofs.graph_input import GraphInput

    if isinstance(graph, GoffishGraph):
        return graph
    nodes = np.fromiter(graph, dtype=object, count=graph.number_of_nodes())
    attributes = {}
    if preserve_graph_attrs:
        attributes = dict(graph.graph)
    handle_args = dict(directed=graph.is_directed(), multigraph=graph.is_multigraph(), graph_attributes=attributes)
    if len(nodes) == 0:
        return GoffishGraph(None, nodes, **handle_args)
    if preserve_edge_attrs:
        names = {key for *_, data in graph.edges(data=True) for key in data}
        edge_attrs = {key: None for key in names}
    index = {node: i for i, node in enumerate(nodes)}
    edges = list(graph.edges(data=True))
    columns = {"src": pa.array([index[u] for u, _, _ in edges], pa.int64()),
               "dst": pa.array([index[v] for _, v, _ in edges], pa.int64())}
    for attr, default in (edge_attrs or {}).items():
        values = [data.get(attr, default) for _, _, data in edges]
        try:
            columns[attr] = pa.array(values, pa.float64())
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
            raise nx.NetworkXError(f"goffish backend: edge attribute {attr!r} must be numeric") from None
    source = GraphInput(pa.table(columns), vertices=pa.table({"id": pa.array(np.arange(len(nodes)))}),
                        directed=graph.is_directed(), source=f"networkx graph {graph_name or ''}".strip())
    store, directory = temporary_store(source, _partitions(len(nodes)), goffish.session())
    handle = GoffishGraph(store, nodes, **handle_args)
    remove_with(handle, directory)
    return handle


def _partitions(n: int) -> int:
    configured = _config().get("partitions")
    if configured:
        return int(configured)
    return partitions_for(n)


def _config() -> dict:
    import networkx as nx

    try:
        return dict(nx.config.backends[BACKEND])
    except (AttributeError, KeyError):
        return dict(DEFAULT_CONFIG)


def convert_to_nx(obj, *, name=None):
    """Results are already NetworkX types; a GoFS handle is collected into an ``nx.Graph``."""
    return obj.to_networkx() if isinstance(obj, GoffishGraph) else obj


# ----------------------------------------------------------------------------- result shapes

def _column(handle: GoffishGraph, result, column: str):
    """(stored ids, values) of a result's column, as Arrow and numpy."""
    table = result.to_arrow(["id", column])
    result.unpersist()                       # the rows now live here; the result files are nobody's
    return table.column("id").combine_chunks(), table.column(column).to_numpy()


def _groups(handle, ids, labels) -> list[set]:
    """Sets of nodes per label. A stable sort: labels repeat (one per component), where numpy's
    default quicksort is an order of magnitude slower than its stable sort."""
    order = np.argsort(labels, kind="stable")
    nodes = handle.nodes_of(ids.take(order))
    cuts = np.flatnonzero(np.diff(labels[order])) + 1
    bounds = np.concatenate([[0], cuts, [len(order)]])
    return [set(nodes[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]


def _sets(handle, run, arguments):
    if handle.store is None:
        return iter(())
    return iter(_groups(handle, *run()))


def _communities(handle, run, arguments):
    return [] if handle.store is None else _groups(handle, *run())


def _count(handle, run, arguments):
    if handle.store is None:
        return 0
    return int(len(np.unique(run()[1])))


def _connected(handle, run, arguments):
    import networkx as nx

    if handle.store is None:
        raise nx.NetworkXPointlessConcept("Connectivity is undefined for the null graph.")
    return bool(len(np.unique(run()[1])) == 1)


def _row_of(ids, vid) -> int:
    import pyarrow as pa
    import pyarrow.compute as pc

    return int(np.flatnonzero(pc.equal(ids, pa.scalar(vid, ids.type)).to_numpy(zero_copy_only=False))[0])


def _component_of(handle, run, arguments):
    vid = handle.id_of(arguments["n"])
    ids, labels = run()
    members = np.flatnonzero(labels == labels[_row_of(ids, vid)])
    return set(handle.nodes_of(ids.take(members)))


def _values(handle, run, arguments):
    if handle.store is None:
        return {}
    ids, values = run()
    return dict(zip(handle.nodes_of(ids), values.tolist()))


def _distances(handle, run, arguments):
    """Reachable nodes nearest first; hop counts as ints, weighted lengths as floats."""
    ids, dist = run()
    cutoff = arguments.get("cutoff")
    keep = np.flatnonzero(np.isfinite(dist) if cutoff is None else dist <= cutoff)
    keep = keep[np.argsort(dist[keep], kind="stable")]
    values = dist[keep].tolist() if "weight" in arguments else dist[keep].astype(np.int64).tolist()
    return dict(zip(handle.nodes_of(ids.take(keep)), values))


def _reaches(handle, run, arguments):
    vid = handle.id_of(arguments["target"] if "target" in arguments else arguments["t"])
    ids, dist = run()
    return bool(np.isfinite(dist[_row_of(ids, vid)]))


SHAPES = {"sets": _sets, "count": _count, "connected": _connected, "component_of": _component_of,
          "values": _values, "distances": _distances, "reaches": _reaches, "communities": _communities}
"""How a NetworkX function's answer is built from the result column (see :class:`algorithms.registry.NetworkX`)."""

_MULTIGRAPH_SHAPES = {"sets", "count", "connected", "component_of", "distances", "reaches"}


# ----------------------------------------------------------------------------- dispatch

def _nx_function(path: str):
    import networkx as nx

    target = nx
    for part in path.split("."):
        target = getattr(target, part)
    return target


@functools.cache
def _signature(path: str) -> inspect.Signature:
    return inspect.signature(_nx_function(path))


def _bind(declaration, args, kwargs) -> dict:
    signature = _signature(declaration.function)
    bound = signature.bind(*args, **kwargs)
    bound.apply_defaults()
    arguments = dict(bound.arguments)
    arguments.pop("backend", None)
    arguments.pop("backend_kwargs", None)
    return arguments


@functools.cache
def _declarations() -> dict:
    """NetworkX function name -> (algorithm, declaration); the registry is complete once imported."""
    from algorithms.registry import algorithms

    return {d.name: (a, d) for a in algorithms().values() for d in a.networkx}


def _seed(value) -> int:
    if value is None:
        return 0
    if isinstance(value, random.Random):
        return value.randrange(2 ** 31)
    if isinstance(value, np.random.RandomState):
        return int(value.randint(2 ** 31))
    return int(value)


def _sample(handle, k, seed):
    """Stored ids of NetworkX's ``k=`` sample of nodes, drawn as NetworkX draws it (the same
    nodes for the same seed); None for no sample (``k`` None, or every node)."""
    import networkx as nx

    n = handle.number_of_nodes()
    if k is None or k == n or (k == 0 and n <= 2):   # NetworkX: k = n is exact; nothing to scale below 3 nodes
        return None
    nodes = nx.utils.create_py_random_state(seed).sample(list(handle), k)
    if not nodes:
        raise ZeroDivisionError("betweenness_centrality: k=0 sources sample no paths to scale")
    return [handle.id_of(node) for node in nodes]


def _make(algorithm, declaration):
    import networkx as nx

    graph_param = next(iter(_signature(declaration.function).parameters))
    column = algorithm.returns[0]

    def dispatched(*args, **kwargs):
        arguments = _bind(declaration, args, kwargs)
        handle = arguments[graph_param]
        if declaration.graphs == "undirected" and handle.is_directed():
            raise nx.NetworkXNotImplemented("not implemented for directed type")
        if declaration.graphs == "directed" and not handle.is_directed():
            raise nx.NetworkXNotImplemented("not implemented for undirected type")
        options = {ours: arguments[theirs] for theirs, ours in declaration.params.items()}
        if "source" in options:
            options["source"] = handle.id_of(options["source"])
        if "seed" in options:
            options["seed"] = _seed(options["seed"])
        if declaration.sample is not None:
            options[declaration.sample] = _sample(handle, arguments["k"], arguments["seed"])
        if declaration.weight is not None:
            name = arguments[declaration.weight]
            options["weight"] = name if handle.store is not None and name in handle.store.edge_attributes else None

        def run():
            try:
                result = algorithm.function(handle.store, **options)
            except Exception as exc:
                raise _networkx_error(exc) from exc
            return _column(handle, result, column)

        return SHAPES[declaration.result](handle, run, arguments)

    dispatched.__name__ = declaration.name
    dispatched.__doc__ = f"{declaration.function} on Spark: {algorithm.summary} (goffish `{algorithm.name}`)."
    return dispatched


def _networkx_error(exc: Exception) -> Exception:
    """NetworkX's exception for what our algorithms raise."""
    import networkx as nx

    from algorithms.pagerank import PowerIterationFailedConvergence

    if isinstance(exc, PowerIterationFailedConvergence):
        return nx.PowerIterationFailedConvergence(*exc.args)
    return exc


def can_run(name, args, kwargs):
    """True, or why not (NetworkX logs the reason and uses another backend)."""
    found = _declarations().get(name)
    if found is None:
        return f"goffish has no {name}"
    algorithm, declaration = found
    try:
        arguments = _bind(declaration, args, kwargs)
    except TypeError as exc:
        return str(exc)
    graph = next(iter(arguments.values()))
    if graph.is_multigraph() and declaration.result not in _MULTIGRAPH_SHAPES:
        return f"{name} on a multigraph: parallel edges would count separately"
    if graph.is_directed() and not declaration.directed:
        return f"{name} on a directed graph: NetworkX's directed semantics are not implemented here"
    for param, wanted in declaration.requires.items():
        if arguments.get(param) != wanted:
            return f"{param}={arguments.get(param)!r} is not supported (only {wanted!r})"
    if declaration.weight is not None and callable(arguments.get(declaration.weight)):
        return "a weight function is not supported (name an edge attribute)"
    return True


def should_run(name, args, kwargs):
    """Spark is worth it for GoFS handles and for graphs of at least ``min_edges`` edges."""
    graph = args[0] if args else next(iter(kwargs.values()), None)
    if isinstance(graph, GoffishGraph):
        return True
    edges = graph.number_of_edges() if hasattr(graph, "number_of_edges") else 0
    threshold = int(_config().get("min_edges", DEFAULT_CONFIG["min_edges"]))
    if edges < threshold:
        return f"{edges} edges < min_edges={threshold}: NetworkX in this process is faster than a Spark job"
    return True


_NETWORKX_OWN_PARTITION = ("compares with the partition NetworkX's sequential Louvain sweep finds for its seed; "
                           "goffish's partitioned Louvain finds another of comparable modularity")
IMPLEMENTATION_DEFINED_TESTS = {
    "community/tests/test_louvain.py::test_karate_club_partition": _NETWORKX_OWN_PARTITION,
    "community/tests/test_louvain.py::test_undirected_selfloops": _NETWORKX_OWN_PARTITION,
    "community/tests/test_louvain.py::test_none_weight_param": _NETWORKX_OWN_PARTITION,
    "community/tests/test_louvain.py::test_multigraph": "compares goffish's partition of a Graph with the one "
                                                        "NetworkX finds on the same MultiGraph (multigraphs fall back)",
}
"""NetworkX tests whose expected answer is what NetworkX's own sequential algorithm returns for
a seed, not what the function's arguments define: marked xfail (with the reason) when NetworkX's
suite runs through this backend, instead of passing them by running NetworkX."""


def on_start_tests(items) -> None:
    """NetworkX's test hook: mark the tests of :data:`IMPLEMENTATION_DEFINED_TESTS` xfail."""
    import pytest

    for item in items:
        for test, reason in IMPLEMENTATION_DEFINED_TESTS.items():
            if item.nodeid.endswith(test):
                item.add_marker(pytest.mark.xfail(reason=f"goffish: {reason}", strict=False))


class BackendInterface:
    """What the ``networkx.backends`` entry point loads: one attribute per dispatched function."""

    convert_from_nx = staticmethod(convert_from_nx)
    convert_to_nx = staticmethod(convert_to_nx)
    can_run = staticmethod(can_run)
    should_run = staticmethod(should_run)
    on_start_tests = staticmethod(on_start_tests)


def _install() -> None:
    for name, (algorithm, declaration) in _declarations().items():
        setattr(BackendInterface, name, staticmethod(_make(algorithm, declaration)))


_install()
