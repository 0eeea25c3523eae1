"""A corpus of bad stream updates and bad CGQL queries: each gets an error naming the field and value
(or the query's line and column), and nothing is applied half-way: a refused batch changes nothing,
a refused update in an accepted batch is listed in ``s.rejected`` and has no effect."""
import numpy as np
import pandas as pd
import pytest

import goffish
from gofs.errors import InputError
from gofs.ingest.read_local import from_pandas
from hatrick.cgql import CGQLError, parse
from hatrick.cgql.planner import plan
from hatrick.updates import UpdateError
from hatrick_reference import live_edge_counts

N = 12


@pytest.fixture
def graph(tmp_path):
    edges = pd.DataFrame({"src": np.arange(N - 1), "dst": np.arange(1, N), "length": 1.0})
    return goffish.ingest(from_pandas(edges, pd.DataFrame({"id": np.arange(N)})), str(tmp_path / "g.gofs"),
                          num_partitions=2, partitioner="hash")


def row(op, seq=1, producer="p", **fields):
    return {"op": op, "producer": producer, "seq": seq, "time": float(seq if isinstance(seq, int) else 0), **fields}


GOOD = row("add_edge", 100, src=0, dst=5)

# (update, what the error must say): refused in a batch with a good update, so nothing of it applies
MALFORMED = [
    (row("add_edg", src=1, dst=2), "unknown op 'add_edg'"),
    (row(None, src=1, dst=2), "field 'op' is missing"),
    (row("add_edge", producer=None, src=1, dst=2), "field 'producer' is missing"),
    (row("add_edge", seq=None, src=1, dst=2), "field 'seq' must be an integer"),
    (row("add_edge", seq=1.5, src=1, dst=2), "field 'seq' must be an integer"),
    (row("add_edge", seq="abc", src=1, dst=2), "field 'seq' must be an integer"),
    (row("add_edge", seq=-1, src=1, dst=2), r"field 'seq' must be an integer in \[0, 2\*\*62\), got -1"),
    (row("add_edge", seq=2 ** 63 - 1, src=1, dst=2), r"in \[0, 2\*\*62\), got 9223372036854775807"),
    (row("add_edge", dst=2), "field 'src' is missing"),
    (row("add_edge", src=1), "field 'dst' is missing"),
    (row("remove_edge", src="a", dst=2), "field 'src': ids of this graph are integers"),
    (row("add_edge", src=1, dst=2.5), "field 'dst': ids of this graph are integers"),
    (row("add_vertex", id="x"), "field 'id': ids of this graph are integers"),
    (row("remove_vertex"), "field 'id' is missing"),
    (row("set_vertex", id=1, value=3.0), "field 'attribute' must name an attribute"),
    (row("set_edge", src=0, dst=1, attribute="", value=3.0), "field 'attribute' must name an attribute"),
    (row("set_vertex", id=1, attribute="w", value=[1, 2]), "field 'value': list values are not supported"),
    (row("set_vertex", id=1, attribute="w", value={"x": 1}), "field 'value': dict values are not supported"),
    ({**row("add_vertex", id=1), "time": "noon"}, "field 'time' must be a number"),
]


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("update,message", MALFORMED, ids=[m for _, m in MALFORMED])
def test_a_malformed_update_refuses_its_batch_and_names_field_and_value(graph, update, message):
    s = graph.stream()
    edges, batch = live_edge_counts(s.edges(), False), s.state.batch
    with pytest.raises(UpdateError, match=message) as info:
        s.push([GOOD, update])
    assert len(info.value.rejected) == 1
    assert (s.state.batch, s.hwm, len(s.rejected)) == (batch, {}, 0)
    assert live_edge_counts(s.edges(), False) == edges
    report = s.push([GOOD, update], errors="report")            # or: skip it, apply the rest
    assert report.applied == 1 and s.rejected.reason.str.contains(message).all()


@pytest.mark.parametrize("updates,message", [
    ([{"op": "add_vertex", "id": 1, "producer": "p"}], "no 'seq' column"),
    ([row("add_vertex", id=1, weight=3)], "unknown column 'weight'"),
    ([("add_vertex", 1)], "list of dicts is expected, item 0 is tuple"),
    (42, "expected a pandas/Spark DataFrame or a list of dicts, got int"),
])
def test_a_batch_of_the_wrong_shape_is_refused_whole(graph, updates, message):
    s = graph.stream()
    with pytest.raises(InputError, match=message):
        s.push(updates)
    assert s.state.batch == 0


# (first batch, second batch, what s.rejected must say): conflicts are listed; the rest applies
CONFLICTS = [
    ([], [row("remove_edge", 2, src=0, dst=7)], "no such edge"),
    ([], [row("set_edge", 2, src=0, dst=7, attribute="w", value=1.0)], "no such edge"),
    ([], [row("set_vertex", 2, id=999, attribute="w", value=1.0)], "unknown vertex 999"),
    ([], [row("remove_vertex", 2, id=999)], "unknown vertex 999"),
    ([row("set_vertex", 1, id=1, attribute="w", value=1.0)], [row("set_vertex", 2, id=1, attribute="w", value="x")],
     "attribute 'w' holds double values"),
    ([row("add_vertex", 5, id=1)], [row("add_vertex", 3, id=2)], "out of order: producer 'p' already sent seq 5, "
                                                                  "and seq 3 was never applied"),
    ([], [row("add_edge", 2, src=0, dst=9), row("add_edge", 2, src=0, dst=10)],
     "seq 2 of producer 'p' names two different updates in this batch"),
]


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("first,second,message", CONFLICTS, ids=[m[:30] for *_, m in CONFLICTS])
def test_a_conflicting_update_is_listed_and_has_no_effect(graph, first, second, message):
    s = graph.stream()
    if first:
        s.push(first)
    before = live_edge_counts(s.edges(), False)
    vertices = s.vertices().sort_values("id").reset_index(drop=True)
    report = s.push(second + [GOOD])
    assert report.rejected.reason.str.contains(message).sum() == 1 and len(s.rejected) == 1
    expected = {**before, frozenset((0, 5)): before.get(frozenset((0, 5)), 0) + 1}
    assert live_edge_counts(s.edges(), False) == {**expected, **({frozenset((0, 9)): 1} if "two" in message else {})}
    after = s.vertices().sort_values("id").reset_index(drop=True)
    pd.testing.assert_frame_equal(after[["id"]], vertices[["id"]])
    if "w" in vertices:
        pd.testing.assert_series_equal(after["w"], vertices["w"])


def test_an_exact_repeat_is_a_replay_and_a_top_seq_does_not_block_its_producer(graph):
    s = graph.stream()
    report = s.push([row("add_edge", 2, src=0, dst=9), row("add_edge", 2, src=0, dst=9)])
    assert (report.applied, report.duplicates, len(s.rejected)) == (1, 1, 0)
    with pytest.raises(UpdateError, match="2\\*\\*62"):
        s.push([row("add_vertex", 2 ** 63 - 1, id=1)])
    assert s.push([row("add_vertex", 3, id=1)]).applied == 1 and s.hwm == {"p": 3}


def test_an_empty_push_is_an_empty_batch(graph):
    s = graph.stream()
    for empty in ([], pd.DataFrame(), pd.DataFrame(columns=["op", "producer", "seq"])):
        report = s.push(empty)
        assert (report.received, report.applied, s.state.batch) == (0, 0, 0)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_malformed_file_line_is_reported_with_its_file_and_line(graph, tmp_path, spark):
    inbox = tmp_path / "in"
    inbox.mkdir()
    (inbox / "u.json").write_text('{"op": "add_edge", "src": 0, "dst": 5, "producer": "f", "seq": 1, "time": 1}\n'
                                  '\n'
                                  '{"op": "add_edge", "src": 0, "dst": \n'
                                  '{"op": "jump", "src": 0, "dst": 6, "producer": "f", "seq": 2, "time": 2}\n')
    s = graph.stream()
    s.start(str(inbox), trigger="availableNow").awaitTermination()
    reasons = sorted(s.rejected.reason)
    assert len(reasons) == 2 and s.state.num_edges == N
    assert reasons[0].endswith("u.json line 3: field 'op' is missing")
    assert reasons[1].endswith("u.json line 4: unknown op 'jump' (ops: add_vertex, remove_vertex, add_edge, "
                               "remove_edge, set_vertex, set_edge)")


REACH = "DETECT Reach(source: {id = 1}, sink: {id = 2})"
# (query, now, line, column, what the error must say)
BAD_QUERIES = [
    ("DETECT", None, 1, 7, "unexpected end of input; expected a name"),
    ("CANCEL", None, 1, 7, "unexpected end of input"),
    (REACH + " WHERE edge:{type = a} AND edge:{type = b}", None, 1, 74, "takes one edge: condition"),
    ("DETECT Reach(source: {id = 1}) FOR 2h", 0.0, 1, 8, "Reach: missing argument sink"),
    ("DETECT Reach(source: {id = 1}, sink: {id = 2}, sink: {id = 3})", None, 1, 8, "takes exactly source"),
    ("DETECT Foo(x)", None, 1, 8, "unknown pattern 'Foo'; expected one of: Cluster, Evolved, Reach"),
    (REACH + " FOR 5x", 0.0, 1, 52, "unexpected '5'"),
    (REACH + ' FROM "0 9 * * *" TO "0 17 * * *"', 1e300, 1, 48, "now=1e\\+300 .* is not an epoch time in the years"),
    (REACH + ' FROM "0 9 * * *" TO "0 17 * * *"', float("nan"), 1, 48, "now=nan .* is not an epoch time"),
    (REACH + ' FROM "0 99 * * *" TO "0 17 * * *"', 0.0, 1, 53, "field '99' is outside 0-23"),
    (REACH + " FROM 10 TO 5", None, 1, 59, "time frame ends .5.0. before it starts .10.0."),
    (REACH + ' FROM "2024-13-01" TO now', 0.0, 1, 53, "'2024-13-01' is neither an ISO date"),
    (REACH + " FOR 2h", None, 1, 48, "FOR is relative to now"),
    ("DETECT Cluster(size > 2) AS A AND DETECT Cluster(size > 3) AS A", None, 1, 42, "alias 'A' is defined twice"),
    ("DETECT Evolved(X)", None, 1, 8, "alias 'X' is not defined"),
    ("DETECT Cluster(sum(node.usage) < $cap)", None, 1, 34, "parameter 'cap' is not bound"),
    (REACH + " WHERE {id = 3} AND {id = 4}", None, 1, 54, "unexpected '{'"),
    (REACH + " FOR 2h\nAND DETECT Cluster(size > ) AS B", 0.0, 2, 27, "unexpected '\\)'"),
    ('DETECT Reach(source: {name = "unterminated}, sink: {id = 2})', None, 1, 30, "unexpected '\"'"),
    ("DETECT Cluster(size > 2) WHERE SUCCEEDS Z", None, 1, 32, "SUCCEEDS applies to Evolved"),
    (REACH + "; DROP TABLE x", None, 1, 49, "unexpected 'DROP'"),
]


@pytest.mark.parametrize("text,now,line,column,message", BAD_QUERIES, ids=[q[4][:40] for q in BAD_QUERIES])
def test_a_bad_query_is_refused_at_its_line_and_column(text, now, line, column, message):
    with pytest.raises(CGQLError, match=message) as info:
        plan(parse(text), now=now)
    assert (info.value.line, info.value.column) == (line, column)
    assert str(info.value).startswith(f"line {line}, column {column}: ")
