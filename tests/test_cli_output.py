"""What a CLI user sees: Spark quiet by default, ``--verbose`` for Spark's own output,
and spark-submit given interpreter paths its executors can use.

The quiet/verbose checks start the CLI as a user does (``./run.sh goffish ...``,
a fresh process and JVM), so they are marked slow. ``tests/test_cli.py`` runs
``goffish/submit.py`` on local-cluster with a relative ``PYSPARK_PYTHON``.
"""
import json
import os
import subprocess
from pathlib import Path

import pytest

from goffish import cli_logging
from goffish.cli import main
from goffish.generators import road_network
from goffish.submit import absolute_interpreters

ROOT = Path(__file__).resolve().parents[1]
SPARK_NOISE = ("WARN", "Setting default log level", "NativeCodeLoader", "loopback address")


def test_quiet_conf_adds_the_driver_option_and_keeps_the_users(tmp_path):
    conf = cli_logging.quiet_conf({"spark.driver.extraJavaOptions": "-Xss4m", "spark.ui.enabled": "false"})
    options = conf["spark.driver.extraJavaOptions"]
    assert options.startswith("-Xss4m -Dlog4j2.configurationFile=file:")
    assert conf["spark.ui.enabled"] == "false"
    properties = Path(options.split("file:", 1)[1])
    text = properties.read_text()
    assert "rootLogger.level = error" in text and "PythonGatewayServer" in text

    theirs = {"spark.driver.extraJavaOptions": "-Dlog4j2.configurationFile=/etc/mine.properties"}
    assert cli_logging.quiet_conf(theirs) == theirs


def test_write_quiet_properties(tmp_path):
    path = cli_logging.write_quiet_properties(str(tmp_path))
    assert Path(path).read_text() == cli_logging.QUIET_PROPERTIES
    assert sorted(p.name for p in tmp_path.iterdir()) == ["goffish-log4j2-quiet.properties"]


def test_absolute_interpreters(tmp_path):
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "python").write_text("")
    python = str(tmp_path / ".venv" / "bin" / "python")
    relative = {"PYSPARK_PYTHON": ".venv/bin/python", "PYSPARK_DRIVER_PYTHON": ".venv/bin/python"}
    assert absolute_interpreters(relative, str(tmp_path), archives_shipped=False) == {
        "PYSPARK_PYTHON": python, "PYSPARK_DRIVER_PYTHON": python}
    # shipped with --archives, ./env/bin/python is meant relative to each executor: left alone
    assert absolute_interpreters(relative, str(tmp_path), archives_shipped=True) == {}
    # absolute, a bare name looked up on PATH, or a relative path that does not exist here: left alone
    assert absolute_interpreters({"PYSPARK_PYTHON": python, "PYSPARK_DRIVER_PYTHON": "python3"},
                                 str(tmp_path), False) == {}
    assert absolute_interpreters({"PYSPARK_PYTHON": "./env/bin/python"}, str(tmp_path), False) == {}


def test_in_process_cli_leaves_the_callers_session_alone(spark, tmp_path, capsys):
    """cli.main inside a program that has a session: no log level change, and the session is not stopped."""
    from pyspark.sql import SparkSession

    graph = tmp_path / "road.gofs"
    assert main(["generate", "road", "--size", "60", "--out", str(graph), "--partitions", "2"]) == 0
    root = spark.sparkContext._jvm.org.apache.logging.log4j.LogManager.getRootLogger()
    before = root.getLevel().toString()
    spark.sparkContext.setLogLevel("WARN")
    try:
        assert main(["run", "cc", str(graph), "--out", str(tmp_path / "cc"), "--quiet"]) == 0
        assert root.getLevel().toString() == "WARN"
    finally:
        spark.sparkContext.setLogLevel(before)
    assert SparkSession.getActiveSession() is spark and spark.range(3).count() == 3


def _cli(*args) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    for key in ("PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET"):
        env.pop(key, None)
    done = subprocess.run([str(ROOT / "run.sh"), "goffish", *map(str, args)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=480)
    assert done.returncode == 0, done.stderr[-5000:]
    return done


@pytest.fixture(scope="module")
def tiny_graph(tmp_path_factory):
    from gofs.ingest import ingest

    path = tmp_path_factory.mktemp("quiet") / "road.gofs"
    ingest(road_network(80, seed=4), str(path), num_partitions=2)
    return path


@pytest.mark.slow
def test_cli_run_is_quiet_by_default(tiny_graph, tmp_path):
    done = _cli("run", "cc", tiny_graph, "--out", tmp_path / "cc", "--quiet")
    assert json.loads(done.stdout.strip().splitlines()[-1])["algorithm"] == "cc"
    noise = [line for line in done.stderr.splitlines() if any(word in line for word in SPARK_NOISE)]
    assert not noise, f"Spark's start-up output reached the user:\n{done.stderr[-3000:]}"


@pytest.mark.slow
def test_cli_run_verbose_shows_spark(tiny_graph, tmp_path):
    done = _cli("run", "cc", tiny_graph, "--out", tmp_path / "cc", "--quiet", "--verbose")
    assert json.loads(done.stdout.strip().splitlines()[-1])["algorithm"] == "cc"
    assert "Setting default log level" in done.stderr
