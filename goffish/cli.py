"""The ``goffish`` command line: ingest, info, generate, run, stream, bench, demo.

Every command that needs Spark builds its session through ``goffish.session``,
so ``--master`` and ``--conf key=value`` work as they do for spark-submit, and
under spark-submit the submitted master and conf win. The CLI is an
application: it shows only Spark's errors unless ``--verbose``
(see :mod:`goffish.cli_logging`); the library never does this.
"""
from __future__ import annotations

import argparse
import json
import sys
import time


def _spark(args):
    from pyspark.sql import SparkSession

    from goffish import cli_logging
    from goffish.session import session

    conf = dict(kv.split("=", 1) for kv in (args.conf or []))
    # quiet only a session the CLI itself starts (or spark-submit started for it), never a caller's
    ours = SparkSession.getActiveSession() is None
    quiet = ours and not args.verbose
    if quiet and not cli_logging.jvm_running():
        conf = cli_logging.quiet_conf(conf)
    spark = session(master=args.master, app_name=f"goffish {args.command}", conf=conf)
    if quiet:
        cli_logging.quiet_session(spark)
    if ours:
        args.own_session = spark  # stopped when the command ends (see main)
    return spark


def _add_spark_options(parser):
    parser.add_argument("--master", help="Spark master URL (default: spark-submit's, else local[*])")
    parser.add_argument("--conf", action="append", metavar="KEY=VALUE", help="extra Spark configuration")
    parser.add_argument("--verbose", action="store_true",
                        help="show Spark's own log output (default: its errors only)")


def cmd_ingest(args) -> int:
    import goffish
    from gofs.spark_ingest import choose_engine

    engine = choose_engine(args.input, args.engine, args.engine_threshold)
    needs_spark = engine == "spark" or args.partitioner in ("spark-lp", "multilevel")
    spark = _spark(args) if needs_spark else None
    options = {"directed": args.directed}
    if args.weight:
        options["weight"] = args.weight
    if args.attributes:
        options["attribute_names"] = args.attributes.split(",")
    if args.format:
        options["format"] = args.format
    timings: dict = {}
    if engine == "spark":
        from gofs.spark_ingest import ingest as ingest_on_spark

        budget = {"driver_budget_edges": args.driver_budget_edges} if args.driver_budget_edges else {}
        ingest_on_spark(spark, args.input, args.graph, num_partitions=args.partitions,
                        partitioner=args.partitioner, overwrite=args.overwrite, seed=args.seed, timings=timings,
                        **options, **budget)
    else:
        from gofs.ingest import ingest
        from gofs.sources import read_graph

        clock = time.perf_counter()
        graph = read_graph(args.input, **options)
        timings["read"] = time.perf_counter() - clock
        ingest(graph, args.graph, num_partitions=args.partitions, partitioner=args.partitioner or "metis",
               overwrite=args.overwrite, seed=args.seed, spark=spark, timings=timings)
    print(goffish.open(args.graph).info())
    print(f"ingest engine: {engine}")
    print("ingest seconds: " + ", ".join(f"{k} {v:.2f}" for k, v in timings.items()))
    return 0


def cmd_info(args) -> int:
    import goffish

    g = goffish.open(args.graph)
    _check_picture_path(args.plot)
    print(json.dumps(g.manifest, indent=1) if args.json else g.info())
    if args.plot:
        from goffish.plots import plot_graph

        plot_graph(g, args.plot)
        print(f"wrote {args.plot}", file=sys.stderr if args.json else sys.stdout)
    return 0


def cmd_generate(args) -> int:
    from goffish.generators import generate, write_edge_list

    graph = generate(args.kind, args.size, seed=args.seed)
    if args.out.endswith(".gofs") or args.gofs:
        from gofs.ingest import ingest

        ingest(graph, args.out, num_partitions=args.partitions, partitioner=args.partitioner,
               overwrite=args.overwrite, seed=args.seed)
    else:
        write_edge_list(graph, args.out)
    print(f"wrote {args.kind} graph ({graph.edges.num_rows:,} edges) to {args.out}")
    return 0


def _write_result(frame, out: str, overwrite: bool) -> None:
    frame.write.mode("overwrite" if overwrite else "errorifexists").parquet(out)


def _source_id(g, args):
    """--source as the graph's id type, or a clear error."""
    from gofs.errors import InputError

    if g.manifest["id_type"] != "int64":
        return args.source
    try:
        return int(args.source)
    except ValueError:
        raise InputError(f"{args.graph}: --source {args.source!r} is not a vertex id "
                         "(this graph's vertex ids are integers)") from None


def cmd_run(args) -> int:
    import goffish
    from gofs.housekeeping import check_result_target

    check_result_target(args.out, args.graph, args.overwrite)   # before running the algorithm, not after it
    _check_picture_path(args.timeline)
    spark = _spark(args)
    g = goffish.open(args.graph, spark=spark)
    options = {"progress": not args.quiet}
    if args.instance is not None:
        if args.algorithm in TIMESERIES_ALGORITHMS:
            raise SystemExit(f"goffish run {args.algorithm}: --instance is for single runs; use --instances")
        options["instance"] = args.instance
    if args.algorithm in TIMESERIES_ALGORITHMS:
        return _run_timeseries(g, args, options)
    if args.algorithm == "betweenness":
        result = g.betweenness(k=args.sources, normalized=not args.raw, weight=args.weight, top=args.top_k,
                               seed=args.seed, batch_size=args.batch_size, stable_batches=args.stable_batches,
                               **options)
    elif args.algorithm == "cc":
        result = g.connected_components(**options)
    elif args.algorithm == "louvain":
        result = g.louvain(weight=args.weight, resolution=args.resolution, seed=args.seed,
                           levels=True if args.levels else None, **options)
    elif args.algorithm == "sssp":
        if args.source is None:
            raise SystemExit("goffish run sssp: --source is required")
        result = g.sssp(_source_id(g, args), weight=args.weight, **options)
    else:
        result = g.pagerank(alpha=args.alpha, max_iter=args.max_iter, tol=args.tol, weight=args.weight, **options)
    _write_result(result.dataframe, args.out, args.overwrite)
    _timeline(result.metrics, args)
    summary = result.metrics.as_dict()
    summary.pop("per_superstep")
    if args.algorithm == "betweenness":
        summary.update(result.aggregated)

    if args.algorithm == "louvain":
        summary.update(modularity=result.modularity, communities=result.level_sizes, phase_seconds=result.seconds)
    print(json.dumps({"algorithm": args.algorithm, "out": args.out, **summary}))
    return 0


TIMESERIES_ALGORITHMS = ("tdsp", "memes", "hashtags")


def _check_picture_path(path) -> None:
    """Say before a long run, not after it, that a --plot/--timeline file cannot be written."""
    import os

    from gofs.errors import InputError

    if path and not os.path.isdir(os.path.dirname(os.path.abspath(path))):
        raise InputError(f"{path}: cannot write the picture there, "
                         f"no directory {os.path.dirname(os.path.abspath(path))}")


def _timeline(metrics, args) -> None:
    """--timeline FILE.png: the run's supersteps as a picture (stderr says where; stdout stays JSON)."""
    if args.timeline:
        metrics.plot(args.timeline)
        print(f"wrote {args.timeline}", file=sys.stderr)


def _run_timeseries(g, args, options) -> int:
    """tdsp writes OUT; memes writes OUT/tree and OUT/counts; hashtags OUT/neighbourhood and OUT/top."""
    selection = {"instances": [int(i) for i in args.instances.split(",")] if args.instances else None,
                 "time": None if not args.time else
                 (float(args.time) if "," not in args.time else tuple(float(t) for t in args.time.split(",")))}
    if args.algorithm == "tdsp":
        if args.source is None or args.departure is None:
            raise SystemExit("goffish run tdsp: --source and --departure are required")
        result = g.tdsp(_source_id(g, args), args.departure, travel_time=args.travel_time, **selection, **options)
        frames, metrics = {"": result.dataframe}, result.metrics
    elif args.algorithm == "memes":
        if args.meme is None:
            raise SystemExit("goffish run memes: --meme is required")
        spread = g.meme_tracking(args.meme, attribute=args.attribute, **selection, **options)
        frames, metrics = {"tree": spread.tree, "counts": spread.counts}, spread.result.metrics
    else:
        summary = g.hashtag_aggregation(k=args.top, attribute=args.attribute, **selection, **options)
        frames, metrics = {"neighbourhood": summary.neighbourhood, "top": summary.top}, summary.result.metrics
    for name, frame in frames.items():
        _write_result(frame, f"{args.out}/{name}" if name else args.out, args.overwrite)
    _timeline(metrics, args)
    report = metrics.as_dict()
    report.pop("per_superstep")
    print(json.dumps({"algorithm": args.algorithm, "out": args.out, **report}))
    return 0


def _param_value(text: str):
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


def cmd_query(args) -> int:
    """Register a CGQL query; write every topic to OUT/<topic> (or print events as JSON lines)."""
    import os

    from hatrick.cgql import CGQLError, query

    params = {}
    for kv in args.param or []:
        if "=" not in kv:
            raise SystemExit(f"goffish query: --param {kv!r}: expected NAME=VALUE")
        key, value = kv.split("=", 1)
        params[key] = _param_value(value)
    stream = source = None
    if args.stream:
        import goffish

        stream = goffish.open(args.graph, spark=_spark(args)).stream()
    try:
        topic = query(args.graph, args.text, params=params, time_ordered=args.time_ordered, stream=stream,
                      now=args.now, time_unit=args.time_unit)
    except CGQLError as exc:
        print(f"goffish query: error: {exc}", file=sys.stderr)
        return 2
    if stream is not None:
        source = stream.start(args.stream, trigger="availableNow" if args.duration is None else "processingTime=1 second")
    topics = topic.query.topics
    if args.out:
        for name, t in topics.items():
            t.sink(os.path.join(args.out, name), format=args.format)
    else:
        for name, t in topics.items():
            t.subscribe(lambda e: print(json.dumps(e, default=str), flush=True))
    if source is not None and args.duration is None:
        source.awaitTermination()
    elif not topic.query.cancelled:
        deadline = time.time() + args.duration if args.duration else None
        while not topic.query.cancelled and (deadline is None or time.time() < deadline):
            time.sleep(0.1)
    topic.query.cancel()
    if stream is not None:
        stream.stop()
    if topic.query.error is not None:
        print(f"goffish query: error: {topic.query.error}", file=sys.stderr)
        return 2
    print(json.dumps({"plan": topic.query.plan.kind, "snapshots": topic.query.snapshots,
                      "topics": {name: len(t) for name, t in topics.items()}, "out": args.out}),
          file=sys.stderr if not args.out else sys.stdout)
    return 0


def cmd_demo(args) -> int:
    from goffish.demo import main as demo

    return demo(_spark(args), workdir=args.workdir)


def cmd_bench(args) -> int:
    from goffish.bench import main as bench

    _check_picture_path(args.plot)
    return bench(_spark(args), args)


def cmd_stream(args) -> int:
    import goffish
    from hatrick.buffer import SnapshotPolicy

    spark = _spark(args)
    g = goffish.open(args.graph, spark=spark)
    policy = SnapshotPolicy(interval=args.snapshot_interval, min_volume=args.snapshot_min,
                            max_age=args.snapshot_max_age)
    s = g.stream(checkpoint=args.checkpoint, snapshot_policy=policy, aging_ttl=args.ttl)

    def progress(view):
        print(f"batch {view.seq}: time {view.time}, {s.num_vertices:,} vertices, "
              f"{s.num_edges:,} edges, {len(s.rejected)} rejected so far", flush=True)

    s.on_batch(progress)
    query = s.start(args.source, format=args.format, trigger=args.trigger)
    try:
        query.awaitTermination(args.timeout)
    except KeyboardInterrupt:
        pass
    finally:
        s.stop()
    if s.buffer.volume:
        s.snapshot()
    for r in s.snapshots:
        print(f"snapshot instance {r.instance}: {r.buffered_updates:,} updates, +{r.added_edges} -{r.removed_edges} "
              f"edges, +{r.added_vertices} vertices, {r.seconds:.2f}s")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="goffish", description="GoFFish on Spark: GoFS storage, Gopher analytics")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("ingest", help="store a graph (edge list, CSV, Parquet) as GoFS")
    p.add_argument("input")
    p.add_argument("graph", help="GoFS directory to create")
    p.add_argument("--format", choices=["edgelist", "csv", "parquet"])
    p.add_argument("--directed", action="store_true")
    p.add_argument("--weight", help="name of the single weight column of an edge list")
    p.add_argument("--attributes", help="comma-separated names of all extra edge-list columns")
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--partitioner", default=None, choices=["metis", "hash", "spark-lp", "multilevel"],
                   help="default: metis with the local engine, multilevel with the Spark engine")
    p.add_argument("--engine", default="auto", choices=["auto", "local", "spark"],
                   help="local: in this process; spark: every stage on Spark (graphs larger than the driver); "
                        "auto (default): spark for inputs above --engine-threshold")
    p.add_argument("--engine-threshold", type=int, default=None, metavar="BYTES",
                   help="auto engine: input size (gzip counted 4x) above which Spark ingests "
                        "(default: conf spark.goffish.ingest.localMaxBytes, else 256 MiB)")
    p.add_argument("--driver-budget-edges", type=int, default=None,
                   help="multilevel on Spark: coarsen until the graph METIS gets has at most this many edges")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--overwrite", action="store_true")
    _add_spark_options(p)
    p.set_defaults(fn=cmd_ingest)

    p = sub.add_parser("info", help="print a GoFS graph's statistics")
    p.add_argument("graph")
    p.add_argument("--json", action="store_true", help="print the whole manifest")
    p.add_argument("--plot", metavar="FILE.png",
                   help="also draw partitions, cut edges, sub-graph sizes and meta-graph degrees as PNG")
    p.set_defaults(fn=cmd_info)

    p = sub.add_parser("generate", help="generate a dataset (edge list, or GoFS if OUT ends in .gofs)")
    p.add_argument("kind", choices=["road", "rmat", "lfr"])
    p.add_argument("--size", type=int, required=True, help="vertices (road, lfr) or scale (rmat)")
    p.add_argument("--out", required=True)
    p.add_argument("--gofs", action="store_true", help="write GoFS whatever OUT's name")
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--partitioner", default="metis", choices=["metis", "hash"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--overwrite", action="store_true")
    p.set_defaults(fn=cmd_generate)

    p = sub.add_parser("run", help="run an algorithm on a GoFS graph and write Parquet")
    p.add_argument("algorithm", choices=["cc", "sssp", "pagerank", "betweenness", "louvain",
                                          *TIMESERIES_ALGORITHMS])
    p.add_argument("graph")
    p.add_argument("--out", required=True, help="Parquet output directory")
    p.add_argument("--source", help="sssp: source vertex id")
    p.add_argument("--weight", help="edge attribute used as length (sssp) or weight (pagerank, louvain)")
    p.add_argument("--resolution", type=float, default=1.0, help="louvain: NetworkX's resolution (> 0)")
    p.add_argument("--levels", action="store_true", help="louvain: also write one level_k column per level")
    p.add_argument("--alpha", type=float, default=0.85)
    p.add_argument("--max-iter", type=int, default=100)
    p.add_argument("--tol", type=float, default=1e-6)
    p.add_argument("--overwrite", action="store_true")
    p.add_argument("--quiet", action="store_true", help="no superstep progress lines")
    p.add_argument("--instance", type=int, help="cc/sssp/pagerank/louvain/betweenness: run on this instance's topology and values")
    p.add_argument("--instances", help="tdsp/memes/hashtags: comma-separated instance ids (default: all)")
    p.add_argument("--time", help="tdsp/memes/hashtags: instances covering TIME or overlapping START,END")
    p.add_argument("--departure", type=float, help="tdsp: departure time at --source")
    p.add_argument("--travel-time", default="travel_time", help="tdsp: per-instance edge travel-time attribute")
    p.add_argument("--meme", help="memes: the post value to track, e.g. '#meme0'")
    p.add_argument("--attribute", default="hashtags", help="memes/hashtags: per-instance list<string> of posts")
    p.add_argument("--top", type=int, default=10, help="hashtags: how many hashtags the merged ranking keeps")
    p.add_argument("--timeline", metavar="FILE.png",
                   help="also draw each superstep's time (compute, exchange, rest), active sub-graphs and messages")
    p.add_argument("--sources", type=int, help="betweenness: sample this many sources (default: all, exact)")
    p.add_argument("--top-k", type=int, help="betweenness: only the top K vertices, sources until they are stable")
    p.add_argument("--stable-batches", type=int, default=3, help="betweenness --top-k: batches the top set must hold")
    p.add_argument("--batch-size", type=int, help="betweenness: sources per batch (default: from memory)")
    p.add_argument("--raw", action="store_true", help="betweenness: not normalized (undirected pairs counted once)")
    p.add_argument("--seed", type=int, default=0, help="louvain, betweenness: random seed (deterministic runs)")
    _add_spark_options(p)
    p.set_defaults(fn=cmd_run)

    p = sub.add_parser("query", help="run a CGQL continuous query over a GoFS graph (and a live stream)")
    p.add_argument("graph", help="GoFS graph directory (its instances are the past)")
    p.add_argument("text", help="CGQL, e.g. 'DETECT Cluster(sum(node.usage) > C) WHERE edge: {type = power}'")
    p.add_argument("--stream", metavar="DIR",
                   help="also follow live updates: a directory of JSON-lines update files (Hatrick); drained "
                        "once unless --duration keeps following it")
    p.add_argument("--out", help="write each topic to OUT/<topic>/part-*.parquet|jsonl (default: print JSON lines)")
    p.add_argument("--format", default="parquet", choices=["parquet", "json"])
    p.add_argument("--param", action="append", metavar="NAME=VALUE", help="bind a symbolic constant (C=100)")
    p.add_argument("--now", type=float, help="current graph time (default: the stream's clock; none: all past)")
    p.add_argument("--time-unit", type=float, default=1.0, help="seconds per graph time unit (for 20h, 2d, ...)")
    p.add_argument("--duration", type=float, help="follow a live stream this many seconds, then cancel")
    p.add_argument("--time-ordered", action="store_true", help="sort each publication's events by time")
    p.set_defaults(fn=cmd_query)

    p = sub.add_parser("demo", help="the main job: ingest the sample road graph, run CC, SSSP, PageRank")
    p.add_argument("--workdir", default=None, help="where to put the GoFS graph (default: a temp dir)")
    _add_spark_options(p)
    p.set_defaults(fn=cmd_demo)

    p = sub.add_parser("stream", help="apply a stream of updates (JSON-lines/Parquet files) to a GoFS graph")
    p.add_argument("graph")
    p.add_argument("--source", required=True, help="directory that update files arrive in")
    p.add_argument("--format", default="json", choices=["json", "parquet"])
    p.add_argument("--checkpoint", help="checkpoint directory (exactly-once across restarts)")
    p.add_argument("--trigger", default="availableNow",
                   help="availableNow (drain and stop), once, or processingTime=<interval> (keep running)")
    p.add_argument("--timeout", type=float, default=None, help="stop after this many seconds")
    p.add_argument("--ttl", type=float, default=None, help="remove edges unused for this much event time")
    p.add_argument("--snapshot-interval", type=float, default=5.0, help="seconds of updates per snapshot")
    p.add_argument("--snapshot-min", type=int, default=10_000, help="fewest buffered updates worth a snapshot")
    p.add_argument("--snapshot-max-age", type=float, default=30.0, help="longest a buffered update waits")
    _add_spark_options(p)
    p.set_defaults(fn=cmd_stream)

    p = sub.add_parser("bench", help="Gopher vs GraphFrames vs igraph on one dataset")
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
    _add_spark_options(p)
    p.set_defaults(fn=cmd_bench)
    return parser


def main(argv=None) -> int:
    from gofs.errors import GoFSError

    args = build_parser().parse_args(argv)
    try:
        return args.fn(args)
    except GoFSError as exc:
        print(f"goffish {args.command}: error: {exc}", file=sys.stderr)
        return 2
    finally:
        # a session the command started ends with it: executors are released cleanly, not at JVM exit
        if getattr(args, "own_session", None) is not None:
            args.own_session.stop()


if __name__ == "__main__":
    sys.exit(main())
