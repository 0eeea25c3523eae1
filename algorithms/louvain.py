"""Partitioned Louvain community detection, sub-graph-centric.

Wickramaarachchi, Frincu, Small and Prasanna, "Fast Parallel Algorithm for
Unfolding of Communities in Large Graphs", IEEE HPEC 2014, after Blondel et
al., "Fast unfolding of communities in large networks", J. Stat. Mech. (2008):

All of it runs as one resident Gopher run (:class:`LouvainProgram`) while the collapsed
graph fits one task:

1. *Level 1, in parallel.* Every sub-graph (a weakly connected piece of its
   GoFS partition's local edges, so this is "each partition, ignoring cut
   edges") runs one Louvain level, local moving to convergence, with a numba
   kernel (``algorithms/louvain_kernels.py``), in one Gopher superstep. Its
   communities get global ids: the sub-graph's first vertex id plus the local
   community index (unique, because a sub-graph owns a contiguous id range).
2. *Collapse.* Sub-graphs send their neighbours the level-1 communities of their
   boundary vertices; each maps its edges (a cut edge on the side that stores it)
   to pairs of communities and sums them: a community's internal weight becomes its
   self-loop, the cut edges the edges between communities. Collapsing keeps
   modularity exactly, so every later level's modularity is that of the original graph.
3. *Further levels.* If the collapsed graph has at most ``driver_budget_edges``
   edges, the sub-graphs send it to one task, which runs igraph's multilevel for
   the remaining levels and broadcasts the result. Otherwise the run stops after
   level 1 and the levels go on on Spark: collapsed with Spark joins, partitioned
   again (partitions merged in pairs along their heaviest cut, each merged group
   running Louvain) until the graph fits, then collected to the driver.
4. *Refinement* (``refine=True``). Every vertex with a cut edge moves once to
   the neighbouring final community with the best modularity gain; the moves
   are kept only if the whole graph's modularity rises. Measured on LFR 100k,
   8 partitions: mu 0.5 goes from 0.8% below igraph to 0.2% above it; mu 0.1
   and 0.3 barely change (their gap is already under 0.03%). Moving the same
   vertices right after level 1 instead helped less (0.8% -> 0.6% at mu 0.5).
5. *Leiden's second iteration* (``method="leiden"``, instead of 4). Every sub-graph moves
   its vertices from the final communities against its neighbours' (fixed), splits each
   community into refined connected units, and steps 2-3 run again on the units, igraph's
   Leiden starting from their communities; kept only if modularity rises. At 100k, mu 0.5,
   it took Leiden from 1.25% below igraph's Leiden to 0.08% below (level 1 ignores the 43%
   of edges that are cut; this is where they first count at the vertex level).

Graphs are treated as undirected: a directed edge u->v adds its weight to the
undirected pair {u, v} (so u->v and v->u are summed), parallel edges are
summed, and a self-loop of weight w adds 2w to its vertex's degree, as in
NetworkX. Modularity follows ``networkx.community.modularity``:
``Q = sum_c L_c / m - resolution * (d_c / 2m) ** 2``.
"""
from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql import Window
from pyspark.sql import functions as F

from algorithms.louvain_kernels import local_moving, moving_from
from algorithms.registry import Algorithm, Flag, GraphFramesMethod, NetworkX, register
from algorithms.weights import reject_bad_weights
from gofs.errors import InputError
from gopher.engine import RunResult, run_program
from gopher.program import SubgraphProgram

__all__ = ["LouvainProgram", "LouvainResult", "connected_pieces", "leiden", "louvain", "louvain_membership",
           "modularity", "nmi", "seeded_igraph_random", "subgraph_seed"]

_NUMERIC_TYPES = {"double", "float", "halffloat", "int8", "int16", "int32", "int64",
                  "uint8", "uint16", "uint32", "uint64"}
_DRIVER_STREAM, _SUBGRAPH_STREAM, _GROUP_STREAM, _MOVES_STREAM, _REFINE_STREAM = 0, 1, 2, 3, 4


# --------------------------------------------------------------------------- kernels

def _stream_seed(seed: int, *key: int) -> int:
    """A 32-bit seed for one independent random stream, derived from the user's ``seed``."""
    return int(np.random.SeedSequence([seed, *key]).generate_state(1)[0])


def subgraph_seed(seed: int, subgraph_id: int) -> int:
    """The seed level 1 uses for sub-graph ``subgraph_id`` (a test reproduces a sub-graph's run with it)."""
    return _stream_seed(seed, _SUBGRAPH_STREAM, subgraph_id)


@contextlib.contextmanager
def seeded_igraph_random(seed: int):
    """igraph draws from Python's ``random`` module; give it a private seeded generator
    for the duration, so results are reproducible and the process's global state is untouched."""
    import random

    import igraph as ig

    ig.set_random_number_generator(random.Random(seed))
    try:
        yield
    finally:
        ig.set_random_number_generator(random)


def louvain_membership(n: int, src: np.ndarray, dst: np.ndarray, weight: np.ndarray, resolution: float,
                       seed: int, all_levels: bool = False, method: str = "louvain",
                       initial: np.ndarray | None = None):
    """Sequential Louvain or Leiden (igraph's C kernels) on an undirected weighted edge list
    over ``n`` vertices.

    Returns the final membership (int64, dense 0..k-1), or with ``all_levels`` the list of
    every level's membership (empty when no level improves modularity). Leiden (Traag,
    Waltman and van Eck 2019, modularity objective, igraph's default two iterations as its
    peer runs it: iterating until stable took 93% of a 1M run for under 0.1% of modularity at
    100k) has one "level": its final communities, each split into its connected pieces (igraph
    guarantees that from singletons, not from an ``initial`` membership it improves).
    """
    import igraph as ig

    identity = np.arange(n, dtype=np.int64)
    if n == 0 or len(src) == 0 or not np.any(weight > 0):
        return [] if all_levels else identity
    graph = ig.Graph(n=n, edges=np.column_stack([src, dst]).astype(np.int64), directed=False)
    weights = np.asarray(weight, dtype=np.float64).tolist()
    with seeded_igraph_random(seed):
        if method == "leiden":
            # node weights given explicitly: igraph's default leaves self-loops (collapsed
            # communities) out of the degrees, which is not modularity's null model
            start = None if initial is None else np.unique(initial, return_inverse=True)[1].tolist()
            found = graph.community_leiden(objective_function="modularity", weights=weights,
                                           node_weights=graph.strength(weights=weights), resolution=resolution,
                                           n_iterations=2, initial_membership=start)
            memberships = [connected_pieces(np.asarray(found.membership, dtype=np.int64), src, dst)]
        else:
            levels = graph.community_multilevel(weights=weights, return_levels=True, resolution=resolution)
            memberships = [np.asarray(level.membership, dtype=np.int64) for level in levels]
    if method == "leiden" and len(np.unique(memberships[0])) == n:
        memberships = []                 # nothing merged: no level
    if all_levels:
        return memberships
    return memberships[-1] if memberships else identity


def nmi(labels_a: np.ndarray, labels_b: np.ndarray) -> float:
    """Normalised mutual information of two labellings (arithmetic-mean normalisation,
    as igraph's ``compare_communities(method="nmi")`` and scikit-learn's default)."""
    n = len(labels_a)
    _, a = np.unique(labels_a, return_inverse=True)
    _, b = np.unique(labels_b, return_inverse=True)
    pairs, counts = np.unique(a.astype(np.int64) * (int(b.max()) + 1) + b, return_counts=True)
    share_a, share_b = np.bincount(a) / n, np.bincount(b) / n
    joint = counts / n
    ia, ib = np.divmod(pairs, int(b.max()) + 1)
    mutual = float(np.sum(joint * np.log(joint / (share_a[ia] * share_b[ib]))))
    ha, hb = -float(np.sum(share_a * np.log(share_a))), -float(np.sum(share_b * np.log(share_b)))
    return 1.0 if ha + hb == 0 else 2.0 * mutual / (ha + hb)


def connected_pieces(membership: np.ndarray, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """``membership`` with every community split into its connected pieces (dense 0..k-1).
    Splitting a disconnected community keeps its internal edges and lowers the degree
    penalty (``(a + b)^2 > a^2 + b^2``), so modularity never drops."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import connected_components

    n = len(membership)
    inside = membership[src] == membership[dst]
    graph = sp.csr_matrix((np.ones(int(inside.sum())), (src[inside], dst[inside])), shape=(n, n))
    return connected_components(graph, directed=False)[1].astype(np.int64)


def modularity(membership: np.ndarray, src: np.ndarray, dst: np.ndarray, weight: np.ndarray,
               resolution: float = 1.0) -> float:
    """NetworkX's modularity of ``membership`` on an undirected weighted edge list
    (self-loops count once in ``L_c`` and twice in the degree); NaN for a graph of total weight 0."""
    m = float(weight.sum())
    if m == 0:
        return math.nan
    ca, cb = membership[src], membership[dst]
    k = int(membership.max()) + 1 if len(membership) else 0
    degree = np.bincount(ca, weight, k) + np.bincount(cb, weight, k)
    return float(weight[ca == cb].sum() / m - resolution * np.dot(degree, degree) / (4.0 * m * m))


# --------------------------------------------------------------------------- one resident Gopher run

def _group_sum(a: np.ndarray, b: np.ndarray, w: np.ndarray):
    """The distinct (a, b) pairs in (a, b) order with their weights summed (sort + reduceat)."""
    if len(a) == 0:
        return a, b, w
    order = np.lexsort((b, a))
    a, b, w = a[order], b[order], w[order]
    starts = np.flatnonzero(np.r_[True, (a[1:] != a[:-1]) | (b[1:] != b[:-1])])
    return a[starts], b[starts], np.add.reduceat(w, starts)


def _send_boundary_labels(subgraph, ctx, labels: np.ndarray, only: np.ndarray | None = None) -> None:
    """Send every neighbouring sub-graph (global vertex id, label) of this sub-graph's vertices
    that have an edge to it (``only``: a mask of the local vertices worth sending)."""
    remote = subgraph.remote_edges
    rows = np.arange(len(remote)) if only is None else np.flatnonzero(only[remote.src])
    if len(rows) == 0:
        return
    target, local = _group_sum(remote.dst_subgraph[rows], remote.src[rows], np.zeros(len(rows)))[:2]
    bounds = np.flatnonzero(np.r_[True, target[1:] != target[:-1], True])
    payloads = [(subgraph.vertex_ids[local[i:j]], labels[local[i:j]]) for i, j in zip(bounds[:-1], bounds[1:])]
    ctx.send_to_subgraphs(target[bounds[:-1]], payloads)


def _received_labels(messages, wanted: np.ndarray, labels: np.ndarray | None = None) -> np.ndarray:
    """Labels of the global vertex ids ``wanted`` from the (ids, labels) payloads received; ids not
    received keep their entry of ``labels`` (all must be received when ``labels`` is None)."""
    pairs = [p for p, sender in zip(messages.payloads, messages.senders) if sender >= 0]
    ids = np.concatenate([p[0] for p in pairs]) if pairs else np.empty(0, np.int64)
    values = np.concatenate([p[1] for p in pairs]) if pairs else np.empty(0, np.int64)
    order = np.argsort(ids)
    ids, values = ids[order], values[order]
    at = np.minimum(np.searchsorted(ids, wanted), max(len(ids) - 1, 0))
    found = ids[at] == wanted if len(ids) else np.zeros(len(wanted), bool)
    out = np.empty(len(wanted), np.int64) if labels is None else labels.copy()
    out[found] = values[at[found]]
    return out


def _best_moves(labels, remote_labels, subgraph, w, remote_w, sigma, m: float, resolution: float):
    """Refinement moves of one sub-graph, all at once: every vertex with a cut edge goes to the
    neighbouring community with the best positive modularity gain (Blondel et al.'s
    ``(k_vC - k_vA) / m - gamma * k_v * (S_C - S_A + k_v) / (2 m^2)``: ``S`` total degrees,
    ``k_vA`` the weight to its own community without it; ties: the smallest id).
    Returns (new labels, degree of every local vertex)."""
    n, src, dst, remote = subgraph.num_vertices, subgraph.edge_src, subgraph.edge_dst, subgraph.remote_edges
    degree = np.bincount(src, w, n) + np.bincount(dst, w, n) + np.bincount(remote.src, remote_w, n)
    mover = np.bincount(remote.src, minlength=n) > 0
    keep_a, keep_b = mover[src] & (src != dst), mover[dst] & (src != dst)
    v, to, k_to = _group_sum(np.concatenate([src[keep_a], dst[keep_b], remote.src]),
                             np.concatenate([labels[dst[keep_a]], labels[src[keep_b]], remote_labels]),
                             np.concatenate([w[keep_a], w[keep_b], remote_w]))
    own = labels[v]
    k_own = np.bincount(v[to == own], k_to[to == own], n)[v]
    gain = (k_to - k_own) / m - resolution * degree[v] * (sigma[to] - sigma[own] + degree[v]) / (2 * m * m)
    better = (to != own) & (gain > 0)
    v, to, gain = v[better], to[better], gain[better]
    order = np.lexsort((to, -gain, v))
    first = order[np.r_[True, v[order][1:] != v[order][:-1]]] if len(order) else order
    moved = labels.copy()
    moved[v[first]] = to[first]
    return moved, degree


def _broadcast(messages):
    """The payload the gatherer sent to every sub-graph."""
    return next(p for p, s in zip(messages.payloads, messages.senders) if s < 0)


def _first_value():
    from gopher.aggregators import Aggregator

    return Aggregator(lambda a, b: a if a is not None else b)


class LouvainProgram(SubgraphProgram):
    """Partitioned Louvain (or Leiden) as one resident Gopher run, no Spark join in it:

    0. level 1 on every sub-graph (cut edges ignored); its communities are the sub-graph's
       *units*, and each sends its neighbours the units of its boundary vertices;
    1. each sub-graph collapses its edges, cut ones included (each counted on its own side),
       to weighted edges between units;
    2. if the collapsed graph fits ``budget`` edges, every sub-graph sends its part to one
       sub-graph (the smallest id) ...
    3. ... which runs the remaining levels and broadcasts each unit's final community with
       the final communities' total degrees;
    4-6. Louvain with ``refine``: every vertex with a cut edge moves once to its best
       neighbouring community (all at once); the neighbours learn the moves, the sub-graphs
       sum the new internal weight, and the master keeps the moves only if modularity rises.
    4-8. Leiden: a second iteration, as Leiden's own (Traag et al.: local moving from the
       current partition, refinement, aggregation of the refined partition started from the
       unrefined one). Every sub-graph moves its vertices from the final communities, its
       neighbours' vertices held fixed, so the cut edges level 1 ignored now count; splits
       each community into refined units (local moving inside it, then connected pieces);
       steps 1-3 run again on those units, igraph's Leiden starting from each unit's community;
       the gatherer keeps the result only if modularity rises, and step 8 applies it (the
       master stops after step 4 when no vertex moved).

    When the collapsed graph does not fit, the run stops after step 1 and :func:`louvain`
    goes on from ``c1`` on Spark (Leiden's second iteration is then left out, as it is
    when its units do not fit). ``summary`` (on the driver) holds what the master learned.
    """

    output_schema = {"community": pa.int64(), "c1": pa.int64(), "partition": pa.int32()}

    def __init__(self, weight: str | None, resolution: float, seed: int, method: str, budget: int, refine: bool):
        self.weight, self.resolution, self.seed, self.method = weight, resolution, seed, method
        self.budget, self.refine = budget, refine
        self.edge_attributes = (weight,) if weight else ()
        self.aggregators = {"communities": "sum", "gatherer": "min", "collapsed": "sum", "levels": _first_value(),
                            "moved": "sum", "sigma_change": "sum", "members": "sum", "internal": "sum"}
        self.summary: dict = {}

    def _weights(self, subgraph):
        if self.weight is None:
            return np.ones(subgraph.num_edges), np.ones(len(subgraph.remote_edges))
        return (subgraph.edge_attribute(self.weight).astype(np.float64),
                subgraph.remote_edges.attribute(self.weight).astype(np.float64))

    def compute(self, subgraph, messages, ctx):
        step, state = ctx.superstep, subgraph.state
        second = self.method == "leiden" and step >= 4      # Leiden's second iteration: steps 1-3 again
        phase = step - 4 if second else step
        if step == 0:
            self._level_1(subgraph, ctx)
        elif phase == 0:
            self._leiden_units(subgraph, _broadcast(messages), ctx)
        elif phase == 1:
            state["remote_units"] = _received_labels(messages, subgraph.remote_edges.dst)
            self._collapse(subgraph, ctx)
        elif phase == 2:
            ctx.send_to_subgraph(ctx.globals["gatherer"], state.pop("collapsed"))
        elif phase == 3 and messages.payloads:
            self._further_levels(subgraph, messages.payloads, ctx, second)
        elif phase == 4:
            self._final_labels(subgraph, _broadcast(messages), ctx)
        elif phase == 5:
            moved = _received_labels(messages, subgraph.remote_edges.dst, state["remote_community"])
            labels, (w, remote_w) = state["moved"], self._weights(subgraph)
            outgoing = ~subgraph.remote_edges.incoming
            same = labels[subgraph.remote_edges.src] == moved
            ctx.aggregate("internal", float(w[labels[subgraph.edge_src] == labels[subgraph.edge_dst]].sum()
                                            + remote_w[outgoing & same].sum()))
        elif phase == 6 and ctx.globals["keep"]:
            state["community"] = ctx.globals["renumber"][state["moved"]]

    def _level_1(self, subgraph, ctx):
        membership = local_moving(subgraph.num_vertices, subgraph.edge_src, subgraph.edge_dst,
                                  self._weights(subgraph)[0], self.resolution, subgraph_seed(self.seed, subgraph.id))
        if self.method == "leiden":
            membership = connected_pieces(membership, subgraph.edge_src, subgraph.edge_dst)
        subgraph.state["c1"] = subgraph.state["units"] = subgraph.state["community"] = \
            subgraph.first_vertex_id + membership
        ctx.aggregate("communities", int(membership.max()) + 1 if len(membership) else 0)
        ctx.aggregate("gatherer", subgraph.id)
        _send_boundary_labels(subgraph, ctx, subgraph.state["c1"])

    def _leiden_units(self, subgraph, broadcast, ctx):
        """Leiden's second iteration on this sub-graph: its vertices move from the final
        communities (neighbours in other sub-graphs fixed at theirs, every community's total
        degree from the broadcast), then each community splits into refined units: local
        moving among its members only (each paying for its whole degree), then connected pieces."""
        self._final_labels(subgraph, broadcast, ctx)
        nodes, final, sigma, total = broadcast
        state, remote = subgraph.state, subgraph.remote_edges
        if total == 0:
            return
        src, dst, n = subgraph.edge_src, subgraph.edge_dst, subgraph.num_vertices
        w, remote_w = self._weights(subgraph)
        fixed = (remote.src, final[np.searchsorted(nodes, state["remote_units"])], remote_w)
        moved = moving_from(state["community"], sigma, src, dst, w, fixed,
                            self.resolution, _stream_seed(self.seed, _MOVES_STREAM, subgraph.id), 2 * total)
        inside = moved[src] == moved[dst]
        degree = np.bincount(src, w, n) + np.bincount(dst, w, n) + np.bincount(remote.src, remote_w, n)
        refined = local_moving(n, src[inside], dst[inside], w[inside], self.resolution,
                               _stream_seed(self.seed, _REFINE_STREAM, subgraph.id), degree, 2 * total)
        units = connected_pieces(refined, src, dst)
        state["unit_community"] = np.zeros(int(units.max()) + 1 if n else 0, np.int64)
        state["unit_community"][units] = moved
        state["units"] = subgraph.first_vertex_id + units
        ctx.aggregate("moved", int(np.count_nonzero(moved != state["community"])))
        _send_boundary_labels(subgraph, ctx, state["units"])

    def _collapse(self, subgraph, ctx):
        units, remote = subgraph.state["units"], subgraph.remote_edges
        w, remote_w = self._weights(subgraph)
        out = ~remote.incoming
        a = np.concatenate([units[subgraph.edge_src], units[remote.src[out]]])
        b = np.concatenate([units[subgraph.edge_dst], subgraph.state["remote_units"][out]])
        a, b, w = _group_sum(np.minimum(a, b), np.maximum(a, b), np.concatenate([w, remote_w[out]]))
        count = int(units.max() - subgraph.first_vertex_id) + 1 if len(units) else 0
        subgraph.state["collapsed"] = (subgraph.first_vertex_id, count, a, b, w,
                                       subgraph.state.pop("unit_community", None))
        ctx.aggregate("collapsed", len(a))
        ctx.aggregate("communities", count)

    def _further_levels(self, subgraph, parts, ctx, second: bool):
        """The levels on the collapsed graph (one task). In Leiden's second iteration, igraph's
        Leiden starts from each unit's community, and its result is broadcast only if it beats
        the first iteration's modularity (else None: every sub-graph keeps its communities)."""
        parts = sorted(parts, key=lambda part: part[0])
        nodes = np.concatenate([first + np.arange(count, dtype=np.int64) for first, count, *_ in parts])
        a, b, w = _group_sum(*(np.concatenate([p[k] for p in parts]) for k in (2, 3, 4)))
        initial = np.concatenate([p[5] for p in parts]) if second else None
        memberships, ia, ib, w = _driver_levels(nodes, a, b, w, self.resolution, self.seed, 2 if second else 1,
                                                self.method, initial)
        final = memberships[-1] if memberships else np.arange(len(nodes))
        total = float(w.sum())
        sigma = np.bincount(final[ia], w, len(nodes)) + np.bincount(final[ib], w, len(nodes))
        sigma = sigma[:int(final.max()) + 1 if len(final) else 0]
        levels = [np.arange(len(nodes)), *memberships]
        quality = [modularity(mb, ia, ib, w, self.resolution) for mb in levels]
        if second:
            better = quality[-1] > subgraph.state["modularity"]
            ctx.aggregate("levels", {"modularity": quality[-1], "size": int(final.max()) + 1} if better else None)
            ctx.send_to_all((nodes, final, sigma, total) if better else None)
            return
        subgraph.state["modularity"] = quality[-1]
        ctx.aggregate("levels", {"nodes": nodes, "memberships": memberships, "sigma": sigma, "total": total,
                                 "modularity": quality,
                                 "level_sizes": [len(nodes)] + [int(mb.max()) + 1 for mb in memberships]})
        ctx.send_to_all((nodes, final, sigma, total))

    def _final_labels(self, subgraph, broadcast, ctx):
        if broadcast is None:            # Leiden's second iteration did not raise modularity
            return
        nodes, final, sigma, total = broadcast
        state = subgraph.state
        state["community"] = final[np.searchsorted(nodes, state["units"])]
        if not (self.refine and total > 0):
            ctx.aggregate("moved", 0)
            return
        state["remote_community"] = final[np.searchsorted(nodes, state["remote_units"])]
        moved, degree = _best_moves(state["community"], state["remote_community"], subgraph,
                                    *self._weights(subgraph), sigma, total, self.resolution)
        changed = moved != state["community"]
        state["moved"] = moved
        k = len(sigma)
        ctx.aggregate("moved", int(changed.sum()))
        ctx.aggregate("sigma_change", np.bincount(moved[changed], degree[changed], k)
                      - np.bincount(state["community"][changed], degree[changed], k))
        ctx.aggregate("members", np.bincount(moved, minlength=k))
        _send_boundary_labels(subgraph, ctx, moved, only=changed)

    def master(self, ctx):
        step, agg, summary = ctx.superstep, ctx.aggregated, self.summary
        leiden = self.method == "leiden"
        if step == 0:
            ctx.globals["gatherer"] = agg["gatherer"]
            summary["communities"] = agg["communities"]
        elif step == 1:
            summary["gathered"] = max(agg["collapsed"], summary["communities"]) <= self.budget
            if not summary["gathered"]:
                ctx.halt()
        elif step == 3:
            summary.update(agg["levels"])
        elif step == 4:
            summary["moved"] = agg["moved"]
            self._moves = (agg["sigma_change"], agg["members"]) if agg["moved"] else None
            if not agg["moved"]:
                ctx.halt()
        elif leiden and step == 5:
            if max(agg["collapsed"], agg["communities"]) > self.budget:
                ctx.halt()               # the units do not fit one task: the first iteration's result stands
        elif leiden and step == 7 and agg["levels"] is not None:
            summary["modularity"][-1] = agg["levels"]["modularity"]
            summary["level_sizes"][-1] = agg["levels"]["size"]
        elif not leiden and step == 5:
            sigma_change, members = self._moves
            m, sigma = summary["total"], summary["sigma"] + sigma_change
            q = agg["internal"] / m - self.resolution * float(np.dot(sigma, sigma)) / (4 * m * m)
            keep = q > summary["modularity"][-1]
            ctx.globals["keep"] = keep
            if keep:
                ctx.globals["renumber"] = np.cumsum(members > 0) - 1
                summary["modularity"][-1] = q
                summary["level_sizes"][-1] = int(np.count_nonzero(members))
        elif (step == 6 and not leiden) or step == 8:
            ctx.halt()

    def output(self, subgraph):
        return {"community": subgraph.state["community"], "c1": subgraph.state["c1"],
                "partition": np.full(subgraph.num_vertices, subgraph.partition, dtype=np.int32)}


# --------------------------------------------------------------------------- result

@dataclass
class LouvainResult(RunResult):
    """A RunResult whose ``dataframe`` has ``id``, ``community`` (final level, 0..k-1) and, when
    asked, ``level_1``, ``level_2``, ...; ``modularity[i]`` is level i+1's modularity on the
    whole graph (NetworkX's formula); ``level_sizes[i]`` its number of communities;
    ``partitioned_levels`` how many levels after the first ran partitioned on Spark (the
    rest ran on the driver); ``seconds`` times the phases."""

    modularity: list = field(default_factory=list)
    seconds: dict = field(default_factory=dict)
    level_sizes: list = field(default_factory=list)
    partitioned_levels: int = 0


# --------------------------------------------------------------------------- collapsing on Spark

def _collapse(edges, mapping, old: str = "c", new: str = "next"):
    """Edges (a, b, w) between communities ``old`` -> edges between ``new`` ids (a <= b, weights summed)."""
    src = mapping.select(F.col(old).alias("a"), F.col(new).alias("na"))
    dst = mapping.select(F.col(old).alias("b"), F.col(new).alias("nb"))
    joined = edges.join(src, "a").join(dst, "b")
    return (joined.select(F.least("na", "nb").alias("a"), F.greatest("na", "nb").alias("b"), "w")
            .groupBy("a", "b").agg(F.sum("w").alias("w")))


def _modularity_spark(edges, m: float, resolution: float) -> float:
    """Modularity of the identity partition of a collapsed graph (a, b, w), on Spark."""
    if m == 0:
        return math.nan
    internal = edges.agg(F.sum(F.when(F.col("a") == F.col("b"), F.col("w")).otherwise(0.0))).first()[0] or 0.0
    ends = edges.select(F.col("a").alias("c"), "w").unionAll(edges.select(F.col("b").alias("c"), "w"))
    squares = ends.groupBy("c").agg(F.sum("w").alias("d")).agg(F.sum(F.col("d") * F.col("d"))).first()[0] or 0.0
    return float(internal / m - resolution * squares / (4.0 * m * m))


def _pair_partitions(num_groups: int, cut_a: np.ndarray, cut_b: np.ndarray, cut_w: np.ndarray) -> np.ndarray:
    """Merge groups in pairs along their heaviest cut weight (greedy matching); unmatched groups
    pair up in id order. Returns the new group of every old group (dense, about half as many)."""
    new = np.full(num_groups, -1, dtype=np.int64)
    order = np.lexsort((cut_b, cut_a, -cut_w))
    nxt = 0
    for i in order:                      # one entry per pair of groups, not per vertex or edge
        a, b = int(cut_a[i]), int(cut_b[i])
        if a != b and new[a] < 0 and new[b] < 0:
            new[a] = new[b] = nxt
            nxt += 1
    left = np.flatnonzero(new < 0)
    for i in range(0, len(left), 2):
        new[left[i:i + 2]] = nxt
        nxt += 1
    return new


def _group_level_function(resolution: float, seed: int, level: int, method: str):
    """applyInPandas function: Louvain on one merged group's community graph. Rows with b < 0
    list the group's communities; the others are its internal edges. Returns (c, next, part)
    where ``next`` is the smallest member id of c's new community (globally unique)."""

    def run(frame):
        group = int(frame["part"].iloc[0])
        nodes = np.unique(frame["a"].to_numpy())
        edges = frame[frame["b"].to_numpy() >= 0]
        a = np.searchsorted(nodes, edges["a"].to_numpy())
        b = np.searchsorted(nodes, edges["b"].to_numpy())
        w = edges["w"].to_numpy(dtype=np.float64)
        order = np.lexsort((b, a))
        membership = louvain_membership(len(nodes), a[order], b[order], w[order], resolution,
                                        _stream_seed(seed, _GROUP_STREAM, level, group), method=method)
        first = np.full(int(membership.max()) + 1 if len(membership) else 0, np.iinfo(np.int64).max)
        np.minimum.at(first, membership, nodes)
        return pd.DataFrame({"c": nodes, "next": first[membership], "part": np.full(len(nodes), group, np.int32)})

    return run


def _partitioned_level(nodes, edges, groups: int, resolution: float, seed: int, level: int, method: str):
    """One level run partitioned again, ``groups`` partitions merged in pairs: the mapping
    (c, next, part) of every community to its new one (lazy), and the new number of groups."""
    tag_a = nodes.select(F.col("c").alias("a"), F.col("part").alias("pa"))
    tag_b = nodes.select(F.col("c").alias("b"), F.col("part").alias("pb"))
    tagged = edges.join(tag_a, "a").join(tag_b, "b")
    cuts = (tagged.where(F.col("pa") != F.col("pb"))
            .groupBy(F.least("pa", "pb").alias("x"), F.greatest("pa", "pb").alias("y"))
            .agg(F.sum("w").alias("w")).toPandas())
    new = _pair_partitions(groups, cuts["x"].to_numpy(np.int64), cuts["y"].to_numpy(np.int64),
                           cuts["w"].to_numpy(np.float64))
    table = F.array(*[F.lit(int(g)) for g in new])

    def regroup(column: str):
        return F.element_at(table, F.col(column) + 1).cast("int")

    internal = (tagged.select(regroup("pa").alias("part"), regroup("pb").alias("other"), "a", "b", "w")
                .where(F.col("part") == F.col("other")).drop("other"))
    rows = nodes.select(regroup("part").alias("part"), F.col("c").alias("a"), F.lit(-1).cast("long").alias("b"),
                        F.lit(0.0).alias("w")).unionByName(internal)
    mapping = rows.groupBy("part").applyInPandas(_group_level_function(resolution, seed, level, method),
                                                 "c long, next long, part int")
    return mapping, int(new.max()) + 1


def _move_cut_vertices(vertices, raw, total: float, resolution: float):
    """Refinement: every vertex with a cut edge moves once, all at the same time, to the
    neighbouring community with the best positive modularity gain (Blondel et al.'s
    ``(k_vC - k_vA) / m - gamma * k_v * (S_C - S_A + k_v) / (2 m^2)``: ``S`` total degrees,
    ``k_vA`` the weight to its own community without it). ``vertices`` is (id, c, part);
    returns (id, c, changed) with the moves applied (lazy) and the degree checkpoint it reads."""
    def ends(a, b):
        return vertices.select(F.col("id").alias(a), F.col("c").alias(f"c_{a}"), F.col("part").alias(f"p_{a}"))

    joined = raw.join(ends("src", "a"), "src").join(ends("dst", "b"), "dst")
    cut, loop = F.col("p_src") != F.col("p_dst"), F.col("src") == F.col("dst")
    halves = joined.select(F.explode(F.array(
        F.struct(F.col("src").alias("v"), F.col("c_src").alias("own"), F.col("c_dst").alias("to")),
        F.struct(F.col("dst").alias("v"), F.col("c_dst").alias("own"), F.col("c_src").alias("to")))).alias("h"),
        "w", cut.alias("cut"), loop.alias("loop")).select("h.*", "w", "cut", "loop")
    # per-vertex degrees are materialised so the joins below do not self-join the generated rows
    degree = (halves.groupBy("v", "own").agg(F.sum("w").alias("k"), F.max(F.col("cut").cast("int")).alias("cut"))
              .localCheckpoint(eager=True))
    sigma = degree.groupBy(F.col("own").alias("community")).agg(F.sum("k").alias("s"))
    # (checkpoints keep their columns' identities: every column joined back is renamed)
    movers = degree.where(F.col("cut") == 1).select(F.col("v").alias("mover"), F.col("k").alias("k"))
    links = (halves.where(~F.col("loop")).join(movers, F.col("v") == F.col("mover"))
             .groupBy("v", "own", "to", "k").agg(F.sum("w").alias("k_to"))
             .withColumn("k_own", F.sum(F.when(F.col("own") == F.col("to"), F.col("k_to")).otherwise(0.0))
                         .over(Window.partitionBy("v"))))
    m = total
    gains = (links.where(F.col("own") != F.col("to"))
             .join(sigma.select(F.col("community").alias("c_to"), F.col("s").alias("s_to")),
                   F.col("to") == F.col("c_to"))
             .join(sigma.select(F.col("community").alias("c_own"), F.col("s").alias("s_own")),
                   F.col("own") == F.col("c_own"))
             .select("v", "to", ((F.col("k_to") - F.col("k_own")) / m - resolution * F.col("k")
                                 * (F.col("s_to") - F.col("s_own") + F.col("k")) / (2 * m * m)).alias("gain"))
             .where(F.col("gain") > 0))
    best = (gains.groupBy("v").agg(F.max(F.struct(F.col("gain").alias("gain"), (-F.col("to")).alias("neg_to")))
                                   .alias("best"))             # the best gain; ties: the smallest id
            .select(F.col("v").alias("id"), (-F.col("best.neg_to")).alias("moved")))
    moved = vertices.join(best, "id", "left").select("id", F.coalesce("moved", "c").alias("c"),
                                                     F.col("moved").isNotNull().alias("changed"))
    return moved, degree


def _partition_modularity(labels, raw, total: float, resolution: float) -> float:
    """NetworkX's modularity of the vertex labelling (id, c) on the edges (src, dst, w), on Spark."""
    ends_a = labels.select(F.col("id").alias("src"), F.col("c").alias("a"))
    ends_b = labels.select(F.col("id").alias("dst"), F.col("c").alias("b"))
    edges = (raw.join(ends_a, "src").join(ends_b, "dst")
             .select(F.least("a", "b").alias("a"), F.greatest("a", "b").alias("b"), "w"))
    return _modularity_spark(edges, total, resolution)


# --------------------------------------------------------------------------- driver levels

def _driver_levels(nodes: np.ndarray, a: np.ndarray, b: np.ndarray, w: np.ndarray, resolution: float,
                   seed: int, level: int, method: str, initial: np.ndarray | None = None):
    """The remaining levels on the driver: (dense level ids of ``nodes`` -> [membership per level]);
    ``initial``: Leiden's starting membership of ``nodes``."""
    order = np.lexsort((b, a))
    ia, ib, w = np.searchsorted(nodes, a[order]), np.searchsorted(nodes, b[order]), w[order]
    memberships = louvain_membership(len(nodes), ia, ib, w, resolution, _stream_seed(seed, _DRIVER_STREAM, level),
                                     all_levels=True, method=method, initial=initial)
    kept, count = [], len(nodes)
    for membership in memberships:
        k = int(membership.max()) + 1
        if k < count:                    # a level that merges nothing is not a level
            kept.append(membership)
            count = k
    return kept, ia, ib, w


def _numpy_columns(frame, columns: list[str]) -> list[np.ndarray]:
    pdf = frame.toPandas()
    return [pdf[c].to_numpy() for c in columns]


# --------------------------------------------------------------------------- output

def _dense_labels_spark(spark, nodes, name: str):
    """Communities renumbered 0..k-1 in id order by prefix sums over Spark partitions (zipWithIndex)."""
    ranked = nodes.select("c").orderBy("c").rdd.zipWithIndex().map(lambda row: (row[0][0], row[1]))
    return spark.createDataFrame(ranked, f"cur long, {name} long")


def _per_vertex(vertices, mappings, labels, per_level, num_levels: int):
    """Join the level-1 labels through every partitioned level's mapping to the final labels:
    (id, part, community, level_k ...). Level k comes from ``c1`` (level 1), ``p<k>`` (a
    partitioned level) or ``d<k>`` (dense labels)."""
    frame = vertices.select("id", "part", "c1", F.col("c1").alias("cur"))
    for i, mapping in enumerate(mappings):
        step = mapping.select(F.col("c").alias("cur"), F.col("next").alias(f"p{i + 2}"))
        frame = frame.join(step, "cur").withColumn("cur", F.col(f"p{i + 2}"))
    frame = frame.join(labels, "cur")
    columns = ["id", "part", F.col(f"d{num_levels}").alias("community")]
    for k in (range(1, num_levels + 1) if per_level is True else per_level or ()):
        source = min(k, num_levels)
        name = f"d{source}" if source > len(mappings) else ("c1" if source == 1 else f"p{source}")
        columns.append(F.col(name).alias(f"level_{k}"))
    return frame.select(*columns)


def _refine_final_level(spark, frame, raw, total, resolution, num_levels, current_q, current_size):
    """Move cut vertices once against the final communities; keep the moves only if the
    whole graph's modularity rises. Returns (frame, modularity, communities, the checkpoint
    to release once the frame is materialised)."""
    # materialised first: Spark 3.5 cannot resolve the later self-joins over a plan that
    # already joins the same relation twice ("Failure when resolving conflicting references")
    labels = frame.select("id", F.col("community").alias("c"), "part").localCheckpoint(eager=True)
    refined, degree = _move_cut_vertices(labels, raw, total, resolution)
    refined = refined.localCheckpoint(eager=True)
    degree.unpersist()
    labels.unpersist()
    stats = refined.agg(F.sum(F.col("changed").cast("long")).alias("moved"),
                        F.countDistinct("c").alias("communities")).first()
    if not stats["moved"]:
        return frame, current_q, current_size, refined
    q = _partition_modularity(refined, raw, total, resolution)
    if not q > current_q:
        return frame, current_q, current_size, refined
    moved = refined.select(F.col("id").alias("moved_id"), F.col("c").alias("refined"))
    if stats["communities"] < current_size:       # a community emptied: renumber by prefix sums
        ranked = refined.select("c").distinct().orderBy("c").rdd.zipWithIndex().map(lambda r: (r[0][0], r[1]))
        dense = spark.createDataFrame(ranked, "c long, refined long")
        moved = refined.join(dense, "c").select(F.col("id").alias("moved_id"), "refined")
    frame = (frame.join(moved, F.col("id") == F.col("moved_id")).drop("moved_id")
             .withColumn("community", F.col("refined")))
    for name in frame.columns:
        if name.startswith("level_") and int(name[len("level_"):]) >= num_levels:
            frame = frame.withColumn(name, F.col("refined"))
    return frame.drop("refined"), q, stats["communities"], refined


# --------------------------------------------------------------------------- public function

_WEIGHT_PROBLEMS = (     # every edge, cut ones included, checked on Spark before level 1
    ("null", "{path}: edge attribute '{weight}' has missing values (partition {partition}, e.g. edge {example})"),
    ("nan", "{path}: edge attribute '{weight}' has NaN values (partition {partition}, e.g. edge {example})"),
    ("negative", "{path}: negative edge weight {low} in '{weight}' (partition {partition}, e.g. edge {example}); "
                 "louvain needs weights >= 0"),
    ("infinite", "{path}: infinite edge weight in '{weight}' (partition {partition}, e.g. edge {example}); "
                 "louvain needs finite weights"),
)


def _check_parameters(store, weight, resolution, seed, levels, driver_budget_edges):
    """Every parameter error (an InputError naming the parameter), raised before any Spark work starts."""
    if weight is not None:
        types = store.attribute_types("edge")
        if weight not in types:
            dynamic = store.instance_edge_attributes
            hint = " (per-instance attributes cannot be Louvain weights)" if weight in dynamic else ""
            raise InputError(f"louvain: weight={weight!r} is not a static edge attribute of {store.path}{hint}; "
                             f"edge attributes: {sorted(types)}")
        if types[weight] not in _NUMERIC_TYPES:
            raise InputError(f"louvain: weight={weight!r} has type {types[weight]}, not a number")
    if isinstance(resolution, bool) or not isinstance(resolution, (int, float)) \
            or not math.isfinite(resolution) or resolution <= 0:
        raise InputError(f"louvain: resolution must be a finite number > 0, got {resolution!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InputError(f"louvain: seed must be an integer >= 0, got {seed!r}")
    if isinstance(driver_budget_edges, bool) or not isinstance(driver_budget_edges, (int, np.integer)) \
            or driver_budget_edges < 1:
        raise InputError(f"louvain: driver_budget_edges must be an integer >= 1, got {driver_budget_edges!r}")
    if levels is None or levels is False:
        return False
    if levels is True:
        return True
    if isinstance(levels, Iterable) and not isinstance(levels, (str, bytes)):
        wanted = list(levels)
        if all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) and x >= 1 for x in wanted):
            return sorted(set(int(x) for x in wanted))
    raise InputError(f"louvain: levels must be None, True or a list of level numbers >= 1, got {levels!r}")


def louvain(store, weight: str | None = None, resolution: float = 1.0, seed: int = 0, levels=None,
            driver_budget_edges: int = 5_000_000, refine: bool = True, method: str = "louvain",
            **engine_options) -> LouvainResult:
    """Louvain communities of a GoFS graph, partitioned as in Wickramaarachchi et al. (2014).

    Parameters
    ----------
    store : GoFS graph (``goffish.open(...)``).
    weight : name of a numeric static edge attribute (finite, >= 0), or None for weight 1.
    resolution : NetworkX's ``resolution`` (gamma > 0): below 1 favours larger communities.
    seed : makes the run deterministic; each sub-graph and level draws its own stream from it.
    levels : None for the final level only; True for every level as ``level_1``, ``level_2``, ...;
        or a list of level numbers (a number past the last level repeats the final communities).
    driver_budget_edges : the collapsed graph is collected to the driver only when it has at
        most this many edges (and communities); until then levels run partitioned on Spark.
    refine : after the final level, move every vertex that has a cut edge once to its best
        neighbouring community, keeping the moves only if modularity rises (see the module
        docstring for what it buys; it costs a few Spark passes over the edges). Not with Leiden.
    method : "louvain" (igraph's multilevel per sub-graph and level) or "leiden" (see :func:`leiden`).
    engine_options : passed to the Gopher engine (``progress``, ``checkpoint_interval``,
        ``instance``: communities of that instance's topology, modularity on its edges).

    Returns
    -------
    LouvainResult: ``dataframe`` (``id`` original vertex id, ``community`` int64 0..k-1,
    optional level columns), ``modularity`` (one value per level, NetworkX's formula on the
    whole graph, directed graphs taken as undirected), ``metrics`` (the level-1 Gopher run),
    ``seconds`` (level 1, collapse, further levels, refine, output), ``level_sizes``,
    ``partitioned_levels``.

    Example
    -------
    >>> result = g.louvain(weight="weight", seed=1)
    >>> result.modularity[-1]
    >>> result.dataframe.groupBy("community").count().show()
    """
    per_level = _check_parameters(store, weight, resolution, seed, levels, driver_budget_edges)
    if method not in ("louvain", "leiden"):
        raise InputError(f"louvain: method must be 'louvain' or 'leiden', got {method!r}")
    refine = refine and method == "louvain"      # moving single vertices could disconnect a Leiden community
    if weight is not None:
        reject_bad_weights(store, weight, _WEIGHT_PROBLEMS, engine_options.get("instance"))
    program = LouvainProgram(weight, resolution, int(seed), method, driver_budget_edges,
                             refine and store.num_partitions > 1)
    clock = time.perf_counter()
    run = run_program(store, program, max_supersteps=9 if method == "leiden" else 7, **engine_options)
    steps = [step.seconds for step in run.metrics.supersteps]
    seconds = {"level_1": steps[0], "collapse": sum(steps[1:3]), "further_levels": sum(steps[3:4]),
               "second_iteration" if method == "leiden" else "refine": sum(steps[4:]),
               "engine": time.perf_counter() - clock - sum(steps)}
    if program.summary["gathered"]:
        clock = time.perf_counter()
        frame = _gathered_frame(store.spark, run.dataframe, program.summary, per_level)
        seconds["output"] = time.perf_counter() - clock
        summary = program.summary
        return LouvainResult(frame, run.metrics, run.aggregated, summary["modularity"], seconds,
                             summary["level_sizes"], 0)
    return _spark_levels(store, run, program.summary["communities"], weight, resolution, int(seed), per_level,
                         driver_budget_edges, refine, method, seconds, engine_options.get("instance"))


def _gathered_frame(spark, frame, summary: dict, per_level):
    """The run's output with the level columns asked for (a small table of the level-1
    communities' later labels joined in only when asked), materialised."""
    num_levels = len(summary["modularity"])
    wanted = list(range(1, num_levels + 1)) if per_level is True else list(per_level or ())
    columns = ["id", "community"]
    inner = sorted({k for k in wanted if k < num_levels})
    if inner:
        levels = [np.arange(len(summary["nodes"])), *summary["memberships"]]
        table = pd.DataFrame({"c1": summary["nodes"], **{f"d{k}": levels[k - 1] for k in inner}})
        frame = frame.join(F.broadcast(spark.createDataFrame(table)), "c1")
    for k in wanted:
        columns.append(F.col(f"d{k}" if k < num_levels else "community").alias(f"level_{k}"))
    return frame.select(*columns).localCheckpoint(eager=True)


def _spark_levels(store, run, communities: int, weight, resolution, seed, per_level, driver_budget_edges, refine, method, seconds,
                  instance):
    """The levels after level 1 (``communities`` of them) when the collapsed graph does not fit a
    task: collapsed with Spark joins, partitioned again while over ``driver_budget_edges``, then on the driver."""
    spark = store.spark
    clock = time.perf_counter()
    vertices = run.dataframe.select("id", "c1", F.col("partition").alias("part"))
    raw = store.edges(attributes=[weight] if weight else [], instance=instance)
    raw = raw.select("src", "dst", (F.col(weight).cast("double") if weight else F.lit(1.0)).alias("w"))
    if refine:      # read once for collapse and refinement; a checkpoint also lets Spark self-join it
        raw = raw.localCheckpoint(eager=True)
    ends_a = vertices.select(F.col("id").alias("src"), F.col("c1").alias("a"))
    ends_b = vertices.select(F.col("id").alias("dst"), F.col("c1").alias("b"))
    edges = (raw.join(ends_a, "src").join(ends_b, "dst")
             .select(F.least("a", "b").alias("a"), F.greatest("a", "b").alias("b"), "w")
             .groupBy("a", "b").agg(F.sum("w").alias("w"))).localCheckpoint(eager=True)
    nodes = vertices.groupBy(F.col("c1").alias("c")).agg(F.min("part").alias("part"))
    sizes = edges.agg(F.count(F.lit(1)).alias("n"), F.sum("w").alias("w")).first()
    num_edges, num_nodes, total = sizes["n"], communities, float(sizes["w"] or 0.0)
    seconds["collapse"] += time.perf_counter() - clock

    clock = time.perf_counter()
    level_sizes, mappings, modularities = [num_nodes], [], []
    cached, done, groups = [edges, raw], False, store.num_partitions
    if max(num_edges, num_nodes) > driver_budget_edges:
        nodes = nodes.localCheckpoint(eager=True)
        cached.append(nodes)
    while max(num_edges, num_nodes) > driver_budget_edges:
        current_q = _modularity_spark(edges, total, resolution)
        mapping, groups_after = _partitioned_level(nodes, edges, groups, resolution, seed, len(mappings) + 2,
                                                   method)
        mapping = mapping.localCheckpoint(eager=True)
        nodes = mapping.select(F.col("next").alias("c"), "part").distinct().localCheckpoint(eager=True)
        next_count = nodes.count()
        cached += [mapping, nodes]
        if next_count < num_nodes:
            modularities.append(current_q)
            mappings.append(mapping)
            edges = _collapse(edges, mapping).localCheckpoint(eager=True)
            cached.append(edges)
            num_edges, num_nodes = edges.count(), next_count
            level_sizes.append(num_nodes)
            current_q = _modularity_spark(edges, total, resolution)
        groups = groups_after         # unchanged communities when nothing merged, but in merged groups
        if groups == 1:               # the last run saw the whole graph: Louvain has converged
            modularities.append(current_q)
            done = True
            break
    if done:
        labels, driver = _dense_labels_spark(spark, nodes, f"d{len(modularities)}"), []
    else:
        node_ids = np.sort(_numpy_columns(nodes, ["c"])[0].astype(np.int64))
        a, b, w = _numpy_columns(edges, ["a", "b", "w"])
        driver, ia, ib, w = _driver_levels(node_ids, a.astype(np.int64), b.astype(np.int64),
                                           w.astype(np.float64), resolution, seed, len(mappings) + 1, method)
        first = len(mappings) + 1
        table = {"cur": node_ids}
        for j, membership in enumerate([np.arange(len(node_ids)), *driver]):
            modularities.append(modularity(membership, ia, ib, w, resolution))
            table[f"d{first + j}"] = membership
        labels = spark.createDataFrame(pd.DataFrame(table))
        level_sizes += [int(mb.max()) + 1 for mb in driver]
    seconds["further_levels"] = time.perf_counter() - clock

    clock = time.perf_counter()
    frame = _per_vertex(vertices, mappings, labels, per_level, len(modularities))
    if refine and total > 0 and store.num_partitions > 1:
        frame, modularities[-1], level_sizes[-1], refined = _refine_final_level(
            spark, frame, raw, total, resolution, len(modularities), modularities[-1], level_sizes[-1])
        cached.append(refined)
        seconds["refine"] = time.perf_counter() - clock
        clock = time.perf_counter()
    frame = frame.drop("part").localCheckpoint(eager=True)
    seconds["output"] = time.perf_counter() - clock
    for df in cached:
        df.unpersist()
    return LouvainResult(frame, run.metrics, run.aggregated, modularities, seconds, level_sizes, len(mappings))


def leiden(store, weight: str | None = None, resolution: float = 1.0, seed: int = 0, levels=None,
           driver_budget_edges: int = 5_000_000, **engine_options) -> LouvainResult:
    """Leiden communities of a GoFS graph (Traag, Waltman and van Eck, "From Louvain to Leiden:
    guaranteeing well-connected communities", Sci. Rep. 2019), partitioned like :func:`louvain`.

    Level 1 is Louvain's (one local-moving level per sub-graph, the granularity that keeps
    partitioned quality close to a whole-graph run), each community then split into its
    connected pieces. The collapsed graph's levels run Leiden (igraph's C kernel, modularity
    objective, two iterations as igraph's default; partitioned on Spark while it is larger
    than ``driver_budget_edges``, then on one task). A second iteration, as Leiden's own,
    follows when the collapsed graph fits a task: local moving of every vertex from the
    final communities (the cut edges level 1 ignored now count), refinement into connected
    units, igraph's Leiden on the units started from their communities, kept only if
    modularity rises. Every community returned is split into its connected pieces (a
    connected set of connected units is connected; splitting never lowers modularity).
    Parameters and result as :func:`louvain` (``seconds["second_iteration"]`` in place of ``refine``).

    Example
    -------
    >>> result = g.leiden(resolution=1.0, seed=1)
    >>> result.modularity[-1]
    """
    return louvain(store, weight, resolution, seed, levels, driver_budget_edges, refine=False, method="leiden",
                   **engine_options)


_COMMUNITY_FLAGS = {"weight": Flag("edge attribute used as weight (default: 1 per edge)"),
                    "resolution": Flag("NetworkX's resolution (> 0)"),
                    "seed": Flag("random seed (deterministic runs)"),
                    "levels": Flag("also write one level_k column per level", kind="switch")}
_NX_COMMUNITY_PARAMS = {"resolution": "resolution", "seed": "seed"}


def _louvain_report(result) -> dict:
    return {"modularity": result.modularity, "communities": result.level_sizes, "phase_seconds": result.seconds}


register(Algorithm(
    name="louvain", function=louvain, cli="louvain",
    summary="partitioned Louvain communities (id, community)", returns=("community",),
    flags=_COMMUNITY_FLAGS,
    report=_louvain_report,
    networkx=(NetworkX("community.louvain_communities", "communities", params=_NX_COMMUNITY_PARAMS,
                       requires={"threshold": 1e-07, "max_level": None}, directed=False, weight="weight"),),
    graphframes=(GraphFramesMethod("louvain", column="community", ours="community",
                                   params=dict(_NX_COMMUNITY_PARAMS, weight="weight")),),
))


register(Algorithm(
    name="leiden", function=leiden, cli="leiden",
    summary="partitioned Leiden communities, each connected (id, community)", returns=("community",),
    flags=_COMMUNITY_FLAGS,
    report=_louvain_report,
    networkx=(NetworkX("community.leiden_communities", "communities", params=_NX_COMMUNITY_PARAMS,
                       requires={"max_level": None}, directed=False, weight="weight"),),
    graphframes=(GraphFramesMethod("leiden", column="community", ours="community",
                                   params=dict(_NX_COMMUNITY_PARAMS, weight="weight")),),
))
