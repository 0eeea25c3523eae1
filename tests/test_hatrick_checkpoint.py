"""The exactly-once checkpoint without Spark: per-batch logs written while the batch is applied,
full states written in the background, and what a restart reads back in each case; and the
live graph's edge slots, which are reused so the state stays the size of the live graph."""
import os

import numpy as np
import pandas as pd
import pytest

from gofs.errors import InputError
from hatrick.live import apply_batch, build_state, components_frame, components_from_scratch, edge_frame
from hatrick.checkpoint import Checkpoint, empty_buffer_summary
from hatrick.updates import validate
from hatrick_reference import Reference, live_edge_counts, live_partition

N = 40
BUFFER = empty_buffer_summary(4)


def random_batches(seed, count, size):
    """Batches of edge adds/removes, set_edge and vertex ops on N vertices (some get rejected)."""
    rng = np.random.default_rng(seed)
    seq = 0
    for _ in range(count):
        rows = []
        for _ in range(size):
            seq += 1
            op = str(rng.choice(["add_edge", "remove_edge", "set_edge", "remove_vertex", "add_vertex"],
                                p=[0.45, 0.35, 0.1, 0.05, 0.05]))
            row = {"op": op, "producer": "p", "seq": seq, "time": float(seq), "src": int(rng.integers(N)),
                   "dst": int(rng.integers(N)), "id": int(rng.integers(N))}
            if op == "set_edge":
                row["attribute"], row["value"] = "w", float(rng.integers(5))
            rows.append(row)
        yield validate(rows, "int64")[0]


def same_graph(a, b):
    assert live_edge_counts(edge_frame(a), a.directed) == live_edge_counts(edge_frame(b), b.directed)
    assert (a.comp == b.comp).all() and (a.alive == b.alive).all()
    pd.testing.assert_frame_equal(edge_frame(a).sort_values(["src", "dst"]).reset_index(drop=True),
                                  edge_frame(b).sort_values(["src", "dst"]).reset_index(drop=True))


def start(tmp_path, full_every):
    rng = np.random.default_rng(1)
    state = build_state(np.arange(N), rng.integers(0, N, 60), rng.integers(0, N, 60), directed=False)
    ck = Checkpoint(str(tmp_path / "ck"), full_every)
    ck.commit(ck.begin(1, None, {}, BUFFER), state, {}, BUFFER)       # the first commit writes the base
    return ck, state


def push(ck, state, batch):
    pending = ck.begin(state.batch + 1, batch, {"p": int(batch.seq.max())}, BUFFER)
    new, _ = apply_batch(state, batch)
    ck.commit(pending, new, {"p": int(batch.seq.max())}, BUFFER)
    return new


def test_restart_reads_every_committed_batch_while_full_states_are_written_behind(tmp_path):
    ck, state = start(tmp_path, full_every=3)
    for batch in random_batches(0, 12, 15):
        state = push(ck, state, batch)
        restored = Checkpoint(ck.directory, 3).load()     # possibly while a full write is in flight
        assert restored["state"].batch == state.batch and restored["hwm"] == {"p": int(batch.seq.max())}
        same_graph(restored["state"], state)
    ck.wait()
    logs = [n for n in os.listdir(ck.directory) if n.startswith("hatrick-batch-")]
    assert len(logs) < 3                                   # the full state covers the rest


def test_failed_full_write_is_reported_and_loses_nothing(tmp_path, monkeypatch):
    ck, state = start(tmp_path, full_every=2)
    batches = list(random_batches(1, 4, 10))

    def broken(*args):
        raise OSError("disk full")

    monkeypatch.setattr(ck, "_write_manifest", broken)
    state = push(ck, state, batches[0])
    state = push(ck, state, batches[1])                   # starts the (failing) background full write
    ck.wait()
    with pytest.raises(InputError, match="writing the full checkpoint failed: OSError"):
        ck.begin(state.batch + 1, batches[2], {}, BUFFER)
    same_graph(Checkpoint(ck.directory, 2).load()["state"], state)   # the logs are all still there


def test_abandoned_batch_leaves_no_log_and_a_failing_last_log_is_dropped(tmp_path):
    ck, state = start(tmp_path, full_every=50)
    batches = list(random_batches(2, 3, 10))
    state = push(ck, state, batches[0])
    ck.abandon(ck.begin(state.batch + 1, batches[1], {}, BUFFER))      # apply failed: not committed
    assert Checkpoint(ck.directory).load()["state"].batch == state.batch
    bad = batches[2].take(np.arange(len(batches[2])))
    bad.b = bad.b[:1]                                            # rows that do not line up: apply fails
    ck.begin(state.batch + 1, bad, {}, BUFFER).result()         # a crash kept a log that cannot apply
    restored = Checkpoint(ck.directory).load()
    assert restored["state"].batch == state.batch and not os.path.exists(ck._log(state.batch + 1))
    same_graph(restored["state"], state)


def test_edge_slots_are_reused_and_carry_nothing_over():
    rng = np.random.default_rng(3)
    src, dst = rng.integers(0, 200, 300), rng.integers(0, 200, 300)
    state = build_state(np.arange(200), src, dst, directed=False)
    ref = Reference(range(200), zip(src.tolist(), dst.tolist()))
    seq, peak = 0, len(state.key_index())
    for _ in range(15):                                    # FIFO-like churn: every batch replaces 100 edges
        present = np.array([ref.edges[k][2] for k in ref.edges if ref.edges[k][0] > 0], dtype=np.int64)
        drop = present[rng.choice(len(present), 100, replace=False)]
        add = rng.integers(0, 200, (100, 2))
        frame = pd.DataFrame({"op": ["remove_edge"] * 100 + ["add_edge"] * 100 + ["set_edge"] * 100,
                              "src": np.r_[drop[:, 0], add[:, 0], add[:, 0]],
                              "dst": np.r_[drop[:, 1], add[:, 1], add[:, 1]], "attribute": "w",
                              "value": np.r_[np.full(200, None), np.arange(100.0)], "producer": "p",
                              "seq": np.arange(seq, seq + 300), "time": np.arange(seq, seq + 300, dtype=float)})
        seq += 300
        for row in frame.to_dict("records"):
            assert ref.apply({k: v for k, v in row.items() if v is not None}) is None
        state, outcome = apply_batch(state, validate(frame, "int64")[0])
        assert outcome.rejected.empty
        peak = max(peak, len(state.key_index()))
        assert len(state.src) <= peak + 100                # not one slot per key ever seen (that is 1800)
        assert (state.mult[state.key_index().items()[1]] > 0).all() and (state.mult[state.free] == 0).all()
        assert not state.eattrs["w"].present[state.free].any()
        edges = edge_frame(state)
        assert live_edge_counts(edges, False) == ref.edge_counts()
        for u, v, w in zip(edges.src, edges.dst, edges.w):   # a reused slot shows only its own key's value
            assert ref.edges[frozenset((u, v))][1].get("w", np.nan) == w or (
                np.isnan(w) and "w" not in ref.edges[frozenset((u, v))][1])
        assert live_partition(components_frame(state)) == ref.partition()
        assert (state.comp == components_from_scratch(state)).all()


class _Planted:
    """A pickle that runs a shell command when loaded."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def plant(directory, name, marker):
    import pickle

    directory.mkdir(mode=0o700, exist_ok=True)
    (directory / name).write_bytes(pickle.dumps({"format": 2, "state": _Planted(marker)}))


@pytest.mark.parametrize("name", ["hatrick-checkpoint.pkl", "hatrick-checkpoint.data",
                                  "hatrick-batch-000000000002.data"])
def test_a_planted_pickle_is_never_loaded(tmp_path, name):
    directory, marker = tmp_path / "ck", tmp_path / "pwned"
    if name.startswith("hatrick-batch"):
        ck, state = start(tmp_path, full_every=50)       # a real base, then a planted log after it
    plant(directory, name, marker)
    with pytest.raises(InputError, match="pickle|not a hatrick data file"):
        Checkpoint(str(directory)).load()
    assert not marker.exists()


def test_a_directory_others_can_write_or_own_is_refused_before_reading_it(tmp_path, monkeypatch):
    shared, marker = tmp_path / "shared", tmp_path / "pwned"
    plant(shared, "hatrick-checkpoint.data", marker)
    shared.chmod(0o777)
    with pytest.raises(InputError, match="shared.*writable by group or others .mode 0777.*refused"):
        Checkpoint(str(shared))
    theirs = tmp_path / "theirs"
    plant(theirs, "hatrick-checkpoint.data", marker)
    if os.geteuid() == 0:
        os.chown(theirs, 65534, 65534)
    else:
        monkeypatch.setattr(os, "geteuid", lambda: os.stat(theirs).st_uid + 1)
    with pytest.raises(InputError, match="theirs.*is owned by uid .*not by this user.*refused"):
        Checkpoint(str(theirs))
    assert not marker.exists()


def test_a_new_checkpoint_directory_is_private_and_its_files_are_data(tmp_path):
    ck, state = start(tmp_path, full_every=1)
    for batch in random_batches(4, 3, 10):
        state = push(ck, state, batch)
    ck.wait()
    assert os.stat(ck.directory).st_mode & 0o777 == 0o700
    for name in os.listdir(ck.directory):
        with open(os.path.join(ck.directory, name), "rb") as f:
            assert f.read(15) == b"HATRICK-DATA-1\n"
    same_graph(Checkpoint(ck.directory).load()["state"], state)


def test_workers_write_their_state_files_and_the_manifest_follows_once_all_are_in_place(tmp_path, monkeypatch):
    """A partitioned graph's workers write their full-state files themselves (on threads, reported
    with their next commit); only then is the manifest naming them written, and it replaces the
    logs and older state files. Files of a full state whose manifest never came are ignored by a
    restart, which equals the graph after every committed batch. The last batch's background
    writes are held until the loop is over (a write that finished before its own batch's commit
    would otherwise be reported with it, on a loaded machine)."""
    import threading

    from hatrick import partitioned
    from hatrick.partitioned import PartitionedGraph

    last_batch_done = threading.Event()
    write = partitioned.write_state_file

    def held_write(path, state):
        if os.path.basename(path).split("-")[2] == f"{7:012d}":
            last_batch_done.wait(60)
        write(path, state)

    monkeypatch.setattr(partitioned, "write_state_file", held_write)

    rng = np.random.default_rng(5)
    base = build_state(np.arange(N), rng.integers(0, N, 80), rng.integers(0, N, 80), directed=False)
    graph = PartitionedGraph(base, np.arange(8) % 2)
    ref = PartitionedGraph(base, np.zeros(8, np.int64))
    ck = Checkpoint(str(tmp_path / "ck"), full_every=2)
    stray = tmp_path / "ck" / "hatrick-state-notes.txt"          # not the checkpoint's: never removed
    stray.write_text("the user's")
    written = []
    for number, batch in enumerate(random_batches(6, 7, 12), start=1):
        pending = ck.begin(number, batch, {"p": int(batch.seq.max())}, BUFFER)
        graph.stage(batch)
        ck.commit(pending, graph, {"p": int(batch.seq.max())}, BUFFER, owner=graph.owner)
        graph.commit()
        reports = graph.committed()
        written += reports
        ck.states_written(reports)
        ref.apply(batch)
    ck.wait()
    states = sorted(n for n in os.listdir(ck.directory) if n.startswith("hatrick-state-") and n.endswith(".data"))
    last_batch_done.set()
    assert stray.read_text() == "the user's"
    from hatrick import datafile

    manifest = datafile.loads(open(ck.path, "rb").read())
    assert len(manifest["states"]) == 2 and set(manifest["states"]) <= set(states)
    assert manifest["batch"] < 7 and all(int(n.split("-")[2]) >= manifest["batch"] for n in states)
    assert all(error is None for _, error in written)
    graph.written(wait=True)                     # the last full's files land, their report is never given
    restored = Checkpoint(ck.directory, 2).load()
    assert restored["graph"].batch == 7 and restored["hwm"] == {"p": int(batch.seq.max())}
    got, want = restored["graph"].gather(), ref.gather()
    assert live_edge_counts(edge_frame(got), False) == live_edge_counts(edge_frame(want), False)
    assert live_partition(components_frame(got)) == live_partition(components_frame(want))
    with open(ck.path, "wb") as out:            # a manifest naming a file outside the directory is refused
        out.write(datafile.dumps({**manifest, "states": ["../elsewhere.data"]}))
    with pytest.raises(InputError, match="not a state file of this directory"):
        Checkpoint(ck.directory, 2).load()
