"""Past frames on Gopher against the driver path: the same events for Reach and Cluster on the
engine tests' history (the driver path is checked against the NetworkX oracles there), and a
Cluster past frame with the Python driver capped (RLIMIT_AS) below what reading the instances
into the driver needs: the Gopher run finishes, the driver path fails under the same cap, and
the events equal the uncapped driver path's (the NetworkX oracle's identity tracking is
quadratic in the groups: minutes at this size)."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest

import goffish
from gofs.instances import Instance
from gofs.ingest.read_local import from_pandas
from hatrick.cgql import PandasView, query
from hatrick.cgql.views import StoreInstanceView
import cgql_oracle as oracle
from test_cgql_engine import CLUSTER, REACH, cluster_tuples, grouped, stored  # noqa: F401 (stored: the engine tests' graph fixture)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
N, STEPS = 300_000, 3
QUERY = "DETECT Cluster(usage < 30, size > 12) WHERE edge: {type = power}"

_CAPPED = textwrap.dedent("""
    import json, resource, sys
    import goffish
    from hatrick.cgql import query
    from hatrick.cgql.views import StoreInstanceView
    spark = goffish.session(master="local[1]", conf={"spark.driver.memory": "512m", "spark.ui.enabled": "false"})
    g = goffish.open(sys.argv[1])
    warm = query(g, sys.argv[2] + " FROM 0 TO 1", spark=spark).read()      # imports and JIT before the cap

    def vm():
        return int(next(l for l in open("/proc/self/status") if l.startswith("VmSize")).split()[1]) * 1024

    cap = vm() + int(sys.argv[4]) * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    events = query(g, sys.argv[2], spark=spark).read()
    json.dump([[e["time"], e["status"], e["cluster"], e["members"], e.get("parents", [])] for e in events],
              open(sys.argv[3], "w"))
    print("GOPHER OK", flush=True)
    try:
        views = [StoreInstanceView(g, i, ["usage"], ["type"]) for i in g.instances]
        query(views, sys.argv[2]).read()
        print("DRIVER OK")
    except Exception as exc:          # a MemoryError, or what a library makes of a failed allocation
        print("DRIVER FAILED", type(exc).__name__, exc)
""")


def road_like(seed=3):
    """A long ladder with random chords, ``usage`` per instance on vertices, ``type`` per instance
    on edges (1% of edges change type each step)."""
    rng = np.random.default_rng(seed)
    ids = np.arange(N)
    src = np.concatenate([ids[:-1], ids[:-2], rng.integers(0, N, N // 10)])
    dst = np.concatenate([ids[1:], ids[2:], rng.integers(0, N, N // 10)])
    keep = src != dst
    src, dst = src[keep], dst[keep]
    kind = rng.choice(["power", "follow", "message"], len(src), p=[0.45, 0.35, 0.2])
    views = []
    for t in range(STEPS):
        if t:
            change = rng.random(len(src)) < 0.01
            kind = np.where(change, rng.choice(["power", "follow"], len(src)), kind)
        usage = rng.integers(0, 40, N)
        views.append(PandasView(float(t), t, pd.DataFrame({"id": ids, "usage": usage}),
                                pd.DataFrame({"src": src, "dst": dst, "type": kind}), False))
    return views


def test_cluster_past_runs_on_gopher_where_the_driver_path_cannot(tmp_path):
    views = road_like()
    first = views[0]
    path = str(tmp_path / "g.gofs")
    g = goffish.ingest(from_pandas(first.edges()[["src", "dst"]], first.vertices()[["id"]], directed=False),
                       path, num_partitions=4)
    g.append_instances([Instance(v.time, v.time + 1, vertex_values=v.vertices(), edge_values=v.edges())
                        for v in views])
    out = str(tmp_path / "events.json")
    env = dict(os.environ, PYTHONPATH=ROOT, ARROW_DEFAULT_MEMORY_POOL="system", MALLOC_ARENA_MAX="2")
    done = subprocess.run([sys.executable, "-c", _CAPPED, path, QUERY, out, "56"], env=env,
                          capture_output=True, text=True, timeout=900)
    assert "GOPHER OK" in done.stdout, done.stdout + done.stderr[-3000:]
    assert "DRIVER FAILED" in done.stdout and "DRIVER OK" not in done.stdout, done.stdout + done.stderr[-3000:]
    got = [(t, s, c, tuple(m), tuple(p)) for t, s, c, m, p in json.load(open(out))]
    expected = [(e["time"], e["status"], e["cluster"], tuple(e["members"]), tuple(e.get("parents", ())))
                for e in query(views, QUERY).read()]
    assert expected and got == expected


def test_past_frames_run_on_gopher_and_match_the_driver(stored, spark):
    """Reach and Cluster past frames over the same stored graph: the Gopher run and the driver
    run (the instances as views) publish the same events."""
    g, _ = stored
    views = [StoreInstanceView(g, i, ["name", "usage"], ["type"]) for i in g.instances]
    for text in (REACH, CLUSTER):
        on_gopher = query(g, text, spark=spark)
        on_driver = query(views, text)
        assert on_gopher.query.past_engine == "gopher" and on_driver.query.past_engine == "driver"
        got, expected = on_gopher.read(), on_driver.read()
        drop = ("detected", "seq", "topic")
        assert [{k: v for k, v in e.items() if k not in drop} for e in got] == \
            [{k: v for k, v in e.items() if k not in drop} for e in expected] and expected


def test_text_edge_values_come_as_stored_codes_when_a_program_asks(stored):
    """``text_as_categorical``: GoFS hands a text edge attribute over as a Categorical whose values
    are the object array it gives otherwise, row for row (template and instance topology alike)."""
    from gofs.bundle import instance_bundle, load_instance_attributes, load_partition
    from gofs.store import as_store

    g, _ = stored
    store = as_store(g)
    for p in range(store.num_partitions):
        template = load_partition(store, p)
        for instance in store.instances:
            for bundle in (template, instance_bundle(store, template, instance)):
                _, plain = load_instance_attributes(store, bundle, instance, (), ("type",))
                _, coded = load_instance_attributes(store, bundle, instance, (), ("type",), categorical=True)
                for side in (0, 1):
                    assert np.asarray(coded["type"][side], dtype=object).tolist() == plain["type"][side].tolist()
                if bundle is template:
                    assert isinstance(coded["type"][0], pd.Categorical)


def local_history(seed: int, n: int = 240, steps: int = 7, directed: bool = False):
    """Snapshots of a graph with locality (a ring with short chords, so that a partitioner keeps
    most groups inside one partition and some across): the edges are a changing subset of the
    pool with a per-snapshot type, ``usage`` changes per snapshot; returns (pool, views)."""
    rng = np.random.default_rng(seed)
    ids = np.arange(n)
    src = np.concatenate([ids, ids, rng.integers(0, n, n // 4)])
    dst = np.concatenate([(ids + 1) % n, (ids + 3) % n, rng.integers(0, n, n // 4)])
    if not directed:                        # one orientation of an undirected edge (GoFS keeps one)
        src, dst = np.minimum(src, dst), np.maximum(src, dst)
    pool = np.unique(np.column_stack([src, dst])[src != dst], axis=0)
    alive, kinds, usage = rng.random(len(pool)) < 0.7, rng.choice(["power", "follow"], len(pool)), rng.integers(0, 40, n)
    views = []
    for t in range(steps):
        if t:
            alive = np.where(rng.random(len(pool)) < 0.15, ~alive, alive)
            kinds = np.where(rng.random(len(pool)) < 0.1, rng.choice(["power", "follow"], len(pool)), kinds)
            usage = np.where(rng.random(n) < 0.2, rng.integers(0, 40, n), usage)
        views.append(PandasView(float(t), t, pd.DataFrame({"id": ids, "usage": usage}),
                                pd.DataFrame({"src": pool[alive, 0], "dst": pool[alive, 1], "type": kinds[alive]}),
                                directed))
    return pool, views


def store_history(pool, views, path: str, partitions: int, directed: bool):
    """``views`` as GoFS instances at their times (absent pool edges as removed edges)."""
    template = pd.DataFrame({"src": pool[:, 0], "dst": pool[:, 1]})
    g = goffish.ingest(from_pandas(template, views[0].vertices()[["id"]], directed=directed), path,
                       num_partitions=partitions)
    instances = []
    for v in views:
        e = v.edges()
        kind = {(a, b): k for a, b, k in e.itertuples(index=False)}
        gone = [p for p in map(tuple, pool.tolist()) if p not in kind]
        instances.append(Instance(v.time, v.time + 1, vertex_values=v.vertices(),
                                  edge_values=pd.DataFrame({"src": pool[:, 0], "dst": pool[:, 1],
                                                            "type": [kind.get(tuple(p), "none") for p in pool.tolist()]}),
                                  removed_edges=pd.DataFrame({"src": [a for a, _ in gone], "dst": [b for _, b in gone]})))
    g.append_instances(instances)
    return g


@pytest.mark.parametrize("seed,directed", [(1, False), (2, True)])
def test_cluster_rules_split_between_tasks_and_driver_match_the_oracle(tmp_path, spark, seed, directed):
    """Cluster's rules run on the tasks for the groups inside one partition and on the driver
    for those across: over random snapshot sequences of a graph with locality, in 4 partitions,
    the events equal the driver path's (in order) and the NetworkX oracle's; also with
    aggregate conditions, a min_size, and a second sub-query whose frame starts later (its
    first instance in frame reports what holds, identities carried from before)."""
    pool, views = local_history(seed, directed=directed)
    g = store_history(pool, views, str(tmp_path / "g.gofs"), 4, directed)
    cases = [("DETECT Cluster(usage < 30) WHERE edge: {type = power}", 2, [("usage", "<", 30)], {"power"}, []),
             ("DETECT Cluster(usage < 34, sum(node.usage) > 60) WHERE edge: {type = power}", 2,
              [("usage", "<", 34)], {"power"}, [("sum_usage", ">", 60)]),
             ("DETECT Cluster(size > 3) WHERE edge: {type = follow}", 3, None, None, None),
             ("DETECT Cluster(usage < 30) WHERE edge: {type = power} AS A; "
              "DETECT Cluster(usage > 8) WHERE edge: {type = follow} FROM 2 TO 6", 2, None, None, None)]
    drop = ("detected", "seq", "topic")
    statuses = set()
    for text, min_size, members, edge, aggregates in cases:
        on_gopher = query(g, text, spark=spark, min_size=min_size)
        assert on_gopher.query.past_engine == "gopher"
        got = [{k: v for k, v in e.items() if k not in drop} for e in on_gopher.read()]
        expected = [{k: v for k, v in e.items() if k not in drop} for e in query(views, text, min_size=min_size).read()]
        assert got == expected and expected
        statuses |= {e["status"] for e in got}
        if members is not None:
            assert grouped(cluster_tuples(got)) == grouped(oracle.cluster_events(views, members, edge, aggregates))
    assert statuses == {"created", "merged", "split", "grew", "disappeared"}


@pytest.mark.parametrize("seed", range(3))
def test_overlap_counts_match_a_sparse_matrix_of_the_shared_rows(seed):
    """The tasks' overlap kernel gives the pairs a sparse matrix of the shared rows gives, in its
    order (previous piece, then piece), rows outside every previous piece left out."""
    from scipy.sparse import csr_matrix
    from hatrick.cgql.programs import overlap_counts

    rng = np.random.default_rng(seed)
    before_count, count, rows = 40, 30, 300
    before, now = rng.integers(-1, before_count, rows), rng.integers(0, count, rows)
    both = before >= 0
    expected = csr_matrix((np.ones(int(both.sum()), np.int64), (before[both], now[both])),
                          shape=(before_count, count)).tocoo()
    row, col, shared = overlap_counts(before, now, before_count, count)
    assert np.array_equal(np.column_stack([row, col, shared]),
                          np.column_stack([expected.row, expected.col, expected.data]))


@pytest.mark.parametrize("seed,directed", [(1, False), (2, True)])
def test_diameter_runs_on_gopher_and_matches_the_oracle(tmp_path, spark, seed, directed):
    """Diameter in hops on Gopher: measured on the tasks for the groups inside one partition, and
    for those across after a boundary step that gathers their kept edges on one task; the events
    equal the driver path's (in order) and the NetworkX oracle's."""
    pool, views = local_history(seed, directed=directed)
    g = store_history(pool, views, str(tmp_path / "g.gofs"), 4, directed)
    cases = [("DETECT Cluster(usage < 30, diameter < 4) WHERE edge: {type = power}",
              [("usage", "<", 30)], [("diameter", "<", 4)]),
             ("DETECT Cluster(usage < 34, diameter >= 3) WHERE edge: {type = power}",
              [("usage", "<", 34)], [("diameter", ">=", 3)]),
             ("DETECT Cluster(diameter > 5, sum(node.usage) > 100) WHERE edge: {type = power}",
              [], [("diameter", ">", 5), ("sum_usage", ">", 100)])]
    drop = ("detected", "seq", "topic")
    for text, members, aggregates in cases:
        on_gopher = query(g, text, spark=spark)
        assert on_gopher.query.past_engine == "gopher"
        got = [{k: v for k, v in e.items() if k not in drop} for e in on_gopher.read()]
        expected = [{k: v for k, v in e.items() if k not in drop} for e in query(views, text).read()]
        assert got == expected and expected
        assert grouped(cluster_tuples(got)) == grouped(oracle.cluster_events(views, members, {"power"}, aggregates))


@pytest.mark.parametrize("seed,directed", [(1, False), (2, True)])
def test_evolved_follows_its_alias_on_gopher_and_matches_the_oracle(tmp_path, spark, seed, directed):
    """Evolved on Gopher: its rules run where its alias's groups are decided (tasks or driver),
    first satisfied times and qualifying flags carried from instance to instance with the
    groups; every topic's events equal the driver path's (in order), the evolved ones the
    NetworkX oracle's, also with SUCCEEDS / PREDATES, a frame of its own and diameter in its
    WHERE (every group's, measured as the alias's are)."""
    pool, views = local_history(seed, directed=directed)
    g = store_history(pool, views, str(tmp_path / "g.gofs"), 4, directed)
    cases = [("DETECT Cluster(sum(node.usage) > 40) WHERE edge: {type = power} AS S; "
              "DETECT Evolved(S) WHERE sum(node.usage) < 90 AND SUCCEEDS S",
              [], [("sum_usage", ">", 40)], [("sum_usage", "<", 90)], "succeeds"),
             ("DETECT Evolved(H) WHERE max(node.usage) > 30 AND PREDATES H AND "
              "DETECT Cluster(size > 4) WHERE edge: {type = power} AS H",
              [], [("size", ">", 4)], [("max_usage", ">", 30)], "predates"),
             ("DETECT Cluster(usage < 34, diameter < 5) WHERE edge: {type = power} AS S; "
              "DETECT Evolved(S) WHERE avg(node.usage) < 15 FROM 3 TO 6", None, None, None, None),
             ("DETECT Cluster(usage < 34, sum(node.usage) > 50) WHERE edge: {type = power} AS S; "
              "DETECT Evolved(S) WHERE diameter > 4",
              [("usage", "<", 34)], [("sum_usage", ">", 50)], [("diameter", ">", 4)], None)]
    drop = ("detected", "seq", "topic")
    for text, members, aggregates, where, relation in cases:
        on_gopher, on_driver = query(g, text, spark=spark), query(views, text)
        assert on_gopher.query.past_engine == "gopher"
        got, expected = ([{k: v for k, v in e.items() if k not in drop} for t in q.query.topics.values() for e in t.read()]
                         for q in (on_gopher, on_driver))
        assert got == expected and any(e["pattern"] == "Evolved" for e in got)
        if members is not None:
            evolved = [(e["time"], e["cluster"]) for e in got if e["pattern"] == "Evolved"]
            assert evolved == oracle.evolved_events(views, members, {"power"}, aggregates, where, relation)
