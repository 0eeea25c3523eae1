"""The stored graph's latest state (its last instance, else its template) as live-graph objects.

Where a stream's workers run in Spark tasks, each task calls :func:`load_graph_state` itself
(reading GoFS on its executor) and keeps its buckets' part, so the initial live graph never
passes through the driver.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from gofs.manifest import overridden
from hatrick.live import State, build_state
from hatrick.updates import kind_of_type


def load_graph_state(graph) -> State:
    """The graph's latest state (last instance, else template), with its template's edges, vertex
    count and the static vertex values the last instance overrides (what snapshots are written
    against)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    template_ids = graph.vertex_ids.to_numpy(zero_copy_only=False)
    latest = graph.instances[-1]["id"] if graph.instances else None
    added = graph.added_vertices(graph.instances[-1]) if graph.instances else None
    ids = template_ids if added is None else \
        np.concatenate([template_ids, added.column("id").to_numpy(zero_copy_only=False)])
    index = pd.Index(ids)
    vkind, ekind, dyn_v, dyn_e = ({name: kind_of_type(t) for name, t in graph.attribute_types(kind, instance).items()}
                                  for instance in (False, True) for kind in ("vertex", "edge"))
    vattrs = [n for n, k in {**vkind, **dyn_v}.items() if k]
    eattrs = [n for n, k in {**ekind, **dyn_e}.items() if k]
    parts = range(graph.num_partitions)
    vt = pa.concat_tables([graph.read_vertex_partition(p, attributes=vattrs, instance=latest) for p in parts])
    et = pa.concat_tables([graph.read_edge_partition(p, attributes=eattrs, instance=latest) for p in parts])
    static_e = [n for n in ekind if ekind[n]]
    tt = pa.concat_tables([graph.read_edge_partition(p, attributes=static_e, internal=True) for p in parts])
    tt = tt.filter(pc.invert(tt.column("mirror")))          # each template edge once, with its eid
    t_src, t_dst = (template_ids[tt.column(c).to_numpy()] for c in ("src", "dst"))
    rows = index.get_indexer(vt.column("id").to_numpy(zero_copy_only=False))
    vcols = {}
    for name in vattrs:
        values = np.full(len(ids), None, dtype=object)
        values[rows] = vt.column(name).to_numpy(zero_copy_only=False)
        vcols[name] = ({**vkind, **dyn_v}[name], values)
    ecols = {n: ({**ekind, **dyn_e}[n], et.column(n).to_numpy(zero_copy_only=False)) for n in eattrs}
    shadowed = [n for n in overridden(graph.instances[-1], "vertex") if vkind.get(n)] if graph.instances else []
    template_vertex_values = None
    if shadowed:
        tv = pa.concat_tables([graph.read_vertex_partition(p, attributes=shadowed) for p in parts])
        template_vertex_values = {n: tv.column(n).to_numpy(zero_copy_only=False) for n in shadowed}
    state = build_state(ids, et.column("src").to_numpy(zero_copy_only=False),
                        et.column("dst").to_numpy(zero_copy_only=False), graph.directed, vcols, ecols,
                        static_vertex=[n for n in vkind if vkind[n]], static_edge=static_e,
                        time=graph.instances[-1]["end"] if graph.instances else float("-inf"),
                        template_edges=(t_src, t_dst, {n: tt.column(n).to_numpy(zero_copy_only=False) for n in static_e}),
                        template_vertices=len(template_ids), template_eids=tt.column("eid").to_numpy(),
                        template_vertex_values=template_vertex_values)
    return state
