"""A class-data archive for the Spark driver's JVM: a fresh process maps Spark's classes instead
of loading them one by one.

Most of a fresh process's first-run time after its session starts is the JVM's, not ours:
its first SQL query builds the session's SQL state, looks up the Parquet source, plans and
compiles, loading and verifying thousands of classes on the way. Java's class-data sharing
(AppCDS; dynamic archives since JDK 13) records the classes a JVM loaded into an archive when
it exits; a later JVM given that archive maps them ready-parsed and verified.

``./run.sh`` records the archive at set-up (:mod:`goffish.record_class_archive`) from a short
job like a user's first one. :func:`goffish.session` hands it to the JVM it starts (never to a
running one) when ``spark.driver.extraJavaOptions`` is unset. The archive is keyed by the Java runtime and
Spark's jars, and committed only after its JVM has exited (a truncated archive crashes the
JVM that maps it); a JVM whose class path differs from the recorded one ignores it, silently.
``spark.goffish.classArchive``: ``off``, or the archive's path (default under ``$GOFFISH_CACHE``).

A JVM that maps the archive also compiles later with C2, the JIT's optimising compiler
(:data:`LATE_C2`): the rest of a fresh JVM's first query is mostly compiling methods that run
briefly. ``off`` leaves the JVM stock in both respects.
"""
from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from goffish.jars import cache_dir

SETTING = "spark.goffish.classArchive"
JAVA_OPTIONS = "spark.driver.extraJavaOptions"
QUIET = "-Xlog:cds=off,cds+dynamic=off"        # a class path that differs: no archive, and no warning
#: C2 only for methods ten times hotter than HotSpot's default tier-4 thresholds. A fresh process's
#: first run plus its caller's first query cost the driver JVM 12.0-12.7 CPU-s, of which C2 compiled
#: methods that ran for a moment; with these 7.7-9.3 CPU-s (1M road CC, load 18-41, three rounds
#: alternated), a warm run's no more (1.2-1.3 against 1.5-2.0 CPU-s). Hot loops pass these
#: counts within milliseconds, so long jobs still run C2 code.
LATE_C2 = ("-XX:Tier4InvocationThreshold=50000 -XX:Tier4MinInvocationThreshold=6000 "
           "-XX:Tier4CompileThreshold=150000 -XX:Tier4BackEdgeThreshold=400000")


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
    """The driver JVM options that map :func:`mapped_archive`, with :data:`LATE_C2`, if any."""
    path = mapped_archive(settings)
    return None if path is None else f"-XX:SharedArchiveFile={path} {QUIET} {LATE_C2}"


if __name__ == "__main__":      # ./run.sh submit: the driver JVM options that map the archive, or nothing
    print(java_options({}) or "")
