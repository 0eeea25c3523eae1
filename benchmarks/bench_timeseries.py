"""Benchmark of the time-series patterns against single-instance runs on the same graph.

Two ratios, each measured in one run on one road-like graph with hourly
travel times (:func:`goffish.temporal.road_with_travel_times`):

- TDSP over all ``hours`` instances (sequentially dependent) against Gopher
  SSSP on the static ``length`` of the same graph (goal: at most 5x);
- per-hour shortest travel times over all instances (independent pattern, all
  instances sharing supersteps) against the same program over one instance
  (goal: at most 3x).

Every run is warmed up once (Python workers, routing keys, topology and
instance caches), then all runs are repeated in turn and the best time of each
is kept, so both sides of a ratio see the same background load.
"""
from __future__ import annotations

import shutil
import tempfile
import time

import numpy as np
from pyspark.sql import functions as F

from algorithms.sssp import SingleSourceShortestPaths, sssp
from algorithms.tdsp import tdsp
from goffish.temporal import road_with_travel_times
from gopher.timeseries import run_independent


class HourlyShortestPaths(SingleSourceShortestPaths):
    """Shortest travel times from one vertex with each instance's own (static) travel times."""

    def __init__(self, source_vid: int, travel_time: str = "travel_time"):
        super().__init__(source_vid, travel_time)
        self.edge_attributes = ()
        self.instance_edge_attributes = (travel_time,)


def _timed(fn) -> tuple[float, object]:
    clock = time.perf_counter()
    result = fn()
    return time.perf_counter() - clock, result


def bench_timeseries(spark, num_vertices: int, hours: int, num_partitions: int, seed: int = 0,
                     workdir: str | None = None, independent: bool = True, repeat: int = 2) -> dict:
    """Measure TDSP vs SSSP and (if ``independent``) independent-over-``hours`` vs one instance;
    returns the best of ``repeat`` interleaved timings, supersteps and the ratios. The graph
    is written under ``workdir`` (default: a temporary directory, removed afterwards)."""
    root = workdir or tempfile.mkdtemp(prefix="goffish-bench-ts-")
    try:
        write, g = _timed(lambda: road_with_travel_times(f"{root}/road-{num_vertices}-{hours}.gofs", num_vertices,
                                                         hours, num_partitions=num_partitions, seed=seed,
                                                         overwrite=True, spark=spark))
        side = int(np.ceil(np.sqrt(num_vertices)))
        source = min((side // 2) * side + side // 2, num_vertices - 1)     # the middle of the grid
        vid = g.vid_of(source)
        runs = {
            "sssp": lambda: sssp(g, source, "length", progress=False),
            "tdsp": lambda: tdsp(g, source, 0.0, progress=False),
        }
        if independent:
            program = HourlyShortestPaths(vid)
            runs["independent_1"] = lambda: run_independent(g, program, instances=[0], progress=False)
            runs["independent_all"] = lambda: run_independent(g, program, progress=False)
        report = {"num_vertices": num_vertices, "num_edges": g.num_edges, "hours": hours,
                  "num_partitions": num_partitions, "write_seconds": round(write, 2), "repeat": repeat}
        for run in runs.values():
            run()                                                          # warm-up
        for _ in range(repeat):                                            # interleaved: both sides see the same load
            for name, run in runs.items():
                seconds, result = _timed(run)
                if seconds < report.get(f"{name}_seconds", float("inf")):
                    report[f"{name}_seconds"] = round(seconds, 2)
                    report[f"{name}_output_seconds"] = round(result.metrics.output_seconds, 2)
                report[f"{name}_supersteps"] = result.metrics.num_supersteps
                if name == "tdsp":
                    report["tdsp_instances_used"] = len(result.instances)
                    report["tdsp_reached"] = result.dataframe.where(F.col("arrival") < float("inf")).count()
        report["tdsp_over_sssp"] = round(report["tdsp_seconds"] / report["sssp_seconds"], 2)
        if independent:
            report["independent_all_over_1"] = round(report["independent_all_seconds"]
                                                     / report["independent_1_seconds"], 2)
        return report
    finally:
        if workdir is None:
            shutil.rmtree(root, ignore_errors=True)
