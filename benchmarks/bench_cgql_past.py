"""CGQL past frames against connected components over the same stored instances, in one session.

A road-like graph of ``--size`` vertices with ``--hours`` hourly instances: each
instance gives every vertex a ``usage`` and every edge a ``type`` (power /
follow / message), 1% of the edges changing type per hour. In one session:

1. connected components over every instance with the independent pattern
   (the peer: the same instances, the same engine), after one untimed run of
   it that builds the instances' bundles in the workers' caches (and the
   Reach and overlap kernels compiled into numba's cache, as CC's run compiles its own,
   and the two query programs run once over the first instance selecting
   nothing, so the workers have imported their modules, as for CC; then CC
   once more, untimed, so the warm-up's reads leave the peer no colder);
2. a ``Cluster`` query over the whole past (``--cluster``);
3. a ``Reach`` query over ``--sources`` selected sources (``--reach``);
4. an ``Evolved`` query over the ``Cluster`` query's groups as its alias (``evolved``;
   events: both topics');
5. a ``Reach`` from the selected sources that are members of the ``Cluster`` query's reported
   groups (``source: {source = 1, id = S.*}``): both run as the stages of one run (``wildcard``;
   events: both topics').

Per phase, run ``--repeats`` times round robin: the median wall seconds (every run's beside
it) and the driver's peak Python RSS (the process's high-water
mark, reset before each phase through ``/proc/self/clear_refs``), next to the idle
session's (after start-up, importing the query modules and opening the graph, so a
peak measures what a query holds, not what importing it costs); where the queries' past ran
(``Query.past_engine``) and each run's set-up, supersteps (per instance too) and
task compute time. The load average is printed
beside the figures: on a shared machine the wall figures include waiting for a core.

    python -m benchmarks cgql_past --size 1000000 --hours 24 --partitions 8 --workdir /tmp/cgql-past \\
        --json bench-results/cgql_past.json
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time

import numpy as np
import pandas as pd

from benchmarks import print_results

CLUSTER = "DETECT Cluster(usage < 30, sum(node.usage) > 400) WHERE edge: {type = power}"
REACH = "DETECT Reach(source: {source = 1}, sink: {usage > 38}) WHERE edge: {type = power}"
EVOLVED = CLUSTER + " AS S; DETECT Evolved(S) WHERE sum(node.usage) > 600 AND SUCCEEDS S"
WILDCARD = CLUSTER + (" AS S; DETECT Reach(source: {source = 1, id = S.*}, sink: {usage > 38}) "
                      "WHERE edge: {type = power}")
#: untimed, after the idle figure (what they leave counts against the queries' peaks): the same programs over
#: the first instance, selecting nothing (other conditions than the timed queries': no partition pass is reused)
WARM = ("DETECT Cluster(usage < 0) WHERE edge: {type = follow} FROM 0 TO 1",
        "DETECT Reach(source: {usage < 0}, sink: {usage > 38}) WHERE edge: {type = follow} FROM 0 TO 1")


def _rss_peak_mb() -> float:
    with open("/proc/self/status") as status:
        return int(re.search(r"VmHWM:\s+(\d+) kB", status.read()).group(1)) / 1024


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")


def _run_profile(metrics) -> dict:
    """Where a run's time went: set-up, supersteps (in all, per instance, the slowest task's
    compute and exchange) and output, from its :class:`gopher.metrics.RunMetrics`."""
    steps = metrics.supersteps
    per_instance: dict = {}
    for s in steps:
        per_instance.setdefault(s.instance, []).append(s.seconds)
    return {"setup_s": metrics.setup_seconds, "output_s": metrics.output_seconds, "supersteps": len(steps),
            "superstep_s": sum(s.seconds for s in steps), "task_s": sum(s.task_seconds for s in steps),
            "exchange_s": sum(s.exchange_seconds for s in steps),
            "supersteps_per_instance": {str(k): len(v) for k, v in per_instance.items()},
            "seconds_per_instance": {str(k): round(sum(v), 4) for k, v in per_instance.items()}}


def _compile_kernels() -> None:
    """Compile the Reach program's numba kernels, Cluster's overlap counting (the warm-up query
    selects no groups: it never counts overlaps) and its pass's kernels into their on-disk cache in a
    child process, as the untimed CC run does for the components kernels: the workers then load them
    instead of timing a compile, and the driver's memory is not changed by them."""
    code = ("import numpy as np; from hatrick.cgql.programs import overlap_counts, kept_adjacency, "
            "first_row_numbering; from hatrick.reachability import set_bits, spread_bits; "
            "spread_bits(np.zeros(2, np.int64), np.empty(0, np.int64), np.zeros((1, 1), np.uint64), "
            "np.zeros(1, np.int64)); set_bits(np.zeros((1, 1), np.uint64)); "
            "overlap_counts(np.zeros(1, np.int64), np.zeros(1, np.int64), 1, 1); "
            "kept_adjacency(np.zeros(1, np.int64), np.zeros(1, np.int64), np.ones(1, bool), np.ones(1, bool), 1); "
            "first_row_numbering(np.zeros(1, np.int32), np.ones(1, bool), 1)")
    subprocess.run([sys.executable, "-c", code], check=True)


def build(path: str, size: int, hours: int, partitions: int, sources: int, seed: int, spark):
    """The graph and its instances (kept at ``path`` and reused when it exists)."""
    import goffish
    from goffish.generators import road_network
    from gofs.instances import Instance

    if os.path.exists(path):
        return goffish.open(path)
    graph = road_network(size, seed=seed)
    src, dst = graph.edges.column("src").to_numpy(), graph.edges.column("dst").to_numpy()
    g = goffish.ingest(graph, path, num_partitions=partitions, spark=spark)
    rng = np.random.default_rng(seed)
    ids = np.arange(size)
    source = np.zeros(size, np.int8)
    source[rng.choice(size, sources, replace=False)] = 1
    kind = rng.choice(np.array(["power", "follow", "message"]), len(src), p=[0.5, 0.3, 0.2])
    for hour in range(hours):
        if hour:
            change = rng.random(len(src)) < 0.01
            kind = np.where(change, rng.choice(np.array(["power", "follow", "message"]), len(src)), kind)
        g.append_instances([Instance(3600.0 * hour, 3600.0 * (hour + 1),
                                     vertex_values=pd.DataFrame({"id": ids, "usage": rng.integers(0, 40, size),
                                                                 "source": source}),
                                     edge_values=pd.DataFrame({"src": src, "dst": dst, "type": kind}))])
    return g


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=50_000, help="road-like graph vertices")
    parser.add_argument("--hours", type=int, default=24)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--sources", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", default="/tmp/cgql-past")
    parser.add_argument("--repeats", type=int, default=3,
                        help="runs of every phase, round robin; the figures are the medians")
    parser.add_argument("--json", help="write the results here too")
    args = parser.parse_args(argv)

    import goffish
    import hatrick.cgql.engine  # noqa: F401  the idle session has the query modules (lark, numba: ~115 MB)
    from algorithms.components import ConnectedComponents
    from gopher.timeseries import run_independent

    spark = goffish.session()
    path = os.path.join(args.workdir, f"road-{args.size}-{args.hours}h.gofs")
    g = build(path, args.size, args.hours, args.partitions, args.sources, args.seed, spark)
    run_independent(g, ConnectedComponents(), progress=False)      # untimed: instance bundles, JIT, workers
    _compile_kernels()
    _reset_peak()
    idle = _rss_peak_mb()
    for text in WARM:             # untimed, after the idle figure: the workers import the query modules
        goffish.query(g, text).read()
    run_independent(g, ConnectedComponents(), progress=False)   # untimed: the peer as warm as the queries
    out = {"vertices": args.size, "hours": args.hours, "partitions": args.partitions, "sources": args.sources,
           "idle_rss_mb": idle}
    phases = [("cc_independent", lambda: run_independent(g, ConnectedComponents(), progress=False)),
              ("cluster", lambda: goffish.query(g, CLUSTER)),
              ("reach", lambda: goffish.query(g, REACH)),
              ("evolved", lambda: goffish.query(g, EVOLVED)),
              ("wildcard", lambda: goffish.query(g, WILDCARD))]
    times: dict[str, list] = {name: [] for name, _ in phases}
    for _ in range(args.repeats):               # round robin: a slow spell of the machine hits every phase alike
        for name, run in phases:
            _reset_peak()
            clock = time.perf_counter()
            result = run()
            events = None if name == "cc_independent" else [e for t in result.query.topics.values() for e in t.read()]
            times[name].append(time.perf_counter() - clock)
            out[f"{name}_rss_mb"] = max(out.get(f"{name}_rss_mb", 0.0), _rss_peak_mb())
            out[f"{name}_events"] = None if events is None else len(events)
            if name == "cc_independent":
                out[f"{name}_run"] = _run_profile(result.metrics)
            else:
                out[f"{name}_engine"] = result.query.past_engine
                metrics = result.query.past_metrics.get(result.query.plan.subqueries[0].name)   # none off Gopher
                out[f"{name}_run"] = None if metrics is None else _run_profile(metrics)
    for name, seconds in times.items():
        out[f"{name}_s"] = float(np.median(seconds))
        out[f"{name}_runs_s"] = seconds
    for name in ("cluster", "reach", "evolved", "wildcard"):
        out[f"{name}_vs_cc"] = out[f"{name}_s"] / out["cc_independent_s"]
        out[f"{name}_rss_vs_idle"] = out[f"{name}_rss_mb"] / idle
    out["load"] = os.getloadavg()
    print_results(out, args.json)
    return out


if __name__ == "__main__":
    main()
