"""The ``goffish`` command line: ingest, info, generate, run, query, stream, demo (benchmarks: ``./run.sh bench``).

Every command that needs Spark builds its session through ``goffish.session``,
so ``--master`` and ``--conf key=value`` work as they do for spark-submit, and
under spark-submit the submitted master and conf win. The CLI is an
application: it shows only Spark's errors unless ``--verbose``
(see :mod:`goffish.cli_logging`); the library never does this.
"""
from __future__ import annotations

import argparse
import inspect
import json
import sys
import time

from goffish.cli_progress import ClearingStream, StagePoller, StatusLine


def _spark(args):
    from pyspark.sql import SparkSession

    from goffish import cli_logging
    from goffish.class_archive import JAVA_OPTIONS, java_options
    from goffish.session import session

    conf = dict(kv.split("=", 1) for kv in (args.conf or []))
    # quiet only a session the CLI itself starts (or spark-submit started for it), never a caller's
    ours = SparkSession.getActiveSession() is None
    quiet = ours and not args.verbose
    if quiet and not cli_logging.jvm_running():
        # the JVM's options are then ours, not the user's: they map the class-data archive too
        # (goffish.class_archive), as the JVM goffish.session starts would, unless the user set some
        archive = java_options(conf)
        conf = cli_logging.quiet_conf(conf)
        if archive:
            conf[JAVA_OPTIONS] = f"{archive} {conf[JAVA_OPTIONS]}"
    if ours and not cli_logging.jvm_running():
        # Spark's bars would land among the results: progress goes through the status line (see main)
        conf.setdefault("spark.ui.showConsoleProgress", "false")
    spark = session(master=args.master, app_name=f"goffish {args.command}", conf=conf)
    if quiet:
        cli_logging.quiet_session(spark)
    if ours:
        args.own_session = spark  # stopped when the command ends (see main)
        if args.status.live and spark.conf.get("spark.ui.showConsoleProgress", "false") == "false":
            args.poller = StagePoller(spark, args.status).start()
    return spark


def _add_spark_options(parser):
    parser.add_argument("--master", help="Spark master URL (default: spark-submit's, else local[*])")
    parser.add_argument("--conf", action="append", metavar="KEY=VALUE", help="extra Spark configuration")
    parser.add_argument("--verbose", action="store_true",
                        help="show Spark's own log output (default: its errors only) and an error's traceback")


def _add_verbose(parser):
    parser.add_argument("--verbose", action="store_true", help="show an error's traceback")


def cmd_ingest(args) -> int:
    import goffish
    from gofs.ingest import ingest

    options = {"directed": args.directed}
    if args.weight:
        options["weight"] = args.weight
    if args.attributes:
        options["attribute_names"] = args.attributes.split(",")
    if args.format:
        options["format"] = args.format
    if args.driver_budget_edges:
        options["driver_budget_edges"] = args.driver_budget_edges
    report: dict = {}
    ingest(args.input, args.graph, num_partitions=args.partitions, partitioner=args.partitioner,
           overwrite=args.overwrite, seed=args.seed, spark=lambda: _spark(args), engine=args.engine,
           engine_threshold=args.engine_threshold, report=report, **options)
    print(goffish.open(args.graph).info())
    print(f"ingest engine: {report['engine']}")
    print("ingest seconds: " + ", ".join(f"{k} {v:.2f}" for k, v in report["seconds"].items()))
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


def _write_result(rows, out: str, overwrite: bool) -> None:
    """``rows``: a run's result (a single run's rows are written without a Spark job,
    ``RunResult.write_parquet``), one with a ``dataframe``, or a DataFrame."""
    from gopher.engine import RunResult

    if isinstance(rows, RunResult):
        rows.write_parquet(out, overwrite)
        return
    frame = rows if hasattr(rows, "write") else rows.dataframe
    frame.write.mode("overwrite" if overwrite else "errorifexists").parquet(out)


def _vertex_id(g, args, flag: str, value):
    """A vertex-id flag as the graph's id type, or a clear error."""
    from gofs.errors import InputError

    if g.id_kind != "int64":
        return value
    try:
        return int(value)
    except ValueError:
        raise InputError(f"{args.graph}: {flag} {value!r} is not a vertex id "
                         "(this graph's vertex ids are integers)") from None


def _instances_value(text: str):
    return [int(i) for i in text.split(",")]


def _time_value(text: str):
    return float(text) if "," not in text else tuple(float(t) for t in text.split(","))


def _algorithm_arguments(algorithm, g, args) -> dict:
    """The algorithm's parameters from its registered flags; a missing required one, or a flag
    of another algorithm, is an error that names it."""
    from algorithms.registry import by_cli_name

    chosen = {}
    for param in algorithm.parameters:
        flag = algorithm.flags.get(param.name)
        value = None if flag is None else getattr(args, _dest(param.name, flag))
        if value is None or value is False:
            if param.default is param.empty:
                raise SystemExit(f"goffish run {algorithm.cli}: {_flag_name(param.name, flag)} is required")
            continue
        if flag.kind == "vertex":
            value = _vertex_id(g, args, _flag_name(param.name, flag), value)
        elif flag.kind == "instances":
            value = _instances_value(value)
        elif flag.kind == "time":
            value = _time_value(value)
        elif flag.kind == "negate":
            value = False
        chosen[param.name] = value
    for other in by_cli_name().values():
        for name, flag in other.flags.items():
            foreign = getattr(args, _dest(name, flag)) not in (None, False)
            if foreign and not any(_flag_name(n, f) == _flag_name(name, flag) for n, f in algorithm.flags.items()):
                raise SystemExit(f"goffish run {algorithm.cli}: {_flag_name(name, flag)} is not an option of "
                                 f"{algorithm.cli} (it is one of {other.cli})")
    return chosen


def cmd_run(args) -> int:
    import goffish
    from algorithms.registry import by_cli_name
    from gofs.housekeeping import check_result_target
    from gopher.engine import EngineOptions

    algorithm = by_cli_name()[args.algorithm]
    check_result_target(args.out, args.graph, args.overwrite)   # before running the algorithm, not after it
    _check_picture_path(args.timeline)
    if args.instance is not None and algorithm.timeseries:
        raise SystemExit(f"goffish run {args.algorithm}: --instance is for single runs; use --instances")
    g = goffish.open(args.graph)             # the manifest only: flags are checked before Spark starts
    params = _algorithm_arguments(algorithm, g, args)
    _spark(args)
    progress = False if args.quiet else args.status.show
    result = getattr(g, algorithm.name)(**params, engine=EngineOptions(progress=progress, instance=args.instance))
    for name, frame in algorithm.frames(result).items():
        _write_result(frame, f"{args.out}/{name}" if name else args.out, args.overwrite)
    metrics = algorithm.metrics(result)
    _timeline(metrics, args)
    summary = metrics.as_dict()
    summary.pop("per_superstep")
    summary.update(algorithm.report(result))
    print(json.dumps({"algorithm": args.algorithm, "out": args.out, **summary}))
    return 0


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

    from hatrick.cgql import query

    params = {}
    for kv in args.param or []:
        if "=" not in kv:
            raise SystemExit(f"goffish query: --param {kv!r}: expected NAME=VALUE")
        key, value = kv.split("=", 1)
        params[key] = _param_value(value)
    stream = source = None
    spark = _spark(args)                 # past frames run on Gopher, live ones on the stream's workers
    if args.stream:
        import goffish

        stream = goffish.open(args.graph, spark=spark).stream()
    topic = query(args.graph, args.text, params=params, time_ordered=args.time_ordered, stream=stream,
                  now=args.now, time_unit=args.time_unit, spark=spark)
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


def cmd_stream(args) -> int:
    import goffish
    from hatrick.buffer import SnapshotPolicy

    spark = _spark(args)
    g = goffish.open(args.graph, spark=spark)
    policy = SnapshotPolicy(interval=args.snapshot_interval, min_volume=args.snapshot_min,
                            max_age=args.snapshot_max_age)
    s = g.stream(checkpoint=args.checkpoint, snapshot_policy=policy, aging_ttl=args.ttl, workers=args.workers,
                 buckets=args.buckets)

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
    s.close()
    for r in s.snapshots:
        print(f"snapshot instance {r.instance}: {r.buffered_updates:,} updates, +{r.added_edges} -{r.removed_edges} "
              f"edges, +{r.added_vertices} vertices, {r.seconds:.2f}s")
    return 0


def _dest(name: str, flag) -> str:
    return _flag_name(name, flag)[2:].replace("-", "_")


def _flag_name(name: str, flag) -> str:
    return (flag.flag if flag is not None and flag.flag else "--" + name.replace("_", "-"))


def _flag_type(algorithm, name: str):
    """int, float or str: from the parameter's default, else its annotation."""
    default = algorithm.default(name)
    if isinstance(default, (int, float)) and not isinstance(default, bool):
        return type(default)
    annotation = str(inspect.signature(algorithm.function).parameters[name].annotation)
    return next((t for t in (int, float) if annotation.split("|")[0].strip() == t.__name__), str)


def _add_run_parser(sub) -> None:
    """``goffish run``: one positional choice per registered algorithm, its flags from the registry."""
    from algorithms.registry import by_cli_name

    registered = by_cli_name()
    flags: dict = {}
    for cli, algorithm in registered.items():
        for name, flag in algorithm.flags.items():
            flags.setdefault(_flag_name(name, flag), []).append((cli, algorithm, name, flag))
    epilog = "\n".join(f"  {cli:<12}{a.summary}" for cli, a in registered.items())
    p = sub.add_parser("run", help="run an algorithm on a GoFS graph and write Parquet",
                       epilog="algorithms:\n" + epilog, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("algorithm", choices=list(registered))
    p.add_argument("graph")
    p.add_argument("--out", required=True, help="Parquet output directory")
    for option, users in flags.items():
        cli, algorithm, name, flag = users[0]
        helps = dict.fromkeys(f.help for *_, f in users)
        text = f"{'/'.join(u[0] for u in users)}: {flag.help}" if len(helps) == 1 else \
            "; ".join(f"{u[0]}: {u[3].help}" for u in users)
        defaults = {str(a.default(n)) for _, a, n, f in users if a.default(n) not in (None, inspect.Parameter.empty)}
        text += (f" (default {defaults.pop()})" if len(defaults) == 1
                                                  and flag.kind not in ("switch", "negate") else "")
        if flag.kind in ("switch", "negate"):
            p.add_argument(option, dest=_dest(name, flag), action="store_true", help=text)
        else:
            kind = str if flag.kind in ("vertex", "instances", "time") else _flag_type(algorithm, name)
            p.add_argument(option, dest=_dest(name, flag), type=kind, default=None, help=text)
    p.add_argument("--overwrite", action="store_true")
    p.add_argument("--quiet", action="store_true", help="no superstep progress lines")
    p.add_argument("--instance", type=int, help="single runs: run on this instance's topology and values")
    p.add_argument("--timeline", metavar="FILE.png",
                   help="also draw each superstep's time (compute, exchange, rest), active sub-graphs and messages")
    _add_spark_options(p)
    p.set_defaults(fn=cmd_run)


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
    _add_verbose(p)
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
    _add_verbose(p)
    p.set_defaults(fn=cmd_generate)

    _add_run_parser(sub)

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
    _add_spark_options(p)
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
    p.add_argument("--workers", type=int, default=1,
                   help="workers holding the live graph by bucket; on a cluster master each is a long-running Spark "
                        "task holding one executor core, and the query feeding them needs one more (N workers: "
                        "N + 1 cores, refused otherwise); on local[N] they run in the driver")
    p.add_argument("--buckets", choices=("hash", "partitions"), default="hash",
                   help="how vertices are put in buckets: a hash of the id, or aligned with the graph's GoFS "
                        "partitions (few vertices shared between workers on a graph with locality; the driver "
                        "keeps 2 to 40 bytes per template vertex); a restart needs the same")
    p.add_argument("--snapshot-interval", type=float, default=5.0, help="seconds of updates per snapshot")
    p.add_argument("--snapshot-min", type=int, default=10_000, help="fewest buffered updates worth a snapshot")
    p.add_argument("--snapshot-max-age", type=float, default=30.0, help="longest a buffered update waits")
    _add_spark_options(p)
    p.set_defaults(fn=cmd_stream)
    return parser


def main(argv=None) -> int:
    """Run one command; an error GoFFish raises on purpose is one line on stderr and exit status 2
    (its traceback too with ``--verbose``)."""
    import traceback

    from gofs.errors import GoffishError
    from sparkshim.graphframes import GraphFramesUnavailable

    args = build_parser().parse_args(argv)
    args.status = StatusLine(sys.stderr)
    stdout = sys.stdout
    if args.status.live:
        sys.stdout = ClearingStream(stdout, args.status)   # results never share a line with the progress
    try:
        return args.fn(args)
    except (GoffishError, GraphFramesUnavailable) as exc:
        if getattr(args, "verbose", False):
            traceback.print_exc()
        print(f"goffish {args.command}: error: {exc}", file=sys.stderr)
        return 2
    finally:
        if getattr(args, "poller", None) is not None:
            args.poller.stop()
        args.status.clear()
        sys.stdout = stdout
        # a session the command started ends with it: executors are released cleanly, not at JVM exit
        if getattr(args, "own_session", None) is not None:
            from gopher.resident import await_ending_stages

            await_ending_stages()
            args.own_session.stop()


if __name__ == "__main__":
    sys.exit(main())
