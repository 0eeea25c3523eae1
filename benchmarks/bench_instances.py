"""What running on an instance's topology costs: components on the template and on an instance
that removes and adds edges (and, with ``--added-vertices``, adds vertices beyond the template,
each joined to a template vertex and pairs of them to each other), against scipy on the same
edge lists.

The instance's bundles are built by the tasks the first time a run touches the instance
(reading its topology file, the partition's edge ids and the sub-graph table) and are
cached after that, so the first run on an instance ("cold") pays for the build and later
runs ("warm") do not.

    python -m benchmarks.bench_instances --size 1000000 --changes 10000 --added-vertices 10000 --partitions 8 \
        --json bench-results/instances.json
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from benchmarks import print_results


def _scipy_components(n: int, src: np.ndarray, dst: np.ndarray) -> tuple[float, int]:
    clock = time.perf_counter()
    graph = sp.coo_matrix((np.ones(len(src), np.int8), (src, dst)), shape=(n, n)).tocsr()
    count, _ = connected_components(graph, directed=False)
    return time.perf_counter() - clock, int(count)


def _timed_components(g, **options) -> tuple[float, int]:
    clock = time.perf_counter()
    result = g.connected_components(progress=False, **options)
    count = result.dataframe.select("component").distinct().count()
    seconds = time.perf_counter() - clock
    result.unpersist()
    return seconds, int(count)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=200_000, help="road-like graph vertices")
    parser.add_argument("--changes", type=int, default=2_000, help="edges removed and as many added")
    parser.add_argument("--added-vertices", type=int, default=0, help="vertices the instance adds")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="write the results here too")
    args = parser.parse_args(argv)

    import goffish
    from goffish.generators import road_network
    from gofs.instances import Instance

    spark = goffish.session()
    graph = road_network(args.size, seed=args.seed)
    src, dst = graph.edges.column("src").to_numpy(), graph.edges.column("dst").to_numpy()
    rng = np.random.default_rng(args.seed)
    gone = rng.choice(len(src), args.changes, replace=False)
    added = rng.integers(0, args.size, (args.changes, 2))
    new = np.arange(args.size, args.size + args.added_vertices)
    pairs = new[:len(new) // 2 * 2].reshape(-1, 2)
    added = np.concatenate([added, np.column_stack([new, rng.integers(0, args.size, len(new))]), pairs])
    n = args.size + len(new)
    with tempfile.TemporaryDirectory() as tmp:
        g = goffish.ingest(graph, os.path.join(tmp, "road.gofs"), num_partitions=args.partitions, spark=spark)
        clock = time.perf_counter()
        iid = g.append_instances([Instance(0.0, 1.0, removed_edges=pd.DataFrame({"src": src[gone], "dst": dst[gone]}),
                                           added_edges=pd.DataFrame({"src": added[:, 0], "dst": added[:, 1]}),
                                           added_vertices=pd.DataFrame({"id": new}))])[0]
        append_s = time.perf_counter() - clock
        keep = np.ones(len(src), bool)
        keep[gone] = False
        peer_template = _scipy_components(args.size, src, dst)
        peer_instance = _scipy_components(n, np.r_[src[keep], added[:, 0]], np.r_[dst[keep], added[:, 1]])
        template_cold = _timed_components(g)
        template_warm = _timed_components(g)
        instance_cold = _timed_components(g, instance=iid)
        instance_warm = _timed_components(g, instance=iid)
    for name, (_, count), (_, expected) in (("template", template_warm, peer_template),
                                            ("instance", instance_warm, peer_instance)):
        if count != expected:
            raise SystemExit(f"{name}: {count} components, scipy says {expected}")
    out = {"vertices": args.size, "edges": len(src), "changes": args.changes, "added_vertices": len(new),
           "partitions": args.partitions,
           "append_instance_s": append_s, "components_template": peer_template[1],
           "components_instance": peer_instance[1],
           "cc_template_cold_s": template_cold[0], "cc_template_warm_s": template_warm[0],
           "cc_instance_cold_s": instance_cold[0], "cc_instance_warm_s": instance_warm[0],
           "scipy_template_s": peer_template[0], "scipy_instance_s": peer_instance[0]}
    print_results(out, args.json)
    return out


if __name__ == "__main__":
    main()
