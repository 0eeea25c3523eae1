"""Benchmark of betweenness on Gopher against igraph's ``betweenness`` (one core).

On one road-like graph (:func:`goffish.generators.road_network`) it measures, in one run:

- exact betweenness on Gopher (MS-BC / MSL-BC) against igraph's exact betweenness,
  both forced into numpy arrays, and whether they agree (relative 1e-9);
- approximate top-k on Gopher (sampled sources, ``--epsilon``/``--delta``): seconds, samples,
  the epsilon reached, precision@k against the exact ranking and precision within epsilon
  (the share of reported vertices whose exact normalised value is at least the exact k-th
  minus epsilon; igraph's exact answer is computed in the same run or read from
  ``--reference``, where it was computed once; ``--no-igraph`` where igraph's O(n m) exact
  run would take hours);
- leaf compression: the share of edges stripping degree-1 vertices removes from the
  whole graph (the paper's measure), and what the partitioned run stripped (it does
  not strip across cut edges);
- with ``--kernels``: the fused compiled Brandes pass in one process on the whole graph
  (:func:`algorithms.betweenness.local_betweenness`, no Spark, no cut), exact, against
  igraph's C Brandes on the same chunks of sources, interleaved: what a source costs
  compiled, before any partitioning;
- the compiled kernels' start-up in this process (numba's cache load, or compilation
  where the cache is cold), kept out of every timed region.

Gopher runs once untimed on one source first (Python workers, topology caches, kernel loads).

Example::

    python -m benchmarks.bench_betweenness --size 20000 --partitions 2 --top 32
    python -m benchmarks.bench_betweenness --size 100000 --skip-exact --reference bench-results/igraph-bc-100k.npy
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


def _worker_stats() -> dict | None:
    """{pid: (its /proc stat fields, its /proc status text)} of the Python workers under this
    driver (Linux ``/proc``; None elsewhere)."""
    if not os.path.isdir("/proc/self"):
        return None
    parent, workers = {}, {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rpartition(")")[2].split()
            with open(f"/proc/{entry}/cmdline", "rb") as cmd:
                is_worker = b"pyspark.daemon" in cmd.read()
            if is_worker:
                with open(f"/proc/{entry}/status") as status:
                    workers[int(entry)] = (fields, status.read())
        except OSError:
            continue
        parent[int(entry)] = int(fields[1])
    mine = {}
    for pid, stats in workers.items():
        up = pid
        while up in parent and up != os.getpid():
            up = parent[up]
        if up == os.getpid():
            mine[pid] = stats
    return mine


def worker_cpu_seconds() -> float | None:
    """CPU seconds used so far by the Python workers under this driver (None without ``/proc``).
    On a shared machine wall time depends on the load; CPU seconds far less, so the report
    gives both (igraph's own CPU time beside)."""
    workers = _worker_stats()
    if workers is None:
        return None
    ticks = sum(int(fields[11]) + int(fields[12]) for fields, _ in workers.values())
    return ticks / os.sysconf("SC_CLK_TCK")


def worker_peak_memory_mb() -> float | None:
    """The largest peak resident memory (``VmHWM``) of a Python worker under this driver so far,
    in MB (None without ``/proc``): what one worker process needed at most."""
    workers = _worker_stats()
    if workers is None:
        return None
    peaks = [int(line.split()[1]) for _, status in workers.values()
             for line in status.splitlines() if line.startswith("VmHWM:")]
    return max(peaks, default=0) / 1024


def _timed_with_cpu(fn):
    """(wall seconds, worker CPU seconds or None, value) of ``fn()``."""
    before = worker_cpu_seconds()
    seconds, value = _timed(fn)
    after = worker_cpu_seconds()
    return seconds, (after - before if before is not None else None), value


def kernel_start_seconds() -> float:
    """Seconds to load (or, with a cold cache, compile) the compiled Brandes kernels in this
    process: one tiny exact run, weighted and not, directed and not, touches every kernel."""
    from algorithms.betweenness import local_betweenness

    clock = time.perf_counter()
    for weight in (None, [1.5, 2.0]):
        for directed in (False, True):
            local_betweenness(3, [0, 1], [1, 2], weight, directed=directed, compress=False)
    return time.perf_counter() - clock


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


def _kernel_report(n: int, src, dst, lengths, exact_bc: np.ndarray, chunks: int = 10) -> dict:
    """The fused compiled Brandes pass in this process against igraph's C Brandes, exact, on the same
    sources: the vertices in ``chunks`` chunks, each run by igraph (``sources=``) and then by
    :func:`algorithms.betweenness.local_betweenness` (uncompressed, as igraph), CPU seconds
    summed per side, so that both see the same load. Ours is checked against igraph's total."""
    import igraph as ig

    from algorithms.betweenness import local_betweenness

    graph = ig.Graph(n=n, edges=np.column_stack([src, dst]).tolist(), directed=False)
    ours, cpu = np.zeros(n), {"igraph": 0.0, "ours": 0.0}
    for chunk in np.array_split(np.arange(n), chunks):
        clock = time.process_time()
        graph.betweenness(directed=False, weights=lengths, sources=chunk.tolist())
        cpu["igraph"] += time.process_time() - clock
        clock = time.process_time()
        ours += local_betweenness(n, src, dst, lengths, directed=False, normalized=False, compress=False,
                                  sources=chunk)
        cpu["ours"] += time.process_time() - clock
    scale = max(1.0, float(np.abs(exact_bc).max()))
    return {"chunks": chunks, "cpu_seconds": cpu["ours"], "igraph_cpu_seconds": cpu["igraph"],
            "ms_per_source": 1e3 * cpu["ours"] / n, "igraph_ms_per_source": 1e3 * cpu["igraph"] / n,
            "over_igraph_cpu": cpu["ours"] / cpu["igraph"],
            "max_relative_difference": float(np.abs(ours - exact_bc).max() / scale)}


def sampler_budget(n: int, src, dst, top: int, epsilon: float, delta: float, sources: int = 400, seed: int = 1) -> dict:
    """How many sampled sources the top-``top`` sampler's rule needs on this graph, without an exact
    reference: the top normalised values and their scores' variances estimated from ``sources``
    random sources (the fused one-process pass), then the fewest samples at which the sampler's
    own interval (:meth:`algorithms.betweenness_sampling.Sampling.bounds`, empirical Bernstein,
    the even split of ``delta``) of the highest vertex is narrower than ``epsilon``."""
    from algorithms import brandes_kernels
    from algorithms.betweenness_graph import arc_graph
    from algorithms.betweenness_sampling import Sampling

    graph, _ = arc_graph(n, np.r_[src, dst].astype(np.int64), np.r_[dst, src].astype(np.int64),
                         np.ones(2 * len(src)), False)
    drawn = np.random.default_rng(seed).integers(0, n, sources)
    raw, squares = np.zeros(n), np.zeros(n)
    clock = time.process_time()
    brandes_kernels.brandes_sources(graph.csr.indptr, graph.csr.indices, graph.csr.data, True, drawn, np.ones(n),
                                    raw, squares)
    cpu = time.process_time() - clock
    scores, squares = raw / (n - 1), squares / (n - 1) ** 2
    mean = scores / sources
    variance = np.maximum(squares - scores * mean, 0) / (sources - 1)
    values = np.sort(mean * n / (n - 2))[::-1]                           # sampled mean -> normalised
    x_epsilon = epsilon * (n - 2) / n
    sampling = Sampling(n, 256, x_epsilon, delta, Sampling.default_max_samples(n, 256, x_epsilon, delta, "sources"),
                        0, unit="sources")
    best = int(np.argmax(mean))
    m = 256
    while m < sampling.max_samples and 2 * sampling.bounds(
            np.array([mean[best] * m]), m, squares=np.array([variance[best] * (m - 1) + mean[best] ** 2 * m]))[1][0] \
            > x_epsilon:
        m = int(m * 1.05) + 1
    return {"sources": sources, "cpu_seconds": cpu, "top_values": values[:3].tolist(),
            "kth_value": float(values[top - 1]), "next_value": float(values[top]), "log_term": sampling.log_term,
            "cap": sampling.max_samples, "samples_needed": min(m, sampling.max_samples)}


def run(spark, size: int, partitions: int, weight: str | None, top: int, batch_size: int | None,
        top_batch_size: int | None, epsilon: float, delta: float, seed: int, exact: bool, workdir: str, log=print,
        reference: str | None = None, with_igraph: bool = True, with_top: bool = True,
        kernels: bool = False, source_seeds: list[int] | None = None, budget: bool = False) -> dict:
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
              "kernel_start_seconds": kernel_start_seconds(),
              "load_average_before": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
              "partitions": partitions, "weight": weight, "spark_master": spark.sparkContext.master,
              "leaf_compression": leaf_compression_share(n, src, dst)}
    log(f"leaf compression: {json.dumps(report['leaf_compression'])}; kernel start {report['kernel_start_seconds']:.2f}s")

    if budget:
        report["sampler_budget"] = sampler_budget(n, src, dst, top, epsilon, delta)
        log(f"sampler budget: {json.dumps(report['sampler_budget'])}")
    exact_bc = None
    if not with_igraph:
        log("igraph exact: not computed (--no-igraph); no precision@k")
    elif reference and os.path.exists(reference) and not exact:       # exact runs time igraph beside them
        exact_bc = np.load(reference)
        with open(reference + ".json") as meta:
            report["igraph_exact_seconds"] = json.load(meta)["seconds"]
        report["igraph_reference"] = reference
        log(f"igraph exact: read from {reference} (computed once, {report['igraph_exact_seconds']:.1f}s)")
    else:
        graph_ig = ig.Graph(n=n, edges=np.column_stack([src, dst]).tolist(), directed=False)
        cpu = time.process_time()
        seconds, exact_bc = _timed(lambda: np.asarray(graph_ig.betweenness(directed=False, weights=lengths)))
        report["igraph_exact_seconds"], report["igraph_exact_cpu_seconds"] = seconds, time.process_time() - cpu
        log(f"igraph exact (one core): {seconds:.2f}s, {report['igraph_exact_cpu_seconds']:.2f} CPU s")
        if reference:
            os.makedirs(os.path.dirname(reference) or ".", exist_ok=True)
            np.save(reference + ".tmp.npy", exact_bc)
            os.replace(reference + ".tmp.npy", reference)
            with open(reference + ".json", "w") as meta:
                json.dump({"graph": report["graph"], "weight": weight, "seconds": seconds}, meta)

    if kernels and exact_bc is not None:
        report["kernel_one_process"] = _kernel_report(n, src, dst, lengths, exact_bc)
        log(f"kernels in one process: {json.dumps(report['kernel_one_process'])}")
    options = {"weight": weight, "normalized": False, "batch_size": batch_size, "progress": False}
    g.betweenness(k=1, **options).dataframe.count()                       # warm-up
    if exact and exact_bc is not None:
        seconds, cpu, result = _timed_with_cpu(lambda: (lambda r: (r, _by_id(r, n)))(g.betweenness(**options)))
        result, ours = result
        scale = max(1.0, float(np.abs(exact_bc).max()))
        report["gopher_exact"] = {
            "seconds": seconds, "worker_cpu_seconds": cpu, "supersteps": result.metrics.num_supersteps,
            **result.aggregated, "max_relative_difference": float(np.abs(ours - exact_bc).max() / scale),
            "igraph_over_gopher": report["igraph_exact_seconds"] / seconds}
        if cpu and "igraph_exact_cpu_seconds" in report:
            report["gopher_exact"]["igraph_over_gopher_cpu"] = report["igraph_exact_cpu_seconds"] / cpu
        log(f"gopher exact: {json.dumps(report['gopher_exact'])}")
    if not with_top:
        return report
    ranked = np.lexsort((np.arange(n), -exact_bc)) if exact_bc is not None else None
    truth = set(ranked[:top].tolist()) if ranked is not None else None
    normalised = exact_bc * 2 / ((n - 1) * (n - 2)) if exact_bc is not None else None   # igraph: unordered pairs
    runs = []
    for source_seed in source_seeds or [seed]:
        seconds, cpu, result = _timed_with_cpu(lambda: (lambda r: (r, r.dataframe.collect()))(g.betweenness(
            top=top, epsilon=epsilon, delta=delta, seed=source_seed, progress=False, weight=weight,
            batch_size=top_batch_size)))
        result, rows = result
        row = {"k": top, "source_seed": source_seed, "seconds": seconds, "worker_cpu_seconds": cpu,
               "supersteps": result.metrics.num_supersteps, **result.aggregated,
               "worker_peak_memory_mb": worker_peak_memory_mb(),
               "load_average_after": os.getloadavg()[0] if hasattr(os, "getloadavg") else None}
        if truth is not None:
            found = [int(r["id"]) for r in rows]
            row["precision_at_k"] = len(truth & set(found)) / top
            kth = normalised[ranked[top - 1]]
            row["precision_within_epsilon"] = float(np.mean(normalised[found] >= kth - result.aggregated["epsilon"]))
            if "igraph_exact_seconds" in report:
                row["over_igraph_exact"] = seconds / report["igraph_exact_seconds"]
        log(f"gopher top-{top}: {json.dumps(row)}")
        runs.append(row)
    report["gopher_top"] = runs[0]
    if source_seeds:
        report["gopher_top_by_source_seed"] = runs
        if truth is not None:
            for key in ("precision_at_k", "precision_within_epsilon", "samples", "seconds"):
                values = [r[key] for r in runs]
                report[f"{key}_over_seeds"] = {"min": min(values), "mean": float(np.mean(values)), "max": max(values)}
                log(f"{key} over {len(runs)} seeds: {json.dumps(report[f'{key}_over_seeds'])}")
    return report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_betweenness", description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=20_000)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--weight", choices=["length"], help="weighted by road length (default: hops)")
    parser.add_argument("--top", type=int, default=32)
    parser.add_argument("--batch-size", type=int, help="sources per batch, exact run (default: from memory)")
    parser.add_argument("--top-batch-size", type=int, help="samples per batch, top-k run (default: 256 sources)")
    parser.add_argument("--epsilon", type=float, default=0.01, help="top-k sampler's epsilon")
    parser.add_argument("--delta", type=float, default=0.1, help="top-k sampler's delta")
    parser.add_argument("--skip-exact", action="store_true", help="only top-k (exact reference still by igraph)")
    parser.add_argument("--reference", help="igraph's exact betweenness as .npy: written there once (with its "
                                            "seconds in FILE.json); read back by --skip-exact runs")
    parser.add_argument("--skip-top", action="store_true", help="no top-k run")
    parser.add_argument("--no-igraph", action="store_true",
                        help="no igraph reference (where its exact O(n m) run would take hours): no precision@k")
    parser.add_argument("--kernels", action="store_true",
                        help="also time the fused compiled Brandes pass in one process on the whole graph, exact")
    parser.add_argument("--budget", action="store_true",
                        help="estimate the sources the top-k sampler needs here (from 400 sampled sources)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the generated graph, its partitioning and the "
                                                             "top-k run's source order")
    parser.add_argument("--source-seeds", type=int, nargs="+",
                        help="run top-k once per sampler seed on the same graph (precision over seeds)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--json", default="bench-results/betweenness.json")
    args = parser.parse_args(argv)

    from goffish.session import session

    spark = session(master=args.master, app_name="goffish bench betweenness")
    with tempfile.TemporaryDirectory(prefix="goffish-bench-bc-") as workdir:
        report = run(spark, args.size, args.partitions, args.weight, args.top, args.batch_size,
                     args.top_batch_size, args.epsilon, args.delta, args.seed, not args.skip_exact, workdir,
                     reference=args.reference, with_igraph=not args.no_igraph, with_top=not args.skip_top,
                     kernels=args.kernels, source_seeds=args.source_seeds, budget=args.budget)
    os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
    with open(args.json, "w") as out:
        json.dump(report, out, indent=1)
    print(f"wrote {args.json}")
    agrees = report.get("gopher_exact", {}).get("max_relative_difference", 0.0) <= 1e-9
    return 0 if agrees else 1


if __name__ == "__main__":
    raise SystemExit(main())
