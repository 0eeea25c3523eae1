"""Benchmarks: measurements against named peers (igraph, NetworkX, GraphFrames), outside the
installed package. The library never imports them; they import the library.

Run one with ``./run.sh bench NAME ARGS...`` (``python -m benchmarks NAME ARGS...`` from the
repository root); ``./run.sh bench ARGS...`` runs ``gopher``. Figures are in README.md here.
"""
