"""What a writer may replace, and removing what no committed entry refers to.

A GoFS writer deletes only things that are provably its own: a directory that
holds a committed GoFS graph (when asked to overwrite), version directories
and instance directories of that graph that the committed state no longer
mentions, and the graph's own temporary files. Anything else at a target path
(a file, a working directory, another program's output) is refused.
"""
from __future__ import annotations

import re

import pyarrow.fs as pafs

from gofs import layout, manifest as manifest_io
from gofs.errors import GraphExistsError

# Hidden siblings that format-1 ingest staged a graph in (".NAME.tmp-<12 hex>").
_FORMAT1_STAGING = re.compile(r"^\.(.+)\.tmp-[0-9a-f]{12}$")


def classify(fs, graph_root: str) -> str:
    """"missing", "file", "empty", "graph" (committed GoFS graph), "unfinished" (only the
    leftovers of a GoFS ingest that never committed), or "other".

    Leftovers are an ingest's only if the log says so: ``_log/`` holds nothing but the
    lock and writers' temporary files, and each ``v-<token>`` directory has its
    :func:`version_record` there. Folders that merely look like versions are someone else's.
    """
    info = fs.get_file_info(graph_root)
    if info.type == pafs.FileType.NotFound:
        return "missing"
    if info.type != pafs.FileType.Directory:
        return "file"
    if manifest_io.is_graph(fs, graph_root):
        return "graph"
    children = layout.listing(fs, graph_root)
    if not children:
        return "empty"
    log = {c.base_name for c in layout.listing(fs, layout.join(graph_root, layout.LOG))}
    ours = all(name == manifest_io.LOCK or name.startswith(".tmp-") for name in log)
    for child in children:
        if child.base_name == layout.LOG:
            ours = ours and child.type == pafs.FileType.Directory
        else:
            ours = ours and bool(layout.VERSION_PATTERN.match(child.base_name)) \
                and f".tmp-{child.base_name}" in log
    return "unfinished" if ours else "other"


def version_record(graph_root: str, version: str) -> str:
    """The log's note that ``version`` is being written by an ingest: a writer's temporary file,
    removed with the version if the ingest fails and by the clean-up after a commit."""
    return layout.join(graph_root, layout.LOG, f".tmp-{version}")


def check_target(fs, graph_root: str, path: str, overwrite: bool) -> str:
    """Refuse a target that is not ours to write; returns its :func:`classify` kind."""
    kind = classify(fs, graph_root)
    if kind == "file":
        raise GraphExistsError(f"{path} is a file, not a GoFS graph; refusing to replace it")
    if kind == "other":
        raise GraphExistsError(f"{path} exists and is not a GoFS graph (no committed {layout.LOG}/ entry or "
                               f"{layout.LEGACY_MANIFEST}, nor what a GoFS ingest leaves); refusing to "
                               f"{'replace' if overwrite else 'write into'} it")
    if kind == "graph" and not overwrite:
        raise GraphExistsError(f"{path} already exists (pass overwrite=True / --overwrite to replace it)")
    return kind


def clean(fs, graph_root: str, snapshot: manifest_io.Snapshot) -> None:
    """Remove what the committed ``snapshot`` does not refer to. Call only while holding the writer lock."""
    log = layout.join(graph_root, layout.LOG)
    for info in layout.listing(fs, log):
        if info.base_name.startswith(".tmp-"):
            layout.remove(fs, info.path)
    for info in layout.listing(fs, graph_root):
        if layout.VERSION_PATTERN.match(info.base_name) and info.base_name != snapshot.version:
            layout.remove(fs, info.path)
    if snapshot.version and layout.exists(fs, layout.join(graph_root, layout.LEGACY_MANIFEST)):
        for name in ("template", "instances", layout.LEGACY_MANIFEST):   # a replaced format-1 graph
            layout.remove(fs, layout.join(graph_root, name))
    committed = {f"i-{i['id']:06d}" for i in snapshot.manifest["instances"]}
    root = layout.version_root(graph_root, snapshot.version)
    for info in layout.listing(fs, layout.join(root, "instances")):
        if info.base_name not in committed:      # orphans of killed writers, format-1 ".batch-*" staging
            layout.remove(fs, info.path)
    for number, path in manifest_io.log_entries(fs, graph_root):
        if number < snapshot.create:
            layout.remove(fs, path)
    _clean_format1_staging(fs, graph_root)


def _clean_format1_staging(fs, graph_root: str) -> None:
    """Format-1 ingest left ``.NAME.tmp-*`` siblings when killed; remove those holding a GoFS manifest."""
    parent, _, name = graph_root.rstrip("/").rpartition("/")
    for info in layout.listing(fs, parent or "/"):
        match = _FORMAT1_STAGING.match(info.base_name)
        if match and match.group(1) == name and info.type == pafs.FileType.Directory \
                and layout.exists(fs, layout.join(info.path, layout.LEGACY_MANIFEST)):
            layout.remove(fs, info.path)


def next_instance_id(fs, root: str, snapshot: manifest_io.Snapshot) -> int:
    """One past every committed instance id and every instance directory present (never reuse a name)."""
    ids = [i["id"] for i in snapshot.manifest["instances"]]
    for info in layout.listing(fs, layout.join(root, "instances")):
        match = layout.INSTANCE_PATTERN.match(info.base_name)
        if match:
            ids.append(int(match.group(1)))
    return max(ids) + 1 if ids else 0


_SPARK_OUTPUT = re.compile(r"^(_SUCCESS|\._SUCCESS\.crc|_temporary|\.?part-.*)$")


def check_result_target(out: str, graph: str, overwrite: bool) -> None:
    """Refuse a result path that is the graph, lies inside it or holds it, or exists and is
    not a Spark result directory (``_SUCCESS``, ``part-*`` files, one level of such folders)."""
    fs, root = layout.filesystem(out)
    graph_fs, graph_root = layout.filesystem(graph)
    if type(fs) is type(graph_fs):
        a, b = root.rstrip("/") + "/", graph_root.rstrip("/") + "/"
        if a.startswith(b) or b.startswith(a):
            raise GraphExistsError(f"--out {out} {'is' if a == b else 'overlaps'} the graph {graph}; "
                                   "results are never written into or over a graph")
    kind = fs.get_file_info(root).type
    if kind == pafs.FileType.NotFound:
        return
    if kind != pafs.FileType.Directory or not _is_result_dir(fs, root, depth=1):
        raise GraphExistsError(f"{out} exists and is not a result directory written by goffish run; "
                               "refusing to replace it")
    if not overwrite and layout.listing(fs, root):
        raise GraphExistsError(f"{out} already exists (pass --overwrite to replace it)")


def _is_result_dir(fs, root: str, depth: int) -> bool:
    for info in layout.listing(fs, root):
        if info.type == pafs.FileType.Directory and info.base_name != "_temporary":
            if depth == 0 or not _is_result_dir(fs, info.path, depth - 1):
                return False
        elif not _SPARK_OUTPUT.match(info.base_name):
            return False
    return True
