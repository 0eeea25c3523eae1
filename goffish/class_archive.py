"""A class-data archive for the Spark driver's JVM: a fresh process maps Spark's classes instead
of loading them one by one.

Most of a fresh process's first-run time after its session starts is the JVM's, not ours:
its first SQL query builds the session's SQL state, looks up the Parquet source, plans and
compiles, loading and verifying thousands of classes on the way. Java's class-data sharing
(AppCDS; dynamic archives since JDK 13) records the classes a JVM loaded into an archive when
it exits; a later JVM given that archive maps them ready-parsed and verified.

``./run.sh`` builds the archive at set-up (``python -m goffish.class_archive``) from a short
job like a user's first one: ingest the sample graph, run connected components, aggregate its
DataFrame. :func:`goffish.session` hands it to the JVM it starts (never to a running one) when
``spark.driver.extraJavaOptions`` is unset. The archive is keyed by the Java runtime and
Spark's jars, and committed only after its JVM has exited (a truncated archive crashes the
JVM that maps it); a JVM whose class path differs from the recorded one ignores it, silently.
``spark.goffish.classArchive``: ``off``, or the archive's path (default under ``$GOFFISH_CACHE``).
"""
from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
from pathlib import Path

from goffish.jars import cache_dir

SETTING = "spark.goffish.classArchive"
JAVA_OPTIONS = "spark.driver.extraJavaOptions"
_QUIET = "-Xlog:cds=off,cds+dynamic=off"        # a class path that differs: no archive, and no warning


def _java() -> Path | None:
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    return Path(os.path.realpath(java)) if java and os.path.exists(java) else None


def _spark_jars() -> Path:
    import pyspark

    return Path(os.environ.get("SPARK_HOME") or os.path.dirname(pyspark.__file__)) / "jars"


def default_path() -> Path | None:
    """Where the archive of this Java runtime and these Spark jars lives (None without Java)."""
    java = _java()
    if java is None:
        return None
    key = hashlib.sha256()
    runtime = java.parent.parent / "lib" / "modules"      # the runtime's classes: changes with any update
    for path in [java, runtime, *sorted(_spark_jars().glob("*.jar"))]:
        stat = path.stat() if path.exists() else None
        key.update(f"{path}:{stat and stat.st_size}:{stat and stat.st_mtime_ns}\n".encode())
    return cache_dir() / "jvm" / f"spark-{key.hexdigest()[:16]}.jsa"


def _chosen(setting: str | None) -> Path | None:
    if setting == "off":
        return None
    return Path(setting) if setting else default_path()


def mapped_archive(settings: dict) -> Path | None:
    """The archive a session about to start its JVM with ``settings`` (the Spark settings given
    so far) maps; None where the user set the JVM's options, turned it off, or none is built."""
    if settings.get(JAVA_OPTIONS):
        return None
    path = _chosen(settings.get(SETTING))
    return path if path is not None and path.is_file() else None


def java_options(settings: dict) -> str | None:
    """The driver JVM options that map :func:`mapped_archive`, if any."""
    path = mapped_archive(settings)
    return None if path is None else f"-XX:SharedArchiveFile={path} {_QUIET}"


def build(path: Path | None = None, master: str = "local[2]") -> Path | None:
    """Record the archive (in this process, which must not have started a JVM yet) unless it exists.

    The JVM writes it beside its final name at exit; it is renamed into place only once that
    JVM has ended cleanly, so a reader never sees part of one."""
    from sparkshim.compat import end_jvm, jvm_started

    path = path or default_path()
    if path is None or path.is_file():
        return path
    if jvm_started():
        raise RuntimeError("goffish.class_archive.build: this process already has a JVM; run it in a fresh one")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, pending = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    os.close(fd)
    os.unlink(pending)                           # the JVM creates it
    try:
        spark = _session(pending, master)
        _first_job(spark)
        spark.stop()
        if end_jvm() != 0 or not os.path.getsize(pending):
            raise RuntimeError("goffish.class_archive.build: the JVM did not write its archive")
        os.replace(pending, path)
    finally:
        if os.path.exists(pending):
            os.unlink(pending)
    return path


def _session(pending: str, master: str):
    import goffish

    return goffish.session(master=master, conf={JAVA_OPTIONS: f"-XX:ArchiveClassesAtExit={pending} {_QUIET}",
                                                SETTING: "off", "spark.ui.showConsoleProgress": "false"})


def _first_job(spark) -> None:
    """What a user's first job does: ingest, a Gopher run, then the usual first things done with
    its DataFrame (an aggregate, a grouping, a filter, pandas, a Parquet write)."""
    from pyspark.sql import functions as F

    import goffish
    from goffish.demo import SAMPLE
    from gofs.ingest.read_local import read_edge_list

    with tempfile.TemporaryDirectory(prefix="goffish-class-archive-") as work:
        g = goffish.ingest(read_edge_list(SAMPLE, weight="length"), os.path.join(work, "sample.gofs"),
                           num_partitions=4, spark=spark)
        result = g.connected_components(progress=False)
        frame = result.dataframe
        frame.agg(F.count(F.lit(1)), F.sum(F.when(~F.isnan("component"), F.col("component")).cast("double"))).first()
        frame.groupBy("component").count().orderBy(F.desc("count")).limit(3).collect()
        frame.filter(F.col("component") >= 0).toPandas()
        frame.write.parquet(os.path.join(work, "components.parquet"))
        result.to_arrow()
        result.unpersist()


if __name__ == "__main__":
    built = build()
    print(f"goffish: JVM class-data archive {built or 'not built (no Java found)'}", file=sys.stderr)
