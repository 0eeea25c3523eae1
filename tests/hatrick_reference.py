"""A slow, obviously correct reference for Hatrick's update semantics (tests only):
one update at a time on Python dicts, as documented in hatrick.live."""
from __future__ import annotations

import networkx as nx
import numpy as np
import pandas as pd


class Reference:
    def __init__(self, vertices, edges, directed=False):
        self.directed = directed
        self.vertices = {v: {} for v in vertices}
        self.edges = {}                       # key -> [mult, attrs, (src, dst)]
        for u, v in edges:
            self._add_edge(u, v)

    def _key(self, u, v):
        return (u, v) if self.directed else frozenset((u, v))

    def _add_edge(self, u, v):
        for x in (u, v):
            self.vertices.setdefault(x, {})
        key = self._key(u, v)
        if key in self.edges and self.edges[key][0] > 0:
            self.edges[key][0] += 1
        else:
            self.edges[key] = [1, {}, (u, v)]

    def apply(self, update) -> str | None:
        op = update["op"]
        if op == "add_vertex":
            self.vertices.setdefault(update["id"], {})
        elif op == "remove_vertex":
            x = update["id"]
            if x not in self.vertices:
                return "unknown vertex"
            del self.vertices[x]
            for key in [k for k in self.edges if x in k]:  # (u, v) or frozenset
                del self.edges[key]
        elif op == "add_edge":
            self._add_edge(update["src"], update["dst"])
        elif op in ("remove_edge", "set_edge"):
            u, v = update["src"], update["dst"]
            if u not in self.vertices or v not in self.vertices:
                return "unknown vertex"
            key = self._key(u, v)
            if key not in self.edges:
                return "no such edge"
            if op == "remove_edge":
                self.edges[key][0] -= 1
                if self.edges[key][0] == 0:
                    del self.edges[key]
            else:
                self._set(self.edges[key][1], update["attribute"], update.get("value"))
        elif op == "set_vertex":
            if update["id"] not in self.vertices:
                return "unknown vertex"
            self._set(self.vertices[update["id"]], update["attribute"], update.get("value"))
        return None

    @staticmethod
    def _set(attrs, name, value):
        if value is None or (isinstance(value, float) and np.isnan(value)):
            attrs.pop(name, None)
        else:
            attrs[name] = value

    def nx(self):
        g = nx.MultiDiGraph() if self.directed else nx.MultiGraph()
        g.add_nodes_from(self.vertices)
        for key, (mult, _, (u, v)) in self.edges.items():
            for _ in range(mult):
                g.add_edge(u, v)
        return g

    def edge_counts(self) -> dict:
        return {k: m for k, (m, _, _) in self.edges.items()}

    def partition(self):
        g = self.nx()
        comps = nx.weakly_connected_components(g) if self.directed else nx.connected_components(g)
        return sorted(sorted(c) for c in comps)


def live_edge_counts(frame: pd.DataFrame, directed: bool) -> dict:
    out = {}
    for u, v in zip(frame["src"], frame["dst"]):
        k = (u, v) if directed else frozenset((u, v))
        out[k] = out.get(k, 0) + 1
    return out


def live_partition(frame: pd.DataFrame):
    return sorted(sorted(g["id"].tolist()) for _, g in frame.groupby("component"))
