"""Synthetic graphs and attribute time series for examples, tests and benchmarks.

GoFFish targets graphs whose topology changes slowly while attributes change
often, so each generator here builds a topology (a road network, a Graph500
power-law graph, or an LFR community graph) and the temporal generators build
one attribute table per instance on top of it. Everything is vectorised numpy
and deterministic given ``seed``, so a million-vertex graph takes seconds and a
benchmark can be re-created exactly from its generator call.

Example::

    >>> from goffish.generators import road_network, road_travel_times
    >>> g = road_network(10_000, seed=1)
    >>> hours = road_travel_times(g, hours=24)
    >>> len(hours), hours[8].num_rows == g.edges.num_rows
    (24, True)
"""
from __future__ import annotations

import gzip
import io
import os

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import scipy.sparse as sp

from gofs import files
from gofs.errors import InputError
from gofs.graph_input import GraphInput

__all__ = ["road_network", "rmat", "lfr", "road_travel_times", "social_posts",
           "generate", "write_edge_list"]

_ROAD_DROP = 0.55          # share of grid edges removed (before every vertex keeps one)
_ROAD_SHORTCUTS = 0.05     # share of grid cells that get a diagonal road
_ROAD_ISLANDS = 0.002      # small regions cut off from the rest, per vertex


def _table(**columns: np.ndarray) -> pa.Table:
    return pa.table({name: pa.array(values) for name, values in columns.items()})


def _unique_edges(src: np.ndarray, dst: np.ndarray, num_vertices: int, directed: bool,
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Sorted edges without self-loops or repeats (``src < dst`` when undirected)."""
    if not directed:
        src, dst = np.minimum(src, dst), np.maximum(src, dst)
    key = np.sort(src * num_vertices + dst)
    src, dst = np.divmod(key[np.r_[True, key[1:] != key[:-1]]], num_vertices) if key.size else (key, key)
    loop = src == dst
    return src[~loop], dst[~loop]


def road_network(num_vertices: int, seed: int = 0) -> GraphInput:
    """A planar, road-like undirected graph on exactly ``num_vertices`` vertices.

    Real road networks (SNAP's roadNet-CA: 1,965,206 vertices, 2,766,607 edges,
    2,638 components, diameter 849) are nearly planar, have average degree
    about 2.8, a diameter that grows like the square root of their size, and
    many small components beside one giant one. This model reproduces those
    properties: vertices sit on a square grid (row-major ids, jittered ``x``/
    ``y`` coordinates in km); 55% of grid edges are dropped, but every vertex
    keeps one random incident road, so isolated vertices are rare; 5% of cells
    get a diagonal shortcut; and about 2 small rectangular regions per 1,000
    vertices are cut off from the rest, giving the small components. Edges
    carry ``length`` (km, the jittered distance times a 1.0-1.4 winding
    factor, rounded to metres).
    """
    if num_vertices < 0:
        raise InputError(f"num_vertices must be >= 0, got {num_vertices}")
    rng = np.random.default_rng(seed)
    n = num_vertices
    side = max(1, int(np.ceil(np.sqrt(n))))
    ids = np.arange(n, dtype=np.int64)
    row, col = ids // side, ids % side

    region = np.zeros(n, dtype=np.int64)
    islands = rng.binomial(n, _ROAD_ISLANDS) if n else 0
    width, height = rng.integers(2, 6, islands), rng.integers(1, 5, islands)
    corner = rng.integers(0, max(n, 1), islands)
    island = np.repeat(np.arange(islands), width * height)
    cell = np.arange(island.size) - np.repeat(np.cumsum(width * height) - width * height, width * height)
    cell_row = row[corner][island] + cell // width[island]
    cell_col = col[corner][island] + cell % width[island]
    member = cell_row * side + cell_col
    inside = (cell_col < side) & (member < n)
    region[member[inside]] = island[inside] + 1

    right, down = ids + 1, ids + side
    step = np.stack([right, down, ids - 1, ids - side], axis=1)
    valid = np.stack([(col < side - 1) & (right < n), down < n, col > 0, row > 0], axis=1)
    valid &= region[np.clip(step, 0, max(n - 1, 0))] == region[:, None]
    keep_right = valid[:, 0] & (rng.random(n) >= _ROAD_DROP)
    keep_down = valid[:, 1] & (rng.random(n) >= _ROAD_DROP)
    choice = np.argmax(np.where(valid, rng.random((n, 4)), -1.0), axis=1)
    has_road = valid.any(axis=1)
    keep_right[ids[has_road & (choice == 0)]] = True
    keep_down[ids[has_road & (choice == 1)]] = True
    keep_right[ids[has_road & (choice == 2)] - 1] = True
    keep_down[ids[has_road & (choice == 3)] - side] = True

    diagonal = (col < side - 1) & (ids + side + 1 < n) & (rng.random(n) < _ROAD_SHORTCUTS)
    anti = rng.random(n) < 0.5
    diag_src = np.where(anti, ids + 1, ids)[diagonal]
    diag_dst = np.where(anti, ids + side, ids + side + 1)[diagonal]
    same = region[diag_src] == region[diag_dst]

    src = np.concatenate([ids[keep_right], ids[keep_down], diag_src[same]])
    dst = np.concatenate([right[keep_right], down[keep_down], diag_dst[same]])
    src, dst = _unique_edges(src, dst, n, directed=False)

    x = col + rng.uniform(-0.3, 0.3, n)
    y = row + rng.uniform(-0.3, 0.3, n)
    winding = rng.uniform(1.0, 1.4, src.size)
    length = np.round(np.hypot(x[src] - x[dst], y[src] - y[dst]) * winding, 3)
    return GraphInput(edges=_table(src=src, dst=dst, length=length),
                      vertices=_table(id=ids, x=x, y=y), directed=False,
                      source=f"goffish.generators.road_network({num_vertices}, seed={seed})",
                      name=f"road-{num_vertices}")


def rmat(scale: int, edge_factor: int = 16, a: float = 0.57, b: float = 0.19,
         c: float = 0.19, seed: int = 0, directed: bool = True) -> GraphInput:
    """A Graph500 Kronecker (R-MAT) power-law graph on ``2**scale`` vertices.

    Follows the Graph500 reference generator (Chakrabarti, Zhan and Faloutsos,
    "R-MAT: A Recursive Model for Graph Mining", SDM 2004): ``edge_factor *
    2**scale`` edges, each placed by ``scale`` recursive choices of a quadrant
    with probabilities ``a``, ``b``, ``c`` and ``1 - a - b - c``; vertex ids
    are then randomly permuted so that degree does not follow id. Self-loops
    and repeated edges are removed, so slightly fewer edges remain. Edges carry
    a ``weight`` uniform in (0, 1]; ``vertices`` lists all ``2**scale`` ids.
    """
    if not 0 <= scale <= 31:
        raise InputError(f"scale must be in 0..31, got {scale}")
    if min(a, b, c) < 0 or a + b + c > 1:
        raise InputError(f"need a, b, c >= 0 and a + b + c <= 1, got {a}, {b}, {c}")
    rng = np.random.default_rng(seed)
    n, m = 1 << scale, edge_factor << scale
    src = np.zeros(m, dtype=np.int64)
    dst = np.zeros(m, dtype=np.int64)
    c_norm = np.float32(c / (1 - (a + b)) if a + b < 1 else 0.0)
    a_norm = np.float32(a / (a + b) if a + b > 0 else 0.0)
    for bit in range(scale):
        src_bit = rng.random(m, dtype=np.float32) > np.float32(a + b)
        dst_bit = rng.random(m, dtype=np.float32) > np.where(src_bit, c_norm, a_norm)
        src += src_bit.astype(np.int64) << bit
        dst += dst_bit.astype(np.int64) << bit
    permutation = rng.permutation(n)
    src, dst = _unique_edges(permutation[src], permutation[dst], n, directed)
    weight = 1.0 - rng.random(src.size)
    return GraphInput(edges=_table(src=src, dst=dst, weight=weight),
                      vertices=_table(id=np.arange(n, dtype=np.int64)), directed=directed,
                      source=(f"goffish.generators.rmat({scale}, {edge_factor}, a={a}, b={b}, c={c}, "
                              f"seed={seed}, directed={directed})"),
                      name=f"rmat-{scale}")


def _power_law(u: np.ndarray, low: float, high: float, exponent: float) -> np.ndarray:
    """Inverse CDF of the density ``x ** -exponent`` on ``[low, high]``."""
    if np.isclose(exponent, 1.0):
        return low * (high / low) ** u
    e = 1.0 - exponent
    return (low ** e + u * (high ** e - low ** e)) ** (1.0 / e)


def _wire(stubs: np.ndarray, community: np.ndarray, internal: bool, rng: np.random.Generator,
          rounds: int = 10) -> np.ndarray:
    """Configuration-model wiring of ``stubs`` (one entry per edge end, as vertex ids).

    Stubs are paired at random, within a community when ``internal`` and across
    communities otherwise. Pairs that would make a self-loop, a repeated edge
    or (for external stubs) an edge inside a community are undone and their
    stubs re-paired, for up to ``rounds`` rounds. Returns the sorted edges as
    keys ``low * n + high``. Only ``np.sort`` is used, as it is much faster
    than ``argsort`` or ``unique`` on millions of keys.
    """
    n = community.size
    edges = np.zeros(0, dtype=np.int64)
    for _ in range(rounds):
        if stubs.size < 2:
            break
        stubs = rng.permutation(stubs)
        pool = community[stubs] if internal else np.zeros(stubs.size, dtype=np.int64)
        pool, position = np.divmod(np.sort(pool * stubs.size + np.arange(stubs.size)), stubs.size)
        stubs = stubs[position]
        starts = np.flatnonzero(np.r_[True, pool[1:] != pool[:-1]])
        rank = np.arange(stubs.size) - np.repeat(starts, np.diff(np.r_[starts, stubs.size]))
        left = np.flatnonzero((rank[:-1] % 2 == 0) & (pool[1:] == pool[:-1]))
        paired = np.zeros(stubs.size, dtype=bool)
        paired[left] = paired[left + 1] = True
        u, v = stubs[left], stubs[left + 1]
        bad = (u == v) if internal else (u == v) | (community[u] == community[v])
        key = np.sort(np.minimum(u, v)[~bad] * n + np.maximum(u, v)[~bad])
        at = np.minimum(np.searchsorted(edges, key), max(edges.size - 1, 0))
        rejected = np.r_[False, key[1:] == key[:-1]] | (edges[at] == key if edges.size else False)
        if rejected.all():
            break
        edges = np.sort(np.concatenate([edges, key[~rejected]]))
        low, high = np.divmod(key[rejected], n)
        stubs = np.concatenate([stubs[~paired], u[bad], v[bad], low, high])
    return edges


def lfr(num_vertices: int, avg_degree: float = 10, max_degree: int = 50, mu: float = 0.1,
        tau1: float = 2.5, tau2: float = 1.5, min_community: int = 20,
        max_community: int = 100, seed: int = 0) -> GraphInput:
    """An undirected community benchmark in the style of LFR.

    Lancichinetti, Fortunato and Radicchi, "Benchmark graphs for testing
    community detection algorithms", Phys. Rev. E 78, 046110 (2008): degrees
    follow a power law with exponent ``tau1`` (minimum chosen to give
    ``avg_degree``), community sizes a power law with exponent ``tau2``, and
    each vertex has a fraction ``mu`` of its edges leaving its community. This
    is a simplified, vectorised LFR: vertices join random communities, and
    internal and external stubs are wired by two configuration models instead
    of LFR's rewiring loop; stubs that would form a self-loop or a repeated
    edge are re-paired a few times, then dropped, and a vertex's internal
    degree is capped at its community size minus one, so degrees can come out
    slightly below their targets. Vertices carry ``community`` (int64).
    """
    if not 0 <= mu <= 1:
        raise InputError(f"mu must be in [0, 1], got {mu}")
    if not 1 <= avg_degree <= max_degree:
        raise InputError(f"need 1 <= avg_degree <= max_degree, got {avg_degree}, {max_degree}")
    if not 1 <= min_community <= max_community:
        raise InputError(f"need 1 <= min_community <= max_community, got {min_community}, {max_community}")
    rng = np.random.default_rng(seed)
    n = num_vertices
    quantiles = (np.arange(1000) + 0.5) / 1000
    low, high = 1.0, float(max_degree)
    for _ in range(50):
        mid = (low + high) / 2
        if _power_law(quantiles, mid, max_degree, tau1).mean() < avg_degree:
            low = mid
        else:
            high = mid
    min_degree = (low + high) / 2
    degree = np.rint(_power_law(rng.random(n), min_degree, max_degree, tau1)).astype(np.int64)

    sizes = np.rint(_power_law(rng.random(n // min_community + 1), min_community,
                               max_community, tau2)).astype(np.int64)
    total = np.cumsum(sizes)
    count = int(np.searchsorted(total, n)) + 1
    sizes = sizes[:count]
    sizes[-1] = n - (total[count - 2] if count > 1 else 0)
    if count > 1 and sizes[-1] < min_community:
        sizes[-2] += sizes[-1]
        sizes = sizes[:-1]
    community = rng.permutation(np.repeat(np.arange(sizes.size), sizes))

    external = np.floor(mu * degree + rng.random(n)).astype(np.int64)
    internal = np.minimum(degree - external, sizes[community] - 1)
    vertex = np.arange(n, dtype=np.int64)
    key = np.sort(np.concatenate([_wire(np.repeat(vertex, internal), community, True, rng),
                                  _wire(np.repeat(vertex, external), community, False, rng)]))
    src, dst = np.divmod(key, max(n, 1))
    return GraphInput(edges=_table(src=src, dst=dst),
                      vertices=_table(id=vertex, community=community), directed=False,
                      source=(f"goffish.generators.lfr({num_vertices}, avg_degree={avg_degree}, "
                              f"max_degree={max_degree}, mu={mu}, tau1={tau1}, tau2={tau2}, "
                              f"min_community={min_community}, max_community={max_community}, seed={seed})"),
                      name=f"lfr-{num_vertices}")


def _rush_factor(hour_of_day: int) -> float:
    """Congestion multiplier: about 1 at night, peaking near 1.6 at 8h and 17h."""
    return 1.0 + 0.6 * np.exp(-0.5 * (hour_of_day - 8) ** 2) + 0.6 * np.exp(-0.5 * (hour_of_day - 17) ** 2)


def road_travel_times(graph: GraphInput, hours: int, seed: int = 0) -> list[pa.Table]:
    """Hourly edge travel times (minutes) for a road graph, one table per hour.

    Each table has one column ``travel_time`` (float64, > 0) aligned with
    ``graph.edges`` rows. Hour 0 is midnight. An edge's time is its
    ``length`` over a free-flow speed (40, 60 or 90 km/h), times a daily
    congestion profile peaking in the 7-9h and 16-18h rush hours, times a
    little per-hour noise; random incidents (about one per 1,000 edges per
    hour) make a single edge 2-5 times slower for 1-4 hours.
    """
    if "length" not in graph.edges.column_names:
        raise InputError(f"{graph.source}: road_travel_times needs an edge 'length' column "
                         f"(columns: {graph.edges.column_names})")
    rng = np.random.default_rng(seed)
    length = graph.edges.column("length").to_numpy()
    m = length.size
    speed = rng.choice([40.0, 60.0, 90.0], size=m, p=[0.6, 0.3, 0.1])
    free_flow = length / speed * 60.0

    incidents = rng.poisson(max(1.0, 1e-3 * m) * hours) if m else 0
    edge = rng.integers(0, max(m, 1), incidents)
    start = rng.integers(0, max(hours, 1), incidents)
    end = start + rng.integers(1, 5, incidents)
    slowdown = rng.uniform(2.0, 5.0, incidents)

    tables = []
    for hour in range(hours):
        factor = _rush_factor(hour % 24) * rng.lognormal(0.0, 0.05, m)
        active = (start <= hour) & (hour < end)
        incident = np.ones(m)
        np.maximum.at(incident, edge[active], slowdown[active])
        tables.append(_table(travel_time=free_flow * factor * incident))
    return tables


def _vertex_rows(graph: GraphInput) -> tuple[int, np.ndarray, np.ndarray]:
    """Number of vertex rows and the row of each edge's endpoints."""
    if graph.vertices is None:
        raise InputError(f"{graph.source}: social_posts needs a vertex table")
    ids = graph.vertices.column("id").to_numpy(zero_copy_only=False)
    order = np.argsort(ids, kind="stable")
    rows = []
    for column in ("src", "dst"):
        endpoint = graph.edges.column(column).to_numpy(zero_copy_only=False)
        at = np.searchsorted(ids, endpoint, sorter=order)
        found = at < ids.size
        found[found] = ids[order[at[found]]] == endpoint[found]
        if not found.all():
            raise InputError(f"{graph.source}: edge endpoint {endpoint[~found][0]!r} is not in the vertex table")
        rows.append(order[at])
    return ids.size, rows[0], rows[1]


def social_posts(graph: GraphInput, intervals: int, hashtags: int = 50, memes: int = 3,
                 seed: int = 0, spread: float = 0.3) -> list[pa.Table]:
    """Hashtags posted by each vertex per interval, one table per interval.

    Each table has one column ``hashtags`` (list<string>, often empty) aligned
    with ``graph.vertices`` rows. In each interval a fifth of the vertices
    post, using one or more of ``hashtags`` tags (``#tag0`` ...) drawn with
    Zipf-like popularity (weight ``1 / rank``). Each of ``memes`` special
    tags (``#meme0`` ...) starts at three seed vertices in a random interval
    of the first half, then spreads along edges (either direction) like an
    independent cascade: a vertex with a neighbour that posted the meme in an
    earlier interval posts it with probability ``spread`` per interval. This
    gives the tracking and reachability patterns that time-series programs
    and CGQL queries look for.
    """
    rng = np.random.default_rng(seed)
    n, src, dst = _vertex_rows(graph)
    adjacency = sp.coo_matrix((np.ones(2 * src.size), (np.r_[src, dst], np.r_[dst, src])),
                              shape=(n, n)).tocsr()
    names = pa.array([f"#tag{i}" for i in range(hashtags)] + [f"#meme{i}" for i in range(memes)])
    popularity = 1.0 / np.arange(1, hashtags + 1)
    popularity /= popularity.sum()
    seeds = rng.integers(0, max(n, 1), (memes, 3)) if n else np.zeros((memes, 0), np.int64)
    first = rng.integers(0, max(intervals // 2, 1), memes)
    carried = np.zeros((n, memes))

    tables = []
    for interval in range(intervals):
        count = np.where(rng.random(n) < (0.2 if hashtags else 0.0), 1 + rng.poisson(0.5, n), 0)
        tag_vertex = np.repeat(np.arange(n), count)
        tag = rng.choice(max(hashtags, 1), size=tag_vertex.size, p=popularity if hashtags else None)
        posts = (adjacency @ carried > 0) & (rng.random((n, memes)) < spread)
        posts &= interval > first
        starting = np.flatnonzero(first == interval)
        posts[seeds[starting].ravel(), np.repeat(starting, seeds.shape[1])] = True
        carried[posts] = 1.0
        meme_vertex, meme = np.nonzero(posts)

        vertex = np.concatenate([tag_vertex, meme_vertex])
        order = np.argsort(vertex, kind="stable")
        values = np.concatenate([tag, hashtags + meme])[order]
        offsets = np.r_[0, np.cumsum(np.bincount(vertex, minlength=n))].astype(np.int32)
        column = pa.ListArray.from_arrays(pa.array(offsets), names.take(pa.array(values, pa.int64())))
        tables.append(pa.table({"hashtags": column}))
    return tables


_KINDS = {"lfr": lfr, "rmat": rmat, "road": road_network}


def generate(kind: str, size: int, seed: int = 0, **kw) -> GraphInput:
    """Generate a graph by name, for the CLI and benchmark scripts.

    ``kind`` is ``"road"`` (``size`` vertices), ``"rmat"`` (``size`` is the
    scale: ``2**size`` vertices) or ``"lfr"`` (``size`` vertices); ``kw`` goes
    to the generator.
    """
    if kind not in _KINDS:
        raise InputError(f"unknown graph kind {kind!r}; choose one of: {', '.join(sorted(_KINDS))}")
    return _KINDS[kind](size, seed=seed, **kw)


def write_edge_list(graph: GraphInput, path: str, attrs: bool = True) -> None:
    """Write ``graph``'s edges as a SNAP-style text edge list.

    ``#`` comment lines describe the graph, then one ``src<TAB>dst[<TAB>attr
    ...]`` line per edge (edge attributes only when ``attrs``). Vertex
    attributes and isolated vertices are not written (the format has no place
    for them). A path ending in ``.gz`` is gzip-compressed, with a zero
    timestamp so the same graph gives the same bytes. The file is written to a
    temporary name and renamed, so readers never see a partial file.
    """
    edges = graph.edges if attrs else graph.edges.select(["src", "dst"])
    vertices = (graph.vertices.num_rows if graph.vertices is not None
                else pc.count_distinct(pa.chunked_array(graph.edges.column("src").chunks
                                                        + graph.edges.column("dst").chunks)).as_py())
    columns = "\t".join(["FromNodeId", "ToNodeId"] + edges.column_names[2:])
    header = (f"# {'Directed' if graph.directed else 'Undirected'} graph: {graph.name or graph.source}\n"
              f"# Source: {graph.source}\n"
              f"# Nodes: {vertices} Edges: {edges.num_rows}\n"
              f"# {columns}\n")
    def write(raw):
        stream = gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") if path.endswith(".gz") else raw
        text = io.TextIOWrapper(stream, encoding="utf-8", newline="\n")
        text.write(header)
        edges.to_pandas().to_csv(text, sep="\t", header=False, index=False)
        text.flush()
        text.detach()
        if stream is not raw:
            stream.close()          # the gzip trailer; ``raw`` stays open for write_atomic

    files.write_atomic(path, write=write)
