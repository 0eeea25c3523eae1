"""GoFS stores that live as long as the object that asked for them.

The NetworkX backend and the GraphFrames-compatible API ingest the graphs they
are handed into a fresh temporary directory (ours, so ours to remove) and tie
its removal to the owning handle's garbage collection.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import weakref


def temporary_store(source, num_partitions: int, spark, **options):
    """Ingest ``source`` (what ``goffish.ingest`` reads; ``options`` go with it) into a new
    temporary directory; returns ``(graph, directory)``. Nothing is left behind if the ingest fails."""
    import goffish

    directory = tempfile.mkdtemp(prefix="goffish-tmp-")
    try:
        graph = goffish.ingest(source, os.path.join(directory, "graph.gofs"), num_partitions=num_partitions,
                               spark=spark, **options)
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise
    return graph, directory


def remove_with(owner, directory: str) -> None:
    """Remove ``directory`` when ``owner`` is garbage-collected (or at interpreter exit)."""
    weakref.finalize(owner, shutil.rmtree, directory, True)


def partitions_for(num_vertices: int) -> int:
    """GoFS partitions for a graph handed over in memory: one for toy graphs, more as it grows."""
    return 1 if num_vertices < 16 else 2 if num_vertices < 100_000 else 8
