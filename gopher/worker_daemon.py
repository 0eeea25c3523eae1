"""The Python daemon of the sessions goffish builds itself (``spark.python.daemon.module``).

Here, not in goffish, so that the daemon does not import the front end (0.5 s and more).

Spark starts ``python -m <daemon module>`` once per executor and forks every Python worker
from it; this module is PySpark's daemon (:func:`sparkshim.compat.serve_python_workers`), run
after two things each forked worker would otherwise pay on its first task: importing numpy, pyarrow and Gopher's task side
(0.1-0.2 s a worker), and the re-read of the zip importers that importing pyspark left
cached (see :func:`sparkshim.compat.forget_zip_importers`). A pre-import that fails is
skipped: the worker then imports what it needs itself, as under ``pyspark.daemon``.
:func:`goffish.session.session` sets it only where the executors run this Python (a local
master) and nobody set the key; a user's session is never changed.
"""
from __future__ import annotations

import importlib

PRELOADED = ("numpy", "pyarrow", "pyarrow.compute", "gopher.resident", "gopher.jobs", "gofs.store")


def preload() -> None:
    for name in PRELOADED:
        try:
            importlib.import_module(name)
        except ImportError:
            pass


if __name__ == "__main__":
    from sparkshim.compat import serve_python_workers

    serve_python_workers(preload)
