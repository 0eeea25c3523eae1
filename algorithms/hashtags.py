"""Hashtag aggregation over a time series of posts (eventually dependent pattern).

Each instance holds, per vertex, the hashtags it posted then (a list<string>
vertex attribute, ``hashtags`` in :mod:`goffish.temporal` social graphs).
Instances are analysed independently, all in the same supersteps: every
vertex gets the hashtag counts of its closed neighbourhood (its own posts and
those of its neighbours, following edges either way; each neighbour once).
Within a sub-graph that is one sparse product (neighbourhood matrix times
post-count matrix); posts of boundary vertices travel once per neighbouring
sub-graph. The Merge step then adds up every vertex's own posts over all
instances; Spark sums those per hashtag and ranks them, so the top-k hashtags
of the whole range come without the vocabulary ever reaching the driver
(Simmhan et al., "Distributed Programming over Time-series Graphs", IPDPS
2015, uses this eventually dependent pattern).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import scipy.sparse as sp
from pyspark.sql import Window
from pyspark.sql import functions as F

from algorithms.registry import Algorithm, Flag, register
from gofs.errors import InputError
from gopher.timeseries import TimeSeriesProgram, TimeSeriesResult, run_eventually_dependent, select_instances


def posts(subgraph, attribute: str) -> tuple[np.ndarray, np.ndarray]:
    """(local vertex index, hashtag) of every post in a list<string> vertex attribute."""
    lists = pa.array(subgraph.vertex_attribute(attribute), type=pa.list_(pa.string()))
    return (pc.list_parent_indices(lists).to_numpy().astype(np.int64),
            pc.list_flatten(lists).to_numpy(zero_copy_only=False).astype(object))


def add_posts(a: tuple, b: tuple) -> tuple[np.ndarray, sp.csr_matrix]:
    """Sum two per-vertex post-count tables (vocabulary, vertices x vocabulary matrix)."""
    tags, code = np.unique(np.concatenate([a[0], b[0]]), return_inverse=True)
    code = code.ravel()
    parts = []
    for (_, counts), columns in ((a, code[:len(a[0])]), (b, code[len(a[0]):])):
        coo = counts.tocoo()
        parts.append((coo.row, columns[coo.col], coo.data))
    rows, cols, data = (np.concatenate(c) for c in zip(*parts))
    return tags, sp.csr_matrix((data, (rows, cols)), shape=(a[1].shape[0], len(tags)))


def list_columns(vocab: np.ndarray, counts: sp.csr_matrix) -> dict:
    """Per vertex (row): ``hashtags`` and ``counts`` list columns of its non-zero counts."""
    counts = counts.tocsr()
    counts.sum_duplicates()
    counts.sort_indices()
    offsets = pa.array(counts.indptr, pa.int32())
    return {"hashtags": pa.ListArray.from_arrays(offsets, pa.array(vocab[counts.indices], pa.string())),
            "counts": pa.ListArray.from_arrays(offsets, pa.array(counts.data, pa.int64()))}


def require_attribute(store, attribute: str, selected: list[dict]) -> None:
    """Reject a list attribute that the graph, or one of the selected instances, lacks."""
    if attribute not in store.instance_vertex_attributes:
        raise InputError(f"{store.path}: no per-instance vertex attribute '{attribute}' "
                         f"(instance vertex attributes: {store.instance_vertex_attributes})")
    lacking = [i["id"] for i in selected if attribute not in i["vertex_attributes"]]
    if lacking:
        raise InputError(f"{store.path}: instance {lacking[0]} has no '{attribute}' values")


class HashtagAggregation(TimeSeriesProgram):
    """Per instance: closed-neighbourhood hashtag counts per vertex. Merge: each vertex's own
    posts summed over the instances."""

    output_schema = {"hashtags": pa.list_(pa.string()), "counts": pa.list_(pa.int64())}
    merge_schema = output_schema

    def __init__(self, attribute: str = "hashtags"):
        self.attribute = attribute
        self.instance_vertex_attributes = (attribute,)

    def compute(self, subgraph, messages, ctx):
        state = subgraph.state
        n = subgraph.num_vertices
        if ctx.superstep == 0:
            owner, tags = posts(subgraph, self.attribute)
            vocab, code = np.unique(tags, return_inverse=True)
            own = sp.csr_matrix((np.ones(len(code), np.int64), (owner, code)), shape=(n, len(vocab)))
            state["posts"] = (vocab, own)
            state["vocab"], state["counts"] = vocab, (self._neighbourhood(subgraph) @ own).tocsr()
            self._share(subgraph, own, vocab, ctx)
        elif messages.payloads:
            vertices, tags, counts = (np.concatenate(c) for c in zip(*messages.payloads))
            self._add(subgraph, subgraph.local_index(vertices), tags, counts)
        ctx.vote_to_halt()

    @staticmethod
    def _neighbourhood(subgraph) -> sp.csr_matrix:
        """Binary local closed-neighbourhood matrix (edges either way, self included once)."""
        closed = (subgraph.adjacency(symmetric=True) + sp.identity(subgraph.num_vertices, format="csr")).tocsr()
        closed.data = np.ones_like(closed.data, dtype=np.int64)
        return closed

    @staticmethod
    def _share(subgraph, own, vocab, ctx) -> None:
        """Send boundary vertices' posts to each neighbouring sub-graph, once per (vertex, neighbour)."""
        remote = subgraph.remote_edges
        pairs = np.unique(np.column_stack([remote.src, remote.dst, remote.dst_subgraph]), axis=0)
        pairs = pairs[np.diff(own.indptr)[pairs[:, 0]] > 0]
        if not len(pairs):
            return
        shared = own[pairs[:, 0]].tocoo()
        order = np.argsort(pairs[shared.row, 2], kind="stable")
        row, code, count = shared.row[order], shared.col[order], shared.data[order]
        target_sg = pairs[row, 2]
        bounds = np.flatnonzero(np.r_[True, target_sg[1:] != target_sg[:-1], True])
        for a, b in zip(bounds[:-1], bounds[1:]):
            ctx.send_to_subgraph(int(target_sg[a]), (pairs[row[a:b], 1], vocab[code[a:b]], count[a:b]))

    @staticmethod
    def _add(subgraph, local, tags, counts) -> None:
        state = subgraph.state
        vocab, code = np.unique(np.concatenate([state["vocab"], tags]), return_inverse=True)
        old = state["counts"].tocoo()
        known = len(state["vocab"])
        rows = np.concatenate([old.row, local])
        cols = np.concatenate([code[:known][old.col], code[known:]])
        data = np.concatenate([old.data, counts])
        state["vocab"] = vocab
        state["counts"] = sp.csr_matrix((data, (rows, cols)), shape=(subgraph.num_vertices, len(vocab)))

    def output(self, subgraph):
        return list_columns(subgraph.state["vocab"], subgraph.state["counts"])

    def merge(self, subgraph, states, ctx):
        subgraph.state["posts"] = functools.reduce(add_posts, (s["posts"] for s in states.values()))

    def merge_output(self, subgraph):
        return list_columns(*subgraph.state["posts"])


@dataclass
class HashtagSummary:
    """``neighbourhood``: (instance, id, hashtag, count) for every non-zero closed-neighbourhood
    count; ``top``: (rank, hashtag, count), the ``k`` most posted hashtags over all selected
    instances (ties by hashtag), ranked on Spark; ``result``: the run (metrics, per-instance
    list columns, and as ``merged`` every vertex's own posts over the instances)."""

    neighbourhood: object
    top: object
    result: TimeSeriesResult


def hashtag_aggregation(store, k: int = 10, attribute: str = "hashtags", instances=None, time=None,
                        **engine_options) -> HashtagSummary:
    """Per-instance neighbourhood hashtag counts and the merged top-``k`` hashtags.

    Parameters
    ----------
    k : how many hashtags the merged ranking keeps.
    attribute : per-instance vertex attribute holding each vertex's posts (list<string>).
    instances, time : which instances (ids, or a time / (start, end) range; default all).

    Example
    -------
    >>> g = goffish.temporal.social_with_posts("/tmp/social.gofs", 10_000, intervals=24)
    >>> g.hashtag_aggregation(k=5).top.show()
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise InputError(f"hashtag_aggregation: k must be an integer >= 1, got {k!r}")
    selected = select_instances(store, instances, time)
    require_attribute(store, attribute, selected)
    result = run_eventually_dependent(store, HashtagAggregation(attribute), instances=[i["id"] for i in selected],
                                      **engine_options)
    pairs = F.explode(F.arrays_zip("hashtags", "counts")).alias("pair")
    neighbourhood = result.dataframe.select("instance", "id", pairs).select(
        "instance", "id", F.col("pair.hashtags").alias("hashtag"), F.col("pair.counts").alias("count"))
    posted = result.merged.select(pairs).select(F.col("pair.hashtags").alias("hashtag"),
                                                F.col("pair.counts").alias("count"))
    ranking = [F.desc("count"), F.asc("hashtag")]
    totals = posted.groupBy("hashtag").agg(F.sum("count").alias("count")).orderBy(*ranking).limit(k)
    top = totals.select(F.row_number().over(Window.orderBy(*ranking)).alias("rank"), "hashtag", "count")
    return HashtagSummary(neighbourhood, top, result)


register(Algorithm(
    name="hashtag_aggregation", function=hashtag_aggregation, cli="hashtags", timeseries=True,
    summary="per-instance neighbourhood hashtag counts and the merged top-k (OUT/neighbourhood, OUT/top)",
    returns=("hashtag", "count"),
    flags={"k": Flag("how many hashtags the merged ranking keeps", flag="--top"),
           "attribute": Flag("per-instance list<string> of posts"),
           "instances": Flag("comma-separated instance ids (default: all)", kind="instances"),
           "time": Flag("instances covering TIME or overlapping START,END", kind="time")},
    frames=lambda summary: {"neighbourhood": summary.neighbourhood, "top": summary.top},
    metrics=lambda summary: summary.result.metrics,
))
