"""Weakly connected components, sub-graph-centric.

Each sub-graph is already connected (it is a weakly connected piece of its
partition), so only sub-graph labels move: every sub-graph starts with its
smallest vertex id and adopts the smallest label it hears, telling its
neighbours when it changes. Supersteps are bounded by the meta-graph's
diameter + 2, not the graph's (Simmhan et al., "GoFFish: A Sub-Graph Centric
Framework for Large-Scale Graph Analytics", Euro-Par 2014).
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from gopher.engine import RunResult, run_program
from gopher.program import SubgraphProgram


class ConnectedComponents(SubgraphProgram):
    output_schema = {"component": pa.int64()}

    def compute(self, subgraph, messages, ctx):
        state = subgraph.state
        if ctx.superstep == 0:
            state["label"] = subgraph.first_vertex_id
            ctx.send_to_neighbors(state["label"])
        elif messages.payloads:
            best = min(messages.payloads)
            if best < state["label"]:
                state["label"] = best
                ctx.send_to_neighbors(best)
        ctx.vote_to_halt()

    def output(self, subgraph):
        return {"component": np.full(subgraph.num_vertices, subgraph.state["label"], dtype=np.int64)}


def connected_components(store, **engine_options) -> RunResult:
    """Weakly connected components of a GoFS graph.

    Returns a RunResult whose ``dataframe`` has columns ``id`` (original vertex id)
    and ``component`` (an int64 label shared by exactly the vertices of one
    component: its smallest internal vertex id).

    Example
    -------
    >>> g = goffish.open("road.gofs")
    >>> g.connected_components().show()
    """
    return run_program(store, ConnectedComponents(), **engine_options)
