"""The ``goffish`` command line: ingest, info, generate, run, bench, demo.

Every command that needs Spark builds its session through ``goffish.session``,
so ``--master`` and ``--conf key=value`` work as they do for spark-submit, and
under spark-submit the submitted master and conf win.
"""
from __future__ import annotations

import argparse
import json
import sys
import time


def _spark(args):
    from goffish.session import session

    conf = dict(kv.split("=", 1) for kv in (args.conf or []))
    return session(master=args.master, app_name=f"goffish {args.command}", conf=conf)


def _add_spark_options(parser):
    parser.add_argument("--master", help="Spark master URL (default: spark-submit's, else local[*])")
    parser.add_argument("--conf", action="append", metavar="KEY=VALUE", help="extra Spark configuration")


def cmd_ingest(args) -> int:
    import goffish

    spark = _spark(args) if args.partitioner == "spark-lp" else None
    options = {"directed": args.directed}
    if args.weight:
        options["weight"] = args.weight
    if args.attributes:
        options["attribute_names"] = args.attributes.split(",")
    if args.format:
        options["format"] = args.format
    timings: dict = {}
    from gofs.ingest import ingest
    from gofs.sources import read_graph

    clock = time.perf_counter()
    graph = read_graph(args.input, **options)
    timings["read"] = time.perf_counter() - clock
    ingest(graph, args.graph, num_partitions=args.partitions, partitioner=args.partitioner,
           overwrite=args.overwrite, seed=args.seed, spark=spark, timings=timings)
    print(goffish.open(args.graph).info())
    print("ingest seconds: " + ", ".join(f"{k} {v:.2f}" for k, v in timings.items()))
    return 0


def cmd_info(args) -> int:
    import goffish

    g = goffish.open(args.graph)
    print(json.dumps(g.manifest, indent=1) if args.json else g.info())
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
    from gofs import layout
    from gofs.errors import GraphExistsError

    fs, root = layout.filesystem(args.out)
    if layout.exists(fs, root) and not args.overwrite:
        # say so before running the algorithm, not after it
        raise GraphExistsError(f"{args.out} already exists (pass --overwrite to replace it)")
    spark = _spark(args)
    g = goffish.open(args.graph, spark=spark)
    options = {"progress": not args.quiet}
    if args.algorithm in TIMESERIES_ALGORITHMS:
        return _run_timeseries(g, args, options)
    if args.algorithm == "cc":
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
    summary = result.metrics.as_dict()
    summary.pop("per_superstep")
    if args.algorithm == "louvain":
        summary.update(modularity=result.modularity, communities=result.level_sizes, phase_seconds=result.seconds)
    print(json.dumps({"algorithm": args.algorithm, "out": args.out, **summary}))
    return 0


TIMESERIES_ALGORITHMS = ("tdsp", "memes", "hashtags")


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
    report = metrics.as_dict()
    report.pop("per_superstep")
    print(json.dumps({"algorithm": args.algorithm, "out": args.out, **report}))
    return 0


def cmd_demo(args) -> int:
    from goffish.demo import main as demo

    return demo(_spark(args), workdir=args.workdir)


def cmd_bench(args) -> int:
    from goffish.bench import main as bench

    return bench(_spark(args), args)


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
    p.add_argument("--partitioner", default="metis", choices=["metis", "hash", "spark-lp"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--overwrite", action="store_true")
    _add_spark_options(p)
    p.set_defaults(fn=cmd_ingest)

    p = sub.add_parser("info", help="print a GoFS graph's statistics")
    p.add_argument("graph")
    p.add_argument("--json", action="store_true", help="print the whole manifest")
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
    p.add_argument("algorithm", choices=["cc", "sssp", "pagerank", "louvain", *TIMESERIES_ALGORITHMS])
    p.add_argument("graph")
    p.add_argument("--out", required=True, help="Parquet output directory")
    p.add_argument("--source", help="sssp: source vertex id")
    p.add_argument("--weight", help="edge attribute used as length (sssp) or weight (pagerank, louvain)")
    p.add_argument("--resolution", type=float, default=1.0, help="louvain: NetworkX's resolution (> 0)")
    p.add_argument("--seed", type=int, default=0, help="louvain: random seed (deterministic runs)")
    p.add_argument("--levels", action="store_true", help="louvain: also write one level_k column per level")
    p.add_argument("--alpha", type=float, default=0.85)
    p.add_argument("--max-iter", type=int, default=100)
    p.add_argument("--tol", type=float, default=1e-6)
    p.add_argument("--overwrite", action="store_true")
    p.add_argument("--quiet", action="store_true", help="no superstep progress lines")
    p.add_argument("--instances", help="tdsp/memes/hashtags: comma-separated instance ids (default: all)")
    p.add_argument("--time", help="tdsp/memes/hashtags: instances covering TIME or overlapping START,END")
    p.add_argument("--departure", type=float, help="tdsp: departure time at --source")
    p.add_argument("--travel-time", default="travel_time", help="tdsp: per-instance edge travel-time attribute")
    p.add_argument("--meme", help="memes: the post value to track, e.g. '#meme0'")
    p.add_argument("--attribute", default="hashtags", help="memes/hashtags: per-instance list<string> of posts")
    p.add_argument("--top", type=int, default=10, help="hashtags: how many hashtags the merged ranking keeps")
    _add_spark_options(p)
    p.set_defaults(fn=cmd_run)

    p = sub.add_parser("demo", help="the main job: ingest the sample road graph, run CC, SSSP, PageRank")
    p.add_argument("--workdir", default=None, help="where to put the GoFS graph (default: a temp dir)")
    _add_spark_options(p)
    p.set_defaults(fn=cmd_demo)

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
    p.add_argument("--json", default="bench-results/bench.json")
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


if __name__ == "__main__":
    sys.exit(main())
