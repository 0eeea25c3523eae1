"""The main job on the embedded default: local Spark, local files, the sample road graph.

Ingests ``datasets/road-small.txt.gz`` into GoFS (METIS, 4 partitions), runs
connected components, SSSP and PageRank with Gopher, checks each against
igraph on the same edges, and prints a short summary.
"""
from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np

SAMPLE = Path(__file__).resolve().parents[1] / "datasets" / "road-small.txt.gz"


def ingest_sample(graph_input, path: str, spark):
    """The sample graph (``read_edge_list(SAMPLE, weight="length")``) stored as the demo stores it:
    METIS, 4 partitions (``bench --cold`` times the warm fixed cost on this same graph)."""
    import goffish

    return goffish.ingest(graph_input, path, num_partitions=4, partitioner="metis", overwrite=True, spark=spark)


def _check(name: str, ok: bool) -> str:
    return f"{name}: {'agrees with igraph' if ok else 'DIFFERS from igraph'}"


def _by_id(result, column: str, ids: np.ndarray) -> np.ndarray:
    """``column`` of a run's result in the order of ``ids``, read from the run's files (no Spark job)."""
    rows = result.to_arrow(["id", column])
    got = rows.column("id").to_numpy()
    order = np.argsort(got)
    found = order[np.searchsorted(got, ids, sorter=order).clip(0, len(got) - 1)]
    if not np.array_equal(got[found], ids):
        raise RuntimeError(f"the {column} result misses vertices of the graph")
    return rows.column(column).to_numpy()[found]


def main(spark, workdir: str | None = None) -> int:
    from algorithms.baselines import canonical_components, igraph_components, igraph_pagerank, igraph_sssp
    from gofs.ingest.read_local import read_edge_list

    workdir = workdir or tempfile.mkdtemp(prefix="goffish-demo-")
    path = str(Path(workdir) / "road-small.gofs")
    graph_input = read_edge_list(SAMPLE, weight="length")
    clock = time.perf_counter()
    g = ingest_sample(graph_input, path, spark)
    print(f"ingested {SAMPLE.name} in {time.perf_counter() - clock:.2f}s")
    print(g.info())

    ids = g.vertex_ids.to_numpy()
    src = g._id_index.get_indexer(graph_input.edges.column("src").to_numpy())
    dst = g._id_index.get_indexer(graph_input.edges.column("dst").to_numpy())
    length = graph_input.edges.column("length").to_numpy()
    n = len(ids)
    lines, ok = [], True

    cc = g.connected_components(progress=False)
    comp = _by_id(cc, "component", ids)
    reference = igraph_components(n, src, dst)
    same = np.array_equal(canonical_components(comp), canonical_components(reference))
    sizes = np.bincount(canonical_components(comp))
    ok &= same
    lines.append(f"connected components: {len(np.unique(comp))} components, largest {sizes.max():,} vertices, "
                 f"{cc.metrics.num_supersteps} supersteps, {cc.metrics.seconds:.2f}s; {_check('CC', same)}")

    source_vid = int(np.argmax(sizes[canonical_components(comp)]))
    source = ids[source_vid]
    sp = g.sssp(source, weight="length", progress=False)
    dist = _by_id(sp, "distance", ids)
    ref = igraph_sssp(n, src, dst, length, source_vid, directed=False)
    same = bool(np.allclose(dist, ref, rtol=0, atol=1e-9, equal_nan=False) and np.array_equal(np.isinf(dist), np.isinf(ref)))
    ok &= same
    reached = np.isfinite(dist)
    lines.append(f"sssp from {source}: {reached.sum():,} reached, farthest {dist[reached].max():.2f} km, "
                 f"{sp.metrics.num_supersteps} supersteps, {sp.metrics.seconds:.2f}s; {_check('SSSP', same)}")

    pr = g.pagerank(tol=1e-9, progress=False)
    rank = _by_id(pr, "pagerank", ids)
    ref = igraph_pagerank(n, src, dst, directed=False)
    gap = float(np.abs(rank - ref).max())
    ok &= gap < 1e-6
    top = ids[np.argsort(-rank)[:3]]
    lines.append(f"pagerank (tol 1e-9): top vertices {', '.join(map(str, top))}, {pr.metrics.num_supersteps} supersteps, "
                 f"{pr.metrics.seconds:.2f}s; max difference from igraph {gap:.1e}")
    print("\n".join(lines))
    print("demo " + ("OK" if ok else "FAILED") + f" (graph kept at {path})")
    return 0 if ok else 1
