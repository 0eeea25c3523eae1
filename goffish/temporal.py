"""Temporal datasets written as GoFS graphs with instances, for examples, tests and benchmarks.

Builds on :mod:`goffish.generators`: a topology (road-like or LFR-like social)
is ingested once, and its attribute time series (hourly travel times, or posts
with hashtags and spreading memes) is appended as one instance per interval.
The same arguments always give the same graph, so a test can regenerate the
inputs with the generators to compute expected answers independently.

Example::

    >>> from goffish.temporal import road_with_travel_times
    >>> g = road_with_travel_times("/tmp/road.gofs", 10_000, hours=24, overwrite=True)
    >>> len(g.instances), g.instances[8]["start"]
    (24, 480.0)
"""
from __future__ import annotations

import pyarrow as pa

import goffish
from goffish.generators import lfr, road_network, road_travel_times, social_posts
from gofs.graph_input import GraphInput
from gofs.instances import Instance

__all__ = ["road_with_travel_times", "social_with_posts", "travel_time_instances", "post_instances"]


def travel_time_instances(graph: GraphInput, hours: int, seed: int = 0, start: float = 0.0,
                          step: float = 60.0) -> list[Instance]:
    """One instance per hour ``[start + h*step, start + (h+1)*step)`` with the edge
    attribute ``travel_time`` (minutes) from :func:`goffish.generators.road_travel_times`."""
    return [Instance(start + h * step, start + (h + 1) * step, edge_values=table)
            for h, table in enumerate(road_travel_times(graph, hours, seed=seed))]


def post_instances(graph: GraphInput, intervals: int, seed: int = 0, start: float = 0.0, step: float = 60.0,
                   **posts) -> list[Instance]:
    """One instance per interval with the vertex attribute ``hashtags`` (list<string>)
    from :func:`goffish.generators.social_posts` (``posts``: its options)."""
    ids = graph.vertices.column("id")
    return [Instance(start + i * step, start + (i + 1) * step,
                     vertex_values=pa.table({"id": ids, "hashtags": table.column("hashtags")}))
            for i, table in enumerate(social_posts(graph, intervals, seed=seed, **posts))]


def road_with_travel_times(path: str, num_vertices: int, hours: int, num_partitions: int = 4, seed: int = 0,
                           start: float = 0.0, step: float = 60.0, partitioner: str = "metis",
                           overwrite: bool = False, spark=None):
    """A road-like graph (:func:`goffish.generators.road_network`) with ``hours`` hourly
    instances of ``travel_time`` (rush hours, incidents), stored at ``path``; returns its handle.

    Times are in minutes: hour h is the instance ``[start + 60h, start + 60(h+1))``.
    """
    graph = road_network(num_vertices, seed=seed)
    g = goffish.ingest(graph, path, num_partitions=num_partitions, partitioner=partitioner, overwrite=overwrite,
                       seed=seed, spark=spark)
    g.append_instances(travel_time_instances(graph, hours, seed=seed, start=start, step=step))
    return g


def social_with_posts(path: str, num_vertices: int, intervals: int, num_partitions: int = 4, seed: int = 0,
                      hashtags: int = 50, memes: int = 3, spread: float = 0.3, avg_degree: float = 10,
                      start: float = 0.0, step: float = 60.0, partitioner: str = "metis",
                      overwrite: bool = False, spark=None):
    """A social-like LFR graph (:func:`goffish.generators.lfr`) with ``intervals`` instances
    of posts (vertex attribute ``hashtags``: Zipf-popular ``#tagK`` plus memes ``#memeK``
    that spread along edges), stored at ``path``; returns its handle."""
    graph = lfr(num_vertices, avg_degree=avg_degree, max_degree=max(int(avg_degree), 50), seed=seed)
    g = goffish.ingest(graph, path, num_partitions=num_partitions, partitioner=partitioner, overwrite=overwrite,
                       seed=seed, spark=spark)
    g.append_instances(post_instances(graph, intervals, seed=seed, start=start, step=step, hashtags=hashtags,
                                      memes=memes, spread=spread))
    return g
