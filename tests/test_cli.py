"""The ``goffish`` command line, in-process and through ``spark-submit``.

In-process tests call ``goffish.cli.main`` (``run`` reuses the test session via
``goffish.session``). The ``spark-submit`` tests start real jobs in
subprocesses: one on ``local[2]`` and one per algorithm on
``local-cluster[2,1,1024]``, whose executors are separate JVMs with their own
Python workers, so nothing in-process can stand in for them. Their Parquet
outputs are compared with NetworkX, and Spark's event log shows where the
tasks ran.
"""
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pandas as pd
import pytest

import goffish
import graphs
from goffish.cli import main
from gofs.ingest.read_local import read_edge_list

ROOT = Path(__file__).resolve().parents[1]
SPARK_SUBMIT = Path(sys.executable).parent / "spark-submit"
ROAD_SIZE = 150


def cli(capsys, *argv):
    """Run the CLI in-process: (exit code, stdout, stderr)."""
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def parquet(path) -> pd.DataFrame:
    return pd.read_parquet(path).set_index("id")


@pytest.fixture(scope="module")
def road(tmp_path_factory):
    """A road graph written as GoFS by ``goffish generate`` (3 METIS partitions), with its NetworkX twin."""
    path = tmp_path_factory.mktemp("cli") / "road.gofs"
    assert main(["generate", "road", "--size", str(ROAD_SIZE), "--out", str(path), "--partitions", "3"]) == 0
    _, G = graphs.road(ROAD_SIZE, seed=0)
    return path, G


def check_cc(out, G):
    frame = parquet(out)
    assert graphs.as_partition(frame["component"].to_dict()) == graphs.weak_components(G)


def check_sssp(out, G, source, weight):
    frame = parquet(out)
    expected = nx.single_source_dijkstra_path_length(G, source, weight=weight)
    assert sorted(frame.index) == sorted(G.nodes)
    for v, d in frame["distance"].items():
        assert math.isclose(d, expected.get(v, math.inf), rel_tol=0, abs_tol=1e-9), v


def check_pagerank(out, G, weight, tol):
    frame = parquet(out)
    expected = nx.pagerank(G, weight=weight, tol=tol)
    assert sorted(frame.index) == sorted(G.nodes)
    assert max(abs(frame.at[v, "pagerank"] - r) for v, r in expected.items()) < 1e-6


# --------------------------------------------------------------------------- in-process

def test_generate_writes_an_edge_list_or_gofs(tmp_path, capsys):
    from goffish.generators import road_network

    text = tmp_path / "road.txt.gz"
    code, out, _ = cli(capsys, "generate", "road", "--size", 100, "--out", text, "--seed", 3)
    expected = road_network(100, seed=3)
    assert code == 0 and f"({expected.edges.num_rows:,} edges)" in out
    back = read_edge_list(text, weight="length")
    assert back.edges.column("src").to_pylist() == expected.edges.column("src").to_pylist()
    assert back.edges.column("length").to_pylist() == expected.edges.column("length").to_pylist()

    stored = tmp_path / "rmat"
    code, _, _ = cli(capsys, "generate", "rmat", "--size", 6, "--out", stored, "--gofs",
                     "--partitions", 3, "--partitioner", "hash")
    assert code == 0
    m = goffish.open(str(stored)).manifest
    assert (m["num_vertices"], m["num_partitions"], m["partitioner"], m["directed"]) == (64, 3, "hash", True)


def test_ingest_then_info(tmp_path, capsys):
    from goffish.generators import road_network, write_edge_list

    text = tmp_path / "road.txt"
    write_edge_list(road_network(80, seed=1), str(text))
    graph = tmp_path / "road.gofs"
    code, out, _ = cli(capsys, "ingest", text, graph, "--weight", "length", "--partitions", 3)
    assert code == 0
    assert "3 partitions" in out and "edge attributes: length" in out and "ingest seconds:" in out

    code, out, _ = cli(capsys, "info", graph)
    assert code == 0 and "undirected" in out and "3 partitions" in out
    code, out, _ = cli(capsys, "info", graph, "--json")
    manifest = json.loads(out)
    assert manifest["num_partitions"] == 3 and [f["name"] for f in manifest["edge_schema"]] == ["length"]

    code, _, err = cli(capsys, "ingest", text, graph, "--weight", "length")
    assert code == 2 and "already exists" in err and "--overwrite" in err
    code, _, err = cli(capsys, "ingest", tmp_path / "missing.txt", tmp_path / "other.gofs")
    assert code == 2 and "missing.txt" in err
    assert not (tmp_path / "other.gofs").exists()


def test_a_cgql_error_is_one_clear_error_not_a_traceback(road, capsys):
    path, _ = road
    code, out, err = cli(capsys, "query", path, "DETECT Cluster(usage <")
    assert code == 2 and out == ""
    assert err.startswith("goffish query: error: line 1, column ") and "Traceback" not in err


def test_a_program_error_is_one_line_and_its_traceback_only_with_verbose(road, capsys, monkeypatch):
    from gopher.engine import GopherProgramError

    def failing(args):
        raise GopherProgramError("program Broken failed in sub-graph 3 (partition 1) at superstep 2: ZeroDivisionError")

    monkeypatch.setattr("goffish.cli.cmd_info", failing)
    path, _ = road
    code, out, err = cli(capsys, "info", path)
    assert (code, out) == (2, "")
    assert err == ("goffish info: error: program Broken failed in sub-graph 3 (partition 1) at superstep 2: "
                   "ZeroDivisionError\n")
    code, _, err = cli(capsys, "info", path, "--verbose")
    assert code == 2 and err.startswith("Traceback") and "GopherProgramError" in err
    assert err.endswith("goffish info: error: program Broken failed in sub-graph 3 (partition 1) at superstep 2: "
                        "ZeroDivisionError\n")


def test_run_cc_sssp_pagerank_in_process(spark, road, tmp_path, capsys):
    path, G = road
    code, out, _ = cli(capsys, "run", "cc", path, "--out", tmp_path / "cc", "--quiet")
    assert code == 0
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["algorithm"] == "cc" and summary["program"] == "ConnectedComponents"
    assert summary["supersteps"] >= 1 and summary["messages"] > 0
    check_cc(tmp_path / "cc", G)

    code, _, _ = cli(capsys, "run", "sssp", path, "--source", 0, "--weight", "length", "--out", tmp_path / "sssp",
                     "--quiet")
    assert code == 0
    check_sssp(tmp_path / "sssp", G, 0, "length")

    code, _, err = cli(capsys, "run", "pagerank", path, "--tol", "1e-4", "--out", tmp_path / "pr")
    assert code == 0
    assert "[gopher] PageRank superstep 0" in err       # progress lines without --quiet
    check_pagerank(tmp_path / "pr", G, None, 1e-4)


def test_run_refuses_to_replace_output_without_overwrite(spark, road, tmp_path, capsys):
    path, G = road
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("precious")
    for flags in ((), ("--overwrite",)):
        code, _, err = cli(capsys, "run", "cc", path, "--out", foreign, "--quiet", *flags)
        assert code == 2 and "not a result directory" in err
    assert (foreign / "keep.txt").read_text() == "precious"
    out = tmp_path / "cc"
    assert cli(capsys, "run", "cc", path, "--out", out, "--quiet")[0] == 0
    code, _, err = cli(capsys, "run", "cc", path, "--out", out, "--quiet")
    assert code == 2 and "already exists" in err and "--overwrite" in err
    code, _, _ = cli(capsys, "run", "cc", path, "--out", out, "--quiet", "--overwrite")
    assert code == 0
    check_cc(out, G)


def test_run_writes_a_single_runs_result_files_without_a_spark_job(spark, road, tmp_path, capsys, monkeypatch):
    """A single run's rows are Parquet files already: --out gets copies committed by one rename,
    a directory Spark reads back (no DataFrame writer, hence no Spark job, in a fresh process's
    first run); a copy that fails leaves neither OUT nor its staging directory."""
    from pyspark.sql import DataFrameWriter
    from pyarrow import fs as pafs

    path, G = road

    def no_writer(*args, **kwargs):
        raise AssertionError("the DataFrame writer was used")

    monkeypatch.setattr(DataFrameWriter, "parquet", no_writer)
    out = tmp_path / "cc"
    assert cli(capsys, "run", "cc", path, "--out", out, "--quiet")[0] == 0
    check_cc(out, G)
    assert (out / "_SUCCESS").exists() and not [p for p in os.listdir(tmp_path) if p.startswith(".")]
    assert spark.read.parquet(str(out)).count() == G.number_of_nodes()

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(pafs, "copy_files", broken)
    with pytest.raises(OSError, match="disk full"):
        main(["run", "cc", str(path), "--out", str(tmp_path / "torn"), "--quiet"])
    assert sorted(os.listdir(tmp_path)) == ["cc"]


def test_run_reports_bad_arguments(spark, road, tmp_path, capsys):
    path, _ = road
    with pytest.raises(SystemExit, match="--source is required"):
        main(["run", "sssp", str(path), "--out", str(tmp_path / "a")])
    code, _, err = cli(capsys, "run", "sssp", path, "--source", 10**6, "--out", tmp_path / "b")
    assert code == 2 and "unknown vertex 1000000" in err
    code, _, err = cli(capsys, "run", "sssp", path, "--source", "north", "--out", tmp_path / "c")
    assert code == 2 and "'north' is not a vertex id" in err
    code, _, err = cli(capsys, "run", "sssp", path, "--source", 0, "--weight", "speed", "--out", tmp_path / "d")
    assert code == 2 and "no edge attribute 'speed'" in err
    code, _, err = cli(capsys, "run", "cc", tmp_path / "nowhere.gofs", "--out", tmp_path / "e")
    assert code == 2 and "nowhere.gofs" in err
    assert not any((tmp_path / name).exists() for name in "abcde")


# --------------------------------------------------------------------------- spark-submit

def _environment(relative_python: bool = False):
    env = dict(os.environ)
    # relative, as a user writes it (.venv/bin/python): goffish/submit.py must make it absolute for the executors
    python = os.path.relpath(sys.executable, ROOT) if relative_python else sys.executable
    env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = python
    for key in ("PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET"):
        env.pop(key, None)
    return env


def submit(master: str, args: list, event_log: Path, relative_python: bool = False) -> subprocess.Popen:
    """Start ``spark-submit --master MASTER goffish/submit.py ARGS`` with an event log."""
    event_log.mkdir(parents=True, exist_ok=True)
    command = [str(SPARK_SUBMIT), "--master", master,
               "--conf", "spark.ui.enabled=false",
               "--conf", "spark.eventLog.enabled=true", "--conf", f"spark.eventLog.dir={event_log.as_uri()}",
               str(ROOT / "goffish" / "submit.py"), *map(str, args), "--quiet"]
    return subprocess.Popen(command, cwd=ROOT, env=_environment(relative_python), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def finish(process: subprocess.Popen, timeout: int = 480) -> dict:
    """Wait for a spark-submit job; return its JSON summary line."""
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        pytest.fail(f"spark-submit timed out; stderr tail:\n{err[-3000:]}")
    assert process.returncode == 0, f"spark-submit failed ({process.returncode}):\n{err[-5000:]}"
    return json.loads(out.strip().splitlines()[-1])


def events(event_log: Path) -> list[dict]:
    files = [f for f in event_log.iterdir() if f.is_file()]
    assert len(files) == 1, files
    return [json.loads(line) for line in files[0].read_text().splitlines() if line.strip()]


def where_tasks_ran(event_log: Path) -> tuple[str, set]:
    """(spark.master the job ran with, ids of the executors that ran its tasks)."""
    master, executors = None, set()
    for event in events(event_log):
        if event["Event"] == "SparkListenerEnvironmentUpdate":
            master = event["Spark Properties"]["spark.master"]
        elif event["Event"] == "SparkListenerTaskEnd":
            executors.add(event["Task Info"]["Executor ID"])
    return master, executors


@pytest.mark.slow
def test_spark_submit_local(road, tmp_path):
    path, G = road
    out = tmp_path / "sssp"
    job = submit("local[2]", ["run", "sssp", path, "--source", 0, "--weight", "length", "--out", out],
                 tmp_path / "events")
    summary = finish(job)
    assert summary["algorithm"] == "sssp" and summary["out"] == str(out)
    check_sssp(out, G, 0, "length")
    master, executors = where_tasks_ran(tmp_path / "events")
    assert master == "local[2]" and executors == {"driver"}


LOCAL_CLUSTER = "local-cluster[2,1,1024]"


@pytest.fixture(scope="module")
def local_cluster_runs(road, tmp_path_factory):
    """CC, SSSP and PageRank, each one spark-submit on local-cluster (one after another: at the same time they
    only compete for the same cores), with PYSPARK_PYTHON relative to the submitting directory."""
    path, _ = road
    base = tmp_path_factory.mktemp("local-cluster")
    jobs = {
        "cc": ["run", "cc", path],
        "sssp": ["run", "sssp", path, "--source", 0, "--weight", "length"],
        "pagerank": ["run", "pagerank", path, "--weight", "length", "--tol", "1e-4"],
    }
    runs = {}
    for name, args in jobs.items():
        out, log = base / f"{name}.parquet", base / f"{name}-events"
        runs[name] = (finish(submit(LOCAL_CLUSTER, [*args, "--out", out], log, relative_python=True)), out, log)
    return runs


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["cc", "sssp", "pagerank"])
def test_spark_submit_local_cluster(local_cluster_runs, road, algorithm):
    _, G = road
    summary, out, log = local_cluster_runs[algorithm]
    assert summary["algorithm"] == algorithm and summary["supersteps"] >= 1
    if algorithm == "cc":
        check_cc(out, G)
    elif algorithm == "sssp":
        check_sssp(out, G, 0, "length")
    else:
        check_pagerank(out, G, "length", 1e-4)
    master, executors = where_tasks_ran(log)
    # the submitted master wins over goffish.session's default, and tasks ran in the two executor JVMs
    assert master == LOCAL_CLUSTER
    assert executors and executors <= {"0", "1"}
