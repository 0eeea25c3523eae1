"""save_result: values aligned and written by Spark tasks, exact types, clear errors, nothing on failure."""
from pathlib import Path

import networkx as nx
import pyarrow as pa
import pytest

import goffish
from gofs import files
from gofs.errors import InputError


@pytest.fixture()
def graph(spark, tmp_path):
    G = nx.relabel_nodes(nx.path_graph(9), {v: v * 10 for v in range(9)})
    return goffish.ingest(G, str(tmp_path / "g.gofs"), num_partitions=3, spark=spark)


def _read(g, instance):
    table = pa.concat_tables([g.read_vertex_partition(p, instance=instance) for p in range(g.num_partitions)])
    return table, {row["id"]: row for row in table.to_pylist()}


def test_values_keep_their_exact_types_and_the_driver_reads_no_template(spark, graph):
    frame = spark.createDataFrame([(0, 2**60 + 1, None, "a"), (30, None, 1.5, None), (80, 7, 2.5, "c")],
                                  "id long, big long, x double, s string")
    with files.traced() as trace:
        iid = graph.save_result(frame, start=1.0)
    assert not [path for path, _ in trace if "/template/" in path]
    table, rows = _read(graph, iid)
    assert [table.schema.field(n).type for n in ("big", "x", "s")] == [pa.int64(), pa.float64(), pa.string()]
    assert (rows[0]["big"], rows[30]["big"], rows[80]["big"]) == (2**60 + 1, None, 7)
    assert (rows[30]["x"], rows[80]["s"], rows[10]["big"], rows[10]["s"]) == (1.5, "c", None, None)


@pytest.mark.parametrize("rows, schema, message", [
    ([(0, 1.0), (999, 2.0)], "id long, x double", "unknown vertex 999"),
    ([(0, 1.0), (0, 2.0)], "id long, x double", "vertex 0 given twice"),
    ([(None, 1.0)], "id long, x double", "vertex id is missing"),
    ([("0", 1.0)], "id string, x double", "ids are string but the graph's ids are int64"),
    ([(0, 1.0)], "vid long, x double", "no 'id' column"),
])
def test_bad_values_are_refused_and_nothing_is_written(spark, graph, rows, schema, message):
    before = sorted(p.name for p in Path(graph.root).rglob("*"))
    with pytest.raises(InputError, match=message):
        graph.save_result(spark.createDataFrame(rows, schema), start=0.0)
    assert sorted(p.name for p in Path(graph.root).rglob("*")) == before
    assert goffish.open(graph.path).instances == []


def test_type_change_against_earlier_instances_is_refused(spark, graph):
    graph.save_result(spark.createDataFrame([(0, 1, "unused")], "id long, x int, s string"), start=0.0, columns=["x"])
    assert graph.instances[-1]["vertex_attributes"] == ["x"]
    with pytest.raises(InputError, match="field 'x': type double differs from earlier instances \\(int32\\)"):
        graph.save_result(spark.createDataFrame([(0, 1.0)], "id long, x double"), start=1.0)
