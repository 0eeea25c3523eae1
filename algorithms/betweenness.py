"""Betweenness centrality on Gopher: MS-BC and MSL-BC (Brandes with many sources at once).

A batch of ``B`` sources runs as the columns of ``n_local x B`` arrays in every
sub-graph, in the same supersteps, in three phases (Sariyüce et al., "Efficient
Extraction of High Centrality Vertices in Distributed Graphs", 2014; Brandes,
"A Faster Algorithm for Betweenness Centrality", 2001):

1. **distances**: like SSSP, each sub-graph lowers its columns' distances from the
   seeds it received (a breadth-first search on unweighted graphs, else Dijkstra,
   exploring only where a distance drops) and sends ``distance + weight`` across
   its cut edges whose local end improved.
2. **path counts** ``sigma``: with distances final, the shortest-path DAG of every
   column is fixed (:class:`ShortestPathDag`: each column's vertices in distance
   order), so ``sigma`` is one sweep up it. It is linear, so contributions arriving
   over cut edges are swept as increments (only their columns, from where they
   enter) and forwarded until none are left: path counts are integers, exact.
3. **dependencies**: ``y = delta / sigma`` obeys ``y(v) = sum over DAG successors w of
   reach(w) / sigma(w) + y(w)``, one sweep down, again incremental;
   ``bc(v) += reach(s) * sigma(v) * y(v)`` as the increments arrive.

Where the whole graph fits a task, :mod:`algorithms.betweenness_gathered` runs instead
(topology gathered once, sources split by sub-graph, no paths followed across cuts).

The three passes are compiled (numba, :mod:`algorithms.brandes_kernels`): one
pass per column over the sub-graph's arcs each; an increment arriving late is swept
over only the columns it touches. :func:`local_betweenness` (one process, no cut)
fuses them into one forward and one backward pass per source.

With leaf compression (MSL-BC: undirected graphs, unweighted or with whole-number
weights) every sub-graph first strips its hanging trees
(:mod:`algorithms.leaf_compression`; never across a cut edge), their betweenness is
added in closed form once component sizes are known (a sub-graph label propagation
alongside the first batch, then a size aggregator), and the traversals weigh
targets and sources by ``reach``. Distances are compared exactly, as NetworkX does,
and positive weights make every DAG edge go from a smaller to a larger distance, so
the results equal ``networkx.betweenness_centrality``.

A master drives the phases: a phase ends in the first superstep that sends
nothing, then the next starts; batches follow each other in one run. In the
sampling modes (top-k, or ``epsilon``) a batch's columns are random source-target
pairs whose only sink is the target (with the topology gathered, sampled sources instead),
and the master stops once the confidence intervals allow
(:mod:`algorithms.betweenness_sampling`). The ``n_local x B`` arrays stay in the worker processes between
supersteps; sub-graph state carries only what they are computed from.

Cost: every column is traversed in every sub-graph it reaches, again in parts where
paths cross cuts back and forth (``./run.sh bench betweenness``; numbers in
benchmarks/README.md).
"""
from __future__ import annotations

import uuid

import numpy as np
import pyarrow as pa
from pyspark.sql import functions as F

from algorithms import brandes_kernels as kernels
from algorithms.betweenness_gathered import (CANDIDATES_PER_TOP, GATHER_ARCS, PILOT_SAMPLES,
                                             GatheredBetweenness)
from algorithms.betweenness_graph import LocalGraph, arc_graph, local_graph
from algorithms.betweenness_sampling import Sampling, stop_reason
from algorithms.weights import reject_bad_weights
from algorithms.registry import Algorithm, Flag, GraphFramesMethod, NetworkX, register
from gofs.errors import InputError
from gofs.vids import ADDED_STRIDE
from gopher.aggregators import Aggregator
from gopher.engine import RunResult, run_program
from gopher.program import SubgraphProgram

#: one vertex message: batch column, sending vertex, distance through the edge, value
MESSAGE = np.dtype([("col", "<i4"), ("src", "<i8"), ("d", "<f8"), ("val", "<f8")])

#: (vertex, source) pairs of the largest partition in one batch by default, exact runs. Every
#: batch costs its phases' supersteps however wide, and the kernels sweep column by column
#: (contiguous), so wide batches cost nothing per source: on a 5k road graph, 8 partitions,
#: 7 batches of 815 took 217 supersteps and 58 s, 2 batches of 2500 65 supersteps and 33 s
#: (same load). The price is memory: four ``n_local x B`` arrays per sub-graph kept between
#: supersteps (distances, order, path counts, dependencies), ~60 MB at this default.
DEFAULT_BATCH_ELEMENTS = 1 << 21
#: the same for sampled pairs: narrower batches, so the sampler checks its intervals often
#: enough to stop near the fewest samples it needs
SAMPLE_BATCH_ELEMENTS = 1 << 19
#: sampled sources per superstep with the topology gathered (7-8 CPU ms each at 100k road, ~10k
#: needed there, ~105 ms at 1M: a superstep costs little against them; checks stay frequent)
GATHERED_SAMPLE_BATCH = 256
#: fewest sources per batch by default (a batch costs a few supersteps however small)
MIN_DEFAULT_BATCH = 16
#: fewest sampled pairs per batch by default (tens of thousands of samples, a few supersteps a batch)
MIN_SAMPLE_BATCH = 64


# --------------------------------------------------------------------------- local kernels

def empty_distances(n: int, batch: int) -> np.ndarray:
    """An ``n x batch`` distance array, all unreached, in the Fortran order the kernels sweep."""
    return np.full((n, batch), np.inf, order="F")


class ShortestPathDag:
    """The shortest-path DAGs of a batch in one sub-graph, for Brandes sweeps.

    A DAG arc ``u -> v`` of column (source) ``c`` is a local arc with
    ``dist[u, c] + w == dist[v, c]`` (exact float equality, as NetworkX tests it). The
    arcs are not stored: each column's reached vertices are kept sorted by distance,
    and a sweep walks them in that order (upwards for path counts, downwards for
    dependencies), testing each vertex's arcs as it goes, in compiled code
    (:mod:`algorithms.brandes_kernels`); both push only from vertices holding a value
    (dependencies over the reversed arcs). An increment that enters at some vertices
    only sweeps its columns from (or up to) the distance where it enters.
    """

    def __init__(self, graph: "LocalGraph", dist: np.ndarray):
        self.graph, self.dist, self.shape = graph, dist, dist.shape
        self.order = np.empty(dist.shape, np.int32, order="F")
        self.count = np.zeros(dist.shape[1], np.int64)
        kernels.distance_order(dist, graph.integral, self.order, self.count)

    @property
    def nbytes(self) -> int:
        """What the DAG adds to its distances (counted in the task cache's budget)."""
        return self.order.nbytes + self.count.nbytes

    def scatter(self, v: np.ndarray, col: np.ndarray, values: np.ndarray) -> np.ndarray:
        """An ``n x B`` array (Fortran order) with ``values`` summed at the (vertex, column) pairs."""
        x = np.zeros(self.shape, order="F")
        np.add.at(x, (v, col), values)
        return x

    def counts(self, injected: np.ndarray) -> np.ndarray:
        """Path counts: ``x(v) = injected(v) + sum of x over v's DAG tails``, swept upwards over
        every column. Returns ``x`` (``injected`` itself when it is Fortran-ordered)."""
        return self._sweep(self.graph.csr, np.asfortranarray(injected), upward=True)

    def accumulate(self, injected: np.ndarray) -> np.ndarray:
        """Dependencies: ``z(u) = injected(u) + sum of z over u's DAG heads``, swept downwards."""
        return self._sweep(self.graph.reverse, np.asfortranarray(injected), upward=False)

    def count_increment(self, v, col, values) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`counts` of an increment injected at the (vertex, column) pairs only: returns the
        columns it touches and their ``n x len(columns)`` swept values (zero elsewhere). Each
        column is swept from the lowest distance where the increment enters, so a late
        increment costs what it changes, not the batch's width."""
        return self._increment(self.graph.csr, v, col, values, upward=True)

    def dependency_increment(self, v, col, values) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`accumulate` of an increment, as :meth:`count_increment` (swept down from the
        highest distance where it enters)."""
        return self._increment(self.graph.reverse, v, col, values, upward=False)

    def _sweep(self, csr, x, upward: bool):
        columns = np.arange(self.shape[1])
        kernels.sweep(csr.indptr, csr.indices, csr.data, self.dist, self.order, self.count, columns, x,
                      np.full(len(columns), -np.inf if upward else np.inf), upward)
        return x

    def _increment(self, csr, v, col, values, upward: bool):
        present = np.zeros(self.shape[1], bool)
        present[col] = True
        columns = np.flatnonzero(present)
        position = np.cumsum(present) - 1
        x = np.zeros((self.shape[0], len(columns)), order="F")
        bound = np.full(len(columns), np.inf if upward else -np.inf)
        kernels.inject(np.asarray(v, np.int64), position[col], np.asarray(values, np.float64), self.dist[v, col],
                       x, bound, upward)
        kernels.sweep(csr.indptr, csr.indices, csr.data, self.dist, self.order, self.count, columns, x, bound, upward)
        return columns, x


def _scale(n: int, normalized: bool, directed: bool) -> float:
    """NetworkX's rescaling of ordered-pair betweenness (``_rescale`` with endpoints=False)."""
    if normalized:
        return 1.0 / ((n - 1) * (n - 2)) if n > 2 else 1.0
    return 1.0 if directed else 0.5


def sample_scales(n: int, k: int, normalized: bool, directed: bool) -> tuple[float, float]:
    """NetworkX's (>= 3.5) rescaling of ordered-pair sums from ``k`` chosen sources, endpoints
    excluded: ``(for the sources, for the other vertices)``. A source lies on no path from
    itself, so its sum covers ``k - 1`` sources (NaN for ``k = 1``, as in NetworkX)."""
    pairs = n - 1                                   # targets other than the vertex itself
    if pairs < 2:
        return 1.0, 1.0
    if normalized:
        return (1 / ((k - 1) * (pairs - 1)) if k > 1 else np.nan), 1 / (k * (pairs - 1))
    correction = 1 if directed else 2
    return (pairs / ((k - 1) * correction) if k > 1 else np.nan), pairs / (k * correction)


def local_betweenness(n: int, src, dst, weight=None, directed: bool = False, normalized: bool = True,
                      compress: bool = True, sources=None) -> np.ndarray:
    """Exact betweenness of an in-memory edge list in one process: the same local graph and leaf
    compression as the program, then one fused compiled Brandes pass per source
    (:func:`algorithms.brandes_kernels.brandes_sources`), with no cut to cross.

    Parameters
    ----------
    n : number of vertices (ids ``0..n-1``); src, dst : edges (parallel edges and self-loops allowed).
    weight : positive edge lengths aligned with the edges, or None for hops.
    directed, normalized : as ``networkx.betweenness_centrality``.
    compress : leaf compression (undirected graphs; unweighted or whole-number weights
        to keep NetworkX's floating-point ties, see :func:`integral_weights`).
    sources : only the paths from these vertices (default: all); chunks of the vertices then
        sum to the whole. Needs ``compress=False``: stripped vertices' paths are folded into
        the closed-form share of their trees.

    Returns the betweenness of vertices ``0..n-1``, equal to NetworkX's.
    The reference the distributed program is checked against on graphs too many to run
    through Spark (e.g. leaf compression on hundreds of random graphs); its traversal is
    written apart from the program's phase kernels, so the two check each other.
    """
    if sources is not None and compress:
        raise InputError("local_betweenness(sources=...) needs compress=False")
    src, dst = np.asarray(src, np.int64), np.asarray(dst, np.int64)
    w = np.ones(len(src)) if weight is None else np.asarray(weight, np.float64)
    if not directed:
        src, dst, w = np.concatenate([src, dst]), np.concatenate([dst, src]), np.concatenate([w, w])
    compress = compress and not directed and (weight is None or bool(np.all(w == np.floor(w))))
    graph, raw = arc_graph(n, src, dst, w, compress)
    sources = np.flatnonzero(graph.leaves.alive) if sources is None else np.asarray(sources, np.int64)
    csr = graph.csr
    kernels.brandes_sources(csr.indptr, csr.indices, csr.data, graph.unit, sources, graph.leaves.reach, raw,
                            None)
    return raw * _scale(n, normalized, directed)


def _distinct_columns(pieces: list) -> np.ndarray:
    """The distinct columns of the ``3 x k`` int arrays ``pieces`` side by side, sorted (a lexsort:
    ``np.unique(axis=1)`` sorts a structured view, many times slower)."""
    if not pieces:
        return np.empty((3, 0), dtype=np.int64)
    edges = np.concatenate(pieces, axis=1)
    edges = edges[:, np.lexsort(edges[::-1])]
    first = np.r_[True, (edges[:, 1:] != edges[:, :-1]).any(axis=0)] if edges.shape[1] else np.zeros(0, bool)
    return edges[:, first]


# --------------------------------------------------------------------------- aggregators

def _merge_sizes(a: dict, b: dict) -> dict:
    if len(a) < len(b):
        a, b = b, a
    for label, size in b.items():
        a[label] = a.get(label, 0) + size
    return a


def _added_bases(template_vertices: int, counts: dict) -> dict:
    """Partition -> the first source number of its added vertices (they follow the template's,
    partition by partition)."""
    parts = sorted(counts)
    starts = template_vertices + np.r_[0, np.cumsum([counts[p] for p in parts])[:-1]] if parts else []
    return {p: int(start) for p, start in zip(parts, starts)}


def _top(vids: np.ndarray, scores: np.ndarray, m: int, *extra: np.ndarray) -> tuple:
    """The ``m`` highest (vertex, score, extra...) rows, ties broken by vertex id."""
    order = np.lexsort((vids, -scores))[:m]
    return (vids[order], scores[order], *(x[order] for x in extra))


class _TopMerge:
    """Keeps the ``m`` highest (vertex, score, extra...) rows, ties broken by vertex id."""

    def __init__(self, m: int):
        self.m = m

    def __call__(self, a, b):
        vids, scores, *extra = (np.concatenate([x, y]) for x, y in zip(a, b))
        return _top(vids, scores, self.m, *extra)


class SourceOrder:
    """A seeded pseudo-random permutation of ``range(n)``: the order sources run in, computed
    element by element in every sub-graph without shipping a list of n ids.

    A balanced Feistel network on ``2h`` bits (``4^h >= n``) is a bijection of ``range(4^h)``;
    walking the cycle (applying it again while the value is ``>= n``, at most ~4 times on
    average) makes it one of ``range(n)``. A prefix of the order is then a uniform-looking
    sample, which sampled and top-k betweenness assume; the prefixes of an affine order
    ``a x + b mod n`` are a lattice over the ids (three gap lengths), a structured sample on
    graphs numbered by position such as roads.
    """

    _ROUNDS = 4

    def __init__(self, n: int, seed: int):
        self.n = int(n)
        self.half = max(1, (max(self.n - 1, 1).bit_length() + 1) // 2)
        self.keys = np.random.default_rng(seed).integers(0, 1 << 62, self._ROUNDS, dtype=np.uint64)

    def _round(self, right: np.ndarray, key: np.uint64) -> np.ndarray:
        z = (right ^ key) * np.uint64(0x9E3779B97F4A7C15)          # a splitmix64-style mix, wrapping
        z = (z ^ (z >> np.uint64(31))) * np.uint64(0xBF58476D1CE4E5B9)
        return (z ^ (z >> np.uint64(29))) & np.uint64((1 << self.half) - 1)

    def _feistel(self, x: np.ndarray) -> np.ndarray:
        mask = np.uint64((1 << self.half) - 1)
        left, right = x >> np.uint64(self.half), x & mask
        for key in self.keys:
            left, right = right, left ^ self._round(right, key)
        return (left << np.uint64(self.half)) | right

    def __call__(self, x) -> np.ndarray:
        """The ``x``-th sources (ints in ``range(n)``)."""
        y = self._feistel(np.asarray(x, dtype=np.uint64))
        outside = y >= np.uint64(self.n)
        while outside.any():
            y[outside] = self._feistel(y[outside])
            outside = y >= np.uint64(self.n)
        return y.astype(np.int64)


# --------------------------------------------------------------------------- the program

class MultiSourceBetweenness(SubgraphProgram):
    """MS-BC / MSL-BC as a sub-graph program; see the module docstring.

    Output per vertex: ``tree`` (exact ordered-pair betweenness from stripped trees) and
    ``sampled`` (ordered-pair betweenness from the sources processed); :func:`betweenness`
    scales them. ``summary`` is filled on the driver: sources processed, batches, top ids.
    """

    message_dtype = MESSAGE
    output_schema = {"tree": pa.float64(), "sampled": pa.float64()}

    def __init__(self, num_vertices: int, num_sources: int, batch_size: int, weight: str | None = None,
                 compress: bool = True, top: int | None = None, seed: int = 0,
                 keep_arrays: bool = True, template_vertices: int | None = None,
                 sampling: Sampling | None = None, sources: np.ndarray | None = None):
        self.n = num_vertices
        self.template_vertices = num_vertices if template_vertices is None else template_vertices
        self.num_sources = num_sources
        self.batch_size = batch_size
        self.num_batches = -(-num_sources // batch_size)
        self.weight = weight
        self.compress = compress
        self.top = top
        self.sampling = sampling
        self.keep_arrays = keep_arrays
        self.order = SourceOrder(num_vertices, seed) if sources is None else np.asarray(sources, np.int64).__getitem__
        self.edge_attributes = (weight,) if weight else ()
        self.aggregators = {"sent": "sum", "cc_sent": "sum", "reach": "sum", "stripped": "sum",
                            "sizes": Aggregator(_merge_sizes), "added": Aggregator(_merge_sizes)}
        if sampling:
            self.aggregators.update(widest="max", top=Aggregator(_TopMerge(top or 1)),
                                    upper=Aggregator(_TopMerge((top or 1) + 1)))
        self.token = uuid.uuid4().hex
        self.summary: dict = {}

    # ------------------------------------------------------------------ driver side
    def master(self, ctx):
        g, agg = ctx.globals, ctx.aggregated
        if ctx.superstep == 0:                 # set-up only: batch 0 starts in superstep 1
            self.summary["stripped"] = int(agg.get("stripped", 0))
            g.update(phase="dist", first=True, batch=0, cc="running" if self.summary["stripped"] else "done",
                     added_base=_added_bases(self.template_vertices, agg.get("added") or {}))
            self._components(g, agg)
            return
        self._components(g, agg)
        phase = g["phase"]
        quiet = agg.get("sent", 0) == 0
        if phase == "done":
            if g["cc"] == "done":
                ctx.halt()
        elif phase == "dist":
            if g["first"]:
                reach = agg.get("reach", 0)
                g["reach"] = np.asarray(reach, dtype=np.float64) if np.ndim(reach) else np.zeros(self.batch_size)
            self._enter(g, "sigma") if quiet else g.update(first=False)
        elif phase == "sigma":
            self._enter(g, "delta") if quiet else g.update(first=False)
        elif not quiet:
            g["first"] = False
        else:
            self._finish_batch(ctx, g)

    @staticmethod
    def _components(g, agg):
        """Component sizes (for the stripped trees) are found alongside the first batch:
        sub-graph labels spread until quiet, then sizes are summed per label and handed out."""
        if g["cc"] == "running" and agg.get("cc_sent", 0) == 0:
            g["cc"] = "sizes"
        elif g["cc"] == "sizes":
            g.update(cc="ready", sizes=agg.get("sizes") or {})
        elif g["cc"] == "ready":
            g.pop("sizes")
            g["cc"] = "done"

    @staticmethod
    def _enter(g, phase):
        g.update(phase=phase, first=True)

    def _sources_done(self, batch: int) -> int:
        return min((batch + 1) * self.batch_size, self.num_sources)

    def _finish_batch(self, ctx, g):
        batch = g["batch"]
        self.summary.update(sources=self._sources_done(batch), batches=batch + 1)
        if self.sampling and self.sampling.is_check(batch):
            agg = ctx.aggregated
            widest = float(agg.get("widest", np.inf))
            self.summary.update(radius=widest, stop="max_samples")
            reason = stop_reason(agg.get("top"), agg.get("upper"), widest, self.top, self.sampling.epsilon)
            if reason:
                self.summary["stop"] = reason
                g["phase"] = "done"
        if batch + 1 >= self.num_batches:
            g["phase"] = "done"
        if g["phase"] == "done":
            if g["cc"] == "done":
                ctx.halt()
        else:
            g.update(phase="dist", first=True, batch=batch + 1)

    # ------------------------------------------------------------------ sub-graph side
    def compute(self, subgraph, messages, ctx):
        g = ctx.globals
        graph = subgraph.derived(("betweenness", self.weight, self.compress),
                                 lambda: local_graph(subgraph, self.weight, self.compress))
        if ctx.superstep == 0:
            self._init(subgraph, graph, ctx)
            return
        self._labels(subgraph, graph, messages, ctx, g)
        phase = g["phase"]
        sent = 0
        if phase == "done":
            subgraph.working.discard(self.token)
        else:
            sent = getattr(self, f"_{phase}")(subgraph, graph, messages, ctx, g)
            self._release(subgraph, ctx, g)
        ctx.aggregate("sent", sent)

    def _init(self, sg, graph, ctx):
        st = sg.state
        st["label"] = sg.first_vertex_id
        st["sampled"] = np.zeros(sg.num_vertices)
        ctx.aggregate("stripped", graph.leaves.stripped)
        added = self._added_partition(sg)
        if added is not None:
            ctx.aggregate("added", {added: sg.num_vertices})
        if not graph.leaves.stripped:
            st["tree"] = np.zeros(sg.num_vertices)
        if self.compress:
            ctx.send_to_neighbors(st["label"])
            ctx.aggregate("cc_sent", len(sg.neighbors()))

    def _added_partition(self, sg) -> int | None:
        """The partition whose added vertices ``sg`` holds (an instance's vertices beyond the
        template), None for a template sub-graph."""
        if not sg.num_vertices or sg.vertex_ids[0] < self.template_vertices:
            return None
        return int((sg.vertex_ids[0] - self.template_vertices) // ADDED_STRIDE)

    def _source_base(self, sg, g) -> int:
        """Source numbers are ``0..n-1``: the template's vids, then each partition's added
        vertices in vid order; ``sg`` holds the numbers ``base .. base + num_vertices - 1``."""
        p = self._added_partition(sg)
        return sg.first_vertex_id if p is None else g["added_base"][p]

    def _labels(self, sg, graph, messages, ctx, g):
        st = sg.state
        if g["cc"] == "running":
            if messages.payloads and min(messages.payloads) < st["label"]:
                st["label"] = min(messages.payloads)
                ctx.send_to_neighbors(st["label"])
                ctx.aggregate("cc_sent", len(sg.neighbors()))
        elif g["cc"] == "sizes":
            ctx.aggregate("sizes", {st["label"]: sg.num_vertices})
        elif g["cc"] == "ready" and "tree" not in st:
            st["tree"] = graph.leaves.tree_betweenness(g["sizes"][st["label"]])

    # The batch's big arrays (distances, path counts, dependencies, n x B each, and the DAG
    # system) stay in the worker process between supersteps, in the sub-graph's working space
    # under the run's task-cache budget (one entry per run, replaced batch by batch); the state
    # keeps only what they were computed from (sources and the inputs each phase received), so
    # only that is shipped between supersteps, and where the arrays are missing or possibly
    # stale (evicted, another worker serves the partition, a retried task) they are recomputed
    # from it.

    def _work(self, sg, graph, ctx, g) -> dict:
        """This superstep's working arrays; marked in use until ``compute`` returns."""
        work = sg.working.get(self.token)
        if work is None or work["batch"] != g["batch"] or work["superstep"] != ctx.superstep - 1:
            work = self._rebuild(sg, graph, g)
            sg.working.put(self.token, work)
        work["superstep"] = None
        return work

    def _release(self, sg, ctx, g) -> None:
        work = sg.working.get(self.token)
        if work is None:
            return
        if self.keep_arrays and work["batch"] == g["batch"] and work["superstep"] in (None, ctx.superstep - 1):
            work["superstep"] = ctx.superstep
            sg.working.put(self.token, work)            # accounted at what it holds now
        else:
            sg.working.discard(self.token)

    def _rebuild(self, sg, graph, g) -> dict:
        """The working arrays recomputed from the state: every phase's result is a function of
        its inputs (distances: a minimum over seeds; path counts and dependencies: linear)."""
        st = sg.state
        n = sg.num_vertices
        src_v, src_col = st["src_v"], st["src_col"]
        seeds = [(src_v, src_col, np.zeros(len(src_v))), *st["seeds"]]
        v, col, d = (np.concatenate([s[i] for s in seeds]) for i in range(3))
        work = {"dist": empty_distances(n, self.batch_size), "batch": g["batch"]}
        graph.lower(work["dist"], v, col, d)
        if g["phase"] == "dist" or (g["phase"] == "sigma" and g["first"]):
            return work
        dag = work["dag"] = ShortestPathDag(graph, work["dist"])
        rhs = dag.scatter(src_v, src_col, np.ones(len(src_v)))
        for v, col, _, val in st["dag_in"]:
            rhs += dag.scatter(v, col, val)
        work["sigma"] = dag.counts(rhs)
        if g["phase"] == "delta" and not g["first"]:
            work["y"] = np.zeros(work["dist"].shape, order="F")
            for v, col, val in st["dep_in"]:
                np.add.at(work["y"], (v, col), val)
            self._pull_dependencies(sg, graph, work)
        return work

    @staticmethod
    def _dag(graph, work) -> ShortestPathDag:
        if "dag" not in work:
            work["dag"] = ShortestPathDag(graph, work["dist"])
        return work["dag"]

    def _target_row(self, sg) -> np.ndarray:
        """Per batch column, the local row of its sampled pair's target (-1 where it lies
        elsewhere); empty in exact runs, where every vertex is a target."""
        if not self.sampling:
            return np.empty(0, np.int64)
        row = np.full(self.batch_size, -1, np.int64)
        row[sg.state["tgt_col"]] = sg.state["tgt_v"]
        return row

    def _pull_dependencies(self, sg, graph, work) -> None:
        """``y`` (holding what was injected) swept down every column of the batch:
        :func:`algorithms.brandes_kernels.sweep_pull`."""
        dag, csr = self._dag(graph, work), graph.csr
        kernels.sweep_pull(csr.indptr, csr.indices, csr.data, dag.dist, dag.order, dag.count, work["sigma"],
                           graph.leaves.reach, self._target_row(sg), work["y"])

    def _shares_at(self, sg, graph, sigma, v, col) -> np.ndarray:
        """What vertex ``v`` passes to each DAG predecessor in column ``col`` besides its own y:
        ``reach(v) / sigma(v)``; when sampling pairs ``1 / sigma(t)`` at the column's target only
        (the pair dependency)."""
        at = sigma[v, col]
        if self.sampling:
            mine = self._target_row(sg)[col] == v
            return np.divide(1.0, at, out=np.zeros_like(at), where=(at > 0) & mine)
        return np.divide(graph.leaves.reach[v], at, out=np.zeros_like(at), where=at > 0)

    def _dist(self, sg, graph, messages, ctx, g):
        st = sg.state
        if g["first"]:
            return self._start_distances(sg, graph, ctx, g)
        if not len(messages.vertices):
            return 0
        dist = self._work(sg, graph, ctx, g)["dist"]
        v, col, d = messages.vertices, messages.values["col"].astype(np.int64), messages.values["d"]
        better = d < dist[v, col]
        if not better.any():
            return 0
        v, col, d = v[better], col[better], d[better]
        st["seeds"].append((v, col, d))
        changed = graph.lower(dist, v, col, d)
        return self._send_distances(ctx, graph, dist, changed[graph.r_src], np.arange(self.batch_size))

    def _start_distances(self, sg, graph, ctx, g):
        st = sg.state
        n, batch = sg.num_vertices, self.batch_size
        base = self._source_base(sg, g)
        if self.sampling:
            numbers, targets = self.sampling.pairs(g["batch"])
            local = targets - base
            inside = (local >= 0) & (local < n)
            st.update(tgt_v=local[inside], tgt_col=np.flatnonzero(inside))
        else:
            lo = g["batch"] * batch
            numbers = self.order(np.arange(lo, min(lo + batch, self.num_sources), dtype=np.int64))
        local = numbers - base
        inside = (local >= 0) & (local < n)
        v, col = local[inside], np.flatnonzero(inside)
        alive = graph.leaves.alive[v]
        v, col = v[alive], col[alive]
        st.update(src_v=v, src_col=col, seeds=[], dag_in=[], dep_in=[])
        st.pop("dag_edges", None)
        dist = empty_distances(n, batch)
        sg.working.put(self.token, {"dist": dist, "batch": g["batch"], "superstep": None})
        if not len(v):
            return 0
        reach = np.zeros(batch)
        reach[col] = graph.leaves.reach[v]
        ctx.aggregate("reach", reach)
        changed = graph.lower(dist, v, col, np.zeros(len(v)))
        return self._send_distances(ctx, graph, dist, changed[graph.r_src], np.arange(batch))

    @staticmethod
    def _send_distances(ctx, graph, dist, changed, cols):
        """Send ``distance + weight`` over the cut edges whose local end changed (rows x cols mask)."""
        rows, j = np.nonzero(changed)
        if not len(rows):
            return 0
        col = cols[j]
        out = np.zeros(len(rows), dtype=MESSAGE)
        out["col"] = col
        out["d"] = dist[graph.r_src[rows], col] + graph.r_w[rows]
        ctx.send_to_vertices(graph.r_dst[rows], out)
        return len(rows)

    @staticmethod
    def _send_counts(sg, ctx, graph, work, increment, cols):
        """Send path-count increments (``n x len(cols)``, of the batch's columns ``cols``) over the
        cut edges, with the distance through the edge so the receiver keeps only DAG edges."""
        rows, j = np.nonzero(increment[graph.r_src] != 0)
        if not len(rows):
            return 0
        src, col = graph.r_src[rows], cols[j]
        out = np.empty(len(rows), dtype=MESSAGE)
        out["col"], out["src"] = col, sg.vertex_ids[src]
        out["d"] = work["dist"][src, col] + graph.r_w[rows]
        out["val"] = increment[src, j]
        ctx.send_to_vertices(graph.r_dst[rows], out)
        return len(rows)

    def _sigma(self, sg, graph, messages, ctx, g):
        st = sg.state
        if g["first"]:
            work = self._work(sg, graph, ctx, g)
            if not len(st["src_v"]):
                work["sigma"] = np.zeros(work["dist"].shape, order="F")
                return 0
            dag = self._dag(graph, work)               # only this sub-graph's sources' columns have paths yet
            cols, counts = dag.count_increment(st["src_v"], st["src_col"], np.ones(len(st["src_v"])))
            work["sigma"] = np.zeros(work["dist"].shape, order="F")
            kernels.add_columns(work["sigma"], counts, cols)
            return self._send_counts(sg, ctx, graph, work, counts, cols)
        if not len(messages.vertices):
            return 0
        work = self._work(sg, graph, ctx, g)
        m, v = messages.values, messages.vertices
        col = m["col"].astype(np.int64)
        on_dag = m["d"] == work["dist"][v, col]
        if not on_dag.any():
            return 0
        v, col, src, val = v[on_dag], col[on_dag], m["src"][on_dag], m["val"][on_dag]
        st["dag_in"].append((v, col, src, val))
        dag = self._dag(graph, work)
        cols, increment = dag.count_increment(v, col, val)
        kernels.add_columns(work["sigma"], increment, cols)
        return self._send_counts(sg, ctx, graph, work, increment, cols)

    def _position(self, cols: np.ndarray) -> np.ndarray:
        """Per batch column, its index in ``cols`` (-1 where absent)."""
        position = np.full(self.batch_size, -1)
        position[cols] = np.arange(len(cols))
        return position

    def _credit(self, sg, work, increment, cols, g, add: bool) -> None:
        """Add ``reach(s) * sigma * y-increment`` (``increment``: ``n x len(cols)``, the batch's
        columns ``cols``) to the sampled betweenness, sources excluded; ``add``:
        also add the increment into ``y`` (:func:`algorithms.brandes_kernels.credit`)."""
        st = sg.state
        source_row = np.full(self.batch_size, -1, np.int64)
        source_row[st["src_col"]] = st["src_v"]
        kernels.credit(work["y"], increment, np.asarray(cols, np.int64), add, work["sigma"], g["reach"],
                       source_row, st["sampled"])

    def _send_dependencies(self, ctx, st, values) -> int:
        """Send each DAG predecessor across a cut edge its successor's value (``values(v, col)``
        of the cut edges' local ends and columns; non-zero only)."""
        edges = st["dag_edges"]
        if not edges.shape[1]:
            return 0
        v, col, src = edges
        val = values(v, col)
        nonzero = val != 0
        if not nonzero.any():
            return 0
        out = np.zeros(int(nonzero.sum()), dtype=MESSAGE)
        out["col"], out["val"] = col[nonzero], val[nonzero]
        ctx.send_to_vertices(src[nonzero], out)
        return len(out)

    def _delta(self, sg, graph, messages, ctx, g):
        st = sg.state
        sent = 0
        if g["first"]:
            st["dag_edges"] = _distinct_columns([np.stack([v, col, src]) for v, col, src, _ in st["dag_in"]])
            work = self._work(sg, graph, ctx, g)
            work["y"] = np.zeros(work["dist"].shape, order="F")
            self._pull_dependencies(sg, graph, work)
            self._credit(sg, work, work["y"], np.arange(self.batch_size), g, add=False)
            sent = self._send_dependencies(
                ctx, st, lambda v, col: work["y"][v, col] + self._shares_at(sg, graph, work["sigma"], v, col))
        elif len(messages.vertices):
            work = self._work(sg, graph, ctx, g)
            u, col, val = messages.vertices, messages.values["col"].astype(np.int64), messages.values["val"]
            st["dep_in"].append((u, col, val))
            dag = self._dag(graph, work)
            cols, increment = dag.dependency_increment(u, col, val)
            self._credit(sg, work, increment, cols, g, add=True)
            j = self._position(cols)
            sent = self._send_dependencies(
                ctx, st, lambda v, col: np.where(j[col] >= 0, increment[v, np.maximum(j[col], 0)], 0.0))
        if self.sampling and self.sampling.is_check(g["batch"]):
            m = self._sources_done(g["batch"])
            below, above = self.sampling.bounds(st["sampled"], m)
            mean = st["sampled"] / m
            ctx.aggregate("widest", float(((below + above) / 2).max(initial=0.0)))
            ctx.aggregate("top", _top(sg.vertex_ids, mean, self.top or 1, below))
            ctx.aggregate("upper", _top(sg.vertex_ids, mean + above, (self.top or 1) + 1))
        return sent

    def output(self, subgraph):
        st, n = subgraph.state, subgraph.num_vertices
        return {"tree": st.get("tree", np.zeros(n)), "sampled": st.get("sampled", np.zeros(n))}


# --------------------------------------------------------------------------- entry point

_WEIGHT_PROBLEMS = (
    ("null", "{path}: edge attribute '{weight}' has missing values (partition {partition})"),
    ("nan", "{path}: edge attribute '{weight}' has NaN values (partition {partition})"),
    ("negative", "{path}: negative edge weight {low_value} in '{weight}' (partition {partition}); "
                 "betweenness needs positive weights"),
    ("zero", "{path}: edge weight 0 in '{weight}' (partition {partition}); betweenness needs positive weights"),
)


def check_positive_weights(store, weight: str, instance=None) -> list[dict]:
    """Betweenness counts shortest paths, which zero-length edges make ill-defined: reject a
    missing or non-numeric attribute and null, NaN, negative or zero weights (of ``instance``'s
    edges if given) before any work starts, naming the partition (checked on Spark); returns
    the profile rows."""
    return reject_bad_weights(store, weight, _WEIGHT_PROBLEMS, instance)


def integral_weights(rows: list[dict]) -> bool:
    """Whether every weight is a whole number (from :func:`check_positive_weights`'s rows): then path
    lengths are exact sums and leaf compression keeps NetworkX's ties (with fractional weights,
    whether two path lengths tie in floating point can change when both are extended by the
    same tree edge)."""
    return all(row["fractionals"] == 0 for row in rows)


def _check_count(name: str, value, limit: int) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 1 <= value <= max(limit, 1):
        raise InputError(f"betweenness: {name}={value!r} must be an integer in [1, {max(limit, 1)}]")


def _source_ids(sources) -> list | None:
    """The chosen source vertex ids as Python values (distinct, at least one)."""
    if sources is None:
        return None
    ids = [v.item() if isinstance(v, np.generic) else v for v in sources]
    if not ids:
        raise InputError("betweenness: sources= names no vertex")
    if len(set(ids)) != len(ids):
        raise InputError("betweenness: sources= names a vertex twice")
    return ids


def _check_fraction(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)) or not 0 < value < 1:
        raise InputError(f"betweenness: {name}={value!r} must be a number in (0, 1)")


def betweenness(store, k: int | None = None, normalized: bool = True, weight: str | None = None,
                top: int | None = None, seed: int = 0, batch_size: int | None = None, compress: bool = True,
                epsilon: float | None = None, delta: float = 0.1, max_samples: int | None = None,
                keep_arrays: bool = True, sources=None, gather: bool | None = None, **engine_options) -> RunResult:
    """Betweenness centrality of every vertex, as ``networkx.betweenness_centrality``.

    Parameters
    ----------
    store : a GoFS graph (goffish.graph.Graph or gofs.store.GraphStore).
    k : use only ``k`` sources (a seeded random sample) and scale by ``n / k``; None: all (exact).
    normalized : divide by ``(n - 1)(n - 2)``; otherwise undirected values are halved
        (unordered pairs), as NetworkX does.
    weight : edge attribute of positive lengths; None counts hops.
    top : approximate top-k mode with a guarantee: random sources (with the topology gathered;
        source-target pairs across cuts) are sampled in batches until, with probability
        ``1 - delta``, the ``top`` vertices are separated from the rest or every vertex's normalised value is known to within ``epsilon`` (default 0.01);
        see :mod:`algorithms.betweenness_sampling`. The DataFrame holds those ``top`` vertices,
        highest first: each one's exact normalised value is at least the exact ``top``-th minus
        ``epsilon``.
    epsilon, delta : the guarantee of the sampling modes (``top``, or ``epsilon`` alone: every
        vertex estimated to within ``epsilon`` with probability ``1 - delta``).
    max_samples : stop sampling there whatever the intervals (default: where every interval is
        narrower than ``epsilon`` whatever the scores); the reported ``epsilon`` then says what was reached.
    seed : picks the source order or the samples.
    sources : exactly these vertex ids as sources (a sample the caller drew, e.g. NetworkX's
        ``k=`` sample from its ``seed``), scaled as NetworkX >= 3.5 scales a sample of
        ``k = len(sources)``: sources by ``1 / (k - 1)``, the others by ``1 / k`` (see
        :func:`sample_scales`). Runs without leaf compression, whose trees stand for all sources.
    instance : (engine option) run on this instance's topology, with the vertices it adds;
        traversed without leaf compression.
    batch_size : sources (or samples) per batch (columns of the per-sub-graph arrays);
        default from memory.
    keep_arrays : keep each batch's ``n_local x batch`` arrays in the workers between supersteps
        (only their inputs travel as state); False recomputes them every superstep (less memory).
    gather : gather the whole topology into every partition once and split the sources (all,
        or sampled ones) between partitions (:mod:`algorithms.betweenness_gathered`) instead of
        following paths across cuts (MS-BC, where samples are pairs); default: where the graph has at most
        ``GATHER_ARCS`` arcs and no ``instance`` is given.
    compress : strip hanging trees first and add their share exactly (MSL-BC): on undirected
        graphs, unweighted or with whole-number weights (see :func:`integral_weights`), exact
        and ``k`` modes.

    Returns
    -------
    RunResult whose ``dataframe`` has ``id`` and ``betweenness``; ``aggregated`` says how many
    sources ran (``sources``), in how many ``batches``, how many vertices leaf compression
    stripped (``stripped``) and whether the result is ``exact``; when sampling also the
    ``sample`` unit, the ``samples`` (pilot included), the ``epsilon`` reached (normalised), ``delta``
    and why it stopped (``stop``: "separated", "epsilon" or "max_samples").

    Example
    -------
    >>> g = goffish.open("road.gofs")
    >>> g.betweenness(weight="length").dataframe.orderBy("betweenness", ascending=False).show(5)
    >>> g.betweenness(top=32, epsilon=0.01, delta=0.1).aggregated["epsilon"]
    """
    instance = engine_options.get("instance")
    n = store.vertex_count(instance)
    _check_count("k", k, n)
    _check_count("top", top, n)
    _check_count("batch_size", batch_size, 1 << 30)
    _check_count("max_samples", max_samples, 1 << 40)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InputError(f"betweenness: seed must be an integer >= 0, got {seed!r}")
    guaranteed = top is not None or epsilon is not None
    source_ids = _source_ids(sources)
    chosen = np.asarray(store.vids_of(source_ids, instance), np.int64) if sources is not None else None
    if chosen is not None and (k is not None or guaranteed):
        raise InputError("betweenness: sources= excludes k= and top=/epsilon= (they sample sources themselves)")
    if guaranteed:
        epsilon = 0.01 if epsilon is None else epsilon
        _check_fraction("epsilon", epsilon)
        _check_fraction("delta", delta)
        if k is not None:
            raise InputError("betweenness: k= (a fixed number of sources) and top=/epsilon= (sampled until the "
                             "guarantee holds) exclude each other")
    profile = check_positive_weights(store, weight, instance) if weight is not None else []
    sampling = None
    largest = max((p["num_vertices"] for p in store.partitions), default=1)
    if gather is None:
        gather = instance is None and 2 * store.num_edges <= GATHER_ARCS
    elif gather and instance is not None:
        raise InputError("betweenness: gather=True runs on the template's topology, not on an instance")
    if guaranteed and n > 2:
        unit = "sources" if gather else "pairs"     # across cuts a source's squares are never formed
        x_epsilon = epsilon * (n - 2) / n      # the sampled score's mean is the normalised value x (n - 2) / n
        batch_size = batch_size or (GATHERED_SAMPLE_BATCH if gather else
                                    max(MIN_SAMPLE_BATCH, SAMPLE_BATCH_ELEMENTS // max(largest, 1)))
        pilot = -(-PILOT_SAMPLES // batch_size) if gather and top else 0
        cap = int(max_samples or pilot * batch_size
                  + Sampling.default_max_samples(n, batch_size, x_epsilon, delta, unit))
        batch_size = min(batch_size, cap)
        pilot = pilot if pilot * batch_size < cap else 0
        sampling = Sampling(n, int(batch_size), x_epsilon, float(delta), cap, int(seed), pilot,
                            min(CANDIDATES_PER_TOP * top, n - 1) if pilot else 0, unit)
    sources = sampling.max_samples if sampling else len(chosen) if chosen is not None else (n if k is None else int(k))
    if batch_size is None:
        batch_size = max(1, min(sources, max(MIN_DEFAULT_BATCH, DEFAULT_BATCH_ELEMENTS // max(largest, 1))))
    # an instance's removed edges may split a sub-graph, and leaf compression's component
    # sizes assume connected sub-graphs: instances are traversed uncompressed (still exact);
    # samples score every vertex themselves, so they run uncompressed too
    compress = (bool(compress) and not store.directed and instance is None and sampling is None
                and chosen is None and (weight is None or integral_weights(profile)))
    if gather:
        order = SourceOrder(n, int(seed)) if chosen is None else chosen.__getitem__
        program = GatheredBetweenness(n, order, max(sources, 1), weight, compress, top, sampling)
    else:
        program = MultiSourceBetweenness(n, max(sources, 1), int(batch_size), weight, compress, top, int(seed),
                                         bool(keep_arrays), template_vertices=store.num_vertices,
                                         sampling=sampling, sources=chosen)
    result = run_program(store, program, max_supersteps=1 << 40, **engine_options)
    done = program.summary.get("sources", sources)
    if sampling:
        factor = n * (n - 1) / done         # the sampled mean estimates ordered-pair betweenness / (n (n - 1))
    else:
        factor = n / done if 0 < done < n else 1.0
    scale = _scale(n, normalized, store.directed)
    value = (F.col("tree") + F.col("sampled") * factor) * scale
    if chosen is not None:
        at_source, elsewhere = sample_scales(n, len(chosen), normalized, store.directed)
        value = F.col("sampled") * F.when(F.col("id").isin(source_ids), float(at_source)).otherwise(elsewhere)
    frame = result.dataframe.select("id", value.alias("betweenness"))
    if top:
        frame = frame.orderBy(F.desc("betweenness"), "id").limit(int(top))
    summary = {"sources": done, "batches": program.summary.get("batches", 0),
               "stripped": program.summary.get("stripped", 0), "exact": done >= n and sampling is None,
               "batch_size": int(batch_size)}
    if sampling:
        reached = program.summary.get("reached", 2 * program.summary.get("radius", np.inf))
        summary.update(sample=sampling.unit, samples=program.summary.get("samples", done),
                       epsilon=reached * n / (n - 2),
                       delta=float(delta), stop=program.summary.get("stop", "max_samples"))
        if "planned_checks" in program.summary:
            summary["planned_checks"] = program.summary["planned_checks"]
    return RunResult(frame, result.metrics, summary)


def _betweenness_report(result) -> dict:
    return dict(result.aggregated)


register(Algorithm(
    name="betweenness", function=betweenness, cli="betweenness",
    summary="betweenness centrality as NetworkX computes it (id, betweenness)", returns=("betweenness",),
    flags={"k": Flag("sample this many sources (default: all, exact)", flag="--sources"),
           "normalized": Flag("not normalized (undirected pairs counted once)", flag="--raw", kind="negate"),
           "weight": Flag("edge attribute of positive lengths (default: hops)"),
           "top": Flag("only the top K vertices, from sampled sources (pairs across cuts) until their confidence "
                       "intervals separate them or are narrower than --epsilon", flag="--top-k"),
           "epsilon": Flag("sample until every normalised value is known to within EPSILON "
                           "(default 0.01 with --top-k)"),
           "delta": Flag("sampling: failure probability (default 0.1)"),
           "max_samples": Flag("sampling: stop there whatever the intervals"),
           "seed": Flag("random seed (deterministic runs)"),
           "batch_size": Flag("sources per batch (default: from memory)")},
    report=_betweenness_report,
    networkx=(NetworkX("betweenness_centrality", "values", params={"normalized": "normalized"},
                       requires={"endpoints": False}, weight="weight", sample="sources"),),
    graphframes=(GraphFramesMethod("betweenness", column="betweenness", ours="betweenness",
                                   params={"k": "k", "normalized": "normalized", "weight": "weight",
                                           "seed": "seed"}),),
))
