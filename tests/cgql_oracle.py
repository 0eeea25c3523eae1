"""Brute-force CGQL oracles and random snapshot sequences for the CGQL tests.

Each oracle recomputes a pattern on every snapshot from scratch with plain
Python and NetworkX (row-by-row predicates, ``nx.descendants``,
``nx.connected_components``, ``nx.diameter``) and re-derives the events from
the rules written in :mod:`hatrick.cgql.patterns`, independently of its
vectorised code. Events are compared as canonical tuples per snapshot time.
"""
from __future__ import annotations

import operator

import networkx as nx
import numpy as np
import pandas as pd

from hatrick.cgql import PandasView

OPS = {"=": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt,
       ">=": operator.ge}


def random_views(seed: int, steps: int = 8, n: int = 24, m: int = 30, directed: bool = True, start: float = 0.0,
                 first_seq: int = 0):
    """A sequence of snapshots of one evolving graph: vertices come and go, usage/age/city change,
    edges (type follow/power/message) are added and removed."""
    rng = np.random.default_rng(seed)
    ids = np.arange(n)
    usage = rng.integers(0, 40, n)
    age = rng.integers(15, 60, n)
    city = rng.choice(["London", "Paris", "Delhi"], n)
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    kind = rng.choice(["follow", "power", "message"], m)
    alive = rng.random(n) < 0.9
    views = []
    for t in range(steps):
        if t:
            change = rng.random(n) < 0.3
            usage = np.where(change, rng.integers(0, 40, n), usage)
            age = np.where(rng.random(n) < 0.1, rng.integers(15, 60, n), age)
            alive = np.where(rng.random(n) < 0.1, ~alive, alive)
            replace = rng.random(m) < 0.25
            src = np.where(replace, rng.integers(0, n, m), src)
            dst = np.where(replace, rng.integers(0, n, m), dst)
            kind = np.where(replace, rng.choice(["follow", "power", "message"], m), kind)
        vertices = pd.DataFrame({"id": ids[alive], "name": [f"v{i}" for i in ids[alive]], "usage": usage[alive],
                                 "age": age[alive], "city": city[alive]})
        keep = alive[src] & alive[dst]
        edges = pd.DataFrame({"src": src[keep], "dst": dst[keep], "type": kind[keep]})
        views.append(PandasView(start + t, first_seq + t, vertices, edges, directed))
    return views


def matches(row: dict, conditions) -> bool:
    """conditions: [(attribute, op, value)]; op "in" takes a collection."""
    for attribute, op, value in conditions:
        v = row[attribute]
        if op == "in":
            if v not in value:
                return False
        elif not OPS[op](v, value):
            return False
    return True


def _rows(view):
    return {r["id"]: r for r in view.vertices().to_dict("records")}


def _edges(view, edge_types):
    return [(r["src"], r["dst"]) for r in view.edges().to_dict("records")
            if edge_types is None or r["type"] in edge_types]


# Reach -----------------------------------------------------------------------------
def reach_events(views, source, sink, edge_types, directed=True):
    """[(time, status, source, sink)] by recomputing reachable pairs on every snapshot."""
    events, before = [], None
    for view in views:
        rows = _rows(view)
        g = nx.DiGraph() if directed else nx.Graph()
        g.add_nodes_from(rows)
        g.add_edges_from(e for e in _edges(view, edge_types) if e[0] in rows and e[1] in rows)
        sources = [v for v, r in rows.items() if matches(r, source)]
        sinks = {v for v, r in rows.items() if matches(r, sink)}
        pairs = {(s, t) for s in sources for t in (nx.descendants(g, s) & sinks) if s != t}
        old = before or set()
        events += [(view.time, "reachable", s, t) for s, t in sorted(pairs - old)]
        events += [(view.time, "unreachable", s, t) for s, t in sorted(old - pairs)]
        before = pairs
    return events


# Cluster ----------------------------------------------------------------------------
def _aggregate(rows, members, g, name):
    if name == "size" or name == "count":
        return len(members)
    if name == "diameter":
        return nx.diameter(g.subgraph(members))
    function, attribute = name.split("_", 1)
    values = [rows[v][attribute] for v in members]
    return {"sum": sum, "min": min, "max": max}[function](values)


def cluster_states(views, members_cond, edge_types, aggregates, min_size=2):
    """Per snapshot: {cluster id: (frozenset members, reported, {aggregate: value})}, ids tracked by
    the best-parent/best-child overlap rule. ``aggregates``: [(name, op, value)], name like
    "sum_usage", "diameter", "count"."""
    states, prev, next_id = [], None, 0
    for view in views:
        rows = _rows(view)
        members = {v for v, r in rows.items() if matches(r, members_cond)}
        g = nx.Graph()
        g.add_nodes_from(members)
        g.add_edges_from(e for e in _edges(view, edge_types) if e[0] in members and e[1] in members)
        groups = [frozenset(c) for c in nx.connected_components(g) if len(c) >= min_size]
        groups.sort(key=min)
        ids = [None] * len(groups)
        if prev:
            overlap = {(p, q): len(pm & groups[q]) for p, (pm, _, _) in prev.items() for q in range(len(groups))
                       if pm & groups[q]}
            for q in range(len(groups)):
                cands = [(w, -p) for (p, qq), w in overlap.items() if qq == q]
                if not cands:
                    continue
                p = -max(cands)[1]
                kids = [(w, -qq) for (pp, qq), w in overlap.items() if pp == p]
                if -max(kids)[1] == q:
                    ids[q] = p
        state = {}
        for q, group in enumerate(groups):
            if ids[q] is None:
                ids[q] = next_id
                next_id += 1
            values = {name: _aggregate(rows, group, g, name) for name, _, _ in aggregates}
            reported = all(OPS[op](values[name], bound) for name, op, bound in aggregates)
            parents = sorted(p for p, (pm, _, _) in (prev or {}).items() if pm & group)
            state[ids[q]] = (group, reported, values, parents)
        # children of each previous group, by current id
        children = {p: [cid for cid, (_, _, _, ps) in state.items() if p in ps] for p in (prev or {})}
        states.append((view.time, state, children))
        prev = {cid: (group, reported, values) for cid, (group, reported, values, _) in state.items()}
    return states


def cluster_events(views, members_cond, edge_types, aggregates, grow_factor=1.5):
    """[(time, status, cluster id, sorted members, parents)] from :func:`cluster_states`."""
    events, before, event_size = [], None, {}
    for time, state, children in cluster_states(views, members_cond, edge_types, aggregates):
        was = {cid for cid, (_, rep, _, _) in before.items() if rep} if before is not None else set()
        absorbed = set()
        now_reported = set()
        for cid, (group, reported, values, parents) in sorted(state.items()):
            if not reported:
                continue
            now_reported.add(cid)
            if before is None or not parents:
                status = "created"
            elif len(parents) >= 2:
                status = "merged"
            elif len(children[parents[0]]) >= 2:
                status = "split"
            elif cid not in was:
                status = "created"
            elif len(group) >= grow_factor * event_size.get(cid, len(group)):
                status = "grew"
            else:
                continue
            if status in ("merged", "split"):
                absorbed.update(parents)
            event_size[cid] = len(group)
            events.append((time, status, cid, tuple(sorted(group)),
                           tuple(parents) if status in ("merged", "split") else ()))
        for cid in sorted(was - now_reported - absorbed):
            events.append((time, "disappeared", cid, tuple(sorted(before[cid][0])), ()))
        before = state
    return events


def evolved_events(views, members_cond, edge_types, aggregates, where, relation=None):
    """[(time, cluster id)] of Evolved(alias) over the alias Cluster(members_cond, aggregates)."""
    events, first_reported, first_satisfied, before = [], {}, {}, set()
    states = cluster_states(views, members_cond, edge_types, aggregates)
    for view, (time, state, _) in zip(views, states):
        rows = _rows(view)
        g = nx.Graph()
        g.add_edges_from(_edges(view, edge_types))
        first_reported = {c: t for c, t in first_reported.items() if c in state}
        first_satisfied = {c: t for c, t in first_satisfied.items() if c in state}
        qualifying = set()
        for cid, (group, reported, _, _) in state.items():
            if reported:
                first_reported.setdefault(cid, time)
            sub = g.subgraph(group)
            ok = all(OPS[op](_aggregate(rows, group, sub, name), bound) for name, op, bound in where)
            if ok:
                first_satisfied.setdefault(cid, time)
            rep = first_reported.get(cid)
            if rep is None:
                continue
            if relation is None and ok or relation == "succeeds" and ok and rep < time:
                qualifying.add(cid)
            elif relation == "predates" and first_satisfied.get(cid, np.inf) < rep:
                qualifying.add(cid)
        events += [(time, cid) for cid in sorted(qualifying - before)]
        before = qualifying
    return events
