"""The graph handle users work with: a GoFS graph plus algorithms as methods."""
from __future__ import annotations

import pyarrow as pa

from algorithms.components import connected_components
from algorithms.pagerank import pagerank
from algorithms.sssp import sssp
from gofs.instances import Instance, append_instances
from gofs.store import GraphStore
from gopher.engine import RunResult, run_program


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

    def run(self, program, max_supersteps: int = 1000, **engine_options) -> RunResult:
        """Run your own :class:`gopher.program.SubgraphProgram`."""
        return run_program(self, program, max_supersteps, **engine_options)

    def append_instances(self, instances: list[Instance]) -> list[int]:
        """Append time-stamped instances (see :class:`gofs.instances.Instance`); returns their ids."""
        ids = append_instances(self.path, instances)
        self.refresh()
        return ids

    def save_result(self, result, start: float, end: float | None = None, columns=None) -> int:
        """Write per-vertex results back into the graph as a new instance's attributes.

        ``result`` is a RunResult or a DataFrame with an ``id`` column; ``columns``
        picks which of its columns to keep (default: all but ``id``).
        """
        frame = result.dataframe if isinstance(result, RunResult) else result
        table = pa.Table.from_pandas(frame.toPandas(), preserve_index=False)
        keep = [c for c in table.column_names if c != "id"] if columns is None else list(columns)
        return self.append_instances([Instance(start, end, vertex_values=table.select(["id", *keep]))])[0]

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
