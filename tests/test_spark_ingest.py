"""Spark ingest engine: same template as the local engine, round trips, answers equal NetworkX,
errors naming file and line, nothing half-written, engine choice, and a driver-memory cap."""
import glob
import json
import math
import os
import subprocess
import sys
import textwrap

import networkx as nx
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import goffish
from goffish import cli
from goffish.generators import road_network, write_edge_list
from gofs.errors import InputError
from gofs.ingest.local import ingest_graph as local_ingest
from gofs.ingest.read_local import read_csv, read_edge_list, read_graph
from gofs.ingest.spark_text import read_ranges
from gofs.ingest import choose_engine
from gofs.ingest.spark import ingest_on_spark as spark_ingest
from tests import graphs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _template(path) -> dict:
    """{relative file: table} of a stored graph's template."""
    files = sorted(glob.glob(os.path.join(path, "v-*", "template", "**", "*.parquet"), recursive=True))
    return {f.split("/template/")[1]: pq.read_table(f) for f in files}


def _assert_same_graph(spark_manifest: dict, local_manifest: dict, spark_path, local_path,
                       num_files: int | None = None, ignored: tuple = ("uuid",)) -> dict:
    """Both engines wrote the same graph: manifests equal but for ``ignored`` keys, templates equal
    file by file (``num_files`` of them where given). Returns the Spark engine's template."""
    assert {k: v for k, v in spark_manifest.items() if k not in ignored} == \
        {k: v for k, v in local_manifest.items() if k not in ignored}
    ours, theirs = _template(spark_path), _template(local_path)
    assert sorted(ours) == sorted(theirs)
    if num_files is not None:
        assert len(ours) == num_files
    for name in ours:
        assert ours[name].equals(theirs[name]), name
    return ours


@pytest.fixture(scope="module")
def road_pair(spark, tmp_path_factory):
    """One road graph as a gzip edge list, ingested by both engines with the same partitioner."""
    base = tmp_path_factory.mktemp("pair")
    graph = road_network(900, seed=4)
    source = str(base / "road.txt.gz")
    write_edge_list(graph, source)
    timings, jobs = {}, {}
    spark_manifest = spark_ingest(spark, source, str(base / "spark.gofs"), num_partitions=3, partitioner="hash",
                                  weight="length", timings=timings, jobs=jobs)
    local_manifest = local_ingest(read_graph(source, weight="length"), str(base / "local.gofs"),
                                  num_partitions=3, partitioner="hash")
    return base, graph, spark_manifest, local_manifest, (timings, jobs)


def test_spark_engine_writes_the_local_engines_template(road_pair):
    base, _, spark_manifest, local_manifest, (timings, jobs) = road_pair
    assert set(timings) == set(jobs) == {"read", "ids", "partition", "subgraphs", "write"}
    for stage, work in jobs.items():
        assert work["jobs"] >= 1 and work["stages"] >= work["jobs"] and work["tasks"] >= work["stages"], stage
    _assert_same_graph(spark_manifest, local_manifest, base / "spark.gofs", base / "local.gofs", 2 * 3 + 2)


def test_job_profile_counts_the_jobs_and_stages_each_step_ran(spark):
    from gofs.spark_jobs import JobProfile

    seconds = {}
    profile = JobProfile(spark, seconds)
    with profile.stage("nothing"):
        pass
    with profile.stage("one job"):
        spark.range(10, numPartitions=2).collect()
    with profile.stage("two jobs, one shuffle"):
        frame = spark.range(100, numPartitions=3)
        frame.collect()
        frame.groupBy((frame.id % 7).alias("r")).count().collect()
    work = profile.summary()
    assert set(seconds) == set(work) == {"nothing", "one job", "two jobs, one shuffle"}
    assert work["nothing"] == {"jobs": 0, "stages": 0, "skipped": 0, "tasks": 0}
    assert work["one job"] == {"jobs": 1, "stages": 1, "skipped": 0, "tasks": 2}
    assert work["two jobs, one shuffle"]["jobs"] >= 2
    assert work["two jobs, one shuffle"]["stages"] >= 3


def test_exchange_files_give_each_task_its_rows_in_order_and_ids_one_bucket(tmp_path):
    """Batch d of an exchange file holds the rows sent to d, in their order, empty where none were
    sent; an id lands in the same bucket from any array it is met in, ints and text alike."""
    import pyarrow.fs as pafs
    from gofs.spark_jobs import id_buckets, put_exchange, take_exchange

    fs = pafs.LocalFileSystem()
    sent = pa.table({"x": np.arange(6), "s": list("abcdef")})
    put_exchange(fs, str(tmp_path / "a" / "0"), sent, np.array([2, 0, 2, 3, 0, 2]), 5)
    put_exchange(fs, str(tmp_path / "a" / "1"), sent.slice(0, 2), np.array([1, 2]), 5)
    paths = [str(tmp_path / "a" / "0"), str(tmp_path / "a" / "1")]
    got = {d: take_exchange(fs, paths, d).to_pydict() for d in range(5)}
    assert got == {0: {"x": [1, 4], "s": ["b", "e"]}, 1: {"x": [0], "s": ["a"]},
                   2: {"x": [0, 2, 5, 1], "s": ["a", "c", "f", "b"]}, 3: {"x": [3], "s": ["d"]},
                   4: {"x": [], "s": []}}
    assert sorted(os.listdir(tmp_path / "a")) == ["0", "1"]         # no staging file left
    for ids in (pa.array(np.arange(-50, 1000)), pa.array([str(i) for i in range(1000)])):
        buckets = id_buckets(ids, 7)
        assert buckets.min() == 0 and buckets.max() == 6 and np.bincount(buckets).min() > 100
        again = id_buckets(ids.take(pa.array(np.arange(len(ids))[::-1])), 7)
        assert (again[::-1] == buckets).all()


def test_spark_ingested_graph_answers_equal_networkx(spark, road_pair):
    base, graph, *_ = road_pair
    G = graphs.input_to_networkx(graph, "length")
    G.remove_nodes_from([v for v in list(G) if G.degree(v) == 0])   # an edge list has no isolated vertices
    g = goffish.open(str(base / "spark.gofs"), spark=spark)
    components = graphs.column(g.connected_components(progress=False), "component")
    assert graphs.as_partition(components) == {frozenset(c) for c in nx.connected_components(G)}
    source = min(G.nodes)
    distances = graphs.column(g.sssp(source, weight="length", progress=False), "distance")
    expected = nx.single_source_dijkstra_path_length(G, source, weight="length")
    assert all(math.isclose(distances[v], expected.get(v, math.inf), abs_tol=1e-9) for v in G.nodes)
    ranks = graphs.column(g.pagerank(progress=False), "pagerank")
    truth = nx.pagerank(G, weight=None)
    assert max(abs(ranks[v] - truth[v]) for v in G.nodes) < 1e-6


def test_cli_spark_engine_round_trip_of_a_csv_directory_with_string_ids(spark, tmp_path, capsys):
    G = nx.gnm_random_graph(300, 900, seed=3, directed=True)
    edges = pd.DataFrame([(f"n{u}", f"n{v}", (u + v) / 8) for u, v in G.edges()], columns=["src", "dst", "w"])
    (tmp_path / "in").mkdir()
    edges.iloc[:450].to_csv(tmp_path / "in" / "part1.csv", index=False)
    edges.iloc[450:].to_csv(tmp_path / "in" / "part2.csv", index=False)
    code = cli.main(["ingest", str(tmp_path / "in"), str(tmp_path / "g.gofs"), "--engine", "spark",
                     "--format", "csv", "--partitioner", "hash", "--partitions", "2", "--directed"])
    assert code == 0
    assert "ingest engine: spark" in capsys.readouterr().out
    g = goffish.open(str(tmp_path / "g.gofs"), spark=spark)
    assert g.manifest["id_type"] == "string" and g.num_edges == 900 and g.directed
    assert g.manifest["partitioner"] == "hash"
    assert [(f["name"], f["type"]) for f in g.manifest["edge_schema"]] == [("w", "double")]
    read_back = pa.concat_tables([g.read_edge_partition(p) for p in range(2)]).to_pandas()
    assert sorted(map(tuple, read_back[["src", "dst", "w"]].itertuples(index=False))) == \
        sorted(map(tuple, edges.itertuples(index=False)))
    ranks = graphs.column(g.pagerank(progress=False), "pagerank")
    truth = nx.pagerank(nx.relabel_nodes(G.subgraph([v for v in G if G.degree(v)]), lambda v: f"n{v}"))
    assert max(abs(ranks[v] - truth[v]) for v in truth) < 1e-6


def test_vertex_attribute_file_gives_the_local_engines_template(spark, tmp_path):
    """Vertex file first in the dense order, attributes typed over the whole column, nulls for
    vertices only in the edges, isolated vertices kept; a repeated id names its file and line."""
    G = nx.gnm_random_graph(120, 300, seed=5)
    edges = pd.DataFrame([(f"p{u}", f"p{v}", u * v % 7) for u, v in G.edges()], columns=["src", "dst", "hops"])
    edges.to_csv(tmp_path / "e.csv", index=False)
    people = [f"p{i}" for i in range(150, 90, -1)]           # p120..p150 only here (isolated), p0..p90 only in edges
    vertex_lines = ["age,name,score,city,member"] + [
        f"{i % 50},{name},{'' if i % 9 == 0 else i / 4},{'' if i % 11 == 0 else 'c' + str(i % 3)},"
        f"{str(i % 2 == 0).lower()}" for i, name in enumerate(people)]
    (tmp_path / "v.csv").write_text("\n".join(vertex_lines) + "\n")
    spark_manifest = spark_ingest(spark, str(tmp_path / "e.csv"), str(tmp_path / "spark.gofs"), num_partitions=3,
                                  partitioner="hash", vertices_path=str(tmp_path / "v.csv"), id_column="name")
    local_manifest = local_ingest(read_csv(tmp_path / "e.csv", vertices_path=tmp_path / "v.csv", id_column="name"),
                                  str(tmp_path / "local.gofs"), num_partitions=3, partitioner="hash")
    assert [(f["name"], f["type"]) for f in spark_manifest["vertex_schema"]] == \
        [("age", "int64"), ("score", "double"), ("city", "string"), ("member", "bool")]
    assert spark_manifest["num_vertices"] == 150
    ours = _assert_same_graph(spark_manifest, local_manifest, tmp_path / "spark.gofs", tmp_path / "local.gofs",
                              2 * 3 + 2)
    vertices = pa.concat_tables(ours[f] for f in sorted(ours) if "vertices" in f).to_pandas().set_index("id")
    assert vertices.loc["p150", "age"] == 0 and vertices.loc["p149", "score"] == 0.25
    assert vertices.loc["p0", ["age", "score", "city", "member"]].isna().all()

    (tmp_path / "v.csv").write_text("\n".join(vertex_lines[:5] + ["\n7,p148,1.0,x,true"] + vertex_lines[5:]) + "\n")
    target = tmp_path / "bad.gofs"
    with pytest.raises(InputError, match=r"v\.csv line 7, column 'name': duplicate vertex id 'p148'"):
        spark_ingest(spark, str(tmp_path / "e.csv"), str(target), vertices_path=str(tmp_path / "v.csv"),
                     id_column="name", partitioner="hash")
    assert not target.exists()


def test_parquet_vertex_file_with_integer_ids_gives_the_local_engines_template(spark, tmp_path):
    """Typed columns: integer ids (int32 in the vertex file, int64 in the edges), a schema cast."""
    G = nx.gnm_random_graph(60, 150, seed=8)
    pq.write_table(pa.table({"src": [u for u, _ in G.edges()], "dst": [v for _, v in G.edges()]}),
                   tmp_path / "e.parquet")
    pq.write_table(pa.table({"key": pa.array(range(70, 30, -1), pa.int32()),
                             "rank": [str(i) for i in range(40)], "label": [f"l{i % 4}" for i in range(40)]}),
                   tmp_path / "v.parquet")
    options = {"vertices_path": str(tmp_path / "v.parquet"), "id_column": "key", "schema": {"rank": "int"}}
    spark_manifest = spark_ingest(spark, str(tmp_path / "e.parquet"), str(tmp_path / "spark.gofs"), num_partitions=2,
                                  partitioner="hash", **options)
    local_manifest = local_ingest(read_graph(str(tmp_path / "e.parquet"), **options), str(tmp_path / "local.gofs"),
                                  num_partitions=2, partitioner="hash")
    assert spark_manifest["id_type"] == "int64"
    assert [(f["name"], f["type"]) for f in spark_manifest["vertex_schema"]] == [("rank", "int64"), ("label", "string")]
    _assert_same_graph(spark_manifest, local_manifest, tmp_path / "spark.gofs", tmp_path / "local.gofs")


@pytest.mark.parametrize("step", [2, 7, 10_000])
def test_edge_list_read_in_byte_ranges_gives_the_local_readers_rows_in_line_order(spark, tmp_path, step):
    """Ranges of a few bytes cut lines, comments and blank lines anywhere; the rows each range hands
    on, in range order (edge ids: line order), and their types equal the local reader's, and ids
    text in one range but integers in another are left to Spark's reader (they are typed over the
    whole input)."""
    def kept(directory):
        def consume(r, table):
            pq.write_table(table, f"{directory}/{r:05d}.parquet")
        os.makedirs(directory)
        return consume

    def rows_of(directory, found):
        tables = [pq.read_table(f"{directory}/{r:05d}.parquet") for r in np.flatnonzero(found.rows)]
        assert [t.num_rows for t in tables] == [int(c) for c in found.rows[found.rows > 0]]
        return pa.concat_tables(tables)

    path = tmp_path / "e.txt"
    path.write_bytes(b"# roads\n1 2 0.5\n\n2 3 1.5\n% note\n  3   4 2.0\r\n40 5 1e3\n5 6 -1")
    found = read_ranges(spark, [str(path)], ["src", "dst", "w"], {"src": "auto", "dst": "auto", "w": "float"},
                        kept(str(tmp_path / "out")), range_bytes=step)
    local = read_edge_list(path, weight="w").edges
    assert found.count == local.num_rows == 5 and not found.text_ids
    assert rows_of(str(tmp_path / "out"), found).equals(local.select(["src", "dst", "w"]))

    path.write_bytes(b"1 2\n2 3\n3 4\nx y\n")
    mixed = read_ranges(spark, [str(path)], ["src", "dst"], {"src": "auto", "dst": "auto"},
                        kept(str(tmp_path / "mixed")), range_bytes=step)
    assert (mixed is None) == (step < 16)
    if mixed is not None:
        assert mixed.text_ids
        assert rows_of(str(tmp_path / "mixed"), mixed).column("src").to_pylist() == ["1", "2", "3", "x"]


def test_multilevel_on_spark_engine_is_balanced_and_subgraphs_are_local_components(spark, tmp_path):
    graph = road_network(1600, seed=9)
    source = str(tmp_path / "road.txt")
    write_edge_list(graph, source)
    manifest = spark_ingest(spark, source, str(tmp_path / "g.gofs"), num_partitions=4, weight="length",
                            driver_budget_edges=300, cluster_rounds=2, refine_iterations=2)
    assert manifest["partitioner"] == "multilevel" and manifest["balance"] <= 1.05 + 4 / 1600
    g = goffish.open(str(tmp_path / "g.gofs"), spark=spark)
    vt = pa.concat_tables([g.read_vertex_partition(p, internal=True) for p in range(4)]).to_pandas()
    et = pa.concat_tables([g.read_edge_partition(p, internal=True) for p in range(4)]).to_pandas()
    part_of = np.repeat(np.arange(4), [p["num_vertices"] for p in g.partitions])
    assert (vt.vid.to_numpy() == np.arange(len(vt))).all()
    local = et[~et.remote]
    H = nx.Graph()
    H.add_nodes_from(vt.vid)
    H.add_edges_from(zip(local.src, local.dst))
    assert sorted(sorted(c) for c in nx.connected_components(H)) == \
        sorted(sorted(group.vid) for _, group in vt.groupby("sg"))
    for p in range(4):
        rows = g.read_edge_partition(p, internal=True).column("src").to_numpy()
        assert (part_of[rows] == p).all()
    hashed_cut = goffish.ingest(graph, str(tmp_path / "h.gofs"), num_partitions=4, partitioner="hash") \
        .manifest["cut_edges"]
    assert manifest["cut_edges"] < 0.4 * hashed_cut


def test_malformed_line_names_the_file_and_its_line_and_leaves_nothing(spark, tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.txt").write_text("# roads\n1 2 0.5\n2 3 1.5\n")
    (tmp_path / "in" / "b.txt").write_text("# more roads\n\n3 4 2.0\n4 5 abc\n5 6 1.0\n")
    target = tmp_path / "g.gofs"
    with pytest.raises(InputError, match=r"b\.txt line 4, column 'length': 'abc' is not a number"):
        spark_ingest(spark, str(tmp_path / "in"), str(target), format="edgelist", weight="length")
    (tmp_path / "in" / "b.txt").write_text("3 4 2.0\n4 5\n")
    with pytest.raises(InputError, match=r"b\.txt line 2: expected 3 fields \(src dst length\), found 2"):
        spark_ingest(spark, str(tmp_path / "in"), str(target), format="edgelist", weight="length")
    (tmp_path / "e.csv").write_text("src,dst\n1,2\n\n2,\n")
    with pytest.raises(InputError, match=r"e\.csv line 4, column 'dst': missing vertex id"):
        spark_ingest(spark, str(tmp_path / "e.csv"), str(target))
    with pytest.raises(InputError, match="no such file"):
        spark_ingest(spark, str(tmp_path / "missing.txt"), str(target))
    assert not target.exists()
    assert sorted(os.listdir(tmp_path)) == ["e.csv", "in"]


def test_engine_choice(tmp_path):
    small = tmp_path / "small.txt"
    small.write_text("1 2\n" * 100)
    assert choose_engine(str(small), "auto", threshold=1000) == "local"
    assert choose_engine(str(small), "auto", threshold=100) == "spark"
    assert choose_engine(str(small), "local", threshold=1) == "local"
    assert choose_engine(nx.path_graph(3), "auto", threshold=0) == "local"
    with pytest.raises(ValueError, match="engine='spark' reads paths or Spark DataFrames"):
        choose_engine(nx.path_graph(3), "spark")
    with pytest.raises(ValueError, match="engine must be one of"):
        choose_engine(str(small), "dask")
    with pytest.raises(ValueError, match="vertices_path is read with format 'csv' or 'parquet'"):
        spark_ingest(None, str(small), str(tmp_path / "g.gofs"), vertices_path=str(small))
    with pytest.raises(TypeError, match="unknown option"):
        spark_ingest(None, str(small), str(tmp_path / "g.gofs"), colour="red")


_CAPPED = textwrap.dedent("""
    import resource, sys
    from goffish.session import session
    spark = session(master="local[1]", conf={"spark.driver.memory": "512m", "spark.ui.enabled": "false",
                                             "spark.sql.shuffle.partitions": "2"})
    spark.range(10).count()
    from gofs.ingest import ingest
    from gofs.ingest.read_local import read_csv, read_graph
    from gofs.ingest.spark import ingest_on_spark as spark_ingest

    def vm():
        return int(next(l for l in open("/proc/self/status") if l.startswith("VmSize")).split()[1]) * 1024

    cap = vm() + int(sys.argv[3]) * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    spark_ingest(spark, sys.argv[1], sys.argv[2] + "/spark.gofs", num_partitions=2, partitioner="hash",
                 weight="length")
    print("SPARK OK", flush=True)
    try:
        ingest(read_graph(sys.argv[1], weight="length"), sys.argv[2] + "/local.gofs", num_partitions=2,
               partitioner="hash")
        print("LOCAL OK")
    except Exception as exc:          # pandas' parser may report the MemoryError as a parse error
        print("LOCAL FAILED", type(exc).__name__, exc)
""")


def test_spark_engine_runs_with_the_driver_capped_far_below_the_graph(tmp_path):
    """The Python driver may grow 40 MiB after start-up (RLIMIT_AS) and the JVM has a 512 MiB heap;
    the graph's local ingest needs about 100 MiB more (measured), and fails under the same cap."""
    graph = road_network(200_000, seed=1)
    source = str(tmp_path / "road.txt.gz")
    write_edge_list(graph, source)
    env = dict(os.environ, PYTHONPATH=ROOT, ARROW_DEFAULT_MEMORY_POOL="system", MALLOC_ARENA_MAX="2")
    done = subprocess.run([sys.executable, "-c", _CAPPED, source, str(tmp_path), "40"], env=env,
                          capture_output=True, text=True, timeout=600)
    assert "SPARK OK" in done.stdout, done.stderr[-3000:]
    assert "LOCAL FAILED" in done.stdout and "LOCAL OK" not in done.stdout, done.stdout + done.stderr[-3000:]
    manifest = json.loads(open(sorted(glob.glob(str(tmp_path / "spark.gofs" / "_log" / "*.json")))[-1]).read())
    assert manifest["graph"]["num_edges"] == graph.edges.num_rows


def test_vertex_dataframe_beside_an_edge_dataframe_gives_the_local_engines_template(spark, tmp_path):
    """A GraphFrame's pair of DataFrames (isolated vertices kept, vertex attributes typed) stores
    as the local engine stores the same frames collected; a repeated id names its row."""
    from gofs.ingest.read_local import from_dataframes

    vertices = spark.createDataFrame([(i, f"v{i}", i / 2) for i in (9, 3, 12, 0, 7)], "id long, name string, x double")
    edges = spark.createDataFrame([(0, 1, 2.0), (1, 2, 1.5), (3, 4, 1.0), (4, 3, 0.5)], "src long, dst long, w double")
    spark_manifest = spark_ingest(spark, edges, str(tmp_path / "spark.gofs"), num_partitions=2, partitioner="hash",
                                  directed=True, vertices=vertices)
    local_manifest = local_ingest(from_dataframes(vertices, edges, directed=True), str(tmp_path / "local.gofs"),
                                  num_partitions=2, partitioner="hash")
    assert spark_manifest["num_vertices"] == 8
    _assert_same_graph(spark_manifest, local_manifest, tmp_path / "spark.gofs", tmp_path / "local.gofs",
                       ignored=("uuid", "name"))

    target = tmp_path / "bad.gofs"
    repeated = vertices.unionByName(spark.createDataFrame([(3, "again", 0.0)], "id long, name string, x double"))
    with pytest.raises(InputError, match=r"vertices DataFrame row 5, column 'id': duplicate vertex id '?3"):
        spark_ingest(spark, edges, str(target), vertices=repeated, partitioner="hash")
    assert not target.exists()


def test_parallel_cut_edges_self_loops_and_empty_partitions_give_the_local_engines_template(spark, tmp_path):
    """Cut edges repeated and reversed (each matched to its far end's numbers by edge id), a self-loop,
    and more partitions than vertices (partitions without vertices or without edges)."""
    lines = ["10 11", "10 11", "11 10", "12 12", "12 13", "13 14", "14 12", "11 10", "15 10", "16 17"]
    (tmp_path / "g.txt").write_text("\n".join(lines) + "\n")
    spark_manifest = spark_ingest(spark, str(tmp_path / "g.txt"), str(tmp_path / "spark.gofs"), num_partitions=11,
                                  partitioner="hash")
    local_manifest = local_ingest(read_graph(str(tmp_path / "g.txt")), str(tmp_path / "local.gofs"),
                                  num_partitions=11, partitioner="hash")
    sizes = [p["num_vertices"] for p in spark_manifest["partitions"]]
    assert 0 in sizes and spark_manifest["cut_edges"] >= 5
    _assert_same_graph(spark_manifest, local_manifest, tmp_path / "spark.gofs", tmp_path / "local.gofs", 2 * 11 + 2)
