"""SparkSession bootstrap with the GraphFrames jar on the classpath and importable.

A session that ``spark-submit`` or an existing SparkContext already created is
reused as is (its master and conf win, nothing is changed on it); otherwise a
``local[*]`` session is built from SparkConf defaults plus the jar.

What :func:`session` sets, only when it builds the session and only for keys
that neither SparkConf (spark-defaults.conf, spark-submit ``--conf``) nor the
``conf`` argument set: see :data:`DEFAULTS`. It never changes the log level or
``spark.sql.shuffle.partitions``. If no checkpoint directory is set it creates
a temporary one, removed when the Python process exits
(:mod:`sparkshim.checkpoints`). A JVM it starts maps the class-data archive built at
set-up, where one exists and ``spark.driver.extraJavaOptions`` is unset
(:mod:`goffish.class_archive`).
"""
from __future__ import annotations

import os
import shutil
import sys

from goffish.class_archive import JAVA_OPTIONS, SETTING, java_options
from goffish.jars import resolve_graphframes_jar
from sparkshim.compat import jvm_started
from sparkshim.checkpoints import ensure_checkpoint_dir
from gofs.errors import SetupError

_JAR_CONF = "spark.goffish.graphframes.jar"

DEFAULTS = {
    # Arrow for toPandas/createDataFrame: GoFS moves columns as Arrow anyway.
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # GraphFrames' Pregel-based baselines: checkpoint every 2 iterations so lineage stays short.
    "spark.graphx.pregel.checkpointInterval": "2",
    # Remove checkpoint files of RDDs that are garbage-collected.
    "spark.cleaner.referenceTracking.cleanCheckpoints": "true",
}


class JavaNotFoundError(SetupError):
    """Spark needs a Java runtime and none is on PATH or JAVA_HOME."""


def _check_java() -> None:
    home = os.environ.get("JAVA_HOME")
    if home and os.path.exists(os.path.join(home, "bin", "java")):
        return
    if shutil.which("java") is None:
        raise JavaNotFoundError(
            "Spark needs Java 8, 11 or 17: install a JDK (e.g. `apt-get install openjdk-17-jre-headless`) "
            "or set JAVA_HOME."
        )


def _make_graphframes_importable(jar: str) -> None:
    """The Python side of GraphFrames ships inside the jar: put the jar on sys.path."""
    if jar not in sys.path:
        sys.path.append(jar)


def session(master: str | None = None, app_name: str = "goffish", conf: dict | None = None,
            graphframes: bool = True):
    """Return the active SparkSession, or build one with GraphFrames available.

    Parameters
    ----------
    master : Spark master URL; default: what spark-submit/SparkConf says, else ``local[*]``.
    conf : extra Spark settings.
    graphframes : put the GraphFrames jar on the classpath (resolved offline and checked against
        its pinned SHA-256, see ``goffish.jars``); without it GraphFrames interop says so when used.

    Returns
    -------
    The SparkSession. Settings it adds when it builds one: :data:`DEFAULTS` (each only if
    unset), the GraphFrames jar, and a temporary checkpoint directory if none is set.

    Example
    -------
    >>> spark = goffish.session(master="local[4]", conf={"spark.sql.shuffle.partitions": "16"})
    """
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        jar = active.sparkContext.getConf().get(_JAR_CONF, None)
        if jar:
            _make_graphframes_importable(jar)
        return active

    _check_java()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if "PYSPARK_GATEWAY_PORT" in os.environ:
        # Under spark-submit the JVM is already running with the submitted master and --conf;
        # connect to it first, or SparkConf() below is empty and local[*] and our defaults win.
        from sparkshim.compat import connect_to_submitted_jvm

        connect_to_submitted_jvm()
    spark_conf = SparkConf()
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    elif not spark_conf.contains("spark.master"):
        builder = builder.master("local[*]")
    for key, value in DEFAULTS.items():
        if not spark_conf.contains(key):
            builder = builder.config(key, value)
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    if not jvm_started():                # the archive is for a JVM about to start, never a running one
        archive = java_options({key: (conf or {}).get(key, spark_conf.get(key, None)) for key in (JAVA_OPTIONS, SETTING)})
        if archive:
            builder = builder.config(JAVA_OPTIONS, archive)

    jar = None
    if graphframes:
        jar = resolve_graphframes_jar(spark_conf.get(_JAR_CONF, None) or (conf or {}).get(_JAR_CONF))
        if jar is not None:
            existing = spark_conf.get("spark.jars", "") or (conf or {}).get("spark.jars", "")
            jars = ",".join(filter(None, [existing, str(jar)]))
            builder = builder.config("spark.jars", jars).config(_JAR_CONF, str(jar))
    spark = builder.getOrCreate()
    if jar is not None:
        _make_graphframes_importable(str(jar))
    ensure_checkpoint_dir(spark.sparkContext)
    return spark
