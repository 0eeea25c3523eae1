"""Update validation: malformed rows and conflicting updates are named by producer/seq and never
half-applied."""
import numpy as np
import pandas as pd
import pytest

from gofs.errors import InputError
from hatrick.live import apply_batch, build_state, edge_frame, vertex_frame
from hatrick.updates import OPS, coerce, validate


def u(op, seq, producer="p", **kw):
    return {"op": op, "producer": producer, "seq": seq, "time": float(seq), **kw}


def test_malformed_rows_are_named_and_dropped():
    batch, bad = validate([u("add_edge", 1, src=1, dst=2),
                           u("add_edg", 2, src=1, dst=2),
                           u("add_edge", 3, src=1),
                           u("set_vertex", 4, id="x", attribute="w", value=1.0),
                           u("set_vertex", 5, id=3, value=1.0),
                           {"op": "add_vertex", "id": 4, "producer": None, "seq": 6, "time": 6.0},
                           {"op": "add_vertex", "id": 4, "producer": "q", "seq": 1.5, "time": 7.0}], "int64")
    assert len(batch) == 1 and batch.op[0] == OPS.index("add_edge")
    reasons = dict(zip(bad.seq, bad.reason))
    assert "unknown op 'add_edg'" in reasons[2]
    assert reasons[3] == "field 'dst' is missing"
    assert reasons[4] == "field 'id': ids of this graph are integers"
    assert reasons[5] == "field 'attribute' must name an attribute"
    assert reasons[6] == "field 'producer' is missing"
    assert "seq" in bad.reason.iloc[-1]


def test_categorical_op_and_producer_columns_check_as_text_does():
    rows = pd.DataFrame([u("add_edge", 1, src=1, dst=2), u("add_edg", 2, src=1, dst=2),
                         u("remove_edge", 3, producer="q", src=2, dst=1),
                         {"op": None, "src": 1, "dst": 2, "producer": "q", "seq": 4, "time": 4.0},
                         {"op": "add_edge", "src": 1, "dst": 2, "producer": None, "seq": 5, "time": 5.0},
                         u("add_edge", 6, producer="q", src=3, dst=4)])
    categorical = rows.astype({"op": "category", "producer": "category"})
    categorical["op"] = categorical["op"].cat.add_categories(["set_edge"])      # a value no row has
    categorical["producer"] = categorical["producer"].cat.add_categories(["unused"])
    assert isinstance(categorical["op"].dtype, pd.CategoricalDtype)
    (text, text_bad), (cat, cat_bad) = validate(rows, "int64"), validate(categorical, "int64")
    assert cat.op.tolist() == text.op.tolist() == [OPS.index("add_edge"), OPS.index("remove_edge"),
                                                   OPS.index("add_edge")]
    assert cat.producer.tolist() == text.producer.tolist() == ["p", "q", "q"]
    assert cat.seq.tolist() == text.seq.tolist() == [1, 3, 6]
    assert cat_bad.to_dict("list") == text_bad.to_dict("list")
    assert dict(zip(cat_bad.seq, cat_bad.reason)) == {2: f"unknown op 'add_edg' (ops: {', '.join(OPS)})",
                                                      4: "field 'op' is missing", 5: "field 'producer' is missing"}


def test_missing_required_column_and_unknown_column_raise():
    with pytest.raises(InputError, match="no 'seq' column"):
        validate([{"op": "add_vertex", "id": 1, "producer": "p"}], "int64")
    with pytest.raises(InputError, match="unknown column 'weight'"):
        validate([u("add_vertex", 1, id=1, weight=3)], "int64")
    with pytest.raises(InputError, match="list of dicts"):
        validate([("add_vertex", 1)], "int64")


def test_batch_is_applied_in_event_time_order():
    batch, _ = validate([u("remove_edge", 5, src=0, dst=1), u("add_edge", 2, src=0, dst=1)], "int64")
    assert list(batch.seq) == [2, 5]


def test_wrong_attribute_types_are_rejected_whole():
    state = build_state(np.arange(3), [0], [1], directed=False,
                        vertex_columns={"zone": ("string", np.array(["a", "b", "c"], dtype=object))},
                        edge_columns={"kind": ("string", np.array(["road"], dtype=object))},
                        static_vertex=["zone"], static_edge=["kind"])
    batch, _ = validate([u("set_vertex", 1, id=0, attribute="speed", value=3.5),
                         u("set_vertex", 2, id=1, attribute="speed", value="fast"),
                         u("set_vertex", 3, id=2, attribute="speed", value=True),
                         u("set_vertex", 4, id=2, attribute="name", value="x"),
                         u("set_vertex", 5, id=1, attribute="name", value=7),
                         u("set_edge", 6, src=0, dst=1, attribute="kind", value="rail"),
                         u("set_edge", 7, src=0, dst=1, attribute="hits", value=2),
                         u("set_edge", 8, src=0, dst=1, attribute="hits", value=2.5),
                         u("set_vertex", 9, id=9, attribute="speed", value=1.0),
                         u("set_edge", 10, src=0, dst=1, attribute="kind", value=4),
                         u("set_vertex", 11, id=0, attribute="zone", value="z"),
                         u("set_vertex", 12, id=1, attribute="zone", value=4)], "int64")
    after, outcome = apply_batch(state, batch)
    reasons = dict(zip(outcome.rejected.seq, outcome.rejected.reason))
    assert reasons == {2: "attribute 'speed' holds double values", 3: "attribute 'speed' holds double values",
                       5: "attribute 'name' holds string values",
                       8: "attribute 'hits' holds int64 values", 9: "unknown vertex 9",
                       10: "attribute 'kind' holds string values", 12: "attribute 'zone' holds string values"}
    vertices = vertex_frame(after).set_index("id")
    assert vertices.loc[0, "speed"] == 3.5 and pd.isna(vertices.loc[1, "speed"]) and pd.isna(vertices.loc[2, "speed"])
    assert vertices.loc[2, "name"] == "x" and pd.isna(vertices.loc[1, "name"])
    assert vertices.loc[0, "zone"] == "z" and vertices.loc[1, "zone"] == "b"      # a static value can be set
    assert edge_frame(after).to_dict("records") == [{"src": 0, "dst": 1, "kind": "rail", "hits": 2}]


def test_rejected_vertex_removal_changes_nothing():
    state = build_state(np.arange(3), [0, 1], [1, 2], directed=True)
    batch, _ = validate([u("remove_vertex", 1, id=7), u("remove_edge", 2, src=0, dst=2),
                         u("remove_edge", 3, src=0, dst=9), u("remove_vertex", 4, id=1),
                         u("remove_vertex", 5, id=1)], "int64")
    after, outcome = apply_batch(state, batch)
    assert dict(zip(outcome.rejected.seq, outcome.rejected.reason)) == {
        1: "unknown vertex 7", 2: "no such edge", 3: "unknown vertex 9", 5: "vertex 1 was already removed"}
    assert sorted(vertex_frame(after)["id"]) == [0, 2] and edge_frame(after).empty
    assert sorted(vertex_frame(state)["id"]) == [0, 1, 2] and len(edge_frame(state)) == 2


def test_text_values_parse_by_kind():
    values, null, ok = coerce(np.array(["1.5", "x", None, "2"], dtype=object), "double", text=True)
    assert ok.tolist() == [True, False, True, True] and null.tolist() == [False, False, True, False]
    assert values[0] == 1.5 and values[3] == 2.0
    _, _, ok = coerce(np.array(["1.5", 2], dtype=object), "double", text=False)
    assert ok.tolist() == [False, True]
    values, _, ok = coerce(np.array(["true", "no"], dtype=object), "bool", text=True)
    assert ok.tolist() == [True, False] and bool(values[0])


def test_absent_attribute_and_value_stay_one_null_through_take_and_pickle():
    import pickle

    frame = pd.DataFrame({"op": "add_edge", "src": np.arange(2000), "dst": np.arange(1, 2001),
                          "producer": "p", "seq": np.arange(1, 2001), "time": 1.0})
    batch, _ = validate(frame, "int64")
    part = batch.take(np.arange(0, 2000, 2))
    wired = pickle.loads(pickle.dumps(part, protocol=pickle.HIGHEST_PROTOCOL))
    assert len(part.attribute) == len(wired.value) == 1000
    assert all(v is None for v in wired.attribute) and all(v is None for v in wired.value)
    assert np.array_equal(wired.a, np.arange(0, 2000, 2)) and np.array_equal(wired.seq, np.arange(1, 2001, 2))
    with_values = batch.take(np.arange(0, 2000, 2))
    with_values.value = np.full(1000, None, dtype=object)          # a column the updates had
    sizes = [len(pickle.dumps(b, protocol=pickle.HIGHEST_PROTOCOL)) for b in (part, with_values)]
    assert sizes[0] < sizes[1] - 900                                 # the absent column is not sent row by row


def test_a_validated_batch_does_not_change_with_the_callers_frame():
    frame = pd.DataFrame({"op": "add_edge", "src": [1, 2, 3], "dst": [2, 3, 4], "producer": "p",
                          "seq": [1, 2, 3], "time": [1.0, 2.0, 3.0], "attribute": ["w", None, None],
                          "value": [1.5, None, None]})
    batch, _ = validate(frame, "int64")
    frame.loc[0, ["src", "dst", "seq", "time", "value"]] = [7, 8, 9, 9.0, 2.5]
    frame.loc[0, "attribute"] = "x"
    assert batch.a.tolist() == [1, 2, 3] and batch.b.tolist() == [2, 3, 4] and batch.seq.tolist() == [1, 2, 3]
    assert batch.time.tolist() == [1.0, 2.0, 3.0] and batch.attribute[0] == "w" and batch.value[0] == 1.5


def test_each_op_is_checked_for_the_fields_it_needs_and_named_when_bad():
    """The op of each row decides what it needs (a vertex op an ``id``, an edge op ``src`` and ``dst``, a
    set op an attribute, an ``add_edge`` with a value an attribute): one bad update of each kind in a
    batch of every op is named with its reason, the others kept in order."""
    rows = [u("add_vertex", 1, id=1), u("remove_vertex", 2), u("set_vertex", 3, id=2, attribute="", value=1.0),
            u("set_edge", 4, src=1, dst=2, value=1.0), u("add_edge", 5, src=1, dst=2, value=3.0),
            u("remove_edge", 6, src=1), u("add_edge", 7, src=1, dst=2, attribute="w", value=1.0),
            u("set_vertex", 8, id=3, attribute="w", value=2.0), u("merge", 9, id=1),
            u("remove_edge", 10, src=1, dst=2), u("set_edge", 11, src=2, dst=1, attribute="w", value=None),
            u("remove_vertex", 12, id=3)]
    batch, bad = validate(rows, "int64")
    assert batch.seq.tolist() == [1, 7, 8, 10, 11, 12]
    assert [OPS[c] for c in batch.op] == ["add_vertex", "add_edge", "set_vertex", "remove_edge", "set_edge",
                                          "remove_vertex"]
    assert batch.a.tolist() == [1, 1, 3, 1, 2, 3] and batch.b.tolist()[1:5:2] == [2, 2]
    assert dict(zip(bad.seq, bad.reason)) == {
        2: "field 'id' is missing", 3: "field 'attribute' must name an attribute",
        4: "field 'attribute' must name an attribute", 5: "field 'value' needs field 'attribute'",
        6: "field 'dst' is missing", 9: f"unknown op 'merge' (ops: {', '.join(OPS)})"}
    assert bad.op.tolist() == ["remove_vertex", "set_vertex", "set_edge", "add_edge", "remove_edge", "merge"]
