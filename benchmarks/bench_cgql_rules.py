"""CGQL Cluster's task-side work per partition and instance, in process, against the partition pass.

One partition's worth of the ``cgql_past`` bench (``--size`` vertices of its road
graph: 125k is 1M over 8 partitions; ``usage`` drawn anew every hour, 1% of the
edge types changing per hour) with its query ``Cluster(usage < 30,
sum(node.usage) > 400) WHERE edge: {type = power}``. Per instance, as a task of
the Gopher run does: :class:`hatrick.cgql.programs.ClusterProgram`'s pass over
the partition (the peer: its WHERE conditions, the components of the kept edges
and their numbering, the like of what CC does per partition and instance), then
its ``summary`` and ``rules`` phases with the driver's numbering of the new
groups. The partition has no boundary, so every group is decided on the task:
the common case at 1M. Figures are CPU seconds (``time.process_time``) per call,
medians over ``--reps`` passes over the instances after the first (which has no
previous one to compare with); ``digest`` fingerprints the events and group
states, to compare two trees' results.

    python -m benchmarks cgql_rules --size 125000 --hours 8 --reps 6
"""
from __future__ import annotations

import argparse
import hashlib
import os
import pickle
import time
from types import SimpleNamespace

import numpy as np
import pandas as pd

from benchmarks import print_results

QUERY = "DETECT Cluster(usage < 30, sum(node.usage) > 400) WHERE edge: {type = power}"


def partition_passes(program, size: int, hours: int, seed: int) -> list:
    """Per instance, (seconds, the partition as ``program``'s own pass hands it to the phases):
    the pass reads a stand-in for the partition's sub-graphs (one partition, no remote edges)."""
    from goffish.generators import road_network

    graph = road_network(size, seed=seed)
    src, dst = graph.edges.column("src").to_numpy(), graph.edges.column("dst").to_numpy()
    order = np.argsort(src, kind="stable")               # a partition's local edges come sorted by source
    src, dst = src[order], dst[order]
    rng = np.random.default_rng(seed)
    kinds = np.array(["power", "follow", "message"])
    kind = rng.choice(kinds, len(src), p=[0.5, 0.3, 0.2])
    ids, empty = np.arange(size, dtype=np.int64), np.empty(0, np.int64)
    remote = _NoRemoteEdges(empty, pd.Categorical([], categories=kinds))
    out = []
    for hour in range(hours):
        if hour:
            change = rng.random(len(src)) < 0.01
            kind = np.where(change, rng.choice(kinds, len(src)), kind)
        usage = rng.integers(0, 40, size)
        types = pd.Categorical(kind, categories=kinds)    # text edge values come as their stored codes
        whole = SimpleNamespace(edge_src=src, edge_dst=dst, remote_edges=remote, num_vertices=size, ids=ids,
                                vertex_ids=ids, vertex_attribute={"usage": usage}.__getitem__,
                                edge_attribute={"type": types}.__getitem__)
        clock = time.process_time()
        passed = program._partition(whole)
        out.append((time.process_time() - clock, passed))
    return out


class _NoRemoteEdges:
    """A partition's remote edges where it has none."""

    def __init__(self, empty: np.ndarray, no_values):
        self.src = self.dst = empty
        self._no_values = no_values

    def __len__(self) -> int:
        return 0

    def attribute(self, name):
        return self._no_values


def _pattern():
    from hatrick.cgql.parser import parse
    from hatrick.cgql.planner import plan

    return plan(parse(QUERY)).subqueries[0].pattern


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=125_000, help="vertices of the partition")
    parser.add_argument("--hours", type=int, default=8)
    parser.add_argument("--reps", type=int, default=6)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="write the results here too")
    args = parser.parse_args(argv)
    from hatrick.cgql.programs import ClusterProgram

    store = SimpleNamespace(edge_attributes=(), instance_edge_attributes=("type",),
                            instance_vertex_attributes=("usage",))
    program = ClusterProgram(_pattern(), store, in_frame=lambda start: True, keep_last=False)
    passes = partition_passes(program, args.size, args.hours, args.seed)
    timings = {"peer": [], "summary": [], "rules": []}
    digest, groups, events = hashlib.sha1(), [], []
    for rep in range(args.reps + 1):                 # the first pass compiles and warms; not timed
        previous, base = None, 0
        for hour, (peer, whole) in enumerate(passes):
            lane = {"piece": whole["piece"], "usable": whole["usable"], "labels": whole["vertex_ids"][whole["starts"]]}
            state = {"gather": False}
            clock = time.process_time()
            summary = program._summary(whole, lane, previous, state)
            summary_s = time.process_time() - clock
            fresh = np.sort(summary["fresh"].astype(np.int64))       # the driver's numbering: no other groups
            state.update(fresh=fresh, base=base, time=3600.0 * hour, inside=True, before_inside=hour > 0,
                         decided=None, follow_inside=[], follow_before_inside=[])
            base += len(fresh)
            clock = time.process_time()
            found, _ = program._rules(whole, lane, previous, state)
            rules_s = time.process_time() - clock
            if rep and hour:
                for name, seconds in (("peer", peer), ("summary", summary_s), ("rules", rules_s)):
                    timings[name].append(seconds)
            if rep == 1:
                groups.append(int((lane["record"]["cid"] >= 0).sum()))
                events.append(len(found))
                digest.update(pickle.dumps([(e[0], e[1], sorted(e[2].items())) for e in found]))
                digest.update(pickle.dumps({k: v for k, v in lane["record"].items() if k != "values"}))
            previous = lane
    median = {name: 1000 * float(np.median(v)) for name, v in timings.items()}
    out = {"vertices": args.size, "hours": args.hours, "reps": args.reps, "groups": groups, "events": events,
           "digest": digest.hexdigest()[:12], "peer_ms": median["peer"], "summary_ms": median["summary"],
           "rules_ms": median["rules"], "task_vs_peer": (median["summary"] + median["rules"]) / median["peer"],
           "load": os.getloadavg()}
    print_results(out, args.json)
    return out


if __name__ == "__main__":
    main()
