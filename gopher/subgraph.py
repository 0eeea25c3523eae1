"""The sub-graph a program's ``compute`` sees: topology views over its partition's arrays."""
from __future__ import annotations

import functools

import numpy as np

from gofs.errors import InputError
from gopher.cache import DEFAULT_BUDGET, TaskCache, WorkingSpace, nbytes


class RemoteEdges:
    """Edges between this sub-graph and others: ``src`` local vertex index, ``dst`` global
    vertex id, ``dst_subgraph``, ``dst_partition``; ``incoming`` marks edges that point
    into this sub-graph (directed graphs; for undirected graphs every row is usable both ways)."""

    __slots__ = ("src", "dst", "dst_subgraph", "dst_partition", "incoming", "_attrs")

    def __init__(self, src, dst, dst_subgraph, dst_partition, incoming, attrs):
        self.src, self.dst, self.dst_subgraph, self.dst_partition, self.incoming = (
            src, dst, dst_subgraph, dst_partition, incoming)
        self._attrs = attrs

    def __len__(self) -> int:
        return len(self.src)

    def attribute(self, name: str) -> np.ndarray:
        return self._attrs[name]

    def outgoing(self, directed: bool) -> np.ndarray:
        """Mask of rows that can be followed from this sub-graph outwards."""
        return ~self.incoming if directed else np.ones(len(self.src), dtype=bool)


def check_direction(direction: str) -> None:
    """Raise InputError unless ``direction`` is one a sub-graph's neighbours are listed by."""
    if direction not in ("out", "in", "both"):
        raise InputError(f"direction must be 'out', 'in' or 'both', not {direction!r}")


class Subgraph:
    """One sub-graph: a block of its partition's vertices and the edges touching them.

    Vertex arrays are indexed by *local* index 0..num_vertices-1; ``vertex_ids``
    maps them to global dense ids and ``ids`` to the user's original ids.
    ``state`` is a dict that survives across supersteps. ``working`` holds what a run keeps in
    the worker between supersteps without shipping it (a :class:`gopher.cache.WorkingSpace`:
    ``get(key)`` / ``put(key, value)`` / ``discard(key)``, under the run's cache budget, so
    ``get`` may return None and the program rebuilds from ``state``). ``partition_pass`` does
    work once for all the sub-graphs of the partition (in this instance), each taking its rows.
    ``kept(key, build)`` gives what depends only on the partition's topology (``build()``'s
    result) from where it outlives the process, where the run has such a place for this topology
    (the executor's disk cache: :func:`gopher.worker.partition_view`); else it builds it.
    """

    def __init__(self, bundle, k: int, instance_vertex: dict | None = None, instance_edge: dict | None = None,
                 account=None, working: WorkingSpace | None = None, shared: dict | None = None,
                 process_pass=None, kept=None):
        self._bundle = bundle
        self._k = k
        self.id = bundle.subgraph_id(k)
        self.partition = bundle.partition
        self.directed = bundle.directed
        self._v0, self._v1 = int(bundle.sg_starts[k]), int(bundle.sg_starts[k + 1])
        self._e0, self._e1 = int(bundle.local_bounds[k]), int(bundle.local_bounds[k + 1])
        self._r0, self._r1 = int(bundle.remote_bounds[k]), int(bundle.remote_bounds[k + 1])
        self.state: dict = {}
        self._instance_vertex: dict = instance_vertex or {}
        self._instance_edge: dict = instance_edge or {}
        self._account = account or (lambda size: None)
        if working is None:                    # a sub-graph outside a run keeps its own
            own = TaskCache().scoped(DEFAULT_BUDGET)
            working = WorkingSpace(lambda: own, ())
        self.working = working
        self._shared = {} if shared is None else shared
        self._process_pass = process_pass
        self._kept = kept or _build_here
        self._neighbors: dict = {}             # direction -> neighbors(direction)

    @classmethod
    def spanning(cls, bundle, instance_vertex: dict | None = None, instance_edge: dict | None = None) -> "Subgraph":
        """The whole partition as one Subgraph: its local index is the position in the partition
        and its local / remote edges are all the partition's (``id`` is None; ``pieces`` does not apply)."""
        whole = cls(bundle, 0, instance_vertex, instance_edge)
        whole.id = None
        whole._v0, whole._v1 = int(bundle.sg_starts[0]), int(bundle.sg_starts[-1])
        whole._e0, whole._e1 = int(bundle.local_bounds[0]), int(bundle.local_bounds[-1])
        whole._r0, whole._r1 = int(bundle.remote_bounds[0]), int(bundle.remote_bounds[-1])
        return whole

    def partition_pass(self, key, build):
        """``build(whole)`` run once for every sub-graph of this partition in this instance
        (``whole``: :meth:`spanning`), its result kept with the instance's attributes: one
        vectorised pass over the partition's arrays instead of one small pass per sub-graph. A
        sub-graph takes its rows with :attr:`vertex_rows`, :attr:`edge_rows` and
        :attr:`remote_rows`. ``key`` names everything the result depends on besides the
        partition, the instance and the program class."""
        if key not in self._shared:
            self._shared[key] = build(Subgraph.spanning(self._bundle, self._instance_vertex, self._instance_edge))
            self._account(nbytes(self._shared[key]))
        return self._shared[key]

    def process_pass(self, key, build):
        """``build()`` run once in this worker process for the graph version and instance, its
        result shared by every partition the process computes and kept in the process's task
        cache under the run's budget (it may be evicted between supersteps: then the next call
        builds again). For what depends on the whole graph, not on the partition (a gathered
        topology): one copy per process, not one per partition. ``key`` names everything the
        result depends on besides the graph version, the instance and the program class. A
        sub-graph outside a run keeps the result with its partition's."""
        if self._process_pass is not None:
            return self._process_pass(key, build)
        return self.partition_pass(("process pass", key), lambda _: build())

    @property
    def vertex_rows(self) -> slice:
        """This sub-graph's vertices among the partition's (see :meth:`partition_pass`)."""
        return slice(self._v0, self._v1)

    @property
    def edge_rows(self) -> slice:
        """This sub-graph's local edges among the partition's."""
        return slice(self._e0, self._e1)

    @property
    def remote_rows(self) -> slice:
        """This sub-graph's remote edges among the partition's."""
        return slice(self._r0, self._r1)

    @property
    def num_vertices(self) -> int:
        """Vertices of this sub-graph; local index ``i`` in ``0..num_vertices-1`` names each."""
        return self._v1 - self._v0

    @property
    def num_edges(self) -> int:
        """Local edges (both ends in this sub-graph), each counted once."""
        return self._e1 - self._e0

    @functools.cached_property
    def vertex_ids(self) -> np.ndarray:
        """Internal vid (int64) of each local vertex, by local index (what messages address)."""
        return self._bundle.vertex_ids(self._v0, self._v1)

    @property
    def first_vertex_id(self) -> int:
        """The smallest vid here. Template sub-graphs hold the vids ``first_vertex_id + local``;
        the sub-graph of vertices an instance adds does not (use ``vertex_ids``/``local_index``)."""
        return int(self.vertex_ids[0]) if self._v1 > self._v0 else self._bundle.vid_offset + self._v0

    @property
    def ids(self) -> np.ndarray:
        """Original vertex id (as ingested: int64 or str) of each local vertex, by local index."""
        return self._bundle.ids[self._v0:self._v1]

    @property
    def edge_src(self) -> np.ndarray:
        """Local index of each local edge's source (with ``edge_dst``: the local edge list)."""
        return self._bundle.local_src[self._e0:self._e1] - self._v0

    @property
    def edge_dst(self) -> np.ndarray:
        """Local index of each local edge's destination, aligned with ``edge_src``."""
        return self._bundle.local_dst[self._e0:self._e1] - self._v0

    def local_index(self, vertex_ids: np.ndarray) -> np.ndarray:
        """Local index of each of ``vertex_ids``, -1 for a vid that is not in this sub-graph."""
        vertex_ids = np.asarray(vertex_ids, dtype=np.int64)
        local = self._bundle.local_index(vertex_ids) - self._v0
        inside = (local >= 0) & (local < self.num_vertices)
        inside[inside] = self.vertex_ids[local[inside]] == vertex_ids[inside]
        return np.where(inside, local, -1)

    def vertex_attribute(self, name: str) -> np.ndarray:
        """Values of vertex attribute ``name`` by local index: the instance's value where the run
        is on an instance that has it, else the template's. Raises KeyError for an unknown name."""
        if name in self._instance_vertex:
            return self._instance_vertex[name][self._v0:self._v1]
        return self._bundle.vertex_attributes[name][self._v0:self._v1]

    def edge_attribute(self, name: str) -> np.ndarray:
        """Values of a local-edge attribute, aligned with ``edge_src``/``edge_dst``."""
        source = self._instance_edge if name in self._instance_edge else self._bundle.edge_attributes
        return source[name][0][self._e0:self._e1]

    @functools.cached_property
    def remote_edges(self) -> RemoteEdges:
        """Edges with one end here and one in another sub-graph: local source, destination vid,
        its sub-graph and partition, whether the edge points in, and its attributes."""
        b, r = self._bundle, slice(self._r0, self._r1)
        return RemoteEdges(b.remote_src[r] - self._v0, b.remote_dst[r], b.remote_dst_sg[r],
                           b.remote_dst_part[r], b.remote_incoming[r], _RemoteAttributes(self, r))

    def pieces(self) -> tuple[int, np.ndarray | None]:
        """(count, piece of each local vertex) of the weakly connected pieces of the local edges.

        A template sub-graph is one piece by construction (the piece array is None). In an
        instance whose topology changes removed edges, a sub-graph keeps its vertices and id
        but may fall into several pieces, numbered 0.. in order of their first vertex."""
        b = self._bundle
        if b.piece is None or b.piece_counts[self._k] == 1:
            return 1, None
        return int(b.piece_counts[self._k]), b.piece[self._v0:self._v1]

    def neighbors(self, direction: str = "both") -> np.ndarray:
        """Ids of adjacent sub-graphs: "out", "in" or "both" (same for undirected graphs).
        Read-only, worked out once per sub-graph: a program may ask every superstep."""
        try:
            return self._neighbors[direction]
        except KeyError:
            pass
        check_direction(direction)
        remote = self.remote_edges
        mask = slice(None) if direction == "both" or not self.directed else ~remote.incoming \
            if direction == "out" else remote.incoming
        ids = np.unique(remote.dst_subgraph[mask])
        ids.flags.writeable = False
        self._neighbors[direction] = ids
        return ids

    def adjacency(self, weight: str | None = None, symmetric: bool | None = None):
        """Local adjacency as CSR (row = source). Undirected graphs are symmetrised.
        Parallel edges keep the smallest weight (what shortest paths need). The sort behind
        it depends only on the topology, so it is done once for the whole partition, kept with
        it, and each sub-graph takes its rows of it (a sub-graph's local edges join only its own
        vertices), for every weight and every instance (time-series runs build one matrix per
        instance): one sort per partition, not one per sub-graph in a fresh worker's first superstep,
        and none where the sort is kept on the executor's disk (the 1M road grid's 8 partitions: sorted
        in ~0.17 CPU-s, loaded in ~0.02).
        Returns a ``scipy.sparse.csr_matrix`` (scipy is imported on first use: a program that
        never asks for a matrix does not pay for it when its worker starts)."""
        import scipy.sparse as sp

        symmetric = (not self.directed) if symmetric is None else symmetric
        key = ("adj", weight, symmetric)
        cached = self.__dict__.setdefault("_matrices", {})
        if key not in cached:
            arcs = self._layout_part("arcs", symmetric)
            indptr, indices = _block_arcs(arcs, self._v0, self._v1)
            if weight is None:               # every length 1: no smallest of parallel edges to take
                values = np.ones(len(indices))
            else:
                edge, starts = _block_entries(self._layout_part("entries", symmetric), arcs[0], self._v0, self._v1,
                                              self._e0)
                data = self.edge_attribute(weight).astype(np.float64)
                values = np.fmin.reduceat(data[edge], starts) if len(starts) else np.empty(0)
            cached[key] = sp.csr_matrix((values, indices, indptr), shape=(self.num_vertices, self.num_vertices))
            self._account(nbytes(cached[key]))
        return cached[key]

    def _layout_part(self, part: str, symmetric: bool) -> tuple:
        """A ``part`` of the partition's :func:`_csr_layout`, held with its bundle and kept apart
        (``kept``): "arcs" (indptr, indices), all a hop-count matrix reads, or "entries" (edge of
        each entry, first entry of each arc), what takes the smallest length of parallel edges.
        One sort makes both."""
        b = self._bundle
        held = b.__dict__.setdefault("_csr_layouts", {})
        if (part, symmetric) not in held:
            def sort():
                edge, starts, indptr, indices = _csr_layout(b.local_src, b.local_dst, b.num_vertices, symmetric)
                made = {"arcs": (indptr, indices), "entries": (edge, starts)}
                for other, value in made.items():
                    if other != part:
                        held[(other, symmetric)] = self._kept((f"csr {other}", symmetric), lambda v=value: v)
                return made[part]
            held[(part, symmetric)] = self._kept((f"csr {part}", symmetric), sort)
        return held[(part, symmetric)]

    def derived(self, key, build):
        """Topology-derived data (matrices, degrees) built once per worker and kept with
        the topology in the task cache: never shipped between supersteps, rebuilt by
        ``build()`` where missing. Scoped to the program class that built it."""
        cache = self.__dict__.setdefault("_derived", {})
        if key not in cache:
            cache[key] = build()
            self._account(nbytes(cache[key]))
        return cache[key]

    def igraph(self, weight: str | None = None):
        """An igraph.Graph of the local topology (vertex i = local index i)."""
        import igraph as ig

        g = ig.Graph(n=self.num_vertices, edges=np.column_stack([self.edge_src, self.edge_dst]),
                     directed=self.directed)
        if weight is not None:
            g.es[weight] = self.edge_attribute(weight)
        return g

    def __repr__(self) -> str:
        return f"Subgraph(id={self.id}, partition={self.partition}, vertices={self.num_vertices}, edges={self.num_edges})"


class _RemoteAttributes:
    def __init__(self, subgraph: Subgraph, rows: slice):
        self._sg, self._rows = subgraph, rows

    def __getitem__(self, name):
        source = self._sg._instance_edge if name in self._sg._instance_edge else self._sg._bundle.edge_attributes
        return source[name][1][self._rows]


def _build_here(key, build):
    """A sub-graph's ``kept`` where its topology has no place outside the process."""
    return build()


def _csr_layout(src, dst, n, symmetric: bool):
    """How edge weights become a CSR that keeps the minimum over duplicate (src, dst) entries:
    (edge of each entry in (src, dst) order, first entry of each pair, indptr, indices).
    Weights then need only a gather and ``np.fmin.reduceat``; explicit zeros are kept.

    The (src, dst) order is a stable sort of one key, ``src * n + dst`` (exact below 3e9
    vertices), the order ``np.lexsort((dst, src))`` gives at a third of its time: in a fresh
    worker, a run's first superstep builds every layout it needs. ``indptr`` and ``indices`` are
    32-bit where they fit, as scipy keeps them: its matrix then takes them without scanning them."""
    edge = np.arange(len(src))
    if symmetric:
        src, dst, edge = np.concatenate([src, dst]), np.concatenate([dst, src]), np.concatenate([edge, edge])
    order = np.argsort(src * n + dst, kind="stable")
    src, dst, edge = src[order], dst[order], edge[order]
    first = np.ones(len(src), dtype=bool)
    first[1:] = (src[1:] != src[:-1]) | (dst[1:] != dst[:-1])
    starts = np.flatnonzero(first)
    index = np.int32 if max(n, len(starts)) < 2 ** 31 - 1 else np.int64    # what scipy would keep (it checks otherwise)
    indptr = np.zeros(n + 1, dtype=index)
    np.cumsum(np.bincount(src[starts], minlength=n), out=indptr[1:])
    return edge, starts, indptr, dst[starts].astype(index)


def _block_arcs(arcs, v0: int, v1: int):
    """(indptr, indices) of the vertices ``v0:v1`` out of their partition's (the "arcs" of
    :meth:`Subgraph._layout_part`), where no edge leaves the block (a sub-graph's local edges)."""
    indptr, indices = arcs
    p0, p1 = int(indptr[v0]), int(indptr[v1])
    return indptr[v0:v1 + 1] - p0, indices[p0:p1] - v0


def _block_entries(entries, indptr, v0: int, v1: int, e0: int):
    """(edge of each entry, first entry of each arc) of the same block out of the partition's
    "entries" (``indptr``: the partition's), its edges numbered from ``e0``: what takes a weighted
    block's lengths (hop counts need neither)."""
    edge, starts = entries
    p0, p1 = int(indptr[v0]), int(indptr[v1])
    f0 = int(starts[p0]) if p0 < len(starts) else len(edge)
    f1 = int(starts[p1]) if p1 < len(starts) else len(edge)
    return edge[f0:f1] - e0, starts[p0:p1] - f0
