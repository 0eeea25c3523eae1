"""Where things live inside a GoFS graph directory.

    GRAPH/_log/00000000.json                     commit log: write-once entries, the last one wins
    GRAPH/_log/lock                              writer lock (local filesystems)
    GRAPH/v-<token>/template/vertices/part-00000.parquet  vid, id, sg, static vertex attributes
    GRAPH/v-<token>/template/edges/part-00000.parquet     eid, src, dst, remote, mirror, dst_part, dst_sg, ...
    GRAPH/v-<token>/template/subgraphs.parquet            one row per sub-graph: partition and sizes
    GRAPH/v-<token>/template/metagraph.parquet            sub-graph adjacency: (sg, nbr_sg, edges)
    GRAPH/v-<token>/instances/i-000000/vertices/part-00000.parquet  instance vertex values, row-aligned
    GRAPH/v-<token>/instances/i-000000/edges/part-00000.parquet     instance edge values, row-aligned
    GRAPH/v-<token>/instances/i-000000/topology.parquet             edges added/removed in the instance
    GRAPH/v-<token>/instances/i-000000/added_vertices.parquet       vertices beyond the template: vid, id
    GRAPH/v-<token>/instances/i-000000/vertex_registry.parquet      every such vertex so far (when it grew)

``v-<token>`` is one *version* of the graph (one ingest); a re-ingest with
overwrite writes a new version beside the old one. Nothing is ever renamed:
data files are written first, under names no committed entry mentions yet,
and a commit is one new small file in ``_log`` (see :mod:`gofs.manifest`).
That works the same on a local disk, HDFS and object stores.

Graphs written by GoFS format 1 keep ``manifest.json``, ``template/`` and
``instances/`` directly under GRAPH; their version directory is GRAPH itself.
The path helpers below take the version directory (``GraphStore.root``).
"""
from __future__ import annotations

import os
import re
import urllib.parse

import pyarrow.fs as pafs

from gofs.errors import InputError

LOG = "_log"
LEGACY_MANIFEST = "manifest.json"
VERSION_PATTERN = re.compile(r"^v-[0-9a-f]{12}$")
INSTANCE_PATTERN = re.compile(r"^i-(\d{6,})$")


def filesystem(path: str) -> tuple[pafs.FileSystem, str]:
    """Resolve a local path or a URI (hdfs://, s3://, file://, and Spark's ``file:/path``) to
    (filesystem, path)."""
    if path.startswith("file:") and not path.startswith("file://"):
        return pafs.LocalFileSystem(), urllib.parse.unquote(path[len("file:"):])
    if "://" in path:
        return pafs.FileSystem.from_uri(path)
    return pafs.LocalFileSystem(), os.path.abspath(path)


def is_local(fs: pafs.FileSystem) -> bool:
    """True for the local disk: only there do writers take an OS file lock."""
    return isinstance(fs, pafs.LocalFileSystem)


def join(*parts: str) -> str:
    return "/".join(p.rstrip("/") for p in parts if p != "")


def part_file(p: int) -> str:
    return f"part-{p:05d}.parquet"


def is_version(name) -> bool:
    """Whether ``name`` may name a version directory: "" (a format-1 graph) or ``v-<12 hex>``.
    Names read from a log entry are checked with it, so no entry can point outside the graph."""
    return name == "" or (isinstance(name, str) and VERSION_PATTERN.match(name) is not None)


def is_instance_id(value) -> bool:
    """Whether ``value`` may name an instance directory (``i-<id>``): an integer >= 0."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def version_root(graph_root: str, version: str) -> str:
    """The directory of one version's template and instances ("" = a format-1 graph)."""
    if not is_version(version):
        raise InputError(f"{version!r} is not a GoFS version directory name")
    return join(graph_root, version) if version else graph_root


def template_vertices(root: str, p: int) -> str:
    return join(root, "template", "vertices", part_file(p))


def template_edges(root: str, p: int) -> str:
    return join(root, "template", "edges", part_file(p))


def instance_dir(root: str, instance_id: int) -> str:
    if not is_instance_id(instance_id):
        raise InputError(f"{instance_id!r} is not a GoFS instance id")
    return join(root, "instances", f"i-{instance_id:06d}")


def instance_vertices(root: str, instance_id: int, p: int) -> str:
    return join(instance_dir(root, instance_id), "vertices", part_file(p))


def instance_edges(root: str, instance_id: int, p: int) -> str:
    return join(instance_dir(root, instance_id), "edges", part_file(p))


def instance_topology(root: str, instance_id: int) -> str:
    return join(instance_dir(root, instance_id), "topology.parquet")


def instance_added_vertices(root: str, instance_id: int) -> str:
    return join(instance_dir(root, instance_id), "added_vertices.parquet")


def instance_vertex_registry(root: str, instance_id: int) -> str:
    return join(instance_dir(root, instance_id), "vertex_registry.parquet")


def exists(fs: pafs.FileSystem, path: str) -> bool:
    return fs.get_file_info(path).type != pafs.FileType.NotFound


def listing(fs: pafs.FileSystem, path: str) -> list[pafs.FileInfo]:
    """Direct children of ``path`` (none if it does not exist)."""
    if fs.get_file_info(path).type != pafs.FileType.Directory:
        return []
    return fs.get_file_info(pafs.FileSelector(path, recursive=False))


def remove(fs: pafs.FileSystem, path: str) -> None:
    info = fs.get_file_info(path)
    if info.type == pafs.FileType.Directory:
        fs.delete_dir(path)
    elif info.type == pafs.FileType.File:
        fs.delete_file(path)
