"""goffish.session: user settings win, only documented defaults are added; the GraphFrames jar is pinned."""
import pytest

from goffish import jars
from goffish.session import DEFAULTS, session


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
