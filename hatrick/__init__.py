"""Hatrick: streaming graph updates on a GoFS graph.

Start from ``goffish.open(path).stream()`` (:class:`hatrick.stream.Stream`). Modules, bottom up:
``updates`` (the update model and row checks), ``ring`` (stable hashing, buckets, consistent-hash
ring), ``buckets`` (the bucket function: hashed, or aligned with the GoFS partitions), ``planner`` (state-aware migration plans, rescale policy), ``live`` (the copy-on-write live
graph, incremental components, reachability, ``GraphView``), ``partitioned`` (the live graph
split over bucket-owning workers: routing, boundary merges, moving buckets between workers),
``buffer`` (the elastic buffer and
snapshot policy), ``snapshot`` (live state -> GoFS instance), ``sources`` (Structured Streaming
sources, aging), ``stream`` (exactly-once application, checkpoints, callbacks, rescaling).
The streaming benchmark is ``benchmarks/bench_hatrick.py``.
"""
