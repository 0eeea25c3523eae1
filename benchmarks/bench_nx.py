"""NetworkX's API on a GoFS handle against the same algorithms called directly, in one run.

    python -m benchmarks.bench_nx --size 1000000 --partitions 8 --repeat 3 --json bench-results/nx.json

Times ``nx.connected_components(handle)`` and ``nx.pagerank(handle)`` (dispatched to
the ``goffish`` backend by the handle's type, results built as NetworkX's sets and dicts
on the driver) against ``g.connected_components()`` / ``g.pagerank()`` followed by a
count of their result rows, alternating the two, after one warm-up of each. Reports
median seconds and the ratio backend / direct; both answers must cover every vertex and
the backend's ranks sum to 1.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time


def _seconds(fn) -> tuple[float, object]:
    clock = time.perf_counter()
    value = fn()
    return time.perf_counter() - clock, value


def _direct(result):
    """What a caller of the direct method does at least: reads its result once."""
    rows = result.dataframe.count()
    result.unpersist()
    return rows


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1_000_000, help="road-like graph vertices")
    parser.add_argument("--graph", help="an existing GoFS graph instead of generating one")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--tol", type=float, default=1e-6, help="PageRank tolerance (both sides)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="write the results here too")
    args = parser.parse_args(argv)

    import networkx as nx

    import goffish
    from goffish.generators import road_network
    from goffish.nx_backend import GoffishGraph

    spark = goffish.session()
    with tempfile.TemporaryDirectory() as tmp:
        if args.graph:
            g = goffish.open(args.graph, spark=spark)
        else:
            g = goffish.ingest(road_network(args.size, seed=args.seed), os.path.join(tmp, "road.gofs"),
                               num_partitions=args.partitions, spark=spark)
        handle = GoffishGraph(g)
        cases = {
            "connected_components": (lambda: _direct(g.connected_components(progress=False)),
                                     lambda: list(nx.connected_components(handle))),
            "pagerank": (lambda: _direct(g.pagerank(tol=args.tol, progress=False)),
                         lambda: nx.pagerank(handle, tol=args.tol)),
        }
        out = {"vertices": g.num_vertices, "edges": g.num_edges, "partitions": g.num_partitions,
               "repeat": args.repeat, "load": os.getloadavg()[0]}
        for name, (direct, backend) in cases.items():
            direct(), backend()                                  # warm-up: task caches, numba, JVM
            times = {"direct": [], "backend": []}
            for _ in range(args.repeat):
                seconds, direct_value = _seconds(direct)
                times["direct"].append(seconds)
                seconds, backend_value = _seconds(backend)
                times["backend"].append(seconds)
            covered = sum(map(len, backend_value)) if name == "connected_components" else len(backend_value)
            if covered != direct_value:
                raise SystemExit(f"{name}: the backend's answer covers {covered} vertices, the direct one {direct_value}")
            if name == "pagerank" and abs(sum(backend_value.values()) - 1.0) > 1e-6:
                raise SystemExit(f"pagerank: backend ranks sum to {sum(backend_value.values())}")
            direct_s, backend_s = statistics.median(times["direct"]), statistics.median(times["backend"])
            out[name] = {"direct_s": direct_s, "backend_s": backend_s, "ratio": backend_s / direct_s,
                         "all_direct_s": times["direct"], "all_backend_s": times["backend"]}
            print(f"{name}: direct {direct_s:.2f} s, nx backend {backend_s:.2f} s, ratio {backend_s / direct_s:.3f}",
                  flush=True)
        out["load_after"] = os.getloadavg()[0]
    print(json.dumps(out))
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return out


if __name__ == "__main__":
    main()
