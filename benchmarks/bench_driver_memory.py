"""Driver memory of a run as the graph grows: peak Python RSS and peak JVM heap used.

The design says a run does no O(V) work on the driver, so a graph larger than
the driver's memory can still be analysed. This benchmark checks it: for each
graph (road-like and R-MAT, of the given edge counts) it

1. builds the graph with the local ingest (METIS for road, hash for R-MAT) in a separate
   process, so that the ingest's memory does not count (kept in ``--workdir``
   and reused by later runs);
2. starts a fresh driver process on ``local-cluster[2,1,MB]`` (executors are
   separate JVMs and Python workers, as on a cluster, so what is measured is
   the driver alone) with a fixed driver heap, and runs connected components,
   SSSP (weighted where the graph has weights) and PageRank, each result
   consumed by a Spark aggregate;
3. measures, per algorithm: the driver's peak Python RSS (the process's own
   high-water mark, reset before each algorithm through ``/proc/self/clear_refs``)
   and the driver JVM's peak heap used (sampled from outside with
   ``jstat -gc PID 100``: survivor + eden + old used, garbage included), and
   the driver JVM's live heap after the algorithm (heap used right after a full
   GC that ``jcmd PID GC.run`` forces at the end of each algorithm).

``--code DIR`` runs step 2 with another checkout's code (e.g. ``/work/main``
before a change): the driver process imports only ``goffish`` from DIR.

    python -m benchmarks.bench_driver_memory --edges 1000000 5000000 20000000 --kind road rmat \\
        --workdir /tmp/driver-memory --json bench-results/driver_memory.json
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import threading
import time

ALGORITHMS = ("cc", "sssp", "pagerank")
_JSTAT_USED = ("S0U", "S1U", "EU", "OU")
_SETTLE_SECONDS = 6
_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))        # this checkout


# --------------------------------------------------------------------------- graphs

def graph_path(workdir: str, kind: str, edges: int) -> str:
    return os.path.join(workdir, f"{kind}-{edges}.gofs")


def build_graph(kind: str, edges: int, path: str, partitions: int, seed: int = 0) -> dict:
    """Generate a ``kind`` graph of about ``edges`` edges and ingest it: METIS for road graphs
    (hash partitions of a road graph cut nearly every shortest path: thousands of supersteps),
    hash for R-MAT (METIS gains little on a power-law graph and is slow there)."""
    import goffish
    from goffish.generators import rmat, road_network

    if kind == "road":
        graph = road_network(max(int(edges / 1.417), 16), seed=seed)     # about 1.417 edges per vertex
    elif kind == "rmat":
        scale = max(int(round(math.log2(edges / 16))), 4)
        graph = rmat(scale, edge_factor=max(int(math.ceil(edges * 1.05 / 2 ** scale)), 1), seed=seed)
    else:
        raise ValueError(f"unknown graph kind {kind!r}: road or rmat")
    clock = time.perf_counter()
    g = goffish.ingest(graph, path, num_partitions=partitions, partitioner="metis" if kind == "road" else "hash",
                       overwrite=True)
    first = g.read_edge_partition(0, attributes=[])
    return {"path": path, "kind": kind, "vertices": g.num_vertices, "edges": g.num_edges,
            "partitions": g.num_partitions, "weight": next(iter(g.edge_attributes), None),
            "source": first.column("src")[0].as_py(), "ingest_seconds": round(time.perf_counter() - clock, 1)}


# --------------------------------------------------------------------------- the measured driver

def high_water_mark_kb() -> int:
    with open("/proc/self/status") as status:
        return int(re.search(r"VmHWM:\s+(\d+) kB", status.read()).group(1))


def reset_high_water_mark() -> None:
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")


def measured_driver(info: dict, executor_mb: int, driver_heap: str) -> None:
    """Runs in the fresh driver process: a session, then each algorithm between PHASE markers
    on stdout (the parent samples the JVM meanwhile), with this process's peak RSS per phase."""
    import goffish
    from pyspark.sql import functions as F

    def phase(name, run):
        reset_high_water_mark()
        print(f"PHASE {name} start", flush=True)
        clock = time.perf_counter()
        extra = run()
        seconds = time.perf_counter() - clock
        print(f"PHASE {name} end", flush=True)
        time.sleep(_SETTLE_SECONDS)            # the parent forces a full GC meanwhile, then reads the live heap
        print("RESULT " + json.dumps({"phase": name, "seconds": round(seconds, 2),
                                      "python_peak_mb": round(high_water_mark_kb() / 1024, 1), **(extra or {})}),
              flush=True)

    def consumed(result, column):
        total = result.dataframe.agg(F.count("*"), F.sum(F.col(column).cast("double"))).first()
        result.unpersist()
        return {"rows": total[0], "supersteps": result.metrics.num_supersteps, "transport": result.metrics.transport}

    spark = goffish.session(master=f"local-cluster[2,1,{executor_mb}]", app_name="driver-memory",
                            conf={"spark.driver.memory": driver_heap, "spark.ui.enabled": "false",
                                  "spark.ui.showConsoleProgress": "false", "spark.sql.shuffle.partitions": "8"},
                            graphframes=False)
    phase("session", lambda: {"graph": goffish.open(info["path"], spark=spark).num_vertices})
    g = goffish.open(info["path"], spark=spark)
    phase("cc", lambda: consumed(g.connected_components(progress=False), "component"))
    phase("sssp", lambda: consumed(g.sssp(info["source"], weight=info["weight"], progress=False), "distance"))
    phase("pagerank", lambda: consumed(g.pagerank(max_iter=10, tol=0, progress=False), "pagerank"))
    spark.stop()


# --------------------------------------------------------------------------- sampling from outside

def _descendants(pid: int) -> list[int]:
    children = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if parent == pid:
                children.append(int(entry))
    return children + [d for c in children for d in _descendants(c)]


def _driver_jvm(pid: int, timeout: float = 600) -> int:
    """The JVM that ``spark-submit`` started for driver process ``pid``."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        for child in _descendants(pid):
            try:
                with open(f"/proc/{child}/cmdline", "rb") as cmd:
                    argv = cmd.read().split(b"\0")
            except OSError:
                continue
            if (argv and argv[0].endswith(b"java") and b"org.apache.spark.deploy.SparkSubmit" in argv
                    and b"org.apache.spark.launcher.Main" not in argv):        # not the launcher's JVM
                return child
        time.sleep(0.2)
    raise RuntimeError(f"no driver JVM appeared under process {pid}")


class _JvmSampler(threading.Thread):
    """``jstat -gc PID 100`` read line by line: (time, heap used KB, old generation used KB) samples."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid = pid
        self.jstat = shutil.which("jstat") or os.path.join(os.environ.get("JAVA_HOME", "/usr"), "bin", "jstat")
        self.process = subprocess.Popen([self.jstat, "-gc", str(pid), "100"], stdout=subprocess.PIPE, text=True)
        self.samples: list[tuple[float, float, float]] = []

    def run(self):
        header = None
        for line in self.process.stdout:
            fields = line.split()
            if fields and fields[0] == "S0C":
                header = fields
            elif header and len(fields) == len(header):
                try:
                    row = dict(zip(header, map(float, fields)))
                except ValueError:
                    continue
                self.samples.append((time.time(), sum(row[k] for k in _JSTAT_USED), row["OU"]))

    def stop(self):
        self.process.terminate()
        self.process.wait()


class _Lines(threading.Thread):
    """Lines of a pipe, read in the background so that the reader can also watch the process."""

    def __init__(self, pipe):
        super().__init__(daemon=True)
        import queue

        self.pipe, self.queue = pipe, queue.Queue()
        self.start()

    def run(self):
        for line in self.pipe:
            self.queue.put(line)

    def next(self, timeout: float):
        import queue

        try:
            return self.queue.get(timeout=timeout)
        except queue.Empty:
            return None


def _end(pid: int) -> None:
    """Stop a measured driver's JVM that outlived its Python process (ours: we started it)."""
    try:
        os.kill(pid, 15)
    except ProcessLookupError:
        pass


def measure(info: dict, code: str, executor_mb: int, driver_heap: str) -> dict:
    """Run :func:`measured_driver` in a fresh process with ``code`` first on its path."""
    env = dict(os.environ, PYTHONPATH=code, PYSPARK_PYTHON=sys.executable,
               SPARK_WORKER_DIR=os.path.join(os.path.dirname(info["path"]), "spark-work"))
    child = subprocess.Popen([sys.executable, "-P", os.path.abspath(__file__), "--driver", json.dumps(info),
                              "--executor-mb", str(executor_mb), "--driver-heap", driver_heap],
                             env=env, stdout=subprocess.PIPE, text=True)
    sampler = _JvmSampler(_driver_jvm(child.pid))
    sampler.start()
    marks, results, live = {}, {}, {}
    jcmd = os.path.join(os.path.dirname(sampler.jstat), "jcmd")
    lines, quiet = _Lines(child.stdout), 0
    while True:
        line = lines.next(timeout=1.0)
        if line is None:
            quiet = quiet + 1 if child.poll() is not None else 0
            if quiet >= 2:                      # exited and said all: its JVM may still hold the pipe open
                break
            continue
        if line.startswith("PHASE "):
            _, name, edge = line.split()
            marks.setdefault(name, {})[edge] = time.time()
            if edge == "end":
                subprocess.run([jcmd, str(sampler.pid), "GC.run"], stdout=subprocess.DEVNULL, check=False)
                done = time.time()
                time.sleep(0.5)
                after = [s for s in sampler.samples if s[0] > done]
                live[name] = round(after[0][1] / 1024, 1) if after else None
        elif line.startswith("RESULT "):
            row = json.loads(line[len("RESULT "):])
            results[row.pop("phase")] = row
    if child.returncode:
        sampler.stop()
        _end(sampler.pid)
        raise RuntimeError(f"the measured driver failed (exit {child.returncode}) on {info['path']}")
    time.sleep(0.3)
    sampler.stop()
    for name, row in results.items():
        window = [s for s in sampler.samples if marks[name]["start"] - 0.1 <= s[0] <= marks[name]["end"] + 0.1]
        row["jvm_heap_peak_mb"] = round(max(s[1] for s in window) / 1024, 1) if window else None
        row["jvm_live_after_mb"] = live.get(name)
    return results


# --------------------------------------------------------------------------- command line

def _table(rows: list[dict]) -> str:
    lines = ["| code | graph | vertices | edges | algorithm | seconds | driver Python peak RSS (MB) "
             "| driver JVM heap used peak (MB) | driver JVM live heap after (MB) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['code']} | {r['kind']} | {r['vertices']:,} | {r['edges']:,} | {r['algorithm']} "
                     f"| {r['seconds']} | {r['python_peak_mb']} | {r['jvm_heap_peak_mb']} | {r['jvm_live_after_mb']} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_driver_memory", description=__doc__.split("\n")[0])
    parser.add_argument("--edges", type=int, nargs="+", default=[1_000_000, 5_000_000])
    parser.add_argument("--kind", nargs="+", choices=["road", "rmat"], default=["road", "rmat"])
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--workdir", default="/tmp/goffish-driver-memory")
    parser.add_argument("--code", nargs="+", default=[_HERE],
                        help="checkouts whose goffish the measured driver runs (default: this one)")
    parser.add_argument("--executor-mb", type=int, default=3072)
    parser.add_argument("--driver-heap", default="1g")
    parser.add_argument("--json", help="also write the rows here")
    parser.add_argument("--driver", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.driver:
        measured_driver(json.loads(args.driver), args.executor_mb, args.driver_heap)
        return 0
    os.makedirs(args.workdir, exist_ok=True)
    rows = []
    for edges in args.edges:
        for kind in args.kind:
            path = graph_path(args.workdir, kind, edges)
            described = path + ".json"
            if not os.path.exists(described):
                print(f"building {kind} with about {edges:,} edges ...", flush=True)
                build = (f"import json, sys; from benchmarks.bench_driver_memory import build_graph; "
                         f"json.dump(build_graph({kind!r}, {edges}, {path!r}, {args.partitions}), "
                         f"open({described!r}, 'w'))")
                subprocess.run([sys.executable, "-c", build], check=True,
                               env=dict(os.environ, PYTHONPATH=_HERE))
            with open(described) as f:
                info = json.load(f)
            for code in args.code:
                print(f"measuring {kind} {info['edges']:,} edges with the code in {code} ...", flush=True)
                for algorithm, row in measure(info, code, args.executor_mb, args.driver_heap).items():
                    rows.append({"code": code, "kind": kind, "vertices": info["vertices"], "edges": info["edges"],
                                 "partitions": info["partitions"], "algorithm": algorithm, **row})
                print(_table([r for r in rows if r["kind"] == kind and r["edges"] == info["edges"]
                              and r["code"] == code]), flush=True)
    print(_table(rows))
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"command": " ".join(["python -m benchmarks.bench_driver_memory"] + (argv or sys.argv[1:])),
                       "driver_heap": args.driver_heap, "executor_mb": args.executor_mb, "rows": rows}, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
