"""Entry point for spark-submit: ``spark-submit goffish/submit.py run cc GRAPH --out OUT``.

Executors start their Python workers in their own working directory, so a
relative ``PYSPARK_PYTHON`` (``.venv/bin/python``) that works for the driver
fails there (``Cannot run program ".venv/bin/python"``). Before Spark starts,
a relative interpreter path that exists from the driver's directory is made
absolute; one that does not exist here is left alone, as is any path when an
archive is shipped (``--archives env.tar.gz#env`` with ``PYSPARK_PYTHON=./env/bin/python``
is meant relative to each executor's directory).
"""
import os
import sys

_ARCHIVE_CONFS = ("spark.archives", "spark.yarn.dist.archives")


def absolute_interpreters(environ: dict, cwd: str, archives_shipped: bool) -> dict:
    """The PYSPARK_PYTHON / PYSPARK_DRIVER_PYTHON settings to change: relative paths that exist from ``cwd``."""
    if archives_shipped:
        return {}
    changes = {}
    for name in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON"):
        value = environ.get(name)
        if value and os.sep in value and not os.path.isabs(value) and os.path.exists(os.path.join(cwd, value)):
            changes[name] = os.path.abspath(os.path.join(cwd, value))
    return changes


def _archives_shipped() -> bool:
    """Does the submitted conf ship archives to the executors (read from spark-submit's JVM)?"""
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        return False
    from pyspark import SparkConf

    from sparkshim.compat import connect_to_submitted_jvm

    connect_to_submitted_jvm()
    conf = SparkConf()
    return any(conf.get(key, "") for key in _ARCHIVE_CONFS)


def main(argv=None) -> int:
    os.environ.update(absolute_interpreters(os.environ, os.getcwd(), _archives_shipped()))
    from goffish.cli import main as cli

    return cli(argv)


if __name__ == "__main__":
    sys.exit(main())
