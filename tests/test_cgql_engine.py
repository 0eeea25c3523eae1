"""CGQL over stored GoFS instances (past), a live stream (a fake one calling on_batch callbacks),
and frames straddling now (no gap, no duplicate at the seam); topics: order, seq, resume, sinks;
``goffish.query`` and ``goffish query``."""
import json
import os
import threading

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import cgql_oracle as oracle
import goffish
from gofs.instances import Instance
from gofs.ingest.read_local import from_pandas
from hatrick.cgql import CGQLError, PandasView, Topic, active_queries, query
from hatrick.cgql.views import StoreInstanceView

N, POOL, STEPS = 20, 45, 10
CLUSTER = "DETECT Cluster(usage < 30) WHERE edge: {type = power}"
REACH = "DETECT Reach(source: {usage > 20}, sink: {name IN (v1, v2, v3, v5, v8, v13)}) WHERE edge: {follow}"


def history(seed=7, steps=STEPS):
    """Snapshots over a fixed vertex set (name static; usage per snapshot) whose edges are a
    changing subset of a pool of distinct directed pairs with a per-snapshot type."""
    rng = np.random.default_rng(seed)
    pairs = set()
    while len(pairs) < POOL:
        a, b = rng.integers(0, N, 2)
        if a != b:
            pairs.add((int(a), int(b)))
    pool = np.array(sorted(pairs))
    views = []
    for t in range(steps):
        alive = rng.random(POOL) < 0.6
        kinds = rng.choice(["power", "follow", "message"], POOL)
        vertices = pd.DataFrame({"id": np.arange(N), "name": [f"v{i}" for i in range(N)],
                                 "usage": rng.integers(0, 40, N)})
        edges = pd.DataFrame({"src": pool[alive, 0], "dst": pool[alive, 1], "type": kinds[alive]})
        views.append(PandasView(float(t), t, vertices, edges, True))
    return pool, views


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """The first 6 snapshots of ``history()`` stored as GoFS instances at times 0..5 (topology
    changes as removed edges, usage and type as instance attributes); returns (graph, views)."""
    pool, views = history()
    path = str(tmp_path_factory.mktemp("cgql") / "g.gofs")
    template = pd.DataFrame({"src": pool[:, 0], "dst": pool[:, 1]})
    g = goffish.ingest(from_pandas(template, views[0].vertices()[["id", "name"]], directed=True), path,
                       num_partitions=2)
    instances = []
    for v in views[:6]:
        e = v.edges()
        alive = set(map(tuple, e[["src", "dst"]].to_numpy().tolist()))
        removed = [p for p in map(tuple, pool.tolist()) if p not in alive]
        full_type = {(a, b): k for a, b, k in e.itertuples(index=False)}
        instances.append(Instance(v.time, v.time + 1, vertex_values=v.vertices()[["id", "usage"]],
                                  edge_values=pd.DataFrame({"src": pool[:, 0], "dst": pool[:, 1],
                                                            "type": [full_type.get(tuple(p), "none")
                                                                     for p in pool.tolist()]}),
                                  removed_edges=pd.DataFrame({"src": [a for a, _ in removed],
                                                              "dst": [b for _, b in removed]})))
    g.append_instances(instances)
    return g, views


class FakeStream:
    """What CGQL needs of Hatrick's Stream: on_batch / remove_callback, callbacks get GraphViews.
    ``on_register`` views are delivered while a query registers (before its past part is done)."""

    directed = True

    def __init__(self, now, on_register=()):
        self._now, self.callbacks, self.on_register = now, [], list(on_register)

    def now(self):
        return self._now

    def on_batch(self, callback):
        self.callbacks.append(callback)
        for view in self.on_register:
            callback(view)

    def remove_callback(self, callback):
        self.callbacks.remove(callback)

    def push(self, view):
        for callback in list(self.callbacks):
            callback(view)


def cluster_tuples(events):
    return [(e["time"], e["status"], e["cluster"], tuple(e["members"]), tuple(e.get("parents", ())))
            for e in events]


def reach_tuples(events):
    return [(e["time"], e["status"], e["source"], e["sink"]) for e in events]


def grouped(events):
    out = {}
    for e in events:
        out.setdefault(e[0], set()).add(e)
    return out


SINKS = [("name", "in", {"v1", "v2", "v3", "v5", "v8", "v13"})]


def test_store_views_read_only_needed_columns(stored):
    g, views = stored
    view = StoreInstanceView(g, g.instances[2], ["usage"], ["type"])
    assert list(view.vertices().columns) == ["id", "usage"]
    assert list(view.edges().columns) == ["src", "dst", "type"]
    expected = views[2].edges().sort_values(["src", "dst"]).reset_index(drop=True)
    got = view.edges().sort_values(["src", "dst"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(got, expected, check_dtype=False)


def test_past_frame_over_stored_instances(stored):
    g, views = stored
    topic = goffish.query(g, CLUSTER + " FROM 1 TO 4")
    assert topic.query.plan.kind == "past" and topic.closed
    expected = oracle.cluster_events(views[1:4], [("usage", "<", 30)], {"power"}, [])
    assert grouped(cluster_tuples(topic.read())) == grouped(expected) and expected
    topic = goffish.query(g.path, REACH)       # no frame: every stored instance
    expected = oracle.reach_events(views[:6], [("usage", ">", 20)], SINKS, {"follow"})
    assert grouped(reach_tuples(topic.read())) == grouped(expected) and expected


def test_store_attribute_errors_at_registration(stored):
    g, _ = stored
    with pytest.raises(CGQLError, match="vertex attribute 'age' is not in graph") as info:
        goffish.query(g, "DETECT Cluster(age < 3)")
    assert (info.value.line, info.value.column) == (1, 16)
    with pytest.raises(CGQLError, match="edge attribute 'weight'"):
        goffish.query(g, "DETECT Cluster(usage < 3) WHERE edge: {weight > 2}")


def test_live_frame_over_fake_stream():
    _, views = history(seed=3)
    stream = FakeStream(now=0.0)
    topic = query(stream, CLUSTER + " FOR 1h AS live_clusters")
    assert topic.name == "live_clusters" and topic.query.plan.kind == "live"
    assert active_queries()["live_clusters"] is topic.query
    seen = []
    topic.subscribe(seen.append)
    for v in views:
        stream.push(v)
    expected = oracle.cluster_events(views, [("usage", "<", 30)], {"power"}, [])
    assert grouped(cluster_tuples(topic.read())) == grouped(expected) and expected
    assert seen == topic.read()
    assert len(stream.callbacks) == 1
    query(None, "CANCEL live_clusters")
    assert topic.closed and stream.callbacks == [] and "live_clusters" not in active_queries()
    stream.push(PandasView(99.0, 99, views[0].vertices(), views[0].edges()))
    assert len(topic) == len(expected)


def test_default_topic_cancelled_by_its_name():
    stream = FakeStream(now=0.0)
    topic = query(stream, CLUSTER + " FOR 1h")
    assert active_queries()[topic.name] is topic.query
    query(None, f"CANCEL {topic.name}")
    assert topic.closed and stream.callbacks == [] and topic.name not in active_queries()


def test_live_frame_ends_and_dedupes():
    _, views = history(seed=4)
    stream = FakeStream(now=0.0)
    topic = query(stream, REACH + " FOR 5s")
    for v in views[:3] + [views[1], views[2]] + views[3:]:       # re-delivered batches are ignored
        stream.push(v)
    expected = oracle.reach_events(views[:5], [("usage", ">", 20)], SINKS, {"follow"})
    assert grouped(reach_tuples(topic.read())) == grouped(expected)
    assert topic.closed and stream.callbacks == []               # the first view at t >= 5 ended it


@pytest.mark.parametrize("text, oracle_fn", [
    (CLUSTER + " SINCE 10s", lambda vs: oracle.cluster_events(vs, [("usage", "<", 30)], {"power"}, [])),
    (REACH + " SINCE 10s", lambda vs: oracle.reach_events(vs, [("usage", ">", 20)], SINKS, {"follow"})),
    ("DETECT Cluster(sum(node.usage) > 40) WHERE edge: {type = power} AS S; "
     "DETECT Evolved(S) WHERE sum(node.usage) < 60 AND SUCCEEDS S",
     lambda vs: [(t, "evolved", c) for t, c in oracle.evolved_events(
         vs, [], {"power"}, [("sum_usage", ">", 40)], [("sum_usage", "<", 60)], "succeeds")]),
])
def test_straddling_frame_has_no_gap_and_no_duplicate(stored, text, oracle_fn):
    g, views = stored
    live = views[6:]
    stale = PandasView(5.5, 100, views[5].vertices(), views[5].edges())          # before now: the past's
    stream = FakeStream(now=6.0, on_register=[live[0], live[0]])                    # arrives mid-registration
    topic = goffish.query(g, text, stream=stream)
    assert topic.query.plan.kind == "straddle"
    for v in [stale, live[0]] + live[1:]:
        stream.push(v)
    events = topic.read()
    expected = oracle_fn(views)                       # one evaluation over instances 0..5 then live 6..9
    if "Evolved" in text:
        got = [(e["time"], e["status"], e["cluster"]) for e in events]
        assert got == expected and expected
    elif "Reach" in text:
        assert grouped(reach_tuples(events)) == grouped(expected) and expected
    else:
        assert grouped(cluster_tuples(events)) == grouped(expected) and expected
    assert {e["time"] for e in events} <= {float(t) for t in range(STEPS)}
    assert any(e["time"] < 6 for e in events) and any(e["time"] >= 6 for e in events)
    assert [e["seq"] for e in events] == list(range(len(events)))
    topic.cancel()
    assert stream.callbacks == []


# topics ------------------------------------------------------------------------------------
def test_topic_order_seq_resume_and_iteration():
    topic = Topic("t")
    topic.publish([{"time": 1.0, "status": "a"}, {"time": 1.0, "status": "b"}])
    first = topic.read()
    assert [e["seq"] for e in first] == [0, 1] and all(e["topic"] == "t" for e in first)
    got = []
    sub = topic.subscribe(got.append, from_seq=1)          # resume after seq 0
    topic.publish([{"time": 2.0, "status": "c"}])
    assert [e["seq"] for e in got] == [1, 2]
    sub.cancel()
    topic.publish([{"time": 3.0, "status": "d"}])
    assert len(got) == 2
    assert [e["seq"] for e in topic.read(2)] == [2, 3]
    read = []
    reader = threading.Thread(target=lambda: read.extend(topic.iterate(from_seq=1)))
    reader.start()
    topic.publish([{"time": 4.0, "status": "e"}])
    topic.close()
    reader.join(5)
    assert [e["seq"] for e in read] == [1, 2, 3, 4]


def test_time_ordered_publication():
    topic = Topic("t", time_ordered=True)
    topic.publish([{"time": 2.0, "status": "x"}, {"time": 1.0, "status": "y"}, {"time": 1.0, "status": "a"}])
    assert [(e["time"], e["status"], e["seq"]) for e in topic.read()] == [(1.0, "a", 0), (1.0, "y", 1),
                                                                           (2.0, "x", 2)]


@pytest.mark.parametrize("fmt", ["parquet", "json"])
def test_sinks_resume_without_loss_or_duplicates(tmp_path, fmt):
    _, views = history(seed=5)
    topic = query(views, CLUSTER)
    events = topic.read()
    directory = tmp_path / "sink"
    # a sink that stopped after the first 5 events, then a new sink on the same directory
    partial = Topic("again")
    partial.publish([dict(e) for e in events[:5]])
    partial.sink(str(directory), format=fmt)
    topic.sink(str(directory), format=fmt)
    files = sorted(os.listdir(directory))
    assert all(f.startswith("part-") for f in files) and len(files) == 2
    if fmt == "parquet":
        table = pa.concat_tables([pq.read_table(directory / f) for f in files], promote_options="default")
        seqs = table.column("seq").to_pylist()
        members = [json.loads(m) for m in table.column("members").to_pylist()]
    else:
        rows = [json.loads(line) for f in files for line in open(directory / f)]
        seqs, members = [r["seq"] for r in rows], [r["members"] for r in rows]
    assert seqs == list(range(len(events)))
    assert members == [e["members"] for e in events]
    out = tmp_path / "all.parquet"
    assert topic.to_parquet(str(out), from_seq=3) == len(events) - 3
    assert pq.read_table(out).column("seq").to_pylist() == list(range(3, len(events)))
    assert topic.to_json(str(tmp_path / "all.jsonl")) == len(events)
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".tmp")]


def test_kafka_sink_says_what_it_needs():
    try:
        import kafka  # noqa: F401
    except ImportError:
        with pytest.raises(RuntimeError, match="kafka-python"):
            Topic("k").sink_kafka("localhost:9092")
    else:
        pytest.skip("kafka-python is installed; there is no broker to test against here")


def test_cli_query_writes_topics(stored, tmp_path, capsys):
    from goffish.cli import main

    g, views = stored
    out = tmp_path / "out"
    code = main(["query", g.path, "DETECT Cluster(sum(node.usage) > C) WHERE edge: {type = power} AS hot",
                 "--param", "C=40", "--out", str(out), "--format", "json"])
    assert code == 0
    rows = [json.loads(line) for f in sorted(os.listdir(out / "hot")) for line in open(out / "hot" / f)]
    expected = oracle.cluster_events(views[:6], [], {"power"}, [("sum_usage", ">", 40)])
    assert grouped(cluster_tuples(rows)) == grouped(expected) and expected
    code = main(["query", g.path, "DETECT Cluster(sum(node.usage) > C)"])
    assert code == 2 and "parameter 'C' is not bound" in capsys.readouterr().err


def test_headline_example_runs_live():
    text = ("DETECT Reach(source:{name = Bob, age = 33}, sink:{age < 30, lives_in = London}) FOR 20h "
            "WHERE edge: {type = follow}")
    people = pd.DataFrame({"id": [1, 2, 3, 4], "name": ["Bob", "Ann", "Cy", "Di"], "age": [33, 25, 29, 41],
                           "lives_in": ["London", "London", "London", "Paris"]})
    follows = [pd.DataFrame({"src": [1], "dst": [2], "type": ["follow"]}),
               pd.DataFrame({"src": [1, 2], "dst": [2, 3], "type": ["follow", "follow"]}),
               pd.DataFrame({"src": [1, 2], "dst": [2, 3], "type": ["like", "follow"]})]
    stream = FakeStream(now=1000.0)
    topic = goffish.query(stream, text)
    for i, edges in enumerate(follows):
        stream.push(PandasView(1000.0 + 3600 * i, i, people, edges))
    stream.push(PandasView(1000.0 + 20 * 3600, 9, people, follows[0]))        # after the frame: ends it
    assert [(e["time"] - 1000, e["status"], e["sink"]) for e in topic] == [
        (0, "reachable", 2), (3600, "reachable", 3), (7200, "unreachable", 2), (7200, "unreachable", 3)]
    assert topic.closed
