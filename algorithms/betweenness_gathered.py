"""Betweenness on Gopher with the topology gathered: sources (all, or sampled) split by sub-graph.

Where the whole graph fits a task, paths need not be followed across cuts superstep by
superstep (:class:`algorithms.betweenness.MultiSourceBetweenness`, whose columns are
traversed again in every sub-graph a path re-enters). Instead every sub-graph
broadcasts its arcs once (superstep 0); each worker process assembles the whole graph once
for all the partitions it computes (:meth:`gopher.subgraph.Subgraph.process_pass`,
leaf-compressed over the whole graph, not only inside sub-graphs), and each partition runs
the sources it owns through the fused compiled Brandes pass
(:func:`algorithms.brandes_kernels.brandes_sources`), or, sampling, the sampled sources it
owns through the same pass, their dependencies squared too, one batch per superstep
(``compute_partition``: one call and one array of sums per partition, not per sub-graph; a
1M road graph has thousands of sub-graphs). The partial sums meet in a sum
aggregator; the master hands the total back for one superstep, in which each sub-graph
keeps its rows.

Sampling (:mod:`algorithms.betweenness_sampling`): sources, whose whole Brandes pass scores
every vertex with far less variance than a sampled pair. In top-k mode a pilot batch picks
the candidates that get 90% of ``delta`` (KADABRA's unequal split) and plans the checks
around the stop its means (and variances) predict; its samples are then set aside. The master
tells the sub-graphs which batches end at a check; at each it computes every vertex's
interval and stops when the reported top-k are within ``epsilon`` of the true k-th
(:func:`algorithms.betweenness_sampling.top_k_guarantee`), or, without ``top``, when every
interval is narrower than ``epsilon``.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from algorithms import brandes_kernels as kernels
from algorithms.betweenness_graph import arc_graph
from algorithms.betweenness_sampling import Sampling, top_k_guarantee
from gofs.errors import EngineError
from gopher.program import SubgraphProgram

#: gather the topology where the whole graph has at most this many arcs (each worker process keeps a copy)
GATHER_ARCS = 1 << 23
#: pilot samples (top-k, sampled sources): enough to rank the candidates, few against the ~10k
#: sources that follow at 100k road
PILOT_SAMPLES = 256
#: candidates per reported vertex that the pilot picks: with 4 a pilot of 1,024 missed true top
#: vertices at 100k road often enough that their wide intervals cost 45% more samples; 8 did not
CANDIDATES_PER_TOP = 8


def topology_piece(sg, weight: str | None) -> tuple:
    """A sub-graph's arcs in global vertex ids: local ones (both directions when undirected)
    and its cut edges leaving it, with their lengths."""
    adj = sg.adjacency(weight).tocoo()
    remote = sg.remote_edges
    use = remote.outgoing(sg.directed)
    r_w = remote.attribute(weight)[use] if weight else np.ones(int(use.sum()))
    vids = sg.vertex_ids
    return (np.concatenate([vids[adj.row], vids[remote.src[use]]]), np.concatenate([vids[adj.col], remote.dst[use]]),
            np.concatenate([adj.data, np.asarray(r_w, np.float64)]))


def assemble(payloads: list, n: int, compress: bool):
    """The whole graph from every sub-graph's :func:`topology_piece`: (graph, tree betweenness)."""
    if not payloads:
        raise EngineError("betweenness: the gathered topology is missing (evicted from the task cache mid-run)")
    src, dst, w = (np.concatenate([p[i] for p in payloads]) for i in range(3))
    if len(src) and max(int(src.max()), int(dst.max())) >= n:
        raise EngineError(f"betweenness: vertex id {max(int(src.max()), int(dst.max()))} beyond the {n} vertices")
    return arc_graph(n, src.astype(np.int64), dst.astype(np.int64), w.astype(np.float64), compress)


class GatheredBetweenness(SubgraphProgram):
    """Exact, ``k``-source or sampled-source (with a guarantee) betweenness on the gathered topology; see
    the module docstring. Outputs ``tree`` and ``sampled`` as
    :class:`algorithms.betweenness.MultiSourceBetweenness` does, and fills ``summary``."""

    output_schema = {"tree": pa.float64(), "sampled": pa.float64()}

    def __init__(self, num_vertices: int, order, num_sources: int, weight: str | None, compress: bool,
                 top: int | None = None, sampling: Sampling | None = None):
        self.n, self.order, self.num_sources = num_vertices, order, num_sources
        self.weight, self.compress, self.top, self.sampling = weight, compress, top, sampling
        self.edge_attributes = (weight,) if weight else ()
        self.aggregators = {"raw": "sum", "squares": "sum", "stripped": "max"}
        self.candidates = None
        #: the checks: even until the pilot (top-k) plans them around its predicted stop
        self.plan = sampling.even_plan() if sampling else None
        self.summary: dict = {}

    # ------------------------------------------------------------------ driver side
    def master(self, ctx):
        g, agg = ctx.globals, ctx.aggregated
        if "raw" in g:                                  # every sub-graph has kept its rows
            ctx.halt()
        elif ctx.superstep == 0:
            g["batch"] = 0
            if self.sampling:
                self._announce(g)
        elif not self.sampling:
            self.summary.update(sources=self.num_sources, batches=1, stripped=int(agg.get("stripped", 0)))
            g["raw"] = np.asarray(agg.get("raw", 0.0), np.float64) + np.zeros(self.n)
        else:
            self._sampling_master(g, agg)

    def _sampling_master(self, g, agg):
        s, batch, share = self.sampling, g["batch"], g.get("share")
        if batch == s.pilot - 1:
            total, squares = self._scores(agg)
            self.candidates = np.argsort(-total, kind="stable")[:s.candidates]
            self.plan = s.planned(s.predicted_stop(total, s.samples_after(batch), self.candidates, self.top,
                                                   squares))
            self.summary["planned_checks"] = [int(x) for x in self.plan.points[:s.WINDOW]]
        stop = None
        if share is not None:
            m = s.measured(batch)
            total, squares = self._scores(agg)
            below, above = s.bounds(total, m, s.log_terms(self.candidates, share), squares)
            if self.top:
                reached, separated = top_k_guarantee(total / m, below, above, self.top)
                stop = ("separated" if separated else "epsilon") if reached <= s.epsilon else None
            else:
                reached = float((below + above).max(initial=0.0))
                stop = "epsilon" if reached <= s.epsilon else None
            if stop is None and s.samples_after(batch) >= s.max_samples:
                stop = "max_samples"
            if stop:
                self.summary.update(sources=m, samples=s.samples_after(batch), batches=batch + 1, stripped=0,
                                    reached=reached, stop=stop)
                g["raw"] = total
        g["batch"] = batch + 1
        self._announce(g)

    def _scores(self, agg) -> tuple[np.ndarray, np.ndarray]:
        """The aggregated sums of the sampled sources' scores (in [0, 1]) and of their squares."""
        scale = self.sampling.score_scale
        return (np.asarray(agg["raw"], np.float64) * scale,
                np.asarray(agg["squares"], np.float64) * (scale * scale))

    def _announce(self, g):
        """Tell the sub-graphs whether the next batch ends at a check (``share``: its share of
        ``delta``, None if not) or ends the pilot (``pilot``): then they aggregate their sums."""
        s = self.sampling
        g["share"] = s.check_share(g["batch"], self.plan)
        g["pilot"] = g["batch"] == s.pilot - 1

    # ------------------------------------------------------------------ sub-graph side
    def compute(self, subgraph, messages, ctx):
        if ctx.superstep == 0:
            ctx.send_to_all(topology_piece(subgraph, self.weight))
            return
        graph, tree = self._graph(subgraph, messages.payloads)
        if "raw" in ctx.globals:
            self._keep_rows(subgraph, tree, ctx.globals["raw"])
        elif subgraph.vertex_rows.start == 0:       # the partition's first sub-graph works for all of them
            self._partition_work(subgraph, graph, ctx)

    def compute_partition(self, subgraphs, ctx):
        """Every superstep after the topology arrived: the partition's sources (all, or this batch's sampled ones)
        run once, not once per sub-graph; the first sub-graph's state holds the partition's sums."""
        if ctx.superstep == 0:
            return False
        graph, tree = self._graph(subgraphs[0], [])
        if "raw" in ctx.globals:
            for sg in subgraphs:
                self._keep_rows(sg, tree, ctx.globals["raw"])
        else:
            self._partition_work(subgraphs[0], graph, ctx)
        return True

    def _graph(self, subgraph, payloads: list):
        """The whole graph and its trees' betweenness: assembled from the pieces once per worker
        process (:meth:`gopher.subgraph.Subgraph.process_pass`), shared by its partitions."""
        return subgraph.process_pass(("betweenness gathered", self.n, self.weight, self.compress),
                                     lambda: assemble(payloads, self.n, self.compress))

    @staticmethod
    def _keep_rows(sg, tree, raw):
        sg.state.pop("total", None)
        sg.state.pop("squares", None)
        vids = sg.vertex_ids
        sg.state["sampled"], sg.state["tree"] = raw[vids], tree[vids]

    def _partition_work(self, first, graph, ctx):
        """The sources (all, or this batch's sampled ones) in ``first``'s partition."""
        partition = first.partition_pass(("betweenness partition vertices",), lambda whole: whole.vertex_ids)
        if self.sampling:
            self._sample(first.state, partition, graph, ctx)
            return
        numbers = self.order(np.arange(self.num_sources, dtype=np.int64))
        mine = numbers[np.isin(numbers, partition)]
        mine = mine[graph.leaves.alive[mine]]
        raw = np.zeros(self.n)
        csr = graph.csr
        kernels.brandes_sources(csr.indptr, csr.indices, csr.data, graph.unit, mine, graph.leaves.reach, raw, None)
        ctx.aggregate("raw", raw)
        ctx.aggregate("stripped", graph.leaves.stripped)

    def _sample(self, st, partition, graph, ctx):
        s, g = self.sampling, ctx.globals
        if "total" not in st:
            st["total"], st["squares"] = np.zeros(self.n), np.zeros(self.n)
        sources = s.sources(g["batch"])
        csr = graph.csr
        kernels.brandes_sources(csr.indptr, csr.indices, csr.data, graph.unit, sources[np.isin(sources, partition)],
                                graph.leaves.reach, st["total"], st["squares"])
        if g["pilot"] or g["share"] is not None:
            ctx.aggregate("raw", st["total"])
            ctx.aggregate("squares", st["squares"])
        if g["pilot"]:                              # the pilot's samples only choose the candidates
            st.pop("total")

    def output(self, subgraph):
        st, n = subgraph.state, subgraph.num_vertices
        return {"tree": st.get("tree", np.zeros(n)), "sampled": st.get("sampled", np.zeros(n))}
