"""Every CGQL event equals a brute-force recomputation on every snapshot (tests/cgql_oracle.py),
for Reach, Cluster and Evolved, on random evolving graphs (directed and undirected)."""
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cgql_oracle as oracle
from hatrick.cgql import PandasView, query

SEEDS = range(6)


def _events(topic_or_events):
    """A topic's events so far (never blocks on a live topic), or the given list."""
    return topic_or_events.read() if hasattr(topic_or_events, "read") else topic_or_events


def reach_tuples(topic):
    return [(e["time"], e["status"], e["source"], e["sink"]) for e in _events(topic)]


def cluster_tuples(topic):
    return [(e["time"], e["status"], e["cluster"], tuple(e["members"]), tuple(e.get("parents", ())))
            for e in _events(topic)]


def by_time(events):
    """Events grouped per snapshot (order inside a snapshot is the pattern's own, compared as a set)."""
    groups = {}
    for e in events:
        groups.setdefault(e[0], set()).add(e)
    return groups


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("directed", [True, False])
def test_reach_equals_oracle(seed, directed):
    views = oracle.random_views(seed, directed=directed)
    topic = query(views, "DETECT Reach(source: {age < 40}, sink: {city IN (London, Paris)}) "
                         "WHERE edge: {type = follow}")
    expected = oracle.reach_events(views, [("age", "<", 40)], [("city", "in", {"London", "Paris"})], {"follow"},
                                   directed)
    got = reach_tuples(topic)
    assert by_time(got) == by_time(expected)
    assert len(got) == len(expected) and len(expected) > 0
    assert [e["seq"] for e in topic] == list(range(len(got)))


def test_reach_event_payload_and_bare_label():
    v = pd.DataFrame({"id": [1, 2, 3], "name": ["Bob", "Ann", "Cy"], "age": [33, 25, 29],
                      "lives_in": ["London", "London", "Paris"]})
    e0 = pd.DataFrame({"src": [1, 2], "dst": [2, 3], "type": ["follow", "follow"]})
    e1 = pd.DataFrame({"src": [1, 2], "dst": [2, 3], "type": ["message", "follow"]})
    views = [PandasView(0.0, 0, v, e0), PandasView(5.0, 1, v, e1)]
    text = ("DETECT Reach(source:{name = Bob, age = 33}, sink:{age < 30, lives_in = London}) "
            "WHERE edge: {type = follow}")
    events = query(views, text).read()
    assert [(e["time"], e["status"], e["source"], e["sink"]) for e in events] == [
        (0.0, "reachable", 1, 2), (5.0, "unreachable", 1, 2)]
    assert events[0]["source_attributes"] == {"name": "Bob", "age": 33, "lives_in": "London"}
    assert events[0]["sink_attributes"] == {"name": "Ann", "age": 25, "lives_in": "London"}
    assert events[0]["pattern"] == "Reach" and events[0]["seq"] == 0
    # bare label: edges whose type is "message"
    events = query(views, "DETECT Reach(source:{name = Bob}, sink:{}) WHERE edge: {message}").read()
    assert [(e["time"], e["status"], e["sink"]) for e in events] == [(5.0, "reachable", 2)]


CLUSTER_CASES = [
    ("DETECT Cluster(usage < 30) WHERE edge: {type = power}", [("usage", "<", 30)], {"power"}, []),
    ("DETECT Cluster(sum(node.usage) > 40, diameter <= 3) WHERE edge: {power, message}", [], {"power", "message"},
     [("sum_usage", ">", 40), ("diameter", "<=", 3)]),
    ("DETECT Cluster(age >= 20, count(*) >= 3, max(node.usage) < 35)", [("age", ">=", 20)], None,
     [("count", ">=", 3), ("max_usage", "<", 35)]),
    ("DETECT Cluster(diameter >= 3, diameter != 5)", [], None, [("diameter", ">=", 3), ("diameter", "!=", 5)]),
    ("DETECT Cluster(diameter < 3) WHERE edge: {power, follow}", [], {"power", "follow"}, [("diameter", "<", 3)]),
]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("case", range(len(CLUSTER_CASES)))
def test_cluster_equals_oracle(seed, case):
    text, members, edge_types, aggregates = CLUSTER_CASES[case]
    views = oracle.random_views(seed, steps=10, m=28)
    got = cluster_tuples(query(views, text))
    expected = oracle.cluster_events(views, members, edge_types, aggregates)
    assert by_time(got) == by_time(expected)
    assert len(got) == len(expected)


def test_cluster_sequences_cover_every_status():
    statuses = set()
    for seed in SEEDS:
        views = oracle.random_views(seed, steps=10, m=28)
        statuses |= {s for _, s, *_ in oracle.cluster_events(views, [("usage", "<", 30)], {"power"}, [])}
        statuses |= {s for _, s, *_ in oracle.cluster_events(views, [], None, [])}
    assert statuses == {"created", "merged", "split", "grew", "disappeared"}


def test_cluster_aggregates_in_events():
    v = pd.DataFrame({"id": [1, 2, 3, 4], "usage": [10, 20, 30, 40]})
    e = pd.DataFrame({"src": [1, 2, 3], "dst": [2, 3, 1], "type": ["power"] * 3})
    (event,) = query([PandasView(0.0, 0, v, e)],
                     "DETECT Cluster(sum(node.usage) < C, diameter < d, avg(node.usage) = 20) "
                     "WHERE edge: {type = power}", params={"C": 100, "d": 2}).read()
    assert event["members"] == [1, 2, 3] and event["sum_usage"] == 60 and event["diameter"] == 1
    assert event["avg_usage"] == 20 and event["size"] == 3


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("relation", [None, "succeeds", "predates"])
def test_evolved_equals_oracle(seed, relation):
    views = oracle.random_views(seed, steps=10, m=28)
    temporal = f" AND {relation.upper()} H" if relation else ""
    text = ("DETECT Cluster(sum(node.usage) > 30) WHERE edge: {power, follow} AS H; "
            f"DETECT Evolved(H) WHERE sum(node.usage) < C{temporal}")
    topic = query(views, text, params={"C": 45})
    got = [(e["time"], e["cluster"]) for e in topic]
    expected = oracle.evolved_events(views, [], {"power", "follow"}, [("sum_usage", ">", 30)],
                                     [("sum_usage", "<", 45)], relation)
    assert got == expected
    assert all(e["status"] == "evolved" and e["alias"] == "H" for e in topic)
    alias_topic = topic.query.topics["H"]
    assert by_time(cluster_tuples(alias_topic)) == \
        by_time(oracle.cluster_events(views, [], {"power", "follow"}, [("sum_usage", ">", 30)]))


def test_evolved_found_something():
    found = {rel: sum(len(oracle.evolved_events(oracle.random_views(s, steps=10, m=28), [], {"power", "follow"},
                                                [("sum_usage", ">", 30)], [("sum_usage", "<", 45)], rel))
                      for s in SEEDS) for rel in (None, "succeeds", "predates")}
    assert all(v > 0 for v in found.values()), found


def test_smart_grid_composite_equals_oracles():
    views = oracle.random_views(3, steps=10, m=30, directed=False)
    text = ("DETECT Reach(source: {name=C1.*}, sink: {name=C2.*}) FOR 24h WHERE edge:{message} "
            "AND DETECT Cluster(sum(node.usage) < C, diameter < d) FOR (24h) WHERE edge:{type = power} AS C1 "
            "AND DETECT Cluster(sum(node.usage) > C', diameter < d) FOR (24h) WHERE edge:{type = power} AS C2; "
            "DETECT Evolved(C2) WHERE sum(node.usage) < C AND SUCCEEDS C2;")
    params = {"C": 40, "C'": 45, "d": 4}
    topic = query(views, text, params=params, now=0.0, stream=_NullStream())
    # FOR 24h from now=0 with no live batches: nothing before now -> live only; feed the history live
    for v in views:
        topic.query._on_batch(v)
    topics = topic.query.topics
    c1 = oracle.cluster_events(views, [], {"power"}, [("sum_usage", "<", 40), ("diameter", "<", 4)])
    c2 = oracle.cluster_events(views, [], {"power"}, [("sum_usage", ">", 45), ("diameter", "<", 4)])
    assert by_time(cluster_tuples(topics["C1"])) == by_time(c1) and c1
    assert by_time(cluster_tuples(topics["C2"])) == by_time(c2) and c2
    # Reach between the members of C1 and C2 clusters, per snapshot
    states1 = oracle.cluster_states(views, [], {"power"}, [("sum_usage", "<", 40), ("diameter", "<", 4)])
    states2 = oracle.cluster_states(views, [], {"power"}, [("sum_usage", ">", 45), ("diameter", "<", 4)])
    expected, before = [], set()
    import networkx as nx
    for view, (t, s1, _), (_, s2, _) in zip(views, states1, states2):
        a = {f"v{x}" for g, rep, _, _ in s1.values() if rep for x in g}
        b = {f"v{x}" for g, rep, _, _ in s2.values() if rep for x in g}
        g = nx.Graph()
        g.add_nodes_from(view.vertices()["id"])
        g.add_edges_from((r.src, r.dst) for r in view.edges().itertuples() if r.type == "message")
        rows = view.vertices().set_index("id")["name"].to_dict()
        pairs = {(u, w) for u in rows for w in rows if u != w and rows[u] in a and rows[w] in b
                 and nx.has_path(g, u, w)}
        expected += [(t, "reachable", u, w) for u, w in pairs - before]
        expected += [(t, "unreachable", u, w) for u, w in before - pairs]
        before = pairs
    reach = [e for e in topic.read() if e["pattern"] == "Reach"]
    assert by_time(reach_tuples(reach)) == by_time(expected)
    evolved = [(e["time"], e["cluster"]) for e in topic.read() if e["pattern"] == "Evolved"]
    assert evolved == oracle.evolved_events(views, [], {"power"}, [("sum_usage", ">", 45), ("diameter", "<", 4)],
                                            [("sum_usage", "<", 40)], "succeeds")
    topic.cancel()


class _NullStream:
    def on_batch(self, callback):
        self.callback = callback

    def remove_callback(self, callback):
        self.callback = None


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(3, 14), m=st.integers(0, 25), threshold=st.integers(0, 40))
def test_cluster_and_reach_random(seed, n, m, threshold):
    views = oracle.random_views(seed, steps=5, n=n, m=m)
    got = cluster_tuples(query(views, f"DETECT Cluster(usage >= {threshold}) WHERE edge: {{type != message}}"))
    expected = oracle.cluster_events(views, [("usage", ">=", threshold)], {"power", "follow"}, [])
    assert by_time(got) == by_time(expected)
    got = reach_tuples(query(views, f"DETECT Reach(source: {{usage < {threshold}}}, sink: {{}})"))
    assert by_time(got) == by_time(oracle.reach_events(views, [("usage", "<", threshold)], [], None))


@pytest.mark.parametrize("edge", ["type = power", "type != power", "type < message", "type >= follow",
                                  "type IN (power, message)", "power, message"])
def test_conditions_on_stored_codes_select_what_the_values_do(edge):
    """An edge condition on a categorical column (what a Gopher past frame reads: the stored
    dictionary codes over the distinct values, a missing value among them) keeps the same edges
    as on the plain text values."""
    import numpy as np
    from hatrick.cgql.parser import parse
    from hatrick.cgql.planner import plan
    from hatrick.cgql.views import Bindings, edge_condition_mask, text_frame

    (sq,) = plan(parse(f"DETECT Reach(source: {{usage > 1}}, sink: {{usage > 2}}) WHERE edge: {{{edge}}}")).subqueries
    values = np.array(["power", None, "follow", "message", "power", None, "follow", "power"], dtype=object)
    coded = edge_condition_mask(pd.DataFrame({"type": pd.Categorical(values)}), sq.pattern.clause.edge, Bindings({}))
    plain = edge_condition_mask(text_frame({"type": values}), sq.pattern.clause.edge, Bindings({}))
    assert coded.dtype == bool and coded.tolist() == plain.tolist() and 0 < coded.sum() < len(values)
