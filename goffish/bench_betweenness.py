"""Benchmark of betweenness on Gopher against igraph's ``betweenness`` (one core).

On one road-like graph (:func:`goffish.generators.road_network`) it measures, in one run:

- exact betweenness on Gopher (MS-BC / MSL-BC) against igraph's exact betweenness,
  both forced into numpy arrays, and whether they agree (relative 1e-9);
- approximate top-k on Gopher: seconds, sources used, precision@k against the exact
  ranking (igraph's, computed in the same run);
- leaf compression: the share of edges stripping degree-1 vertices removes from the
  whole graph (the paper's measure), and what the partitioned run stripped (it does
  not strip across cut edges).

Gopher runs once untimed on one source first (Python workers, topology caches).

Example::

    python -m goffish.bench_betweenness --size 20000 --partitions 2 --top 32
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

import numpy as np
import scipy.sparse as sp


def _timed(fn):
    clock = time.perf_counter()
    value = fn()
    return time.perf_counter() - clock, value


def leaf_compression_share(n: int, src: np.ndarray, dst: np.ndarray) -> dict:
    """Edges and vertices removed by stripping degree-1 vertices from the whole undirected graph."""
    from algorithms.leaf_compression import strip_leaves

    loop = src == dst
    pairs = np.unique(np.sort(np.column_stack([src[~loop], dst[~loop]]), axis=1), axis=0)
    both = np.concatenate([pairs, pairs[:, ::-1]])
    neighbors = sp.csr_matrix((np.ones(len(both)), (both[:, 0], both[:, 1])), shape=(n, n))
    stripped = strip_leaves(neighbors).stripped
    return {"edges": int(len(pairs)), "edges_removed": stripped,
            "edge_share": stripped / max(len(pairs), 1), "vertex_share": stripped / max(n, 1)}


def _by_id(result, n: int) -> np.ndarray:
    frame = result.dataframe.toPandas()
    values = np.full(n, np.nan)
    values[frame["id"].to_numpy()] = frame["betweenness"].to_numpy()
    return values


def run(spark, size: int, partitions: int, weight: str | None, top: int, batch_size: int | None,
        top_batch_size: int, stable_batches: int, seed: int, exact: bool, workdir: str, log=print) -> dict:
    import igraph as ig

    import goffish
    from goffish.generators import road_network

    graph = road_network(size, seed=seed)
    g = goffish.ingest(graph, os.path.join(workdir, f"road-{size}.gofs"), num_partitions=partitions, seed=seed,
                       overwrite=True, spark=spark)
    n = g.num_vertices
    src, dst = graph.edges.column("src").to_numpy(), graph.edges.column("dst").to_numpy()
    lengths = graph.edges.column("length").to_numpy() if weight else None
    report = {"graph": f"road_network({size}, seed={seed})", "vertices": n, "edges": int(len(src)),
              "partitions": partitions, "weight": weight, "spark_master": spark.sparkContext.master,
              "leaf_compression": leaf_compression_share(n, src, dst)}
    log(f"leaf compression: {json.dumps(report['leaf_compression'])}")

    reference = ig.Graph(n=n, edges=np.column_stack([src, dst]).tolist(), directed=False)
    seconds, exact_bc = _timed(lambda: np.asarray(reference.betweenness(directed=False, weights=lengths)))
    report["igraph_exact_seconds"] = seconds
    log(f"igraph exact (one core): {seconds:.2f}s")

    options = {"weight": weight, "normalized": False, "batch_size": batch_size, "progress": False}
    g.betweenness(k=1, **options).dataframe.count()                       # warm-up
    if exact:
        seconds, result = _timed(lambda: (lambda r: (r, _by_id(r, n)))(g.betweenness(**options)))
        result, ours = result
        scale = max(1.0, float(np.abs(exact_bc).max()))
        report["gopher_exact"] = {
            "seconds": seconds, "supersteps": result.metrics.num_supersteps, **result.aggregated,
            "max_relative_difference": float(np.abs(ours - exact_bc).max() / scale),
            "igraph_over_gopher": report["igraph_exact_seconds"] / seconds}
        log(f"gopher exact: {json.dumps(report['gopher_exact'])}")
    seconds, result = _timed(lambda: (lambda r: (r, r.dataframe.collect()))(
        g.betweenness(top=top, stable_batches=stable_batches, seed=seed, **{**options, "batch_size": top_batch_size})))
    result, rows = result
    truth = set(np.lexsort((np.arange(n), -exact_bc))[:top].tolist())
    found = {int(r["id"]) for r in rows}
    report["gopher_top"] = {"k": top, "seconds": seconds, "supersteps": result.metrics.num_supersteps,
                            **result.aggregated, "precision_at_k": len(truth & found) / top}
    log(f"gopher top-{top}: {json.dumps(report['gopher_top'])}")
    return report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m goffish.bench_betweenness", description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=20_000)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--weight", choices=["length"], help="weighted by road length (default: hops)")
    parser.add_argument("--top", type=int, default=32)
    parser.add_argument("--batch-size", type=int, help="sources per batch, exact run (default: from memory)")
    parser.add_argument("--top-batch-size", type=int, default=64, help="sources per batch, top-k run")
    parser.add_argument("--stable-batches", type=int, default=3)
    parser.add_argument("--skip-exact", action="store_true", help="only top-k (exact reference still by igraph)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--json", default="bench-results/betweenness.json")
    args = parser.parse_args(argv)

    from goffish.session import session

    spark = session(master=args.master, app_name="goffish bench betweenness")
    with tempfile.TemporaryDirectory(prefix="goffish-bench-bc-") as workdir:
        report = run(spark, args.size, args.partitions, args.weight, args.top, args.batch_size,
                     args.top_batch_size, args.stable_batches, args.seed, not args.skip_exact, workdir)
    os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
    with open(args.json, "w") as out:
        json.dump(report, out, indent=1)
    print(f"wrote {args.json}")
    agrees = report.get("gopher_exact", {}).get("max_relative_difference", 0.0) <= 1e-9
    return 0 if agrees else 1


if __name__ == "__main__":
    raise SystemExit(main())
