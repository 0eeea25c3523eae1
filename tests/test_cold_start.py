"""What a run's first start costs, and what it no longer has to pay (issue 25).

A task imports only what its program needs; partition bundles are kept on the
executor's disk across processes, keyed by graph version, written atomically and
used only from a private directory; results are Parquet files the DataFrame reads
(no shuffle, no cache), removed when the result is unpersisted or the run fails;
every run says where its set-up and output time went.
"""
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from pyspark import cloudpickle

import goffish
from goffish.generators import road_network
from gopher.cache import DiskCache
from gopher.metrics import OUTPUT_PHASES, SETUP_PHASES
from gopher.program import SubgraphProgram


@pytest.fixture(scope="module")
def road(spark, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("cold") / "road.gofs")
    return goffish.ingest(road_network(300, seed=4), path, num_partitions=3, weight="length", spark=spark)


# ------------------------------------------------------------------ the disk cache

class Builds:
    def __init__(self):
        self.calls = 0

    def __call__(self, value):
        def build():
            self.calls += 1
            return value
        return build


def test_disk_cache_keeps_values_across_instances_and_keys_them_by_version(tmp_path):
    directory = str(tmp_path / "bundles")
    builds = Builds()
    first = DiskCache(directory).get(("uuid-1", "v-1", 0), builds({"a": np.arange(5)}))
    again = DiskCache(directory).get(("uuid-1", "v-1", 0), builds({"a": np.arange(9)}))   # a new process
    other = DiskCache(directory).get(("uuid-2", "v-1", 0), builds({"a": np.arange(3)}))   # a re-ingested graph
    assert builds.calls == 2
    np.testing.assert_array_equal(again["a"], first["a"])
    np.testing.assert_array_equal(other["a"], np.arange(3))
    assert oct(os.stat(directory).st_mode & 0o777) == oct(0o700)
    assert not [name for name in os.listdir(directory) if name.endswith(".tmp")]


def test_disk_cache_rebuilds_a_torn_file_and_ignores_a_shared_directory(tmp_path):
    directory = tmp_path / "bundles"
    builds = Builds()
    DiskCache(str(directory)).get("k", builds([1, 2]))
    (stored,) = directory.iterdir()
    stored.write_bytes(stored.read_bytes()[:5])          # torn
    assert DiskCache(str(directory)).get("k", builds([1, 2])) == [1, 2] and builds.calls == 2
    assert pickle.loads(stored.read_bytes()) == [1, 2]   # rewritten whole
    directory.chmod(0o777)                               # others could plant a pickle: never read it
    stored.write_bytes(pickle.dumps([6, 6, 6]))
    assert DiskCache(str(directory)).get("k", builds([1, 2])) == [1, 2] and builds.calls == 3


def test_disk_cache_keeps_to_its_budget_dropping_the_least_recently_used(tmp_path):
    cache = DiskCache(str(tmp_path / "bundles"), budget=2500)
    for key in ("a", "b", "c"):
        cache.get(key, lambda: np.zeros(100))           # ~950 bytes each: "c" pushes out "a"
    builds = Builds()
    cache.get("a", builds(np.ones(100)))
    assert builds.calls == 1                             # "a" was the oldest: it went
    cache.get("c", builds(np.ones(100)))
    assert builds.calls == 1


def test_a_partitions_arc_sort_is_kept_on_disk_for_the_next_process(road, tmp_path, monkeypatch):
    """A fresh worker's first SSSP sorted every partition's arcs for its matrices (~0.17 CPU-s for
    the 1M road grid's 8 partitions): the sort depends on the template topology only, so it is kept
    beside the bundle on the executor's disk and a later process loads it (~0.02 CPU-s) into the
    same matrix; without a disk cache every process sorts."""
    import gopher.subgraph
    from algorithms.sssp import SingleSourceShortestPaths
    from gofs.bundle import load_partition
    from gofs.store import as_store
    from gopher.subgraph import Subgraph
    from gopher.worker import RunSpec, _template_keeper

    sorts = []
    sort = gopher.subgraph._csr_layout
    monkeypatch.setattr(gopher.subgraph, "_csr_layout", lambda *args: sorts.append(args[3]) or sort(*args))
    store = as_store(road)

    def matrix(disk):                    # as a fresh process builds it: a new bundle, nothing kept in memory
        spec = RunSpec(store, SingleSourceShortestPaths(0, "length"), 1, np.zeros(4), np.zeros(4), 1 << 20, disk)
        return Subgraph(load_partition(store, 1, edge_attributes=["length"]), 0,
                        kept=_template_keeper(spec, 1)).adjacency("length")

    made = matrix(DiskCache(str(tmp_path / "bundles")))
    loaded = matrix(DiskCache(str(tmp_path / "bundles")))
    assert sorts == [True]
    assert made.nnz > 0 and loaded.indices.dtype == made.indices.dtype and (loaded != made).nnz == 0
    matrix(None), matrix(None)
    assert sorts == [True] * 3


# ------------------------------------------------------------------ what a task imports

@pytest.mark.parametrize("program", ["components", "pagerank"])
def test_a_task_imports_only_what_its_program_needs(road, tmp_path, program):
    """A run's task function, unpickled in a fresh interpreter, pulls in neither the
    goffish front end nor igraph, numba, matplotlib or pandas; connected components and PageRank
    need no scipy (their bundles come from the disk cache, and they ask for no matrix: importing
    scipy.sparse costs a fresh worker ~0.3 CPU-s) and no pyarrow.compute (~60 ms of a fresh
    worker's start: only instances and id look-ups use it)."""
    from algorithms.components import ConnectedComponents
    from algorithms.pagerank import PageRank
    from gopher.channel import RunKey
    from gofs.store import as_store
    from gopher.resident import task_function
    from gopher.worker import RunSpec

    made = {"components": ConnectedComponents, "pagerank": lambda: PageRank(10)}[program]()
    spec = RunSpec(as_store(road), made, 2, np.zeros(4), np.zeros(4), 1 << 20)
    blob = tmp_path / "task.pickle"
    blob.write_bytes(cloudpickle.dumps(task_function(spec, ("127.0.0.1", 1), RunKey.fresh(False), 1, None, None,
                                                     str(tmp_path), 1 << 20, True, 1.0)))
    script = ("import pickle, sys; pickle.loads(open(sys.argv[1], 'rb').read()); "
              "print(sorted({m.split('.')[0] for m in sys.modules} & "
              "{'goffish', 'igraph', 'numba', 'matplotlib', 'pandas', 'networkx', 'pymetis', 'scipy'} "
              "| {'pyarrow.compute'} & set(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", script, str(blob)], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_set_up_compiles_the_modules_a_task_imports(tmp_path):
    """``./run.sh`` compiles this checkout's modules at set-up: with PYTHONDONTWRITEBYTECODE (no
    process writes bytecode; an editable install has none) a fresh interpreter, as each new Spark
    Python worker is, then loads the modules of a run's task compiled instead of compiling them."""
    root = Path(__file__).resolve().parents[1]
    (line,) = [line for line in (root / "run.sh").read_text().splitlines()
               if line.strip().startswith('"$VENV/bin/python" -m compileall')]
    packages = [word for word in line.split("-m compileall", 1)[1].split() if word.isidentifier()]
    assert {"gopher", "gofs", "algorithms", "sparkshim"} <= set(packages)     # what a run's task imports
    for package in packages:
        shutil.copytree(root / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(tmp_path)}
    spy = ("import importlib._bootstrap_external as b, json, sys\n"
           "compiled, source_to_code = [], b.SourceLoader.source_to_code\n"
           "def spy(self, data, path, *a, **k):\n"
           "    compiled.append(path)\n"
           "    return source_to_code(self, data, path, *a, **k)\n"
           "b.SourceLoader.source_to_code = spy\n"
           "import gopher.resident, algorithms.components, algorithms.sssp, algorithms.pagerank\n"
           f"print(json.dumps([p for p in compiled if p.startswith({str(tmp_path)!r})]))")

    def compiled_on_import():
        done = subprocess.run([sys.executable, "-c", spy], cwd=tmp_path, env=env, capture_output=True, text=True,
                              check=True)
        return json.loads(done.stdout.splitlines()[-1])

    assert any(path.endswith("gopher/resident.py") for path in compiled_on_import())    # no bytecode yet
    subprocess.run([sys.executable, "-m", "compileall", "-q", *packages], cwd=tmp_path, env=env, check=True,
                   capture_output=True)
    assert compiled_on_import() == []


def test_importing_goffish_loads_neither_igraph_nor_the_partitioners():
    """A job that reads a stored graph pays goffish's import in every process: igraph (with
    matplotlib) and the partitioners (pymetis, scipy.optimize) cost ~1.3 CPU-s of it and are
    imported by the baselines and by ``ingest`` where they run, not with the package."""
    script = """
import sys, goffish, goffish.graph
print(sorted({'igraph', 'matplotlib', 'pymetis', 'scipy.optimize', 'gofs.partition'} & set(sys.modules)))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["[]"]


def test_a_tasks_result_rows_go_to_arrow_without_pandas():
    """pyarrow's pa.array imports pandas to ask whether its argument is a pandas object: a fresh
    worker's rows go through files.arrow_array, the same arrays without that import."""
    script = """
import sys, numpy as np, pyarrow as pa
from gofs.files import arrow_array
cases = [(np.arange(5), None), (np.arange(5, dtype=np.int32), pa.int64()), (np.arange(10.0)[::3], None),
         (np.array([1.5, np.nan, np.inf]), pa.float64()), (np.array([True, False] * 7), None),
         (np.array([], np.int64), pa.int64()), (np.full(3, 7, np.int8), None)]
made = [arrow_array(values, kind) for values, kind in cases]
print('pandas' in sys.modules)
for (values, kind), array in zip(cases, made):
    expected = pa.array(values, type=kind)
    same = [str(a) == str(b) for a, b in zip(array.to_pylist(), expected.to_pylist())]   # nan == nan
    assert array.type == expected.type and len(array) == len(expected) and all(same), (array, expected)
try:
    arrow_array(np.array([300]), pa.int8())
except pa.ArrowInvalid:
    print('refused')
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "refused"]


def test_a_bundle_built_from_parquet_imports_no_pandas(road):
    """A worker that builds its bundle (no disk cache yet: a graph's first run) reads Parquet and
    turns columns into numpy without pyarrow.dataset or pyarrow's pandas conversion, both of
    which import pandas; files.numpy_values gives what to_numpy gives."""
    script = """
import sys, numpy as np, pyarrow as pa
from gofs.bundle import load_partition
from gofs.files import numpy_values
from gofs.store import GraphStore
bundle = load_partition(GraphStore(sys.argv[1]), 0, edge_attributes=["length"])
print('pandas' in sys.modules, len(bundle.ids) > 0)
cases = [pa.array(np.arange(7)), pa.array(np.arange(9, dtype=np.uint16)).slice(3, 4),
         pa.chunked_array([pa.array(np.arange(3.0, dtype=np.float32)), pa.array(np.arange(2.0, dtype=np.float32))]),
         pa.array([True, False, True] * 5).slice(2, 9), pa.chunked_array([], pa.int64()),
         pa.array([1, None, 3]), pa.array(["a", "b"]), pa.chunked_array([pa.array([True]), pa.array([False, True])])]
for column in cases:
    got, expected = numpy_values(column), column.to_numpy(zero_copy_only=False)
    assert got.dtype == expected.dtype and np.array_equal(got, expected, equal_nan=got.dtype.kind == "f"), (got, expected)
"""
    done = subprocess.run([sys.executable, "-c", script, road.path], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "True"]


# ------------------------------------------------------------------ results and phases

def _result_dirs(spark) -> set:
    from gopher.resident import _as_pyarrow_path

    root = _as_pyarrow_path(spark.sparkContext.getCheckpointDir())
    return {name for name in os.listdir(root) if name.startswith("gopher-result-")}


def test_results_are_files_that_unpersist_removes_and_a_failed_run_leaves_none(spark, road):
    from test_engine import Explodes

    before = _result_dirs(spark)
    result = road.connected_components(progress=False)
    made = _result_dirs(spark) - before
    assert len(made) == 1
    assert result.dataframe.count() == road.num_vertices
    assert len(result.dataframe.take(3)) == 3          # a job over some partitions: no barrier in the way
    result.unpersist()
    assert _result_dirs(spark) == before
    with pytest.raises(Exception, match="Explodes.compute failed"):
        road.run(Explodes(0, 1), progress=False)
    assert _result_dirs(spark) == before


def test_a_result_read_into_the_driver_comes_straight_from_its_files(spark, road):
    from sparkshim.compat import collect_arrow

    jobs = spark.sparkContext.statusTracker()
    result = road.pagerank(max_iter=3, tol=0, progress=False)
    before = set(jobs.getJobIdsForGroup(None))
    direct = result.to_arrow(["pagerank", "id"])
    assert set(jobs.getJobIdsForGroup(None)) == before              # no Spark job
    collected = collect_arrow(result.dataframe.select("pagerank", "id"))
    assert set(jobs.getJobIdsForGroup(None)) != before              # (a collect is one)
    assert direct.schema == collected.schema
    assert direct.sort_by("id").equals(collected.sort_by("id"))
    result.dataframe = result.dataframe.limit(5)                     # a frame made from the result: collected
    assert result.to_arrow().num_rows == 5
    result.unpersist()


def test_a_result_read_into_the_driver_makes_no_dataframe(spark, road):
    """Spark's first read of the result files costs ~0.7 s in a fresh JVM: a result read with
    to_arrow (or not read) never makes its DataFrame; one asked for is made once."""
    from gopher.resident import LazyFrame

    result = road.connected_components(progress=False)
    lazy = result.__dict__["_dataframe"]
    assert isinstance(lazy, LazyFrame) and lazy._frame is None
    assert result.to_arrow(["id", "component"]).num_rows == road.num_vertices
    assert lazy._frame is None
    assert result.dataframe is result.dataframe and result.dataframe.count() == road.num_vertices
    result.unpersist()


def test_a_result_read_into_the_driver_needs_no_pyarrow_dataset(road, road_hops, monkeypatch):
    """``pyarrow.dataset``'s import costs a caller's first read ~25 CPU-ms (and imports pandas where
    nothing has): the result files are read one by one, every row once (NetworkX's distances), and
    a result read after it was unpersisted says so."""
    hops, n = road_hops
    result = road.sssp(0, progress=False)
    monkeypatch.setitem(sys.modules, "pyarrow.dataset", None)        # an import of it raises
    rows = result.to_arrow(["id", "distance"])
    assert rows.num_rows == n
    distances = dict(zip(rows.column("id").to_pylist(), rows.column("distance").to_pylist()))
    assert {v: d for v, d in distances.items() if d != float("inf")} == hops
    result.unpersist()
    with pytest.raises(FileNotFoundError, match="no result files"):
        result.to_arrow(["id"])


def test_a_run_names_its_set_up_and_output_phases(road):
    metrics = road.pagerank(max_iter=3, tol=0, progress=False).metrics
    assert set(metrics.phases) == set(SETUP_PHASES + OUTPUT_PHASES) - {"merge"}
    assert all(seconds >= 0 for seconds in metrics.phases.values())
    setup = sum(metrics.phases[name] for name in SETUP_PHASES)
    output = sum(metrics.phases[name] for name in OUTPUT_PHASES if name in metrics.phases)
    assert setup == pytest.approx(metrics.setup_seconds, rel=0.05, abs=0.02)
    assert output == pytest.approx(metrics.output_seconds, rel=0.05, abs=0.02)
    assert metrics.as_dict()["phases"] == {k: round(v, 4) for k, v in metrics.phases.items()}


# ------------------------------------------------------------------ what a warm run no longer pays

def test_a_run_reads_its_settings_without_copying_the_spark_conf(road, monkeypatch):
    """SparkContext.getConf copies the whole conf over Py4J: a run reads its keys one by one."""
    from pyspark import SparkContext

    def refuse(self):
        raise AssertionError("a run called SparkContext.getConf")

    monkeypatch.setattr(SparkContext, "getConf", refuse)
    assert road.connected_components(progress=False).dataframe.count() == road.num_vertices


def test_a_first_run_reads_its_settings_before_the_sessions_sql_state_exists(spark, road):
    """Building a session's SQL state costs a fresh JVM ~0.5 s: a run on a session without it reads
    what ``spark.conf`` would say without waiting for it; once the state exists, its runtime
    changes are what a run reads."""
    from gopher.engine import GOFFISH_KEYS, SPARK_KEYS, read_settings
    from sparkshim.compat import settings_before_sql_state

    keys = SPARK_KEYS + tuple(f"spark.goffish.{key}" for key in GOFFISH_KEYS)
    fresh = spark.newSession()
    settings, pending = read_settings(fresh)
    assert pending and settings["spark.master"] == "local[2]"
    assert settings == {key: value for key in keys if (value := fresh.conf.get(key, None)) not in (None, "")}
    assert read_settings(fresh)[1] is False                          # built by fresh.conf: the runtime conf rules
    fresh.conf.set("spark.goffish.tasks", "1")
    assert read_settings(fresh)[0]["spark.goffish.tasks"] == "1"
    assert settings_before_sql_state(spark.newSession(), keys)["spark.goffish.tasks"] is None
    result = road.connected_components(spark=spark.newSession(), progress=False)
    assert result.to_arrow(["id"]).num_rows == road.num_vertices


@pytest.mark.parametrize("local, tasks, prepares", [(True, 10**6, False), (True, 1, os.cpu_count() > 1), (False, 10**6, True)])
def test_result_reads_are_prepared_meanwhile_only_with_a_core_to_spare(spark, tmp_path, monkeypatch, local, tasks,
                                                                       prepares):
    """Where a session has no SQL state yet, the state and Spark's Parquet source are built on a
    thread while the stage starts (no Spark job, nothing left behind), but only where the run's
    tasks leave the driver a core: where they fill every core it would compete with them."""
    from types import SimpleNamespace

    from gopher.engine import _prepare_reads_meanwhile

    fresh = spark.newSession()
    jobs = set(spark.sparkContext.statusTracker().getJobIdsForGroup(None))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    _prepare_reads_meanwhile(fresh, SimpleNamespace(sql_state_pending=True, local=local, tasks=tasks))
    preparing = [t for t in threading.enumerate() if t.name == "goffish-prepare-reads"]
    for thread in preparing:
        thread.join()
    assert len(preparing) == int(prepares)
    assert set(spark.sparkContext.statusTracker().getJobIdsForGroup(None)) == jobs      # no Spark job
    assert os.listdir(tmp_path) == []
    _prepare_reads_meanwhile(fresh, SimpleNamespace(sql_state_pending=False, local=False, tasks=1))
    assert not [t for t in threading.enumerate() if t.name == "goffish-prepare-reads"]


def test_a_single_run_hands_over_its_files_as_they_are(spark, road):
    """The result files hold exactly the result's columns: the DataFrame is a plain scan,
    with no filter or renaming for Spark to plan before the caller's first job."""
    result = road.connected_components(progress=False)
    files = spark.read.parquet(*result.dataframe.inputFiles())
    assert files.columns == result.dataframe.columns == ["id", "component"]
    result.unpersist()


def test_a_finished_runs_stage_ends_on_its_own(spark, road):
    """The caller gets the result while Spark ends the stage; it ends without being cancelled."""
    road.run(Halts(), progress=False)
    deadline = time.monotonic() + 10
    while spark.sparkContext.statusTracker().getActiveJobsIds() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert spark.sparkContext.statusTracker().getActiveJobsIds() == []
    assert road.connected_components(progress=False).dataframe.count() == road.num_vertices


cloudpickle.register_pickle_by_value(sys.modules[__name__])      # Halts travels to the workers by value


class Halts(SubgraphProgram):
    def compute(self, subgraph, messages, ctx):
        ctx.vote_to_halt()


def test_partitions_go_to_tasks_so_that_tasks_finish_together():
    from gopher.worker import balance_partitions

    subgraphs = [1, 1, 36, 121, 27, 1, 59, 45]       # the 100k road grid's 8 METIS partitions
    owners = balance_partitions([12_500] * 8, subgraphs, 2)
    cost = [sum(12_500 + 100 * s for s, o in zip(subgraphs, owners) if o == task) for task in (0, 1)]
    by_number = [sum(12_500 + 100 * s for p, s in enumerate(subgraphs) if p % 2 == task) for task in (0, 1)]
    assert max(cost) < max(by_number)
    assert sorted(set(owners)) == [0, 1] and owners.count(0) == owners.count(1) == 4
    assert balance_partitions([0] * 4, [0] * 4, 4) == (0, 1, 2, 3)     # every task gets one
    assert balance_partitions([5, 1], [0, 0], 3) == (0, 1)


def test_a_versioned_graphs_weight_profile_is_computed_once_by_a_plain_spark_job(spark, road, monkeypatch):
    """Weighted runs check their weights on Spark before they start; a graph version never
    changes, so only the first run in a process pays that job, and it is an RDD job, not a
    query (no SQL state, no planning, the Python workers the run's stage reuses)."""
    import gofs.store
    from pyspark.sql import DataFrame

    def refuse(*args, **kwargs):
        raise AssertionError("the profile ran a Spark job again")

    def no_query(*args, **kwargs):
        raise AssertionError("the profile made a DataFrame")

    monkeypatch.setattr(gofs.store, "_PROFILES", {})
    monkeypatch.setattr(DataFrame, "__init__", no_query)
    first = road.store.edge_attribute_profile("length")
    monkeypatch.setattr(type(spark.sparkContext), "parallelize", refuse)
    assert road.store.edge_attribute_profile("length") == first
    assert [row["partition"] for row in first] == list(range(road.num_partitions))
    assert sum(row["rows"] for row in first) == road.num_edges and isinstance(first[0]["rows"], int)


class ReadsLocalProperty(SubgraphProgram):
    """Outputs, for every vertex, a Spark local property as its task saw it."""

    output_schema = {"seen": pa.string()}

    def compute(self, subgraph, messages, ctx):
        ctx.vote_to_halt()

    def output(self, subgraph):
        from pyspark import TaskContext

        return {"seen": pa.array([TaskContext.get().getLocalProperty("goffish.test.seen")] * subgraph.num_vertices,
                                 pa.string())}


def test_a_runs_stage_has_the_callers_local_properties_on_a_thread_kept_for_the_next(spark, road):
    """A run's stage runs on a thread of its own, with the caller's local properties (a scheduler
    pool, say) as ``InheritableThread`` gives them; the thread is kept, so a later run opens no
    new Py4J connection."""
    from gopher import resident

    def stage_threads():
        return {t for t in threading.enumerate() if t.name == "gopher-stage"}

    def settled():                                   # every stage has ended and its thread is idle
        for job in list(resident._ENDING):
            job.finished.wait()
        deadline = time.monotonic() + 10
        while len(resident._IDLE_STAGE_THREADS) < len(stage_threads()) and time.monotonic() < deadline:
            time.sleep(0.01)

    sc = spark.sparkContext
    sc.setLocalProperty("goffish.test.seen", "the caller's")
    try:
        result = road.run(ReadsLocalProperty(), progress=False)
    finally:
        sc.setLocalProperty("goffish.test.seen", None)
    assert set(result.to_arrow(["seen"]).column("seen").to_pylist()) == {"the caller's"}
    result.unpersist()
    settled()
    before = stage_threads()
    for _ in range(2):
        seen = road.run(ReadsLocalProperty(), progress=False)
        assert set(seen.to_arrow(["seen"]).column("seen").to_pylist()) == {None}
        seen.unpersist()
        settled()
    assert before and stage_threads() == before


def test_jvm_usage_counts_what_a_query_makes_the_driver_jvm_do(spark):
    """``bench --cold`` reads the caller's first job off the driver JVM: a query with code no
    earlier query generated compiles a class and costs the JVM CPU time."""
    from sparkshim.compat import jvm_usage

    before = jvm_usage(spark)
    unique = time.monotonic_ns()                      # a constant in the generated code: no cached class
    assert spark.range(4).selectExpr(f"id * {unique} AS x").agg({"x": "sum"}).first()[0] == 6 * unique
    after = jvm_usage(spark)
    assert after["codegen"] > before["codegen"]
    if sys.platform.startswith("linux"):
        assert after["cpu"] > before["cpu"] and after["jit_cpu"] < after["cpu"]


# ------------------------------------------------------------------ bench --cold's callers

@pytest.fixture(scope="module")
def road_hops():
    """NetworkX's hop distances from vertex 0 on the ``road`` graph: the SSSP oracle."""
    import networkx as nx

    from graphs import input_to_networkx

    graph = input_to_networkx(road_network(300, seed=4))
    return nx.single_source_shortest_path_length(graph, 0), graph.number_of_nodes()


@pytest.mark.parametrize("caller", ["collect", "write"])
def test_bench_cold_times_a_caller_that_collects_or_writes_the_rows(spark, road, road_hops, caller):
    """``bench --cold``'s collecting and writing callers take the checksum of every row in the
    driver (count plus the sum of the finite values), the one NetworkX's distances give and Spark's
    query over the DataFrame takes; their time is the run's and the rows' hand-over, each timed."""
    from benchmarks.bench_cold import handed_over_run
    from benchmarks.bench_gopher import _checksum
    from sparkshim.compat import driver_jvm_pid

    hops, n = road_hops
    figures = handed_over_run(caller, road, "sssp", 0, 10, driver_jvm_pid(spark))
    assert figures["checksum"] == n + sum(hops.values())
    assert figures["seconds"] == pytest.approx(figures["run_seconds"] + figures["handover_seconds"])
    assert figures["run_seconds"] > figures["phases"]["workers"] and figures["supersteps"] > 1
    assert set(figures["cpu"]) == {"python", "jvm", "workers"}
    result = road.sssp(0, progress=False)
    assert _checksum(result.dataframe, "distance") == figures["checksum"]
    result.unpersist()


def test_bench_cold_prints_every_callers_figure_beside_igraphs_and_flags_checksums_that_differ():
    from benchmarks.bench_cold import CALLERS, FIGURES, format_row

    cpu = {"python": 0.1, "jvm": 1.0, "workers": 0.5}
    jvm = {"cpu": 2.0, "jit_cpu": 1.0, "classes": 7000, "codegen": 4, "codegen_ms": 700.0}
    common = {"run_seconds": 1.0, "cpu": cpu, "phases": {"workers": 0.8}, "superstep_seconds": 0.1}
    row = {"algorithm": "sssp", "igraph_seconds": 2.0, "session_seconds": 3.0, "fixed_seconds": 0.1,
           "fixed_demo_seconds": 0.1, "fixed_demo_wall_seconds": 0.12, "checksums_agree": True,
           "first": {**common, "seconds": 4.0, "first_job_seconds": 3.0, "first_job_jvm": jvm,
                     "frame_seconds": 0.5, "frame_jvm": jvm},
           "warm": {**common, "seconds": 1.0},
           **{caller: {**common, "seconds": 3.0, "handover_seconds": 0.25} for caller in CALLERS[1:]}}
    for label in FIGURES:
        row[label]["x_igraph"] = row[label]["seconds"] / row["igraph_seconds"]
    line = format_row(row)
    assert "first   4.000s ( 2.00x)  warm   1.000s ( 0.50x)  collect   3.000s ( 1.50x)  write   3.000s ( 1.50x)" in line
    assert "collect: run 1.00 + rows 0.25" in line and "write: run 1.00 + rows 0.25" in line
    assert "DIFFER" not in line
    assert "CHECKSUMS DIFFER" in format_row({**row, "checksums_agree": False})


def test_bench_cold_numpy_checksum_counts_every_row_and_sums_the_finite_values(spark):
    """The collecting and writing callers' checksum is the DataFrame caller's query's, over chunks, NaN,
    infinities and nulls alike."""
    from benchmarks.bench_cold import numpy_checksum
    from benchmarks.bench_gopher import _checksum

    chunks = [[1.5, float("inf"), 2.0], [float("nan"), -4.0, None]]
    frame = spark.createDataFrame([(v,) for chunk in chunks for v in chunk], "x double")
    assert numpy_checksum(pa.chunked_array(chunks)) == _checksum(frame, "x") == 6 + 1.5 + 2.0 - 4.0
    assert numpy_checksum(pa.chunked_array([[3, 4]])) == 2 + 7
