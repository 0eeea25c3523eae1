"""``./run.sh bench --cold``: what a ``spark-submit`` job gets, the first run in a fresh process.

Each algorithm runs once for each of three callers, each in a Python process of its own (a new
SparkSession, a new JVM, new Python workers); the session's start is timed apart and left out.
The callers differ in what they do with the result, and so in what their first run costs:

``first`` (the DataFrame caller, the conservative figure)
    reads the result DataFrame: timed from the call to the end of its first job on it (a checksum
    over every value, count and sum of the finite ones). A run's DataFrame is made when first read,
    so that job includes Spark's first read of the result files and the fresh JVM's first SQL
    query. The same process then runs again: the warm figure. The caller's first job is timed in
    two parts: making the DataFrame (the session's SQL state, Spark's Parquet source, the file
    index: all built on first use in a fresh JVM) and the query itself.
``collect`` (a job that wants the rows in its own process: NetworkX, a plot, a report)
    timed from the call to the same checksum computed with numpy over ``RunResult.to_arrow()`` of
    every column: the run's result files read by pyarrow, no Spark job.
``write`` (a job or ``goffish run --out`` that stores the result)
    timed from the call to the same checksum over the column read back by pyarrow from what
    ``RunResult.write_parquet`` wrote to a scratch directory: the files copied and committed, no
    Spark job.

Every figure stands beside igraph's build+solve on one core, measured here on the same edges,
with the ratio, and the three checksums must agree. Each first run's set-up and output phases
(:attr:`gopher.metrics.RunMetrics.phases`) say where its time went, and the CPU seconds of the
driver's Python process, its JVM and the Python workers, first and warm, say who spent it (wall
seconds on a shared machine are noise; CPU seconds much less so). The DataFrame caller's process
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
import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks import scratch_directory
from gofs.files import numpy_values
from gofs.store import GraphStore
from gopher.program import SubgraphProgram

ALGORITHMS = ("cc", "sssp", "pagerank")
#: what the caller of each fresh process does with the result (see the module's docstring)
CALLERS = ("dataframe", "collect", "write")
#: a row's figures: the DataFrame caller's first and warm runs, the other callers' first runs
FIGURES = ("first", "warm", "collect", "write")


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
    """In the fresh process: the session (timed apart), then the request's caller."""
    request = json.loads(argv[0])
    clock = time.perf_counter()
    import goffish
    from sparkshim.compat import driver_jvm_pid

    spark = goffish.session(master=request["master"], conf=request["conf"])
    session_seconds = time.perf_counter() - clock
    g = goffish.open(request["graph"], spark=spark)
    jvm_pid = driver_jvm_pid(spark)
    args = (g, request["algorithm"], request["source"], request["pagerank_iterations"])
    if request["caller"] == "dataframe":
        report = _dataframe_caller(spark, jvm_pid, *args)
    else:
        report = {request["caller"]: handed_over_run(request["caller"], *args, jvm_pid=jvm_pid)}
    spark.stop()
    print("GOFFISH-COLD " + json.dumps({"session_seconds": session_seconds, **report}), flush=True)


def _dataframe_caller(spark, jvm_pid: int, g, algorithm: str, source, pagerank_iterations: int) -> dict:
    """The first run and its caller's first job on the DataFrame, a warm run, the warm fixed costs."""
    from benchmarks.bench_gopher import _checksum
    from sparkshim.compat import jvm_usage

    report = {}
    for label in ("first", "warm"):
        start = _cpu(jvm_pid)
        clock = time.perf_counter()
        result, column = _run(g, algorithm, source, pagerank_iterations)
        ran = time.perf_counter() - clock
        before, reading = _jvm_reading(spark)
        clock += reading                               # reading the JVM's figures is not the caller's job
        made = time.perf_counter()
        frame = result.dataframe
        made = time.perf_counter() - made
        between, reading = _jvm_reading(spark)
        clock += reading
        checksum = _checksum(frame, column)
        total = time.perf_counter() - clock
        job_jvm = _spent(before, jvm_usage(spark))
        cpu = _spent(start, _cpu(jvm_pid))
        result.unpersist()
        report[label] = {"seconds": total, "run_seconds": ran, "first_job_seconds": total - ran,
                         "first_job_jvm": job_jvm, "frame_seconds": made, "frame_jvm": _spent(before, between),
                         "cpu": cpu, "checksum": checksum, **_run_figures(result.metrics)}
    report["fixed_seconds"] = float(np.median([g.run(Empty(), progress=False).metrics.seconds for _ in range(3)]))
    report["fixed_demo_seconds"], report["fixed_demo_wall_seconds"] = _demo_fixed_cost(spark)
    return report


def handed_over_run(caller: str, g, algorithm: str, source, pagerank_iterations: int, jvm_pid: int) -> dict:
    """A run whose caller collects its rows (``collect``) or writes them (``write``), timed from
    the call to the checksum over the rows in this process (see the module's docstring)."""
    out = str(Path(scratch_directory("goffish-bench-write-")) / "result.parquet") if caller == "write" else None
    start = _cpu(jvm_pid)
    clock = time.perf_counter()
    result, column = _run(g, algorithm, source, pagerank_iterations)
    ran = time.perf_counter() - clock
    if caller == "collect":
        values = result.to_arrow().column(column)
    else:
        result.write_parquet(out)
        values = pq.read_table(out, columns=[column]).column(column)
    checksum = numpy_checksum(values)
    total = time.perf_counter() - clock
    cpu = _spent(start, _cpu(jvm_pid))
    result.unpersist()
    return {"seconds": total, "run_seconds": ran, "handover_seconds": total - ran, "cpu": cpu,
            "checksum": checksum, **_run_figures(result.metrics)}


def numpy_checksum(values: pa.ChunkedArray) -> float:
    """:func:`benchmarks.bench_gopher._checksum` over an Arrow column: the row count plus the sum of
    the finite values (nulls, NaN and infinities left out). The column's buffers are read as they
    are (:func:`gofs.files.numpy_values`): pyarrow's ``to_numpy`` of a chunked column imports pandas
    (~0.4 CPU-s), which a caller that only wants the numbers would not pay."""
    numbers = np.asarray(numpy_values(values), dtype=np.float64)
    return float(numbers[np.isfinite(numbers)].sum()) + len(numbers)


def _run_figures(metrics) -> dict:
    return {"supersteps": metrics.num_supersteps, "phases": metrics.phases,
            "superstep_seconds": sum(s.seconds for s in metrics.supersteps)}


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
    raise RuntimeError(f"./run.sh bench --cold: the {request['algorithm']} process ({request['caller']} caller) "
                       f"failed:\n{done.stderr[-3000:]}")


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
        row = {"algorithm": algorithm, **_fresh_process({**request, "caller": "dataframe"})}
        for caller in CALLERS[1:]:
            measured = _fresh_process({**request, "caller": caller})
            row[caller] = {**measured[caller], "session_seconds": measured["session_seconds"]}
        row["igraph_seconds"] = reference = _igraph(algorithm, n, src, dst, None, source_vid, store.directed)
        for label in FIGURES:
            row[label]["x_igraph"] = row[label]["seconds"] / reference
        checksums = [row[label]["checksum"] for label in FIGURES]
        row["checksums_agree"] = bool(np.allclose(checksums, checksums[0], rtol=1e-9, atol=0.0))
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
    figures = "  ".join(f"{label} {row[label]['seconds']:7.3f}s ({row[label]['x_igraph']:5.2f}x)"
                        for label in FIGURES)
    handed = "; ".join(_handed_over(caller, row[caller]) for caller in CALLERS[1:])
    return (f"{row['algorithm']:9s} {figures}  igraph {row['igraph_seconds']:.3f}s"
            f"{'' if row['checksums_agree'] else '  CHECKSUMS DIFFER'}  "
            f"[{spent}first run: {phases}, supersteps {first['superstep_seconds']:.2f}, "
            f"caller's first job {first['first_job_seconds']:.2f}: driver JVM {cpu}{jvm['classes']} classes loaded, "
            f"{jvm['codegen']} classes generated in {jvm['codegen_ms'] / 1e3:.2f}s; of it making the DataFrame "
            f"{first['frame_seconds']:.2f} ({frame}{made['classes']} classes); {handed}; session start "
            f"{row['session_seconds']:.2f} not counted; warm fixed cost {row['fixed_seconds']:.3f}s, on the demo graph "
            f"{row['fixed_demo_seconds']:.3f}s (caller's wall {row['fixed_demo_wall_seconds']:.3f}s)]")


def _handed_over(caller: str, figures: dict) -> str:
    """Where a collecting or writing caller's first run went: the run, then the rows to its checksum."""
    cpu = figures["cpu"]
    spent = "" if cpu["jvm"] is None else (f" (CPU-s driver Python {cpu['python']:.2f}, driver JVM "
                                           f"{cpu['jvm']:.2f}, workers {cpu['workers']:.2f})")
    return (f"{caller}: run {figures['run_seconds']:.2f} + rows {figures['handover_seconds']:.2f}{spent}, "
            f"supersteps {figures['superstep_seconds']:.2f}")


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
