"""The ingest commit protocol under attack: racing writers, foreign directories, power loss.

Each test reproduces a way an unlucky scheduler or a hostile directory could
make an ingest delete or publish what it must not (issue 24, items 3 and 7).
"""
from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

import networkx as nx
import pytest

import goffish
from gofs import housekeeping, layout, manifest as manifest_io
from gofs.errors import GraphExistsError


def _tree(root: Path) -> dict:
    return {str(p.relative_to(root)): p.read_bytes() if p.is_file() else None for p in sorted(root.rglob("*"))}


def test_racing_first_ingests_the_loser_never_deletes_the_winners_graph(tmp_path, monkeypatch):
    """B reaches the target first and pauses before the lock; A creates the graph meanwhile;
    B must then fail 'already exists' and leave A's committed graph as it is."""
    target = str(tmp_path / "new.gofs")
    b_waits, a_done = threading.Event(), threading.Event()
    real_lock = manifest_io.writer_lock

    @contextlib.contextmanager
    def paused_lock(fs, root):
        if threading.current_thread().name == "B":
            b_waits.set()
            assert a_done.wait(120)
        with real_lock(fs, root) as locked:
            yield locked

    monkeypatch.setattr(manifest_io, "writer_lock", paused_lock)
    failures = []

    def writer_b():
        try:
            goffish.ingest(nx.path_graph(7), target, num_partitions=1, engine="local")
        except GraphExistsError as exc:
            failures.append(exc)

    b = threading.Thread(target=writer_b, name="B")
    b.start()
    assert b_waits.wait(120)
    try:
        goffish.ingest(nx.path_graph(5), target, num_partitions=1, engine="local")
    finally:
        a_done.set()
        b.join(120)
    assert len(failures) == 1 and "already exists" in str(failures[0])
    g = goffish.open(target)
    assert g.num_vertices == 5
    assert sorted(os.listdir(target)) == [layout.LOG, g.version]


def test_lookalike_of_an_unfinished_ingest_is_not_deleted(tmp_path):
    """A directory holding only ``_log/`` and ``v-<hex>`` folders that no GoFS writer recorded
    is someone else's: refused with and without overwrite, every byte kept."""
    target = tmp_path / "mine"
    (target / layout.LOG).mkdir(parents=True)
    (target / "v-0123456789ab" / "notes").mkdir(parents=True)
    (target / "v-0123456789ab" / "notes" / "data.txt").write_text("precious")
    before = _tree(target)
    for overwrite in (False, True):
        with pytest.raises(GraphExistsError, match="is not a GoFS graph"):
            goffish.ingest(nx.path_graph(3), str(target), num_partitions=1, overwrite=overwrite)
        assert _tree(target) == before


def test_target_refused_under_the_lock_gains_nothing(tmp_path, monkeypatch):
    """A directory that was empty when the ingest started but holds the user's file by the time
    the writer holds the lock is refused, and the writer takes its ``_log/lock`` away again."""
    target = tmp_path / "work"
    target.mkdir()
    real_check = housekeeping.check_target
    calls = []

    def check_then_user_writes(fs, root, path, overwrite):
        calls.append(path)
        if len(calls) == 2:                       # the check the writer makes holding the lock
            (target / "report.txt").write_text("mine")
        return real_check(fs, root, path, overwrite)

    monkeypatch.setattr(housekeeping, "check_target", check_then_user_writes)
    with pytest.raises(GraphExistsError, match="is not a GoFS graph"):
        goffish.ingest(nx.path_graph(3), str(target), num_partitions=1, overwrite=True)
    assert len(calls) == 2
    assert _tree(target) == {"report.txt": b"mine"}


def test_failed_first_ingest_leaves_no_directory(tmp_path):
    target = tmp_path / "new.gofs"
    with pytest.raises(ValueError, match="unknown partitioner"):
        goffish.ingest(nx.path_graph(3), str(target), num_partitions=2, partitioner="nonsense")
    assert not target.exists()


def test_commit_flushes_data_and_entry_before_publishing_it(tmp_path, monkeypatch):
    """Every data file and directory of the new version, and the entry itself, reach the disk
    before the entry is published; the log directory right after."""
    flushed, events = [], []
    real_fsync, real_publish = os.fsync, manifest_io._publish

    def recording_fsync(fd):
        flushed.append(os.readlink(f"/proc/self/fd/{fd}"))
        return real_fsync(fd)

    def recording_publish(fs, staging, final):
        events.append(("publish", len(flushed), staging))
        return real_publish(fs, staging, final)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    monkeypatch.setattr(manifest_io, "_publish", recording_publish)
    target = tmp_path / "g.gofs"
    g = goffish.ingest(nx.path_graph(6), str(target), num_partitions=2, engine="local")
    (_, before, staging), = events
    version = target / g.version
    written = [str(p) for p in version.rglob("*")] + [str(version), staging]
    assert written and set(written) <= set(flushed[:before])
    assert str(target / layout.LOG) in flushed[before:]
