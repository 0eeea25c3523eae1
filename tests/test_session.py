"""goffish.session: user settings win, only documented defaults are added; the GraphFrames jar is pinned."""
import pytest

from goffish import jars
from goffish.session import DEFAULTS, daemon_setting, session


def test_user_settings_win_and_only_documented_defaults_are_added(spark):
    conf = spark.sparkContext.getConf()
    assert spark.conf.get("spark.sql.shuffle.partitions") == "4"          # what the tests' conftest asked for
    assert conf.get("spark.ui.showConsoleProgress") == "false"
    for key, value in DEFAULTS.items():
        assert conf.get(key) == value
    assert not {"spark.sql.shuffle.partitions", "spark.sql.adaptive.enabled"} & set(DEFAULTS)


def test_an_active_session_is_returned_unchanged(spark):
    assert session(conf={"spark.sql.shuffle.partitions": "99"}) is spark
    assert spark.conf.get("spark.sql.shuffle.partitions") == "4"


def test_a_tampered_cached_jar_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("GOFFISH_CACHE", str(tmp_path))
    monkeypatch.delenv("GOFFISH_GRAPHFRAMES_JAR", raising=False)
    cached = jars.cached_jar_path()
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"PK\x03\x04 not the real jar")
    with pytest.raises(jars.JarChecksumError, match="is not the pinned"):
        jars.resolve_graphframes_jar(fetch=False)


def test_the_pinned_jar_passes(monkeypatch):
    monkeypatch.delenv("GOFFISH_GRAPHFRAMES_JAR", raising=False)
    found = jars.resolve_graphframes_jar(fetch=False)
    if found is None:
        pytest.skip("no cached GraphFrames jar on this machine")
    import hashlib

    assert hashlib.sha256(found.read_bytes()).hexdigest() == jars.JAR_SHA256


def test_workers_of_a_local_session_fork_from_the_preloading_daemon(spark):
    def task(rows):
        import os
        import sys

        parent = open(f"/proc/{os.getppid()}/cmdline").read().split("\0")
        yield parent[-3:], "gopher.resident" in sys.modules, sum(rows)

    assert spark.sparkContext.getConf().get("spark.python.daemon.module") == "gopher.worker_daemon"
    assert spark.sparkContext.parallelize([1, 2], 1).mapPartitions(task).collect() == [
        (["-m", "gopher.worker_daemon", ""], True, 3)]


def test_the_daemon_is_set_only_for_a_local_master_and_never_over_a_setting():
    assert daemon_setting("local[2]", set()) == {"spark.python.daemon.module": "gopher.worker_daemon"}
    assert daemon_setting("spark://host:7077", set()) == {}
    assert daemon_setting("yarn", set()) == {}
    assert daemon_setting("local[*]", {"spark.python.daemon.module"}) == {}


def test_the_daemon_skips_a_preload_that_fails(monkeypatch):
    import sys

    from gopher import worker_daemon

    monkeypatch.setattr(worker_daemon, "PRELOADED", ("gopher.no_such_module", "colorsys"))
    monkeypatch.delitem(sys.modules, "colorsys", raising=False)
    worker_daemon.preload()
    assert "colorsys" in sys.modules and "gopher.no_such_module" not in sys.modules
