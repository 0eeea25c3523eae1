"""A checkpoint directory for the Spark session when the user set none, removed at exit.

GraphFrames' connected components and Pregel need ``SparkContext.setCheckpointDir``.
If the user (or spark-submit) set one, it is used as is and never touched;
otherwise a temporary directory is created and registered for removal when the
Python process exits, so no run leaves ``goffish-checkpoints-*`` behind.
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
    path = tempfile.mkdtemp(prefix="goffish-checkpoints-")
    if not _created:
        atexit.register(remove_created)
    _created.append(path)
    spark_context.setCheckpointDir(path)
    return spark_context.getCheckpointDir()


def remove_created() -> None:
    """Remove the temporary checkpoint directories this process created (and nothing else)."""
    while _created:
        shutil.rmtree(_created.pop(), ignore_errors=True)
