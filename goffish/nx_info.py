"""``networkx.backend_info`` for the ``goffish`` backend: read at every ``import networkx``,
so it stays light (no Spark, no algorithm imports; see :mod:`goffish.nx_backend`)."""
from __future__ import annotations

import ast
from pathlib import Path

DEFAULT_CONFIG = {"min_edges": 1_000_000, "partitions": None}
"""``min_edges``: graphs with fewer edges stay in NetworkX unless the backend is named;
``partitions``: GoFS partitions of a converted graph (None: from its size)."""


def declared_functions() -> list[str]:
    """Names of the NetworkX functions the registry declares, read from the algorithm modules'
    source: ``import networkx`` asks for them, and importing the algorithms (Spark, igraph,
    numba) there would slow down every NetworkX user of this environment."""
    names = set()
    for path in (Path(__file__).resolve().parent.parent / "algorithms").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "NetworkX" and node.args:
                first = node.args[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    names.add(first.value.rsplit(".", 1)[-1])
    return sorted(names)


def get_info() -> dict:
    """The ``networkx.backend_info`` entry point."""
    return {
        "backend_name": "goffish",
        "project": "goffish",
        "package": "goffish",
        "short_summary": "GoFS graphs on Spark: sub-graph-centric algorithms (Gopher)",
        "functions": {name: {"additional_docs": "Runs on Spark over a GoFS store (a temporary one for a "
                                                "NetworkX graph)."} for name in declared_functions()},
        "default_config": dict(DEFAULT_CONFIG),
    }
