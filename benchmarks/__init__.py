"""Benchmarks: measurements against named peers (igraph, NetworkX, GraphFrames), outside the
installed package. The library never imports them; they import the library.

Run one with ``./run.sh bench NAME ARGS...`` (``python -m benchmarks NAME ARGS...`` from the
repository root); ``./run.sh bench ARGS...`` runs ``gopher``. Figures are in README.md here.
"""

import atexit
import json
import os
import shutil
import tempfile


def print_results(results: dict, json_path: str | None = None) -> None:
    """Print a benchmark's results as JSON, and write them to ``json_path`` too when given."""
    print(json.dumps(results, indent=1))
    if json_path:
        os.makedirs(os.path.dirname(json_path) or ".", exist_ok=True)
        with open(json_path, "w") as f:
            json.dump(results, f, indent=1)


def scratch_directory(prefix: str) -> str:
    """A new temporary directory for a benchmark's inputs and graphs, removed when the process exits
    (pass a benchmark's ``--workdir`` instead to keep them)."""
    path = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, path, True)
    return path
