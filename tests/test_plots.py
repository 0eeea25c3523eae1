"""Pictures: ``goffish info --plot``, ``goffish run --timeline`` / ``RunMetrics.plot``, ``./run.sh bench --plot``.

Each PNG is opened and checked for its size in pixels and for content (not a
blank canvas); the numbers drawn are compared with the manifest, the run's
metrics and the bench report, and the meta-graph degrees with NetworkX.
"""
import json
from collections import Counter

import networkx as nx
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import goffish
from gofs import layout
from goffish.cli import main
from goffish.generators import road_network
from goffish.plots import bench_figure, plot_graph
from gopher.metrics import RunMetrics, SuperstepMetrics
from pictures import assert_picture

ROAD_SIZE = 400


@pytest.fixture(scope="module")
def road(tmp_path_factory):
    """A road graph in 4 METIS partitions (ingested on the driver, no Spark), with its input edges."""
    path = tmp_path_factory.mktemp("plots") / "road.gofs"
    graph = road_network(ROAD_SIZE, seed=2)
    goffish.ingest(graph, str(path), num_partitions=4)
    return path, graph


def _axis(figure, title_start):
    return next(a for a in figure.axes if a.get_title().startswith(title_start))


def _subgraph_of_vertex(g) -> dict:
    """Original vertex id -> sub-graph, straight from the template's vertex files."""
    table = pa.concat_tables([pq.read_table(layout.template_vertices(g.root, p), columns=["id", "sg"])
                              for p in range(g.num_partitions)])
    return dict(zip(table.column("id").to_pylist(), table.column("sg").to_pylist()))


def test_info_plot_draws_the_partitioning(road, tmp_path, capsys):
    path, graph = road
    out = tmp_path / "road.png"
    assert main(["info", str(path), "--plot", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    assert_picture(out, (1100, 800))

    g = goffish.open(str(path))
    m = g.manifest
    figure = plot_graph(g)
    bars = [p.get_height() for p in _axis(figure, "vertices and edges").patches]
    assert bars == [p["num_vertices"] for p in m["partitions"]] + [p["num_edges"] for p in m["partitions"]]
    assert [p.get_height() for p in _axis(figure, "cut edges").patches] == [p["cut_edges"] for p in m["partitions"]]

    # sub-graph sizes and meta-graph degrees against the template's vertex -> sub-graph map and NetworkX
    sg = _subgraph_of_vertex(g)
    sizes = Counter(Counter(sg.values()).values())
    drawn = _axis(figure, "sub-graph sizes").lines[0].get_xydata()
    assert {int(x): int(y) for x, y in drawn} == dict(sizes)
    meta = nx.Graph()
    meta.add_nodes_from(range(m["subgraphs"]["count"]))
    src, dst = graph.edges.column("src").to_pylist(), graph.edges.column("dst").to_pylist()
    meta.add_edges_from((sg[u], sg[v]) for u, v in zip(src, dst) if sg[u] != sg[v])
    degrees = Counter(d for _, d in meta.degree() if d > 0)
    assert degrees, "the test graph should have sub-graphs joined by cut edges"
    drawn = _axis(figure, "meta-graph degrees").lines[0].get_xydata()
    assert {int(x): int(y) for x, y in drawn} == dict(degrees)
    isolated = sum(1 for _, d in meta.degree() if d == 0)
    assert _axis(figure, "meta-graph degrees").get_title().startswith(f"meta-graph degrees ({isolated:,} with none")


def test_plot_to_a_missing_directory_is_a_clear_error(road, tmp_path, capsys):
    path, _ = road
    out = tmp_path / "nowhere" / "road.png"
    assert main(["info", str(path), "--plot", str(out)]) == 2
    assert f"{out}: cannot write the picture there" in capsys.readouterr().err
    assert not out.parent.exists()


def test_run_timeline_and_metrics_plot(spark, road, tmp_path, capsys):
    path, _ = road
    out = tmp_path / "cc.png"
    assert main(["run", "cc", str(path), "--out", str(tmp_path / "cc"), "--quiet", "--timeline", str(out)]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out.strip().splitlines()[-1])["algorithm"] == "cc"   # stdout stays JSON
    assert f"wrote {out}" in captured.err
    assert_picture(out, (1000, 800))

    metrics = goffish.open(str(path), spark=spark).connected_components(progress=False).metrics
    again = tmp_path / "cc-again.png"
    figure = metrics.plot(again)
    assert_picture(again, (1000, 800))
    # the whole run as one bar: set-up phases, the supersteps, output phases, in run order
    from gopher.metrics import OUTPUT_PHASES, SETUP_PHASES

    strip = _axis(figure, "the run")
    expected = [metrics.phases.get(p, 0.0) for p in SETUP_PHASES] + [sum(s.seconds for s in metrics.supersteps)] \
        + [metrics.phases.get(p, 0.0) for p in OUTPUT_PHASES]
    assert np.allclose([p.get_width() for p in strip.patches], [x for x in expected if x > 0])
    assert set(metrics.phases) == {"submit", "workers", "rendezvous", "topology", "rows", "handoff"}
    assert np.isclose(sum(metrics.phases[p] for p in SETUP_PHASES), metrics.setup_seconds, rtol=0.05, atol=0.02)
    n = metrics.num_supersteps
    heights = np.array([p.get_height() for p in _axis(figure, "time per superstep").patches]).reshape(3, n)
    assert np.allclose(heights.sum(axis=0), [s.seconds for s in metrics.supersteps])
    assert np.allclose(heights[0], [min(s.task_seconds, s.seconds) for s in metrics.supersteps])
    active = [p.get_height() for p in _axis(figure, "work per superstep").patches]
    assert active == [s.active_subgraphs for s in metrics.supersteps]


def test_timeline_per_instance():
    """Time-series metrics: supersteps shaded by instance, plus wall time per instance."""
    steps = [SuperstepMetrics(s, wall, active, messages, 0, task_seconds=task, exchange_seconds=exchange,
                              instance=instance)
             for s, wall, active, messages, task, exchange, instance in [
                 (0, 1.0, 5, 10, 0.5, 0.2, 7), (1, 0.5, 2, 0, 0.1, 0.1, 7),
                 (0, 2.0, 5, 8, 1.5, 0.9, 8),          # exchange beyond the wall time left is cut to it
                 (0, 0.8, 4, 3, 0.2, 0.0, 9), (1, 0.4, 1, 0, 0.1, 0.0, 9), (2, 0.3, 1, 0, 0.0, 0.0, 9)]]
    metrics = RunMetrics("Demo", steps, setup_seconds=0.5, output_seconds=0.25)
    figure = metrics.plot()
    per_instance = _axis(figure, "time per instance")
    heights = np.array([p.get_height() for p in per_instance.patches]).reshape(3, 3)
    assert np.allclose(heights.sum(axis=0), [1.5, 2.0, 1.5])          # wall seconds of instances 7, 8, 9
    assert np.allclose(heights[0], [0.6, 1.5, 0.3])                   # compute
    assert np.allclose(heights[1], [0.3, 0.5, 0.0])                   # exchange (instance 8 cut to 0.5)
    assert [t.get_text() for t in per_instance.get_xticklabels()] == ["7", "8", "9"]
    assert per_instance.get_title() == "time per instance (1-3 supersteps each)"
    labels = [t.get_text() for t in _axis(figure, "time per superstep").texts]
    assert labels == ["i7", "i8", "i9"]


def test_timeline_of_a_timeseries_run(spark, tmp_path, capsys):
    from goffish.temporal import road_with_travel_times

    graph = tmp_path / "road-t.gofs"
    road_with_travel_times(str(graph), 150, hours=3, num_partitions=3)
    out = tmp_path / "tdsp.png"
    code = main(["run", "tdsp", str(graph), "--source", "0", "--departure", "0", "--out", str(tmp_path / "tdsp"),
                 "--quiet", "--timeline", str(out)])
    assert code == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["algorithm"] == "tdsp" and report["supersteps"] >= 1
    assert_picture(out)


def test_bench_plot(spark, road, tmp_path, capsys):
    from benchmarks.bench_gopher import main as bench
    from goffish.jars import resolve_graphframes_jar

    path, _ = road
    out, report_file = tmp_path / "bench.png", tmp_path / "bench.json"
    argv = ["--graph", str(path), "--algorithms", "cc", "--plot", str(out), "--json", str(report_file)]
    with_graphframes = resolve_graphframes_jar() is not None
    assert bench(argv + ([] if with_graphframes else ["--skip-graphframes"])) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    assert_picture(out, (600, 500))
    report = json.loads(report_file.read_text())
    figure = bench_figure(report)
    axis = figure.axes[0]
    assert axis.get_yscale() == "log"
    systems = [t.get_text() for t in axis.get_legend().get_texts()]
    assert systems == (["gopher", "graphframes", "igraph"] if with_graphframes else ["gopher", "igraph"])
    assert sorted(p.get_height() for p in axis.patches) == sorted(r["seconds"] for r in report["rows"])


def test_bench_plot_marks_cancelled_baselines(tmp_path):
    report = {"vertices": 10, "edges": 20, "partitions": 2, "spark_master": "local[2]", "rows": [
        {"algorithm": "cc", "system": "gopher", "seconds": 1.5},
        {"algorithm": "cc", "system": "igraph", "seconds": 0.01},
        {"algorithm": "cc", "system": "graphframes", "seconds": 60.0, "lower_bound": True},
        {"algorithm": "sssp", "system": "gopher", "seconds": 2.0},
        {"algorithm": "sssp", "system": "graphframes", "seconds": 40.0}]}
    from goffish.plots import plot_bench

    figure = plot_bench(report, tmp_path / "b.png")
    assert_picture(tmp_path / "b.png", (600, 500))
    axis = figure.axes[0]
    hatched = [p.get_height() for p in axis.patches if p.get_hatch()]
    assert hatched == [60.0]
    assert ">60" in [t.get_text() for t in axis.texts]
    assert [t.get_text() for t in axis.get_xticklabels()] == ["cc", "sssp"]
    assert [t.get_text() for t in axis.get_legend().get_texts()] == ["gopher", "graphframes", "igraph"]
