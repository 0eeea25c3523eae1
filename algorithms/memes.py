"""Meme tracking: how a meme (e.g. a hashtag) spread over a time series of posts.

Sequentially dependent pattern. Each instance holds, per vertex, what it
posted then (a list<string> vertex attribute). A vertex becomes a *carrier*
in the first instance in which it posts the meme. Its *parent* is the
neighbour it most plausibly got the meme from: among its neighbours that
became carriers in an earlier instance, one of those that did so most
recently (the latest exposure); ties go to the smallest GoFS vertex index
(``store.vid_of``), so the answer is deterministic. A carrier with no such
neighbour is an origin (parent null). Neighbours follow edge direction on a
directed graph (u -> v: v sees u's posts) and both ways on an undirected one.

Per instance, every sub-graph marks its new carriers (vectorised over its
vertices), sets their parents from the exposures it heard, and sends each new
carrier's index forward to its neighbours; a min combiner keeps the smallest
index per neighbour, and the next instance's exposures replace older ones.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from pyspark.sql import functions as F

from algorithms.hashtags import posts, require_attribute
from algorithms.registry import Algorithm, Flag, register
from gofs.errors import InputError
from gopher.timeseries import TimeSeriesProgram, TimeSeriesResult, run_sequential, select_instances


class MemeTracking(TimeSeriesProgram):
    """Per vertex: the instance it first posted ``meme`` in, and its parent's dense index."""

    combiner = "min"
    message_dtype = "int64"
    stop_when_quiet = False          # a meme may start (again) in any later instance
    output_schema = {"first_instance": pa.int64(), "parent_vid": pa.int64()}

    def __init__(self, meme: str, attribute: str = "hashtags"):
        self.meme = meme
        self.attribute = attribute
        self.instance_vertex_attributes = (attribute,)

    def compute(self, subgraph, messages, ctx):
        state = subgraph.state
        n = subgraph.num_vertices
        if "first" not in state:
            state.update(first=np.full(n, -1, np.int64), parent=np.full(n, -1, np.int64),
                         exposure=np.full(n, -1, np.int64))
        first, parent, exposure = state["first"], state["parent"], state["exposure"]
        exposure[messages.vertices] = messages.values
        owner, tags = posts(subgraph, self.attribute)
        new = np.zeros(n, dtype=bool)
        new[owner[tags == self.meme]] = True
        new &= first < 0
        first[new] = ctx.instance["id"]
        parent[new] = exposure[new]
        if new.any():
            self._notify(subgraph, new, ctx)
        ctx.vote_to_halt()

    @staticmethod
    def _notify(subgraph, new, ctx) -> None:
        adjacency = subgraph.adjacency()
        rows = np.repeat(np.arange(subgraph.num_vertices), np.diff(adjacency.indptr))
        local = new[rows] & (subgraph.state["first"][adjacency.indices] < 0)
        ctx.send_forward_to_vertices(subgraph.vertex_ids[adjacency.indices[local]], subgraph.vertex_ids[rows[local]])
        remote = subgraph.remote_edges
        out = remote.outgoing(subgraph.directed) & new[remote.src]
        ctx.send_forward_to_vertices(remote.dst[out], subgraph.vertex_ids[remote.src[out]])

    def output(self, subgraph):
        first, parent = subgraph.state["first"], subgraph.state["parent"]
        return {"first_instance": pa.array(first, mask=first < 0), "parent_vid": pa.array(parent, mask=parent < 0)}


@dataclass
class MemeSpread:
    """``tree``: (id, first_instance, parent) for every carrier (parent null for origins);
    ``counts``: (instance, new_carriers) for every selected instance; ``result``: the run."""

    tree: object
    counts: object
    result: TimeSeriesResult


def meme_tracking(store, meme: str, attribute: str = "hashtags", instances=None, time=None,
                  **engine_options) -> MemeSpread:
    """The spread tree of ``meme`` over the selected instances, and new carriers per instance.

    Parameters
    ----------
    meme : the post value to track, e.g. ``"#meme0"``.
    attribute : per-instance vertex attribute holding each vertex's posts (list<string>).
    instances, time : which instances (ids, or a time / (start, end) range; default all).

    Example
    -------
    >>> g = goffish.temporal.social_with_posts("/tmp/social.gofs", 10_000, intervals=24)
    >>> spread = g.meme_tracking("#meme0")
    >>> spread.counts.show(); spread.tree.where("parent IS NULL").show()
    """
    if not isinstance(meme, str) or not meme:
        raise InputError(f"meme_tracking: meme must be a non-empty string, got {meme!r}")
    selected = select_instances(store, instances, time)
    require_attribute(store, attribute, selected)
    result = run_sequential(store, MemeTracking(meme, attribute), instances=[i["id"] for i in selected],
                            **engine_options)
    carriers = result.dataframe.where(F.col("first_instance").isNotNull())
    parents = store.vertex_id_frame().select(F.col("vid").alias("parent_vid"), F.col("id").alias("parent"))
    tree = carriers.join(parents, "parent_vid", "left").select("id", "first_instance", "parent")
    new = dict(carriers.groupBy("first_instance").count().collect())
    counts = store.spark.createDataFrame([(i["id"], new.get(i["id"], 0)) for i in selected],
                                         "instance long, new_carriers long")
    return MemeSpread(tree, counts, result)


register(Algorithm(
    name="meme_tracking", function=meme_tracking, cli="memes", timeseries=True,
    summary="the spread tree of a meme over the instances (OUT/tree, OUT/counts)", returns=("first_instance", "parent"),
    flags={"meme": Flag("the post value to track, e.g. '#meme0'"),
           "attribute": Flag("per-instance list<string> of posts"),
           "instances": Flag("comma-separated instance ids (default: all)", kind="instances"),
           "time": Flag("instances covering TIME or overlapping START,END", kind="time")},
    frames=lambda spread: {"tree": spread.tree, "counts": spread.counts},
    metrics=lambda spread: spread.result.metrics,
))
