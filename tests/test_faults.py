"""Bad input and faults against GoFS writes and reads: every case ends in a clear error or a
consistent graph, nothing half-written is left, and nothing that is not GoFS's is deleted.

Kills are real (``os._exit`` in a child process at a chosen step of a write), so no
``finally`` or ``except`` of the writer runs, as when a machine dies. No Spark here.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import networkx as nx
import pyarrow as pa
import pytest

import goffish
from gofs import housekeeping, layout, manifest as manifest_io
from gofs.errors import DataError, GoFSError, GraphExistsError, InputError, ManifestError
from gofs.housekeeping import check_result_target
from gofs.ingest import ingest
from gofs.instances import Instance, append_instances
from gofs.ingest.read_local import from_networkx
from tests.faultfs import NoDirectoryMoves

REPO = Path(__file__).resolve().parents[1]
LEGACY = REPO / "tests" / "data" / "legacy-v1.gofs"


def _graph(path, n=6, k=2, instances=2):
    G = nx.path_graph(n)
    for u, v in G.edges():
        G[u][v]["w"] = float(u + v)
    ingest(from_networkx(G), str(path), num_partitions=k)
    append_instances(str(path), [_instance(h) for h in range(instances)])
    return goffish.open(str(path))


def _instance(h, n=6):
    return Instance(h, h + 1, vertex_values=pa.table({"id": list(range(n)), "load": [h * 100.0 + v for v in range(n)]}),
                    edge_values=pa.table({"src": [0, 1], "dst": [1, 2], "t": [h + 0.5, h + 1.5]}))


def _files(root: Path) -> dict:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file() and p.name != "lock"}


def _check_consistent(path) -> "goffish.graph.Graph":
    """The graph opens, every instance reads in full, and nothing unreferenced is left on disk."""
    g = goffish.open(str(path))
    assert [i["id"] for i in g.instances] == list(range(len(g.instances)))
    for inst in g.instances:
        for p in range(g.num_partitions):
            table = g.read_vertex_partition(p, instance=inst["id"])
            assert table.num_rows == g.partitions[p]["num_vertices"]
            g.read_edge_partition(p, instance=inst["id"])
    return g


def _check_clean(path) -> None:
    g = goffish.open(str(path))
    root = Path(path)
    assert sorted(x.name for x in root.iterdir()) == [layout.LOG, g.version]
    first = manifest_io.read(g.fs, g.graph_root).create             # entries before the last create are gone
    assert sorted(x.name for x in (root / layout.LOG).iterdir()) == \
        sorted(["lock"] + [f"{n:08d}.json" for n in range(first, g.head + 1)])
    instance_dirs = sorted(x.name for x in (root / g.version / "instances").iterdir()) \
        if (root / g.version / "instances").exists() else []
    assert instance_dirs == [f"i-{i['id']:06d}" for i in g.instances]
    assert not [x for x in root.parent.iterdir() if x.name.startswith(f".{root.name}")]


# --------------------------------------------------------------------------- 1. what may be replaced

def test_overwrite_refuses_a_working_directory_and_keeps_it_intact(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("mine")
    (work / "e.txt").write_text("0 1\n")
    before = _files(work)
    for overwrite in (False, True):
        with pytest.raises(GraphExistsError, match="is not a GoFS graph .*; refusing to"):
            goffish.ingest(str(work / "e.txt"), str(work), overwrite=overwrite)
    assert _files(work) == before


def test_cli_ingest_into_current_directory_is_refused(tmp_path, monkeypatch, capsys):
    from goffish.cli import main

    (tmp_path / "e.txt").write_text("0 1\n1 2\n")
    monkeypatch.chdir(tmp_path)
    assert main(["ingest", "e.txt", ".", "--overwrite"]) == 2
    assert "refusing to replace it" in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == ["e.txt"]


def test_overwrite_refuses_a_file(tmp_path):
    target = tmp_path / "g.gofs"
    target.write_text("not a graph")
    with pytest.raises(GraphExistsError, match="is a file, not a GoFS graph"):
        goffish.ingest(nx.path_graph(3), str(target), overwrite=True)
    assert target.read_text() == "not a graph"


def test_empty_directory_and_unfinished_ingest_may_be_written(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert goffish.ingest(nx.path_graph(3), str(empty), num_partitions=1).num_vertices == 3
    unfinished = tmp_path / "unfinished"
    (unfinished / layout.LOG).mkdir(parents=True)
    (unfinished / "v-0123456789ab" / "template").mkdir(parents=True)
    Path(housekeeping.version_record(str(unfinished), "v-0123456789ab")).touch()    # a killed ingest's note
    goffish.ingest(nx.path_graph(4), str(unfinished), num_partitions=1)
    _check_clean(unfinished)


@pytest.mark.parametrize("out, why", [("g.gofs", "is the graph"), ("g.gofs/result", "overlaps the graph"),
                                      (".", "overlaps the graph"), ("work", "not a result directory")])
def test_run_out_is_never_the_graph_or_a_foreign_directory(tmp_path, monkeypatch, capsys, out, why):
    from goffish.cli import main

    _graph(tmp_path / "g.gofs", instances=0)
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "thesis.tex").write_text("x")
    monkeypatch.chdir(tmp_path)
    before = _files(tmp_path)
    assert main(["run", "cc", "g.gofs", "--out", out, "--overwrite"]) == 2
    assert why in capsys.readouterr().err
    assert _files(tmp_path) == before


def test_run_out_may_replace_a_previous_result(tmp_path):
    result = tmp_path / "cc"
    result.mkdir()
    for name in ("_SUCCESS", "part-00000-x.snappy.parquet", ".part-00000-x.snappy.parquet.crc"):
        (result / name).write_text("")
    (tmp_path / "memes" / "tree").mkdir(parents=True)
    (tmp_path / "memes" / "tree" / "_SUCCESS").write_text("")
    check_result_target(str(result), str(tmp_path / "g.gofs"), overwrite=True)
    check_result_target(str(tmp_path / "memes"), str(tmp_path / "g.gofs"), overwrite=True)
    with pytest.raises(GraphExistsError, match="pass --overwrite"):
        check_result_target(str(result), str(tmp_path / "g.gofs"), overwrite=False)


# --------------------------------------------------------------------------- 2. atomic overwrite

def test_reader_of_a_replaced_graph_fails_clearly_never_mixes(tmp_path):
    old = _graph(tmp_path / "g.gofs", n=6)
    goffish.ingest(nx.path_graph(9), str(tmp_path / "g.gofs"), num_partitions=3, overwrite=True)
    with pytest.raises(DataError, match="replaced while this job ran"):
        old.read_vertex_partition(0)
    new = goffish.open(str(tmp_path / "g.gofs"))
    assert new.num_vertices == 9 and new.instances == []
    _check_clean(tmp_path / "g.gofs")


def test_shipped_store_of_a_replaced_graph_fails_clearly(tmp_path):
    import pickle

    old = pickle.loads(pickle.dumps(_graph(tmp_path / "g.gofs")))
    goffish.ingest(nx.path_graph(9), str(tmp_path / "g.gofs"), num_partitions=3, overwrite=True)
    with pytest.raises(GoFSError, match="replaced while this job ran"):
        old.instances


def test_store_shipped_to_tasks_carries_no_instance_list(tmp_path):
    import pickle

    g = _graph(tmp_path / "g.gofs", instances=3)
    state = g.store.__getstate__()                 # the handle has a store: the store is what tasks get
    assert "instances" not in state["manifest"]
    append_instances(str(tmp_path / "g.gofs"), [_instance(5)])
    shipped = pickle.loads(pickle.dumps(g.store))
    assert [i["id"] for i in shipped.instances] == [0, 1, 2]     # as of the shipped log position


def test_long_logs_are_folded_and_shipped_stores_keep_their_instances(tmp_path, monkeypatch):
    import pickle

    monkeypatch.setattr(manifest_io, "COMPACT_AFTER", 3)
    target = tmp_path / "g.gofs"
    g = _graph(target, instances=2)
    shipped = pickle.dumps(g)
    for h in range(2, 9):
        append_instances(str(target), [_instance(h)])
    entries = sorted(x.name for x in (target / layout.LOG).iterdir() if x.name != "lock")
    assert len(entries) <= 4                         # one create + fewer than COMPACT_AFTER appends
    g = _check_consistent(target)
    assert [i["start"] for i in g.instances] == [float(h) for h in range(9)]
    assert [i["id"] for i in pickle.loads(shipped).instances] == [0, 1]
    _check_clean(target)


def test_vertex_only_append_reads_no_edge_file(tmp_path):
    from gofs import files

    target = tmp_path / "g.gofs"
    _graph(target, instances=0)
    with files.traced() as trace:
        append_instances(str(target), [Instance(0, vertex_values=pa.table({"id": [1], "load": [1.0]}))])
    assert trace and not [path for path, _ in trace if "/edges/" in path]


KILL = textwrap.dedent("""
    import os, sys
    import networkx as nx, pyarrow as pa
    import gofs.files, gofs.ingest, gofs.instances, gofs.layout, gofs.manifest
    from gofs.instances import Instance, append_instances
    from gofs.ingest.read_local import from_networkx
    target, where, nth, when, action = sys.argv[1:6]
    module, name = where.rsplit(".", 1)
    module = getattr(gofs, module)
    original, calls = getattr(module, name), [0]
    def killer(*args, **kwargs):
        calls[0] += 1
        if calls[0] == int(nth) and when == "before":
            os._exit(9)
        result = original(*args, **kwargs)
        if calls[0] == int(nth) and when == "after":
            os._exit(9)
        return result
    setattr(module, name, killer)
    if action == "append":
        append_instances(target, [Instance(10, 11, vertex_values=pa.table({"id": [0, 5], "load": [1.0, 2.0]}),
                                           edge_values=pa.table({"src": [0], "dst": [1], "t": [3.0]}))])
    else:
        gofs.ingest.ingest(from_networkx(nx.path_graph(9)), target, num_partitions=3, overwrite=True)
    sys.exit(0)
""")


def _killed(target, where, nth, when, action):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", KILL, str(target), where, str(nth), when, action],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 9, done.stderr[-2000:]


APPEND_KILLS = [("files.write_table", 1, "before", False),    # validated, nothing written
                ("files.write_table", 2, "before", False),    # one file written
                ("manifest.commit", 1, "before", False),      # every file written, no entry
                ("manifest._publish", 1, "before", False),    # entry staged, not published
                ("manifest._publish", 1, "after", True)]      # published, staging file left


@pytest.mark.parametrize("where, nth, when, committed", APPEND_KILLS)
def test_append_killed_at_each_step(tmp_path, where, nth, when, committed):
    target = tmp_path / "g.gofs"
    _graph(target)
    _killed(target, where, nth, when, "append")
    g = _check_consistent(target)
    assert len(g.instances) == (3 if committed else 2)
    ids = append_instances(str(target), [_instance(20)])         # no OSError from an orphan
    assert ids == [len(g.instances)]
    _check_consistent(target)
    _check_clean(target)


OVERWRITE_KILLS = [("files.write_table", 3, "before", False),   # half a template written
                   ("manifest._publish", 1, "before", False),   # template written, entry staged
                   ("manifest._publish", 1, "after", True),     # committed, old version still there
                   ("layout.remove", 2, "after", True)]         # committed, clean-up half done


@pytest.mark.parametrize("where, nth, when, committed", OVERWRITE_KILLS)
def test_overwrite_killed_at_each_step(tmp_path, where, nth, when, committed):
    target = tmp_path / "g.gofs"
    _graph(target)
    _killed(target, where, nth, when, "overwrite")
    g = _check_consistent(target)
    assert (g.num_vertices, len(g.instances)) == ((9, 0) if committed else (6, 2))
    append_instances(str(target), [Instance(30, vertex_values=pa.table({"id": [0], "load": [1.0]}))])
    _check_consistent(target)
    _check_clean(target)


def test_first_ingest_killed_leaves_a_path_that_a_new_ingest_takes(tmp_path):
    target = tmp_path / "new.gofs"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    script = KILL.replace("overwrite=True", "overwrite=False")
    done = subprocess.run([sys.executable, "-c", script, str(target), "files.write_table", "2", "before", "ingest"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 9, done.stderr[-2000:]
    with pytest.raises(ManifestError, match="not a GoFS graph"):
        goffish.open(str(target))
    goffish.ingest(nx.path_graph(5), str(target), num_partitions=2)
    _check_clean(target)


# --------------------------------------------------------------------------- 3. no directory renames

def test_every_write_works_on_a_filesystem_without_directory_moves(tmp_path, monkeypatch):
    handler = NoDirectoryMoves()
    wrapped = pa.fs.PyFileSystem(handler)
    real = layout.filesystem
    monkeypatch.setattr(layout, "filesystem", lambda path: (wrapped, real(path)[1]))
    target = tmp_path / "g.gofs"
    _graph(target)                                               # ingest + append
    append_instances(str(target), [_instance(7)])
    goffish.ingest(nx.path_graph(9), str(target), num_partitions=3, overwrite=True)
    g = goffish.open(str(target))
    assert g.num_vertices == 9 and g.read_vertex_partition(0).num_rows == g.partitions[0]["num_vertices"]
    assert handler.moves and all("/_log/.tmp-" in src and "/_log/" in dest for src, dest in handler.moves)
    assert sorted(x.name for x in target.iterdir()) == [layout.LOG, g.version]


# --------------------------------------------------------------------------- 4. two writers

WRITER = textwrap.dedent("""
    import sys
    import pyarrow as pa
    from gofs.instances import Instance, append_instances
    target, writer = sys.argv[1], int(sys.argv[2])
    for i in range(8):
        append_instances(target, [Instance(0, 1, vertex_values=pa.table({"id": [0], "load": [writer * 1000.0 + i]}))])
""")


def test_two_processes_appending_in_a_loop(tmp_path):
    target = tmp_path / "g.gofs"
    _graph(target, instances=0)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(target), str(w)], env=env,
                                stderr=subprocess.PIPE, text=True) for w in (1, 2)]
    for w in writers:
        assert w.wait(timeout=120) == 0, w.stderr.read()[-2000:]
    g = _check_consistent(target)
    table = pa.concat_tables([g.read_vertex_partition(p, attributes=["load"], instance=[i["id"] for i in g.instances])
                              for p in range(g.num_partitions)])
    values = sorted(table.filter(pa.compute.equal(table.column("id"), 0)).column("load").to_pylist())
    assert values == sorted([w * 1000.0 + i for w in (1, 2) for i in range(8)])
    _check_clean(target)


def test_format1_orphans_and_batch_leftovers_are_cleaned(tmp_path):
    target = tmp_path / "g.gofs"
    _graph(target)
    g = goffish.open(str(target))
    instances = Path(g.root) / "instances"
    (instances / ".batch-0123456789ab" / "i-000002").mkdir(parents=True)
    (instances / "i-000002" / "vertices").mkdir(parents=True)          # an orphan: files, no entry
    (instances / "i-000002" / "vertices" / "part-00000.parquet").write_bytes(b"partial")
    assert append_instances(str(target), [_instance(5)]) == [2]
    _check_consistent(target)
    _check_clean(target)


# --------------------------------------------------------------------------- format 1 graphs

def test_format1_graph_opens_reads_and_migrates_on_append(tmp_path):
    target = tmp_path / "legacy.gofs"
    import shutil

    shutil.copytree(LEGACY, target)
    g = goffish.open(str(target))
    assert g.version == "" and [i["id"] for i in g.instances] == [0, 1]
    loads = pa.concat_tables([g.read_vertex_partition(p, attributes=["load"], instance=0)
                              for p in range(g.num_partitions)])
    assert dict(zip(loads.column("id").to_pylist(), loads.column("load").to_pylist())) == \
        {0: 1.5, 1: 2.5, 2: 3.5, 3: None, 4: None, 5: None}
    edges = pa.concat_tables([g.read_edge_partition(p, instance=1) for p in range(g.num_partitions)])
    assert sorted(zip(edges.column("src").to_pylist(), edges.column("dst").to_pylist())) == \
        [(0, 1), (1, 2), (2, 3), (3, 4)]                                  # 4-5 removed in instance 1
    assert append_instances(str(target), [Instance(5, vertex_values=pa.table({"id": [4], "load": [9.0]}))]) == [2]
    g = _check_consistent(target)
    assert g.head == 1 and [i["id"] for i in g.instances] == [0, 1, 2]
    goffish.ingest(nx.path_graph(3), str(target), num_partitions=1, overwrite=True)
    _check_clean(target)                                                  # template/, instances/, manifest.json gone


def test_format1_staging_siblings_are_cleaned_by_the_next_writer(tmp_path):
    import shutil

    target = tmp_path / "g.gofs"
    _graph(target)
    shutil.copytree(LEGACY, tmp_path / ".g.gofs.tmp-0123456789ab")
    (tmp_path / ".other.tmp-0123456789ab").mkdir()                        # not ours: kept
    append_instances(str(target), [_instance(9)])
    assert sorted(x.name for x in tmp_path.iterdir()) == [".other.tmp-0123456789ab", "g.gofs"]


# --------------------------------------------------------------------------- 13. exact types

TYPES = {"i8": pa.int8(), "i16": pa.int16(), "u8": pa.uint8(), "u16": pa.uint16(), "u32": pa.uint32(),
         "u64": pa.uint64(), "f16": pa.float16(), "f32": pa.float32(), "b": pa.bool_(), "ls": pa.large_string(),
         "bin": pa.binary(), "fsb": pa.binary(2), "d32": pa.date32(), "d64": pa.date64(), "ts_s": pa.timestamp("s"),
         "ts_tz": pa.timestamp("ms", tz="Europe/Paris"), "t32": pa.time32("s"), "t64": pa.time64("ns"),
         "dur": pa.duration("us"), "dec": pa.decimal128(12, 3), "dict": pa.dictionary(pa.int16(), pa.string()),
         "lst": pa.list_(pa.int32()), "st": pa.struct([("a", pa.int8()), ("b", pa.string())]),
         "map": pa.map_(pa.string(), pa.float64())}


def _values(t: pa.DataType) -> pa.Array:
    import datetime
    import decimal

    samples = {"b": [True, None], "ls": ["x", None], "bin": [b"ab", None], "fsb": [b"ab", None],
               "d32": [datetime.date(2024, 2, 29), None], "d64": [datetime.date(1999, 12, 31), None],
               "ts_s": [datetime.datetime(2024, 1, 1, 12), None], "ts_tz": [1_700_000_000_000, None],
               "t32": [datetime.time(7, 30), None], "t64": [datetime.time(23, 59, 59, 999999), None],
               "dur": [datetime.timedelta(seconds=90), None], "dec": [decimal.Decimal("123.456"), None],
               "dict": ["red", None], "lst": [[1, 2], None], "st": [{"a": 1, "b": "z"}, None],
               "map": [[("k", 0.5)], None], "f16": [None, None]}
    name = next(n for n, ty in TYPES.items() if ty == t)
    if name == "dict":
        return pa.array(samples["dict"]).dictionary_encode().cast(t)
    return pa.array(samples.get(name, [7, None]), t)


def test_every_arrow_type_round_trips_exactly(tmp_path):
    target = tmp_path / "g.gofs"
    vertices = pa.table({"id": [0, 1], **{f"static_{n}": _values(t) for n, t in TYPES.items()}})
    from gofs.graph_input import GraphInput

    ingest(GraphInput(edges=pa.table({"src": [0, 2], "dst": [1, 3]}), vertices=vertices, directed=False,
                      source="test", name=None), str(target), num_partitions=2)
    append_instances(str(target), [Instance(0, vertex_values=pa.table({"id": [0, 1], **{n: _values(t) for n, t in TYPES.items()}})),
                                   Instance(1)])      # instance 1 has no values: nulls of the exact type
    g = goffish.open(str(target))
    for inst in (0, 1):
        table = pa.concat_tables([g.read_vertex_partition(p, instance=inst) for p in range(g.num_partitions)])
        by_id = {row["id"]: row for row in table.to_pylist()}
        for name, t in TYPES.items():
            assert table.schema.field(name).type == t, name
            assert table.schema.field(f"static_{name}").type == t, name
            expected = _values(t).to_pylist()
            assert [by_id[0][f"static_{name}"], by_id[1][f"static_{name}"]] == expected, name
            assert [by_id[0][name], by_id[1][name]] == (expected if inst == 0 else [None, None]), name


def test_a_later_instance_of_another_type_is_refused(tmp_path):
    target = tmp_path / "g.gofs"
    _graph(target, instances=0)
    append_instances(str(target), [Instance(0, vertex_values=pa.table({"id": [0], "x": pa.array([1], pa.int16())}))])
    with pytest.raises(InputError, match="field 'x': type int32 differs from earlier instances \\(int16\\)"):
        append_instances(str(target), [Instance(1, vertex_values=pa.table({"id": [0], "x": pa.array([1], pa.int32())}))])


# --------------------------------------------------------------------------- damaged graphs

def test_truncated_parquet_file_is_a_clear_error(tmp_path):
    g = _graph(tmp_path / "g.gofs")
    victim = Path(layout.instance_vertices(g.root, 1, 0))
    victim.write_bytes(victim.read_bytes()[:40])
    with pytest.raises(DataError, match=f"{victim}: unreadable Parquet file"):
        g.read_vertex_partition(0, attributes=["load"], instance=1)
    template = Path(layout.template_edges(g.root, 1))
    template.write_bytes(b"")
    with pytest.raises(DataError, match=f"{template}: unreadable Parquet file"):
        g.read_edge_partition(1)


def test_manifest_from_a_future_version_is_refused(tmp_path):
    target = tmp_path / "g.gofs"
    _graph(target, instances=0)
    entry = target / layout.LOG / "00000001.json"
    entry.write_text(json.dumps({"format": "gofs", "version": 3, "op": "append"}))
    before = _files(target)
    with pytest.raises(ManifestError, match="version 3 is not supported \\(written by a newer GoFS"):
        goffish.open(str(target))
    with pytest.raises(ManifestError, match="version 3 is not supported"):
        append_instances(str(target), [_instance(0)])
    assert _files(target) == before


@pytest.mark.parametrize("field, value", [("data", "../victim"), ("data", "/abs/victim"),
                                          ("data", "v-000000000000/../../victim"), ("instance id", "../victim"),
                                          ("instance id", -1), ("instance id", True)])
def test_crafted_log_entry_cannot_reach_outside_the_graph(tmp_path, field, value):
    """Attack: a log entry whose ``data`` (or an instance id) names a path outside the graph. The read is
    refused naming the entry, field and value; a writer deletes nothing, inside the graph or beside it."""
    target, victim = tmp_path / "g.gofs", tmp_path / "victim"
    _graph(target, instances=1)
    for name in ("template/vertices/part-00000.parquet", "instances/i-000007/vertices/part-00000.parquet",
                 "instances/keep.txt"):
        (victim / name).parent.mkdir(parents=True, exist_ok=True)
        (victim / name).write_bytes(b"not yours")
    log = target / layout.LOG
    if field == "data":
        entry = json.loads((log / "00000000.json").read_text())
        entry["data"] = value
    else:
        entry = json.loads((log / "00000001.json").read_text())
        entry["instances"][0]["id"] = value
    (log / "00000002.json").write_text(json.dumps(entry))
    victim_before, graph_before = _files(victim), _files(target)
    refused = f"00000002.json: .*{field}.*{re.escape(repr(value))}"
    with pytest.raises(ManifestError, match=refused):
        goffish.open(str(target))
    with pytest.raises(ManifestError, match=refused):
        append_instances(str(target), [_instance(5)])
    assert _files(victim) == victim_before
    assert _files(target) == graph_before


@pytest.mark.parametrize("damage, message", [
    ("file", "is a file, not a GoFS graph directory"),
    ("missing", "no such GoFS graph"),
    ("empty dir", "not a GoFS graph"),
    ("no create", "no create entry"),
    ("foreign json", "not a GoFS manifest"),
    ("missing field", "missing field\\(s\\) num_vertices"),
    ("corrupt type", "corrupt type of attribute 'load'"),
    ("deleted template", "missing; the graph was replaced"),
])
def test_damaged_graph_is_a_clear_error(tmp_path, damage, message):
    target = tmp_path / "g.gofs"
    if damage == "file":
        target.write_text("x")
    elif damage == "empty dir":
        target.mkdir()
    elif damage != "missing":
        _graph(target, instances=0)
        append_instances(str(target), [Instance(0, vertex_values=pa.table({"id": [0], "load": [1.0]}))])
        entry = target / layout.LOG / "00000000.json"
        document = json.loads(entry.read_text())
        if damage == "no create":
            document["op"] = "append"
        elif damage == "foreign json":
            document = {"hello": "world"}
        elif damage == "missing field":
            del document["graph"]["num_vertices"]
        elif damage == "corrupt type":
            entry = target / layout.LOG / "00000001.json"
            document = json.loads(entry.read_text())
            document["instance_schema"]["vertex"][0]["arrow"] = "bm90IGFycm93"
        entry.write_text(json.dumps(document))
        if damage == "deleted template":
            os.remove(layout.template_vertices(goffish.open(str(target)).root, 0))
    with pytest.raises(GoFSError, match=message):
        g = goffish.open(str(target))
        g.read_edge_partition(0, attributes=["w"])
        g.read_vertex_partition(0)
