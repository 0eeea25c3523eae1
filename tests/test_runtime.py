"""The Gopher runtime: resident barrier stage vs. the job-per-superstep fallback, faults, rendezvous.

The engine's semantics are tested in test_engine.py and the algorithms in
test_algorithms.py on the resident transport (the default); here every
algorithm, every time-series pattern and the error paths also run on the
fallback and must give identical results, a task killed mid-run must give the
result of a clean run, and a task that never connects must fail the run
clearly, in time, with nothing left behind.
"""
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from pyspark import cloudpickle

import goffish
from sparkshim.compat import persistent_rdd_ids
from goffish.generators import road_network
from goffish.temporal import road_with_travel_times
from gopher.program import SubgraphProgram
from gopher.resident import RendezvousTimeout
from gopher.timeseries import run_eventually_dependent, run_independent, run_sequential
from gopher.worker import GopherProgramError

cloudpickle.register_pickle_by_value(sys.modules[__name__])

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def road(spark, tmp_path_factory):
    edges = road_network(400, seed=3)
    path = str(tmp_path_factory.mktemp("runtime") / "road.gofs")
    return goffish.ingest(edges, path, num_partitions=5, weight="length", spark=spark)


@pytest.fixture(scope="module")
def timed(spark, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("runtime") / "road-t.gofs")
    return road_with_travel_times(path, 150, hours=6, num_partitions=3, spark=spark)


def _frame(result, key=("id",)):
    return result.toPandas().sort_values(list(key)).reset_index(drop=True)


# ------------------------------------------------------------------ both transports, same answers

@pytest.mark.parametrize("algorithm", ["cc", "sssp", "pagerank"])
def test_algorithms_give_identical_results_on_both_transports(road, algorithm):
    run = {"cc": lambda **o: road.connected_components(**o),
           "sssp": lambda **o: road.sssp(road.vertices().first()["id"], weight="length", **o),
           "pagerank": lambda **o: road.pagerank(max_iter=8, tol=0, **o)}[algorithm]
    resident, jobs = run(progress=False, transport="resident"), run(progress=False, transport="jobs")
    assert (resident.metrics.transport, jobs.metrics.transport) == ("resident", "jobs")
    assert resident.metrics.num_supersteps == jobs.metrics.num_supersteps
    pd.testing.assert_frame_equal(_frame(resident.dataframe), _frame(jobs.dataframe))


class Degrees(SubgraphProgram):
    """Per instance: the sum of travel times at each vertex; merged: their maximum over instances."""

    instance_edge_attributes = ("travel_time",)
    output_schema = {"load": pa.float64()}
    merge_schema = {"peak": pa.float64()}
    aggregators = {"total": "sum"}

    def compute(self, subgraph, messages, ctx):
        weights = subgraph.adjacency("travel_time")
        subgraph.state["load"] = np.asarray(weights.sum(axis=1)).ravel()
        ctx.aggregate("total", float(subgraph.state["load"].sum()))
        if ctx.superstep == 0:
            ctx.send_to_neighbors(ctx.superstep)
        ctx.vote_to_halt()

    def output(self, subgraph):
        return {"load": subgraph.state["load"]}

    def merge(self, subgraph, states, ctx):
        subgraph.state["peak"] = np.max([s["load"] for s in states.values()], axis=0)
        ctx.aggregate("total", float(subgraph.state["peak"].sum()))

    def merge_output(self, subgraph):
        return {"peak": subgraph.state["peak"]}


class Carry(Degrees):
    stop_when_quiet = False

    def compute(self, subgraph, messages, ctx):
        super().compute(subgraph, messages, ctx)
        subgraph.state["seen"] = subgraph.state.get("seen", 0) + 1
        ctx.send_forward_to_subgraph(subgraph.id, 1)

    def output(self, subgraph):
        return {"load": subgraph.state["load"] * subgraph.state["seen"]}


@pytest.mark.parametrize("pattern", ["independent", "eventually_dependent", "sequential"])
def test_time_series_patterns_give_identical_results_on_both_transports(timed, pattern):
    if pattern == "sequential":
        run = lambda **o: run_sequential(timed, Carry(), **o)  # noqa: E731
        key = ("id",)
    else:
        runner = run_independent if pattern == "independent" else run_eventually_dependent
        run = lambda **o: runner(timed, Degrees(), concurrency=4, **o)  # noqa: E731
        key = ("instance", "id")
    resident, jobs = run(progress=False, transport="resident"), run(progress=False, transport="jobs")
    assert resident.supersteps == jobs.supersteps and resident.aggregated == jobs.aggregated
    pd.testing.assert_frame_equal(_frame(resident.dataframe, key), _frame(jobs.dataframe, key))
    if pattern == "eventually_dependent":
        assert resident.merged_aggregated == jobs.merged_aggregated
        pd.testing.assert_frame_equal(_frame(resident.merged), _frame(jobs.merged))


class Explodes(SubgraphProgram):
    output_schema = {"x": pa.int64()}

    def compute(self, subgraph, messages, ctx):
        if ctx.superstep == 1 and subgraph.id == 2:
            raise ZeroDivisionError("boom in user code")
        ctx.send_to_neighbors(1)

    def output(self, subgraph):
        return {"x": np.zeros(subgraph.num_vertices, np.int64)}


@pytest.mark.parametrize("transport", ["resident", "jobs"])
def test_program_errors_are_reported_whole_on_both_transports(spark, road, transport):
    persisted = lambda: persistent_rdd_ids(spark)  # noqa: E731
    before = persisted()
    with pytest.raises(GopherProgramError) as info:
        road.run(Explodes(), progress=False, transport=transport)
    message = str(info.value)
    assert "Explodes.compute failed on sub-graph 2 " in message and "in superstep 1" in message
    assert "ZeroDivisionError('boom in user code')" in message and "Traceback" in message
    assert persisted() - before == set()


# ------------------------------------------------------------------ faults

class DiesOnce(SubgraphProgram):
    """Label propagation that counts supersteps (sub-graph 0 stays active up to superstep 5);
    on its first attempt the task running sub-graph 0 kills its own Python worker in
    superstep ``die_at``."""

    output_schema = {"label": pa.int64(), "steps": pa.int64()}

    def __init__(self, marker: str, die_at: int):
        self.marker, self.die_at = marker, die_at

    def compute(self, subgraph, messages, ctx):
        state = subgraph.state
        if ctx.superstep == 0:
            state["label"], state["steps"] = subgraph.first_vertex_id, 0
        state["steps"] += 1
        if subgraph.id == 0 and ctx.superstep == self.die_at and not os.path.exists(self.marker):
            Path(self.marker).touch()
            os._exit(1)
        best = min([state["label"], *messages.payloads])
        if ctx.superstep == 0 or best < state["label"]:
            state["label"] = best
            ctx.send_to_neighbors(best)
        if subgraph.id != 0 or ctx.superstep >= 5:
            ctx.vote_to_halt()

    def output(self, subgraph):
        n = subgraph.num_vertices
        return {"label": np.full(n, subgraph.state["label"]), "steps": np.full(n, subgraph.state["steps"])}


@pytest.mark.parametrize("die_at, interval, resumed", [(3, 2, 2), (1, None, None)])
def test_a_task_killed_mid_run_gives_the_result_of_a_clean_run(road, tmp_path, die_at, interval, resumed):
    clean = road.run(DiesOnce(str(tmp_path / "never") + "/x", -1), progress=False)
    faulty = road.run(DiesOnce(str(tmp_path / "died"), die_at), progress=False, checkpoint_interval=interval)
    assert (tmp_path / "died").exists()
    assert faulty.metrics.attempts == 1 and faulty.metrics.resumed_from == [resumed]
    assert faulty.metrics.num_supersteps == clean.metrics.num_supersteps
    pd.testing.assert_frame_equal(_frame(faulty.dataframe), _frame(clean.dataframe))


def test_tasks_resume_from_the_checkpoint_their_clocks_chose(road, tmp_path):
    """Time-based checkpoints, decided by the tasks themselves (DiesOnce has no ``master``): every
    superstep after the first is due, so the run resumes from the last one every task confirmed."""
    clean = road.run(DiesOnce(str(tmp_path / "never") + "/x", -1), progress=False)
    faulty = road.run(DiesOnce(str(tmp_path / "died"), 3), progress=False, checkpoint_seconds=1e-9)
    assert faulty.metrics.attempts == 1 and faulty.metrics.resumed_from == [2]
    pd.testing.assert_frame_equal(_frame(faulty.dataframe), _frame(clean.dataframe))


# ------------------------------------------------------------------ tasks that go on by themselves

class Labels(SubgraphProgram):
    """Label propagation counting its changes in an aggregator; a sub-graph halts once its label
    stays put, and reads the last superstep's aggregates into its state."""

    output_schema = {"label": pa.int64(), "changes": pa.int64()}
    aggregators = {"changed": "sum", "low": "min"}

    def compute(self, subgraph, messages, ctx):
        state = subgraph.state
        if ctx.superstep == 0:
            state["label"], state["changes"] = subgraph.first_vertex_id, 0
        else:
            state["changes"] += int(ctx.aggregated["changed"])
        best = min([state["label"], *messages.payloads])
        if ctx.superstep == 0 or best < state["label"]:
            state["label"] = best
            ctx.send_to_neighbors(best)
            ctx.aggregate("changed", 1)
        ctx.aggregate("low", best)
        ctx.vote_to_halt()

    def output(self, subgraph):
        n = subgraph.num_vertices
        return {"label": np.full(n, subgraph.state["label"]), "changes": np.full(n, subgraph.state["changes"])}


class LabelsWithMaster(Labels):
    """:class:`Labels` with a driver-side ``master`` that does nothing: the driver plans every superstep."""

    def master(self, ctx):
        pass


def test_tasks_go_on_by_themselves_where_the_program_has_no_master(road, monkeypatch):
    from gopher.resident import ResidentTransport

    sent = []
    broadcast = ResidentTransport._broadcast
    monkeypatch.setattr(ResidentTransport, "_broadcast", lambda self, message: sent.append(message[0]) or
                        broadcast(self, message))
    ahead = road.run(Labels(), progress=False)
    assert sent == ["ahead", "output"]
    sent.clear()
    driven = road.run(LabelsWithMaster(), progress=False)
    assert sent == ["step"] * driven.metrics.num_supersteps + ["output"]
    assert ahead.metrics.num_supersteps == driven.metrics.num_supersteps > 3
    assert ahead.aggregated == driven.aggregated and ahead.aggregated["changed"] == 0
    shape = lambda m: [(s.superstep, s.active_subgraphs, s.messages) for s in m.supersteps]  # noqa: E731
    assert shape(ahead.metrics) == shape(driven.metrics)
    assert all(s.seconds > 0 for s in ahead.metrics.supersteps)
    pd.testing.assert_frame_equal(_frame(ahead.dataframe), _frame(driven.dataframe))


class SlowToStart(SubgraphProgram):
    """Unpickling this program in task 1 takes a minute: that task never reaches the driver in time."""

    output_schema = {"x": pa.int64()}

    def __init__(self, delay: float = 60.0):
        self.delay = delay              # (pickle calls __setstate__ only for a non-empty state)

    def __setstate__(self, state):
        from pyspark import TaskContext

        self.__dict__.update(state)
        context = TaskContext.get()
        if context is not None and context.partitionId() == 1:
            time.sleep(self.delay)

    def compute(self, subgraph, messages, ctx):
        ctx.vote_to_halt()

    def output(self, subgraph):
        return {"x": np.zeros(subgraph.num_vertices, np.int64)}


def _sockets() -> int:
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
        except FileNotFoundError:         # the listing's own descriptor, already closed
            pass
    return count


def test_a_task_that_never_connects_fails_the_run_in_time(spark, road):
    persisted = lambda: persistent_rdd_ids(spark)  # noqa: E731
    spark.conf.set("spark.goffish.rendezvousTimeout", "15")
    try:
        with pytest.raises(RendezvousTimeout):           # warm-up: Spark's own connections settle
            road.run(SlowToStart(), progress=False)
        before, sockets, clock = persisted(), _sockets(), time.monotonic()
        with pytest.raises(RendezvousTimeout, match=r"1 of the run's 2 tasks \(task \[1\]\) did not connect within 15 s"):
            road.run(SlowToStart(), progress=False)
        assert time.monotonic() - clock < 60
        assert persisted() - before == set()
        assert _sockets() == sockets
    finally:
        spark.conf.unset("spark.goffish.rendezvousTimeout")


def _stray_clients(address) -> list:
    """Attack a port: a silent client (kept open), a connect-and-close (a port scanner) and one
    that sends garbage; returns the open sockets for the caller to close."""
    import socket

    socket.create_connection(tuple(address)).close()
    silent, garbage = socket.create_connection(tuple(address)), socket.create_connection(tuple(address))
    garbage.sendall(b"GET / HTTP/1.0\r\n\r\n")
    return [silent, garbage]


@pytest.mark.parametrize("port", ["driver", "tasks"])
def test_stray_clients_on_the_run_ports_neither_stall_nor_fail_a_run(spark, road, monkeypatch, port):
    """Attack (issue 24, item 5): stray TCP clients on the driver's port before the tasks register, or on
    every task's port before its peers connect. The run still gives the clean run's result, well within
    the rendezvous timeout (a stalled handshake used to end in RendezvousTimeout or hang), and every
    listener of a local[*] run is on the loopback address."""
    from gopher.resident import ResidentTransport

    clean = road.connected_components(progress=False)
    strays, seen = [], {}
    if port == "driver":
        launch = ResidentTransport._launch

        def attack_driver(self, resume):
            seen["driver"] = self.address
            strays.extend(_stray_clients(self.address))
            launch(self, resume)

        monkeypatch.setattr(ResidentTransport, "_launch", attack_driver)
    else:
        start = ResidentTransport._start        # every task has registered, none has connected to its peers

        def attack_tasks(self, registered, resume):
            seen["tasks"] = [address for _, address in registered.values()]
            for address in seen["tasks"]:
                strays.extend(_stray_clients(address))
            start(self, registered, resume)

        monkeypatch.setattr(ResidentTransport, "_start", attack_tasks)
    spark.conf.set("spark.goffish.rendezvousTimeout", "30")
    try:
        clock = time.monotonic()
        attacked = road.connected_components(progress=False)
        assert time.monotonic() - clock < 30
    finally:
        spark.conf.unset("spark.goffish.rendezvousTimeout")
        for sock in strays:
            sock.close()
    assert attacked.metrics.transport == "resident" and attacked.metrics.attempts == 0      # no restart
    pd.testing.assert_frame_equal(_frame(attacked.dataframe), _frame(clean.dataframe))
    addresses = [seen["driver"]] if port == "driver" else seen["tasks"]
    assert addresses and all(host == "127.0.0.1" for host, _ in addresses)


def test_frames_are_authenticated_where_spark_authenticates_and_results_do_not_change(road, monkeypatch):
    """With spark.authenticate (here forced: the shared session cannot turn it on) every frame carries
    an HMAC; the run gives the same result."""
    import gopher.resident

    plain = road.pagerank(max_iter=6, tol=0, progress=False)
    keys = []
    monkeypatch.setattr(gopher.resident, "frames_authenticated", lambda conf: True)
    start = gopher.resident.ResidentTransport._start
    monkeypatch.setattr(gopher.resident.ResidentTransport, "_start",
                        lambda self, registered, resume: keys.append(self.key) or start(self, registered, resume))
    authenticated = road.pagerank(max_iter=6, tol=0, progress=False)
    assert [k.frames for k in keys] == [True]
    pd.testing.assert_frame_equal(_frame(authenticated.dataframe), _frame(plain.dataframe))


def test_transport_setting_is_checked(road):
    with pytest.raises(ValueError, match="unknown Gopher transport 'carrier-pigeon'"):
        road.connected_components(progress=False, transport="carrier-pigeon")


# ------------------------------------------------------------------ separate executor processes

@pytest.mark.slow
def test_resident_run_on_local_cluster_with_separate_executors(tmp_path):
    """On local-cluster[2,1,1024] each task is in its own executor JVM and Python worker: the
    peers talk over real sockets between processes, and a killed task's run resumes."""
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(f"""
        import json, os, sys
        sys.path.insert(0, {str(ROOT / 'tests')!r})
        from pyspark import cloudpickle
        import goffish, test_runtime
        cloudpickle.register_pickle_by_value(test_runtime)
        from goffish.generators import road_network
        spark = goffish.session(app_name="runtime-cluster")
        g = goffish.ingest(road_network(300, seed=5), {str(tmp_path / 'g.gofs')!r}, num_partitions=4, spark=spark)
        clean = g.run(test_runtime.DiesOnce({str(tmp_path / 'never/x')!r}, -1), progress=False)
        faulty = g.run(test_runtime.DiesOnce({str(tmp_path / 'died')!r}, 2), progress=False, checkpoint_interval=1)
        pids = g.run(test_runtime.Pids(), progress=False).dataframe.select("pid").distinct().count()
        rows = lambda r: sorted(map(tuple, r.dataframe.collect()))
        print(json.dumps({{"same": rows(clean) == rows(faulty), "transport": faulty.metrics.transport,
                          "attempts": faulty.metrics.attempts, "resumed": faulty.metrics.resumed_from,
                          "pids": pids}}))
    """))
    python = sys.executable
    env = {**os.environ, "PYSPARK_PYTHON": python, "PYSPARK_DRIVER_PYTHON": python}
    spark_submit = Path(python).parent / "spark-submit"
    done = subprocess.run([str(spark_submit), "--master", "local-cluster[2,1,1024]", str(script)],
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = __import__("json").loads(done.stdout.strip().splitlines()[-1])
    assert report == {"same": True, "transport": "resident", "attempts": 1, "resumed": [1], "pids": 2}


class Pids(SubgraphProgram):
    output_schema = {"pid": pa.int64()}

    def compute(self, subgraph, messages, ctx):
        ctx.vote_to_halt()

    def output(self, subgraph):
        return {"pid": np.full(subgraph.num_vertices, os.getpid())}


@pytest.mark.parametrize("array", [
    np.arange(5, dtype=np.int64), np.linspace(0, 1, 7).reshape(7, 1), np.array(3.5), np.empty(0, np.int32),
    np.arange(12, dtype=">i4").reshape(3, 4).T, np.array(["a", None, 2], dtype=object),
    np.zeros(3, dtype=[("x", np.int64), ("y", np.float32)]), np.arange(1 << 14, dtype=np.float64)],
    ids=["int64", "column", "0-d", "empty", "big-endian-transposed", "object", "structured", "out-of-band"])
def test_frames_carry_arrays_whole_and_writable(array):
    """Message frames rebuild every array with its dtype, shape and values, writable, whether its
    numbers were written by the codec (buffer, dtype, shape) or by numpy's own reduction."""
    from gopher import codec

    source = array.copy()
    source.flags.writeable = False                     # as Subgraph.neighbors hands out its ids
    frames = codec.to_frames({"batch": (source, [source])})
    got = codec.from_frames([bytearray(frame) for frame in frames])
    for copy in (got["batch"][0], got["batch"][1][0], codec.loads(codec.dumps(source))):
        assert copy.dtype == array.dtype and copy.shape == array.shape
        assert copy.tolist() == array.tolist()
        assert copy.flags.writeable
