"""The Stream: exactly-once across crashes and restarts, replays, migrations, snapshots as GoFS
instances, callbacks, aging, the Structured Streaming file source and the CLI."""
import json
import os

import numpy as np
import pandas as pd
import pytest

import goffish
from goffish.cli import main
from gofs.errors import InputError
from gofs.ingest.read_local import from_pandas
from hatrick import checkpoint as checkpoint_module
from hatrick import partitioned as partitioned_module
from hatrick import stream as stream_module
from hatrick.updates import UpdateError
from hatrick_reference import Reference, live_edge_counts, live_partition

N = 30


@pytest.fixture
def graph(tmp_path):
    return sample_graph(str(tmp_path / "g.gofs"))


def sample_graph(path):
    rng = np.random.default_rng(0)
    src, dst = rng.integers(0, N, 40), rng.integers(0, N, 40)
    edges = pd.DataFrame({"src": np.r_[src, np.arange(N)], "dst": np.r_[dst, np.arange(N)], "length": 1.0})
    edges = edges.iloc[:40].reset_index(drop=True)
    vertices = pd.DataFrame({"id": np.arange(N)})
    return goffish.ingest(from_pandas(edges, vertices), path, num_partitions=2, partitioner="hash")


def template_reference(g):
    t = pd.concat([g.read_edge_partition(p).to_pandas() for p in range(g.num_partitions)])
    return Reference(g.vertex_ids.to_pylist(), list(zip(t.src, t.dst)), g.directed)


def random_log(seed, count, producers=("a", "b")):
    """A log of updates in event-time order from several producers, each numbering its own."""
    rng = np.random.default_rng(seed)
    seqs = {p: 0 for p in producers}
    log = []
    for i in range(count):
        p = producers[rng.integers(len(producers))]
        seqs[p] += 1
        op = rng.choice(["add_edge", "remove_edge", "set_edge", "set_vertex", "remove_vertex", "add_vertex"],
                        p=[0.45, 0.3, 0.1, 0.1, 0.03, 0.02])
        d = {"op": str(op), "producer": p, "seq": seqs[p], "time": float(i)}
        u, v = int(rng.integers(0, N)), int(rng.integers(0, N))
        if op in ("set_vertex", "remove_vertex", "add_vertex"):
            d["id"] = u
        else:
            d["src"], d["dst"] = u, v
        if op.startswith("set"):
            d["attribute"], d["value"] = "load", float(rng.integers(0, 5))
        log.append(d)
    return log


def log_and_reference(graph, seed, count):
    """A random log and the reference graph after applying it to ``graph``'s template."""
    log = random_log(seed, count)
    ref = template_reference(graph)
    for update in log:
        ref.apply(update)
    return log, ref


def check_equal(s, ref):
    assert sorted(s.vertices()["id"]) == sorted(ref.vertices)
    assert live_edge_counts(s.edges(), ref.directed) == ref.edge_counts()
    assert live_partition(s.connected_components()) == ref.partition()


def networkx_edge_counts(ref):
    """Edge copies per pair of the NetworkX multigraph the log leads to."""
    return live_edge_counts(pd.DataFrame(list(ref.nx().edges()), columns=["src", "dst"]), ref.directed)


def stored_edge_counts(graph, instance):
    graph = graph.refresh()
    frame = pd.concat([graph.read_edge_partition(p, instance=instance).to_pandas()
                       for p in range(graph.num_partitions)])
    return live_edge_counts(frame, graph.directed)


def push_all(s, log, size):
    for i in range(0, len(log), size):
        s.push(log[i:i + size], errors="report")


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("where,full_every", [("apply", 20), ("log_write", 20), ("commit", 2), ("after_commit", 3)])
def test_crash_mid_batch_then_restart_applies_every_update_once(graph, tmp_path, monkeypatch, where, full_every):
    """A batch commits when its log file is durable (written while the batch is applied): a crash
    in the apply or in the log write leaves it out; a crash while waiting for the log may keep
    it (then it is applied on restart, and the producers' replay of it finds it done)."""
    log = random_log(1, 400)
    ref = template_reference(graph)
    for update in log:
        ref.apply(update)
    s = graph.stream(checkpoint=str(tmp_path / "ck"), full_checkpoint_every=full_every)
    push_all(s, log[:150], 50)
    calls = {"n": 0}

    def crash(*args, **kwargs):
        raise KeyboardInterrupt("driver killed")

    target = {"apply": (partitioned_module, "apply_batch"), "log_write": (stream_module.Checkpoint, "_write"),
              "commit": (checkpoint_module._LogWrite, "result"), "after_commit": (stream_module.Stream, "_after_batch")}[where]
    original = getattr(*target)

    def sometimes(*args, **kwargs):
        calls["n"] += 1
        return crash() if calls["n"] == 2 else original(*args, **kwargs)

    monkeypatch.setattr(*target, sometimes)
    with pytest.raises(KeyboardInterrupt):
        push_all(s, log[150:300], 40)
    monkeypatch.setattr(*target, original)
    restarted = graph.stream(checkpoint=str(tmp_path / "ck"), full_checkpoint_every=full_every)
    committed = restarted.state.batch - s.state.batch     # the committed batches, rebuilt from the log
    assert committed in ((0, 1) if where == "commit" else (0,))
    push_all(restarted, log, 70)              # the producers replay their whole logs, batched differently
    check_equal(restarted, ref)
    assert restarted.hwm == {p: max(u["seq"] for u in log if u["producer"] == p) for p in ("a", "b")}


def test_duplicates_and_replays_are_ignored(graph):
    s = graph.stream()
    log = [{"op": "add_edge", "src": 1, "dst": 2, "producer": "a", "seq": 1, "time": 0.0},
           {"op": "add_edge", "src": 1, "dst": 2, "producer": "a", "seq": 1, "time": 0.0},
           {"op": "add_edge", "src": 3, "dst": 4, "producer": "b", "seq": 1, "time": 1.0}]
    before = s.state.num_edges
    report = s.push(log)
    assert (report.received, report.duplicates, report.applied) == (3, 1, 2)
    again = s.push(log)
    assert (again.duplicates, again.applied) == (3, 0) and s.state.num_edges == before + 2


def test_malformed_batch_raises_and_applies_nothing(graph):
    s = graph.stream()
    edges = s.state.num_edges
    with pytest.raises(UpdateError, match="producer 'a' seq 2: field 'dst' is missing") as info:
        s.push([{"op": "add_edge", "src": 1, "dst": 2, "producer": "a", "seq": 1, "time": 0.0},
                {"op": "add_edge", "src": 1, "producer": "a", "seq": 2, "time": 0.0}])
    assert len(info.value.rejected) == 1 and s.state.num_edges == edges and s.hwm == {}


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_add_remove_add_across_scale_out_and_scale_in(graph, tmp_path):
    s = graph.stream(checkpoint=str(tmp_path / "ck"), num_buckets=1024, workers=2)
    rng = np.random.default_rng(5)
    bulk = pd.DataFrame({"op": "add_edge", "src": rng.integers(0, 50_000, 3000), "dst": rng.integers(0, N, 3000),
                         "producer": "bulk", "seq": np.arange(1, 3001), "time": 0.0})
    s.push(bulk)
    edge = {"src": 7, "dst": 8, "producer": "x"}
    ops = [{"op": "add_edge", "seq": 1, "time": 1.0, **edge}, {"op": "remove_edge", "seq": 2, "time": 2.0, **edge},
           {"op": "add_edge", "seq": 3, "time": 3.0, **edge}]
    count = live_edge_counts(s.edges(), False).get(frozenset((7, 8)), 0)
    s.push(ops[:1])
    out = s.rescale(3, planner="ring")
    assert out.moved_fraction <= 1 / 3 + 0.05 and out.moved_buckets > 0
    s.push(ops[:2])                                        # the add is replayed, the remove is new
    back = s.rescale(2, planner="state")
    assert back.feasible and back.moved_buckets > 0
    restarted = graph.stream(checkpoint=str(tmp_path / "ck"), num_buckets=1024, workers=2)
    restarted.push(ops)
    assert live_edge_counts(restarted.edges(), False).get(frozenset((7, 8)), 0) == count + 1
    assert restarted.hwm["x"] == 3


def test_snapshot_is_a_gofs_instance_readable_by_spark(graph, spark):
    """Edges through Spark (g.edges), vertices through the partition reader (the CLI test uses g.vertices)."""
    s = graph.stream()
    s.push([{"op": "remove_edge", "src": int(s.edges().src[0]), "dst": int(s.edges().dst[0]), "producer": "p",
             "seq": 1, "time": 10.0},
            {"op": "add_edge", "src": 0, "dst": 29, "producer": "p", "seq": 2, "time": 11.0},
            {"op": "set_edge", "src": 0, "dst": 29, "attribute": "load", "value": 4.0, "producer": "p", "seq": 3,
             "time": 12.0},
            {"op": "set_vertex", "id": 5, "attribute": "color", "value": "red", "producer": "p", "seq": 4,
             "time": 13.0},
            {"op": "add_edge", "src": 3, "dst": 1000, "producer": "p", "seq": 5, "time": 14.0}])
    instance = s.snapshot()
    report = s.snapshots[-1]
    assert (report.instance, report.start, report.end, report.buffered_updates) == (instance, 10.0, 14.0, 5)
    assert (report.added_vertices, report.added_edges) == (1, 2)
    graph.refresh()
    edges = graph.edges(instance=instance, attributes=["load"]).toPandas()
    assert live_edge_counts(edges, False) == live_edge_counts(s.edges(), False)
    assert 1000 in set(graph.vertices(instance=instance).toPandas().id)
    assert edges.set_index(["src", "dst"]).loc[(0, 29), "load"] == 4.0
    vertices = pd.concat([graph.read_vertex_partition(p, instance=instance).to_pandas()
                          for p in range(graph.num_partitions)]).set_index("id")
    assert vertices.loc[5, "color"] == "red" and vertices["color"].notna().sum() == 1
    resumed = graph.stream()          # a new stream starts from the latest instance
    assert live_edge_counts(resumed.edges(), False) == live_edge_counts(s.edges(), False)


def test_callbacks_see_each_batch_and_can_be_removed(graph):
    s = graph.stream()
    seen = []

    def record(view):
        seen.append((view.seq, view.time, len(view.edges()), sorted(view.vertices().columns)))

    s.on_batch(record)
    s.push([{"op": "add_edge", "src": 1, "dst": 2, "producer": "p", "seq": 1, "time": 5.0}])
    s.push([{"op": "set_vertex", "id": 1, "attribute": "w", "value": 2, "producer": "p", "seq": 2, "time": 6.0}])
    s.remove_callback(record)
    s.push([{"op": "add_edge", "src": 1, "dst": 3, "producer": "p", "seq": 3, "time": 7.0}])
    edges = s.state.num_edges
    assert seen == [(1, 5.0, edges - 1, ["id"]), (2, 6.0, edges - 1, ["id", "w"])]


def test_aging_removes_edges_unused_for_the_ttl(graph):
    s = graph.stream(aging_ttl=10.0)
    s.push([{"op": "add_edge", "src": 1, "dst": 2, "producer": "p", "seq": 1, "time": 100.0},
            {"op": "add_edge", "src": 3, "dst": 4, "producer": "p", "seq": 2, "time": 105.0}])
    pairs = set(zip(s.edges().src, s.edges().dst))
    assert pairs == {(1, 2), (3, 4)}                        # the template edges were older than the ttl
    s.push([{"op": "set_edge", "src": 1, "dst": 2, "attribute": "hits", "value": 1, "producer": "p", "seq": 3,
             "time": 116.0}])
    assert set(zip(s.edges().src, s.edges().dst)) == {(1, 2)}
    assert s.hwm["aging"] > 0


def test_reachable_live_query_is_refreshed(graph):
    s = graph.stream()
    s.push([{"op": "set_vertex", "id": 0, "attribute": "role", "value": "src", "producer": "p", "seq": 1,
             "time": 0.0}])
    s.reachable({"role": "src"}, [1000], live="q")
    assert s.live_results["q"].empty
    s.push([{"op": "add_edge", "src": 0, "dst": 1000, "producer": "p", "seq": 2, "time": 1.0}])
    assert s.live_results["q"].to_dict("records") == [{"source": 0, "sink": 1000}]


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_structured_streaming_file_source_exactly_once_across_restart(graph, tmp_path, spark):
    log = random_log(2, 120)
    ref = template_reference(graph)
    for update in log:
        ref.apply(update)
    inbox = tmp_path / "inbox"
    inbox.mkdir()

    def drop(name, rows):
        (inbox / name).write_text("".join(json.dumps(r) + "\n" for r in rows))

    drop("0.json", log[:60])
    drop("1.json", log[40:90])                               # overlaps: a producer resent 40..59
    s = graph.stream(checkpoint=str(tmp_path / "ck"))
    s.start(str(inbox), trigger="availableNow").awaitTermination()
    s.stop()
    drop("2.json", log[90:])
    restarted = graph.stream(checkpoint=str(tmp_path / "ck"))
    restarted.start(str(inbox), trigger="availableNow").awaitTermination()
    restarted.stop()
    check_equal(restarted, ref)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_source_query_without_a_checkpoint_leaves_no_directory(graph, tmp_path, spark):
    """Without a stream checkpoint the source query's own checkpoint is scratch: it lives in
    Spark's driver scratch directory (removed by Spark's JVM at exit) and goes at stop()."""
    from pyspark import SparkFiles

    inbox = tmp_path / "inbox"
    inbox.mkdir()
    log = random_log(1, 20)
    ref = template_reference(graph)
    for update in log:
        ref.apply(update)
    (inbox / "0.json").write_text("".join(json.dumps(r) + "\n" for r in log))
    s = graph.stream()
    s.start(str(inbox), trigger="availableNow").awaitTermination()
    scratch = s._query_scratch
    assert os.path.dirname(scratch) == SparkFiles.getRootDirectory() and os.listdir(scratch) == ["spark"]
    s.stop()
    assert not os.path.exists(scratch)
    check_equal(s, ref)


def test_cli_stream_drains_a_directory_and_snapshots(graph, tmp_path, spark, capsys):
    inbox = tmp_path / "in"
    inbox.mkdir()
    (inbox / "u.json").write_text(json.dumps({"op": "set_vertex", "id": 3, "attribute": "w", "value": "2.5",
                                              "producer": "p", "seq": 1, "time": 1.0}) + "\n")
    code = main(["stream", graph.path, "--source", str(inbox), "--checkpoint", str(tmp_path / "ck")])
    out = capsys.readouterr().out
    assert code == 0 and "batch 1" in out and "snapshot instance 0" in out
    graph.refresh()
    values = graph.vertices(instance=0, attributes=["w"]).toPandas().set_index("id")
    assert values.loc[3, "w"] == 2.5


def test_kafka_source_without_its_connector_says_what_to_add(spark):
    from gofs.errors import InputError
    from hatrick.sources import kafka_source

    try:
        spark._jvm.java.lang.Class.forName("org.apache.spark.sql.kafka010.KafkaSourceProvider")
        pytest.skip("the Kafka connector is on the classpath here")
    except Exception:  # noqa: BLE001 - py4j's ClassNotFoundException
        pass
    with pytest.raises(InputError, match="spark-sql-kafka-0-10"):
        kafka_source(spark, "127.0.0.1:9092", "updates", "int64")


def test_autoscale_adds_a_worker_under_persistent_load_and_removes_it_after(graph):
    from hatrick.planner import RescalePolicy

    s = graph.stream(workers=2, autoscale=RescalePolicy(capacity=5_000, patience=2, cooldown=1), rate_half_life=0.3)
    seq = 0

    def burst(size, pause):
        nonlocal seq
        import time
        frame = pd.DataFrame({"op": "add_vertex", "id": np.arange(seq, seq + size) % 500 + 1000, "producer": "p",
                              "seq": np.arange(seq + 1, seq + size + 1), "time": 0.0})
        seq += size
        s.push(frame)
        time.sleep(pause)

    for _ in range(3):
        burst(20_000, 0.05)                        # far above 5k/s per worker
    assert len(s.ring.workers) == 3 and s.rescales[-1].workers_after == 3
    for _ in range(25):
        burst(5, 0.2)                              # the rate decays well below capacity (2^-16 after 5 s)
    assert len(s.ring.workers) < 3


def test_socket_source_feeds_the_stream(graph, spark):
    """Spark's socket source against a one-connection server on the loopback interface."""
    import socket
    import threading
    import time

    from hatrick.sources import socket_source

    lines = "".join(json.dumps({"op": "add_edge", "src": 1, "dst": 100 + i, "producer": "sock", "seq": i + 1,
                                "time": float(i)}) + "\n" for i in range(20))
    server = socket.create_server(("127.0.0.1", 0))
    done = threading.Event()

    def serve():
        connection, _ = server.accept()
        with connection:
            connection.sendall(lines.encode())
            done.wait(60)

    threading.Thread(target=serve, daemon=True).start()
    s = graph.stream()
    try:
        s.start(socket_source(spark, "127.0.0.1", server.getsockname()[1], s.id_type),
                trigger="processingTime=500 milliseconds")
        deadline = time.monotonic() + 60
        while s.hwm.get("sock", 0) < 20 and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        s.stop()
        done.set()
        server.close()
    assert s.hwm.get("sock") == 20
    assert {d for src, d in zip(s.edges().src, s.edges().dst) if src == 1 and d >= 100} == set(range(100, 120))


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_rescaling_while_updates_flow_loses_and_doubles_nothing(graph, tmp_path):
    import threading

    log = random_log(3, 600)
    ref = template_reference(graph)
    for update in log:
        ref.apply(update)
    s = graph.stream(checkpoint=str(tmp_path / "ck"), num_buckets=64, workers=2)
    stop = threading.Event()
    sizes = []

    def rescale_forever():
        n = 2
        while not stop.is_set():
            n = 3 if n == 2 else 2
            sizes.append(s.rescale(n, planner="state" if n == 3 else "ring").workers_after)
            stop.wait(0.01)

    worker = threading.Thread(target=rescale_forever)
    worker.start()
    try:
        push_all(s, log[:400], 25)
        push_all(s, log[200:], 25)          # a producer retries half of what it sent
    finally:
        stop.set()
        worker.join()
    assert len(sizes) >= 2
    check_equal(s, ref)


def test_stream_refuses_a_planted_pickle_and_a_world_writable_checkpoint(graph, tmp_path):
    import os
    import pickle

    marker = tmp_path / "pwned"

    class Planted:
        def __reduce__(self):
            return os.system, (f"touch {marker}",)

    ck = tmp_path / "road.ck"
    ck.mkdir(mode=0o700)
    (ck / "hatrick-checkpoint.pkl").write_bytes(pickle.dumps(Planted()))
    with pytest.raises(InputError, match="old pickle format.*never loaded"):
        graph.stream(checkpoint=str(ck))
    ck.chmod(0o777)
    with pytest.raises(InputError, match="writable by group or others"):
        graph.stream(checkpoint=str(ck))
    assert not marker.exists()


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_resumed_stream_snapshots_what_a_killed_driver_committed_but_never_snapshotted(graph, tmp_path, spark):
    log = random_log(7, 120)
    ref = template_reference(graph)
    for update in log:
        ref.apply(update)
    ck = str(tmp_path / "ck")
    s = graph.stream(checkpoint=ck, full_checkpoint_every=2)
    push_all(s, log, 25)                            # committed, then the driver dies before any snapshot
    s._checkpoint.wait()
    restarted = graph.stream(checkpoint=ck)
    assert restarted.buffer.volume == len(log) and restarted.buffer.min_time() == 0.0
    inbox = tmp_path / "in"
    inbox.mkdir()
    assert main(["stream", graph.path, "--source", str(inbox), "--checkpoint", ck]) == 0   # the documented resume
    graph.refresh()
    assert len(graph.instances) == 1
    edges = graph.edges(instance=graph.instances[0]["id"]).toPandas()
    assert live_edge_counts(edges, False) == ref.edge_counts()
    again = graph.stream(checkpoint=ck)             # nothing left to write
    assert again.buffer.volume == 0 and again.snapshots[-1].instance == graph.instances[0]["id"]


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_snapshot_interrupted_after_its_commit_is_adopted_not_written_twice(graph, tmp_path, monkeypatch):
    ck = str(tmp_path / "ck")
    s = graph.stream(checkpoint=ck)
    push_all(s, random_log(8, 60), 30)

    def killed(*args, **kwargs):
        raise KeyboardInterrupt("driver killed")

    monkeypatch.setattr(checkpoint_module.Checkpoint, "snapshot_done", killed)
    with pytest.raises(KeyboardInterrupt):
        s.snapshot()                                # the instance is committed, the record is not
    monkeypatch.undo()
    instances = graph.refresh().instances
    restarted = graph.stream(checkpoint=ck)
    assert restarted.buffer.volume == 0 and [r.instance for r in restarted.snapshots] == [instances[-1]["id"]]
    assert restarted.snapshot() is not None and len(graph.refresh().instances) == len(instances) + 1


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_line_cut_and_restored_keeps_its_template_type_and_an_add_can_carry_a_value(tmp_path, spark):
    import networkx as nx

    path = nx.path_graph(6)
    edges = pd.DataFrame({"src": [u for u, _ in path.edges], "dst": [v for _, v in path.edges], "type": "line"})
    g = goffish.ingest(from_pandas(edges, pd.DataFrame({"id": list(path.nodes)})), str(tmp_path / "p.gofs"),
                       num_partitions=2, partitioner="hash")
    s = g.stream(checkpoint=str(tmp_path / "ck"))

    def u(op, seq, src=2, dst=3, **kw):
        return {"op": op, "src": src, "dst": dst, "producer": "p", "seq": seq, "time": float(seq), **kw}

    report = s.push([u("remove_edge", 1), u("add_edge", 2), u("add_edge", 3, 0, 4, attribute="load", value=2.5),
                     u("add_edge", 4, 1, 4, attribute="load", value="heavy")])
    assert report.applied == 3 and list(report.rejected.reason) == ["attribute 'load' holds double values"]
    live = s.edges().set_index(["src", "dst"])
    assert live.loc[(2, 3), "type"] == "line" and live.loc[(0, 4), "load"] == 2.5 and (1, 4) not in live.index
    restarted = g.stream(checkpoint=str(tmp_path / "ck"))      # the template values survive a restart
    pd.testing.assert_frame_equal(restarted.edges(), s.edges())
    stored = g.edges(instance=s.snapshot(), attributes=["type", "load"]).toPandas().set_index(["src", "dst"])
    assert stored.loc[(2, 3), "type"] == "line" and stored.loc[(0, 4), "load"] == 2.5
    assert live_edge_counts(stored.reset_index(), False) == live_edge_counts(s.edges(), False)


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("workers", [1, 2])
def test_a_removed_vertex_takes_every_copy_of_its_edges_out_of_the_snapshot(tmp_path, workers):
    """Seed 3 removes vertex 19, which has two parallel template edges to 0: the live graph, its
    components and the snapshot (one removed row per copy) equal NetworkX after the log."""
    for seed in (3, 7, 12):
        graph = sample_graph(str(tmp_path / f"g{seed}.gofs"))
        log, ref = log_and_reference(graph, seed, 300)
        s = graph.stream(num_buckets=16, workers=workers)
        push_all(s, log, 25)
        check_equal(s, ref)
        assert stored_edge_counts(graph, s.snapshot()) == networkx_edge_counts(ref), seed


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_workers_build_their_buckets_parts_of_a_snapshot_with_the_values_of_one(tmp_path, spark):
    """The same log on 1 and on 3 workers (each writing its buckets' part of the instance):
    both snapshots store the same vertices, edge copies and vertex and edge values, and the
    3 workers' parts split the changes between them (each one's part is its own)."""
    stored = []
    for workers in (1, 3):
        graph = sample_graph(str(tmp_path / f"g{workers}.gofs"))
        log, ref = log_and_reference(graph, 11, 400)
        s = graph.stream(num_buckets=16, workers=workers)
        push_all(s, log, 50)
        instance = s.snapshot()
        parts = s.snapshots[-1].parts
        assert len(parts) == workers
        if workers == 3:
            assert sum(part["removed_edges"] > 0 for part in parts) >= 2
            assert sum(part["vertex_rows"] > 0 for part in parts) == 3
        g = graph.refresh()
        assert stored_edge_counts(g, instance) == networkx_edge_counts(ref)
        vertices = g.vertices(instance=instance, attributes=["load"]).toPandas()
        edges = pd.concat([g.read_edge_partition(p, attributes=["load"], instance=instance).to_pandas()
                           for p in range(g.num_partitions)])
        stored.append((sorted((int(i), None if pd.isna(x) else float(x)) for i, x in zip(vertices.id, vertices.load)),
                       sorted((min(a, b), max(a, b), None if pd.isna(x) else float(x))
                              for a, b, x in zip(edges.src, edges.dst, edges.load))))
    assert stored[0] == stored[1]
    assert any(x is not None for _, x in stored[0][0]) and any(x is not None for *_, x in stored[0][1])


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_snapshot_whose_writer_fails_leaves_the_graph_as_it_was(tmp_path, monkeypatch):
    """A worker failing while it writes its partitions' files: no instance is committed, the
    instance directory (staged parts and files already written) is gone, and the next snapshot
    of the same stream writes the instance the NetworkX reference expects."""
    import os

    from gofs import instance_parts

    graph = sample_graph(str(tmp_path / "g.gofs"))
    log, ref = log_and_reference(graph, 5, 300)
    s = graph.stream(num_buckets=8, workers=2)
    push_all(s, log, 50)
    written = instance_parts.write_partition

    def fail_on_the_last(target, p, *args):
        written(target, p, *args)
        if p == target.partitions - 1:
            raise OSError("disk full")

    monkeypatch.setattr(partitioned_module, "write_partition", fail_on_the_last)
    with pytest.raises(OSError, match="disk full"):
        s.snapshot()
    g = graph.refresh()
    assert g.instances == []
    assert not os.path.exists(os.path.join(g.store.root, "instances")) or \
        os.listdir(os.path.join(g.store.root, "instances")) == []
    monkeypatch.setattr(partitioned_module, "write_partition", written)
    instance = s.snapshot()
    assert [i["id"] for i in graph.refresh().instances] == [instance]
    assert stored_edge_counts(graph.refresh(), instance) == networkx_edge_counts(ref)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_stream_changes_a_template_attribute_live_in_its_snapshot_and_after_a_restart(tmp_path, workers):
    """A line cut, restored and re-typed keeps the new type; an add carries a static value; a
    value of the wrong kind is refused naming the attribute and the update. The live edge table,
    the snapshot and a stream started from that snapshot all hold the expected table."""
    import networkx as nx

    path = nx.path_graph(6)
    edges = pd.DataFrame({"src": [u for u, _ in path.edges], "dst": [v for _, v in path.edges], "type": "line"})
    g = goffish.ingest(from_pandas(edges, pd.DataFrame({"id": list(path.nodes)})), str(tmp_path / "p.gofs"),
                       num_partitions=2, partitioner="hash")
    s = g.stream(num_buckets=4, workers=workers)

    def u(op, seq, src=2, dst=3, **kw):
        return {"op": op, "src": src, "dst": dst, "producer": "p", "seq": seq, "time": float(seq), **kw}

    s.push([u("remove_edge", 1), u("add_edge", 2), u("set_edge", 3, attribute="type", value="power"),
            u("add_edge", 4, 0, 5, attribute="type", value="cable"), u("set_edge", 5, 4, 5, attribute="type", value=None)])
    with pytest.warns(UserWarning, match="producer 'p' seq [67]: attribute 'type' holds string values"):
        report = s.push([u("set_edge", 6, 1, 2, attribute="type", value=3.5), u("add_edge", 7, 0, 2, attribute="type", value=1)])
    assert report.applied == 0 and sorted(report.rejected.seq) == [6, 7]
    assert set(report.rejected.reason) == {"attribute 'type' holds string values"}
    expected = [(0, 1, "line"), (0, 5, "cable"), (1, 2, "line"), (2, 3, "power"), (3, 4, "line"), (4, 5, None)]

    def table(frame):
        return sorted((min(a, b), max(a, b), None if pd.isna(t) else t) for a, b, t in
                      zip(frame.src, frame.dst, frame.type))

    assert table(s.edges()) == expected
    instance = s.snapshot()
    stored = pd.concat([g.refresh().read_edge_partition(p, attributes=["type"], instance=instance).to_pandas()
                        for p in range(g.num_partitions)])
    assert table(stored) == expected
    assert table(g.stream(num_buckets=4, workers=workers).edges()) == expected     # starts from the snapshot


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_workers_hold_parts_of_the_live_graph_with_the_results_of_one(graph, tmp_path):
    """g.stream(workers=3): every worker holds state, rescaling sends bytes between them, and the
    graph, components, live reach, views, snapshot and a restart equal the one-worker stream's."""
    log = random_log(7, 300)
    ref = template_reference(graph)
    for update in log:
        ref.apply(update)
    one = graph.stream(num_buckets=16)
    many = graph.stream(checkpoint=str(tmp_path / "ck"), num_buckets=16, workers=3, full_checkpoint_every=3)
    views = {"one": [], "many": []}

    def frames(view):                                      # read after the next batch: views keep their batch
        edges, vertices = view.edges(), view.vertices()
        edge_load, vertex_load = (f.get("load", pd.Series(np.nan, index=f.index)).fillna(-1) for f in (edges, vertices))
        return (view.seq, sorted((min(u, v), max(u, v), w) for u, v, w in zip(edges.src, edges.dst, edge_load)),
                sorted(zip(vertices.id, vertex_load)))

    one.on_batch(views["one"].append)
    many.on_batch(views["many"].append)
    for s in (one, many):
        s.reachable([0, 1, 2], list(range(10, 30)), live="q")
        push_all(s, log[:200], 30)
    assert many.workers == 3 and all(n > 0 for n in many.live.sizes()[:, 1])
    out = many.rescale(2, planner="ring")
    assert out.moved_bytes > 0 and len(out.worker_state) == 2 and many.workers == 2
    for s in (one, many):
        push_all(s, log[200:], 30)
    check_equal(many, ref)
    assert len(views["many"]) == many.live.batch and many.num_edges == one.num_edges
    assert [frames(v) for v in views["many"]] == [frames(v) for v in views["one"]]
    key = ["source", "sink"]
    for s in (one, many):
        assert s.live_results["q"].sort_values(key).values.tolist() == \
            s.reachable([0, 1, 2], list(range(10, 30))).sort_values(key).values.tolist()
    assert sorted(map(tuple, many.live_results["q"].values.tolist())) == \
        sorted(map(tuple, one.live_results["q"].values.tolist()))
    assert many.now() == one.now() and many.bucket_state().sum() == one.bucket_state().sum()
    for frame in ("vertices", "edges"):                    # attributes travel with the moved buckets
        got, want = (getattr(s, frame)() for s in (many, one))
        if frame == "edges":
            got, want = ([(min(u, v), max(u, v), w) for u, v, w in zip(f.src, f.dst, f.load.fillna(-1))]
                         for f in (got, want))
        else:
            got, want = ([(i, w) for i, w in zip(f.id, f.load.fillna(-1))] for f in (got, want))
        assert sorted(got) == sorted(want)
    restarted = graph.stream(checkpoint=str(tmp_path / "ck"), num_buckets=16, workers=3)
    assert restarted.workers == 3 and restarted.live.batch == many.live.batch
    check_equal(restarted, ref)
    instance = restarted.snapshot()                         # built by the workers, each for its buckets
    g = graph.refresh()
    stored = pd.concat([g.read_edge_partition(p, instance=instance).to_pandas() for p in range(g.num_partitions)])
    assert live_edge_counts(stored, False) == ref.edge_counts()


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("workers", [1, 3])
def test_a_template_edge_removed_and_added_gets_its_static_value_back_on_any_worker(graph, workers):
    s = graph.stream(num_buckets=16, workers=workers)
    first = s.edges().iloc[0]
    u, v = int(first.src), int(first.dst)

    def copies():
        e = s.edges()
        return e[((e.src == u) & (e.dst == v)) | ((e.src == v) & (e.dst == u))]

    before = len(copies())
    s.push([{"op": "remove_edge", "src": u, "dst": v, "producer": "p", "seq": 1, "time": 1.0},
            {"op": "add_edge", "src": u, "dst": v, "producer": "p", "seq": 2, "time": 2.0}])
    if workers > 1:
        s.rescale(2, planner="ring")
    assert len(copies()) == before and (copies()["length"] == 1.0).all()


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_workers_in_spark_tasks_give_the_results_of_workers_in_the_driver(graph, tmp_path, spark, monkeypatch):
    """executors=True: each worker is a long-running Spark task holding its buckets' state (the
    same Worker, reached over a socket); pushes, a scale-out that starts a task and moves buckets
    to it, live reach, a checkpoint restart and a snapshot give what the in-process stream gives."""
    from hatrick import datafile

    log, ref = log_and_reference(graph, 11, 240)
    s = graph.stream(checkpoint=str(tmp_path / "ck"), num_buckets=16, executors=True, full_checkpoint_every=3)

    def fetched(*args):
        raise AssertionError("a worker's state was fetched to the driver")

    try:
        assert type(s.live.workers[0]).__name__ == "RemoteWorker"
        monkeypatch.setattr(partitioned_module.PartitionedGraph, "states", fetched)    # full checkpoints and
        monkeypatch.setattr(partitioned_module.PartitionedGraph, "gather", fetched)    # snapshots: by the workers
        s.reachable([0, 1, 2], list(range(10, 30)), live="q")
        push_all(s, log[:120], 30)
        out = s.rescale(2, planner="ring")                  # local[2]: two tasks fit when nothing feeds them
        assert out.moved_bytes > 0 and s.workers == 2 and all(n > 0 for n in s.live.sizes()[:, 1])
        with pytest.raises(InputError, match="3 slot"):      # a query would find no slot
            s.start(str(tmp_path / "updates"))
        push_all(s, log[120:], 30)
        check_equal(s, ref)
        assert s.live_results["q"].sort_values(["source", "sink"]).values.tolist() == \
            s.reachable([0, 1, 2], list(range(10, 30))).sort_values(["source", "sink"]).values.tolist()
        instance = s.snapshot()
    finally:
        s.close()
        monkeypatch.undo()
    g = graph.refresh()
    stored = pd.concat([g.read_edge_partition(p, instance=instance).to_pandas() for p in range(g.num_partitions)])
    assert live_edge_counts(stored, False) == ref.edge_counts()
    manifest = datafile.loads((tmp_path / "ck" / "hatrick-checkpoint.data").read_bytes())
    assert manifest["batch"] > 4 and manifest["states"] == [f"hatrick-state-{manifest['batch']:012d}-{i:04d}.data"
                                                            for i in range(2)]      # a full after the rescale
    restarted = graph.stream(checkpoint=str(tmp_path / "ck"), num_buckets=16, workers=2)
    check_equal(restarted, ref)
    with pytest.raises(InputError, match="3 worker"):
        graph.stream(num_buckets=16, workers=3, executors=True)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_pipelined_push_returns_before_its_batch_is_applied_and_reports_it_once_complete(graph, spark):
    """Workers in Spark tasks: a push returns with its batch in flight (the workers apply it while
    the driver checks and routes the next); the next push completes it, so one batch is in flight
    at most; a replay of the batch in flight counts as duplicates; its rejection is warned about
    and listed when it completes; reading the report, ``hwm`` or the graph completes it; the
    graph then equals NetworkX's for every update applied once."""
    log, ref = log_and_reference(graph, 13, 120)
    bad = {"op": "remove_edge", "src": 0, "dst": 10**6, "producer": "z", "seq": 1, "time": 0.0}
    s = graph.stream(num_buckets=16, workers=2, executors=True)
    try:
        assert s.pipelined
        first = s.push(log[:60] + [bad], errors="report")
        assert first._complete is not None and s._inflight.report is first          # in flight
        with pytest.warns(UserWarning, match="update\\(s\\) rejected"):
            second = s.push(log[30:120], errors="report")                            # completes the first
        assert first._complete is None and first.applied + len(first.rejected) == 61
        assert (first.rejected.producer == "z").sum() == 1 and second.duplicates == 30
        assert s._inflight.report is second and s.hwm == {"a": max(u["seq"] for u in log if u["producer"] == "a"),
                                                          "b": max(u["seq"] for u in log if u["producer"] == "b"),
                                                          "z": 1}
        assert s._inflight is None and second.applied + len(second.rejected) == 60
        assert len(s.rejected) == len(first.rejected) + len(second.rejected)
        check_equal(s, ref)
    finally:
        s.close()


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("workers", [1, 2])
def test_pipelined_live_results_are_each_batchs_own_though_joined_after_the_next_batch_is_sent(graph, spark,
                                                                                               monkeypatch, workers):
    """Workers in Spark tasks, a live Reach query and no reads between pushes: a batch's live result
    is asked of the workers before the next batch's commit and joined once the batch after that is
    sent; every result joined equals NetworkX's reachability after the batch it was asked on."""
    import networkx as nx

    log, ref = random_log(17, 160), template_reference(graph)
    sources, sinks = [0, 1, 2], list(range(10, 30))
    asked = partitioned_module.PartitionedGraph.ask_reachable
    joined = []                                         # (batch asked on, its pairs)

    def recorded(self, *selectors):
        on, pairs = self.batch, asked(self, *selectors)

        def join():
            result = pairs()
            joined.append((on, set(map(tuple, result.values.tolist()))))
            return result
        return join

    def reach():
        g = ref.nx()
        return {(u, v) for u in sources for v in sinks if u in g and v in g and nx.has_path(g, u, v)}

    monkeypatch.setattr(partitioned_module.PartitionedGraph, "ask_reachable", recorded)
    s = graph.stream(num_buckets=16, workers=workers, executors=True)
    try:
        assert s.pipelined
        s.reachable(sources, sinks, live="q")
        expected = {s.live.batch: reach()}
        for i in range(0, len(log), 20):
            report = s.push(log[i:i + 20], errors="report")
            for update in log[i:i + 20]:
                ref.apply(update)
            expected[report.batch] = reach()
        assert set(map(tuple, s.live_results["q"].values.tolist())) == expected[s.live.batch]
    finally:
        s.close()
    assert sorted(on for on, _ in joined) == sorted(expected)       # each batch's result, joined once
    assert all(pairs == expected[on] for on, pairs in joined)
    assert len(set(map(frozenset, expected.values()))) > 2            # the results change over the pushes


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("workers", [1, 2])
def test_snapshots_forced_by_a_full_buffer_hold_each_edge_once_with_workers_in_spark_tasks(graph, workers, spark,
                                                                                          monkeypatch):
    """A buffer of 60 updates overflows every few batches of 25, each time forcing a snapshot
    that the workers build for their buckets (the driver never gathers the graph): every instance
    equals NetworkX at that point, the live graph equals it after every batch, and a stream opened
    on the graph afterwards loads the last instance with each edge once (no template's worth added)."""
    from hatrick.buffer import SnapshotPolicy
    from hatrick.partitioned import PartitionedGraph

    def no_gather(self):
        raise AssertionError("a snapshot gathered the live graph onto the driver")

    monkeypatch.setattr(PartitionedGraph, "gather", no_gather)

    log, ref = random_log(21, 300), template_reference(graph)
    never_due = SnapshotPolicy(min_volume=10**9, max_volume=10**9, max_age=float("inf"), capacity=60)
    s = graph.stream(num_buckets=16, workers=workers, executors=True, snapshot_policy=never_due)
    try:
        for i in range(0, len(log), 25):
            before, snapshots = networkx_edge_counts(ref), len(s.snapshots)
            s.push(log[i:i + 25], errors="report")
            for update in log[i:i + 25]:
                ref.apply(update)
            if len(s.snapshots) > snapshots:
                assert stored_edge_counts(graph, s.snapshots[-1].instance) == before, i
            check_equal(s, ref)
        assert len(s.snapshots) >= 3
        last = s.snapshot()
    finally:
        s.close()
    assert stored_edge_counts(graph, last) == networkx_edge_counts(ref)
    reopened = graph.refresh().stream(num_buckets=16, workers=workers)
    assert live_edge_counts(reopened.edges(), False) == ref.edge_counts()


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_lost_worker_task_is_replaced_from_the_checkpoint_exactly_once(graph, tmp_path, spark):
    """A worker's Spark task ends under the stream (its job cancelled, its connection gone): the
    next push recovers every worker from the full checkpoint plus the logged batches and applies
    the batch once; without a checkpoint the loss is reported."""
    log, ref = log_and_reference(graph, 5, 200)
    s = graph.stream(checkpoint=str(tmp_path / "ck"), num_buckets=16, executors=True, full_checkpoint_every=4)
    try:
        push_all(s, log[:110], 20)                           # a full state at batch 4, batches 5-6 logged
        s.live.workers[0].abort()
        push_all(s, log[110:], 20)
        assert s.recoveries == 1
        check_equal(s, ref)
    finally:
        s.close()
    bare = graph.stream(num_buckets=16, executors=True)
    try:
        bare.live.workers[0].abort()
        with pytest.raises(stream_module.WorkerLost, match="no checkpoint"):
            bare.push(log[:5])
    finally:
        bare.close()


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_worker_lost_before_its_commit_is_answered_is_recovered_and_applies_every_batch_once(graph, tmp_path,
                                                                                              spark):
    """A pipelined push sends its batch's stage without waiting for the workers' answers to the
    commit of the batch before (they are read with its outcome); a worker lost with that commit
    unanswered: the next push recovers every worker from the checkpoint, whose log holds the
    batch, and each update is applied once."""
    log, ref = log_and_reference(graph, 7, 200)
    s = graph.stream(checkpoint=str(tmp_path / "ck"), num_buckets=16, workers=2, executors=True,
                     full_checkpoint_every=4)
    try:
        push_all(s, log[:120], 20)
        assert s._inflight is not None and len(s.live._committing) == 2      # batch 5 committed unanswered
        s.live.workers[1].abort()
        push_all(s, log[120:], 20)
        s.flush()
        assert s.recoveries == 1 and s.live._committing == []
        check_equal(s, ref)
    finally:
        s.close()


REACH_EVENTS = "DETECT Reach(source: {id IN (0, 1, 2, 3)}, sink: {id IN (20, 21, 22, 23)}) AS "


def without_names(events):
    """Events without the wall-clock ``detected`` and the query's names."""
    return [{k: v for k, v in e.items() if k not in ("detected", "topic", "subquery")} for e in events]


def faultless_events(graph, log, size, name):
    """The Reach events of ``log`` pushed once, in batches of ``size``, to an in-driver stream
    (while ``graph`` has no snapshot yet)."""
    s = graph.stream()
    topic = goffish.query(graph, REACH_EVENTS + name, stream=s)
    push_all(s, log, size)
    topic.cancel()
    return without_names(topic.read())


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_worker_lost_mid_rescale_is_recovered_and_moved_again_exactly_once(graph, tmp_path, spark, monkeypatch):
    """The new worker's task ends after the old one extracted and sent its buckets (mid-move):
    every worker is rebuilt from the checkpoint with the owners before the move, the move is done
    again, and the graph, components, snapshot and every Reach event (to a subscriber that resumes
    from its last seq) are those of every update applied once."""
    from hatrick.executors import RemoteWorker

    log, ref = log_and_reference(graph, 7, 200)
    expected = faultless_events(graph, log, 20, "once")
    s = graph.stream(checkpoint=str(tmp_path / "ck"), num_buckets=16, executors=True, full_checkpoint_every=4)
    topic = goffish.query(graph, REACH_EVENTS + "moved", stream=s)
    received = []
    subscription = topic.subscribe(received.append)
    original, lost = RemoteWorker.request, []

    def request(worker, name, *args):
        if name == "absorb_from" and not lost:
            lost.append(worker.index)
            worker.abort()
        return original(worker, name, *args)

    try:
        push_all(s, log[:120], 20)                             # a full state at batch 4, batches 5-6 logged
        subscription.cancel()                                  # the subscriber goes away ...
        monkeypatch.setattr(RemoteWorker, "request", request)
        report = s.rescale(2)
        monkeypatch.setattr(RemoteWorker, "request", original)
        push_all(s, log[120:], 20)
        topic.subscribe(received.append, from_seq=received[-1]["seq"] + 1)     # ... and resumes
        assert lost == [1] and s.recoveries == 1 and report.workers_after == s.workers == 2
        check_equal(s, ref)
        assert stored_edge_counts(graph, s.snapshot()) == networkx_edge_counts(ref)
    finally:
        topic.cancel()
        s.close()
    assert without_names(received) == expected != []
    assert [e["seq"] for e in received] == list(range(len(received)))


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("where,call", [("after_commit", 7), ("commit", 6), ("next_batch", 8)])
def test_a_restarted_driver_delivers_every_cgql_event_once_to_a_resuming_subscriber(graph, tmp_path, monkeypatch,
                                                                                  where, call):
    """The driver dies after a batch committed but before its events were published, while waiting
    for a batch's log (which may or may not be durable), or after the events went out; a new Stream on the checkpoint registers the
    Reach query again with its topic's next seq and pattern state, and a subscriber resuming from
    its last seq gets the events of a faultless run, same seqs, none twice. The kill is at batch 7,
    which makes Reach events (so does the one before and after the restart)."""
    log = random_log(11, 200)
    expected = faultless_events(graph, log, 20, "once")
    s = graph.stream(checkpoint=str(tmp_path / "ck"), full_checkpoint_every=3)
    topic = goffish.query(graph, REACH_EVENTS + "kept", stream=s)
    received = []
    topic.subscribe(received.append)
    target = {"after_commit": (stream_module.Stream, "_after_batch"), "commit": (checkpoint_module._LogWrite, "result"),
              "next_batch": (stream_module.Checkpoint, "begin")}[where]
    original, calls = getattr(*target), []

    def dies_at_batch_7(*args, **kwargs):
        calls.append(1)
        if len(calls) == call:
            raise KeyboardInterrupt("driver killed")
        return original(*args, **kwargs)

    monkeypatch.setattr(*target, dies_at_batch_7)
    with pytest.raises(KeyboardInterrupt):
        push_all(s, log, 20)
    monkeypatch.setattr(*target, original)
    topic.cancel()                                  # the dead driver's query and topic are gone with it
    assert {e["snapshot"] for e in received} == ({1, 2, 4, 7} if where == "next_batch" else {1, 2, 4})
    restarted = graph.stream(checkpoint=str(tmp_path / "ck"), full_checkpoint_every=3)
    resumed = restarted.queries["kept"]
    resumed.subscribe(received.append, from_seq=received[-1]["seq"] + 1)
    try:
        push_all(restarted, log, 20)                # the producers replay their whole logs
    finally:
        resumed.cancel()
    assert without_names(received) == without_names(expected)
    assert [e["seq"] for e in received] == list(range(len(expected)))


def run_on_local_cluster(tmp_path, master: str, body: str, name: str = "job", dies: bool = False) -> dict:
    """Run ``body`` (Python, after a prelude that imports this module as ``t``, starts the session as
    ``spark`` and defines ``executor_pids()`` and ``die()``, a SIGKILL of the driver's Python process)
    with spark-submit on ``master``; returns the JSON object its last output line prints (``dies``:
    the job is expected to fail, having printed that line before it died)."""
    import os
    import subprocess
    import sys
    import textwrap
    from pathlib import Path

    script = tmp_path / f"{name}.py"
    script.write_text(textwrap.dedent(f"""
        import json, os, signal, sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        import goffish
        import test_hatrick_stream as t
        from hatrick_reference import live_partition
        spark = goffish.session(app_name="hatrick-faults")

        def executor_pids():
            app = spark.sparkContext.applicationId.encode()
            return [int(p) for p in os.listdir("/proc") if p.isdigit() and
                    b"CoarseGrainedExecutorBackend" in open(f"/proc/{{p}}/cmdline", "rb").read() and
                    app in open(f"/proc/{{p}}/cmdline", "rb").read()]

        def die(where):
            print(json.dumps({{"died": where}}), flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
    """) + textwrap.dedent(body))
    python = sys.executable
    env = {**os.environ, "PYSPARK_PYTHON": python, "PYSPARK_DRIVER_PYTHON": python}
    done = subprocess.run([str(Path(python).parent / "spark-submit"), "--master", master, str(script)],
                          capture_output=True, text=True, env=env, timeout=600)
    errors = [line for line in done.stderr.splitlines() if " ERROR " in line or line.startswith("Exception")]
    error = (done.stderr[done.stderr.find("Traceback"):][:3000] if "Traceback" in done.stderr
             else "\n".join(errors[:40] + ["..."]) + "\n" + done.stderr[-3000:])
    assert (done.returncode != 0) == dies, error
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_kill_9_of_a_workers_executor_on_local_cluster_loses_and_doubles_nothing(tmp_path):
    """On local-cluster[2,1,1024] each of the two workers is a task in its own executor JVM: one
    executor is killed with SIGKILL mid-stream; the stream replaces the workers from its checkpoint
    and the live graph, its components and its snapshot equal applying every update once (NetworkX)."""
    report = run_on_local_cluster(tmp_path, "local-cluster[2,1,1024]", f"""
        g = t.sample_graph({str(tmp_path / 'g.gofs')!r})
        log, ref = t.log_and_reference(g, 3, 300)
        s = g.stream(checkpoint={str(tmp_path / 'ck')!r}, num_buckets=16, workers=2, full_checkpoint_every=4)
        remote = type(s.live.workers[0]).__name__
        t.push_all(s, log[:150], 25)
        executors = executor_pids()
        os.kill(executors[0], signal.SIGKILL)
        t.push_all(s, log[150:], 25)
        t.check_equal(s, ref)
        same_cc = live_partition(s.connected_components()) == ref.partition()      # NetworkX's
        same_snapshot = t.stored_edge_counts(g, s.snapshot()) == t.networkx_edge_counts(ref)
        print(json.dumps({{"remote": remote, "executors": len(executors), "recoveries": s.recoveries,
                          "components_equal_networkx": same_cc, "snapshot_equal_networkx": same_snapshot}}))
        s.close()
    """)
    assert report == {"remote": "RemoteWorker", "executors": 2, "recoveries": 1, "components_equal_networkx": True,
                      "snapshot_equal_networkx": True}


# where the first job is killed: (what is patched, the request or step that kills, the push or rescale it happens in)
DRIVER_KILLS = {
    "mid_batch": """
        from hatrick import checkpoint
        def killed(*args, **kwargs):
            die("mid_batch")                                   # the batch's log is being written
        checkpoint._LogWrite.result = killed
        t.push_all(s, log[150:], 25)
    """,
    "mid_move": """
        from hatrick.executors import RemoteWorker
        original = RemoteWorker.request
        def request(worker, name, *args):
            if name == "absorb_from":                          # buckets extracted and sent, not yet taken
                die("mid_move")
            return original(worker, name, *args)
        RemoteWorker.request = request
        s.rescale(3)
    """,
}


@pytest.mark.slow
@pytest.mark.parametrize("where", sorted(DRIVER_KILLS))
def test_driver_killed_on_local_cluster_restarts_from_the_checkpoint_exactly_once(tmp_path, where):
    """The driver of a 2-worker stream on local-cluster[3,1,1024] is killed with SIGKILL while a batch
    is being logged, or while a scale-out to 3 workers has buckets in flight; a new driver restarts
    the stream from the checkpoint, the producers replay their whole logs, and the live graph, its
    components and its snapshot equal applying every update once (NetworkX)."""
    path = str(tmp_path / "g.gofs")
    prelude = f"""
        g = goffish.open({path!r}) if os.path.exists({path!r}) else t.sample_graph({path!r})
        log, ref = t.log_and_reference(g, 3, 300)
        s = g.stream(checkpoint={str(tmp_path / 'ck')!r}, num_buckets=16, workers=2, full_checkpoint_every=4)
    """
    first = run_on_local_cluster(tmp_path, "local-cluster[3,1,1024]", prelude + """
        t.push_all(s, log[:150], 25)
    """ + DRIVER_KILLS[where] + """
    """, name="killed", dies=True)
    assert first == {"died": where}
    second = run_on_local_cluster(tmp_path, "local-cluster[3,1,1024]", prelude + """
        restored = s.live.batch
        t.push_all(s, log, 40)                                 # the producers replay everything
        t.check_equal(s, ref)
        print(json.dumps({"restored_batch": restored, "workers": s.workers,
                          "components_equal_networkx": live_partition(s.connected_components()) == ref.partition(),
                          "snapshot_equal_networkx": t.stored_edge_counts(g, s.snapshot()) == t.networkx_edge_counts(ref)}))
        s.close()
    """, name="restarted")
    # mid_batch: the pipelined push dies completing batch 6 (5 if its log was not yet durable) or logging 7
    assert second.pop("restored_batch") in ((5, 6, 7) if where == "mid_batch" else (6,))
    assert second == {"workers": 2, "components_equal_networkx": True, "snapshot_equal_networkx": True}


@pytest.mark.slow
def test_kill_9_of_an_executor_mid_rescale_on_local_cluster_loses_and_doubles_nothing(tmp_path):
    """A scale-out 2 -> 3 on local-cluster[3,1,1024] (every executor then runs one worker) loses an
    executor to SIGKILL while the moved buckets are in flight: the stream recovers from its checkpoint,
    moves again, and its graph, components and snapshot equal NetworkX's for every update once."""
    report = run_on_local_cluster(tmp_path, "local-cluster[3,1,1024]", f"""
        from hatrick.executors import RemoteWorker
        g = t.sample_graph({str(tmp_path / 'g.gofs')!r})
        log, ref = t.log_and_reference(g, 3, 300)
        s = g.stream(checkpoint={str(tmp_path / 'ck')!r}, num_buckets=16, workers=2, full_checkpoint_every=4)
        t.push_all(s, log[:150], 25)
        original, killed = RemoteWorker.request, []
        def request(worker, name, *args):
            if name == "absorb_from" and not killed:
                killed.append(executor_pids()[0])
                os.kill(killed[0], signal.SIGKILL)
            return original(worker, name, *args)
        RemoteWorker.request = request
        moved = s.rescale(3)
        RemoteWorker.request = original
        t.push_all(s, log[150:], 25)
        t.check_equal(s, ref)
        print(json.dumps({{"killed": len(killed), "recoveries": s.recoveries, "workers": [moved.workers_after, s.workers],
                          "components_equal_networkx": live_partition(s.connected_components()) == ref.partition(),
                          "snapshot_equal_networkx": t.stored_edge_counts(g, s.snapshot()) == t.networkx_edge_counts(ref)}}))
        s.close()
    """)
    assert report == {"killed": 1, "recoveries": 1, "workers": [3, 3], "components_equal_networkx": True,
                      "snapshot_equal_networkx": True}


def test_task_slots_follow_the_master():
    from types import SimpleNamespace

    from hatrick.executors import task_slots

    def spark(master, **conf):
        conf = {k.replace("_", "."): v for k, v in conf.items()}
        context = SimpleNamespace(master=master, defaultParallelism=7, getConf=lambda: SimpleNamespace(get=conf.get))
        return SimpleNamespace(sparkContext=context)

    assert task_slots(spark("local[3]")) == 3 and task_slots(spark("local")) == 1
    assert task_slots(spark("local-cluster[2, 1, 2048]")) == 2
    assert task_slots(spark("local-cluster[3,2,1024]", spark_task_cpus="2")) == 3
    assert task_slots(spark("spark://h:7077", spark_executor_instances="4", spark_executor_cores="2")) == 8
    assert task_slots(spark("yarn")) == 7


def community_graph(path, name=int):
    """Four 12-vertex cliques joined in a ring by one edge each (vertex v named ``name(v)``), METIS
    into four partitions: one community a partition."""
    import networkx as nx

    graph = nx.relabel_nodes(nx.ring_of_cliques(4, 12), name)
    return goffish.ingest(graph, path, num_partitions=4, partitioner="metis")


def community_log(seed, count, size=48):
    """Edge adds (mostly inside a community: vertices // 12 equal) and removals of present edges."""
    rng = np.random.default_rng(seed)
    log, present = [], []
    for seq in range(1, count + 1):
        if present and rng.random() < 0.4:
            u, v = present.pop(int(rng.integers(len(present))))
            log.append({"op": "remove_edge", "src": u, "dst": v, "producer": "p", "seq": seq, "time": float(seq)})
            continue
        u = int(rng.integers(size))
        v = (u // 12) * 12 + int(rng.integers(12)) if rng.random() < 0.9 else int(rng.integers(size))
        present.append((u, v))
        log.append({"op": "add_edge", "src": u, "dst": v, "producer": "p", "seq": seq, "time": float(seq)})
    return log


@pytest.mark.parametrize("name", [int, lambda v: 1000 * v, str], ids=["dense", "sparse", "strings"])
def test_buckets_aligned_with_partitions_put_each_template_vertex_in_its_partitions_group(tmp_path, name):
    """Ids 0..V-1 are looked up in an array, sparse and string ids in a hash table: the same buckets."""
    from hatrick.buckets import Buckets

    g = community_graph(str(tmp_path / "c.gofs"), name)
    parts = {p: g.read_vertex_partition(p).column("id").to_numpy() for p in range(g.num_partitions)}
    aligned, hashed = Buckets("partitions", g.store), Buckets()
    for count in (64, 7, 3):                                 # groups of 16, groups of 1 or 2, shared buckets
        for p, ids in parts.items():
            start = p * count // 4
            got = aligned.of(ids, count)
            assert ((got >= start) & (got < max((p + 1) * count // 4, start + 1))).all()
    for p, ids in parts.items():
        assert (aligned.groups(64)[aligned.of(ids, 64)] == p).all()
    assert not all(((hashed.of(ids, 64) // 16) == p).all() for p, ids in parts.items())
    beyond = np.array([name(v) for v in (1001, 1002, 5_000_001)])    # not in the template: hashed buckets
    assert (aligned.of(beyond, 64) == hashed.of(beyond, 64)).all()


def test_aligned_buckets_of_integer_ids_are_the_documented_hash_within_the_group(tmp_path):
    """The one pass over integer ids (hash, partition lookup, bucket) gives a template id the
    bucket ``start + stable_hash(id) % size`` of its partition's group and any other id (negative,
    beyond the template) ``stable_hash(id) % count``: the buckets a checkpoint's states were split by."""
    from hatrick.buckets import Buckets
    from hatrick.ring import stable_hash

    g = community_graph(str(tmp_path / "c.gofs"))
    partition_of = {int(v): p for p in range(g.num_partitions)
                    for v in g.read_vertex_partition(p).column("id").to_numpy()}
    ids = np.array([*partition_of, -5, 48, 10 ** 12, 2 ** 62], np.int64)
    hashed = [int(h) for h in stable_hash(ids)]
    for count in (64, 7, 3):
        expected = []
        for v, h in zip(ids.tolist(), hashed):
            if v not in partition_of:
                expected.append(h % count)
                continue
            start = partition_of[v] * count // 4
            expected.append(start + h % max((partition_of[v] + 1) * count // 4 - start, 1))
        assert Buckets("partitions", g.store).of(ids, count).tolist() == expected


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_stream_with_aligned_buckets_equals_networkx_across_a_rescale_and_a_restart(tmp_path):
    g = community_graph(str(tmp_path / "c.gofs"))
    log = community_log(3, 600)
    ref = template_reference(g)
    for update in log:
        ref.apply(update)
    options = {"checkpoint": str(tmp_path / "ck"), "num_buckets": 16, "workers": 2, "buckets": "partitions",
               "full_checkpoint_every": 3}
    s = g.stream(**options)
    assert [set(s.owner[4 * p:4 * p + 4]) for p in range(4)] == [{0}, {0}, {1}, {1}]   # a group on one worker
    push_all(s, log[:200], 50)
    out = s.rescale(3)
    assert out.feasible and out.moved_fraction <= 1 / 3 + 0.05
    push_all(s, log[200:400], 50)
    restarted = g.stream(**{**options, "workers": 3})
    push_all(restarted, log, 70)                                    # producers replay their whole logs
    check_equal(restarted, ref)
    assert live_edge_counts(restarted.edges(), False) == networkx_edge_counts(ref)
    with pytest.raises(InputError, match="buckets='partitions'"):
        g.stream(**{**options, "buckets": "hash"})


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_workers_in_spark_tasks_bucket_by_partitions_as_the_driver_does(tmp_path, spark):
    """Each worker's task builds the aligned buckets from GoFS itself (only the store travels): a
    scale-out that starts a task and a restart that starts them all give the NetworkX graph."""
    g = community_graph(str(tmp_path / "c.gofs"))
    log = community_log(4, 300)
    ref = template_reference(g)
    for update in log:
        ref.apply(update)
    options = {"checkpoint": str(tmp_path / "ck"), "num_buckets": 16, "buckets": "partitions", "executors": True}
    s = g.stream(**options)
    try:
        push_all(s, log[:100], 50)
        out = s.rescale(2)
        assert out.moved_bytes > 0 and [len(set(s.owner[4 * p:4 * p + 4])) for p in range(4)] == [1, 1, 1, 1]
        push_all(s, log[100:200], 50)
    finally:
        s.close()
    restarted = g.stream(**{**options, "workers": 2})
    try:
        push_all(restarted, log, 70)
        check_equal(restarted, ref)
    finally:
        restarted.close()
