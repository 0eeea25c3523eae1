"""Pictures of a Gopher run: where each superstep's wall time went and how much work it had.

matplotlib is imported inside the functions, so importing gopher stays cheap.
Figures are drawn on matplotlib's Agg canvas directly (no pyplot), so they need
no display and leave the caller's pyplot backend and open figures alone.
"""
from __future__ import annotations

import os
import tempfile

import numpy as np

from gofs import files

#: colours shared by every goffish picture, so the same thing looks the same everywhere
COLOURS = {"compute": "#4C72B0", "exchange": "#DD8452", "overhead": "#B0B0B0",
           "active": "#55A868", "messages": "#C44E52"}
#: colours of a run's stretches (gopher.metrics.RunMetrics.stretches)
PHASE_COLOURS = {"submit": "#8172B3", "workers": "#937860", "rendezvous": "#DA8BC3", "topology": "#8C8C8C",
                 "supersteps": "#4C72B0", "merge": "#CCB974", "rows": "#64B5CD", "handoff": "#C44E52"}


def new_figure(width: float, height: float):
    """A matplotlib Figure on an Agg canvas (headless), laid out without overlaps."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def save_png(figure, path) -> str:
    """Write ``figure`` as PNG at ``path`` atomically (a temporary file renamed over); returns the path."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"{path}: cannot write the picture, no directory {directory}")
    files.write_atomic(path, write=lambda out: figure.savefig(out, format="png"))
    return path


def _time_split(steps) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(compute, exchange, overhead) seconds per superstep; they add up to its wall time."""
    wall = np.array([s.seconds for s in steps], dtype=np.float64)
    compute = np.minimum(np.array([s.task_seconds for s in steps], dtype=np.float64), wall)
    exchange = np.minimum(np.array([s.exchange_seconds for s in steps], dtype=np.float64), wall - compute)
    return compute, exchange, wall - compute - exchange


def _instance_runs(instances: list) -> list[tuple[int, int, object]]:
    """Consecutive supersteps of the same instance: [(first index, last index + 1, instance)]."""
    runs, start = [], 0
    for i in range(1, len(instances) + 1):
        if i == len(instances) or instances[i] != instances[start]:
            runs.append((start, i, instances[start]))
            start = i
    return runs


def _phase_strip(axis, metrics) -> None:
    """The whole run as one bar: its set-up phases, the supersteps, its output phases."""
    pieces = metrics.stretches()
    total = sum(seconds for _, seconds in pieces) or 1.0
    left = 0.0
    for name, seconds in pieces:
        if seconds <= 0:
            continue
        axis.barh(0, seconds, left=left, color=PHASE_COLOURS[name], label=f"{name} {seconds:.2f} s", height=0.6)
        if seconds / total > 0.06:
            axis.text(left + seconds / 2, 0, name, ha="center", va="center", fontsize="x-small", color="white")
        left += seconds
    axis.set_yticks([])
    axis.set_xlim(0, total)
    axis.set_xlabel("wall seconds")
    axis.set_title("the run: set-up, supersteps, output")
    axis.legend(loc="upper left", bbox_to_anchor=(1.01, 1.2), fontsize="x-small")


def timeline_figure(metrics):
    """A run's timeline: the whole run as phases (set-up, supersteps, output); per superstep,
    wall time split into compute, exchange and the rest, and the active sub-graphs and
    messages; for time-series runs also per instance.

    Parameters
    ----------
    metrics : gopher.metrics.RunMetrics
        Compute is ``task_seconds`` (the slowest task inside the program), exchange
        ``exchange_seconds``; the rest of ``seconds`` is overhead (scheduling, Spark).
        Supersteps with an ``instance`` are shaded and labelled by instance.

    Returns
    -------
    matplotlib.figure.Figure

    Example
    -------
    >>> figure = timeline_figure(g.connected_components().metrics)   # doctest: +SKIP
    >>> save_png(figure, "cc-timeline.png")                         # doctest: +SKIP
    """
    from matplotlib.ticker import MaxNLocator

    steps = metrics.supersteps
    instances = [s.instance for s in steps]
    per_instance = any(i is not None for i in instances)
    figure = new_figure(10, 10 if per_instance else 8)
    rows = 4 if per_instance else 3
    axes = figure.subplots(rows, 1, height_ratios=[0.45] + [1] * (rows - 1))
    _phase_strip(axes[0], metrics)
    axes = axes[1:]
    time_axis, work_axis = axes[0], axes[1]
    x = np.arange(len(steps))
    compute, exchange, overhead = _time_split(steps)
    figure.suptitle(f"{metrics.program}: {len(steps)} supersteps, {metrics.seconds:.2f} s "
                    f"(set-up {metrics.setup_seconds:.2f} s, output {metrics.output_seconds:.2f} s)")
    if not steps:
        time_axis.text(0.5, 0.5, "no supersteps ran", ha="center", va="center", transform=time_axis.transAxes)

    bottom = np.zeros(len(steps))
    for name, seconds in (("compute", compute), ("exchange", exchange), ("overhead", overhead)):
        time_axis.bar(x, seconds, bottom=bottom, color=COLOURS[name], label=name, width=0.8)
        bottom += seconds
    time_axis.set_ylabel("wall seconds")
    time_axis.set_title("time per superstep")
    time_axis.margins(y=0.12)
    time_axis.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")

    work_axis.bar(x, [s.active_subgraphs for s in steps], color=COLOURS["active"], width=0.8,
                  label="active sub-graphs")
    work_axis.set_ylabel("active sub-graphs", color=COLOURS["active"])
    messages_axis = work_axis.twinx()
    messages_axis.plot(x, [s.messages for s in steps], color=COLOURS["messages"], marker="o", markersize=3,
                       label="messages")
    messages_axis.set_ylabel("messages", color=COLOURS["messages"])
    messages_axis.set_ylim(bottom=0)
    work_axis.set_title("work per superstep")
    work_axis.set_xlabel("superstep (run order)" if per_instance else "superstep")

    for axis in (time_axis, work_axis):
        axis.set_xlim(-0.6, max(len(steps), 1) - 0.4)
        axis.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=20))
    if not per_instance:
        return figure

    runs = _instance_runs(instances)
    label_every = max(1, len(runs) // 24)
    for k, (first, last, instance) in enumerate(runs):
        for axis in (time_axis, work_axis):
            if k % 2:
                axis.axvspan(first - 0.5, last - 0.5, color="#000000", alpha=0.06, linewidth=0)
        if k % label_every == 0:
            time_axis.text((first + last - 1) / 2, 0.98, "-" if instance is None else f"i{instance}",
                           transform=time_axis.get_xaxis_transform(), ha="center", va="top", fontsize="x-small")

    totals_axis = axes[2]
    order = list(dict.fromkeys(i for i in instances))
    position = {instance: k for k, instance in enumerate(order)}
    slot = np.array([position[i] for i in instances])
    bottom = np.zeros(len(order))
    for name, seconds in (("compute", compute), ("exchange", exchange), ("overhead", overhead)):
        per = np.bincount(slot, weights=seconds, minlength=len(order))
        totals_axis.bar(np.arange(len(order)), per, bottom=bottom, color=COLOURS[name], label=name, width=0.8)
        bottom += per
    supersteps_per = np.bincount(slot, minlength=len(order))
    totals_axis.set_xticks(np.arange(len(order)), ["-" if i is None else str(i) for i in order],
                           fontsize="small" if len(order) <= 30 else "xx-small")
    totals_axis.set_xlabel("instance")
    totals_axis.set_ylabel("wall seconds")
    totals_axis.set_title(f"time per instance ({supersteps_per.min()}-{supersteps_per.max()} supersteps each)")
    return figure
