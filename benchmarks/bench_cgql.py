"""CGQL detection lateness under a steady and a bursty update stream.

A synthetic stream (:class:`SyntheticStream`, standing in for Hatrick's
``Stream``: ``on_batch`` / ``remove_callback``, GraphViews after every
applied batch) receives updates at ``rate`` per second in wall-clock time:
vertex ``usage`` changes, edge additions and removals over a graph of
``vertices`` vertices and ``edge_slots`` possible edges (types power, follow,
message). Its buffer applies everything that arrived every ``interval``
seconds, or later when the previous batch is still being evaluated (elastic:
a slow batch makes the next one bigger). Ten queries (Reach, Cluster, the
smart-grid composite with Evolved) are registered on it.

Lateness of an event = D - C: D the wall-clock time it was published, C the
arrival of the *first* update of the batch that made its condition true (an
upper bound: the update that did it arrived at or after C). Reported per
event (p50/p95/p99/max) and as the sum over events. Wall and CPU seconds of
evaluation per batch and the machine's load average are reported too: on a
shared machine the wall figures include waiting for a core.

Run::

    .venv/bin/python -m benchmarks.bench_cgql --rate 10000 --seconds 10
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time

import numpy as np
import pandas as pd

from hatrick.cgql import query

QUERIES = [
    "DETECT Reach(source: {usage >= 100}, sink: {city = London, usage < 2}) FOR 1h WHERE edge: {type = follow}",
    "DETECT Reach(source: {usage >= 99}, sink: {usage <= 0}) FOR 1h WHERE edge: {message}",
    "DETECT Reach(source: {city = Paris, usage > 98}, sink: {city = Delhi, usage > 98}) FOR 1h",
    "DETECT Cluster(usage < 20) FOR 1h WHERE edge: {type = power}",
    "DETECT Cluster(sum(node.usage) > C, diameter < d) FOR 1h WHERE edge: {type = power}",
    "DETECT Cluster(city = London, count(*) >= 5) FOR 1h WHERE edge: {follow}",
    "DETECT Cluster(usage > 80, max(node.usage) > 95) FOR 1h WHERE edge: {message}",
    "DETECT Reach(source: {name=C1_{n}.*}, sink: {name=C2_{n}.*}) FOR 1h WHERE edge:{message} "
    "AND DETECT Cluster(sum(node.usage) < C, diameter < d) FOR (1h) WHERE edge:{type = power} AS C1_{n} "
    "AND DETECT Cluster(sum(node.usage) > C', diameter < d) FOR (1h) WHERE edge:{type = power} AS C2_{n}; "
    "DETECT Evolved(C2_{n}) WHERE sum(node.usage) < C AND SUCCEEDS C2_{n}",
    "DETECT Cluster(usage < 50, size >= 10) FOR 1h",
    "DETECT Reach(source: {id = 0}, sink: {usage > 90}) FOR 1h WHERE edge: {type = follow}",
]
PARAMS = {"C": 300, "C'": 400, "d": 6}


class _View:
    """One batch's graph (a GraphView): plain class, so snapshots are shared by identity."""

    def __init__(self, time_, seq, vertices, edges):
        self.time, self.seq, self._v, self._e = time_, seq, vertices, edges
        self.directed = True

    def vertices(self):
        return self._v

    def edges(self):
        return self._e


class SyntheticStream:
    """Updates arriving at a schedule, applied in elastic batches, views to callbacks."""

    directed = True

    def __init__(self, vertices: int, edge_slots: int, seed: int = 0):
        rng = np.random.default_rng(seed)
        self.rng = rng
        self.n, self.m = vertices, edge_slots
        self.usage = rng.integers(0, 101, vertices)
        self.city = rng.choice(np.array(["London", "Paris", "Delhi"], dtype=object), vertices)
        self.names = np.array([f"v{i}" for i in range(vertices)], dtype=object)
        self.src, self.dst = rng.integers(0, vertices, edge_slots), rng.integers(0, vertices, edge_slots)
        self.kind = rng.choice(np.array(["power", "follow", "message"], dtype=object), edge_slots)
        self.alive = rng.random(edge_slots) < 0.5
        self.callbacks: list = []
        self.batches: list = []
        self._lock = threading.Lock()

    def now(self) -> float:
        return time.time()

    def on_batch(self, callback) -> None:
        with self._lock:
            self.callbacks.append(callback)

    def remove_callback(self, callback) -> None:
        with self._lock:
            if callback in self.callbacks:
                self.callbacks.remove(callback)

    def _view(self, t: float, seq: int) -> _View:
        vertices = pd.DataFrame({"id": np.arange(self.n), "name": self.names, "usage": self.usage, "city": self.city})
        alive = np.flatnonzero(self.alive)
        edges = pd.DataFrame({"src": self.src[alive], "dst": self.dst[alive], "type": self.kind[alive]})
        return _View(t, seq, vertices, edges)

    def run(self, arrivals: np.ndarray, interval: float) -> None:
        """Replay updates whose arrival offsets (seconds from now, sorted) are ``arrivals``."""
        count = len(arrivals)
        kinds = self.rng.choice(3, count, p=[0.5, 0.25, 0.25])
        targets = np.where(kinds == 0, self.rng.integers(0, self.n, count), self.rng.integers(0, self.m, count))
        values = self.rng.integers(0, 101, count)
        start = time.time()
        arrivals = start + arrivals
        done, seq = 0, 0
        while done < count:
            wait = arrivals[done] + interval - time.time()
            if wait > 0:
                time.sleep(min(wait, interval))
            cut = int(np.searchsorted(arrivals, time.time(), side="right"))
            if cut <= done:
                continue
            batch = slice(done, cut)
            k, tgt, val = kinds[batch], targets[batch], values[batch]
            self.usage[tgt[k == 0]] = val[k == 0]
            self.alive[tgt[k == 1]] = True
            self.alive[tgt[k == 2]] = False
            view = self._view(float(arrivals[cut - 1]), seq)
            began, cpu = time.time(), time.process_time()
            for callback in list(self.callbacks):
                callback(view)
            self.batches.append({"seq": seq, "first": float(arrivals[done]), "last": float(arrivals[cut - 1]),
                                 "updates": cut - done, "evaluate_s": time.time() - began,
                                 "evaluate_cpu_s": time.process_time() - cpu})
            done, seq = cut, seq + 1


def arrival_schedule(mode: str, rate: float, seconds: float, seed: int = 0) -> np.ndarray:
    """Arrival offsets: steady = Poisson at ``rate``; bursty = 0.25 s at 3.4x rate then 0.75 s at
    0.2x rate, every second (same mean rate)."""
    rng = np.random.default_rng(seed)
    if mode == "steady":
        gaps = rng.exponential(1.0 / rate, int(rate * seconds * 1.2))
        t = np.cumsum(gaps)
        return t[t < seconds]
    pieces = []
    for s in range(int(np.ceil(seconds))):
        burst = rng.uniform(s, s + 0.25, rng.poisson(rate * 3.4 * 0.25))
        calm = rng.uniform(s + 0.25, s + 1.0, rng.poisson(rate * 0.2 * 0.75))
        pieces += [burst, calm]
    t = np.sort(np.concatenate(pieces))
    return t[t < seconds]


def measure(mode: str, rate: float, seconds: float, vertices: int, edge_slots: int, interval: float,
            queries: int = 10, seed: int = 0) -> dict:
    stream = SyntheticStream(vertices, edge_slots, seed)
    topics = []
    for i, text in enumerate(QUERIES[:queries]):
        topic = query(stream, text.replace("{n}", f"{mode}{i}"), params=PARAMS)
        topics += list(topic.query.topics.values())
    arrivals = arrival_schedule(mode, rate, seconds, seed)
    warm = stream._view(time.time(), -1)     # registration-time state: initial events, imports; not timed
    for callback in list(stream.callbacks):
        callback(warm)
    began = time.time()
    stream.run(arrivals, interval)
    wall = time.time() - began
    first = {b["seq"]: b["first"] for b in stream.batches}
    lateness = np.array([e["detected"] - first[e["snapshot"]] for t in topics for e in t.read()
                         if e["snapshot"] >= 0])
    for t in topics:
        t.cancel()
    evaluate = np.array([b["evaluate_s"] for b in stream.batches])
    cpu = np.array([b["evaluate_cpu_s"] for b in stream.batches])
    sizes = np.array([b["updates"] for b in stream.batches])
    q = (lambda p: float(np.percentile(lateness, p))) if len(lateness) else (lambda p: float("nan"))
    return {"mode": mode, "target_rate": rate, "updates": int(sizes.sum()), "seconds": round(wall, 2),
            "achieved_rate": round(float(sizes.sum()) / wall, 1), "batches": len(sizes),
            "mean_batch": round(float(sizes.mean()), 1), "max_batch": int(sizes.max()),
            "registered_queries": queries, "topics": len(topics), "events": int(len(lateness)),
            "lateness_p50_s": round(q(50), 4), "lateness_p95_s": round(q(95), 4),
            "lateness_p99_s": round(q(99), 4), "lateness_max_s": round(float(lateness.max()), 4) if len(lateness)
            else None, "lateness_sum_s": round(float(lateness.sum()), 2),
            "evaluate_per_batch_mean_s": round(float(evaluate.mean()), 4),
            "evaluate_per_batch_p99_s": round(float(np.percentile(evaluate, 99)), 4),
            "evaluate_cpu_per_batch_mean_s": round(float(cpu.mean()), 4),
            "load_average_1min": round(os.getloadavg()[0], 1)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=10_000, help="updates per second")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--vertices", type=int, default=10_000)
    parser.add_argument("--edge-slots", type=int, default=30_000)
    parser.add_argument("--interval", type=float, default=0.1, help="buffer flush interval (seconds)")
    parser.add_argument("--queries", type=int, default=10)
    parser.add_argument("--modes", default="steady,bursty")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args(argv)
    results = [measure(mode, args.rate, args.seconds, args.vertices, args.edge_slots, args.interval, args.queries)
               for mode in args.modes.split(",")]
    for r in results:
        print(json.dumps(r))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
