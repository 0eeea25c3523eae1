"""An instance overriding a static (template) attribute: written by every writer (one caller,
a Spark frame, Hatrick's stream workers writing parts), read the same way by the store, Gopher
and CGQL, and checked against plain in-memory tables of what each instance holds. Stores and
checkpoints written before overrides existed read as before."""
from __future__ import annotations

import networkx as nx
import numpy as np
import pandas as pd
import pytest

import goffish
from gofs.errors import InputError
from gofs.ingest.read_local import from_pandas
from gofs.instances import Instance
from hatrick.cgql import PandasView, query
from hatrick.live import build_state
from hatrick.statefile import state_from_tree, state_to_tree

N = 12
ZONES = ["hot" if i % 3 == 0 else "cold" for i in range(N)]
EDGES = [(i, i + 1) for i in range(N - 1)] + [(0, 6), (3, 9)]
CLUSTER = "DETECT Cluster(zone = hot, size >= 2) WHERE edge: {kind = road}"


def _graph(path):
    """A path with two chords; ``zone`` and ``pop`` static on vertices, ``w`` and ``kind`` on edges."""
    vertices = pd.DataFrame({"id": np.arange(N), "zone": ZONES, "pop": np.arange(N) * 10})
    edges = pd.DataFrame({"src": [a for a, _ in EDGES], "dst": [b for _, b in EDGES],
                          "w": np.arange(len(EDGES), dtype=float), "kind": "road"})
    return goffish.ingest(from_pandas(edges, vertices), str(path), num_partitions=3, partitioner="hash")


def _vertex_values(g, instance, names):
    frame = g.vertices(names, instance=instance).toPandas()
    return {int(i): tuple(None if pd.isna(v) else v for v in row) for i, *row in frame[["id", *names]].itertuples(index=False)}


def _edge_values(g, instance, name):
    frame = pd.concat([g.read_edge_partition(p, attributes=[name], instance=instance).to_pandas()
                       for p in range(g.num_partitions)])
    return sorted((min(a, b), max(a, b), None if pd.isna(v) else v) for a, b, v in zip(frame.src, frame.dst, frame[name]))


def _oracle_views(g, zones_per_instance, edges_per_instance, edge_name="kind"):
    """Each stored instance as a plain in-memory view of what it should hold (not read from GoFS):
    {id: zone} and [(src, dst, value of ``edge_name``)]."""
    return [PandasView(float(entry["start"]), entry["id"], pd.DataFrame({"id": list(zones), "zone": list(zones.values())}),
                       pd.DataFrame(edges, columns=["src", "dst", edge_name]), False)
            for entry, zones, edges in zip(g.instances, zones_per_instance, edges_per_instance)]


def _same_events(g, views, spark, added_member, cluster=CLUSTER, end=None):
    """A CGQL Cluster query on Gopher over the stored instances (to ``end``, default the last
    one's time, excluded) publishes the events the driver path publishes over ``views`` (the
    driver path is checked against NetworkX in the CGQL tests), ``added_member`` (a vertex an
    instance adds) among the members of one. Returns the events."""
    text = f"{cluster} FROM {views[0].time} TO {views[-1].time if end is None else end}"
    on_gopher = query(g, text, spark=spark)
    assert on_gopher.query.past_engine == "gopher"
    drop = ("detected", "seq", "topic")
    got = [{k: v for k, v in e.items() if k not in drop} for e in on_gopher.read()]
    expected = [{k: v for k, v in e.items() if k not in drop} for e in query(views, text).read()]
    assert got == expected and any(added_member in e["members"] for e in expected)
    return expected


def test_an_instance_overrides_static_values_for_itself_only(tmp_path, spark):
    """Instance 1 gives ``zone`` for two vertices (one a null), ``w`` for one edge and a vertex it
    adds a zone (it joins a cluster there); instances 0 and 2 give none. The store's reads, the
    log and a CGQL query on Gopher all see the overrides in instance 1 only."""
    g = _graph(tmp_path / "g.gofs")
    ids = g.append_instances([
        Instance(0.0, 1.0, vertex_values=pd.DataFrame({"id": [2], "heat": [1.5]})),
        Instance(1.0, 2.0, vertex_values=pd.DataFrame({"id": [3, 4, 100], "zone": [None, "hot", "hot"]}),
                 edge_values=pd.DataFrame({"src": [1], "dst": [0], "w": [9.5]}),
                 added_vertices=pd.DataFrame({"id": [100]}),
                 added_edges=pd.DataFrame({"src": [100, 100], "dst": [4, 6], "kind": ["road", "road"]})),
        Instance(2.0, 3.0)])
    assert ids == [0, 1, 2]
    template = dict(enumerate(ZONES))
    changed = {**template, 3: None, 4: "hot", 100: "hot"}
    expected = [template, changed, template]
    for iid, zones in enumerate(expected):
        got = _vertex_values(g, iid, ["zone", "pop"])
        assert {i: z for i, (z, _) in got.items()} == zones
        assert {i: p for i, (_, p) in got.items()} == {**{i: i * 10 for i in range(N)}, **({100: None} if iid == 1 else {})}
    assert {i: z for i, (z,) in _vertex_values(g, None, ["zone"]).items()} == template
    weights = sorted((min(a, b), max(a, b), float(k)) for k, (a, b) in enumerate(EDGES))
    assert _edge_values(g, 1, "w") == sorted([(0, 1, 9.5)] + [e for e in weights if e[:2] != (0, 1)]
                                             + [(4, 100, None), (6, 100, None)])
    assert _edge_values(g, 0, "w") == _edge_values(g, 2, "w") == _edge_values(g, None, "w") == weights
    entries = g.refresh().instances
    assert [e.get("vertex_overrides") for e in entries] == [None, ["zone"], None]
    assert [e.get("edge_overrides") for e in entries] == [None, ["w"], None]
    assert g.instance_vertex_attributes == ["heat"] and g.instance_edge_attributes == []
    zeros = [sum(row["zeros"] for row in g.store.edge_attribute_profile("w", instance=i)) for i in (None, 1)]
    assert zeros == [1, 0]                     # edge 0-1 weighs 0 in the template, 9.5 in instance 1
    roads = [(a, b, "road") for a, b in EDGES]
    _same_events(g, _oracle_views(g, expected, [roads, roads + [(100, 4, "road"), (100, 6, "road")], roads]), spark, 100)


def test_a_spark_frame_overrides_a_static_value(tmp_path, spark):
    g = _graph(tmp_path / "g.gofs")
    g.save_result(spark.createDataFrame(pd.DataFrame({"id": [0, 5], "zone": ["cold", "hot"]})), 0.0)
    expected = {**dict(enumerate(ZONES)), 0: "cold", 5: "hot"}
    assert {i: z for i, (z,) in _vertex_values(g.refresh(), 0, ["zone"]).items()} == expected
    assert g.instances[0]["vertex_overrides"] == ["zone"] and g.instances[0]["vertex_attributes"] == []


def test_an_override_of_the_wrong_type_is_refused_and_nothing_is_written(tmp_path):
    g = _graph(tmp_path / "g.gofs")
    with pytest.raises(InputError, match=r"vertex values, field 'pop': values do not fit the template's type int64"):
        g.append_instances([Instance(0.0, vertex_values=pd.DataFrame({"id": [1], "pop": ["many"]}))])
    assert g.refresh().instances == []


def _u(op, seq, **kw):
    return {"op": op, "producer": "p", "seq": seq, "time": float(seq), **kw}


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("workers", [1, 2])
def test_a_stream_updates_a_static_vertex_attribute_into_its_snapshots(tmp_path, spark, workers):
    """Snapshot 0 before any change (no override), snapshot 1 after the stream set, unset and
    gave zones (a vertex it adds joins a cluster), snapshot 2 after it set one back to the template's value
    and removed and re-added a changed vertex (its template zone comes back). Each instance read
    from GoFS, a CGQL query on Gopher over them, and a stream restarted from the last one equal
    the in-memory tables of what each snapshot holds."""
    g = _graph(tmp_path / "g.gofs")
    s = g.stream(num_buckets=8, workers=workers)
    zones = dict(enumerate(ZONES))
    expected = [dict(zones)]
    assert s.snapshot() == 0
    s.push([_u("set_vertex", 1, id=1, attribute="zone", value="hot"),
            _u("set_vertex", 2, id=3, attribute="zone", value=None),
            _u("set_vertex", 3, id=7, attribute="zone", value="hot"),
            _u("add_edge", 4, src=7, dst=50, attribute="kind", value="road"),
            _u("set_vertex", 5, id=50, attribute="zone", value="hot"),
            _u("set_vertex", 6, id=8, attribute="zone", value="hot")])
    zones.update({1: "hot", 3: None, 7: "hot", 50: "hot", 8: "hot"})
    expected.append(dict(zones))
    assert s.snapshot() == 1
    s.push([_u("set_vertex", 7, id=7, attribute="zone", value="cold"),       # back to the template's value
            _u("remove_vertex", 8, id=8), _u("add_vertex", 9, id=8),          # its template zone comes back
            _u("add_edge", 10, src=8, dst=9, attribute="kind", value="road")])
    zones.update({7: "cold", 8: ZONES[8]})
    expected.append(dict(zones))
    assert s.snapshot() == 2
    g = g.refresh()
    for iid, want in enumerate(expected):
        assert {i: z for i, (z,) in _vertex_values(g, iid, ["zone"]).items()} == want, iid
    assert {i: z for i, (z,) in _vertex_values(g, None, ["zone"]).items()} == dict(enumerate(ZONES))
    assert [e.get("vertex_overrides") for e in g.instances] == [None, ["zone"], ["zone"]]
    live = s.vertices().set_index("id")["zone"]
    assert {int(i): None if pd.isna(z) else z for i, z in live.items()} == expected[-1]
    restarted = g.stream(num_buckets=8, workers=workers)                       # loads snapshot 2
    live = restarted.vertices().set_index("id")["zone"]
    assert {int(i): None if pd.isna(z) else z for i, z in live.items()} == expected[-1]
    restarted.push([_u("set_vertex", 11, id=1, attribute="zone", value="cold"),
                    _u("set_vertex", 12, id=3, attribute="zone", value="hot")])
    assert restarted.snapshot() == 3                                           # written against the template
    assert {i: z for i, (z,) in _vertex_values(g.refresh(), 3, ["zone"]).items()} == {**expected[-1], 1: "cold", 3: "hot"}
    roads = [(a, b, "road") for a, b in EDGES]
    grown = roads + [(7, 50, "road")]
    _same_events(g, _oracle_views(g, expected, [roads, grown, [e for e in grown if e[:2] != (7, 8)]]), spark, 50)


def test_a_checkpoint_written_while_static_vertex_values_were_read_only_reads_its_template():
    """A worker state file from before overrides kept only which template vertices had a value."""
    state = build_state(np.arange(4), [0, 1], [1, 2], directed=False,
                        vertex_columns={"zone": ("string", np.array(["a", None, "c", "d"], dtype=object))},
                        static_vertex=["zone"])
    tree = state_to_tree(state)
    tree["template"]["vertex_present"] = {"zone": tree["template"].pop("vertex")["zone"]["present"]}
    old = state_from_tree(tree).template.vertex["zone"]
    new = state.template.vertex["zone"]
    assert list(old.present) == list(new.present) == [True, False, True, True]
    assert list(old.values[old.present]) == list(new.values[new.present]) == ["a", "c", "d"]


def _typed_edges(frame, name="type"):
    return sorted((min(a, b), max(a, b), None if pd.isna(t) else t) for a, b, t in zip(frame.src, frame.dst, frame[name]))


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("workers", [1, 2])
def test_a_stream_writes_a_changed_static_edge_value_as_an_override_of_the_same_edge(tmp_path, spark, workers):
    """Issue 21's line (``nx.path_graph(6)``, every edge ``type`` line): the stream cuts 2-3,
    restores it and types it power; cuts 3-4 and restores it with a type carried by the add; sets
    1-2's type and unsets 4-5's (plain sets on template edges); gives 0-1 a dynamic ``load``; adds
    0-5 with a type. The snapshot keeps every template edge (its eid: nothing removed, only 0-5
    added) and overrides ``type``; the live table, each instance read from GoFS, a restart from
    the checkpoint and one from the snapshot, and a CGQL Cluster query on Gopher over the
    instances all equal the in-memory tables of what each snapshot holds."""
    path = nx.path_graph(6)
    edges = pd.DataFrame({"src": [a for a, _ in path.edges], "dst": [b for _, b in path.edges], "type": "line"})
    vertices = pd.DataFrame({"id": list(path.nodes), "zone": "hot"})
    g = goffish.ingest(from_pandas(edges, vertices), str(tmp_path / "p.gofs"), num_partitions=2, partitioner="hash")
    checkpoint = str(tmp_path / "ck")
    s = g.stream(checkpoint=checkpoint, num_buckets=4, workers=workers)

    def e(op, seq, a, b, **kw):
        return _u(op, seq, src=a, dst=b, **kw)

    types = {(a, b): "line" for a, b in path.edges}
    expected = [sorted((a, b, t) for (a, b), t in types.items())]
    assert s.snapshot() == 0
    s.push([e("remove_edge", 1, 2, 3), e("add_edge", 2, 2, 3), e("set_edge", 3, 2, 3, attribute="type", value="power"),
            e("remove_edge", 4, 3, 4), e("add_edge", 5, 4, 3, attribute="type", value="cable"),
            e("set_edge", 6, 2, 1, attribute="type", value="fiber"), e("set_edge", 7, 4, 5, attribute="type", value=None),
            e("set_edge", 8, 0, 1, attribute="load", value=2.5), e("add_edge", 9, 0, 5, attribute="type", value="cable")])
    types.update({(2, 3): "power", (3, 4): "cable", (1, 2): "fiber", (4, 5): None, (0, 5): "cable"})
    expected.append(sorted((a, b, t) for (a, b), t in types.items()))
    assert _typed_edges(s.edges()) == expected[1]
    assert s.snapshot() == 1
    restarted = g.stream(checkpoint=checkpoint, num_buckets=4, workers=workers)
    assert _typed_edges(restarted.edges()) == expected[1]
    restarted.push([e("set_edge", 10, 3, 2, attribute="type", value="line")])   # back to the template's value
    types[(2, 3)] = "line"
    expected.append(sorted((a, b, t) for (a, b), t in types.items()))
    assert restarted.snapshot() == 2
    g = g.refresh()
    for iid, want in enumerate(expected):
        assert _edge_values(g, iid, "type") == want, iid
    assert _edge_values(g, None, "type") == expected[0]
    assert _edge_values(g, 1, "load") == sorted([(0, 1, 2.5)] + [(a, b, None) for a, b, _ in expected[1] if (a, b) != (0, 1)])
    assert [e.get("edge_overrides") for e in g.instances] == [None, ["type"], ["type"]]
    assert [e.get("topology") for e in g.instances] == [None, {"added": 1, "removed": 0}, {"added": 1, "removed": 0}]
    assert g.instance_edge_attributes == ["load"]
    assert _typed_edges(g.stream(num_buckets=4, workers=workers).edges()) == expected[2]      # loads snapshot 2
    hot = dict.fromkeys(range(6), "hot")
    views = _oracle_views(g, [hot] * 3, expected, "type")
    events = _same_events(g, views, spark, 0, "DETECT Cluster(zone = hot, size >= 2) WHERE edge: {type = line}",
                          end=views[-1].time + 1)
    assert [(e["time"], e["status"], e["members"]) for e in events] == \
        [(views[0].time, "created", [0, 1, 2, 3, 4, 5]), (views[2].time, "created", [2, 3])]
