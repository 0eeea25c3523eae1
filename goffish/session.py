"""SparkSession bootstrap with the GraphFrames jar on the classpath and importable.

A session that ``spark-submit`` or an existing SparkContext already created is
reused as is (its master and conf win); otherwise a ``local[*]`` session is built
from SparkConf defaults plus the jar.
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile

from goffish.jars import MAVEN_COORDINATE, resolve_graphframes_jar

_JAR_CONF = "spark.goffish.graphframes.jar"


class JavaNotFoundError(RuntimeError):
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
    graphframes : put the GraphFrames jar on the classpath (resolved offline, see ``goffish.jars``).
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
        from pyspark import SparkContext

        SparkContext._ensure_initialized()
    spark_conf = SparkConf()
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    elif not spark_conf.contains("spark.master"):
        builder = builder.master("local[*]")
    defaults = {
        "spark.sql.shuffle.partitions": "8",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.graphx.pregel.checkpointInterval": "2",
    }
    for key, value in defaults.items():
        if not spark_conf.contains(key):
            builder = builder.config(key, value)
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)

    jar = None
    if graphframes:
        jar = resolve_graphframes_jar(spark_conf.get(_JAR_CONF, None) or (conf or {}).get(_JAR_CONF))
        if jar is not None:
            existing = spark_conf.get("spark.jars", "")
            jars = ",".join(filter(None, [existing, str(jar)]))
            builder = builder.config("spark.jars", jars).config(_JAR_CONF, str(jar))
        else:
            builder = builder.config("spark.jars.packages", MAVEN_COORDINATE)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("GOFFISH_LOG_LEVEL", "ERROR"))
    if jar is not None:
        _make_graphframes_importable(str(jar))
    if spark.sparkContext.getCheckpointDir() is None:
        spark.sparkContext.setCheckpointDir(tempfile.mkdtemp(prefix="goffish-checkpoints-"))
    return spark
