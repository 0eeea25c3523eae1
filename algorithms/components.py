"""Weakly connected components, sub-graph-centric.

Each sub-graph is already connected (it is a weakly connected piece of its
partition), so only sub-graph labels move: every sub-graph starts with its
smallest vertex id and adopts the smallest label it hears, telling its
neighbours when it changes. Supersteps are bounded by the meta-graph's
diameter + 2, not the graph's (Simmhan et al., "GoFFish: A Sub-Graph Centric
Framework for Large-Scale Graph Analytics", Euro-Par 2014).

On an instance whose topology changes removed edges, a sub-graph may fall into
several pieces (:meth:`gopher.subgraph.Subgraph.pieces`): such a sub-graph keeps
a label per piece and tells each neighbouring vertex its piece's label (vertex
messages, min-combined); whole sub-graphs keep sending one label per neighbour.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from algorithms.registry import Algorithm, GraphFramesMethod, NetworkX, register
from gopher.engine import RunResult, run_program
from gopher.program import SubgraphProgram

NO_LABEL = np.iinfo(np.int64).max


class ConnectedComponents(SubgraphProgram):
    """Where every sub-graph of a partition is one piece (always on the template), a superstep runs
    once for the partition (:meth:`compute_partition`): one label per sub-graph in an array, one
    batch of messages to the neighbours of those whose label changed; otherwise per sub-graph
    (:meth:`compute`), a label per piece."""

    output_schema = {"component": pa.int64()}
    message_dtype = "int64"
    combiner = "min"
    partition_messages = True

    def compute_partition(self, subgraphs, ctx):
        state = subgraphs.partition_state
        local = subgraphs.local
        if ctx.superstep == 0:
            if not subgraphs.connected:
                return False
            labels = state["labels"] = np.full(subgraphs.total, NO_LABEL, dtype=np.int64)
            labels[local] = subgraphs.first_vertex_ids
            changed = np.ones(len(local), dtype=bool)
        elif "labels" not in state:          # the partition's sub-graphs keep their labels themselves
            return False
        else:
            labels = state["labels"]
            heard = np.full(subgraphs.total, NO_LABEL, dtype=np.int64)
            messages = ctx.partition_messages()
            if messages.payloads:            # from whole sub-graphs
                at = subgraphs.local_of(messages.targets)
                here = at >= 0
                np.minimum.at(heard, at[here], np.asarray(messages.payloads, np.int64)[here])
            if len(messages.vertices):       # from the pieces of a split sub-graph elsewhere
                np.minimum.at(heard, subgraphs.local_of_vertices(messages.vertices), messages.values)
            changed = heard[local] < labels[local]
            labels[local[changed]] = heard[local[changed]]
        if changed.any():
            ctx.send_to_neighbors_of(subgraphs.subset(changed), labels[local[changed]].tolist())
        return np.ones(len(local), dtype=bool)

    def output_partition(self, subgraphs):
        labels = subgraphs.partition_state.get("labels")
        if labels is None:
            return None
        return {"component": np.repeat(labels[subgraphs.local], subgraphs.vertex_counts)}

    def compute(self, subgraph, messages, ctx):
        count, piece = subgraph.pieces()
        propagate_labels(subgraph, messages, ctx, count, piece, start=ctx.superstep == 0)
        ctx.vote_to_halt()

    def output(self, subgraph):
        labels = subgraph.state["labels"]
        _, piece = subgraph.pieces()
        if piece is None:
            return {"component": np.full(subgraph.num_vertices, labels[0], dtype=np.int64)}
        return {"component": labels[piece]}


def propagate_labels(subgraph, messages, ctx, count: int, piece, usable=None, start: bool = False) -> int:
    """One superstep of smallest-label propagation between the pieces of a sub-graph and their
    neighbours; ``subgraph.state["labels"]`` holds one label per piece. ``piece``: None (one
    piece) or the piece of each local vertex, -1 outside every piece; ``usable``: the remote
    edges that connect (default all). ``start`` gives each piece its smallest vertex id.
    Returns how many pieces changed (and told their neighbours)."""
    state = subgraph.state
    if start:
        if piece is None:
            labels = np.array([subgraph.first_vertex_id], dtype=np.int64)
        else:
            labels = np.full(count, NO_LABEL, dtype=np.int64)
            inside = piece >= 0
            np.minimum.at(labels, piece[inside], subgraph.vertex_ids[inside])
        changed = np.ones(count, dtype=bool)
    else:
        labels = state["labels"]
        heard = heard_labels(subgraph, messages, count, piece)
        changed = heard < labels
        labels = np.minimum(labels, heard)
    state["labels"] = labels
    if changed.any():
        tell_labels(subgraph, ctx, labels, changed, piece, usable)
    return int(changed.sum())


def heard_labels(subgraph, messages, count: int, piece) -> np.ndarray:
    """The smallest label each piece heard: vertex messages reach their vertex's piece (none for a
    vertex outside every piece, piece -1), sub-graph messages the pieces with an edge to the sender."""
    heard = np.full(count, NO_LABEL, dtype=np.int64)
    if len(messages.vertices):
        at = np.zeros(len(messages.vertices), np.int64) if piece is None else piece[messages.vertices]
        inside = at >= 0
        np.minimum.at(heard, at[inside], messages.values[inside])
    if messages.payloads:
        if piece is None:
            heard[0] = min(heard[0], min(messages.payloads))
        else:
            keys, best = _smallest_per_key(np.asarray(messages.senders, dtype=np.int64),
                                           np.asarray(messages.payloads, dtype=np.int64))
            remote = subgraph.remote_edges
            at = np.minimum(np.searchsorted(keys, remote.dst_subgraph), len(keys) - 1)
            hit = keys[at] == remote.dst_subgraph
            np.minimum.at(heard, piece[remote.src[hit]], best[at[hit]])
    return heard


def tell_labels(subgraph, ctx, labels, changed, piece, usable=None) -> None:
    """Send each changed piece's label over its remote edges (only the ``usable`` rows, when given:
    components of a selection of edges); a whole sub-graph tells its neighbours once."""
    if piece is None and usable is None:
        ctx.send_to_neighbors(int(labels[0]))
        return
    remote = subgraph.remote_edges
    at = np.zeros(len(remote), np.int64) if piece is None else piece[remote.src]
    rows = at >= 0
    rows[rows] = changed[at[rows]]
    if usable is not None:
        rows &= usable
    ctx.send_to_vertices(remote.dst[rows], labels[at[rows]])


def _smallest_per_key(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sorted unique keys, the smallest value given with each)."""
    order = np.lexsort((values, keys))
    keys, values = keys[order], values[order]
    first = np.r_[True, keys[1:] != keys[:-1]]
    return keys[first], values[first]


def connected_components(store, **engine_options) -> RunResult:
    """Weakly connected components of a GoFS graph, as ``networkx.weakly_connected_components``.

    Parameters
    ----------
    engine_options
        :class:`gopher.engine.EngineOptions` keywords (``instance=ID``: that instance's topology).

    Returns
    -------
    RunResult
        ``dataframe`` has columns ``id`` (original vertex id) and ``component`` (an int64
        label shared by exactly the vertices of one component: its smallest internal vertex id).

    Raises
    ------
    InputError
        A bad engine option (``instance`` that the graph does not have, ``tasks < 1``).

    Each sub-graph is already connected, so the run propagates the smallest label between
    sub-graphs only: supersteps are bounded by the meta-graph's diameter, not the graph's.

    Example
    -------
    >>> g = goffish.open("road.gofs")
    >>> g.connected_components().dataframe.show()
    """
    return run_program(store, ConnectedComponents(), **engine_options)


register(Algorithm(
    name="connected_components", function=connected_components, cli="cc",
    summary="weakly connected components (id, component)", returns=("component",),
    networkx=(
        NetworkX("connected_components", "sets", graphs="undirected"),
        NetworkX("number_connected_components", "count", graphs="undirected"),
        NetworkX("is_connected", "connected", graphs="undirected"),
        NetworkX("node_connected_component", "component_of", graphs="undirected"),
        NetworkX("weakly_connected_components", "sets", graphs="directed"),
        NetworkX("number_weakly_connected_components", "count", graphs="directed"),
        NetworkX("is_weakly_connected", "connected", graphs="directed"),
    ),
    graphframes=(GraphFramesMethod("connectedComponents", column="component", ours="component",
                                   ignored=("algorithm", "checkpointInterval", "broadcastThreshold")),),
))
