"""Hatrick benchmark: sustained update rate with live results, latency, snapshots, rescaling, exactly-once.

    .venv/bin/python -m benchmarks.bench_hatrick --vertices 100000 --edges 200000

Phases, on one undirected graph stored as GoFS (``--graph``): ``random`` (the default and the worst
case: uniform random edges, hash partitions, uniform random added edges, so no bucket function
gives the workers a small boundary) or ``community`` (a planted partition: communities of
``COMMUNITY`` consecutive ids, ``INSIDE`` of the edges, stored and added, inside one, METIS
partitions); ``--buckets partitions`` aligns the stream's buckets with the GoFS partitions
(:mod:`hatrick.buckets`; default ``hash``). The JSON names both.
1. closed loop: batches of edge updates (half additions, half removals of the oldest
   edges, so every removal is valid) pushed as fast as they are applied, with the
   checkpoint on, incremental connected components and one reachability query live,
   every 10th batch followed by a replay of an earlier one; per batch the same
   state's components are also computed from scratch with scipy (the peer);
2. open loop at ``--rate`` updates/s: arrivals on a clock, each push takes what has
   arrived; latency = result available - arrival; a scale-out 2->3 and a scale-in
   3->2 happen mid-run (moved state, pause, latency around them);
3. snapshot time against buffer size, and the elastic policy under a bursty load;
4. lost / duplicated: the final edge multiset against applying every update once
   (the generator's own window), and the live components against scipy from scratch.

The stream has ``--workers`` workers (:mod:`hatrick.partitioned`, in this process unless
``--master`` names a cluster; default 1, the embedded default). ``--scaling N [N ...]`` instead
runs only the closed loop with the workers in Spark tasks (:mod:`hatrick.executors`) on
``--master``, once per N, beside the in-driver stream:

    ./run.sh bench hatrick --master 'local-cluster[2,1,2048]' --scaling 1 2 \\
        --vertices 200000 --edges 400000 --batch 50000 --seconds 20

Each N also gets an open loop at ``--rate`` (no rescale): p50/p99 latency from arrival to result.

``--driver-memory EDGES [EDGES ...]`` instead measures the driver's Python peak for a stream of
``--workers`` workers in Spark tasks on ``--master``, per graph size (see driver_memory()):

    ./run.sh bench hatrick --master 'local-cluster[2,1,4096]' --workers 2 \\
        --driver-memory 1000000 10000000 --batch 50000 --memory-batches 3

(``--memory-snapshot``: with a checkpoint whose full state the workers write after the last
push, and a snapshot, inside the measured span; ``--memory-query TEXT``: with a live CGQL query
registered on the stream, e.g. ``"DETECT Cluster(id < 20000, size >= 4)"``, evaluated after every
push: its batches evaluated and events are reported beside the peak.)

``--partitioned BATCHES`` instead runs the partitioned live
graph alone, without the stream around it, for 1, 2 and 3 workers, with a scale-out and a
scale-in during the 2-worker run.

``--breakdown`` instead times the parts of a push: 30 pushes of ``--batch`` updates (the
history the closed loop would build), then 20 pushes of 15k updates under cProfile, reported
as milliseconds per push for each step (cProfile inflates Python-heavy steps somewhat).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from gofs.store import GraphStore
from hatrick.buffer import SnapshotPolicy
from hatrick.cgql import query
from hatrick.live import components_from_scratch
from hatrick.stream import Stream


COMMUNITY = 2_500            # vertices per community of the community graph
INSIDE = 0.95                # share of its edges (stored and added) inside a community


class EdgeWorkload:
    """Edge updates whose removals always name a present edge: a FIFO of present edges. Added edges
    join uniform random vertices, or with ``community`` (vertices per community of consecutive ids)
    mostly (``INSIDE``) two of one community, so the additions keep the graph's locality. A batch
    costs the driver little to make, since in the closed loop it is made on the driver's cores while
    the workers apply the batch before: ``op`` and ``producer`` are categorical columns made from
    their codes (no string per row, and :func:`hatrick.updates.validate` reads the codes), and the
    FIFO is a buffer appended at its tail and compacted only when full (not copied every batch)."""

    OPS = pd.CategoricalDtype(["remove_edge", "add_edge"])

    def __init__(self, src, dst, n, seed, producers=4, community: int | None = None):
        self.rng = np.random.default_rng(seed)
        self.community = community
        order = self.rng.permutation(len(src))
        self.q_src = np.asarray(src)[order].astype(np.int64)
        self.q_dst = np.asarray(dst)[order].astype(np.int64)
        self.head, self.tail = 0, len(self.q_src)      # the present edges are q_src/q_dst[head:tail]
        self.n = n
        self.producers = producers
        self.names = pd.CategoricalDtype([f"p{p}" for p in range(producers)])
        self.seq = np.zeros(producers, np.int64)
        self.clock = 0.0

    def present(self) -> int:
        """How many present edges the FIFO holds (a batch of ``size`` removes ``size // 2`` of them)."""
        return self.tail - self.head

    def batch(self, size: int) -> pd.DataFrame:
        half = size // 2
        if self.present() < half:
            raise RuntimeError("workload window exhausted")
        rs, rd = self.q_src[self.head:self.head + half], self.q_dst[self.head:self.head + half]
        self.head += half
        add_s, add_d = _ends(self.rng, self.n, size - half, self.community)
        src, dst = np.empty(size, np.int64), np.empty(size, np.int64)
        src[0:2 * half:2], dst[0:2 * half:2] = rs, rd             # removals at the even rows,
        src[1::2], dst[1::2] = add_s[:half], add_d[:half]         # additions at the odd ones (and the last)
        src[2 * half:], dst[2 * half:] = add_s[half:], add_d[half:]
        ops = np.ones(size, np.int8)
        ops[0:2 * half:2] = 0
        self._append(add_s, add_d)
        producer = (np.arange(size) % self.producers).astype(np.int8)
        counts = np.bincount(producer, minlength=self.producers)
        seq = self.seq[producer] + 1 + np.arange(size) // self.producers      # rows go round the producers
        self.seq += counts
        times = self.clock + np.arange(size) * 1e-6
        self.clock = float(times[-1]) + 1e-6
        return pd.DataFrame({"op": pd.Categorical.from_codes(ops, dtype=self.OPS, validate=False),
                             "src": src, "dst": dst,
                             "producer": pd.Categorical.from_codes(producer, dtype=self.names, validate=False),
                             "seq": seq, "time": times}, copy=False)

    def _append(self, add_s, add_d) -> None:
        """Add edges at the FIFO's tail; a full buffer first moves its present edges to its start
        (doubling it if they would not leave room)."""
        if self.tail + len(add_s) > len(self.q_src):
            live = self.present()
            room = max(len(self.q_src), 2 * (live + len(add_s)))
            for name in ("q_src", "q_dst"):
                old = getattr(self, name)
                new = np.empty(room, np.int64) if room > len(old) else old
                new[:live] = old[self.head:self.tail]
                setattr(self, name, new)
            self.head, self.tail = 0, live
        self.q_src[self.tail:self.tail + len(add_s)] = add_s
        self.q_dst[self.tail:self.tail + len(add_d)] = add_d
        self.tail += len(add_s)

    def expected_counts(self) -> dict:
        q_src, q_dst = self.q_src[self.head:self.tail], self.q_dst[self.head:self.tail]
        keys, counts = np.unique(np.minimum(q_src, q_dst) * self.n + np.maximum(q_src, q_dst), return_counts=True)
        return keys, counts


def _live_counts(stream, n):
    s = stream.state
    live = s.live_slots()
    ids = s.ids.to_numpy()
    a, b = ids[s.src[live]], ids[s.dst[live]]
    keys = np.minimum(a, b) * n + np.maximum(a, b)
    order = np.argsort(keys)
    return keys[order], s.mult[live][order]


def lost_and_duplicated(stream, workload, n):
    ek, ec = workload.expected_counts()
    lk, lc = _live_counts(stream, n)
    keys = np.union1d(ek, lk)
    e = np.zeros(len(keys), np.int64)
    e[np.searchsorted(keys, ek)] = ec
    got = np.zeros(len(keys), np.int64)
    got[np.searchsorted(keys, lk)] = lc
    return int(np.maximum(e - got, 0).sum()), int(np.maximum(got - e, 0).sum())


def percentile(values, q):
    return float(np.percentile(values, q)) if len(values) else float("nan")


def _ends(rng, n, count, community):
    """``count`` edges' (src, dst): uniform random, or with ``community`` mostly inside one."""
    src, dst = rng.integers(0, n, count), rng.integers(0, n, count)
    if community:
        inside = rng.random(count) < INSIDE
        dst[inside] = np.minimum(src[inside] // community * community + rng.integers(0, community, inside.sum()), n - 1)
    return src, dst


def build_graph(path, n, m, seed, kind="random"):
    """Graph ``kind`` (see the module docstring) of ``n`` vertices and ``m`` edges as GoFS: the random
    one in 4 hash partitions, the community one in 8 METIS partitions (about n / COMMUNITY / 8
    communities each). Returns the store and the edges."""
    from gofs.ingest import ingest
    from gofs.ingest.read_local import from_pandas

    rng = np.random.default_rng(seed)
    community = _community(kind)
    src, dst = _ends(rng, n, m, community)
    edges = pd.DataFrame({"src": src, "dst": dst})
    vertices = pd.DataFrame({"id": np.arange(n)})
    ingest(from_pandas(edges, vertices), path, num_partitions=8 if community else 4,
           partitioner="metis" if community else "hash")
    return GraphStore(path), edges


def _community(kind: str) -> int | None:
    """The workload's community size on graph ``kind`` (None: uniform random additions)."""
    return COMMUNITY if kind == "community" else None


def mark_query_sets(stream, n, seed):
    rng = np.random.default_rng(seed + 1)
    chosen = rng.choice(n, 55, replace=False)
    roles = ["src"] * 5 + ["dst"] * 50
    stream.push(pd.DataFrame({"op": "set_vertex", "id": chosen, "attribute": "role", "value": roles,
                              "producer": "setup", "seq": np.arange(1, 56), "time": -1.0}))
    stream.reachable({"role": "src"}, {"role": "dst"}, live="reach")


def closed_loop(stream, work, batch, seconds):
    applied = rows = replays = replay_dups = 0
    apply_s, scratch_s, sent = [], [], []
    clock = time.perf_counter()
    while time.perf_counter() - clock < seconds:
        frame = work.batch(batch)
        t = time.perf_counter()
        report = stream.push(frame)
        apply_s.append(time.perf_counter() - t)
        applied += report.applied
        rows += len(frame)
        sent.append(frame)
        t = time.perf_counter()
        components_from_scratch(stream.state)
        scratch_s.append(time.perf_counter() - t)
        if len(sent) % 10 == 0:
            again = stream.push(sent[len(sent) // 2])
            replays += len(sent[len(sent) // 2])
            replay_dups += again.duplicates
    wall = sum(apply_s)
    return {"batch": batch, "batches": len(apply_s), "updates": rows, "applied": applied,
            "updates_per_s": rows / wall, "apply_ms_p50": 1e3 * percentile(apply_s, 50),
            "scratch_cc_ms_p50": 1e3 * percentile(scratch_s, 50),
            "replayed": replays, "replays_ignored": replay_dups}


def scaling(g, edges, n, args) -> dict:
    """The same closed loop (``--batch`` updates, half removals, incremental components and the
    live Reach on, no checkpoint, no from-scratch peer) through ``g.stream(workers=N)`` with the
    workers in Spark tasks for each N of ``--scaling``, and in this process (``in_driver``, one
    worker: the mechanism before issue 21) for comparison: updates/s and per-push latency, and
    the CPU an update costs on every core (``core_us_per_update``: the driver's CPU plus, in
    Spark tasks, the workers' thread CPU), the fair measure where the cores are shared.
    ``driver_cpu_ms_per_batch`` is the driver process's CPU over the loop (the workload's
    generation of each batch and, in this process, the worker included); ``push_cpu_ms_per_batch``
    the driver thread's CPU inside ``push`` and the final ``flush`` alone.
    ``updates_per_s`` counts the time in ``push`` (and the last batch's completion: a pipelined
    push returns before its batch is applied); ``updates_per_s_with_generation`` the loop's wall
    time, the workload's generation of each batch included (the workers go on meanwhile).
    Each run streams into its own copy of the graph as built: a stream starts from the graph's
    last instance, and a run whose buffer overflows ``--capacity`` snapshots one.
    ``live_edges``, ``lost`` and ``duplicated`` compare each run's live graph with the workload
    applied once."""
    out = {}
    runs = [(f"{w}_workers", w, True) for w in args.scaling] + [("in_driver", 1, False)]
    for name, workers, executors in runs:
        copy = f"{g.path.rstrip(os.sep)}-{name}"
        shutil.copytree(g.path, copy)
        stream = Stream(GraphStore(copy), workers=workers, executors=executors, buckets=args.buckets)
        stream.buffer.policy = dataclasses.replace(stream.buffer.policy, capacity=args.capacity)
        try:
            mark_query_sets(stream, n, args.seed)
            work = EdgeWorkload(edges.src.to_numpy(), edges.dst.to_numpy(), n, args.seed,
                                community=_community(args.graph))
            stream.push(work.batch(args.batch))                      # warm-up: the tasks' first batch
            stream.flush()
            pushes, push_cpu = [], 0.0
            busy = [dict(w.request("busy").result()) for w in stream.live.workers]
            clock, driver_cpu = time.perf_counter(), time.process_time()
            while time.perf_counter() - clock < args.seconds:
                frame = work.batch(args.batch)
                t, cpu = time.perf_counter(), time.thread_time()
                stream.push(frame)
                pushes.append(time.perf_counter() - t)
                push_cpu += time.thread_time() - cpu
            t, cpu = time.perf_counter(), time.thread_time()
            stream.flush()                                  # a pipelined push's last batch completes here
            pushes[-1] += time.perf_counter() - t
            push_cpu += time.thread_time() - cpu
            wall = time.perf_counter() - clock
            driver_cpu = time.process_time() - driver_cpu
            reach = len(stream.live_results["reach"])
            out[name] = {"workers": workers, "batches": len(pushes),
                         "updates_per_s": args.batch * len(pushes) / sum(pushes),
                         "updates_per_s_with_generation": args.batch * len(pushes) / wall,
                         "latency_p50_s": percentile(pushes, 50), "latency_p99_s": percentile(pushes, 99),
                         "driver_cpu_ms_per_batch": 1e3 * driver_cpu / len(pushes),
                         "push_cpu_ms_per_batch": 1e3 * push_cpu / len(pushes),
                         "worker_busy_ms_per_batch": busy_per_batch(stream, busy, len(pushes)),
                         "reach_pairs": reach, "live_edges_per_worker": stream.live.sizes()[:, 1].tolist()}
            worker_cpu = sum(w["cpu"] for w in out[name]["worker_busy_ms_per_batch"]) if executors else 0.0
            out[name]["core_us_per_update"] = 1e3 * (out[name]["driver_cpu_ms_per_batch"] + worker_cpu) / args.batch
            loop = open_loop(stream, work, args.rate, args.seconds, args.max_batch)
            out[name]["open_loop"] = {k: loop[k] for k in ("rate", "achieved_per_s", "latency_ms_p50",
                                                           "latency_ms_p99", "latency_ms_max")}
            if executors and args.rescale:
                out[name]["rescale"] = rescale_round_trip(stream, work, args.batch)
            lost, duplicated = lost_and_duplicated(stream, work, n)
            out[name].update({"live_edges": stream.num_edges, "snapshots": len(stream.snapshots),
                              "rejected": len(stream.rejected), "lost": lost, "duplicated": duplicated})
        finally:
            stream.close()
            shutil.rmtree(copy)
    base = out[f"{args.scaling[0]}_workers"]["updates_per_s"]
    for run in out.values():
        run["vs_first_executor_run"] = run["updates_per_s"] / base
    return out


def busy_per_batch(stream, before: list, batches: int) -> list:
    """Per worker, milliseconds per batch since ``before`` (each worker's ``busy`` then) spent
    answering requests (wall, with the requests' (un)pickling), the requests' CPU (thread time),
    in a Spark task the answering's CPU ((un)pickling included) and the process's (every thread:
    sending and taking payloads too), and the requests' CPU by request: beside the driver's CPU
    per batch, where a batch's time goes."""
    rows = []
    for w, start in zip(stream.live.workers, before):
        now = w.request("busy").result()
        spent = {k: round(1e3 * (v - start.get(k, 0.0)) / batches, 1) for k, v in now.items()}
        row = {k: spent.get(k, 0.0) for k in ("answering", "cpu", "answering cpu", "process cpu")}
        by_request = {k[4:]: v for k, v in spent.items() if k.startswith("cpu:") and v >= 0.05}
        row["cpu_by_request"] = dict(sorted(by_request.items(), key=lambda item: -item[1]))
        rows.append(row)
    return rows


def driver_memory(g_for, args) -> list:
    """Driver memory of a stream whose ``--workers`` workers run in Spark tasks on ``--master``, for each
    live-edge count of ``--driver-memory``: ``g_for(edges)`` builds the graph (in this process,
    before measuring), then the measured part: the stream's start (its workers load GoFS on their
    executors), ``--memory-batches`` pushes of ``--batch`` updates (half removals) with the
    incremental components and the live Reach on (not ``connected_components()``: its frame has a
    row per vertex, on the driver by definition). Reported: the
    driver's Python peak by tracemalloc (Python objects and numpy buffers; not pyarrow's or the
    JVM's) and the process's peak RSS over the same span (reset through /proc/self/clear_refs)."""
    import gc
    import tracemalloc

    from benchmarks.bench_driver_memory import high_water_mark_kb, reset_high_water_mark

    rows = []
    for count in args.driver_memory:
        n = count // 2
        g, edges = g_for(count)
        window = args.batch * args.memory_batches       # the removals come from this prefix, then from the adds
        work = EdgeWorkload(edges.src.to_numpy()[:window], edges.dst.to_numpy()[:window], n, args.seed,
                            community=_community(args.graph))
        frames = [work.batch(args.batch) for _ in range(args.memory_batches)]
        del edges
        gc.collect()
        reset_high_water_mark()
        rss_before = high_water_mark_kb()
        tracemalloc.start()
        clock = time.perf_counter()
        checkpoint = os.path.join(os.path.dirname(g.path), f"ck{count}") if args.memory_snapshot else None
        stream = Stream(g, workers=args.workers, executors=True, checkpoint=checkpoint, buckets=args.buckets,
                        full_checkpoint_every=max(args.memory_batches - 1, 1))
        extra = {}
        try:
            start_s = time.perf_counter() - clock
            mark_query_sets(stream, n, args.seed)
            topic = query(stream, args.memory_query) if args.memory_query else None
            for frame in frames:
                stream.push(frame)
            reach = len(stream.live_results["reach"])
            if topic is not None:
                extra.update(query_snapshots=topic.query.snapshots, query_events=len(topic.read()),
                             query_error=repr(topic.query.error) if topic.query.error else None)
                topic.cancel()
            live = int(stream.live.sizes()[:, 1].sum())
            if args.memory_snapshot:
                clock = time.perf_counter()
                stream.snapshot()
                extra["snapshot_s"] = time.perf_counter() - clock
                extra["snapshot"] = dataclasses.asdict(stream.snapshots[-1])
                clock = time.perf_counter()
                stream.close()                  # waits for the full state the last pushes started
                extra["close_s"] = time.perf_counter() - clock
                extra["checkpoint_mb"] = sum(os.path.getsize(os.path.join(checkpoint, f))
                                             for f in os.listdir(checkpoint)) / 2**20
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
            stream.close()
        rows.append({"live_edges": live, "graph_edges": count, "pushes": len(frames), "start_s": start_s,
                     "reach_pairs": reach, "python_peak_mb": peak / 2**20,
                     "rss_peak_mb": high_water_mark_kb() / 1024, "rss_before_mb": rss_before / 1024, **extra})
    for row in rows:
        row["python_peak_vs_first"] = row["python_peak_mb"] / rows[0]["python_peak_mb"]
    return rows


def rescale_round_trip(stream, work, batch: int) -> list:
    """Scale the running stream out by one worker and back in (state-aware planner), a push
    between: per move, bytes sent worker to worker against the live state's bytes (every
    worker's part as a payload, measured before the move), the pause and the busiest worker's
    state / mean after it."""
    from hatrick import datafile

    moves = []
    n = stream.workers
    for target in (n + 1, n):
        total = sum(len(datafile.dumps(w.part())) for w in stream.live.workers)
        report = stream.rescale(target)
        state = np.array(report.worker_state, float)
        moves.append({"from": report.workers_before, "to": target, "sent_bytes": report.moved_bytes,
                      "state_bytes": total, "sent_fraction": report.moved_bytes / total,
                      "bound": 1 / (max(report.workers_before, target)) + 0.05,
                      "pause_s": report.pause_seconds, "max_load_ratio_by_plan": report.max_load_ratio,
                      "max_state_ratio": float(state.max() / state.mean())})
        stream.push(work.batch(batch))
    return moves


def open_loop(stream, work, rate, seconds, max_batch, rescale_at=(), n_workers=(3, 2)):
    total = int(rate * seconds)
    chunk = max(work.present(), 2)          # removes half of it: never past the window
    frame = pd.concat([work.batch(min(chunk, total - i)) for i in range(0, total, chunk)], ignore_index=True)
    start = time.perf_counter()
    arrival = start + np.arange(total) / rate
    latencies = np.empty(total)
    done = 0
    rescales = []
    pending = list(zip(rescale_at, n_workers))
    while done < total:
        now = time.perf_counter()
        if pending and now - start >= pending[0][0]:
            at, workers = pending.pop(0)
            report = stream.rescale(workers, planner="state")
            rescales.append({"at_s": round(now - start, 2), "workers": workers, **report.__dict__})
            continue
        ready = min(int(np.searchsorted(arrival, now, "right")), done + max_batch)
        if ready <= done:
            time.sleep(min(arrival[done] - now, 0.01))
            continue
        stream.push(frame.iloc[done:ready])
        len(stream.live_results)        # the batch's live results (workers in Spark tasks compute them lazily)
        finished = time.perf_counter()
        latencies[done:ready] = finished - arrival[done:ready]
        done = ready
    wall = time.perf_counter() - start
    out = {"rate": rate, "updates": total, "wall_s": wall, "achieved_per_s": total / wall,
           "latency_ms_p50": 1e3 * percentile(latencies, 50), "latency_ms_p99": 1e3 * percentile(latencies, 99),
           "latency_ms_max": 1e3 * float(latencies.max())}
    for r in rescales:
        near = (arrival - start >= r["at_s"]) & (arrival - start < r["at_s"] + 1.0)
        r["latency_ms_p99_next_1s"] = 1e3 * percentile(latencies[near], 99)
        r.pop("feasible", None)
    calm = np.ones(total, bool)
    for r in rescales:
        calm &= ~((arrival - start >= r["at_s"] - 0.5) & (arrival - start < r["at_s"] + 1.5))
    out["latency_ms_p99_away_from_rescales"] = 1e3 * percentile(latencies[calm], 99)
    out["rescales"] = rescales
    return out


BREAKDOWN_STEPS = ("push", "validate", "_fresh", "apply_batch", "_apply_run", "_apply_edges",
                   "_update_components", "_slot_components", "begin", "commit", "save", "_after_batch")


def breakdown(stream, work, warmup_batch, pushes=20, size=15_000):
    """Milliseconds per push spent in each step of :meth:`Stream.push` (cumulative, cProfile)."""
    import cProfile
    import pstats

    for _ in range(30):
        stream.push(work.batch(warmup_batch))
    frames = [work.batch(size) for _ in range(pushes)]
    profile = cProfile.Profile()
    wall = []
    for frame in frames:
        clock = time.perf_counter()
        profile.runcall(stream.push, frame)
        wall.append(time.perf_counter() - clock)
    steps = {}
    for (path, _, name), (_, _, _, cumulative, _) in pstats.Stats(profile).stats.items():
        if name in BREAKDOWN_STEPS and f"{os.sep}hatrick{os.sep}" in path:
            steps[name] = round(1e3 * cumulative / pushes, 1)
    return {"push_size": size, "pushes": pushes, "wall_ms_p50": 1e3 * percentile(wall, 50),
            "edge_slots": len(stream.state.src), "live_edges": stream.state.num_edges,
            "ms_per_push": dict(sorted(steps.items(), key=lambda item: -item[1]))}


def snapshot_times(stream, work, sizes):
    rows = []
    for size in sizes:
        stream.push(work.batch(size))
        t = time.perf_counter()
        stream.snapshot()
        rows.append({"buffer": size, "snapshot_s": time.perf_counter() - t,
                     "added": stream.snapshots[-1].added_edges, "removed": stream.snapshots[-1].removed_edges})
    return rows


def bursty(stream, work, pattern, policy):
    stream.buffer.policy = policy
    stream.auto_snapshot = True
    before = len(stream.snapshots)
    rows = []
    for rate, seconds in pattern:
        step = 0.1
        for _ in range(int(seconds / step)):
            tick = time.perf_counter()
            age = stream.buffer.age()
            snaps = len(stream.snapshots)
            stream.push(work.batch(max(int(rate * step), 2)))
            if len(stream.snapshots) > snaps:
                r = stream.snapshots[-1]
                rows.append({"rate": rate, "updates": r.buffered_updates, "lag_s": age, "write_s": r.seconds})
            time.sleep(max(step - (time.perf_counter() - tick), 0))
    stream.auto_snapshot = False
    return {"snapshots": len(stream.snapshots) - before, "per_snapshot": rows}


def partitioned(state, work_factory, batch: int, batches: int, bucket_function, buckets: int = 64) -> dict:
    """The experimental partitioned live graph (hatrick.partitioned), in this one process: updates/s
    with components merged after every batch for 1, 2 and 3 workers (the same updates each time),
    and a scale-out 2 -> 3 and scale-in 3 -> 2 in the middle of the 2-worker run, planned by the
    state-aware planner with each bucket's live edges as its load: bytes sent between workers
    against the whole live state's, pause (planning included), busiest worker's edges / mean;
    per worker its requests' CPU per batch (the workers of this process run one after another)
    and its owned and ghost vertices at the end. ``bucket_function``: the stream's :class:`hatrick.buckets.Buckets`; hashed buckets start on the
    ring's owners, aligned ones as a stream starts them (groups dealt out, evened out by edges)."""
    from hatrick import datafile
    from hatrick.partitioned import PartitionedGraph, Worker
    from hatrick.planner import plan_migration
    from hatrick.ring import HashRing
    from hatrick.updates import validate

    def state_bytes(graph):
        return sum(len(datafile.dumps(w.part())) for w in graph.workers)

    def load_ratio(graph):
        edges = np.array([w.held_edges().sum() for w in graph.workers], float)
        return float(edges.max() / edges.mean())

    out = {}
    for workers in (1, 2, 3):
        work = work_factory()
        group = None if bucket_function.kind == "hash" else bucket_function.groups(buckets)
        if group is None:
            owner = HashRing(range(workers), 128).owners(buckets)
        else:
            held = Worker(0, state, np.zeros(buckets, np.int64), bucket_function).held_edges()
            owner = plan_migration(held + 1e-9, held, bucket_function.dealt(buckets, workers), list(range(workers)),
                                   0.02, group=group).owner
        graph = PartitionedGraph(state, owner, bucket_function)
        pushed, seconds, moves = 0, 0.0, []
        for i in range(batches):
            if workers == 2 and i in (batches // 3, 2 * batches // 3):
                target = 3 if i == batches // 3 else 2
                total = state_bytes(graph)
                clock = time.perf_counter()
                per_bucket = sum(w.held_edges() for w in graph.workers)
                plan = plan_migration(per_bucket + 1e-9, per_bucket, graph.owner, list(range(target)), tau=0.1,
                                      group=group)
                sent = graph.rescale(plan.owner)
                moves.append({"to": target, "sent_bytes": sent, "state_bytes": total, "fraction": sent / total,
                              "pause_s": time.perf_counter() - clock, "max_load_ratio": load_ratio(graph)})
            updates = validate(work.batch(batch), "int64")[0]
            clock = time.perf_counter()
            graph.apply(updates)
            graph.components()
            seconds += time.perf_counter() - clock
            pushed += batch
        out[workers] = {"updates_per_s": pushed / seconds, "ms_per_batch": 1000 * seconds / batches,
                        "worker_cpu_ms_per_batch": [round(1e3 * w.busy.get("cpu", 0.0) / batches, 1)
                                                    for w in graph.workers],
                        "owned_and_ghost_vertices": [[len(w.owned()), len(w.ghosts())] for w in graph.workers],
                        "moves": moves}
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.bench_hatrick", description=__doc__.splitlines()[0])
    p.add_argument("--vertices", type=int, default=100_000)
    p.add_argument("--edges", type=int, default=200_000)
    p.add_argument("--batch", type=int, default=50_000, help="closed-loop batch size")
    p.add_argument("--seconds", type=float, default=10.0, help="per loop")
    p.add_argument("--rate", type=float, default=100_000, help="open-loop arrival rate (updates/s)")
    p.add_argument("--max-batch", type=int, default=100_000, help="largest batch the open loop takes at once")
    p.add_argument("--no-checkpoint", action="store_true")
    p.add_argument("--capacity", type=int, default=SnapshotPolicy().capacity,
                   help="with --scaling: the buffer's capacity (a batch that would overflow it forces a snapshot)")
    p.add_argument("--breakdown", action="store_true", help="only time the steps of a push (see above)")
    p.add_argument("--workers", type=int, default=1, help="the stream's workers (phases 1-4)")
    p.add_argument("--partitioned", type=int, default=0, metavar="BATCHES",
                   help="only run the partitioned live graph (no stream) for BATCHES batches per worker count")
    p.add_argument("--master", default=None,
                   help="Spark master, e.g. 'local-cluster[2,1,2048]' (with --scaling: where the workers run)")
    p.add_argument("--scaling", type=int, nargs="+", default=None, metavar="N",
                   help="only the closed loop with the workers in Spark tasks, for each N (see scaling())")
    p.add_argument("--rescale", action="store_true",
                   help="with --scaling: after each closed loop, scale out by one worker and back in")
    p.add_argument("--driver-memory", type=int, nargs="+", default=None, metavar="EDGES",
                   help="only the driver's memory for graphs of EDGES edges (workers in Spark tasks on --master)")
    p.add_argument("--memory-batches", type=int, default=3, help="with --driver-memory: batches pushed")
    p.add_argument("--memory-query", default=None, metavar="TEXT",
                   help="with --driver-memory: a live CGQL query on the stream during the measured span")
    p.add_argument("--memory-snapshot", action="store_true",
                   help="with --driver-memory: a checkpoint whose full state is written after the last push, "
                        "and a snapshot, inside the measured span")
    p.add_argument("--graph", choices=("random", "community"), default="random",
                   help="the graph and its workload: random (no locality) or community (see above)")
    p.add_argument("--buckets", choices=("hash", "partitions"), default="hash",
                   help="the stream's bucket function (hatrick.buckets): hashed, or aligned with the GoFS partitions")
    p.add_argument("--json", default="bench-results/hatrick.json")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    warnings.simplefilter("ignore")
    started = None
    if args.master or args.scaling or args.driver_memory:
        from pyspark.sql import SparkSession

        from goffish.session import session

        fresh = SparkSession.getActiveSession() is None
        spark = session(master=args.master or "local[*]", app_name="hatrick-bench",
                        conf={"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false"})
        started = spark if fresh else None
    try:
        return measure(args)
    finally:
        if started is not None:       # stopped before the interpreter exits, a local-cluster master ends its
            started.stop()            # executors with the application instead of relaunching them at JVM shutdown


def measure(args) -> int:
    """The benchmark ``args`` ask for (see the module docstring); its exit status."""
    with tempfile.TemporaryDirectory(prefix="hatrick-bench-") as tmp:
        if args.driver_memory:
            def g_for(count):
                return build_graph(os.path.join(tmp, f"g{count}.gofs"), count // 2, count, args.seed, args.graph)

            result = {"master": args.master, "batch": args.batch, "load_average": os.getloadavg(),
                      "graph": args.graph, "buckets": args.buckets,
                      "driver_memory": driver_memory(g_for, args)}
            print(json.dumps(result, indent=1, default=float))
            return 0
        n = args.vertices
        g, edges = build_graph(os.path.join(tmp, "g.gofs"), n, args.edges, args.seed, args.graph)
        community = _community(args.graph)
        if args.scaling:
            result = {"vertices": n, "edges": args.edges, "graph": args.graph, "buckets": args.buckets,
                      "batch": args.batch, "master": args.master,
                      "load_average": os.getloadavg(), "scaling": scaling(g, edges, n, args)}
            print(json.dumps(result, indent=1, default=float))
            return 0
        stream = Stream(g, checkpoint=None if args.no_checkpoint else os.path.join(tmp, "ck"),
                        workers=args.workers, buckets=args.buckets)
        mark_query_sets(stream, n, args.seed)
        work = EdgeWorkload(edges.src.to_numpy(), edges.dst.to_numpy(), n, args.seed, community=community)
        result = {"vertices": n, "edges": args.edges, "graph": args.graph, "buckets": args.buckets,
                  "checkpoint": not args.no_checkpoint, "workers": args.workers}
        if args.partitioned:
            def factory():
                return EdgeWorkload(edges.src.to_numpy(), edges.dst.to_numpy(), n, args.seed, community=community)

            print(json.dumps({**result, "partitioned": partitioned(stream.state, factory, args.batch,
                                                                   args.partitioned, stream.buckets)},
                             indent=1, default=float))
            return 0
        if args.breakdown:
            print(json.dumps({**result, "breakdown": breakdown(stream, work, args.batch)}, indent=1, default=float))
            return 0
        result["closed_loop"] = closed_loop(stream, work, args.batch, args.seconds)
        third = args.seconds / 3
        result["open_loop"] = open_loop(stream, work, args.rate, args.seconds, args.max_batch,
                                        rescale_at=(third, 2 * third))
        result["snapshots"] = snapshot_times(stream, work, [s for s in (1_000, 10_000, 100_000) if s <= args.edges])
        result["bursty"] = bursty(stream, work, [(200_000, 1.0), (5_000, 3.0), (200_000, 1.0), (5_000, 3.0)],
                                  SnapshotPolicy(interval=1.0, min_volume=20_000, max_volume=500_000, max_age=2.0))
        lost, duplicated = lost_and_duplicated(stream, work, n)
        result["lost"], result["duplicated"] = lost, duplicated
        scratch = components_from_scratch(stream.state)
        result["components_equal_scratch"] = bool((scratch == stream.state.comp).all())
        result["reach_pairs"] = len(stream.live_results["reach"])
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(result, indent=1, default=float))
    print(json.dumps(result, indent=1, default=float))
    return 0 if lost == 0 and duplicated == 0 and result["components_equal_scratch"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
