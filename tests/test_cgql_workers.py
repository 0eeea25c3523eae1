"""Live CGQL Reach, Cluster and Evolved evaluated by the stream's workers (:mod:`hatrick.cgql.onworkers`):
with 1, 2 and 3 workers (and workers in Spark tasks) the events are those of one worker and of a
NetworkX recomputation of every batch (:mod:`cgql_oracle`); the driver never reads the frames."""
import numpy as np
import pandas as pd
import pytest

import cgql_oracle as oracle
import goffish
from gofs.ingest.read_local import from_pandas
from hatrick import partitioned as partitioned_module
from hatrick.cgql import PandasView

N, BATCHES = 30, 7
REACH = "DETECT Reach(source: {usage > 20}, sink: {usage < 15}) WHERE edge: {type = power}"
CLUSTER = "DETECT Cluster(usage < 30) WHERE edge: {type = power}"
SIZED = "DETECT Cluster(sum(node.usage) > 40, diameter >= 2) WHERE edge: {type = power}"
EVOLVED = ("DETECT Cluster(sum(node.usage) > 40) WHERE edge: {type = power} AS S; "
           "DETECT Evolved(S) WHERE sum(node.usage) < 90 AND diameter < 4 AND SUCCEEDS S")
QUERIES = (REACH, CLUSTER, SIZED, EVOLVED)


def make_graph(path: str, directed: bool):
    rng = np.random.default_rng(3)
    vertices = pd.DataFrame({"id": np.arange(N), "usage": rng.integers(0, 40, N)})
    src, dst = rng.integers(0, N, 40), rng.integers(0, N, 40)
    keep = src != dst
    edges = pd.DataFrame({"src": src[keep], "dst": dst[keep], "type": rng.choice(["power", "follow"], int(keep.sum()))})
    return goffish.ingest(from_pandas(edges, vertices, directed=directed), path, num_partitions=2,
                          partitioner="hash")


def batches(seed: int = 5) -> list:
    """Batches of edges added (with a type) and removed, at times 1, 2, ..."""
    rng = np.random.default_rng(seed)
    out, seq, added = [], 0, []
    for t in range(1, BATCHES + 1):
        rows = []

        def row(**fields):
            nonlocal seq
            seq += 1
            rows.append({"producer": "p", "seq": seq, "time": float(t), **fields})
        for _ in range(8):
            a, b = (int(x) for x in rng.choice(N, 2, replace=False))
            row(op="add_edge", src=a, dst=b)
            row(op="set_edge", src=a, dst=b, attribute="type", value=str(rng.choice(["power", "follow"])))
            added.append((a, b))
        for _ in range(4):
            a, b = added.pop(int(rng.integers(len(added))))
            row(op="remove_edge", src=a, dst=b)
        out.append(rows)
    return out


def run(graph, directed: bool, record: bool = False, rescale_at: dict | None = None,
        **options) -> tuple[dict, list]:
    """Events of every query over the batches on ``graph.stream(**options)`` (and, ``record``,
    every batch's frames as PandasViews for the oracle; ``rescale_at``: {batch: workers} before it)."""
    s = graph.stream(num_buckets=16, **options)
    topics = {text: goffish.query(s, text) for text in QUERIES}
    views = []
    if record:
        s.on_batch(lambda v: views.append(PandasView(v.time, v.seq, v.vertices(), v.edges(), directed)))
    try:
        for i, rows in enumerate(batches()):
            if i in (rescale_at or {}):
                s.rescale(rescale_at[i])
            s.push(rows)
        events = {text: [{k: v for k, v in e.items() if k not in ("detected", "topic")}
                         for name in t.query.topics for e in t.query.topics[name].read()]
                  for text, t in topics.items()}
    finally:
        for t in topics.values():
            t.cancel()
        s.close()
    return events, views


def expected(views: list, directed: bool) -> dict:
    """The NetworkX recomputation of every query's events over the recorded batches."""
    power = {"power"}
    return {
        REACH: oracle.reach_events(views, [("usage", ">", 20)], [("usage", "<", 15)], power, directed),
        CLUSTER: [e for e in oracle.cluster_events(views, [("usage", "<", 30)], power, [])],
        SIZED: oracle.cluster_events(views, [], power, [("sum_usage", ">", 40), ("diameter", ">=", 2)]),
        EVOLVED: [(t, "evolved", c) for t, c in oracle.evolved_events(
            views, [], power, [("sum_usage", ">", 40)], [("sum_usage", "<", 90), ("diameter", "<", 4)], "succeeds")],
    }


def comparable(text: str, events: list) -> list:
    if text == EVOLVED:
        return sorted((e["time"], e["status"], e["cluster"]) for e in events if e["status"] == "evolved")
    if text == REACH:
        return sorted((e["time"], e["status"], e["source"], e["sink"]) for e in events)
    return sorted((e["time"], e["status"], e["cluster"], tuple(e["members"]), tuple(e.get("parents", ())))
                  for e in events)


@pytest.mark.parametrize("directed", [True, False])
def test_workers_give_the_events_of_one_worker_and_of_networkx(tmp_path, directed, monkeypatch):
    graph = make_graph(str(tmp_path / "g.gofs"), directed)
    one, views = run(graph, directed, record=True, workers=1)
    oracles = expected(views, directed)
    for text in QUERIES:
        assert comparable(text, one[text]) == sorted(oracles[text]) and oracles[text], text

    def no_frames(workers):
        raise AssertionError("a live CGQL query read the workers' frames")
    monkeypatch.setattr(partitioned_module, "_frames", no_frames)
    for workers, rescale_at in ((2, None), (3, None), (2, {2: 3, 4: 2})):
        many, _ = run(graph, directed, rescale_at=rescale_at, workers=workers)
        for text in QUERIES:
            assert many[text] == one[text], (workers, rescale_at, text)      # every field, seqs included


def test_workers_in_spark_tasks_give_the_events_of_one_worker(tmp_path, spark):
    graph = make_graph(str(tmp_path / "g.gofs"), False)
    one, _ = run(graph, False, workers=1)
    tasks, _ = run(graph, False, workers=2, executors=True)
    assert tasks == one and all(one.values())


def test_a_frame_straddling_now_hands_the_past_groups_to_the_workers(tmp_path, monkeypatch):
    """A Cluster frame from stored instances into the live stream: the past part's last groups
    seed the workers' memory, so identities go on as the driver's evaluation of the frames has them."""
    from hatrick.cgql import onworkers
    from hatrick.cgql import engine

    def events(on_workers: bool) -> list:
        graph = make_graph(str(tmp_path / f"g{on_workers}.gofs"), False)
        s = graph.stream(num_buckets=16, workers=2)
        for rows in batches()[:3]:
            s.push(rows)
            s.snapshot()
        if not on_workers:
            monkeypatch.setattr(engine, "on_workers", lambda view, directed, plan: None)
        topic = goffish.query(graph, EVOLVED.replace("{type = power} AS", "{type = power} FROM 0 TO 100 AS"),
                              stream=s)
        try:
            for rows in batches()[3:]:
                s.push(rows)
            return [{k: v for k, v in e.items() if k not in ("detected", "topic")}
                    for name in topic.query.topics for e in topic.query.topics[name].read()]
        finally:
            topic.cancel()
            monkeypatch.undo()
            s.close()
    driver, workers = events(False), events(True)
    assert workers == driver and any(e["time"] < 3.5 for e in driver) and any(e["time"] > 3.5 for e in driver)


@pytest.mark.parametrize("executors", [False, True])
def test_a_cancelled_query_leaves_nothing_on_the_workers(tmp_path, spark, executors):
    """Each live query's sub-queries keep memory on every worker (Cluster ids one batch back, Reach
    its round); cancelling one frees exactly its keys on every worker, also on a worker its
    buckets moved to, and later batches bring none back."""
    from hatrick.cgql.onworkers import memory_keys

    graph = make_graph(str(tmp_path / "g.gofs"), False)
    s = graph.stream(num_buckets=16, workers=2, executors=executors)
    evolved, reach = goffish.query(s, EVOLVED), goffish.query(s, f"{REACH} AS cancelled_reach")
    late = goffish.query(s, CLUSTER)                     # cancelled after the stream closed: its memory went with it
    try:
        for rows in batches()[:2]:
            s.push(rows)
        if not executors:
            s.rescale(3)
        s.push(batches()[2])
        kept = {name: set(memory_keys(t.query.plan)) for name, t in (("evolved", evolved), ("reach", reach))}
        assert len(kept["evolved"]) == 1 and len(kept["reach"]) == 1        # Evolved reads its alias S's memory
        others = set(memory_keys(late.query.plan))
        everything = kept["evolved"] | kept["reach"] | others
        assert [set(keys) for keys in s.pattern_keys()] == [everything] * s.workers
        evolved.cancel()
        assert [set(keys) for keys in s.pattern_keys()] == [kept["reach"] | others] * s.workers
        s.push(batches()[3])
        assert [set(keys) for keys in s.pattern_keys()] == [kept["reach"] | others] * s.workers
        goffish.query(None, "CANCEL cancelled_reach")
        assert [set(keys) for keys in s.pattern_keys()] == [others] * s.workers
    finally:
        for t in (evolved, reach):
            t.cancel()
        s.close()
    late.cancel()
    assert late.query.cancelled


WILDCARDS = (
    "DETECT Cluster(usage < 30) WHERE edge: {type = power} AS A; "
    "DETECT Reach(source: {id = A.*}, sink: {usage > 35}) WHERE edge: {type = follow}",
    "DETECT Reach(source: {usage = C1.*}, sink: {usage > 33}) WHERE edge: {type = follow} "
    "AND DETECT Cluster(sum(node.usage) > 40, diameter < 4) WHERE edge: {type = power} AS C1; "
    "DETECT Cluster(usage != C1.*, size > 2) WHERE edge: {type = follow} AS D; "
    "DETECT Evolved(C1) WHERE sum(node.usage) < 80 AND SUCCEEDS C1")


@pytest.mark.parametrize("directed", [False, True])
def test_wildcard_queries_run_on_the_workers_with_the_events_of_the_frames(tmp_path, spark, monkeypatch, directed):
    """``alias.*`` wildcards (on ``id`` and on an attribute, in Reach and in a Cluster) with 1, 2
    and 3 workers (and a rescale; 2 in Spark tasks): every topic's events equal the evaluation over the batches'
    frames (the in-memory path, checked against NetworkX in the CGQL tests), and the frames are
    never read."""
    from hatrick.cgql import engine

    graph = make_graph(str(tmp_path / "g.gofs"), directed)

    def events(rescale_at=None, **options) -> dict:
        s = graph.stream(num_buckets=16, **options)
        topics = [goffish.query(s, text) for text in WILDCARDS]
        try:
            for i, rows in enumerate(batches()):
                if i in (rescale_at or {}):
                    s.rescale(rescale_at[i])
                s.push(rows)
            return [[{k: v for k, v in e.items() if k not in ("detected", "topic")}
                     for name in t.query.topics for e in t.query.topics[name].read()] for t in topics]
        finally:
            for t in topics:
                t.cancel()
            s.close()

    monkeypatch.setattr(engine, "on_workers", lambda view, directed, plan: None)
    frames = events(workers=1)
    monkeypatch.undo()
    assert all(frames) and {e["pattern"] for e in frames[1]} >= {"Reach", "Cluster", "Evolved"}
    assert {e["subquery"] for e in frames[1]} >= {"C1", "D"}

    def no_frames(workers):
        raise AssertionError("a live CGQL query read the workers' frames")
    monkeypatch.setattr(partitioned_module, "_frames", no_frames)
    for workers, rescale_at in ((1, None), (2, None), (3, {3: 2})):
        assert events(rescale_at, workers=workers) == frames, (workers, rescale_at)
    if not directed:
        assert events(workers=2, executors=True) == frames                 # workers in Spark tasks
