"""``./run.sh bench --cold``: what a ``spark-submit`` job gets, the first run in a fresh process.

Each algorithm runs in a Python process of its own (a new SparkSession, a new JVM,
new Python workers). The session's start is timed apart and left out; the first
run is timed from the call to the end of the caller's first job on its result (a
checksum over every value; a run's DataFrame is made when first read, so that job
includes Spark's first read of the result files), then the same run again in that
process: the warm figure. The caller's first job is timed in two parts: making the DataFrame (the
session's SQL state, Spark's Parquet source, the file index: all built on first use in a fresh JVM) and
the query itself. Both stand beside igraph's build+solve on one core, measured here on the
same edges, with the ratio; the first run's set-up and output phases
(:attr:`gopher.metrics.RunMetrics.phases`) say where its time went, and the CPU seconds of the
driver's Python process, its JVM and the Python workers, first and warm, say who spent it (wall
seconds on a shared machine are noise; CPU seconds much less so). Each process
also times the warm fixed cost: an empty program of one superstep (median of 3), on the benchmark's
graph and on the demo graph (``datasets/road-small.txt.gz``, 4 METIS partitions, as ``./run.sh demo``
ingests it: the graph issue 25's target names), the latter both as the run's own seconds and as the
caller's wall time around ``g.run`` (which adds reading the run's settings and closing its
transport). The header says
whether the driver JVMs map the class-data archive built at set-up (:mod:`goffish.class_archive`).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks import scratch_directory
from gofs.store import GraphStore
from gopher.program import SubgraphProgram

ALGORITHMS = ("cc", "sssp", "pagerank")


class Empty(SubgraphProgram):
    """Halts at once and outputs nothing: one superstep of nothing, the engine's fixed cost."""

    def compute(self, subgraph, messages, ctx):
        ctx.vote_to_halt()


def _run(g, algorithm: str, source, pagerank_iterations: int):
    if algorithm == "cc":
        return g.connected_components(progress=False), "component"
    if algorithm == "sssp":
        return g.sssp(source, progress=False), "distance"
    return g.pagerank(max_iter=pagerank_iterations, tol=0, progress=False), "pagerank"


def child(argv: list[str]) -> None:
    """In the fresh process: session (timed apart), first run + its first job, then a warm run."""
    request = json.loads(argv[0])
    clock = time.perf_counter()
    import goffish
    from benchmarks.bench_gopher import _checksum
    from sparkshim.compat import driver_jvm_pid, jvm_usage

    spark = goffish.session(master=request["master"], conf=request["conf"])
    session_seconds = time.perf_counter() - clock
    g = goffish.open(request["graph"], spark=spark)
    report = {"session_seconds": session_seconds}
    jvm_pid = driver_jvm_pid(spark)
    for label in ("first", "warm"):
        start = _cpu(jvm_pid)
        clock = time.perf_counter()
        result, column = _run(g, request["algorithm"], request["source"], request["pagerank_iterations"])
        ran = time.perf_counter() - clock
        before, reading = _jvm_reading(spark)
        clock += reading                               # reading the JVM's figures is not the caller's job
        made = time.perf_counter()
        frame = result.dataframe
        made = time.perf_counter() - made
        between, reading = _jvm_reading(spark)
        clock += reading
        _checksum(frame, column)
        total = time.perf_counter() - clock
        job_jvm = _spent(before, jvm_usage(spark))
        cpu = _spent(start, _cpu(jvm_pid))
        result.unpersist()
        report[label] = {"seconds": total, "run_seconds": ran, "first_job_seconds": total - ran,
                         "first_job_jvm": job_jvm, "frame_seconds": made, "frame_jvm": _spent(before, between),
                         "cpu": cpu,
                         "supersteps": result.metrics.num_supersteps, "phases": result.metrics.phases,
                         "superstep_seconds": sum(s.seconds for s in result.metrics.supersteps)}
    report["fixed_seconds"] = float(np.median([g.run(Empty(), progress=False).metrics.seconds for _ in range(3)]))
    report["fixed_demo_seconds"], report["fixed_demo_wall_seconds"] = _demo_fixed_cost(spark)
    spark.stop()
    print("GOFFISH-COLD " + json.dumps(report), flush=True)


def _demo_fixed_cost(spark) -> tuple[float, float]:
    """Median of 3 warm empty runs on the demo graph: the run's seconds and the caller's wall."""
    from goffish.demo import SAMPLE, ingest_sample
    from gofs.ingest.read_local import read_edge_list

    path = str(Path(scratch_directory("goffish-bench-demo-")) / "road-small.gofs")
    g = ingest_sample(read_edge_list(SAMPLE, weight="length"), path, spark)
    g.run(Empty(), progress=False)                     # warm: this graph's first run loads its partitions
    seconds, walls = [], []
    for _ in range(3):
        clock = time.perf_counter()
        seconds.append(g.run(Empty(), progress=False).metrics.seconds)
        walls.append(time.perf_counter() - clock)
    return float(np.median(seconds)), float(np.median(walls))


def _cpu(jvm_pid: int) -> dict:
    """CPU seconds so far of this (the driver's) Python process, of the driver JVM and of the Python
    workers it started (its descendants, those ended included); None off Linux."""
    if not os.path.isdir(f"/proc/{jvm_pid}"):
        return {"python": None, "jvm": None, "workers": None}
    stats, children = {}, {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as file:
                    fields = file.read().rsplit(")", 1)[1].split()
            except OSError:                 # ended meanwhile
                continue
            stats[int(entry)] = [int(f) / os.sysconf("SC_CLK_TCK") for f in fields[11:15]]
            children.setdefault(int(fields[1]), []).append(int(entry))
    workers, pending = 0.0, list(children.get(jvm_pid, []))
    while pending:
        pid = pending.pop()
        workers += sum(stats[pid])          # its own time and that of its ended, reaped children
        pending += children.get(pid, [])
    python = os.times()
    return {"python": python.user + python.system, "jvm": sum(stats[jvm_pid][:2]), "workers": workers}


def _jvm_reading(spark) -> tuple[dict, float]:
    """:func:`sparkshim.compat.jvm_usage` now, and the seconds reading it took (not the caller's)."""
    from sparkshim.compat import jvm_usage

    clock = time.perf_counter()
    return jvm_usage(spark), time.perf_counter() - clock


def _spent(before: dict, after: dict) -> dict:
    """What the driver JVM did between two :func:`sparkshim.compat.jvm_usage` readings."""
    return {key: None if after[key] is None else after[key] - before[key] for key in after}


def _fresh_process(request: dict) -> dict:
    root = str(Path(__file__).resolve().parents[1])      # the checkout: benchmarks import from it
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    done = subprocess.run([sys.executable, "-m", "benchmarks.bench_cold", json.dumps(request)],
                          capture_output=True, text=True, env=env)
    for line in done.stdout.splitlines():
        if line.startswith("GOFFISH-COLD "):
            return json.loads(line[len("GOFFISH-COLD "):])
    raise RuntimeError(f"./run.sh bench --cold: the {request['algorithm']} process failed:\n{done.stderr[-3000:]}")


def _igraph(algorithm: str, n, src, dst, length, source_vid, directed) -> float:
    from algorithms import baselines

    clock = time.perf_counter()
    if algorithm == "cc":
        baselines.igraph_components(n, src, dst)
    elif algorithm == "sssp":
        baselines.igraph_sssp(n, src, dst, None, source_vid, directed)
    else:
        baselines.igraph_pagerank(n, src, dst, directed)
    return time.perf_counter() - clock


def run_cold(path: str, algorithms, master: str, conf: dict, pagerank_iterations: int = 10, seed: int = 0,
             log=print) -> dict:
    """First-run and warm seconds per algorithm (each in a fresh process), igraph's, the ratios."""
    from algorithms import baselines
    from benchmarks.bench_gopher import _dense_edges

    store = GraphStore(path)
    edges = _dense_edges(store)
    src, dst = edges.column("src").to_numpy(), edges.column("dst").to_numpy()
    n = store.num_vertices
    membership = baselines.igraph_components(n, src, dst)
    rng = np.random.default_rng(seed)
    source_vid = int(rng.choice(np.flatnonzero(membership == np.argmax(np.bincount(membership)))))
    ids = store.vertex_ids.to_numpy(zero_copy_only=False)
    source = ids[source_vid].item() if hasattr(ids[source_vid], "item") else ids[source_vid]
    rows = []
    for algorithm in algorithms:
        request = {"graph": path, "algorithm": algorithm, "master": master, "conf": conf, "source": source,
                   "pagerank_iterations": pagerank_iterations}
        measured = _fresh_process(request)
        reference = _igraph(algorithm, n, src, dst, None, source_vid, store.directed)
        row = {"algorithm": algorithm, "igraph_seconds": reference, **measured}
        row["first"]["x_igraph"] = measured["first"]["seconds"] / reference
        row["warm"]["x_igraph"] = measured["warm"]["seconds"] / reference
        rows.append(row)
        log(format_row(row))
    return {"graph": path, "vertices": n, "edges": store.num_edges, "partitions": store.num_partitions,
            "master": master, "load": os.getloadavg(), "rows": rows}


def format_row(row: dict) -> str:
    first, warm = row["first"], row["warm"]
    phases = ", ".join(f"{k} {v:.2f}" for k, v in first["phases"].items())
    jvm, made = first["first_job_jvm"], first["frame_jvm"]
    cpu = "" if jvm["cpu"] is None else f"CPU {jvm['cpu']:.2f}s (JIT compilers {jvm['jit_cpu']:.2f}), "
    frame = "" if made["cpu"] is None else f"driver JVM CPU {made['cpu']:.2f}s, "
    spent = "" if first["cpu"]["jvm"] is None else (
        f"CPU-s first/warm: driver Python {first['cpu']['python']:.2f}/{warm['cpu']['python']:.2f}, "
        f"driver JVM {first['cpu']['jvm']:.2f}/{warm['cpu']['jvm']:.2f}, "
        f"workers {first['cpu']['workers']:.2f}/{warm['cpu']['workers']:.2f}; ")
    return (f"{row['algorithm']:9s} first {first['seconds']:7.3f}s ({first['x_igraph']:5.2f}x igraph)  "
            f"warm {warm['seconds']:7.3f}s ({warm['x_igraph']:5.2f}x)  igraph {row['igraph_seconds']:.3f}s  "
            f"[{spent}first run: {phases}, supersteps {first['superstep_seconds']:.2f}, "
            f"caller's first job {first['first_job_seconds']:.2f}: driver JVM {cpu}{jvm['classes']} classes loaded, "
            f"{jvm['codegen']} classes generated in {jvm['codegen_ms'] / 1e3:.2f}s; of it making the DataFrame "
            f"{first['frame_seconds']:.2f} ({frame}{made['classes']} classes); session start {row['session_seconds']:.2f} "
            f"not counted; warm fixed cost {row['fixed_seconds']:.3f}s, on the demo graph "
            f"{row['fixed_demo_seconds']:.3f}s (caller's wall {row['fixed_demo_wall_seconds']:.3f}s)]")


def main(args) -> int:
    if args.graph:
        path = args.graph
    else:
        from benchmarks.bench_gopher import ingest_report

        path, _ = ingest_report(args.generator, args.size, args.partitions, args.seed,
                                Path(scratch_directory("goffish-bench-")))
    conf = dict(kv.split("=", 1) for kv in (args.conf or []))
    algorithms = [a for a in args.algorithms.split(",") if a]
    unknown = sorted(set(algorithms) - set(ALGORITHMS))
    if unknown:
        raise SystemExit(f"./run.sh bench --cold: unknown algorithm {unknown[0]!r} (choose from {', '.join(ALGORITHMS)})")
    from goffish.class_archive import mapped_archive

    archive = mapped_archive(conf)
    print(f"load average {os.getloadavg()[0]:.2f} (over 4: loaded figures); one fresh process per algorithm; "
          f"driver JVM: {f'maps {archive}' if archive else 'no class-data archive'}")
    report = run_cold(path, algorithms, args.master or "local[*]", conf, args.pagerank_iterations, args.seed)
    report["class_archive"] = archive and str(archive)
    os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
    with open(args.json, "w") as out:
        json.dump(report, out, indent=1, default=str)
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    child(sys.argv[1:])
