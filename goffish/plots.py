"""Pictures for the command line: a stored graph's partitioning, and a benchmark report.

Drawn headless on matplotlib's Agg canvas (see :mod:`gopher.plots`, which also
draws run timelines); matplotlib is imported only when a picture is made.
"""
from __future__ import annotations

import numpy as np

from gopher.plots import new_figure, save_png

__all__ = ["graph_figure", "plot_graph", "bench_figure", "plot_bench"]

#: one colour per benchmarked system, in the order bars are drawn
SYSTEMS = {"gopher": "#4C72B0", "graphframes": "#DD8452", "igraph": "#55A868"}


def _metagraph_degrees(store, num_subgraphs: int) -> np.ndarray:
    """Distinct neighbouring sub-graphs of every sub-graph (edges in either direction)."""
    meta = store.metagraph_table()
    a = meta.column("sg").to_numpy().astype(np.int64)
    b = meta.column("nbr_sg").to_numpy().astype(np.int64)
    keys = np.unique(np.concatenate([a * num_subgraphs + b, b * num_subgraphs + a]))
    keys = keys[keys // num_subgraphs != keys % num_subgraphs] if num_subgraphs else keys
    return np.bincount(keys // max(num_subgraphs, 1), minlength=num_subgraphs)


def _distribution(axis, values: np.ndarray, what: str, colour: str) -> int:
    """How many items have each value, on log-log axes; zeros cannot be drawn there and are counted in the title."""
    positive = values[values > 0]
    sizes, counts = np.unique(positive, return_counts=True)
    axis.loglog(sizes, counts, "o", color=colour, markersize=4)
    zeros = int((values == 0).sum())
    axis.set_xlabel(what)
    axis.set_ylabel("sub-graphs")
    return zeros


def graph_figure(store):
    """A stored graph's partitioning at a glance.

    Four panels: vertices and edges per partition; cut edges per partition;
    the sub-graph size distribution (log-log); the meta-graph's degree
    distribution (log-log; a sub-graph's degree is the number of other
    sub-graphs it shares an edge with).

    Parameters
    ----------
    store : gofs.store.GraphStore (or goffish's Graph)
        Read: the manifest's per-partition statistics, ``template/subgraphs.parquet``
        and ``template/metagraph.parquet``; nothing else.

    Returns
    -------
    matplotlib.figure.Figure

    Example
    -------
    >>> plot_graph(goffish.open("/tmp/road.gofs"), "road.png")   # doctest: +SKIP
    """
    m = store.manifest
    parts = m["partitions"]
    ids = np.array([p["id"] for p in parts])
    x = np.arange(len(parts))
    figure = new_figure(11, 8)
    figure.suptitle(f"{m['name']}: {m['num_vertices']:,} vertices, {m['num_edges']:,} edges, "
                    f"{m['num_partitions']} partitions ({m['partitioner']}), {m['subgraphs']['count']:,} sub-graphs")
    (sizes_axis, cut_axis), (subgraph_axis, meta_axis) = figure.subplots(2, 2)

    width = 0.4
    sizes_axis.bar(x - width / 2, [p["num_vertices"] for p in parts], width, label="vertices", color="#4C72B0")
    sizes_axis.bar(x + width / 2, [p["num_edges"] for p in parts], width, label="edges", color="#8172B3")
    sizes_axis.set_title(f"vertices and edges per partition (balance {m['balance']:.3f})")
    sizes_axis.margins(y=0.15)
    sizes_axis.legend(fontsize="small", loc="upper center", ncols=2)

    cut = np.array([p["cut_edges"] for p in parts])
    cut_axis.bar(x, cut, 0.8, color="#C44E52")
    share = 100.0 * m["cut_edges"] / m["num_edges"] if m["num_edges"] else 0.0
    cut_axis.set_title(f"cut edges per partition ({m['cut_edges']:,} in all, {share:.1f}% of edges)")
    for axis in (sizes_axis, cut_axis):
        axis.set_xlabel("partition")
        axis.set_xticks(x, [str(i) for i in ids], fontsize="small" if len(parts) <= 32 else "xx-small")

    subgraph_sizes = store.subgraph_table().column("num_vertices").to_numpy()
    _distribution(subgraph_axis, subgraph_sizes, "vertices in the sub-graph", "#55A868")
    subgraph_axis.set_title(f"sub-graph sizes (largest {m['subgraphs']['largest']:,})")

    degrees = _metagraph_degrees(store, len(subgraph_sizes))
    isolated = _distribution(meta_axis, degrees, "neighbouring sub-graphs (meta-graph degree)", "#DD8452")
    meta_axis.set_title(f"meta-graph degrees ({isolated:,} with none, not drawn)")
    if not (degrees > 0).any():
        meta_axis.text(0.5, 0.5, "no edge crosses sub-graphs", ha="center", va="center",
                       transform=meta_axis.transAxes)
    return figure


def plot_graph(store, path=None):
    """:func:`graph_figure`, written as PNG at ``path`` when given; returns the Figure."""
    figure = graph_figure(store)
    if path is not None:
        save_png(figure, path)
    return figure


def bench_figure(report: dict):
    """A benchmark report (``./run.sh bench``) as grouped bars: seconds per algorithm and system, log scale.

    Parameters
    ----------
    report : dict
        What ``run_bench`` in ``benchmarks/bench_gopher.py`` returns (its ``rows``: algorithm,
        system, seconds, ...). A baseline cancelled after ``--baseline-timeout``
        (``lower_bound`` true) is hatched and labelled ``>``.

    Returns
    -------
    matplotlib.figure.Figure
    """
    rows = report["rows"]
    algorithms = list(dict.fromkeys(r["algorithm"] for r in rows))
    systems = [s for s in SYSTEMS if any(r["system"] == s for r in rows)]
    systems += [s for s in dict.fromkeys(r["system"] for r in rows) if s not in systems]
    figure = new_figure(max(6.0, 1.1 + 1.6 * len(algorithms)), 5)
    axis = figure.subplots()
    width = 0.8 / max(len(systems), 1)
    for k, system in enumerate(systems):
        labelled = False
        for j, algorithm in enumerate(algorithms):
            row = next((r for r in rows if r["system"] == system and r["algorithm"] == algorithm), None)
            if row is None:
                continue
            lower_bound = bool(row.get("lower_bound"))
            position = j - 0.4 + width * (k + 0.5)
            axis.bar(position, row["seconds"], width, color=SYSTEMS.get(system, "#937860"),
                     hatch="//" if lower_bound else None, edgecolor="white" if lower_bound else None,
                     label=None if labelled else system)
            labelled = True
            axis.annotate(f"{'>' if lower_bound else ''}{row['seconds']:.3g}", (position, row["seconds"]),
                          ha="center", va="bottom", fontsize="x-small", xytext=(0, 2), textcoords="offset points")
    axis.set_yscale("log")
    axis.set_xticks(np.arange(len(algorithms)), algorithms)
    axis.set_ylabel("seconds (log scale)")
    axis.margins(y=0.15)
    axis.legend(fontsize="small")
    axis.set_title(f"{report['vertices']:,} vertices, {report['edges']:,} edges, {report['partitions']} partitions, "
                   f"master {report['spark_master']}", fontsize="medium")
    return figure


def plot_bench(report: dict, path=None):
    """:func:`bench_figure`, written as PNG at ``path`` when given; returns the Figure."""
    figure = bench_figure(report)
    if path is not None:
        save_png(figure, path)
    return figure
