"""The commit log: what a GoFS graph holds, and the one atomic step that changes it.

A graph's state is a sequence of small JSON entries, ``GRAPH/_log/00000000.json``,
``00000001.json`` ... Each entry is written once under a temporary name and then
published under its number by an operation that fails if the number is taken
(a hard link on a local disk, a file move elsewhere): that publication is the
commit. Data files are always written before the entry that mentions them, so
a reader never sees half a write, and no directory is ever renamed, so the
protocol works on HDFS and object stores through pyarrow as on a local disk.

Entries:

- ``create``: one ingest. The version directory its files live in and the
  graph's metadata (``graph``), plus the instances it starts with (only when a
  format-1 graph is migrated).
- ``append``: instances added to that version, with the instance attribute
  schema after them. An append writes O(1) bytes whatever the graph's history.

The state is the last ``create`` and the ``append`` entries after it; entries
before it are superseded and removed by the next writer. Readers that ship a
store to Spark tasks send only the graph metadata and the log position; a task
reads the instance entries only if it asks for them.

Writers of one graph are serialised by an OS lock on a local disk. Elsewhere
two writers cannot both commit the same entry (one gets
:class:`CommitConflict`), but only one writer at a time is supported.
"""
from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import uuid
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.fs as pafs

from gofs import files, layout
from gofs.errors import GoFSError, ManifestError

FORMAT = "gofs"
VERSION = 2
READABLE = (1, 2)
_ENTRY = re.compile(r"^(\d{8})\.json$")
_REQUIRED = ("name", "directed", "id_type", "num_vertices", "num_edges", "partitioner",
             "num_partitions", "partitions", "vertex_schema", "edge_schema")


class CommitConflict(GoFSError):
    """Another writer committed the log entry this writer meant to commit."""


@dataclass
class Snapshot:
    """One committed state: the manifest dict readers use, its version directory and log position."""

    manifest: dict      # graph metadata + "instances" + "instance_schema" (the format-1 manifest's keys)
    version: str        # version directory under the graph ("" for a format-1 graph)
    head: int           # number of the last log entry read (-1: format-1 graph without a log)
    create: int         # number of the create entry the state starts from (-1: format-1 graph)


# --------------------------------------------------------------------------- attribute schemas

def schema_fields(schema: pa.Schema, skip=()) -> list[dict]:
    """Attribute schema as JSON: ``{"name", "type", "arrow"}``; ``type`` is for people,
    ``arrow`` the field serialised as an Arrow IPC schema, which is what is read back."""
    out = []
    for f in schema:
        if f.name in skip:
            continue
        encoded = base64.b64encode(pa.schema([f]).serialize().to_pybytes()).decode()
        out.append({"name": f.name, "type": str(f.type), "arrow": encoded})
    return out


_FORMAT1_TYPES = {"double": pa.float64(), "float": pa.float32(), "bool": pa.bool_(), "string": pa.string(),
                  "large_string": pa.large_string(), "list<item: string>": pa.list_(pa.string()),
                  "list<element: string>": pa.list_(pa.string()), "list<item: int64>": pa.list_(pa.int64()),
                  "list<item: double>": pa.list_(pa.float64())}


def field_type(field: dict, where: str) -> pa.DataType:
    """The exact Arrow type of one schema entry (format-1 entries: from the type's name)."""
    if "arrow" in field:
        try:
            return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(field["arrow"]))).field(0).type
        except (ValueError, TypeError, pa.ArrowException) as exc:
            raise ManifestError(f"{where}: corrupt type of attribute '{field.get('name')}' ({exc})") from None
    name = field.get("type")
    if name in _FORMAT1_TYPES:
        return _FORMAT1_TYPES[name]
    try:
        return pa.type_for_alias(name)
    except (ValueError, TypeError):
        raise ManifestError(f"{where}: attribute '{field.get('name')}' has type {name!r}, which this "
                            "GoFS cannot read back; re-ingest the graph") from None


def field_types(fields: list[dict], where: str) -> dict[str, pa.DataType]:
    return {f["name"]: field_type(f, where) for f in fields}


# --------------------------------------------------------------------------- reading

def overridden(instance: dict, kind: str) -> list[str]:
    """The static ``kind`` ("vertex" or "edge") attributes of the template whose values
    ``instance`` (a log entry's instance) shadows: its value files hold a column of that name,
    complete for every row (the template's value copied where the instance changed nothing),
    which readers take instead of the template's. Entries written before overrides existed
    have none."""
    return instance.get(f"{kind}_overrides", [])


def stored_columns(instance: dict, kind: str) -> list[str]:
    """Every column ``instance``'s ``kind`` value files hold: its per-instance attributes and the
    static ones it overrides. The one rule readers follow: a name listed here is read from the
    instance's files, any other static name from the template's."""
    return [*instance[f"{kind}_attributes"], *overridden(instance, kind)]


def _check_version(document: dict, where: str) -> None:
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ManifestError(f"{where}: not a GoFS manifest (missing \"format\": \"{FORMAT}\")")
    version = document.get("version")
    if version not in READABLE:
        newer = isinstance(version, int) and version > VERSION
        raise ManifestError(f"{where}: manifest version {version!r} is not supported "
                            f"({'written by a newer GoFS; ' if newer else ''}this GoFS reads versions "
                            f"{', '.join(map(str, READABLE))})")


def _load_json(fs, path: str) -> dict:
    try:
        with fs.open_input_stream(path) as stream:
            raw = stream.read()
    except FileNotFoundError:
        raise ManifestError(f"{path}: missing; the graph was replaced or cleaned while it was being read, "
                            "open it again") from None
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ManifestError(f"{path}: corrupt manifest ({exc})") from None


def log_entries(fs, graph_root: str) -> list[tuple[int, str]]:
    """Committed entries as (number, path), oldest first; temporary files are not entries."""
    found = []
    for info in layout.listing(fs, layout.join(graph_root, layout.LOG)):
        match = _ENTRY.match(info.base_name)
        if match and info.type == pafs.FileType.File:
            found.append((int(match.group(1)), info.path))
    return sorted(found)


def is_graph(fs, graph_root: str) -> bool:
    """True if ``graph_root`` holds a committed GoFS graph (either format)."""
    return bool(log_entries(fs, graph_root)) or layout.exists(fs, layout.join(graph_root, layout.LEGACY_MANIFEST))


def read(fs, graph_root: str) -> Snapshot:
    """The committed state of the graph at ``graph_root``."""
    info = fs.get_file_info(graph_root)
    if info.type == pafs.FileType.NotFound:
        raise ManifestError(f"{graph_root}: no such GoFS graph")
    if info.type != pafs.FileType.Directory:
        raise ManifestError(f"{graph_root}: is a file, not a GoFS graph directory")
    for attempt in range(_READ_ATTEMPTS):
        entries = log_entries(fs, graph_root)
        if not entries:
            break
        try:
            return _replay(fs, graph_root, entries)
        except _Superseded:
            if attempt == _READ_ATTEMPTS - 1:
                raise ManifestError(f"{graph_root}: the commit log kept changing while it was read; "
                                    "open the graph again") from None
    legacy = layout.join(graph_root, layout.LEGACY_MANIFEST)
    if not layout.exists(fs, legacy):
        raise ManifestError(f"{graph_root}: not a GoFS graph (no committed {layout.LOG}/ entry and no "
                            f"{layout.LEGACY_MANIFEST})")
    return read_format1(fs, legacy)


class _Superseded(Exception):
    """A listed log entry was removed (superseded by a later create) before it was read."""


_READ_ATTEMPTS = 5


def read_format1(fs, path: str) -> Snapshot:
    manifest = _load_json(fs, path)
    _check_version(manifest, path)
    _check_fields(manifest, path, _REQUIRED + ("instances",))
    _check_instance_ids(manifest["instances"], path)
    manifest.setdefault("instance_schema", {"vertex": [], "edge": []})
    return Snapshot(manifest=manifest, version="", head=-1, create=-1)


def _check_fields(document: dict, where: str, required) -> None:
    missing = [k for k in required if k not in document]
    if missing:
        raise ManifestError(f"{where}: corrupt manifest, missing field(s) {', '.join(missing)}")


def _check_data(entry: dict, where: str) -> None:
    """An entry's ``data`` becomes a directory readers read and writers clean: only a version name
    of this graph (``v-<12 hex>``, or "" for a format-1 graph) is accepted, never a path."""
    if not layout.is_version(entry.get("data")):
        raise ManifestError(f"{where}: corrupt manifest, field \"data\" is {entry.get('data')!r}, not a "
                            "version directory of this graph (v-<12 hex digits>); refusing to read outside it")


def _check_instance_ids(instances, where: str) -> None:
    """Instance ids become directory names (``i-<id>``): only integers >= 0 are accepted."""
    if not isinstance(instances, list) or not all(isinstance(i, dict) for i in instances):
        raise ManifestError(f"{where}: corrupt manifest, field \"instances\" is not a list of instances")
    for instance in instances:
        if not layout.is_instance_id(instance.get("id")):
            raise ManifestError(f"{where}: corrupt manifest, instance id {instance.get('id')!r} is not an "
                                "integer >= 0")


def _replay(fs, graph_root: str, entries: list[tuple[int, str]]) -> Snapshot:
    """Walk back to the last create entry, then apply the appends after it."""
    appends = []
    for number, path in reversed(entries):
        try:
            entry = _load_json(fs, path)
        except ManifestError:
            if not layout.exists(fs, path):
                raise _Superseded(path) from None
            raise
        _check_version(entry, path)
        op = entry.get("op")
        if op == "append":
            appends.append((path, entry))
            continue
        if op != "create":
            raise ManifestError(f"{path}: corrupt manifest, unknown operation {op!r}")
        _check_fields(entry, path, ("graph", "data"))
        _check_data(entry, path)
        _check_fields(entry["graph"], path, _REQUIRED)
        _check_instance_ids(entry.get("instances", []), path)
        manifest = dict(entry["graph"])
        manifest["instances"] = list(entry.get("instances", []))
        manifest["instance_schema"] = entry.get("instance_schema", {"vertex": [], "edge": []})
        for append_path, append in reversed(appends):
            if append.get("data") != entry["data"]:
                raise ManifestError(f"{append_path}: corrupt manifest, appends to version "
                                    f"{append.get('data')!r} but the graph is version {entry['data']!r}")
            _check_fields(append, append_path, ("instances", "instance_schema"))
            _check_instance_ids(append["instances"], append_path)
            manifest["instances"].extend(append["instances"])
            manifest["instance_schema"] = append["instance_schema"]
        return Snapshot(manifest=manifest, version=entry["data"], head=entries[-1][0], create=number)
    raise ManifestError(f"{layout.join(graph_root, layout.LOG)}: corrupt manifest, no create entry")


# --------------------------------------------------------------------------- writing

COMPACT_AFTER = 256     # appends after a create before they are folded into a new create entry

def commit(fs, graph_root: str, number: int, entry: dict, durable=()) -> None:
    """Publish ``entry`` as log entry ``number``: the single atomic step of every write.

    ``durable``: the directories of the data the entry commits. On a local disk
    they and the entry are flushed to the device before the entry is published,
    and the log directory after, so a power loss never leaves a committed entry
    naming files that are not on disk. Raises :class:`CommitConflict` if another
    writer published that number first.
    """
    log = layout.join(graph_root, layout.LOG)
    fs.create_dir(log, recursive=True)
    final = layout.join(log, f"{number:08d}.json")
    staging = layout.join(log, f".tmp-{uuid.uuid4().hex[:12]}.json")
    document = {"format": FORMAT, "version": VERSION, **entry}
    with fs.open_output_stream(staging) as stream:
        stream.write(json.dumps(document, indent=1).encode())
    try:
        files.sync(fs, [*durable, staging])
        _publish(fs, staging, final)
        files.sync(fs, [final])         # the entry is flushed already: this flushes the log directory
    finally:
        layout.remove(fs, staging)


def _publish(fs, staging: str, final: str) -> None:
    """Make ``staging`` visible as ``final`` in one step, never replacing an existing ``final``."""
    if layout.is_local(fs):
        try:
            os.link(staging, final)
        except FileExistsError:
            raise CommitConflict(f"{final}: another writer committed this entry first") from None
        return
    if layout.exists(fs, final):
        raise CommitConflict(f"{final}: another writer committed this entry first")
    fs.move(staging, final)


LOCK = "lock"


@contextlib.contextmanager
def writer_lock(fs, graph_root: str):
    """Serialise the writers of one graph; yields True if a lock is held.

    On a local disk: an exclusive ``flock`` on ``GRAPH/_log/lock``, released by
    the OS if the process dies. A writer that undoes a failed first ingest
    removes the lock file while holding it; a waiter that then gets the lock on
    the removed file takes it again on the file now at that path.
    Elsewhere no lock is taken (yields False).
    """
    if not layout.is_local(fs):
        yield False
        return
    import fcntl

    log = layout.join(graph_root, layout.LOG)
    path = layout.join(log, LOCK)
    while True:
        os.makedirs(log, exist_ok=True)
        handle = open(path, "a+b")
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            if os.stat(path).st_ino == os.fstat(handle.fileno()).st_ino:
                break
        except FileNotFoundError:
            pass
        handle.close()
    with handle:
        try:
            yield True
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def compact_if_due(fs, graph_root: str, snapshot: Snapshot) -> Snapshot:
    """Fold the create entry and its appends into one new create entry once there are
    :data:`COMPACT_AFTER` appends, so that opening a graph reads a bounded number of entries
    (the superseded ones are removed by the writer's clean-up). Returns the state after."""
    if snapshot.head - snapshot.create < COMPACT_AFTER:
        return snapshot
    manifest = snapshot.manifest
    graph = {k: v for k, v in manifest.items() if k not in ("format", "version", "instances", "instance_schema")}
    try:
        commit(fs, graph_root, snapshot.head + 1, {"op": "create", "data": snapshot.version, "graph": graph,
                                                    "instances": manifest["instances"],
                                                    "instance_schema": manifest["instance_schema"]})
    except CommitConflict:
        return read(fs, graph_root)
    return Snapshot(manifest=manifest, version=snapshot.version, head=snapshot.head + 1, create=snapshot.head + 1)
