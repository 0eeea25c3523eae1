"""State that one run, one session or one query keeps is scoped to it: no process-wide
setting or registry that the latest caller overwrites for everybody (issue 27, item 5)."""
import networkx as nx
import numpy as np
from pyspark.sql import SparkSession

import goffish
import graphs
from algorithms.betweenness import MESSAGE, MultiSourceBetweenness, local_graph
from gofs.bundle import load_partition
from gofs.store import as_store
from gopher import cache
from gopher.aggregators import resolve
from gopher.context import ComputeContext
from gopher.messages import Outbox
from gopher.program import SubgraphProgram
from gopher.subgraph import Subgraph
from gopher.worker import LaneStep, RunSpec, TaskWorker, partition_view
from hatrick.cgql import active_queries


def _array(nbytes: int):
    return lambda: np.zeros(nbytes // 8)


def test_each_run_keeps_its_task_cache_budget(monkeypatch):
    monkeypatch.setattr(cache, "_PROCESS_CACHE", cache.TaskCache())
    roomy = cache.process_cache(10**6)
    roomy.get("topology", _array(800))
    tight = cache.process_cache(1000)          # a later run with a small budget ...
    tight.get("a", _array(800))
    assert "topology" in roomy                 # ... does not shrink what the roomy run keeps
    cache.process_cache(10**6)                 # and a later roomy run does not lift the tight one's
    tight.get("b", _array(800))
    assert "a" not in tight and "b" in tight and "topology" in roomy
    assert cache._PROCESS_CACHE.used == 1600


def test_one_budget_is_plain_lru():
    shared = cache.TaskCache(budget=2000)
    for key in "abc":
        shared.get(key, _array(800))
    assert [k for k in "abc" if k in shared] == ["b", "c"]
    shared.get("b", _array(800))               # b is now the most recent: c goes before it
    shared.get("d", _array(800))
    assert [k for k in "abcd" if k in shared] == ["b", "d"] and shared.used == 1600


def test_betweenness_working_arrays_are_task_cache_entries(spark, tmp_path):
    """A batch's n x B arrays count against the run's task-cache budget (they may be evicted,
    then are rebuilt from the state alone), instead of sitting in a module-level dict."""
    store = graphs.ingest_nx(nx.cycle_graph(12), tmp_path / "cycle.gofs", spark, 1)
    shared = cache.TaskCache()
    run = shared.scoped(1000)                   # room for the run's topology, not for its arrays too
    run.get("topology", _array(800))
    sg = Subgraph(load_partition(store, 0), 0, working=cache.WorkingSpace(lambda: run, ("partition", 0)))
    program = MultiSourceBetweenness(12, 12, 12, compress=False)
    graph = local_graph(sg, None, False)
    g = {"batch": 0, "phase": "dist", "first": True}
    ctx = ComputeContext(1, Outbox(), {}, g, MESSAGE)
    ctx._aggregators = {name: resolve(spec) for name, spec in program.aggregators.items()}
    ctx._begin(sg)
    program._start_distances(sg, graph, ctx, g)
    program._release(sg, ctx, g)
    work = sg.working.get(program.token)
    kept = work["dist"]
    assert shared.used == cache.nbytes(work) > kept.nbytes == 12 * 12 * kept.itemsize
    assert "topology" not in shared             # the arrays pushed it out of the run's budget
    sg.working.discard(program.token)           # evicted: the next superstep rebuilds the same arrays
    ctx = ComputeContext(2, Outbox(), {}, g, MESSAGE)
    ctx._begin(sg)
    np.testing.assert_array_equal(program._work(sg, graph, ctx, g)["dist"], kept)


class _Application:
    """What the registry asks of the active SparkSession: its application's id."""

    def __init__(self, application_id: str):
        self.sparkContext = type("Context", (), {"applicationId": application_id})()


class _Stream:
    directed = True

    def __init__(self):
        self.callbacks = []

    def now(self):
        return 0.0

    def on_batch(self, callback):
        self.callbacks.append(callback)

    def remove_callback(self, callback):
        self.callbacks.remove(callback)


def test_cgql_topics_belong_to_their_spark_application(monkeypatch):
    active = {"session": _Application("app-1")}
    monkeypatch.setattr(SparkSession, "getActiveSession", classmethod(lambda cls: active["session"]))
    text = "DETECT Cluster(usage < 30) FOR 1h AS watched"
    first = goffish.query(_Stream(), text)
    active["session"] = _Application("app-2")              # another application in this process ...
    assert "watched" not in active_queries()
    second = goffish.query(_Stream(), text)                 # ... may use the same topic name
    goffish.query(None, "CANCEL watched")                   # and cancels only its own query
    assert second.closed and not first.closed
    active["session"] = _Application("app-1")
    assert active_queries() == {"watched": first.query}
    goffish.query(None, "CANCEL watched")
    assert first.closed and active_queries() == {}


def test_touch_marks_every_key_used_or_none():
    shared = cache.TaskCache(budget=2000)
    for key in "abc":
        shared.get(key, _array(600))
    assert not shared.touch(["a", "x"])         # one is missing: nothing is marked used
    shared.get("d", _array(600))
    assert [k for k in "abcd" if k in shared] == ["b", "c", "d"]
    assert shared.touch(["b"])                  # b is now the most recent: c goes before it
    shared.get("e", _array(600))
    assert [k for k in "abcde" if k in shared] == ["b", "d", "e"]


class _Quiet(SubgraphProgram):
    def compute(self, subgraph, messages, ctx):
        ctx.vote_to_halt()


def test_a_worker_reuses_its_partition_view_only_while_the_cache_holds_it(spark, tmp_path, monkeypatch):
    """A superstep does not look its views up again, but a view the task cache let go (another
    entry needed its room) is not kept alive by the run: the next superstep builds it again."""
    monkeypatch.setattr(cache, "_PROCESS_CACHE", cache.TaskCache())
    store = as_store(graphs.ingest_input(graphs.road()[0], tmp_path / "road.gofs", spark))
    spec = RunSpec(store, _Quiet(), 1, np.array([p["vertex_offset"] for p in store.partitions] + [store.num_vertices]),
                   np.array([p["subgraph_offset"] for p in store.partitions] + [store.num_subgraphs]), 1 << 30)
    worker = TaskWorker(spec, [0])
    plan = {0: LaneStep(None, 0, 1, 0, {}, {}, False)}
    worker.step(plan)
    first = worker.partitions[0].views[0][1]
    worker.step(plan)
    assert worker.partitions[0].views[0][1] is first
    cache._PROCESS_CACHE.discard(first.key)
    worker.step(plan)
    again = worker.partitions[0].views[0][1]
    assert again is not first and again is partition_view(spec, 0, None)
