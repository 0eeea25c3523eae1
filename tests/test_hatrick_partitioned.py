"""The live graph split over workers by bucket (hatrick.partitioned): the same updates give the same
graph, components and verdicts as one state, for 1, 2 and 3 workers and across moves of buckets
between running workers; checked against the one-update-at-a-time reference and NetworkX."""
import numpy as np
import pandas as pd
import pytest

from hatrick.live import apply_batch, build_state, components_frame, edge_frame
from hatrick.partitioned import PartitionedGraph, route
from hatrick.ring import HashRing
from hatrick.updates import validate
from hatrick_reference import Reference, live_edge_counts, live_partition

N, BUCKETS = 40, 16


def batches(seed, count, size, directed):
    rng = np.random.default_rng(seed)
    seq = 0
    for _ in range(count):
        rows = []
        for _ in range(size):
            seq += 1
            op = str(rng.choice(["add_edge", "remove_edge", "set_edge", "set_vertex", "remove_vertex", "add_vertex"],
                                p=[0.45, 0.3, 0.08, 0.07, 0.05, 0.05]))
            row = {"op": op, "producer": "p", "seq": seq, "time": float(seq)}
            u, v = int(rng.integers(N + 5)), int(rng.integers(N + 5))
            if op in ("set_vertex", "remove_vertex", "add_vertex"):
                row["id"] = u
            else:
                row["src"], row["dst"] = u, v
            if op.startswith("set"):
                row["attribute"], row["value"] = "w", float(rng.integers(5))
            rows.append(row)
        yield rows


def start(directed, seed=0):
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, N, 60), rng.integers(0, N, 60)
    return build_state(np.arange(N), src, dst, directed), Reference(range(N), zip(src.tolist(), dst.tolist()),
                                                                    directed)


def owners(workers):
    return HashRing(range(workers), 32).owners(BUCKETS)


def check(graph, single, ref):
    assert sorted(graph.vertices()["id"].tolist()) == sorted(ref.vertices)
    assert live_edge_counts(graph.edges(), ref.directed) == ref.edge_counts()
    assert live_partition(graph.components()) == ref.partition()
    values = pd.concat([edge_frame(w.state) for w in graph.workers])
    if "w" in values:
        got = {((u, v) if ref.directed else frozenset((u, v))): w for u, v, w in zip(values.src, values.dst, values.w)}
        assert {k: w for k, w in got.items() if pd.notna(w)} == \
            {k: a["w"] for k, (_, a, _) in ref.edges.items() if "w" in a}


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("workers", [1, 2, 3])
def test_workers_give_the_graph_components_and_verdicts_of_one_state(workers, directed):
    single, ref = start(directed)
    graph = PartitionedGraph(single, owners(workers))
    for rows in batches(workers, 8, 30, directed):
        batch = validate(rows, "int64")[0]
        single, outcome = apply_batch(single, batch)
        applied, rejected = graph.apply(batch)
        for row in rows:
            ref.apply(row)
        assert applied == outcome.applied
        assert sorted(rejected.seq) == sorted(outcome.rejected.seq)
        check(graph, single, ref)
    if workers == 1:                       # one worker is the single state, labels included
        pd.testing.assert_frame_equal(graph.components(), components_frame(single))


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("directed", [False, True])
def test_scaling_out_and_in_moves_only_planned_buckets_and_loses_nothing(directed):
    single, ref = start(directed, seed=3)
    graph = PartitionedGraph(single, owners(2))
    logs = list(batches(7, 9, 30, directed))
    for step, rows in enumerate(logs):
        if step in (3, 6):
            before = [len(w.state.live_slots()) for w in graph.workers]
            after = owners(3) if step == 3 else owners(2)
            moved = int((after != graph.owner).sum())
            sent = graph.rescale(after)
            assert moved > 0 and sent > 0 and len(graph.workers) == int(after.max()) + 1
            assert graph.rescale(graph.owner.copy()) == 0          # nothing planned, nothing sent
            assert sum(len(w.state.live_slots()) for w in graph.workers) == sum(before)
            check(graph, single, ref)
        batch = validate(rows, "int64")[0]
        graph.apply(batch)
        for row in rows:
            ref.apply(row)
        check(graph, single, ref)


def test_routing_is_by_owner_and_keeps_batch_order():
    rows = [{"op": "add_edge", "src": i, "dst": (i * 7) % 50, "producer": "p", "seq": i, "time": 0.0}
            for i in range(50)] + [{"op": "remove_vertex", "id": 3, "producer": "p", "seq": 99, "time": 0.0}]
    batch = validate(rows, "int64")[0]
    parts = route(batch, owners(3), directed=False)
    own = np.concatenate([r[why == 0] for r, why in parts])
    assert sorted(own.tolist()) == list(range(51))                 # every update has exactly one owner
    assert all((np.diff(r) >= 0).all() for r, _ in parts)
    assert sum(int((r == 50).sum()) for r, _ in parts) == 3        # a vertex removal reaches every worker


@pytest.mark.parametrize("directed", [False, True])
def test_routing_equals_a_row_by_row_oracle(directed):
    """Each worker's rows and reasons equal those found one row at a time: the edge's owner has
    it as its own, the owner of an ``add_edge`` endpoint held elsewhere learns the vertex, a
    vertex removal reaches every worker, and a row reaches a worker once, in batch order."""
    from hatrick.partitioned import BROADCAST, END_A, END_B, OWN, undirected_bucket
    from hatrick.ring import bucket_of
    from hatrick.updates import ADD_EDGE, OPS, REMOVE_VERTEX, VERTEX_OPS

    rng = np.random.default_rng(3)
    ops = rng.choice(OPS, 300)
    rows = [{"op": op, "id" if OPS.index(op) in VERTEX_OPS else "src": int(rng.integers(0, 40)),
             **({} if OPS.index(op) in VERTEX_OPS else {"dst": int(rng.integers(0, 40))}),
             **({"attribute": "w", "value": 1.0} if op.startswith("set") else {}),
             "producer": "p", "seq": i, "time": 0.0} for i, op in enumerate(ops)]
    batch = validate(rows, "int64")[0]
    owner = owners(3)
    expected = [([], []) for _ in range(3)]
    for row, (op, a, b) in enumerate(zip(batch.op, batch.a, batch.b)):
        ba = int(bucket_of([a], BUCKETS)[0])
        bb = ba if op in VERTEX_OPS else int(bucket_of([b], BUCKETS)[0])
        target = owner[ba] if directed else owner[int(undirected_bucket(np.array([ba]), np.array([bb]))[0])]
        for w in range(3):
            why = OWN if w == target else END_A if op == ADD_EDGE and owner[ba] == w else \
                END_B if op == ADD_EDGE and owner[bb] == w else BROADCAST if op == REMOVE_VERTEX else None
            if why is not None:
                expected[w][0].append(row)
                expected[w][1].append(why)
    for given in (None, bucket_of(batch.a, BUCKETS)):              # hashed here, or by the caller
        for (got_rows, got_why), (want_rows, want_why) in zip(route(batch, owner, directed, given), expected):
            assert got_rows.tolist() == want_rows and got_why.tolist() == want_why


@pytest.mark.parametrize("ids", ["int64", "string"])
@pytest.mark.parametrize("producers", ["text", "mixed"])       # mixed: no producer codes (one object per row)
def test_dealt_columns_equal_each_workers_rows_taken(ids, producers):
    """The columns :func:`deal` takes for every worker in one pass (object-typed ids by numpy)
    equal the batch's rows that :func:`route` gives the worker, taken one worker at a time, with an
    endpoint row turned into ``add_vertex`` of that endpoint: on a random batch of every op, with
    attribute values and vertex removals (which reach every worker)."""
    from hatrick.partitioned import END_A, END_B, deal
    from hatrick.updates import ADD_VERTEX, is_absent

    rows = [row for chunk in batches(7, 1, 400, False) for row in chunk]
    for i, row in enumerate(rows):
        for field in ("id", "src", "dst"):
            if field in row and ids == "string":
                row[field] = f"v{row[field]}"
        row["producer"] = f"p{i % 3}" if producers == "text" or i % 2 else i % 3
    batch = validate(rows, ids)[0]
    assert (batch.producer_codes is None) == (producers == "mixed")
    owner = owners(3)
    routed, parts = deal(batch, owner, False)
    assert [(r.tolist(), w.tolist()) for r, w in routed] == [(r.tolist(), w.tolist())
                                                             for r, w in route(batch, owner, False)]
    for (taken, why), part in zip(routed, parts):
        want = batch.take(taken)
        ends = (why == END_A) | (why == END_B)
        want.op[ends] = ADD_VERTEX
        want.a[why == END_B] = want.b[why == END_B]
        assert len(part) == len(taken) and (why == END_B).any() and ends.sum() < len(taken)
        for name in ("op", "a", "b", "seq", "time", "producer"):
            assert getattr(part, name).tolist() == getattr(want, name).tolist(), name
        for name in ("attribute", "value"):
            assert not is_absent(getattr(part, name))
            assert pd.Series(getattr(part, name)).equals(pd.Series(getattr(want, name))), name
        assert part.a.dtype == batch.a.dtype and part.op.dtype == batch.op.dtype


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_batch_routed_before_a_rescale_is_routed_again_under_the_new_owners():
    """A batch routed (with the a-end buckets the stream hashed) while the graph had 2 workers and
    sent after a move to 3 is dealt out again from those buckets: the graph equals the reference."""
    from hatrick.ring import bucket_of

    single, ref = start(False, seed=5)
    graph = PartitionedGraph(single, owners(2))
    for step, rows in enumerate(batches(11, 4, 30, False)):
        batch = validate(rows, "int64")[0]
        routed = graph.route(batch, bucket_of(batch.a, BUCKETS))
        if step == 2:
            graph.rescale(owners(3))
        graph.outcome(graph.send(batch, routed))
        graph.commit()
        for row in rows:
            ref.apply(row)
        check(graph, single, ref)
    assert len(graph.workers) == 3


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("directed", [False, True])          # directed: on the gathered graph
@pytest.mark.parametrize("workers", [1, 3])
def test_reachability_over_workers_equals_one_state(workers, directed):
    from hatrick.live import reachable_frame

    single, _ = start(directed, seed=5)
    graph = PartitionedGraph(single, owners(workers))
    for rows in batches(11, 4, 30, directed):
        batch = validate(rows, "int64")[0]
        single, _ = apply_batch(single, batch)
        graph.apply(batch)
        for sources, sinks in (([0, 1, 2, 41], [3, 4, 5, 0, 44]), ({"w": [1.0, 2.0]}, list(range(N)))):
            expected = reachable_frame(single, sources, sinks)
            got = graph.reachable(sources, sinks)
            assert sorted(zip(got.source, got.sink)) == sorted(zip(expected.source, expected.sink))


def test_a_worker_owns_by_the_buckets_of_its_ids_as_they_grow_and_as_the_bucket_count_changes():
    """Each worker hashes a vid once (the cache follows ids a batch appends, a move's rebuilt
    state and a new bucket count): what it owns is always what bucket_of of its ids says."""
    from hatrick.partitioned import Worker
    from hatrick.ring import bucket_of

    state, _ = start(False)
    worker = Worker(0, state, HashRing(range(2), 128).owners(BUCKETS))

    def owned_by_hash():
        vids = np.flatnonzero(worker.state.alive)
        return vids[worker.owner[bucket_of(worker.state.ids.to_numpy()[vids], len(worker.owner))] == 0]

    assert np.array_equal(worker.owned(), owned_by_hash())
    for rows in batches(5, 3, 40, False):                   # adds vertices N..N+4: ids appended
        worker.state = apply_batch(worker.state, validate(pd.DataFrame(rows), "int64", False)[0])[0]
        assert np.array_equal(worker.owned(), owned_by_hash())
    assert len(worker.state.ids) > N
    worker.owner = HashRing(range(2), 128).owners(BUCKETS // 2)
    assert np.array_equal(worker.owned(), owned_by_hash())


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_the_boundary_exchange_sends_only_the_ghosts_that_changed(monkeypatch):
    """The first exchange sends every ghost's label; after a batch that changes no component,
    only the ghost it adds (if any) is sent, and the merged components still equal NetworkX's,
    also after random batches and a move that renumbers the workers' vertices."""
    from hatrick import datafile
    from hatrick.partitioned import Worker

    sent = []
    send = Worker.send_ghosts

    def counted(worker, peers):
        answer = send(worker, peers)
        sent.extend(len(datafile.loads(p)["vids"]) for p in (answer[2] or {}).values())
        return answer

    monkeypatch.setattr(Worker, "send_ghosts", counted)
    single, ref = start(False, seed=9)
    graph = PartitionedGraph(single, owners(2))
    check(graph, single, ref)
    ghosts = sum(len(w.ghosts()) for w in graph.workers)
    assert ghosts > 4 and sum(sent) == ghosts
    component = next(c for c in ref.partition() if len(c) > 2)
    u, v = sorted(component)[:2]
    sent.clear()
    rows = [{"op": "add_edge", "src": u, "dst": v, "producer": "q", "seq": 1, "time": 0.0}]
    graph.apply(validate(rows, "int64")[0])
    ref.apply(rows[0])
    check(graph, single, ref)
    assert sum(sent) <= 1
    for step, rows in enumerate(batches(13, 6, 30, False)):
        if step == 3:
            graph.rescale(owners(3))
        graph.apply(validate(rows, "int64")[0])
        for row in rows:
            ref.apply(row)
        check(graph, single, ref)


def test_the_exchange_kernels_equal_their_array_definitions():
    """:func:`_ghost_updates` brings the labels of the ghosts that share a component here with another
    vertex (a ghost left without edges joins nothing) from one labelling to the next, looking only
    at the relabelled vids, and returns exactly the vids whose ghost label changed, as a pass over
    every vid finds them; :func:`_ghost_pairs` keeps the held ghosts alive here, in vid order, and
    label pairs that join exactly the label sets all of their pairs join (checked by NetworkX), leaving
    its per-label scratch arrays as they came."""
    import networkx as nx

    from hatrick.partitioned import _ghost_pairs, _ghost_updates

    rng = np.random.default_rng(4)
    n = 500
    owned = rng.random(n) < 0.5

    def labelling(alive, group):                          # components of 1, 2, ... alive vertices, as a state's labels
        smallest = pd.Series(np.arange(n)[alive]).groupby(group[alive]).min()
        return np.where(alive, smallest.reindex(group).to_numpy(na_value=-1), -1).astype(np.int64)

    def ghost_labels(comp):
        size = np.bincount(comp[comp >= 0], minlength=n)
        return np.where((comp >= 0) & ~owned & (size[np.maximum(comp, 0)] > 1), comp, -1)

    alive, group = rng.random(n) < 0.8, rng.integers(0, 300, n)
    comp = labelling(alive, group)
    label, members = np.full(n, -1, np.int64), np.zeros(n, np.int64)
    changed = _ghost_updates(np.arange(n, dtype=np.int64), np.zeros(0, np.int64), comp, comp >= 0, owned, members,
                             label)
    expected = ghost_labels(comp)
    assert ((comp >= 0) & ~owned & (expected < 0)).any() and (expected >= 0).any()
    assert np.array_equal(label, expected) and np.array_equal(np.sort(changed), np.flatnonzero(expected >= 0))
    for step in range(6):                                 # regroup some vertices, kill and revive some
        moved = rng.random(n) < 0.1
        group = np.where(moved, rng.integers(0, 300, n), group)
        alive = np.where(rng.random(n) < 0.05, ~alive, alive)
        after = labelling(alive, group)
        before_label = label.copy()
        relabelled = np.flatnonzero(after != comp)
        assert 0 < len(relabelled) < n // 2
        changed = _ghost_updates(relabelled, comp, after, after >= 0, owned, members, label)
        expected = ghost_labels(after)
        assert np.array_equal(label, expected)
        assert np.array_equal(np.sort(changed), np.flatnonzero(expected != before_label))
        assert np.array_equal(members, np.bincount(after[after >= 0], minlength=n))
        comp = after
    split, theirs_size = 400, 60
    held = np.where(rng.random(n) < 0.6, rng.integers(0, theirs_size, n), -1)
    beyond = rng.integers(-1, n, n - split)
    alive = comp >= 0
    first_mine, first_theirs = np.full(theirs_size, -1, np.int64), np.full(n, -1, np.int64)
    their, mine, here = _ghost_pairs(np.flatnonzero(held >= 0), held, split, beyond, alive, comp % 40, first_mine,
                                     first_theirs)
    assert (first_mine == -1).all() and (first_theirs == -1).all()      # the scratch is left as it came
    vid = np.r_[np.arange(split), beyond]
    kept = (held >= 0) & (vid >= 0) & alive[np.maximum(vid, 0)]
    assert np.array_equal(here, vid[kept])
    every = nx.Graph((("t", t), ("m", m)) for t, m in zip(held[kept], comp[vid[kept]] % 40))
    reduced = nx.Graph((("t", t), ("m", m)) for t, m in zip(their, mine))
    assert len(their) < kept.sum() and {frozenset(e) for e in reduced.edges} <= {frozenset(e) for e in every.edges}
    assert {frozenset(c) for c in nx.connected_components(reduced)} == \
        {frozenset(c) for c in nx.connected_components(every)}


def test_merged_labels_are_the_smallest_joint_label_of_each_networkx_component():
    """:func:`merge_components` maps every worker's label to the smallest joint label (offset + label)
    of its component in the graph of all the workers' labels joined by the boundary pairs
    (NetworkX), an unjoined label to itself; merge after merge, each reusing the last one's array
    (label spaces that grow included), and with no pairs at all."""
    import networkx as nx

    from hatrick.partitioned import merge_components

    rng = np.random.default_rng(5)
    merged = None
    for sizes in ([30, 50, 20], [30, 60, 20], [35, 60, 25], [35, 60, 25]):
        offsets = np.cumsum([0] + sizes)
        joins = []
        for owner, size in enumerate(sizes):
            count = int(rng.integers(5, 15))
            senders = rng.choice([w for w in range(len(sizes)) if w != owner], count)
            joins.append((senders, rng.integers(0, np.array(sizes)[senders]), rng.integers(0, size, count)))
        merged = merge_components(offsets, joins, merged)
        graph = nx.Graph()
        graph.add_nodes_from(range(int(offsets[-1])))
        for owner, (senders, theirs, mine) in enumerate(joins):
            graph.add_edges_from(zip((offsets[senders] + theirs).tolist(), (offsets[owner] + mine).tolist()))
        smallest = np.empty(int(offsets[-1]), np.int64)
        for component in nx.connected_components(graph):
            smallest[list(component)] = min(component)
        assert (smallest != np.arange(offsets[-1])).any()
        for index, size in enumerate(sizes):
            labels = rng.permutation(size)
            assert np.array_equal(merged.of(index, labels), smallest[offsets[index] + labels])
    none = merge_components(offsets, [], merged)
    assert np.array_equal(none.of(1, np.arange(5)), offsets[1] + np.arange(5))


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("workers", [2, 3])
def test_batches_that_only_join_or_only_split_across_the_boundary_give_networkx_components(workers):
    """The exchange sends only the ghosts whose label a batch changed, found from the vids the batch
    relabelled: a batch of additions only (components join, ghosts take the smaller label) and one
    of removals only (components split, ghosts the batch never named get new labels) must each
    reach the ghosts' owners, or the merged components and the pairs a live selection reads (asked
    with the commit, as a stream does) differ from NetworkX's."""
    import networkx as nx

    rng = np.random.default_rng(31)
    n = 80
    src, dst = rng.integers(0, n, 40), rng.integers(0, n, 40)           # many small components
    graph = PartitionedGraph(build_state(np.arange(n), src, dst, False), owners(workers))
    ref = nx.MultiGraph()
    ref.add_nodes_from(range(n))
    ref.add_edges_from(zip(src.tolist(), dst.tolist()))
    sources, sinks = list(range(0, n, 7)), list(range(3, n, 5))
    graph.components()                                                  # the first exchange: every ghost
    seq, relabelled_ghosts = 0, 0
    for step in range(8):
        if step % 2 == 0:                                                # join: additions only
            pairs = [(int(u), int(v)) for u, v in rng.integers(0, n, (12, 2))]
            ops = ["add_edge"] * len(pairs)
        else:                                                            # split: removals only
            present = list(ref.edges())
            pairs = [present[i] for i in rng.choice(len(present), 14, replace=False)]
            ops = ["remove_edge"] * len(pairs)
        rows = []
        for op, (u, v) in zip(ops, pairs):
            seq += 1
            rows.append({"op": op, "src": u, "dst": v, "producer": "p", "seq": seq, "time": float(seq)})
            (ref.add_edge if op == "add_edge" else ref.remove_edge)(u, v)
        before = [w._sent["label"].copy() for w in graph.workers]
        graph.stage(validate(rows, "int64")[0])
        graph.commit([sources, sinks])
        got = graph.reachable(sources, sinks)
        expected = {(s, t) for s in sources for t in sinks if nx.has_path(ref, s, t)}
        assert set(zip(got.source, got.sink)) == expected
        assert live_partition(graph.components()) == sorted(sorted(c) for c in nx.connected_components(ref))
        named = {x for u, v in pairs for x in (u, v)}
        for w, old in zip(graph.workers, before):
            label = w._sent["label"]
            ids = w.state.ids.to_numpy()
            moved = np.flatnonzero((label[:len(old)] != old) & (old >= 0) & (label[:len(old)] >= 0))
            relabelled_ghosts += len(set(ids[moved].tolist()) - named)
    assert relabelled_ghosts > 0                                        # ghosts the batches never named


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_ghost_left_without_edges_leaves_the_boundary_exchange():
    """A vertex stays alive after its last edge goes; where it was a ghost it joins nothing more,
    so its owner stops holding it (the exchange follows the boundary, not the stream's history),
    and the merged components still equal NetworkX's."""
    single, ref = start(False, seed=9)
    graph = PartitionedGraph(single, owners(2))
    stale = 0
    for rows in batches(21, 8, 30, False):
        graph.apply(validate(rows, "int64")[0])
        for row in rows:
            ref.apply(row)
        check(graph, single, ref)                       # its components run the exchange
        for w in graph.workers:
            s = w.state
            linked = np.zeros(len(s.ids), bool)
            live = s.live_slots()
            linked[s.src[live]] = True
            linked[s.dst[live]] = True
            edged = np.intersect1d(w.ghosts(), np.flatnonzero(linked))
            stale += len(w.ghosts()) - len(edged)
            held = graph.workers[1 - w.index]._held[w.index]
            assert sorted(held["ids"][held["label"] >= 0].tolist()) == sorted(s.ids.to_numpy()[edged].tolist())
    assert stale > 0
