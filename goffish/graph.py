"""The graph handle users work with: a GoFS graph plus algorithms as methods."""
from __future__ import annotations

from algorithms.betweenness import betweenness
from algorithms.components import connected_components
from algorithms.hashtags import HashtagSummary, hashtag_aggregation
from algorithms.louvain import LouvainResult, louvain
from algorithms.memes import MemeSpread, meme_tracking
from algorithms.pagerank import pagerank
from algorithms.sssp import sssp
from algorithms.tdsp import tdsp
from gofs.frame_instances import append_vertex_frame
from gofs.instances import Instance, append_instances
from gofs.store import GraphStore
from gopher.engine import RunResult, run_program
from gopher.timeseries import TimeSeriesResult, run_timeseries


class Graph(GraphStore):
    """A stored GoFS graph (see :class:`gofs.store.GraphStore` for reads).

    Algorithms return a :class:`gopher.engine.RunResult`: ``.dataframe`` is a
    Spark DataFrame keyed by the original vertex ids, ``.metrics`` says what the
    run cost.
    """

    def connected_components(self, **engine_options) -> RunResult:
        return connected_components(self, **engine_options)

    def sssp(self, source, weight: str | None = None, **engine_options) -> RunResult:
        return sssp(self, source, weight, **engine_options)

    def pagerank(self, alpha: float = 0.85, max_iter: int = 100, tol: float = 1e-6,
                 weight: str | None = None, **engine_options) -> RunResult:
        return pagerank(self, alpha, max_iter, tol, weight, **engine_options)

    def betweenness(self, k: int | None = None, normalized: bool = True, weight: str | None = None,
                    top: int | None = None, seed: int = 0, **options) -> RunResult:
        """Betweenness centrality (``id``, ``betweenness``) as NetworkX computes it: exact, from
        ``k`` sampled sources, or the ``top`` vertices (see :func:`algorithms.betweenness.betweenness`)."""
        return betweenness(self, k, normalized, weight, top, seed, **options)

    def louvain(self, weight: str | None = None, resolution: float = 1.0, seed: int = 0, levels=None,
                driver_budget_edges: int = 5_000_000, refine: bool = True, **engine_options) -> LouvainResult:
        """Partitioned Louvain communities (see :func:`algorithms.louvain.louvain`): ``.dataframe``
        has ``id``, ``community`` (and ``level_k`` columns when asked), ``.modularity`` per level."""
        return louvain(self, weight, resolution, seed, levels, driver_budget_edges, refine, **engine_options)

    def run(self, program, max_supersteps: int = 1000, **engine_options) -> RunResult:
        """Run your own :class:`gopher.program.SubgraphProgram`."""
        return run_program(self, program, max_supersteps, **engine_options)

    def tdsp(self, source, departure: float, travel_time: str = "travel_time", instances=None, time=None,
             **engine_options) -> TimeSeriesResult:
        """Earliest arrival times over per-instance travel times (see :func:`algorithms.tdsp.tdsp`)."""
        return tdsp(self, source, departure, travel_time, instances, time, **engine_options)

    def meme_tracking(self, meme: str, attribute: str = "hashtags", instances=None, time=None,
                      **engine_options) -> MemeSpread:
        """The spread tree of a meme over the instances (see :func:`algorithms.memes.meme_tracking`)."""
        return meme_tracking(self, meme, attribute, instances, time, **engine_options)

    def hashtag_aggregation(self, k: int = 10, attribute: str = "hashtags", instances=None, time=None,
                            **engine_options) -> HashtagSummary:
        """Per-instance neighbourhood hashtag counts and the merged top-k
        (see :func:`algorithms.hashtags.hashtag_aggregation`)."""
        return hashtag_aggregation(self, k, attribute, instances, time, **engine_options)

    def run_timeseries(self, program, pattern: str = "independent", instances=None, time=None,
                       **options) -> TimeSeriesResult:
        """Run your own program over instances: ``pattern`` is "independent",
        "eventually_dependent" or "sequential" (see :mod:`gopher.timeseries`)."""
        return run_timeseries(self, program, pattern, instances=instances, time=time, **options)

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

        return Stream(self, checkpoint=checkpoint, **options)

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


def _share(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.1f}%" if whole else "-"
