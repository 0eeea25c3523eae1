"""Bad parameters of the public algorithms and bad instances: every case is refused with an
error naming the parameter or field and its value, writes nothing, and the graph stays readable.

One small graph serves every case: two 4-cliques joined by a bridge (METIS cuts the bridge),
with a good weight ``w`` and one attribute per kind of bad weight, set on the bridge.
"""
from __future__ import annotations

import math
from pathlib import Path

import networkx as nx
import pyarrow as pa
import pytest

import goffish
import graphs
from gofs.errors import InputError
from gofs.instances import Instance
from gopher.program import SubgraphProgram

BRIDGE = (3, 4)
BAD_WEIGHTS = {"w_nan": math.nan, "w_inf": math.inf, "w_neg": -5.0, "w_null": None}


def _bridged_cliques() -> nx.Graph:
    G = nx.union(nx.complete_graph(4), nx.relabel_nodes(nx.complete_graph(4), lambda v: v + 4))
    G.add_edge(*BRIDGE)
    for u, v in G.edges():
        G[u][v]["w"] = 1.0 + (u + v) % 3
        for name in BAD_WEIGHTS:
            G[u][v][name] = 1.0
    for name, bad in BAD_WEIGHTS.items():
        G.edges[BRIDGE][name] = bad
    return G


def _files(root: Path) -> dict:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file() and p.name != "lock"}


def _instance(hour: int, G: nx.Graph) -> Instance:
    ids = sorted(G)
    return Instance(hour, hour + 1,
                    vertex_values=pa.table({"id": ids, "hashtags": [["#a"] if v % 2 else ["#b"] for v in ids]}),
                    edge_values=pa.table({"src": [u for u, _ in G.edges()], "dst": [v for _, v in G.edges()],
                                          "travel_time": [1.0 + hour] * G.number_of_edges()}))


@pytest.fixture(scope="module")
def bridged(spark, tmp_path_factory):
    """(NetworkX twin, GoFS graph with two instances: vertex ``hashtags``, edge ``travel_time``)."""
    G = _bridged_cliques()
    g = graphs.ingest_nx(G, tmp_path_factory.mktemp("faults-inputs") / "bridged.gofs", spark, 2)
    g.append_instances([_instance(h, G) for h in range(2)])
    parts = dict(zip(*[sum((g.read_vertex_partition(p, internal=True).column(c).to_pylist()
                            for p in range(2)), []) for c in ("id", "sg")]))
    assert g.num_partitions == 2 and parts[BRIDGE[0]] != parts[BRIDGE[1]], "the bridge must be a cut edge"
    return G, g


@pytest.fixture
def untouched(bridged):
    """Yields the graph; afterwards its files are byte for byte what they were and it still reads."""
    G, g = bridged
    before = _files(Path(g.path))
    yield g
    assert _files(Path(g.path)) == before
    again = goffish.open(g.path)
    assert again.num_vertices == G.number_of_nodes() and again.num_edges == G.number_of_edges()
    assert sum(again.read_vertex_partition(p).num_rows for p in range(again.num_partitions)) == len(G)


# --------------------------------------------------------------------------- issue 24, item 4: PageRank and Louvain weights

@pytest.mark.parametrize("attribute, message", [
    ("w_nan", r"'w_nan' has NaN values \(partition \d, e\.g\. edge 3 -> 4\)"),
    ("w_inf", r"infinite edge weight in 'w_inf' \(partition \d, e\.g\. edge 3 -> 4\)"),
    ("w_neg", r"negative edge weight -5\.0 in 'w_neg' \(partition \d, e\.g\. edge 3 -> 4\)"),
    ("w_null", r"'w_null' has missing values \(partition \d, e\.g\. edge 3 -> 4\)"),
])
@pytest.mark.parametrize("algorithm", ["pagerank", "louvain"])
def test_pagerank_and_louvain_refuse_bad_weights_on_cut_edges(untouched, monkeypatch, algorithm, attribute, message):
    """Item 4: NaN/inf/negative/missing weights (here on the cut edge, which Louvain's level-1 check
    never saw) are refused before any run, naming the attribute, the value and an edge."""
    import algorithms.louvain
    import algorithms.pagerank

    def no_run(*args, **kwargs):
        raise AssertionError("the run started before the weights were checked")

    monkeypatch.setattr(getattr(algorithms, algorithm), "run_program", no_run)
    with pytest.raises(InputError, match=message):
        getattr(untouched, algorithm)(weight=attribute, progress=False)


def test_pagerank_of_huge_weights_equals_networkx_on_scaled_weights(spark, tmp_path):
    """Item 4: weights whose sum overflows (1e308 + 1e308) gave NaN/lost rank; ranks are
    invariant under scaling a vertex's out-weights, so the oracle is NetworkX on weights / 1e308."""
    G = nx.gnm_random_graph(30, 80, seed=3, directed=True)
    for u, v in G.edges():
        G[u][v]["w"] = 1e308 / 3 * (1 + (u * v) % 3)
    g = graphs.ingest_nx(G, tmp_path / "huge.gofs", spark, 2)
    got = graphs.column(g.pagerank(weight="w", tol=1e-10, max_iter=300, progress=False), "pagerank")
    scaled = nx.DiGraph(G)
    for u, v in scaled.edges():
        scaled[u][v]["w"] /= 1e308
    expected = nx.pagerank(scaled, weight="w", tol=1e-10, max_iter=300)
    assert set(got) == set(expected)
    assert max(abs(got[v] - expected[v]) for v in expected) < 1e-9
    assert sum(got.values()) == pytest.approx(1.0, abs=1e-9)


def test_pagerank_of_an_empty_graph_is_empty_as_in_networkx(spark, tmp_path):
    g = graphs.ingest_nx(nx.Graph(), tmp_path / "empty.gofs", spark, 1)
    result = g.pagerank(progress=False)
    assert nx.pagerank(nx.Graph()) == {}
    assert result.dataframe.count() == 0 and result.dataframe.columns == ["id", "pagerank"]


# --------------------------------------------------------------------------- corpus: algorithm parameters

class _Halt(SubgraphProgram):
    def compute(self, subgraph, messages, ctx):
        ctx.vote_to_halt()


NAN, INF = math.nan, math.inf

# (case, call on the graph, error class, what the message must say: the parameter and its value)
ALGORITHM_CASES = [
    ("cc unknown instance", lambda g: g.connected_components(instance=99), InputError, r"no instance 99"),
    ("cc tasks=0", lambda g: g.connected_components(tasks=0), ValueError, r"tasks must be an integer >= 1, got 0"),
    ("cc tasks=1.5", lambda g: g.connected_components(tasks=1.5), ValueError, r"tasks must be .*got 1\.5"),
    ("cc checkpoint_interval=-1", lambda g: g.connected_components(checkpoint_interval=-1), ValueError,
     r"checkpoint_interval must be an integer >= 0 .*got -1"),
    ("cc checkpoint_seconds=nan", lambda g: g.connected_components(checkpoint_seconds=NAN), ValueError,
     r"checkpoint_seconds must be a finite number >= 0 .*got nan"),
    ("cc transport", lambda g: g.connected_components(transport="pigeon"), ValueError,
     r"unknown Gopher transport 'pigeon'"),
    ("sssp unknown source", lambda g: g.sssp(999), InputError, r"unknown vertex 999"),
    ("sssp source of another type", lambda g: g.sssp("v1"), InputError, r"unknown vertex 'v1'"),
    ("sssp source=None", lambda g: g.sssp(None), InputError, r"unknown vertex None"),
    ("sssp unknown weight", lambda g: g.sssp(0, weight="nope"), InputError, r"no edge attribute 'nope'"),
    ("sssp NaN weight", lambda g: g.sssp(0, weight="w_nan"), InputError, r"'w_nan' has NaN values .*edge 3 -> 4"),
    ("sssp negative weight", lambda g: g.sssp(0, weight="w_neg"), InputError, r"negative edge weight -5\.0 in 'w_neg'"),
    ("sssp infinite weight", lambda g: g.sssp(0, weight="w_inf"), InputError, r"infinite edge weight in 'w_inf'"),
    ("sssp missing weight", lambda g: g.sssp(0, weight="w_null"), InputError, r"'w_null' has missing values"),
    ("sssp unknown instance", lambda g: g.sssp(0, instance=7), InputError, r"no instance 7"),
    ("pagerank alpha=1.5", lambda g: g.pagerank(alpha=1.5), InputError, r"alpha must be a number in \[0, 1\], got 1\.5"),
    ("pagerank alpha=-0.1", lambda g: g.pagerank(alpha=-0.1), InputError, r"alpha .*got -0\.1"),
    ("pagerank alpha=nan", lambda g: g.pagerank(alpha=NAN), InputError, r"alpha .*got nan"),
    ("pagerank alpha='0.85'", lambda g: g.pagerank(alpha="0.85"), InputError, r"alpha .*got '0\.85'"),
    ("pagerank tol=-1", lambda g: g.pagerank(tol=-1), InputError, r"tol must be a finite number >= 0, got -1"),
    ("pagerank tol=nan", lambda g: g.pagerank(tol=NAN), InputError, r"tol .*got nan"),
    ("pagerank tol=inf", lambda g: g.pagerank(tol=INF), InputError, r"tol .*got inf"),
    ("pagerank max_iter=-1", lambda g: g.pagerank(max_iter=-1), InputError, r"max_iter must be an integer >= 0, got -1"),
    ("pagerank max_iter=2.5", lambda g: g.pagerank(max_iter=2.5), InputError, r"max_iter .*got 2\.5"),
    ("pagerank max_iter=True", lambda g: g.pagerank(max_iter=True), InputError, r"max_iter .*got True"),
    ("pagerank unknown weight", lambda g: g.pagerank(weight="nope"), InputError, r"no edge attribute 'nope'"),
    ("pagerank negative weight", lambda g: g.pagerank(weight="w_neg"), InputError, r"negative edge weight -5\.0 in 'w_neg'"),
    ("betweenness k=0", lambda g: g.betweenness(k=0), InputError, r"k=0 must be an integer in \[1, 8\]"),
    ("betweenness k=-1", lambda g: g.betweenness(k=-1), InputError, r"k=-1 must be"),
    ("betweenness k > n", lambda g: g.betweenness(k=100), InputError, r"k=100 must be an integer in \[1, 8\]"),
    ("betweenness k=2.5", lambda g: g.betweenness(k=2.5), InputError, r"k=2\.5 must be"),
    ("betweenness top=0", lambda g: g.betweenness(top=0), InputError, r"top=0 must be"),
    ("betweenness seed=-1", lambda g: g.betweenness(k=2, seed=-1), InputError, r"seed must be an integer >= 0, got -1"),
    ("betweenness unknown weight", lambda g: g.betweenness(weight="nope"), InputError, r"no edge attribute 'nope'"),
    ("betweenness negative weight", lambda g: g.betweenness(weight="w_neg"), InputError,
     r"negative edge weight -5\.0 in 'w_neg'"),
    ("betweenness NaN weight", lambda g: g.betweenness(weight="w_nan"), InputError, r"'w_nan' has NaN values"),
    ("louvain resolution=0", lambda g: g.louvain(resolution=0), InputError, r"resolution must be a finite number > 0, got 0"),
    ("louvain resolution=nan", lambda g: g.louvain(resolution=NAN), InputError, r"resolution .*got nan"),
    ("louvain seed=-1", lambda g: g.louvain(seed=-1), InputError, r"seed must be an integer >= 0, got -1"),
    ("louvain levels=[0]", lambda g: g.louvain(levels=[0]), InputError, r"levels .*got \[0\]"),
    ("louvain driver_budget_edges=0", lambda g: g.louvain(driver_budget_edges=0), InputError,
     r"driver_budget_edges must be an integer >= 1, got 0"),
    ("louvain unknown weight", lambda g: g.louvain(weight="nope"), InputError, r"weight='nope' is not a static edge attribute"),
    ("louvain instance weight", lambda g: g.louvain(weight="travel_time"), InputError,
     r"weight='travel_time' .*per-instance attributes cannot be Louvain weights"),
    ("louvain infinite weight", lambda g: g.louvain(weight="w_inf"), InputError, r"infinite edge weight in 'w_inf'"),
    ("run max_supersteps=0", lambda g: g.run(_Halt(), max_supersteps=0), ValueError,
     r"max_supersteps must be an integer >= 1, got 0"),
    ("run max_supersteps=1.5", lambda g: g.run(_Halt(), max_supersteps=1.5), ValueError, r"max_supersteps .*got 1\.5"),
    ("run not a program", lambda g: g.run(object()), TypeError, r"program must be a gopher\.program\.SubgraphProgram, got object"),
    ("tdsp unknown source", lambda g: g.tdsp(999, 0.0), InputError, r"unknown vertex 999"),
    ("tdsp departure=nan", lambda g: g.tdsp(0, NAN), InputError, r"departure nan"),
    ("tdsp unknown travel_time", lambda g: g.tdsp(0, 0.0, travel_time="nope"), InputError,
     r"no per-instance edge attribute 'nope'"),
    ("tdsp unknown instance", lambda g: g.tdsp(0, 0.0, instances=[99]), InputError, r"no instance 99"),
    ("tdsp empty time range", lambda g: g.tdsp(0, 0.0, time=(5, 1)), InputError, r"no instance in time \(5, 1\)"),
    ("memes meme=5", lambda g: g.meme_tracking(5), InputError, r"meme must be a non-empty string, got 5"),
    ("memes meme=''", lambda g: g.meme_tracking(""), InputError, r"meme must be a non-empty string, got ''"),
    ("memes unknown attribute", lambda g: g.meme_tracking("#a", attribute="nope"), InputError,
     r"no per-instance vertex attribute 'nope'"),
    ("hashtags k=0", lambda g: g.hashtag_aggregation(k=0), InputError, r"k must be an integer >= 1, got 0"),
    ("hashtags k=-1", lambda g: g.hashtag_aggregation(k=-1), InputError, r"k must be .*got -1"),
    ("hashtags unknown attribute", lambda g: g.hashtag_aggregation(attribute="nope"), InputError,
     r"no per-instance vertex attribute 'nope'"),
    ("timeseries unknown pattern", lambda g: g.run_timeseries(_Halt(), pattern="nope"), InputError,
     r"unknown time-series pattern 'nope'"),
    ("timeseries unknown instance", lambda g: g.run_timeseries(_Halt(), instances=[99]), InputError, r"no instance 99"),
    ("timeseries time=nan", lambda g: g.run_timeseries(_Halt(), time=NAN), InputError, r"no instance in time nan"),
]


@pytest.mark.parametrize("call, error, message", [c[1:] for c in ALGORITHM_CASES], ids=[c[0] for c in ALGORITHM_CASES])
def test_bad_algorithm_parameters_are_named_and_change_nothing(untouched, call, error, message):
    with pytest.raises(error, match=message):
        call(untouched)


# --------------------------------------------------------------------------- corpus: instances

def _vertex(**columns):
    return Instance(9, vertex_values=pa.table(columns))


INSTANCE_CASES = [
    ("end before start", lambda: [Instance(5, 4)], r"instance 0 \(start=5\): end 4\.0 is before start 5\.0"),
    ("start NaN", lambda: [Instance(NAN)], r"instance 0 \(start=nan\): start/end must be finite"),
    ("end infinite", lambda: [Instance(9, INF)], r"instance 0 \(start=9\): start/end must be finite"),
    ("start not a number", lambda: [Instance("x")], r"instance 0 \(start=x\): start/end must be numbers"),
    ("before the last instance", lambda: [Instance(0.5)], r"starts before the previous instance \(1\.0\)"),
    ("out of order in one call", lambda: [Instance(9), Instance(8)], r"instance 1 \(start=8\): starts before"),
    ("no id column", lambda: [_vertex(x=[1.0])], r"vertex values: no 'id' column \(columns: \['x'\]\)"),
    ("unknown vertex id", lambda: [_vertex(id=[999], x=[1.0])], r"vertex values row 1, field 'id': unknown vertex 999"),
    ("null vertex id", lambda: [_vertex(id=pa.array([None], pa.int64()), x=[1.0])],
     r"vertex values row 1, field 'id': unknown vertex None"),
    ("vertex given twice", lambda: [_vertex(id=[1, 1], x=[1.0, 2.0])], r"vertex values row 2, field 'id': vertex given twice"),
    ("id of another type", lambda: [_vertex(id=["a"], x=[1.0])], r"field 'id': ids are string but the graph's ids are int64"),
    ("reserved column", lambda: [_vertex(id=[1], vid=[1.0])], r"field 'vid': clashes with a key column of the vertex files"),
    ("static attribute override of the wrong type", lambda: [Instance(9, edge_values=pa.table({"src": [0], "dst": [1],
                                                                                            "w": ["heavy"]}))],
     r"edge values, field 'w': values do not fit the template's type double"),
    ("type differs from earlier", lambda: [_vertex(id=[1], hashtags=[1.0])],
     r"field 'hashtags': type double differs from earlier instances"),
    ("unknown edge", lambda: [Instance(9, edge_values=pa.table({"src": [0], "dst": [7], "t": [1.0]}))],
     r"edge values row 1: no edge 0 -> 7 in the graph"),
    ("edge values without dst", lambda: [Instance(9, edge_values=pa.table({"src": [0], "t": [1.0]}))],
     r"edge values: no 'dst' column"),
    ("edge values of the wrong length", lambda: [Instance(9, edge_values=pa.table({"t": [1.0]}))],
     r"edge values: need 'src' and 'dst' columns, or exactly one row per edge \(13\), got 1 rows"),
    ("removing an unknown edge", lambda: [Instance(9, removed_edges=pa.table({"src": [0], "dst": [7]}))],
     r"removed edges row 1: no edge 0 -> 7 in the graph"),
    ("adding an edge to an unknown vertex", lambda: [Instance(9, added_edges=pa.table({"src": [0], "dst": [77]}))],
     r"added edges row 1, field 'dst': unknown vertex 77"),
    ("added edges without src", lambda: [Instance(9, added_edges=pa.table({"dst": [1]}))], r"added edges: no 'src' column"),
    ("adding a template vertex", lambda: [Instance(9, added_vertices=pa.table({"id": [1]}))],
     r"added vertices row 1, field 'id': 1 is already a vertex of the template"),
    ("added vertices with attributes", lambda: [Instance(9, added_vertices=pa.table({"id": [70], "x": [1.0]}))],
     r"added vertices: only an 'id' column is allowed"),
    ("not a list", lambda: Instance(9), r"instances must be a list of Instance, got Instance"),
    ("not an Instance", lambda: [{"start": 9}], r"instances\[0\] must be an Instance, got \{'start': 9\}"),
    ("values not a table", lambda: [Instance(9, vertex_values="load.csv")],
     r"instance 0 \(start=9\) vertex_values: must be a pyarrow Table, a pandas DataFrame or a dict of columns, got str"),
    ("a good instance before a bad one", lambda: [_instance(9, _bridged_cliques()), Instance(10, 9)],
     r"instance 1 \(start=10\): end 9\.0 is before start 10\.0"),
]


@pytest.mark.parametrize("instances, message", [c[1:] for c in INSTANCE_CASES], ids=[c[0] for c in INSTANCE_CASES])
def test_bad_instances_are_named_and_change_nothing(untouched, instances, message):
    with pytest.raises(InputError, match=message):
        untouched.append_instances(instances())
    assert [i["id"] for i in goffish.open(untouched.path).instances] == [0, 1]


def test_bad_result_instances_are_named_and_change_nothing(untouched):
    components = untouched.connected_components(progress=False)
    with pytest.raises(InputError, match=r"need finite start <= end, got start 10\.0, end 5\.0"):
        untouched.save_result(components, 10, 5)
    with pytest.raises(InputError, match=r"need finite start <= end, got start nan"):
        untouched.save_result(components, NAN)
    with pytest.raises(InputError, match=r"result frame: no column 'nope' \(columns: \['id', 'component'\]\)"):
        untouched.save_result(components, 10, columns=["nope"])
    with pytest.raises(InputError, match=r"result frame: no 'id' column"):
        untouched.save_result(components.dataframe.drop("id"), 10)
