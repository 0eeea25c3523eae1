"""GoFS: ingest -> store -> read round trips, sub-graphs, instances, pruning, atomicity, errors."""
import json
import os

import networkx as nx
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs  # noqa: F401  (pa.fs)
import pyarrow.parquet as pq
import pytest

import goffish
from gofs import files
from gofs.errors import GraphExistsError, InputError, ManifestError
from gofs.instances import Instance
from gofs.ingest.read_local import from_networkx


def _sample_graph(directed: bool, string_ids: bool = False) -> nx.Graph:
    rng = np.random.default_rng(7)
    G = nx.gnm_random_graph(60, 70, seed=11, directed=directed)
    G.add_node(60)  # isolated
    G.add_edge(5, 5)  # self-loop
    for u, v in G.edges():
        G[u][v]["w"] = float(rng.uniform(0.5, 3.0))
    for v in G.nodes():
        G.nodes[v]["label"] = f"v{v}"
    if string_ids:
        G = nx.relabel_nodes(G, {v: f"n{v:03d}" for v in G.nodes()})
    return G


def _edge_set(frame: pd.DataFrame, directed: bool) -> list:
    rows = [(r.src, r.dst, round(r.w, 12)) for r in frame.itertuples()]
    if not directed:
        rows = [(min(a, b), max(a, b), w) for a, b, w in rows]
    return sorted(rows)


def _expected_edges(G, directed):
    return _edge_set(pd.DataFrame([(u, v, d["w"]) for u, v, d in G.edges(data=True)], columns=["src", "dst", "w"]),
                     directed)


def _write_inputs(G, tmp_path, fmt):
    """Write G in ``fmt`` and return (source, read options)."""
    edges = pd.DataFrame([(u, v, d["w"]) for u, v, d in G.edges(data=True)], columns=["src", "dst", "w"])
    vertices = pd.DataFrame({"id": list(G.nodes()), "label": [G.nodes[v]["label"] for v in G.nodes()]})
    if fmt == "networkx":
        return G, {}
    if fmt == "edgelist":
        path = tmp_path / "g.txt"
        with open(path, "w") as out:
            out.write("# a comment\n")
            for r in edges.itertuples():
                out.write(f"{r.src}\t{r.dst} {r.w!r}\n")
        return str(path), {"weight": "w", "directed": G.is_directed()}
    if fmt == "csv":
        edges.to_csv(tmp_path / "e.csv", index=False)
        vertices.to_csv(tmp_path / "v.csv", index=False)
        return str(tmp_path / "e.csv"), {"vertices_path": str(tmp_path / "v.csv"), "directed": G.is_directed()}
    if fmt == "parquet":
        pq.write_table(pa.Table.from_pandas(edges, preserve_index=False), tmp_path / "e.parquet")
        pq.write_table(pa.Table.from_pandas(vertices, preserve_index=False), tmp_path / "v.parquet")
        return str(tmp_path / "e.parquet"), {"vertices_path": str(tmp_path / "v.parquet"), "directed": G.is_directed()}
    raise AssertionError(fmt)


@pytest.mark.parametrize("fmt", ["networkx", "edgelist", "csv", "parquet"])
@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("k", [1, 2, 7])
def test_round_trip_every_format(tmp_path, fmt, directed, k):
    G = _sample_graph(directed)
    source, options = _write_inputs(G, tmp_path, fmt)
    g = goffish.ingest(source, str(tmp_path / "g.gofs"), num_partitions=k, **options)
    edges = pa.concat_tables([g.read_edge_partition(p) for p in range(k)]).to_pandas()
    assert _edge_set(edges, directed) == _expected_edges(G, directed)
    vertices = pa.concat_tables([g.read_vertex_partition(p) for p in range(k)]).to_pandas()
    expected_ids = sorted(v for v in G.nodes() if fmt != "edgelist" or G.degree(v) > 0)
    assert sorted(vertices["id"]) == expected_ids
    if fmt != "edgelist":
        assert dict(zip(vertices["id"], vertices["label"])) == {v: G.nodes[v]["label"] for v in G.nodes()}
    assert g.directed == directed and g.num_partitions == k


@pytest.mark.parametrize("k", [1, 2])
def test_round_trip_through_spark_dataframes_with_string_ids(spark, tmp_path, k):
    G = _sample_graph(directed=False, string_ids=True)
    g = goffish.ingest(from_networkx(G), str(tmp_path / "g.gofs"), num_partitions=k, spark=spark)
    assert _edge_set(g.edges().toPandas(), False) == _expected_edges(G, False)
    vertices = g.vertices().toPandas()
    assert dict(zip(vertices["id"], vertices["label"])) == {v: G.nodes[v]["label"] for v in G.nodes()}


def test_graphframe_round_trip(spark, tmp_path):
    pytest.importorskip("graphframes")
    G = _sample_graph(directed=True)
    g = goffish.ingest(G, str(tmp_path / "a.gofs"), num_partitions=2)
    gf = g.to_graphframe()
    again = goffish.ingest(gf, str(tmp_path / "b.gofs"), num_partitions=3, directed=True)
    assert _edge_set(again.edges().toPandas(), True) == _expected_edges(G, True)
    assert gf.inDegrees.count() > 0


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("k,partitioner", [(2, "metis"), (7, "hash"), (7, "metis")])
def test_subgraphs_are_components_of_local_edges(tmp_path, directed, k, partitioner):
    G = _sample_graph(directed)
    g = goffish.ingest(G, str(tmp_path / "g.gofs"), num_partitions=k, partitioner=partitioner)
    vt = pa.concat_tables([g.read_vertex_partition(p, internal=True) for p in range(k)]).to_pandas()
    et = pa.concat_tables([g.read_edge_partition(p, internal=True) for p in range(k)]).to_pandas()
    part_of = np.repeat(np.arange(k), [p["num_vertices"] for p in g.partitions])
    sg_of = vt.set_index("vid")["sg"]
    local = et[~et.remote]
    for p in range(k):
        H = nx.Graph()
        H.add_nodes_from(vt.vid[part_of[vt.vid] == p])
        H.add_edges_from(zip(local.src[part_of[local.src] == p], local.dst[part_of[local.src] == p]))
        expected = sorted(sorted(c) for c in nx.connected_components(H))
        found = sorted(sorted(group.vid) for _, group in vt[part_of[vt.vid] == p].groupby("sg"))
        assert found == expected
    remote = et[et.remote]
    assert (part_of[remote.dst] == remote.dst_part).all()
    assert (sg_of[remote.dst].to_numpy() == remote.dst_sg.to_numpy()).all()
    assert (part_of[remote.src] != part_of[remote.dst]).all()
    canonical = et[~et.mirror]
    assert len(canonical) == G.number_of_edges()
    assert g.manifest["cut_edges"] == int(canonical.remote.sum())


def _instances_graph(tmp_path, hours=6):
    G = _sample_graph(directed=False)
    g = goffish.ingest(G, str(tmp_path / "t.gofs"), num_partitions=3)
    edges = list(G.edges())
    batch = []
    for h in range(hours):
        batch.append(Instance(h, h + 1,
                              vertex_values=pa.table({"id": list(G.nodes()), "load": [float(h * 100 + v) for v in G.nodes()]}),
                              edge_values=pa.table({"src": [u for u, _ in edges], "dst": [v for _, v in edges],
                                                    "time": [float(h + i) for i in range(len(edges))]})))
    g.append_instances(batch)
    return G, g


def test_instances_read_back_by_id_and_time(spark, tmp_path):
    G, g = _instances_graph(tmp_path)
    assert [i["id"] for i in g.instances] == list(range(6))
    frame = g.vertices(attributes=["load"], time=(2, 4)).toPandas()
    assert sorted(frame["instance"].unique()) == [2, 3]
    for row in frame.itertuples():
        assert row.load == row.instance * 100 + row.id
    edges = g.edges(attributes=["time"], instance=5).toPandas()
    assert len(edges) == G.number_of_edges() and (edges["time"] >= 5).all()


def test_time_range_attribute_subset_touches_only_matching_files_and_columns(tmp_path):
    _, g = _instances_graph(tmp_path, hours=10)
    g = goffish.open(g.path)               # a fresh handle: nothing cached before the trace
    with files.traced() as trace:
        for p in range(g.num_partitions):
            g.read_vertex_partition(p, attributes=["load"], time=(3, 5))
    opened = {path: columns for path, columns in trace}
    instance_files = [p for p in opened if "/instances/" in p]
    assert sorted({p.split("/instances/")[1].split("/")[0] for p in instance_files}) == ["i-000003", "i-000004"]
    assert all(opened[p] == ("load",) for p in instance_files)
    assert all("/edges/" not in p for p in opened)
    template = [p for p in opened if "/template/" in p]
    assert len(template) == g.num_partitions and all(opened[p] == ("id",) for p in template)
    assert len(trace) == len(opened)        # no file read twice


def test_edge_read_touches_only_its_partition_and_its_neighbours_ids(tmp_path):
    _, g = _instances_graph(tmp_path, hours=10)
    g = goffish.open(g.path)
    p = 0
    internal = g.read_edge_partition(p, internal=True)
    neighbours = {p} | set(internal.column("dst_part").to_pylist())
    g = goffish.open(g.path)
    with files.traced() as trace:
        g.read_edge_partition(p, attributes=["time"], time=(3, 5))
    opened = [path for path, _ in trace]
    vertex_files = {path for path in opened if "/template/vertices/" in path}
    assert vertex_files == {f"{g.root}/template/vertices/part-{q:05d}.parquet" for q in neighbours}
    assert all(columns == ("id",) for path, columns in trace if path in vertex_files)
    edge_templates = [path for path in opened if "/template/edges/" in path]
    assert edge_templates == [f"{g.root}/template/edges/part-{p:05d}.parquet"]
    instance_files = sorted(path for path in opened if "/instances/" in path)
    assert instance_files == [f"{g.root}/instances/i-{i:06d}/edges/part-{p:05d}.parquet" for i in (3, 4)]
    assert all(columns == ("time",) for path, columns in trace if path in instance_files)
    assert len(opened) == len(vertex_files) + 1 + 2


def test_topology_changes_apply_to_their_instance_only(spark, tmp_path):
    G = nx.path_graph(5)
    g = goffish.ingest(G, str(tmp_path / "p.gofs"), num_partitions=2)
    g.append_instances([Instance(0, 1, removed_edges=pa.table({"src": [2], "dst": [1]}),
                                 added_edges=pa.table({"src": [0], "dst": [4]}))])
    changed = {tuple(sorted(e)) for e in g.edges(instance=0).toPandas()[["src", "dst"]].itertuples(index=False)}
    assert changed == {(0, 1), (2, 3), (3, 4), (0, 4)}
    assert len(g.edges().toPandas()) == 4


def test_bad_instance_input_is_rejected_and_nothing_is_written(tmp_path):
    G, g = _instances_graph(tmp_path, hours=2)
    before = _tree(tmp_path / "t.gofs")
    good = Instance(10, 11, vertex_values=pa.table({"id": [0, 1], "load": [1.0, 2.0]}))
    unknown = Instance(11, 12, vertex_values=pa.table({"id": [0, 999], "load": [1.0, 2.0]}))
    with pytest.raises(InputError, match=r"row 2, field 'id': unknown vertex 999"):
        g.append_instances([good, unknown])
    with pytest.raises(InputError, match="no edge 0 -> 59"):
        g.append_instances([Instance(12, edge_values=pa.table({"src": [0], "dst": [59], "time": [1.0]}))])
    with pytest.raises(InputError, match="field 'load': type string differs"):
        g.append_instances([Instance(12, vertex_values=pa.table({"id": [0], "load": ["x"]}))])
    with pytest.raises(InputError, match="starts before the previous instance"):
        g.append_instances([Instance(0.5, vertex_values=pa.table({"id": [0], "load": [1.0]}))])
    assert _tree(tmp_path / "t.gofs") == before


def _tree(directory) -> dict:
    """Every file under ``directory`` with its bytes (the writer lock file aside)."""
    return {str(path.relative_to(directory)): path.read_bytes()
            for path in sorted(directory.rglob("*")) if path.is_file() and path.name != "lock"}


def _leftovers(directory) -> list:
    return [name for name in os.listdir(directory) if ".tmp-" in name]


def test_bad_input_leaves_nothing_behind(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("1 2 0.5\n2 3 abc\n")
    with pytest.raises(InputError, match=r"bad.txt line 2, column 'weight': 'abc' is not a number"):
        goffish.ingest(str(bad), str(tmp_path / "bad.gofs"), weight="weight")
    missing = tmp_path / "m.csv"
    missing.write_text("a,dst\n1,2\n")
    with pytest.raises(InputError, match="src"):
        goffish.ingest(str(missing), str(tmp_path / "m.gofs"))
    assert not (tmp_path / "bad.gofs").exists() and not (tmp_path / "m.gofs").exists()
    assert _leftovers(tmp_path) == []


def test_existing_path_is_never_overwritten_unless_asked(tmp_path):
    target = tmp_path / "g.gofs"
    goffish.ingest(nx.path_graph(4), str(target), num_partitions=1)
    stamp = goffish.open(str(target)).manifest["uuid"]
    with pytest.raises(GraphExistsError, match="already exists"):
        goffish.ingest(nx.path_graph(6), str(target), num_partitions=1)
    assert goffish.open(str(target)).manifest["uuid"] == stamp
    g = goffish.ingest(nx.path_graph(6), str(target), num_partitions=2, overwrite=True)
    assert g.num_vertices == 6 and _leftovers(tmp_path) == []


def test_failure_during_write_removes_the_staging_directory(tmp_path, monkeypatch):
    import gofs.manifest as manifest_io

    def explode(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(manifest_io, "commit", explode)
    with pytest.raises(OSError, match="disk full"):
        goffish.ingest(nx.path_graph(4), str(tmp_path / "g.gofs"), num_partitions=2)
    assert os.listdir(tmp_path) == []


def test_corrupt_or_missing_manifest_is_a_clear_error(tmp_path):
    target = tmp_path / "g.gofs"
    goffish.ingest(nx.path_graph(4), str(target), num_partitions=1)
    entry = target / "_log" / "00000000.json"
    entry.write_text("{not json")
    with pytest.raises(ManifestError, match="corrupt manifest"):
        goffish.open(str(target))
    entry.write_text(json.dumps({"format": "gofs", "version": 99}))
    with pytest.raises(ManifestError, match="version 99 is not supported"):
        goffish.open(str(target))
    with pytest.raises(ManifestError, match="no such GoFS graph"):
        goffish.open(str(tmp_path / "nothing"))


def test_unknown_attribute_and_instance_are_named(tmp_path):
    _, g = _instances_graph(tmp_path, hours=1)
    with pytest.raises(InputError, match="unknown vertex attribute 'speed'"):
        g.read_vertex_partition(0, attributes=["speed"])
    with pytest.raises(InputError, match="no instance 7"):
        g.read_vertex_partition(0, instance=7)


def test_info_reports_partitions_and_subgraphs(tmp_path):
    from goffish.generators import road_network

    g = goffish.ingest(road_network(3000, seed=2), str(tmp_path / "r.gofs"), num_partitions=4)
    text = g.info()
    assert "4 partitions" in text and "sub-graphs" in text and "balance" in text
    stats = g.manifest
    assert sum(p["num_vertices"] for p in stats["partitions"]) == 3000
    assert stats["subgraphs"]["count"] == sum(p["num_subgraphs"] for p in stats["partitions"])
    assert stats["cut_edges"] == sum(p["cut_edges"] for p in stats["partitions"])


# --------------------------------------------------------------------------- run paths read no whole id column

def _no_id_index(monkeypatch):
    """Make building the driver-side index of every id fail: run paths must not need it."""
    from gofs.store import GraphStore

    def refuse(self):
        raise AssertionError("a run path read every vertex id on the driver")

    monkeypatch.setattr(GraphStore, "vertex_ids", property(refuse))
    monkeypatch.setattr(GraphStore, "_id_index", property(refuse))


def test_read_rows_and_find_rows_stream_across_row_groups(tmp_path, monkeypatch):
    monkeypatch.setattr(files, "STREAM_BATCH_ROWS", 4)
    ids = [f"n{i:03d}" for i in range(50)][::-1]
    path = str(tmp_path / "ids.parquet")
    pq.write_table(pa.table({"id": ids}), path, row_group_size=9)
    fs = pa.fs.LocalFileSystem()
    rows = np.array([0, 3, 8, 9, 17, 18, 40, 49])
    assert files.read_rows(fs, path, "id", rows).to_pylist() == [ids[r] for r in rows]
    assert files.read_rows(fs, path, "id", np.array([], np.int64)).to_pylist() == []
    wanted = pa.array(["n007", "n049", "n000", "absent"])
    found, which = files.find_rows(fs, path, "id", wanted)
    assert sorted(zip(which.tolist(), found.tolist())) == [(0, ids.index("n007")), (1, 0), (2, 49)]
    with files.traced() as trace:
        files.find_rows(fs, path, "id", pa.array(["n049"]))
    assert trace == [(path, ("id",))]


@pytest.mark.parametrize("string_ids", [False, True])
def test_vids_of_finds_ids_without_an_index_of_all_ids(tmp_path, monkeypatch, string_ids):
    G = _sample_graph(directed=True, string_ids=string_ids)
    g = goffish.ingest(G, str(tmp_path / "g.gofs"), num_partitions=3)
    every = g.vertex_ids.to_pylist()                         # the oracle: position = vid
    wanted = [every[i] for i in (60, 0, 33, 60, 17)]
    _no_id_index(monkeypatch)
    monkeypatch.setattr(files, "STREAM_BATCH_ROWS", 5)
    g = goffish.open(g.path)
    assert g.vids_of(wanted).tolist() == [60, 0, 33, 60, 17]
    assert g.vid_of(wanted[2]) == 33
    unknown = "n999" if string_ids else 999
    with pytest.raises(InputError, match=f"unknown vertex {unknown!r}"):
        g.vids_of([wanted[0], unknown])
    foreign = 5 if string_ids else "n005"
    with pytest.raises(InputError, match=f"unknown vertex {foreign!r}"):
        g.vid_of(foreign)


def _edges_with_full_id_map(g, p, **kw):
    """What read_edge_partition returned before: dense ids mapped through every vertex id."""
    ids = g.vertex_ids
    table = g.read_edge_partition(p, internal=True, **kw)
    table = table.filter(pc.invert(table.column("mirror")))
    return table.column("src").to_pylist(), [ids[v].as_py() for v in table.column("dst").to_pylist()], table


def test_external_edges_with_remote_ends_and_topology_changes_equal_a_full_id_map(spark, tmp_path, monkeypatch):
    G = _sample_graph(directed=False, string_ids=True)
    g = goffish.ingest(G, str(tmp_path / "g.gofs"), num_partitions=3, partitioner="hash")
    removed = next((u, v) for u, v in G.edges() if u != v)
    g.append_instances([Instance(0, 1, removed_edges=pa.table({"src": [removed[0]], "dst": [removed[1]]}),
                                 added_edges=pa.table({"src": ["n001", "n040"], "dst": ["n059", "n002"]}))])
    ids = g.vertex_ids.to_pylist()
    assert any(g.read_edge_partition(p, internal=True).column("remote").to_pylist().count(True)
               for p in range(g.num_partitions))
    expected_template = set()
    for p in range(g.num_partitions):
        src, dst, table = _edges_with_full_id_map(g, p, attributes=["w"])
        expected_template |= {(ids[s], d, w) for s, d, w in zip(src, dst, table.column("w").to_pylist())}
    expected_instance = {e for e in expected_template if {e[0], e[1]} != set(removed)} | \
        {("n001", "n059", None), ("n040", "n002", None)}
    _no_id_index(monkeypatch)
    monkeypatch.setattr(files, "STREAM_BATCH_ROWS", 3)
    g = goffish.open(g.path)
    for instance, expected in ((None, expected_template), (0, expected_instance)):
        local = pa.concat_tables([g.read_edge_partition(p, attributes=["w"], instance=instance)
                                  for p in range(g.num_partitions)])
        assert set(zip(*(local.column(c).to_pylist() for c in ("src", "dst", "w")))) == expected
        assert local.num_rows == len(expected)
        frame = g.edges(attributes=["w"], instance=instance).toPandas()
        assert {(r.src, r.dst, None if pd.isna(r.w) else r.w) for r in frame.itertuples()} == expected
