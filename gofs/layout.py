"""Where things live inside a GoFS graph directory, and atomic commits.

    GRAPH/manifest.json                         versioned manifest (the commit point)
    GRAPH/template/vertices/part-00000.parquet  vid, id, sg, static vertex attributes
    GRAPH/template/edges/part-00000.parquet     eid, src, dst, remote, mirror, dst_part, dst_sg, ...
    GRAPH/template/subgraphs.parquet            one row per sub-graph: partition and sizes
    GRAPH/template/metagraph.parquet            sub-graph adjacency: (sg, nbr_sg, edges)
    GRAPH/instances/i-000000/vertices/part-00000.parquet   instance vertex values, row-aligned
    GRAPH/instances/i-000000/edges/part-00000.parquet      instance edge values, row-aligned
    GRAPH/instances/i-000000/topology.parquet              edges added/removed in the instance

Everything is written under a temporary name first and moved into place in one
rename, so a reader never sees a half-written graph or instance.
"""
from __future__ import annotations

import uuid

import pyarrow.fs as pafs

MANIFEST = "manifest.json"


def filesystem(path: str) -> tuple[pafs.FileSystem, str]:
    """Resolve a local path or a URI (hdfs://, s3://, file://) to (filesystem, path)."""
    if "://" in path:
        return pafs.FileSystem.from_uri(path)
    import os

    return pafs.LocalFileSystem(), os.path.abspath(path)


def join(*parts: str) -> str:
    return "/".join(p.rstrip("/") for p in parts)


def part_file(p: int) -> str:
    return f"part-{p:05d}.parquet"


def template_vertices(root: str, p: int) -> str:
    return join(root, "template", "vertices", part_file(p))


def template_edges(root: str, p: int) -> str:
    return join(root, "template", "edges", part_file(p))


def instance_dir(root: str, instance_id: int) -> str:
    return join(root, "instances", f"i-{instance_id:06d}")


def instance_vertices(root: str, instance_id: int, p: int) -> str:
    return join(instance_dir(root, instance_id), "vertices", part_file(p))


def instance_edges(root: str, instance_id: int, p: int) -> str:
    return join(instance_dir(root, instance_id), "edges", part_file(p))


def instance_topology(root: str, instance_id: int) -> str:
    return join(instance_dir(root, instance_id), "topology.parquet")


def exists(fs: pafs.FileSystem, path: str) -> bool:
    return fs.get_file_info(path).type != pafs.FileType.NotFound


def temporary_sibling(path: str) -> str:
    """A hidden name beside ``path`` to stage a write before its atomic move."""
    head, _, tail = path.rstrip("/").rpartition("/")
    return join(head, f".{tail}.tmp-{uuid.uuid4().hex[:12]}")


def remove(fs: pafs.FileSystem, path: str) -> None:
    info = fs.get_file_info(path)
    if info.type == pafs.FileType.Directory:
        fs.delete_dir(path)
    elif info.type == pafs.FileType.File:
        fs.delete_file(path)
