"""TDSP against an independent time-dependent Dijkstra on generated road graphs.

The reference below knows nothing of sub-graphs or instances-as-runs: it is a
label-setting Dijkstra on arrival times where leaving vertex u at time a over
edge e arrives at ``min over instances j with end_j > a of max(a, start_j) +
tt_j(e)`` (leave at once, or wait for a later instance to start).
"""
import heapq
import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import goffish
from goffish.cli import main as cli
from goffish.generators import rmat, road_network, road_travel_times
from goffish.temporal import road_with_travel_times
from gofs.errors import InputError
from gofs.instances import Instance


def reference_tdsp(graph, tables, windows, source, departure, waiting=True):
    """{vertex: earliest arrival} on ``graph`` (edges both ways unless it is directed);
    ``waiting=False`` forbids waiting for a later instance (to show that the data needs it)."""
    src = graph.edges.column("src").to_pylist()
    dst = graph.edges.column("dst").to_pylist()
    times = [t.column("travel_time").to_pylist() for t in tables]
    adjacency = {}
    for e, (u, v) in enumerate(zip(src, dst)):
        adjacency.setdefault(u, []).append((v, e))
        if not graph.directed:
            adjacency.setdefault(v, []).append((u, e))
    best = {source: departure}
    heap = [(departure, source)]
    while heap:
        arrival, u = heapq.heappop(heap)
        if arrival > best[u]:
            continue
        for v, e in adjacency.get(u, ()):
            leave = [(max(arrival, start), j) for j, (start, end) in enumerate(windows)
                     if end > arrival and (waiting or start <= arrival)]
            reach = min((t + times[j][e] for t, j in leave), default=math.inf)
            if reach < best.get(v, math.inf):
                best[v] = reach
                heapq.heappush(heap, (reach, v))
    return best


CASES = {  # name: (vertices, instances, partitions, minutes per instance, departure, seed)
    "1-instance-1-partition": (300, 1, 1, 60.0, 30.0, 11),
    "5-instances-2-partitions": (400, 5, 2, 10.0, 3.0, 12),
    "50-instances-7-partitions": (400, 50, 7, 10.0, 0.0, 13),
}


@pytest.fixture(scope="module", params=list(CASES))
def case(request, spark, tmp_path_factory):
    n, hours, k, step, departure, seed = CASES[request.param]
    path = str(tmp_path_factory.mktemp("tdsp") / "road.gofs")
    g = road_with_travel_times(path, n, hours, num_partitions=k, seed=seed, step=step, spark=spark)
    graph = road_network(n, seed=seed)
    windows = [(h * step, (h + 1) * step) for h in range(hours)]
    return g, graph, road_travel_times(graph, hours, seed=seed), windows, departure


def test_tdsp_matches_time_dependent_dijkstra(case):
    g, graph, tables, windows, departure = case
    source = 0
    result = g.tdsp(source, departure)
    got = {row["id"]: row["arrival"] for row in result.dataframe.collect()}
    expected = reference_tdsp(graph, tables, windows, source, departure)
    assert set(got) == set(range(graph.vertices.num_rows))
    for v, arrival in got.items():
        assert arrival == pytest.approx(expected.get(v, math.inf), abs=1e-9), v
    unreached = [v for v, a in got.items() if math.isinf(a)]
    assert unreached, "the case should have unreachable vertices"
    if len(windows) > 1:
        no_wait = reference_tdsp(graph, tables, windows, source, departure, waiting=False)
        assert any(got[v] < no_wait.get(v, math.inf) - 1e-9 for v in got), "the case should need waiting"
        assert len(result.instances) > 1
    else:
        assert any(a >= windows[-1][1] for a in got.values() if not math.isinf(a)), "arrivals after the last hour"


@pytest.mark.parametrize("case", ["50-instances-7-partitions"], indirect=True)
def test_tdsp_time_range_and_departure_inside_the_series(case):
    g, graph, tables, windows, _ = case
    departure = windows[2][0] + 4.5
    result = g.tdsp(7, departure, time=(windows[1][0], windows[4][1]))
    assert result.instances[0] == 2                         # instance 1 ends before the departure
    got = {row["id"]: row["arrival"] for row in result.dataframe.collect()}
    expected = reference_tdsp(graph, tables[2:5], windows[2:5], 7, departure)
    assert all(got[v] == pytest.approx(expected.get(v, math.inf), abs=1e-9) for v in got)


@pytest.mark.parametrize("case", ["5-instances-2-partitions"], indirect=True)
def test_tdsp_rejects_bad_input(case):
    g, _, _, windows, _ = case
    with pytest.raises(InputError, match="travel"):
        g.tdsp(0, 0.0, travel_time="speed")
    with pytest.raises(InputError, match="unknown vertex"):
        g.tdsp(10**9, 0.0)
    with pytest.raises(InputError, match="ends after departure"):
        g.tdsp(0, windows[-1][1] + 1)


@pytest.mark.parametrize("case", ["1-instance-1-partition"], indirect=True)
def test_goffish_run_tdsp(case, tmp_path):
    g, graph, tables, windows, departure = case
    out = str(tmp_path / "arrivals")
    assert cli(["run", "tdsp", g.path, "--out", out, "--source", "5", "--departure", str(departure), "--quiet"]) == 0
    table = pq.read_table(out)
    expected = reference_tdsp(graph, tables, windows, 5, departure)
    assert dict(zip(table.column("id").to_pylist(), table.column("arrival").to_pylist())) == \
        pytest.approx({v: expected.get(v, math.inf) for v in range(graph.vertices.num_rows)}, abs=1e-9)


def test_tdsp_directed_graph(spark, tmp_path):
    graph = rmat(7, edge_factor=3, seed=2, directed=True)
    rng = np.random.default_rng(5)
    tables = [pa.table({"travel_time": np.round(rng.uniform(0.5, 12.0, graph.edges.num_rows), 2)}) for _ in range(6)]
    windows = [(5.0 * h, 5.0 * h + 5) for h in range(6)]
    g = goffish.ingest(graph, str(tmp_path / "rmat.gofs"), num_partitions=3, spark=spark)
    g.append_instances([Instance(start, end, edge_values=t) for (start, end), t in zip(windows, tables)])
    source = int(np.bincount(graph.edges.column("src").to_numpy()).argmax())
    got = {row["id"]: row["arrival"] for row in g.tdsp(source, 1.0).dataframe.collect()}
    expected = reference_tdsp(graph, tables, windows, source, 1.0)
    assert got == pytest.approx({v: expected.get(v, math.inf) for v in got}, abs=1e-9)
    assert sum(math.isfinite(a) for a in got.values()) > 10 and any(math.isinf(a) for a in got.values())


def test_remote_edge_keys_never_collide():
    from algorithms.tdsp import pair_codes

    # (0, 2**40) and (1, 0) packed as (src << 40) | dst were the same key
    src, dst = np.array([0, 1, 2**24, 5]), np.array([2**40, 0, 7, 5])
    keys, wanted = pair_codes(src, dst, np.array([1, 0, 2**24, 3]), np.array([0, 2**40, 7, 3]))
    assert len(set(keys.tolist())) == 4
    assert wanted[:3].tolist() == [keys[1], keys[0], keys[2]] and wanted[3] not in keys
