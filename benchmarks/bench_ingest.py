"""Ingest benchmark: time per stage and the driver's peak memory, local engine vs Spark engine,
plus the multilevel partitioner's edge cut and balance against METIS on the driver.

    python -m benchmarks.bench_ingest --edges 1000000 5000000 --kind road rmat --engine local spark \\
        --json bench-results/ingest.json

Each ingest runs in a fresh Python process (so its peak RSS is its own), started
from here; while it runs this process samples the driver JVM's heap in use
(``jstat -gc``: survivor + eden + old used) and its resident size from
``/proc``. Inputs are SNAP text edge lists written by ``goffish.generators``
(road-like: ``edges / 1.415`` vertices; R-MAT: edge factor 16).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import threading
import time

from benchmarks import scratch_directory


def _edge_list(kind: str, edges: int, directory: str, seed: int) -> str:
    from goffish.generators import rmat, road_network, write_edge_list

    path = os.path.join(directory, f"{kind}-{edges}.txt")
    if not os.path.exists(path):
        if kind == "road":
            graph = road_network(int(edges / 1.415), seed=seed)
        else:
            scale = max(1, round(math.log2(edges / 16)))
            graph = rmat(scale, edge_factor=max(1, round(edges / 2 ** scale)), seed=seed)
        write_edge_list(graph, path, attrs=False)
    return path


def _children(pid: int) -> list[int]:
    found = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/children") as f:
                found += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return found


def _jvm_of(pid: int) -> int | None:
    for child in _children(pid):
        try:
            with open(f"/proc/{child}/cmdline", "rb") as f:
                if b"java" in f.read().split(b"\0")[0]:
                    return child
        except OSError:
            pass
    return None


def _heap_used_bytes(jvm: int) -> int | None:
    """Survivor + eden + old generation in use, from ``jstat -gc`` (KiB columns)."""
    try:
        out = subprocess.run(["jstat", "-gc", str(jvm)], capture_output=True, text=True, timeout=10).stdout.split("\n")
        names, values = out[0].split(), [float(v) for v in out[1].split()]
    except (OSError, IndexError, ValueError, subprocess.TimeoutExpired):
        return None
    row = dict(zip(names, values))
    return int(sum(row.get(k, 0.0) for k in ("S0U", "S1U", "EU", "OU")) * 1024)


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            return int(next(line for line in f if line.startswith("VmRSS")).split()[1]) * 1024
    except (OSError, StopIteration):
        return 0


def _cpu_seconds() -> dict:
    """CPU seconds used so far by this process (``driver``), its Spark JVM (``jvm``) and the JVM's
    Python workers (``workers``, with the exited ones their daemon waited for): on a shared
    machine a stage's CPU time says what it costs where its wall time mostly says the load."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    found = {"driver": usage.ru_utime + usage.ru_stime, "jvm": 0.0, "workers": 0.0}
    stats = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    name, _, rest = f.read().rpartition(")")
                stats[int(entry)] = (name.partition("(")[2], rest.split())
            except OSError:
                pass
    jvm = next((pid for pid, (name, fields) in stats.items()
                if int(fields[1]) == os.getpid() and name == "java"), None)
    tick = os.sysconf("SC_CLK_TCK")
    for pid, (_, fields) in stats.items():
        up = pid
        while up in stats and up != jvm:
            up = int(stats[up][1][1])
        if pid == jvm:
            found["jvm"] += (int(fields[11]) + int(fields[12])) / tick
        elif up == jvm and jvm is not None:
            found["workers"] += sum(int(x) for x in fields[11:15]) / tick
    return found


def _measured(command: list[str], timeout: float) -> dict:
    """Run one ingest process; sample its JVM's heap and RSS every second."""
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=dict(os.environ, PYTHONPATH=os.getcwd()))
    peak = {"jvm_heap_used": 0, "jvm_rss": 0}
    stop = threading.Event()

    def sample():
        jvm = None
        while not stop.wait(1.0):
            jvm = jvm or _jvm_of(child.pid)
            if jvm:
                heap = _heap_used_bytes(jvm)
                peak["jvm_heap_used"] = max(peak["jvm_heap_used"], heap or 0)
                peak["jvm_rss"] = max(peak["jvm_rss"], _rss(jvm))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        out, err = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        child.kill()
        out, err = child.communicate()
        return {"error": f"timed out after {timeout:.0f} s", **peak}
    finally:
        stop.set()
        sampler.join()
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if child.returncode != 0 or not lines:
        errors = [line for line in err.splitlines() if "Error" in line or "Exception" in line]
        return {"error": (err.strip().splitlines() or ["exit code %d" % child.returncode])[-1][:300],
                "first_errors": errors[:5], **peak}
    return {**json.loads(lines[-1]), **peak}


def _one(args) -> int:
    """In the measured process: one ingest, then its timings and peak RSS as a JSON line."""
    from benchmarks.bench_driver_memory import high_water_mark_kb

    from gofs import layout

    target = args.target
    started = time.perf_counter()
    timings: dict = {}
    report: dict = {}
    jobs: dict = {}
    if args.engine == "spark":
        from goffish.session import session
        from gofs.ingest.spark import ingest_on_spark as ingest

        spark = session(master=args.master, conf=_conf(args))
        session_seconds = time.perf_counter() - started
        cpu_before = _cpu_seconds()
        budget = {"driver_budget_bytes": args.driver_budget_mib << 20} if args.driver_budget_mib else {}
        options = {**budget, "report": report} if args.spark_partitioner == "multilevel" else {}
        manifest = ingest(spark, args.input, target, num_partitions=args.partitions, timings=timings,
                          jobs=jobs, overwrite=True, partitioner=args.spark_partitioner, **options)
    else:
        from gofs.ingest.local import ingest_graph as ingest
        from gofs.ingest.read_local import read_graph

        session_seconds = 0.0
        cpu_before = _cpu_seconds()
        clock = time.perf_counter()
        graph = read_graph(args.input)
        timings["read"] = time.perf_counter() - clock
        manifest = ingest(graph, target, num_partitions=args.partitions, timings=timings, overwrite=True)
    cpu = {k: v - cpu_before[k] for k, v in _cpu_seconds().items()}
    print(json.dumps({"timings": timings, "seconds": time.perf_counter() - started - session_seconds,
                      "cpu_seconds": cpu,
                      "session_seconds": session_seconds,
                      # VmHWM, not ru_maxrss: ru_maxrss keeps the RSS this process had between fork and
                      # exec, i.e. the parent bench's (the generated edge list: 849 MiB read at 5.6M road)
                      "python_peak_rss": high_water_mark_kb() * 1024,
                      "num_vertices": manifest["num_vertices"], "num_edges": manifest["num_edges"],
                      "cut_edges": manifest["cut_edges"], "balance": manifest["balance"],
                      "partitioner": manifest["partitioner"],
                      **({"multilevel": report} if report else {}), **({"spark_jobs": jobs} if jobs else {})}))
    fs, root = layout.filesystem(target)
    layout.remove(fs, root)
    return 0


def _conf(args) -> dict:
    return {"spark.driver.memory": args.driver_memory, "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": str(args.shuffle_partitions)}


def _quality(args) -> int:
    """In a measured process: METIS on the driver vs multilevel on Spark, same dense ids."""
    from goffish.session import session
    from gofs.ingest.local import dense_ids
    from gofs.partition import balance, edge_cut
    from gofs.partition.metis import metis_partition
    from gofs.partition.multilevel import multilevel_partition
    from gofs.ingest.read_local import read_graph

    spark = session(master=args.master, conf=_conf(args))
    index, src, dst, _ = dense_ids(read_graph(args.input))
    n = len(index)
    clock = time.perf_counter()
    metis = metis_partition(n, src, dst, args.partitions)
    metis_seconds = time.perf_counter() - clock
    report: dict = {}
    clock = time.perf_counter()
    multilevel = multilevel_partition(n, src, dst, args.partitions, 0, spark, report=report,
                                      driver_budget_edges=args.driver_budget_edges)
    print(json.dumps({"metis_cut": edge_cut(metis, src, dst), "metis_balance": balance(metis, args.partitions),
                      "metis_seconds": metis_seconds, "multilevel_cut": edge_cut(multilevel, src, dst),
                      "multilevel_balance": balance(multilevel, args.partitions),
                      "multilevel_seconds": time.perf_counter() - clock, "levels": report["levels"]}))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_ingest", description=__doc__.split("\n\n")[0])
    parser.add_argument("--edges", type=int, nargs="+", default=[1_000_000])
    parser.add_argument("--kind", nargs="+", default=["road", "rmat"], choices=["road", "rmat"])
    parser.add_argument("--engine", nargs="+", default=["local", "spark"], choices=["local", "spark"])
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--quality-edges", type=int, default=1_000_000,
                        help="size of the multilevel-vs-METIS comparison (0: skip)")
    parser.add_argument("--quality-first", action="store_true", help="run the comparison before the ingests")
    parser.add_argument("--driver-budget-edges", type=int, default=100_000,
                        help="multilevel budget in the quality comparison (coarsening must happen)")
    parser.add_argument("--spark-partitioner", default="multilevel", choices=["multilevel", "hash", "spark-lp"],
                        help="partitioner of the Spark engine's ingests")
    parser.add_argument("--driver-budget-mib", type=int, default=None,
                        help="multilevel METIS budget (MiB) of the Spark engine's ingests (the coarse graph "
                             "one task partitions; default: the partitioner's)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="1g", help="spark.driver.memory of the Spark runs")
    parser.add_argument("--shuffle-partitions", type=int, default=8,
                        help="spark.sql.shuffle.partitions of the Spark runs (Spark's 200 is far too many "
                             "for a few cores)")
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--workdir", default=None, help="where inputs and graphs go (default: a temp dir)")
    parser.add_argument("--json", default="bench-results/ingest.json")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--one", nargs=3, metavar=("ENGINE", "INPUT", "TARGET"), help=argparse.SUPPRESS)
    parser.add_argument("--quality-of", metavar="INPUT", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        args.engine, args.input, args.target = args.one
        return _one(args)
    if args.quality_of:
        args.input = args.quality_of
        return _quality(args)

    workdir = args.workdir or scratch_directory("goffish-bench-ingest-")
    os.makedirs(workdir, exist_ok=True)
    common = ["--partitions", str(args.partitions), "--master", args.master, "--driver-memory", args.driver_memory,
              "--shuffle-partitions", str(args.shuffle_partitions), "--spark-partitioner", args.spark_partitioner,
              *(["--driver-budget-mib", str(args.driver_budget_mib)] if args.driver_budget_mib else [])]
    results = {"command": " ".join(["python -m benchmarks.bench_ingest", *(argv or sys.argv[1:])]),
               "runs": [], "quality": []}
    def ingests():
        for edges in args.edges:
            for kind in args.kind:
                source = _edge_list(kind, edges, workdir, args.seed)
                rows = []
                for engine in args.engine:
                    command = [sys.executable, "-m", "benchmarks.bench_ingest", "--one", engine, source,
                               os.path.join(workdir, f"{kind}-{edges}-{engine}.gofs"), *common]
                    row = {"kind": kind, "edges": edges, "engine": engine, **_measured(command, args.timeout),
                           "load": os.getloadavg()[0]}
                    results["runs"].append(row)
                    rows.append(row)
                    _print_run(row)
                    _save(results, args.json)
                _print_side_by_side(rows)

    def quality():
        for kind in args.kind if args.quality_edges else []:
            source = _edge_list(kind, args.quality_edges, workdir, args.seed)
            command = [sys.executable, "-m", "benchmarks.bench_ingest", "--quality-of", source,
                       "--driver-budget-edges", str(args.driver_budget_edges), *common]
            row = {"kind": kind, "edges": args.quality_edges, **_measured(command, args.timeout)}
            results["quality"].append(row)
            print(json.dumps(row), flush=True)
            _save(results, args.json)

    for step in ((quality, ingests) if args.quality_first else (ingests, quality)):
        step()
    return 0


def _print_run(row: dict) -> None:
    if "error" in row:
        print(f"{row['kind']:5} {row['edges']:>10,} {row['engine']:6} FAILED: {row['error']}", flush=True)
        return
    stages = ", ".join(f"{k} {v:.1f}" for k, v in row["timings"].items())
    print(f"{row['kind']:5} {row['edges']:>10,} {row['engine']:6} {row['seconds']:7.1f} s ({stages}); "
          f"python peak {row['python_peak_rss'] / 2**20:.0f} MiB, jvm heap peak "
          f"{row['jvm_heap_used'] / 2**20:.0f} MiB, cpu s "
          f"{', '.join(f'{k} {v:.1f}' for k, v in row['cpu_seconds'].items())}, cut {row['cut_edges']:,}, balance {row['balance']:.3f}",
          flush=True)


_STAGES = (("read", "read"), ("validate", "ids"), ("partition", "partition"), ("subgraphs", "subgraphs"),
           ("write", "write"))
"""The stages of the local engine and their Spark engine counterparts (dense ids are validated locally)."""


def _work(counts: dict | None) -> str:
    return f"{counts['jobs']:4} / {counts['stages']:4} ({counts['skipped']}) / {counts['tasks']}" if counts else ""


def _print_side_by_side(rows: list[dict]) -> None:
    """Both engines' stages in one table, the Spark/local ratio, and the Spark jobs each stage ran."""
    local = next((r for r in rows if r["engine"] == "local" and "error" not in r), None)
    spark = next((r for r in rows if r["engine"] == "spark" and "error" not in r), None)
    if local is None or spark is None:
        return
    jobs = spark.get("spark_jobs", {})
    print(f"  {'stage':18} {'local s':>8} {'spark s':>8} {'ratio':>7}   spark jobs / stages run (skipped) / tasks")
    for mine, theirs in _STAGES:
        a, b = local["timings"].get(mine, 0.0), spark["timings"].get(theirs, 0.0)
        print(f"  {mine + ('/' + theirs if mine != theirs else ''):18} {a:8.2f} {b:8.2f} {b / max(a, 1e-9):6.1f}x   "
              f"{_work(jobs.get(theirs))}")
        for step in (jobs.get(theirs) or {}).get("steps", []):
            print(f"    {step['step'][:34]:34} {step['seconds']:8.2f}   {_work(step)}")
    total = {k: sum(v[k] for v in jobs.values()) for k in ("jobs", "stages", "skipped", "tasks")} if jobs else None
    print(f"  {'wall':18} {local['seconds']:8.2f} {spark['seconds']:8.2f} "
          f"{spark['seconds'] / max(local['seconds'], 1e-9):6.1f}x   {_work(total)}   "
          f"(load average {local['load']:.1f} / {spark['load']:.1f})")
    multilevel = spark.get("multilevel", {})
    for step, seconds in multilevel.get("seconds", {}).items():
        if step in multilevel.get("jobs", {}):
            print(f"    multilevel {step:9} {seconds:8.2f}   {_work(multilevel['jobs'][step])}", flush=True)
            for inner in multilevel.get("steps", {}).get(step, []):
                print(f"      {inner['step'][:32]:32} {inner['seconds']:8.2f}   {_work(inner)}", flush=True)


def _save(results: dict, path: str) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as out:
        json.dump(results, out, indent=1)


if __name__ == "__main__":
    sys.exit(main())
