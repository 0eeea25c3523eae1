"""A checkpoint directory for the Spark session when the user set none, removed at exit.

GraphFrames' connected components and Pregel need ``SparkContext.setCheckpointDir``.
If the user (or spark-submit) set one, it is used as is and never touched;
otherwise a temporary directory is created inside Spark's own driver scratch directory
(which Spark's JVM removes when it exits, even after this Python process is killed)
and registered for removal when the Python process exits, so no run leaves
``goffish-checkpoints-*`` behind.
"""
from __future__ import annotations

import atexit
import shutil
import tempfile

_created: list[str] = []


def ensure_checkpoint_dir(spark_context) -> str:
    """The session's checkpoint directory, creating a temporary one (ours, removed at exit) if unset."""
    current = spark_context.getCheckpointDir()
    if current is not None:
        return current
    path = tempfile.mkdtemp(prefix="goffish-checkpoints-", dir=driver_scratch(spark_context))
    if not _created:
        atexit.register(remove_created)
    _created.append(path)
    spark_context.setCheckpointDir(path)
    return spark_context.getCheckpointDir()


def driver_scratch(spark_context) -> str | None:
    """The running SparkContext's driver scratch directory (``SparkFiles.getRootDirectory()``),
    or None (the system's temporary directory) for anything else."""
    from pyspark import SparkContext, SparkFiles

    return SparkFiles.getRootDirectory() if isinstance(spark_context, SparkContext) else None


def remove_created() -> None:
    """Remove the temporary checkpoint directories this process created (and nothing else)."""
    while _created:
        shutil.rmtree(_created.pop(), ignore_errors=True)
