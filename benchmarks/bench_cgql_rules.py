"""CGQL Cluster's task-side work per partition and instance, in process, against the partition's components pass.

One partition's worth of the ``cgql_past`` bench (``--size`` vertices of its road
graph: 125k is 1M over 8 partitions; ``usage`` drawn anew every hour, 1% of the
edge types changing per hour) with its query ``Cluster(usage < 30,
sum(node.usage) > 400) WHERE edge: {type = power}``. Per instance, as a task of
the Gopher run does: the partition's pieces (the peer: scipy's components of the
kept edges and their numbering, the pass every instance's CC does too), then
:class:`hatrick.cgql.programs.ClusterProgram`'s ``summary`` and ``rules`` phases
with the driver's numbering of the new groups. The partition has no boundary, so
every group is decided on the task: the common case at 1M. Figures are CPU
seconds (``time.process_time``) per call, medians over ``--reps`` passes over the
instances after the first (which has no previous one to compare with); ``digest``
fingerprints the events and group states, to compare two trees' results.

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
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from benchmarks import print_results

QUERY = "DETECT Cluster(usage < 30, sum(node.usage) > 400) WHERE edge: {type = power}"


def partition_passes(size: int, hours: int, seed: int) -> list:
    """Per instance, the partition as ``ClusterProgram._partition`` hands it to the phases."""
    from goffish.generators import road_network
    from hatrick.cgql.patterns import partial_kinds

    graph = road_network(size, seed=seed)
    src, dst = graph.edges.column("src").to_numpy(), graph.edges.column("dst").to_numpy()
    rng = np.random.default_rng(seed)
    kinds = np.array(["power", "follow", "message"])
    kind = rng.choice(kinds, len(src), p=[0.5, 0.3, 0.2])
    ids, empty = np.arange(size, dtype=np.int64), np.empty(0, np.int64)
    aggregate_kinds = partial_kinds(_pattern().aggregate_conditions())
    out = []
    for hour in range(hours):
        if hour:
            change = rng.random(len(src)) < 0.01
            kind = np.where(change, rng.choice(kinds, len(src)), kind)
        usage = rng.integers(0, 40, size)
        clock = time.process_time()
        members = usage < 30
        kept = np.flatnonzero((kind == "power") & members[src] & members[dst])
        touched = np.zeros(size, bool)
        touched[src[kept]] = touched[dst[kept]] = True
        count, piece = connected_components(csr_matrix((np.ones(len(kept)), (src[kept], dst[kept])),
                                                       shape=(size, size)), directed=True, connection="weak")
        rows = np.flatnonzero(touched)
        numbers = piece[rows]
        first = numbers > np.maximum.accumulate(np.r_[-1, numbers[:-1]])
        renumbered = np.full(count, -1, np.int64)
        renumbered[numbers[first]] = np.arange(int(first.sum()))
        pieces = np.full(size, -1, np.int64)
        pieces[rows] = renumbered[numbers]
        peer = time.process_time() - clock
        out.append((peer, {"piece": pieces, "members": rows, "usable": np.zeros(0, bool), "starts": rows[first],
                           "ids": ids, "vertex_ids": ids, "remote_src": empty, "remote_dst": empty,
                           "columns": {"usage": usage[rows]}, "kinds": aggregate_kinds}))
    return out


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
    passes = partition_passes(args.size, args.hours, args.seed)
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
                         decided=None)
            base += len(fresh)
            clock = time.process_time()
            found = program._rules(whole, lane, previous, state)
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
