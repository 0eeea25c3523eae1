"""``./run.sh bench`` (``python -m benchmarks gopher``): Gopher vs GraphFrames (same Spark session) vs igraph (one core).

For each algorithm every system runs once untimed (warm-up), then once timed
with its result forced into existence (a checksum over every value, not a lazy
count). The three answers are compared, and a table plus a JSON file report
seconds, ratios to Gopher, supersteps and messages. A baseline that runs past
``--baseline-timeout`` is cancelled and reported as a lower bound.

Each Gopher row also says which transport ran, the median superstep, and COST:
the cores Gopher would need to beat one igraph thread, extrapolated from a run
on one task (core) and one on every core. ``--ping-supersteps N`` times N
supersteps of :class:`Ping` (every sub-graph messages its neighbours): the
engine's fixed cost per superstep with ``compute`` run once per sub-graph, and
of :class:`PartitionPing`, the same messages sent by ``compute_partition``.
``--cold`` runs each algorithm in a fresh process instead: first run against
warm run, each against igraph (:mod:`benchmarks.bench_cold`).
"""
from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql import functions as F

from algorithms import baselines
from algorithms.baselines import canonical_components
from benchmarks import scratch_directory
from gopher.program import SubgraphProgram


def _checksum(frame, column: str) -> float:
    """Materialise every row: count plus the sum of the finite values."""
    finite = F.when(~F.isnan(F.col(column)) & (F.abs(F.col(column)) != float("inf")), F.col(column))
    row = frame.agg(F.count(F.lit(1)).alias("n"), F.sum(finite.cast("double")).alias("s")).first()
    return float(row["s"] or 0.0) + row["n"]


class _Timeout(Exception):
    pass


def _timed(spark, fn, timeout: float | None):
    """(seconds, value) of fn(); Spark jobs still running after ``timeout`` are cancelled."""
    group = f"goffish-bench-{time.monotonic_ns()}"
    sc = spark.sparkContext
    sc.setJobGroup(group, "goffish bench baseline", interruptOnCancel=True)
    timer = threading.Timer(timeout, sc.cancelJobGroup, args=(group,)) if timeout else None
    if timer:
        timer.start()
    clock = time.perf_counter()
    try:
        value = fn()
    except Exception as exc:
        if timer and not timer.is_alive():
            raise _Timeout() from exc
        raise
    finally:
        if timer:
            timer.cancel()
        sc.setLocalProperty("spark.jobGroup.id", None)
    return time.perf_counter() - clock, value


def cost(one_core: float, two_cores: float, reference: float) -> float:
    """COST (McSherry et al., HotOS 2015): the cores at which Gopher beats ``reference``
    (one igraph thread), extrapolated from runs on 1 and 2 cores with Amdahl's law,
    t(c) = serial + parallel / c. ``inf`` when even the serial part is slower."""
    if one_core <= reference:
        return 1.0
    parallel = max(0.0, 2.0 * (one_core - two_cores))
    serial = one_core - parallel
    if serial >= reference or parallel == 0.0:
        return float("inf")
    return float(np.ceil(parallel / (reference - serial)))


class Ping(SubgraphProgram):
    """Every sub-graph messages each neighbouring sub-graph every superstep, never halting:
    a superstep's fixed cost with a realistic message pattern."""

    def compute(self, subgraph, messages, ctx):
        ctx.send_to_neighbors(ctx.superstep)


class PartitionPing(Ping):
    """:class:`Ping`'s messages, sent once per partition by ``compute_partition`` (a library
    program's vectorised path); ``compute`` runs nowhere."""

    partition_messages = True

    def compute_partition(self, subgraphs, ctx):
        ctx.send_to_neighbors_of(subgraphs, ctx.superstep)
        return True


def ping(g, supersteps: int, program=None) -> dict:
    """Median and 90th-percentile superstep wall time of ``supersteps`` Ping supersteps."""
    program = program or Ping()
    g.run(program, max_supersteps=5, progress=False)
    result = g.run(program, max_supersteps=supersteps, progress=False)
    steps = result.metrics.supersteps[1:]
    seconds = np.array([s.seconds for s in steps])
    compute, send = np.array([s.task_seconds for s in steps]), np.array([s.exchange_seconds for s in steps])
    return {"program": type(program).__name__, "supersteps": supersteps, "transport": result.metrics.transport,
            "median_ms": round(float(np.median(seconds)) * 1e3, 3),
            "p90_ms": round(float(np.percentile(seconds, 90)) * 1e3, 3),
            # where a superstep goes (medians, the slowest task's): its partitions' compute and routing, its
            # sends, and the rest, mostly waiting for the peers' frames (a wake-up, or a slower peer)
            "compute_ms": round(float(np.median(compute)) * 1e3, 3),
            "send_ms": round(float(np.median(send)) * 1e3, 3),
            "rest_ms": round(float(np.median(seconds - compute - send)) * 1e3, 3),
            "messages_per_superstep": result.metrics.supersteps[1].messages,
            "run_seconds": round(result.metrics.seconds, 3)}


def _dense_edges(g):
    """Canonical edges as dense vertex ids (what igraph gets), with their weights."""
    tables = [g.read_edge_partition(p, attributes=[a for a in ("length", "weight") if a in g.edge_attributes],
                                    internal=True) for p in range(g.num_partitions)]
    edges = pa.concat_tables(tables)
    edges = edges.filter(pa.compute.invert(edges.column("mirror")))
    return edges


def _by_id(frame, column, ids, id_index):
    pdf = frame.toPandas()
    values = np.full(len(ids), np.nan)
    values[id_index.get_indexer(pdf["id"].to_numpy())] = pdf[column].to_numpy()
    return values


def run_bench(spark, g, algorithms, pagerank_iterations=10, skip_graphframes=False,
              baseline_timeout=None, seed=0, log=print) -> dict:
    ids = g.vertex_ids.to_numpy(zero_copy_only=False)
    id_index = pd.Index(ids)
    edges = _dense_edges(g)
    src, dst = edges.column("src").to_numpy(), edges.column("dst").to_numpy()
    n, directed = g.num_vertices, g.directed
    vertices_df = g.vertices(attributes=[]).cache()
    edges_df = g.edges(attributes=[]).cache()
    vertices_df.count(), edges_df.count()

    membership = baselines.igraph_components(n, src, dst)
    sizes = np.bincount(membership)
    rng = np.random.default_rng(seed)
    source_vid = int(rng.choice(np.flatnonzero(membership == np.argmax(sizes))))
    source = ids[source_vid].item() if hasattr(ids[source_vid], "item") else ids[source_vid]
    rows = []

    def record(algorithm, system, seconds, metrics=None, agrees=None, note="", lower_bound=False):
        row = {"algorithm": algorithm, "system": system, "seconds": seconds, "agrees": agrees, "note": note,
               "lower_bound": lower_bound}
        if metrics is not None:
            row.update({"supersteps": metrics.num_supersteps, "messages": metrics.messages})
        rows.append(row)
        log(f"  {algorithm:9s} {system:12s} {seconds:9.3f}s {note}")

    specs = {
        "cc": (lambda **o: g.connected_components(progress=False, **o), "component",
               lambda: baselines.graphframes_connected_components(vertices_df, edges_df),
               lambda: baselines.igraph_components(n, src, dst)),
        "sssp": (lambda **o: g.sssp(source, progress=False, **o), "distance",
                 lambda: baselines.graphframes_shortest_paths(vertices_df, edges_df, source, directed),
                 lambda: baselines.igraph_sssp(n, src, dst, None, source_vid, directed)),
        "pagerank": (lambda **o: g.pagerank(max_iter=pagerank_iterations, tol=0, progress=False, **o), "pagerank",
                     lambda: baselines.graphframes_pagerank(vertices_df, edges_df, directed, pagerank_iterations),
                     lambda: baselines.igraph_pagerank(n, src, dst, directed)),
    }
    for algorithm in algorithms:
        run_gopher, column, run_graphframes, run_igraph = specs[algorithm]
        cold = time.perf_counter()
        run_gopher()
        cold = time.perf_counter() - cold
        seconds, result = _timed(spark, lambda: _with_checksum(run_gopher(), column), None)
        one_core, _ = _timed(spark, lambda: _with_checksum(run_gopher(tasks=1), column), None)
        ours = _by_id(result.dataframe, column, ids, id_index)
        result.unpersist()
        steps = [s.seconds for s in result.metrics.supersteps]
        note = (f"(first run {cold:.3f}s; {result.metrics.transport}, median superstep "
                f"{np.median(steps) * 1e3:.1f} ms; 1 core {one_core:.3f}s)")
        if algorithm == "pagerank":
            exact = _agree(algorithm, ours, power_iterations(n, src, dst, directed, pagerank_iterations))
            note += f"; equals {pagerank_iterations} NetworkX iterations: {'yes' if exact else 'NO'}"
        record(algorithm, "gopher", seconds, result.metrics, agrees=exact if algorithm == "pagerank" else None,
               note=note)
        igraph_seconds, reference = _timed(spark, run_igraph, None)
        rows[-1].update({"transport": result.metrics.transport, "one_core_seconds": one_core,
                         "median_superstep_ms": float(np.median(steps) * 1e3),
                         "cost": cost(one_core, seconds, igraph_seconds)})
        if algorithm == "pagerank":
            record(algorithm, "igraph", igraph_seconds,
                   note=f"exact fixed point; max gap to {pagerank_iterations} iterations {np.abs(ours - reference).max():.1e}")
        else:
            record(algorithm, "igraph", igraph_seconds, agrees=_agree(algorithm, ours, reference))
        if skip_graphframes:
            continue
        try:
            gf_seconds, gf = _timed(spark, lambda: _materialised(run_graphframes(), column), baseline_timeout)
            theirs = _by_id(gf, column, ids, id_index)
            record(algorithm, "graphframes", gf_seconds, agrees=_agree(algorithm, ours, theirs))
        except _Timeout:
            record(algorithm, "graphframes", float(baseline_timeout),
                   note=f"cancelled after {baseline_timeout}s: lower bound", lower_bound=True)
    for row in rows:
        base = next(r["seconds"] for r in rows if r["algorithm"] == row["algorithm"] and r["system"] == "gopher")
        row["ratio_to_gopher"] = row["seconds"] / base if base else None
    vertices_df.unpersist(), edges_df.unpersist()
    return {"graph": g.path, "vertices": n, "edges": g.num_edges, "partitions": g.num_partitions,
            "sssp_source": source, "pagerank_iterations": pagerank_iterations,
            "spark_master": spark.sparkContext.master, "rows": rows}


def _with_checksum(result, column):
    _checksum(result.dataframe, column)
    return result


def _materialised(frame, column):
    frame = frame.localCheckpoint(eager=True)
    _checksum(frame, column)
    return frame


def _agree(algorithm, ours, theirs) -> bool:
    """Same answer: CC as a partition of the vertices, SSSP to 1e-9, PageRank to 1e-6 per vertex."""
    theirs = np.asarray(theirs)
    if algorithm == "cc":
        return bool(np.array_equal(canonical_components(ours), canonical_components(theirs)))
    if algorithm == "sssp":
        theirs = theirs.astype(np.float64)
        return bool(np.array_equal(np.isinf(ours), np.isinf(theirs))
                    and np.allclose(ours[np.isfinite(ours)], theirs[np.isfinite(theirs)], rtol=0, atol=1e-9))
    return bool(np.abs(ours - theirs).max() <= 1e-6)


def power_iterations(n, src, dst, directed, iterations, alpha=0.85) -> np.ndarray:
    """``iterations`` steps of NetworkX's PageRank iteration (uniform start, dangling mass
    spread uniformly): what a fixed-iteration run must equal exactly."""
    import scipy.sparse as sp

    if not directed:
        loop = src == dst
        src, dst = np.concatenate([src, dst[~loop]]), np.concatenate([dst, src[~loop]])
    out_degree = np.bincount(src, minlength=n).astype(np.float64)
    inverse = np.divide(1.0, out_degree, out=np.zeros(n), where=out_degree > 0)
    step = sp.csr_matrix((inverse[src], (dst, src)), shape=(n, n))
    dangling = out_degree == 0
    x = np.full(n, 1.0 / n)
    for _ in range(iterations):
        x = alpha * (step @ x + x[dangling].sum() / n) + (1.0 - alpha) / n
    return x


def format_table(report: dict) -> str:
    lines = [f"{report['vertices']:,} vertices, {report['edges']:,} edges, {report['partitions']} partitions, "
             f"master {report['spark_master']}",
             f"{'algorithm':9s}  {'system':12s} {'seconds':>10s} {'x gopher':>9s} {'supersteps':>10s} "
             f"{'messages':>9s} {'COST':>5s}  agrees"]
    for r in report["rows"]:
        cores = r.get("cost")
        lines.append(f"{r['algorithm']:9s}  {r['system']:12s} {r['seconds']:10.3f} {r['ratio_to_gopher']:9.2f} "
                     f"{r.get('supersteps', ''):>10} {r.get('messages', ''):>9} "
                     f"{'' if cores is None else ('inf' if np.isinf(cores) else int(cores)):>5}  "
                     f"{'' if r['agrees'] is None else ('yes' if r['agrees'] else 'NO')} {r['note']}")
    for p in report.get("ping") or ():
        lines.append(f"ping ({p['program']}): {p['supersteps']} supersteps on the {p['transport']} transport, "
                     f"median {p['median_ms']} ms (compute {p['compute_ms']}, send {p['send_ms']}, rest {p['rest_ms']}), "
                     f"p90 {p['p90_ms']} ms, {p['messages_per_superstep']} messages each")
    return "\n".join(lines)


def _bytes_under(path: Path) -> int:
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())


def ingest_report(generator: str, size: int, partitions: int, seed: int, workdir: Path) -> tuple[str, dict]:
    """Generate, partition, discover sub-graphs and write; seconds per stage and bytes on disk
    against the same graph as a gzipped SNAP edge list."""
    from gofs.ingest.local import dense_ids, ingest_graph as ingest
    from gofs.partition import partition
    from goffish.generators import generate, write_edge_list

    clock = time.perf_counter()
    graph = generate(generator, size, seed=seed)
    stages = {"generate": time.perf_counter() - clock}
    path = str(workdir / f"{generator}-{size}.gofs")
    ingest(graph, path, num_partitions=partitions, seed=seed, timings=stages)
    _, src, dst, _ = dense_ids(graph)
    clock = time.perf_counter()
    partition("metis", int(max(src.max(initial=-1), dst.max(initial=-1)) + 1), src, dst, partitions, seed=seed)
    metis_alone = time.perf_counter() - clock
    edge_list = workdir / f"{generator}-{size}.txt.gz"
    write_edge_list(graph, str(edge_list))
    report = {"generator": generator, "size": size, "partitions": partitions,
              "stages_seconds": {k: round(v, 3) for k, v in stages.items()},
              "end_to_end_seconds": round(sum(stages.values()), 3), "metis_alone_seconds": round(metis_alone, 3),
              "gofs_bytes": {"total": _bytes_under(Path(path)),
                             "template_edges": _bytes_under(Path(path) / "template" / "edges"),
                             "template_vertices": _bytes_under(Path(path) / "template" / "vertices")},
              "edge_list_gz_bytes": edge_list.stat().st_size}
    return path, report


def _parser():
    import argparse

    p = argparse.ArgumentParser(prog="./run.sh bench [gopher]", description=__doc__.split("\n")[0])
    p.add_argument("--generator", default="road", choices=["road", "rmat", "lfr"])
    p.add_argument("--size", type=int, default=100_000)
    p.add_argument("--graph", help="benchmark an existing GoFS graph instead of generating one")
    p.add_argument("--partitions", type=int, default=8)
    p.add_argument("--algorithms", default="cc,sssp,pagerank")
    p.add_argument("--skip-graphframes", action="store_true")
    p.add_argument("--ingest-only", action="store_true", help="only measure generate + ingest (stages, bytes)")
    p.add_argument("--baseline-timeout", type=float, default=None,
                   help="cancel a GraphFrames baseline after this many seconds (reported as a lower bound)")
    p.add_argument("--pagerank-iterations", type=int, default=10)
    p.add_argument("--timeseries-hours", type=int, default=0, help="also bench TDSP/independent runs over N instances")
    p.add_argument("--ping-supersteps", type=int, default=0,
                   help="also time N supersteps of a program where every sub-graph messages its neighbours")
    p.add_argument("--json", default="bench-results/bench.json")
    p.add_argument("--plot", metavar="FILE.png", help="also draw the table as grouped bars (log scale)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--master", help="Spark master URL (default: spark-submit's, else local[*])")
    p.add_argument("--conf", action="append", metavar="KEY=VALUE", help="extra Spark configuration")
    p.add_argument("--verbose", action="store_true", help="show Spark's own log output (default: its errors only)")
    p.add_argument("--cold", action="store_true",
                   help="each algorithm's first run in a fresh process (session start excluded) beside its warm "
                        "run, both against igraph on one core, with where the first run's time went")
    return p


def _session(args):
    """(Spark session, whether this run started it). A session it starts shows only Spark's
    errors unless ``--verbose``, as on the CLI; a caller's session is left as it is."""
    from pyspark.sql import SparkSession

    from goffish import cli_logging
    from goffish.session import session

    conf = dict(kv.split("=", 1) for kv in (args.conf or []))
    ours = SparkSession.getActiveSession() is None
    quiet = ours and not args.verbose
    if quiet and not cli_logging.jvm_running():
        conf = cli_logging.quiet_conf(conf)
    spark = session(master=args.master, app_name="goffish bench", conf=conf)
    if quiet:
        cli_logging.quiet_session(spark)
    return spark, ours


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    if args.plot and not os.path.isdir(os.path.dirname(os.path.abspath(args.plot))):
        raise SystemExit(f"{args.plot}: cannot write the picture there, "
                         f"no directory {os.path.dirname(os.path.abspath(args.plot))}")
    if args.cold:                       # every run in a process of its own: no session here
        from benchmarks.bench_cold import main as cold

        return cold(args)
    spark, ours = _session(args)
    try:
        return _run(spark, args)
    finally:
        if ours:
            spark.stop()


def _run(spark, args) -> int:
    import goffish

    if args.graph:
        g = goffish.open(args.graph, spark=spark)
        ingest = None
    else:
        path, ingest = ingest_report(args.generator, args.size, args.partitions, args.seed,
                                     Path(scratch_directory("goffish-bench-")))
        print("ingest: " + json.dumps(ingest))
        g = goffish.open(path, spark=spark)
        if args.ingest_only:
            return 0
    algorithms = [a for a in args.algorithms.split(",") if a]
    report = run_bench(spark, g, algorithms, args.pagerank_iterations, args.skip_graphframes,
                       args.baseline_timeout, args.seed)
    report["ingest"] = ingest
    if args.ping_supersteps:
        report["ping"] = [ping(g, args.ping_supersteps, program) for program in (Ping(), PartitionPing())]
    if args.timeseries_hours:
        from benchmarks.bench_timeseries import bench_timeseries

        report["timeseries"] = bench_timeseries(spark, g.num_vertices, args.timeseries_hours, g.num_partitions)
    print(format_table(report))
    if report.get("timeseries"):
        print(json.dumps(report["timeseries"], indent=1))
    os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
    with open(args.json, "w") as out:
        json.dump(report, out, indent=1, default=str)
    print(f"wrote {args.json}")
    if getattr(args, "plot", None):
        from goffish.plots import plot_bench

        plot_bench(report, args.plot)
        print(f"wrote {args.plot}")
    return 0 if all(r["agrees"] is not False for r in report["rows"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
