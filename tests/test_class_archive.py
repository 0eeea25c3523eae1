"""The driver JVM's class-data archive (issue 25): offered only to a JVM about to start whose
options the user left alone, keyed by the Java runtime and Spark's jars, never left half-written."""
import json
import os
import subprocess
import sys

import pytest

from goffish import record_class_archive as record
from goffish.class_archive import JAVA_OPTIONS, SETTING, default_path, java_options
from gofs.errors import SetupError


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GOFFISH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def runtime(tmp_path, monkeypatch):
    """A stand-in Java runtime and Spark home, so the key's inputs can be changed."""
    java, jars = tmp_path / "jdk" / "bin" / "java", tmp_path / "spark" / "jars"
    java.parent.mkdir(parents=True)
    java.write_text("#!/bin/sh\n")
    (tmp_path / "jdk" / "lib").mkdir()
    (tmp_path / "jdk" / "lib" / "modules").write_bytes(b"classes")
    jars.mkdir(parents=True)
    (jars / "spark-core.jar").write_bytes(b"core")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    monkeypatch.setenv("SPARK_HOME", str(tmp_path / "spark"))
    return tmp_path


def test_the_archive_is_offered_only_where_one_is_built_and_the_user_left_the_jvm_options_alone(cache, tmp_path):
    assert java_options({}) is None                              # none built yet
    path = default_path()
    path.parent.mkdir(parents=True)
    path.write_bytes(b"archive")
    assert java_options({}).split()[0] == f"-XX:SharedArchiveFile={path}"
    assert java_options({JAVA_OPTIONS: "-Xss4m"}) is None           # the user's options win, untouched
    assert java_options({SETTING: "off"}) is None
    assert java_options({SETTING: str(tmp_path / "elsewhere.jsa")}) is None
    (tmp_path / "elsewhere.jsa").write_bytes(b"archive")
    assert java_options({SETTING: str(tmp_path / "elsewhere.jsa")}).startswith(
        f"-XX:SharedArchiveFile={tmp_path / 'elsewhere.jsa'} ")


def test_the_archive_is_keyed_by_the_java_runtime_and_sparks_jars(cache, runtime):
    first = default_path()
    assert first.parent == cache / "jvm" and default_path() == first
    (runtime / "spark" / "jars" / "extra.jar").write_bytes(b"more")
    second = default_path()
    (runtime / "jdk" / "lib" / "modules").write_bytes(b"updated classes")
    third = default_path()
    assert len({first, second, third}) == 3


def test_a_build_that_fails_leaves_nothing_behind(cache, runtime, monkeypatch):
    monkeypatch.setattr("sparkshim.compat.jvm_started", lambda: False)
    written = []

    def half_written(pending, master):
        written.append(pending)
        with open(pending, "wb") as out:
            out.write(b"part of an archive")
        raise RuntimeError("the JVM died")

    monkeypatch.setattr(record, "_session", half_written)
    with pytest.raises(RuntimeError, match="the JVM died"):
        record.build()
    assert written and os.path.dirname(written[0]) == str(default_path().parent)
    assert os.listdir(default_path().parent) == []


def test_a_jvm_that_ends_badly_commits_no_archive(cache, runtime, monkeypatch):
    class Session:
        def stop(self):
            pass

    def session(pending, master):
        with open(pending, "wb") as out:
            out.write(b"archive")
        return Session()

    monkeypatch.setattr("sparkshim.compat.jvm_started", lambda: False)
    monkeypatch.setattr("sparkshim.compat.end_jvm", lambda: 1)
    monkeypatch.setattr(record, "_session", session)
    monkeypatch.setattr(record, "_first_job", lambda spark: None)
    with pytest.raises(SetupError, match="did not write its archive"):
        record.build()
    assert os.listdir(default_path().parent) == []
    monkeypatch.setattr("sparkshim.compat.end_jvm", lambda: 0)
    assert record.build() == default_path() and default_path().read_bytes() == b"archive"


def test_a_process_with_a_jvm_cannot_record_one(spark, cache):
    with pytest.raises(SetupError, match="already has a JVM"):
        record.build()


def test_a_new_session_maps_the_archive_and_a_users_jvm_options_win(tmp_path):
    """In fresh processes (a JVM starts): the option reaches the JVM; one that is not an archive
    is ignored without a word; the user's own JVM options are left as they are."""
    archive = tmp_path / "not-an-archive.jsa"
    archive.write_bytes(b"not an archive")
    script = ("import json, sys, goffish\n"
              "s = goffish.session(master='local[1]', conf=json.loads(sys.argv[1]), graphframes=False)\n"
              "print('OPTIONS', s.sparkContext.getConf().get('spark.driver.extraJavaOptions'))\n"
              "print('SUM', s.sparkContext.parallelize(range(4), 2).sum())\n"
              "print('LATE_C2', '-XX:Tier4InvocationThreshold=50000' in "
              "list(s._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()))\n")
    for conf, mapped in (({SETTING: str(archive)}, True), ({SETTING: str(archive), JAVA_OPTIONS: "-Xss8m"}, False)):
        done = subprocess.run([sys.executable, "-c", script, json.dumps(conf)], capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        options = done.stdout.split("OPTIONS ", 1)[1].splitlines()[0]
        assert (f"-XX:SharedArchiveFile={archive} " in options) == mapped and "SUM 6" in done.stdout
        assert f"LATE_C2 {mapped}" in done.stdout            # the running JVM has the JIT's thresholds
        assert mapped or options.endswith(" -Xss8m")       # after Spark's own defaults, as the user set it
        assert "archive" not in done.stdout.replace(options, "") and "cds" not in done.stderr


def test_the_command_lines_own_jvm_maps_the_archive_beside_its_quiet_logging(tmp_path):
    """The CLI sets the JVM's options itself (quiet logging): they map the archive too, as
    goffish.session's would; with the user's own options set, those and the logging only."""
    archive = tmp_path / "not-an-archive.jsa"
    archive.write_bytes(b"not an archive")
    script = ("import sys\n"
              "from goffish import cli\n"
              "args = cli.build_parser().parse_args(['run', 'cc', 'g.gofs', '--out', 'o', '--master', 'local[1]', "
              "*sys.argv[1:]])\n"
              "args.status = cli.StatusLine(sys.stderr)\n"
              "spark = cli._spark(args)\n"
              "print('OPTIONS', spark.sparkContext.getConf().get('spark.driver.extraJavaOptions'))\n"
              "print('SUM', spark.sparkContext.parallelize(range(4), 2).sum())\n")
    for extra, mapped in (([], True), (["--conf", f"{JAVA_OPTIONS}=-Xss8m"], False)):
        done = subprocess.run([sys.executable, "-c", script, "--conf", f"{SETTING}={archive}", *extra],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        options = done.stdout.split("OPTIONS ", 1)[1].splitlines()[0]
        assert (f"-XX:SharedArchiveFile={archive} " in options) == mapped and "SUM 6" in done.stdout
        assert "-Dlog4j2.configurationFile=" in options and (mapped or " -Xss8m -Dlog4j2.configurationFile=" in options)


def test_the_options_are_printed_for_spark_submit(cache):
    """``./run.sh submit`` asks ``python -m goffish.class_archive`` for them: nothing until one is built."""
    def printed():
        done = subprocess.run([sys.executable, "-m", "goffish.class_archive"], capture_output=True, text=True,
                              env={**os.environ, "GOFFISH_CACHE": str(cache)}, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    assert printed() == ""
    default_path().parent.mkdir(parents=True)
    default_path().write_bytes(b"archive")
    assert printed() == java_options({})
