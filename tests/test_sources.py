"""Every input format becomes the expected GraphInput; bad input names file, place and column."""
import gzip

import networkx as nx
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gofs.errors import InputError
from gofs.ingest.read_local import (from_dataframes, from_graphframe, from_networkx, from_pandas, read_csv,
                          read_edge_list, read_graph, read_parquet)


def write(path, text):
    path.write_text(text)
    return path


# --------------------------------------------------------------------------- edge lists

def test_edge_list_skips_comments_and_blank_lines(tmp_path):
    path = write(tmp_path / "g.txt", "# Directed graph\n% also a comment\n\n0\t1\n1  2\n  # indented comment\n\n2 0\n")
    g = read_edge_list(path, directed=True)
    assert g.edges.to_pydict() == {"src": [0, 1, 2], "dst": [1, 2, 0]}
    assert g.edges.schema.field("src").type == pa.int64()
    assert g.directed and g.vertices is None and g.name == "g"


def test_edge_list_comments_between_edges(tmp_path):
    path = write(tmp_path / "g.txt", "0 1\n# middle\n1 2\n%tail\n")
    assert read_edge_list(path).edges.to_pydict() == {"src": [0, 1], "dst": [1, 2]}


def test_edge_list_weight_is_float(tmp_path):
    path = write(tmp_path / "w.txt", "1 2 3\n2 3 0.5\n")
    g = read_edge_list(path, weight="weight")
    assert g.edges.to_pydict() == {"src": [1, 2], "dst": [2, 3], "weight": [3.0, 0.5]}
    assert g.edges.schema.field("weight").type == pa.float64()
    assert not g.directed


def test_edge_list_gzip_with_attribute_names_and_schema(tmp_path):
    path = tmp_path / "g.edges.gz"
    path.write_bytes(gzip.compress(b"# header\n1 2 0.5 road 3\n2 3 1.5 rail 4\n"))
    g = read_edge_list(path, attribute_names=["w", "kind", "lanes"], schema={"kind": "str", "lanes": "int"})
    assert g.edges.to_pydict() == {"src": [1, 2], "dst": [2, 3], "w": [0.5, 1.5],
                                   "kind": ["road", "rail"], "lanes": [3, 4]}
    assert [f.type for f in g.edges.schema] == [pa.int64(), pa.int64(), pa.float64(), pa.string(), pa.int64()]
    assert g.name == "g"


@pytest.mark.parametrize("id_type", ["auto", "str"])
def test_edge_list_string_ids(tmp_path, id_type):
    path = write(tmp_path / "s.txt", "alice bob\nbob 007\n")
    g = read_edge_list(path, id_type=id_type)
    assert g.edges.to_pydict() == {"src": ["alice", "bob"], "dst": ["bob", "007"]}
    assert g.edges.schema.field("src").type == pa.string()


def test_edge_list_auto_keeps_text_of_numeric_looking_ids(tmp_path):
    path = write(tmp_path / "s.txt", "1.0 2\n2 x\n")
    assert read_edge_list(path).edges.to_pydict() == {"src": ["1.0", "2"], "dst": ["2", "x"]}


def test_edge_list_str_ids_keep_leading_zeros(tmp_path):
    path = write(tmp_path / "s.txt", "007 1\n")
    assert read_edge_list(path, id_type="str").edges.to_pydict() == {"src": ["007"], "dst": ["1"]}


def test_edge_list_empty_file(tmp_path):
    g = read_edge_list(write(tmp_path / "e.txt", "# nothing\n"), weight="w")
    assert g.edges.num_rows == 0
    assert g.edges.column_names == ["src", "dst", "w"]


def test_edge_list_unnamed_extra_column_names_the_line(tmp_path):
    path = write(tmp_path / "edges.txt", "# c\n1 2\n2 3 9\n")
    with pytest.raises(InputError, match=r"edges\.txt line 3: expected 2 fields \(src dst\), found 3; "
                                         r"name the extra columns"):
        read_edge_list(path)


def test_edge_list_short_line_names_the_line(tmp_path):
    path = write(tmp_path / "edges.txt", "1 2 1.0\n\n# c\n2\n")
    with pytest.raises(InputError, match=r"edges\.txt line 4: expected 3 fields \(src dst weight\), found 1"):
        read_edge_list(path, weight="weight")


def test_edge_list_non_numeric_weight_names_line_and_column(tmp_path):
    path = write(tmp_path / "edges.txt", "# a\n# b\n1 2 1\n\n2 3 2\n3 4 5\n% c\n4 5 abc\n5 6 1\n")
    with pytest.raises(InputError, match=r"edges\.txt line 8, column 'weight': 'abc' is not a number"):
        read_edge_list(path, weight="weight")


def test_edge_list_int_ids_name_the_first_bad_line(tmp_path):
    path = write(tmp_path / "edges.txt", "1 2\n2 3\nx 4\n4 y\n")
    with pytest.raises(InputError, match=r"edges\.txt line 3, column 'src': 'x' is not an integer"):
        read_edge_list(path, id_type="int")


def test_edge_list_int_ids_out_of_range(tmp_path):
    path = write(tmp_path / "edges.txt", "1 2\n2 99999999999999999999\n")
    with pytest.raises(InputError, match=r"edges\.txt line 2, column 'dst'"):
        read_edge_list(path, id_type="int")


def test_edge_list_schema_must_name_attribute_columns(tmp_path):
    with pytest.raises(InputError, match=r"edges\.txt: schema names column 'w'"):
        read_edge_list(write(tmp_path / "edges.txt", "1 2\n"), schema={"w": "int"})


def test_edge_list_bad_utf8_names_the_line(tmp_path):
    path = tmp_path / "edges.txt"
    path.write_bytes(b"a b\nc \xff\n")
    with pytest.raises(InputError, match=r"edges\.txt line 2: not valid UTF-8"):
        read_edge_list(path)


# --------------------------------------------------------------------------- CSV

def test_csv_with_vertices(tmp_path):
    edges = write(tmp_path / "e.csv", "from,to,w,kind\n1,2,0.5,a\n2,3,,b\n")
    vertices = write(tmp_path / "v.csv", "key,label,active\n1,x,true\n2,y,false\n3,,true\n4,z,false\n")
    g = read_csv(edges, directed=True, src="from", dst="to", vertices_path=vertices, id_column="key")
    assert g.edges.to_pydict() == {"src": [1, 2], "dst": [2, 3], "w": [0.5, None], "kind": ["a", "b"]}
    assert g.vertices.to_pydict() == {"id": [1, 2, 3, 4], "label": ["x", "y", None, "z"],
                                      "active": [True, False, True, False]}
    assert [f.type for f in g.edges.schema] == [pa.int64(), pa.int64(), pa.float64(), pa.string()]
    assert g.directed and g.name == "e"


def test_csv_ids_are_strings_if_any_file_has_a_non_integer_id(tmp_path):
    edges = write(tmp_path / "e.csv", "src,dst\n1,2\n")
    vertices = write(tmp_path / "v.csv", "id\n1\n2\nhub\n")
    g = read_csv(edges, vertices_path=vertices)
    assert g.edges.to_pydict() == {"src": ["1"], "dst": ["2"]}
    assert g.vertices.to_pydict() == {"id": ["1", "2", "hub"]}


def test_csv_schema_casts(tmp_path):
    path = write(tmp_path / "e.csv", "src,dst,lanes,code\n1,2,3,007\n")
    g = read_csv(path, schema={"lanes": "float", "code": "str"})
    assert g.edges.to_pydict() == {"src": [1], "dst": [2], "lanes": [3.0], "code": ["007"]}


def test_csv_missing_endpoint_column(tmp_path):
    path = write(tmp_path / "edges.csv", "a,dst\n1,2\n")
    with pytest.raises(InputError, match=r"edges\.csv: no column 'src' \(columns: a, dst\)"):
        read_csv(path)


def test_csv_missing_vertex_id_column(tmp_path):
    edges = write(tmp_path / "edges.csv", "src,dst\n1,2\n")
    vertices = write(tmp_path / "people.csv", "name\nx\n")
    with pytest.raises(InputError, match=r"people\.csv: no column 'id' \(columns: name\)"):
        read_csv(edges, vertices_path=vertices)


def test_csv_schema_failure_names_line_and_column(tmp_path):
    path = write(tmp_path / "edges.csv", "src,dst,w\n1,2,1\n\n2,3,2\n3,4,heavy\n")
    with pytest.raises(InputError, match=r"edges\.csv line 5, column 'w': 'heavy' is not an integer"):
        read_csv(path, schema={"w": "int"})


def test_csv_null_id_names_line(tmp_path):
    path = write(tmp_path / "edges.csv", "src,dst\n1,2\n2,\n")
    with pytest.raises(InputError, match=r"edges\.csv line 3, column 'dst': missing vertex id"):
        read_csv(path)


def test_csv_wrong_field_count_names_line(tmp_path):
    path = write(tmp_path / "edges.csv", "src,dst,w\n1,2,3\n2,3\n")
    with pytest.raises(InputError, match=r"edges\.csv line 3: expected 3 fields"):
        read_csv(path)


def test_csv_schema_unknown_column(tmp_path):
    path = write(tmp_path / "edges.csv", "src,dst\n1,2\n")
    with pytest.raises(InputError, match=r"schema names column 'w'.*edges\.csv: src, dst"):
        read_csv(path, schema={"w": "float"})


# --------------------------------------------------------------------------- Parquet

def test_parquet_file_and_directory(tmp_path):
    pq.write_table(pa.table({"a": pa.array([1, 2], pa.int32()), "b": [2, 3], "w": [0.5, 1.5]}),
                   tmp_path / "e.parquet")
    (tmp_path / "vdir").mkdir()
    pq.write_table(pa.table({"id": [1, 2, 3], "label": ["x", "y", "z"]}), tmp_path / "vdir" / "part-0.parquet")
    g = read_parquet(tmp_path / "e.parquet", src="a", dst="b", vertices_path=tmp_path / "vdir")
    assert g.edges.to_pydict() == {"src": [1, 2], "dst": [2, 3], "w": [0.5, 1.5]}
    assert g.edges.schema.field("src").type == pa.int64()
    assert g.vertices.to_pydict() == {"id": [1, 2, 3], "label": ["x", "y", "z"]}


def test_parquet_directory_of_edges_with_dictionary_ids(tmp_path):
    (tmp_path / "edges").mkdir()
    ids = pa.array(["a", "b"]).dictionary_encode()
    pq.write_table(pa.table({"src": ids, "dst": ids, "t": [1, 2]}), tmp_path / "edges" / "part-0.parquet")
    g = read_graph(tmp_path / "edges", directed=True)
    assert g.edges.to_pydict() == {"src": ["a", "b"], "dst": ["a", "b"], "t": [1, 2]}
    assert g.edges.schema.field("src").type == pa.string()
    assert g.name == "edges"


def test_parquet_schema_failure_names_row_and_column(tmp_path):
    pq.write_table(pa.table({"src": ["a", "b"], "dst": ["b", "c"], "w": ["1", "x"]}), tmp_path / "edges.parquet")
    with pytest.raises(InputError, match=r"edges\.parquet row 1, column 'w': 'x' is not a number"):
        read_parquet(tmp_path / "edges.parquet", schema={"w": "float"})


def test_parquet_null_id_names_row(tmp_path):
    pq.write_table(pa.table({"src": [1, None], "dst": [2, 3]}), tmp_path / "edges.parquet")
    with pytest.raises(InputError, match=r"edges\.parquet row 1, column 'src': missing vertex id"):
        read_parquet(tmp_path / "edges.parquet")


def test_parquet_float_ids_rejected(tmp_path):
    pq.write_table(pa.table({"src": [1.0], "dst": [2.0]}), tmp_path / "edges.parquet")
    with pytest.raises(InputError, match=r"edges\.parquet, column 'src': vertex ids must be integers or strings"):
        read_parquet(tmp_path / "edges.parquet")


# --------------------------------------------------------------------------- in-memory

def test_from_pandas():
    edges = pd.DataFrame({"u": ["a", "b"], "v": ["b", "c"], "w": [1.0, 2.0]}, index=[10, 11])
    vertices = pd.DataFrame({"name": ["a", "b", "c"], "age": [1, 2, 3]})
    g = from_pandas(edges, vertices, src="u", dst="v", id_column="name")
    assert g.edges.to_pydict() == {"src": ["a", "b"], "dst": ["b", "c"], "w": [1.0, 2.0]}
    assert g.vertices.to_pydict() == {"id": ["a", "b", "c"], "age": [1, 2, 3]}
    assert g.edges.schema.field("src").type == pa.string()


def test_from_pandas_null_id_names_row():
    with pytest.raises(InputError, match=r"edges DataFrame row 1, column 'dst': missing vertex id"):
        from_pandas(pd.DataFrame({"src": [1, 2], "dst": [2, None]}))


def test_from_networkx_attributes_and_string_ids():
    G = nx.MultiDiGraph(name="toy")
    G.add_node("a", age=3)
    G.add_node(7)
    G.add_edge("a", 7, w=1.5)
    G.add_edge("a", 7, w=2.5, kind="x")
    G.add_node("lonely")
    g = from_networkx(G)
    assert g.directed and g.name == "toy"
    assert g.vertices.to_pydict() == {"id": ["a", "7", "lonely"], "age": [3, None, None]}
    assert g.edges.to_pydict() == {"src": ["a", "a"], "dst": ["7", "7"], "w": [1.5, 2.5], "kind": [None, "x"]}
    assert g.vertices.schema.field("age").type == pa.int64()


def test_from_networkx_int_ids_undirected():
    G = nx.path_graph(3)
    g = from_networkx(G)
    assert not g.directed
    assert g.edges.to_pydict() == {"src": [0, 1], "dst": [1, 2]}
    assert g.vertices.to_pydict() == {"id": [0, 1, 2]}
    assert g.edges.schema.field("src").type == pa.int64()


def test_from_networkx_mixed_attribute_types():
    G = nx.Graph()
    G.add_node(1, tag="x")
    G.add_node(2, tag=5)
    with pytest.raises(InputError, match=r"node attribute 'tag'"):
        from_networkx(G)


def test_from_dataframes(spark):
    vertices = spark.createDataFrame([(1, "a"), (2, "b"), (3, None)], "id long, label string")
    edges = spark.createDataFrame([(1, 2, 0.5), (2, 3, None)], "src long, dst long, w double")
    g = from_dataframes(vertices, edges)
    assert g.directed
    assert sorted(zip(*g.edges.to_pydict().values())) == [(1, 2, 0.5), (2, 3, None)]
    assert sorted(g.vertices.to_pydict()["id"]) == [1, 2, 3]
    assert [f.type for f in g.edges.schema] == [pa.int64(), pa.int64(), pa.float64()]
    assert g.vertices.schema.field("label").type == pa.string()


def test_from_dataframes_empty_and_null_ids(spark):
    empty = from_dataframes(None, spark.createDataFrame([], "src string, dst string"))
    assert empty.edges.num_rows == 0 and empty.edges.schema.field("src").type == pa.string()
    with pytest.raises(InputError, match=r"edges DataFrame row 0, column 'dst': missing vertex id"):
        from_dataframes(None, spark.createDataFrame([(1, None)], "src long, dst long"))


def test_from_graphframe(spark):
    graphframes = pytest.importorskip("graphframes")
    vertices = spark.createDataFrame([("a",), ("b",)], "id string")
    edges = spark.createDataFrame([("a", "b", 1)], "src string, dst string, n int")
    g = from_graphframe(graphframes.GraphFrame(vertices, edges))
    assert g.edges.to_pydict() == {"src": ["a"], "dst": ["b"], "n": [1]}
    assert sorted(g.vertices.to_pydict()["id"]) == ["a", "b"]
    assert read_graph(graphframes.GraphFrame(vertices, edges)).edges.num_rows == 1


# --------------------------------------------------------------------------- dispatch

def test_read_graph_guesses_format(tmp_path):
    write(tmp_path / "g.el", "1 2\n")
    write(tmp_path / "g.csv", "src,dst\n1,2\n")
    with gzip.open(tmp_path / "g.csv.gz", "wt") as f:
        f.write("src,dst\n1,2\n")
    pq.write_table(pa.table({"src": [1], "dst": [2]}), tmp_path / "g.parquet")
    for name in ("g.el", "g.csv", "g.csv.gz", "g.parquet"):
        assert read_graph(tmp_path / name).edges.to_pydict() == {"src": [1], "dst": [2]}, name
    assert read_graph(str(tmp_path / "g.csv"), format="csv", directed=True).directed


def test_read_graph_in_memory_objects():
    assert read_graph(nx.path_graph(2)).edges.num_rows == 1
    assert read_graph(pd.DataFrame({"src": [1], "dst": [2]})).edges.num_rows == 1


def test_read_graph_missing_path(tmp_path):
    with pytest.raises(InputError, match=r"nowhere\.txt: no such file"):
        read_graph(tmp_path / "nowhere.txt")


def test_read_graph_unknown_suffix(tmp_path):
    with pytest.raises(InputError, match=r"graph\.xyz: cannot tell the format"):
        read_graph(write(tmp_path / "graph.xyz", "1 2\n"))
