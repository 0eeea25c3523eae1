"""The commit protocol of an ingest, shared by both engines.

A graph is written as a new version directory inside the target and committed
by one small log entry (:mod:`gofs.manifest`); a failure before the commit
removes only what this writer made, so nothing half-written is left and
nothing else is touched.
"""
from __future__ import annotations

import os
import uuid

from gofs import housekeeping, layout, manifest as manifest_io


def write_version(fs, root: str, path: str, overwrite: bool, write_files) -> dict:
    """Write a new version directory with ``write_files(data_dir) -> graph metadata`` and commit it.

    The one commit protocol both ingest engines share: take the writer lock,
    decide what the target is (only now: another writer may have committed
    meanwhile), record the new ``v-<token>`` directory as this writer's in the
    log (so a killed ingest's leftovers are known to be ours), let
    ``write_files`` write the template there (from the driver, or from Spark
    tasks), commit one ``create`` log entry, then clean what the new state no
    longer refers to. A failure before the commit removes only what this call
    created: its version directory and record, and the target directory (or
    its ``_log/``) if this call made it and nothing else arrived there.
    Returns the committed manifest.
    """
    version = f"v-{uuid.uuid4().hex[:12]}"
    data = layout.version_root(root, version)
    record = housekeeping.version_record(root, version)
    made_root = _make_dir(fs, root)
    made_log = _make_dir(fs, layout.join(root, layout.LOG))
    committed = False
    with manifest_io.writer_lock(fs, root) as locked:
        try:
            kind = housekeeping.check_target(fs, root, path, overwrite)
            previous = manifest_io.read(fs, root) if kind == "graph" else None
            with fs.open_output_stream(record):
                pass
            fs.create_dir(data, recursive=True)
            metadata = {"uuid": uuid.uuid4().hex, **write_files(data)}
            number = 0 if previous is None else previous.head + 1
            manifest_io.commit(fs, root, number, {"op": "create", "data": version, "graph": metadata,
                                                  "instance_schema": {"vertex": [], "edge": []}},
                               durable=[data])
            committed = True
            snapshot = manifest_io.read(fs, root)
            if locked:
                housekeeping.clean(fs, root, snapshot)
            elif previous is not None and previous.version:
                layout.remove(fs, layout.version_root(root, previous.version))
        except BaseException:
            if not committed:
                _remove_own(fs, root, data, record, made_root, made_log)
            raise
    return snapshot.manifest


def _make_dir(fs, path: str) -> bool:
    """Create ``path`` (and its parents); True only if this call created ``path`` itself.

    On a local disk ``mkdir`` says so atomically, whoever races; elsewhere the
    answer is a look before the creation (one writer at a time is supported there).
    """
    if layout.is_local(fs):
        os.makedirs(os.path.dirname(path.rstrip("/")), exist_ok=True)
        try:
            os.mkdir(path)
            return True
        except FileExistsError:
            return False
    made = not layout.exists(fs, path)
    fs.create_dir(path, recursive=True)
    return made


def _remove_own(fs, root: str, data: str, record: str, made_root: bool, made_log: bool) -> None:
    """Undo a failed write, holding the writer lock: the version directory and its record, then
    ``_log/`` and the target if this writer made them and they hold nothing of anyone else."""
    layout.remove(fs, data)
    layout.remove(fs, record)
    log = layout.join(root, layout.LOG)
    if made_log and {c.base_name for c in layout.listing(fs, log)} <= {manifest_io.LOCK}:
        layout.remove(fs, log)
    if made_root and not layout.listing(fs, root):
        layout.remove(fs, root)
