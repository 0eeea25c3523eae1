"""What a run's first start costs, and what it no longer has to pay (issue 25).

A task imports only what its program needs; partition bundles are kept on the
executor's disk across processes, keyed by graph version, written atomically and
used only from a private directory; results are Parquet files the DataFrame reads
(no shuffle, no cache), removed when the result is unpersisted or the run fails;
every run says where its set-up and output time went.
"""
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest
from pyspark import cloudpickle

import goffish
from goffish.generators import road_network
from gopher.cache import DiskCache
from gopher.metrics import OUTPUT_PHASES, SETUP_PHASES


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


# ------------------------------------------------------------------ what a task imports

def test_a_task_imports_only_what_its_program_needs(road, tmp_path):
    """A run's task function, unpickled in a fresh interpreter, pulls in neither the
    goffish front end nor igraph, numba, matplotlib or pandas."""
    from algorithms.components import ConnectedComponents
    from gopher.channel import RunKey
    from gofs.store import as_store
    from gopher.resident import task_function
    from gopher.worker import RunSpec

    spec = RunSpec(as_store(road), ConnectedComponents(), 2, np.zeros(4), np.zeros(4), 1 << 20)
    blob = tmp_path / "task.pickle"
    blob.write_bytes(cloudpickle.dumps(task_function(spec, ("127.0.0.1", 1), RunKey.fresh(False), 1, None, None,
                                                     str(tmp_path), 1 << 20, True, 1.0)))
    script = ("import pickle, sys; pickle.loads(open(sys.argv[1], 'rb').read()); "
              "print(sorted({m.split('.')[0] for m in sys.modules} & "
              "{'goffish', 'igraph', 'numba', 'matplotlib', 'pandas', 'networkx', 'pymetis'}))")
    done = subprocess.run([sys.executable, "-c", script, str(blob)], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


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


def test_a_run_names_its_set_up_and_output_phases(road):
    metrics = road.pagerank(max_iter=3, tol=0, progress=False).metrics
    assert set(metrics.phases) == set(SETUP_PHASES + OUTPUT_PHASES) - {"merge"}
    assert all(seconds >= 0 for seconds in metrics.phases.values())
    setup = sum(metrics.phases[name] for name in SETUP_PHASES)
    output = sum(metrics.phases[name] for name in OUTPUT_PHASES if name in metrics.phases)
    assert setup == pytest.approx(metrics.setup_seconds, rel=0.05, abs=0.02)
    assert output == pytest.approx(metrics.output_seconds, rel=0.05, abs=0.02)
    assert metrics.as_dict()["phases"] == {k: round(v, 4) for k, v in metrics.phases.items()}
