"""The graph handle users work with: a GoFS graph plus algorithms as methods."""
from __future__ import annotations

import inspect

from algorithms.registry import Algorithm, algorithms
from gofs.frame_instances import append_vertex_frame
from gofs.instances import Instance, append_instances
from gofs.store import GraphStore
from gopher.engine import EngineOptions, RunResult, run_program
from gopher.timeseries import TimeSeriesResult, run_timeseries


class Graph:
    """A stored GoFS graph, the handle users work with. It *has* a store: :attr:`store`
    (a :class:`gofs.store.GraphStore`) does the reads, and this handle forwards every read
    to it (``g.vertices()``, ``g.num_vertices``, ``g.read_edge_partition(...)``). Only the
    store crosses into Spark tasks, never this top-floor class.

    Every registered algorithm is a method (``g.connected_components()``,
    ``g.pagerank()``, ``g.louvain()``, ...; see :mod:`algorithms.registry`) with the
    algorithm function's parameters, plus engine options as ``engine=EngineOptions(...)``
    or as keywords (``progress=False``, ``instance=3``). They return a
    :class:`gopher.engine.RunResult`: ``.dataframe`` is a Spark DataFrame keyed by the
    original vertex ids, ``.metrics`` says what the run cost.
    """

    def __init__(self, path: str, spark=None):
        self.store = GraphStore(path, spark)

    def __getattr__(self, name):
        """The store's reads and metadata (called only for names this class lacks)."""
        if name == "store" or name.startswith("__"):       # unpickling or copying: no store yet
            raise AttributeError(name)
        return getattr(self.store, name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | {n for n in dir(self.store) if not n.startswith("_")})

    def __repr__(self) -> str:
        return f"Graph({self.store.path!r})"

    def refresh(self) -> "Graph":
        """Re-read the committed state (after instances were appended elsewhere)."""
        self.store.refresh()
        return self

    def run(self, program, max_supersteps: int = 1000, **engine_options) -> RunResult:
        """Run your own :class:`gopher.program.SubgraphProgram`."""
        return run_program(self.store, program, max_supersteps, **engine_options)

    def run_timeseries(self, program, pattern: str = "independent", instances=None, time=None,
                       **options) -> TimeSeriesResult:
        """Run your own program over instances: ``pattern`` is "independent",
        "eventually_dependent" or "sequential" (see :mod:`gopher.timeseries`)."""
        return run_timeseries(self.store, program, pattern, instances=instances, time=time, **options)

    def append_instances(self, instances: list[Instance]) -> list[int]:
        """Append time-stamped instances (see :class:`gofs.instances.Instance`); returns their ids."""
        ids = append_instances(self.path, instances)
        self.refresh()
        return ids

    def save_result(self, result, start: float, end: float | None = None, columns=None) -> int:
        """Write per-vertex results back into the graph as a new instance's attributes.

        ``result`` is a RunResult or a DataFrame with an ``id`` column; ``columns``
        picks which of its columns to keep (default: all but ``id``). The values are
        aligned and written by Spark tasks with their exact types (see
        :func:`gofs.frame_instances.append_vertex_frame`).
        """
        frame = result.dataframe if isinstance(result, RunResult) else result
        instance = append_vertex_frame(self.path, frame, start, end, columns)
        self.refresh()
        return instance

    def stream(self, checkpoint: str | None = None, **options):
        """Stream updates into this graph: live results, exactly-once, snapshots as instances
        (see :class:`hatrick.stream.Stream` for ``options``)."""
        from hatrick.stream import Stream

        return Stream(self.store, checkpoint=checkpoint, **options)

    def info(self) -> str:
        """A readable summary: sizes, partitioning, sub-graphs, instances."""
        m = self.manifest
        lines = [
            f"graph {m['name']!r} at {self.path}",
            f"  {'directed' if m['directed'] else 'undirected'}, {m['num_vertices']:,} vertices, "
            f"{m['num_edges']:,} edges, ids {m['id_type']}",
            f"  vertex attributes: {', '.join(self.vertex_attributes) or '-'}; "
            f"edge attributes: {', '.join(self.edge_attributes) or '-'}",
            f"  partitioner {m['partitioner']}, {m['num_partitions']} partitions, "
            f"cut edges {m['cut_edges']:,} ({_share(m['cut_edges'], m['num_edges'])}), balance {m['balance']:.3f}",
            f"  sub-graphs {m['subgraphs']['count']:,}, largest {m['subgraphs']['largest']:,} vertices; sizes "
            + ", ".join(f"{k}: {v}" for k, v in m["subgraphs"]["size_histogram"].items()),
            "  partition  vertices     edges  cut edges  sub-graphs  largest",
        ]
        for p in m["partitions"]:
            lines.append(f"  {p['id']:>9}  {p['num_vertices']:>8,}  {p['num_edges']:>8,}  {p['cut_edges']:>9,}"
                         f"  {p['num_subgraphs']:>10,}  {p['largest_subgraph']:>7,}")
        inst = m["instances"]
        if inst:
            lines.append(f"  instances {len(inst)}: time {inst[0]['start']} .. {inst[-1]['end']}; vertex attributes "
                         f"{', '.join(self.instance_vertex_attributes) or '-'}; edge attributes "
                         f"{', '.join(self.instance_edge_attributes) or '-'}")
        else:
            lines.append("  instances: none")
        return "\n".join(lines)


def _algorithm_method(algorithm: Algorithm):
    """``Graph.<name>``: the algorithm's function on this graph, engine options typed."""
    own = {p.name for p in algorithm.parameters}

    def method(self, *args, engine: EngineOptions | None = None, **kwargs):
        loose = {k: kwargs.pop(k) for k in list(kwargs) if k not in own}
        options = EngineOptions.merged(engine, loose, algorithm.name)
        if algorithm.timeseries and options.instance is not None:
            raise TypeError(f"{algorithm.name}() runs over instances: select them with instances= or time=")
        return algorithm.function(self.store, *args, **kwargs, **options.as_kwargs())

    parameters = list(inspect.signature(algorithm.function).parameters.values())
    engine = inspect.Parameter("engine", inspect.Parameter.KEYWORD_ONLY, default=None,
                               annotation="EngineOptions | None")
    method.__signature__ = inspect.Signature(
        [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)] + algorithm.parameters + [engine]
        + [p for p in parameters if p.kind == p.VAR_KEYWORD])
    method.__name__ = method.__qualname__ = algorithm.name
    method.__doc__ = algorithm.function.__doc__
    return method


for _algorithm in algorithms().values():
    setattr(Graph, _algorithm.name, _algorithm_method(_algorithm))


def _share(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.1f}%" if whole else "-"
