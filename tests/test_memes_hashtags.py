"""Meme tracking and hashtag aggregation against straightforward single-machine computations
on the same generated posts (read from the generator's tables, not from GoFS)."""
from collections import Counter

import pyarrow.parquet as pq
import pytest

from goffish.cli import main as cli
from goffish.generators import lfr
from goffish.temporal import post_instances, social_with_posts
from gofs.errors import InputError

N, INTERVALS, SEED = 300, 8, 21
OPTIONS = {"hashtags": 12, "memes": 2, "spread": 0.4}


@pytest.fixture(scope="module")
def social(spark, tmp_path_factory):
    """(stored graph, {instance: {vertex: posts}}, {vertex: neighbours})."""
    g = social_with_posts(str(tmp_path_factory.mktemp("social") / "g.gofs"), N, INTERVALS, num_partitions=3,
                          seed=SEED, avg_degree=6, spark=spark, **OPTIONS)
    graph = lfr(N, avg_degree=6, max_degree=50, seed=SEED)
    posts = {}
    for i, inst in enumerate(post_instances(graph, INTERVALS, seed=SEED, **OPTIONS)):
        table = inst.vertex_values
        posts[i] = dict(zip(table.column("id").to_pylist(), table.column("hashtags").to_pylist()))
    neighbours = {v: set() for v in range(N)}
    for u, v in zip(graph.edges.column("src").to_pylist(), graph.edges.column("dst").to_pylist()):
        neighbours[u].add(v)
        neighbours[v].add(u)
    return g, posts, neighbours


def reference_spread(g, posts, neighbours, meme, instances):
    first = {}
    for i in instances:
        for v, tags in posts[i].items():
            if meme in (tags or []) and v not in first:
                first[v] = i
    vid = {u: position for position, u in enumerate(g.vertex_ids.to_pylist())}
    tree = {}
    for v, i in first.items():
        earlier = [(first[u], -vid[u], u) for u in neighbours[v] if u in first and first[u] < i]
        tree[v] = (i, max(earlier)[2] if earlier else None)
    return tree


@pytest.mark.parametrize("meme, time", [("#meme0", None), ("#meme1", (120, 360))])
def test_meme_tracking_matches_reference(social, meme, time):
    g, posts, neighbours = social
    instances = list(range(INTERVALS)) if time is None else [2, 3, 4, 5]
    spread = g.meme_tracking(meme, time=time)
    tree = {row["id"]: (row["first_instance"], row["parent"]) for row in spread.tree.collect()}
    expected = reference_spread(g, posts, neighbours, meme, instances)
    assert tree == expected
    assert sum(parent is not None for _, parent in tree.values()) > 0       # the meme really spread
    counts = {row["instance"]: row["new_carriers"] for row in spread.counts.collect()}
    assert counts == {i: sum(first == i for first, _ in expected.values()) for i in instances}
    assert spread.result.instances == instances


def test_hashtag_aggregation_matches_reference(social):
    g, posts, neighbours = social
    summary = g.hashtag_aggregation(k=5, time=(60, 300))
    instances = [1, 2, 3, 4]
    got = {}
    for row in summary.neighbourhood.collect():
        got.setdefault((row["instance"], row["id"]), {})[row["hashtag"]] = row["count"]
    expected = {}
    for i in instances:
        for v in range(N):
            counts = Counter(t for u in neighbours[v] | {v} for t in posts[i][u] or [])
            if counts:
                expected[(i, v)] = dict(counts)
    assert got == expected
    totals = Counter(t for i in instances for tags in posts[i].values() for t in tags or [])
    ranked = sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
    assert [(r["rank"], r["hashtag"], r["count"]) for r in summary.top.orderBy("rank").collect()] == \
        [(rank + 1, tag, count) for rank, (tag, count) in enumerate(ranked)]
    assert summary.result.metrics.num_supersteps <= 3    # all four instances shared the supersteps


def test_missing_attribute(social):
    g, _, _ = social
    with pytest.raises(InputError, match="no per-instance vertex attribute 'posts'"):
        g.hashtag_aggregation(attribute="posts")
    with pytest.raises(InputError, match="no per-instance vertex attribute 'posts'"):
        g.meme_tracking("#meme0", attribute="posts")


def test_goffish_run_memes_and_hashtags(social, tmp_path):
    g, posts, neighbours = social
    out = str(tmp_path / "memes")
    assert cli(["run", "memes", g.path, "--out", out, "--meme", "#meme0", "--instances", "0,1,2", "--quiet"]) == 0
    expected = reference_spread(g, posts, neighbours, "#meme0", [0, 1, 2])
    tree = pq.read_table(f"{out}/tree")
    assert dict(zip(tree.column("id").to_pylist(), zip(tree.column("first_instance").to_pylist(),
                                                       tree.column("parent").to_pylist()))) == expected
    assert sum(pq.read_table(f"{out}/counts").column("new_carriers").to_pylist()) == len(expected)
    out = str(tmp_path / "hashtags")
    assert cli(["run", "hashtags", g.path, "--out", out, "--time", "0,60", "--top", "3", "--quiet"]) == 0
    totals = Counter(t for tags in posts[0].values() for t in tags or [])
    top = pq.read_table(f"{out}/top").sort_by("rank")
    ranked = sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))
    assert top.column("hashtag").to_pylist() == [tag for tag, _ in ranked[:3]]
    assert pq.read_table(f"{out}/neighbourhood").column_names == ["instance", "id", "hashtag", "count"]


def test_memes_and_hashtags_run_without_an_index_of_all_ids(social, monkeypatch):
    """Parents are joined to their ids on Spark and the top-k is ranked on Spark: the driver
    never holds every vertex id (nor, for hashtags, the whole vocabulary)."""
    from gofs.store import GraphStore

    def refuse(self):
        raise AssertionError("a run path read every vertex id on the driver")

    g, posts, neighbours = social
    expected = reference_spread(g, posts, neighbours, "#meme1", [0, 1, 2, 3])
    monkeypatch.setattr(GraphStore, "vertex_ids", property(refuse))
    monkeypatch.setattr(GraphStore, "_id_index", property(refuse))
    g = type(g)(g.path)
    spread = g.meme_tracking("#meme1", instances=[0, 1, 2, 3])
    assert {r["id"]: (r["first_instance"], r["parent"]) for r in spread.tree.collect()} == expected
    summary = g.hashtag_aggregation(k=3, instances=[0, 1, 2, 3])
    totals = Counter(t for i in range(4) for tags in posts[i].values() for t in tags or [])
    ranked = sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
    assert [(r["rank"], r["hashtag"], r["count"]) for r in summary.top.orderBy("rank").collect()] == \
        [(rank + 1, tag, count) for rank, (tag, count) in enumerate(ranked)]
