"""CGQL over a real Hatrick stream (the other CGQL tests use a fake one): events follow the
stream's event time and each batch's state."""
import networkx as nx

import goffish


def test_reach_events_follow_a_hatrick_stream(spark, tmp_path):
    G = nx.path_graph(6)
    nx.set_node_attributes(G, {i: f"v{i}" for i in G}, "name")
    g = goffish.ingest(G, str(tmp_path / "path.gofs"), num_partitions=2, spark=spark)
    s = g.stream()
    topic = goffish.query(g, "DETECT Reach(source: {name = v0}, sink: {name IN (v4, v5)})", stream=s)
    s.push([{"op": "add_edge", "src": 0, "dst": 1, "producer": "p", "seq": 1, "time": 5.0}])
    s.push([{"op": "remove_edge", "src": 2, "dst": 3, "producer": "p", "seq": 2, "time": 10.0}])
    s.push([{"op": "add_edge", "src": 2, "dst": 4, "producer": "p", "seq": 3, "time": 11.0}])
    s.push([{"op": "add_edge", "src": 2, "dst": 4, "producer": "p", "seq": 3, "time": 11.0}])   # a replay
    events = [(e["time"], e["status"], e["source"], e["sink"]) for e in topic.read()]
    assert s.now() == 11.0
    assert events == [(5.0, "reachable", 0, 4), (5.0, "reachable", 0, 5),
                      (10.0, "unreachable", 0, 4), (10.0, "unreachable", 0, 5),
                      (11.0, "reachable", 0, 4), (11.0, "reachable", 0, 5)]
    assert [e["seq"] for e in topic.read()] == [0, 1, 2, 3, 4, 5]
