"""Time-series patterns: which instance each superstep sees, in which order, what state and
messages carry over, what Merge sees, and which files the tasks read.

Programs log what ``compute`` saw into ``subgraph.state["log"]`` and output it
as JSON for every vertex, so a test compares exactly what each sub-graph saw.
"""
import json
import sys

import numpy as np
import pyarrow as pa
import pytest
from pyspark import cloudpickle

import goffish
import graphs
from goffish.generators import road_network
from goffish.temporal import road_with_travel_times
from gofs.errors import InputError
from gofs.instances import Instance
from gopher.timeseries import TimeSeriesProgram, run_eventually_dependent, run_independent, run_sequential
from gopher.worker import GopherProgramError

cloudpickle.register_pickle_by_value(sys.modules[__name__])

INSTANCES = 6


@pytest.fixture(scope="module")
def graph(spark, tmp_path_factory):
    """A 150-vertex road graph in 3 partitions; instance t (time [10t, 10t+10)) gives vertex
    ``level`` = 1000 t + original id."""
    source = road_network(150, seed=4)
    g = goffish.ingest(source, str(tmp_path_factory.mktemp("ts") / "g.gofs"), num_partitions=3, spark=spark)
    ids = np.arange(150)
    g.append_instances([Instance(10.0 * t, 10.0 * t + 10,
                                 vertex_values=pa.table({"id": ids, "level": 1000.0 * t + ids}))
                        for t in range(INSTANCES)])
    return g


def _logs(frame) -> dict:
    """{(instance or None, id): parsed log}."""
    names = frame.columns
    return {(row["instance"] if "instance" in names else None, row["id"]): json.loads(row["log"])
            for row in frame.collect()}


class Logging(TimeSeriesProgram):
    output_schema = {"log": pa.string()}
    instance_vertex_attributes = ("level",)
    stop_when_quiet = False

    def output(self, subgraph):
        return {"log": np.array([json.dumps(subgraph.state.get("log", []))] * subgraph.num_vertices, dtype=object)}


class SeeInstance(Logging):
    """Logs (instance id, index, superstep, [level - original id] of its vertices) and halts."""

    def compute(self, subgraph, messages, ctx):
        offset = sorted(set((subgraph.vertex_attribute("level") - subgraph.ids).tolist()))
        subgraph.state.setdefault("log", []).append([ctx.instance["id"], ctx.instance_index, ctx.superstep, offset])
        ctx.vote_to_halt()


class Quiet(SeeInstance):
    stop_when_quiet = True


def test_independent_sees_one_instance_each_in_one_superstep(graph):
    result = run_independent(graph, SeeInstance(), instances=[4, 1, 2])
    logs = _logs(result.dataframe)
    assert sorted({i for i, _ in logs}) == [1, 2, 4]
    assert len(logs) == 3 * graph.num_vertices
    for (instance, _), log in logs.items():
        assert log == [[instance, [1, 2, 4].index(instance), 0, [1000.0 * instance]]]
    assert result.metrics.num_supersteps == 1          # all three instances shared the superstep
    assert result.instances == [1, 2, 4] and result.supersteps == {1: 1, 2: 1, 4: 1}


def test_sequential_runs_in_time_order_and_keeps_state(graph):
    result = graph.run_timeseries(SeeInstance(), "sequential", instances=[3, 0, 5])
    assert result.instances == [0, 3, 5]
    for (instance, _), log in _logs(result.dataframe).items():
        assert instance is None
        assert log == [[0, 0, 0, [0.0]], [3, 1, 0, [3000.0]], [5, 2, 0, [5000.0]]]


def test_sequential_stops_when_nothing_is_sent_forward(graph):
    result = run_sequential(graph, Quiet(), time=(0, 60))
    assert result.instances == [0]
    assert {json.dumps(log) for log in _logs(result.dataframe).values()} == {json.dumps([[0, 0, 0, [0.0]]])}


class Sleepy(SeeInstance):
    """Halted sub-graphs sleep through instances; sub-graph 0 wakes itself with a forward message."""

    wake_at_instance_start = False

    def compute(self, subgraph, messages, ctx):
        super().compute(subgraph, messages, ctx)
        if subgraph.id == 0:
            ctx.send_forward_to_subgraph(0, "again")


def test_sequential_without_waking_at_instance_start(graph):
    result = run_sequential(graph, Sleepy(), instances=[1, 2, 4])
    assert result.instances == [1, 2, 4]
    subgraph_of = graphs.vertex_subgraphs(graph)
    for (_, vertex), log in _logs(result.dataframe).items():
        assert [entry[0] for entry in log] == ([1, 2, 4] if subgraph_of[vertex] == 0 else [1])


class Relay(Logging):
    """Superstep 0: log forward messages; send "now" to neighbour sub-graphs, "next" forward to
    them, and 1 + instance id twice forward to its own first vertex (sum combiner).
    Superstep 1: log the "now" payloads."""

    combiner = "sum"

    def compute(self, subgraph, messages, ctx):
        iid = ctx.instance["id"]
        got = sorted([int(s), list(p)] for s, p in zip(messages.senders, messages.payloads))
        values = [[int(subgraph.ids[v]), float(x)] for v, x in zip(messages.vertices, messages.values)]
        neighbours = subgraph.neighbors()
        subgraph.state.setdefault("log", []).append([iid, ctx.superstep, got, values, neighbours.tolist()])
        if ctx.superstep == 0:
            ctx.send_to_neighbors(("now", iid))
            ctx.send_forward_to_subgraphs(neighbours, [("next", iid)] * len(neighbours))
            ctx.send_forward_to_vertices([subgraph.first_vertex_id] * 2, [iid + 1.0, iid + 1.0])
        ctx.vote_to_halt()


def test_sequential_forward_messages_arrive_in_the_next_instance_only(graph):
    result = run_sequential(graph, Relay(), instances=[0, 2, 3])
    logs = {json.dumps(log): log for log in _logs(result.dataframe).values()}.values()
    assert result.supersteps == {0: 2, 2: 2, 3: 2}
    assert any(log[0][4] for log in logs)
    for log in logs:
        entries = {(e[0], e[1]): e for e in log}
        neighbours = log[0][4]
        assert len(entries) == (6 if neighbours else 3)
        for previous, instance in ((None, 0), (0, 2), (2, 3)):
            forward = entries[(instance, 0)]
            if previous is None:
                assert forward[2] == [] and forward[3] == []
            else:
                assert forward[2] == [[s, ["next", previous]] for s in neighbours]
                assert [v for _, v in forward[3]] == [2.0 * (previous + 1)]
            if neighbours:
                now = entries[(instance, 1)]
                assert now[2] == [[s, ["now", instance]] for s in neighbours] and now[3] == []


class Staggered(Logging):
    """Instance at index i runs i + 1 supersteps; in superstep 0 every sub-graph sends
    1 + instance id to vertex 0 (sum combiner), whose sub-graph logs what arrives."""

    combiner = "sum"

    def __init__(self, target: int):
        self.target = target

    def compute(self, subgraph, messages, ctx):
        if ctx.superstep == 0:
            ctx.send_to_vertex(self.target, ctx.instance["id"] + 1.0)
        elif len(messages.vertices):
            subgraph.state.setdefault("log", []).append([ctx.instance["id"], ctx.superstep,
                                                         messages.values.tolist()])
        if ctx.superstep >= ctx.instance_index:
            ctx.vote_to_halt()


def test_independent_instances_share_supersteps_and_combine_separately(graph):
    count = graph.manifest["subgraphs"]["count"]
    result = run_independent(graph, Staggered(graph.vid_of(0)), instances=[0, 1, 4])
    assert result.supersteps == {0: 2, 1: 2, 4: 3}
    assert result.metrics.num_supersteps == 3
    logs = _logs(result.dataframe)
    for instance in (0, 1, 4):
        assert logs[(instance, 0)] == [[instance, 1, [count * (instance + 1.0)]]]


class SeeBefore(Logging):
    """Superstep 0 keeps the instance's levels; superstep 1 logs what the previous instance's
    lane kept for the same sub-graph (None for the first instance)."""

    def compute(self, subgraph, messages, ctx):
        if ctx.superstep == 0:
            subgraph.state["levels"] = (subgraph.vertex_attribute("level") - subgraph.ids).tolist()
            return
        before = ctx.state_before(subgraph)
        subgraph.state["log"] = [ctx.instance["id"], None if before is None else sorted(set(before["levels"]))]
        ctx.vote_to_halt()


def test_independent_lanes_read_the_previous_instance_state(graph):
    result = run_independent(graph, SeeBefore(), instances=[1, 3, 4])
    assert result.metrics.num_supersteps == 2
    logs = _logs(result.dataframe)
    assert len(logs) == 3 * graph.num_vertices
    assert {(instance, json.dumps(log)) for (instance, _), log in logs.items()} == \
        {(1, json.dumps([1, None])), (3, json.dumps([3, [1000.0]])), (4, json.dumps([4, [3000.0]]))}


class MergeSeen(Logging):
    aggregators = {"seen": "sum"}
    merge_schema = {"merged": pa.string()}

    def compute(self, subgraph, messages, ctx):
        subgraph.state["instance"] = ctx.instance["id"]
        subgraph.state["level"] = float(subgraph.vertex_attribute("level")[0] - subgraph.ids[0])
        ctx.vote_to_halt()

    def merge(self, subgraph, states, ctx):
        subgraph.state["merged"] = [[k, s["instance"], s["level"]] for k, s in states.items()]
        ctx.aggregate("seen", len(states))

    def merge_output(self, subgraph):
        return {"merged": np.array([json.dumps(subgraph.state["merged"])] * subgraph.num_vertices, dtype=object)}


def test_merge_sees_every_instance_exactly_once(graph):
    result = run_eventually_dependent(graph, MergeSeen(), time=(15, 45), concurrency=2)
    assert result.instances == [1, 2, 3, 4]
    merged = {row["id"]: json.loads(row["merged"]) for row in result.merged.collect()}
    assert len(merged) == graph.num_vertices
    for value in merged.values():
        assert value == [[i, i, 1000.0 * i] for i in (1, 2, 3, 4)]
    assert result.merged_aggregated == {"seen": 4 * graph.manifest["subgraphs"]["count"]}


class ForwardInIndependent(Logging):
    def compute(self, subgraph, messages, ctx):
        ctx.send_forward_to_subgraph(subgraph.id, 1)


def test_errors(graph):
    with pytest.raises(InputError, match="pattern"):
        graph.run_timeseries(SeeInstance(), pattern="parallel")
    with pytest.raises(GopherProgramError, match="sequentially dependent"):
        run_independent(graph, ForwardInIndependent(), instances=[0])
    with pytest.raises(GopherProgramError, match="needs merge"):
        run_eventually_dependent(graph, SeeInstance(), instances=[0])
    with pytest.raises(InputError, match="no instance"):
        run_independent(graph, SeeInstance(), time=(500, 600))


class ReadTravelTimes(TimeSeriesProgram):
    instance_edge_attributes = ("travel_time",)

    def compute(self, subgraph, messages, ctx):
        assert np.isfinite(subgraph.adjacency("travel_time").data).all()
        ctx.vote_to_halt()


@pytest.mark.parametrize("runner", [run_independent, run_sequential])
def test_range_of_5_of_50_instances_reads_only_their_files(spark, tmp_path, runner):
    g = road_with_travel_times(str(tmp_path / "road.gofs"), 120, hours=50, num_partitions=2, spark=spark)
    program = ReadTravelTimes()
    program.stop_when_quiet = False
    result = runner(g, program, time=(600, 900))
    assert result.instances == [10, 11, 12, 13, 14]
    instance_reads = [(path, columns) for path, columns in result.files_read if "/instances/" in path]
    expected = {f"i-{i:06d}/edges/part-{p:05d}.parquet" for i in range(10, 15) for p in range(2)}
    assert {path.split("/instances/")[1] for path, _ in instance_reads} == expected
    assert {columns for _, columns in instance_reads} == {("travel_time",)}
    assert all("/template/" in path for path, _ in result.files_read if "/instances/" not in path)
