"""Spark's log output for the ``goffish`` command line, which is an application.

A library must not change its caller's logging, so :func:`goffish.session`
leaves Spark's logging alone; the CLI owns its process and makes it quiet:

- when it starts the JVM itself, the driver gets a log4j2 configuration that
  shows errors only (``-Dlog4j2.configurationFile=...`` in
  ``spark.driver.extraJavaOptions``), so Spark's start-up warnings (loopback
  hostname, native Hadoop library, log-level hints) are not printed;
- once a session it started (or one spark-submit started for it) exists, the
  level is set to ERROR, which also covers a JVM spark-submit launched.

``--verbose`` does neither: Spark logs as it would on its own. Running
``python -m goffish.cli_logging DIR`` writes the configuration into DIR and
prints its path (``./run.sh submit`` passes it to spark-submit).
"""
from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile

from gofs import files

QUIET_LEVEL = "ERROR"
_JAVA_OPTIONS = "spark.driver.extraJavaOptions"
_PROPERTY = "log4j2.configurationFile"

#: log4j2 configuration for the CLI's driver: errors only, on stderr, in Spark's usual layout
QUIET_PROPERTIES = """\
# written by goffish.cli_logging: the goffish CLI shows Spark's errors only (--verbose shows everything)
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
# PySpark's JVM takes its console level from this logger (WARN unless configured) and prints a hint
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = error
"""


def write_quiet_properties(directory: str) -> str:
    """Write :data:`QUIET_PROPERTIES` into ``directory`` (atomically); return the file's path."""
    path = os.path.join(os.path.abspath(directory), "goffish-log4j2-quiet.properties")
    files.write_atomic(path, QUIET_PROPERTIES.encode())
    return path


def _process_properties_file() -> str:
    """The configuration file for this process's JVM, removed when the process exits."""
    directory = tempfile.mkdtemp(prefix="goffish-cli-")
    atexit.register(shutil.rmtree, directory, True)
    return write_quiet_properties(directory)


def jvm_running() -> bool:
    """True when this Python process already talks to a JVM (spark-submit started us, or a session exists)."""
    from sparkshim.compat import jvm_started

    return jvm_started() or "PYSPARK_GATEWAY_PORT" in os.environ


def quiet_conf(conf: dict) -> dict:
    """``conf`` plus the driver option that makes a JVM this process is about to start quiet.

    The user's own ``spark.driver.extraJavaOptions`` are kept (ours go after
    them); if they already name a log4j2 configuration, theirs is used.
    """
    options = conf.get(_JAVA_OPTIONS, "")
    if _PROPERTY in options or "log4j.configurationFile" in options:
        return dict(conf)
    ours = f"-D{_PROPERTY}=file:{_process_properties_file()}"
    return {**conf, _JAVA_OPTIONS: f"{options} {ours}".strip()}


def quiet_session(spark) -> None:
    """Show only Spark's errors from now on (session-wide: the CLI's own session only)."""
    spark.sparkContext.setLogLevel(QUIET_LEVEL)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m goffish.cli_logging DIRECTORY")
    print(write_quiet_properties(sys.argv[1]))
