"""The live graph: batch application against a one-update-at-a-time reference, incremental
connected components and reachability against NetworkX from scratch after every batch."""
import networkx as nx
import numpy as np
import pandas as pd
from hypothesis import given, settings, strategies as st

from hatrick_reference import Reference, live_edge_counts, live_partition
from hatrick.live import (GraphView, apply_batch, build_state, components_frame, components_from_scratch,
                          edge_frame, reachable_frame, select_vertices, vertex_frame)
from hatrick.updates import validate

N = 10
OPS = ["add_edge", "remove_edge", "add_vertex", "remove_vertex", "set_vertex", "set_edge"]


def update(op, u, v, value, seq):
    d = {"op": op, "producer": "p", "seq": seq, "time": float(seq)}
    if op in ("add_vertex", "remove_vertex", "set_vertex"):
        d["id"] = u
    else:
        d["src"], d["dst"] = u, v
    if op.startswith("set"):
        d["attribute"], d["value"] = "w", value
    return d


batches_strategy = st.lists(
    st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, N + 2), st.integers(0, N + 2),
                       st.one_of(st.none(), st.integers(0, 3).map(float))), min_size=1, max_size=12),
    min_size=1, max_size=6)


def reach_oracle(ref: Reference, sources, sinks):
    g = ref.nx()
    pairs = set()
    for s in sources:
        if s not in g:
            continue
        seen = nx.descendants(g, s) | {s} if ref.directed else nx.node_connected_component(g, s)
        pairs |= {(s, t) for t in sinks if t in seen}
    return pairs


def check(state, ref: Reference):
    assert sorted(vertex_frame(state)["id"]) == sorted(ref.vertices)
    assert live_edge_counts(edge_frame(state), ref.directed) == ref.edge_counts()
    assert live_partition(components_frame(state)) == ref.partition()
    assert (state.comp == components_from_scratch(state)).all()
    values = vertex_frame(state).set_index("id")
    for v, attrs in ref.vertices.items():
        got = values.loc[v, "w"] if "w" in values else np.nan
        assert (pd.isna(got) and "w" not in attrs) or attrs.get("w") == got
    edges = edge_frame(state)
    if "w" in edges:
        for (u, v), w in zip(zip(edges.src, edges.dst), edges.w):
            key = (u, v) if ref.directed else frozenset((u, v))
            assert (pd.isna(w) and "w" not in ref.edges[key][1]) or ref.edges[key][1].get("w") == w
    sources, sinks = [0, 1, 2, N + 1], [3, 4, 5, 0, N + 2]
    got = reachable_frame(state, sources, sinks)
    assert set(zip(got.source, got.sink)) == reach_oracle(ref, sources, sinks)


@settings(max_examples=40, deadline=None)
@given(directed=st.booleans(), seed_edges=st.lists(st.tuples(st.integers(0, N - 1), st.integers(0, N - 1)),
                                                    max_size=12), batches=batches_strategy)
def test_batches_match_reference_and_from_scratch(directed, seed_edges, batches):
    ref = Reference(range(N), seed_edges, directed)
    state = build_state(np.arange(N), [e[0] for e in seed_edges], [e[1] for e in seed_edges], directed)
    check(state, ref)
    seq = 0
    for rows in batches:
        updates = []
        for op, u, v, value in rows:
            seq += 1
            updates.append(update(op, u, v, value, seq))
        refused = [r for r in (ref.apply(u) for u in updates) if r is not None]
        batch, malformed = validate(updates, "int64")
        assert malformed.empty
        before = state.comp
        state, outcome = apply_batch(state, batch)
        assert len(outcome.rejected) == len(refused)
        assert outcome.applied == len(updates) - len(refused)
        padded = np.r_[before, np.full(len(state.comp) - len(before), -1)]
        assert np.array_equal(outcome.relabelled, np.flatnonzero(state.comp != padded))   # what the exchange follows
        assert np.array_equal(state.comp >= 0, state.alive)
        check(state, ref)


@settings(max_examples=25, deadline=None)
@given(directed=st.booleans(), seed_edges=st.lists(st.tuples(st.integers(0, N - 1), st.integers(0, N - 1)),
                                                    max_size=12), batches=batches_strategy)
def test_a_state_whose_key_index_a_later_state_changed_still_applies_batches(directed, seed_edges, batches):
    """The key index is changed in place by the state derived next (hatrick.keyindex): a batch
    staged on a state and dropped, then applied to that state again, gives the same graph, and
    either of the two results can go on (the other then builds its own index)."""
    ref = Reference(range(N), seed_edges, directed)
    state = build_state(np.arange(N), [e[0] for e in seed_edges], [e[1] for e in seed_edges], directed)
    seq = 0
    for step, rows in enumerate(batches):
        updates = []
        for op, u, v, value in rows:
            seq += 1
            updates.append(update(op, u, v, value, seq))
        for u in updates:
            ref.apply(u)
        batch = validate(updates, "int64")[0]
        dropped, _ = apply_batch(state, batch)          # takes the index
        again, _ = apply_batch(state, batch)            # rebuilds one: the index is not this state's any more
        check(again, ref)
        check(dropped, ref)
        state = dropped if step % 2 else again


def test_big_random_batches_cc_matches_networkx():
    rng = np.random.default_rng(7)
    n = 2000
    src, dst = rng.integers(0, n, 1500), rng.integers(0, n, 1500)
    state = build_state(np.arange(n), src, dst, directed=False)
    g = nx.MultiGraph()
    g.add_nodes_from(range(n))
    g.add_edges_from(zip(src.tolist(), dst.tolist()))
    seq = 0
    for _ in range(8):
        present = np.array(list(g.edges()), dtype=np.int64).reshape(-1, 2)
        drop = present[rng.choice(len(present), 300, replace=False)]
        add = rng.integers(0, n, (400, 2))
        frame = pd.DataFrame({"op": ["remove_edge"] * 300 + ["add_edge"] * 400,
                              "src": np.r_[drop[:, 0], add[:, 0]], "dst": np.r_[drop[:, 1], add[:, 1]],
                              "producer": "p", "seq": np.arange(seq, seq + 700), "time": 0.0})
        seq += 700
        batch, _ = validate(frame, "int64")
        state, outcome = apply_batch(state, batch)
        assert outcome.rejected.empty
        for u, v in drop:
            g.remove_edge(u, v)
        g.add_edges_from(add.tolist())
        assert live_partition(components_frame(state)) == sorted(sorted(c) for c in nx.connected_components(g))


def test_string_ids_reachability_by_attribute():
    state = build_state(np.array(["a", "b", "c", "d"], dtype=object), ["a", "b"], ["b", "c"], directed=True,
                        vertex_columns={"kind": ("string", np.array(["src", None, "dst", "dst"], dtype=object))})
    assert set(map(tuple, reachable_frame(state, {"kind": "src"}, {"kind": "dst"}).to_numpy())) == {("a", "c")}
    batch, _ = validate([update("add_edge", "c", "d", None, 1), update("remove_edge", "a", "b", None, 2)], "string")
    state, _ = apply_batch(state, batch)
    assert reachable_frame(state, {"kind": "src"}, {"kind": "dst"}).empty
    assert set(map(tuple, reachable_frame(state, ["b"], {"kind": ["dst"]}).to_numpy())) == {("b", "c"), ("b", "d")}


def test_a_selector_may_name_ids_beside_attributes():
    state = build_state(np.array(["a", "b", "c", "d"], dtype=object), ["a", "b"], ["b", "c"], directed=False,
                        vertex_columns={"kind": ("string", np.array(["src", None, "dst", "dst"], dtype=object))})
    pairs = reachable_frame(state, {"id": ["a", "b", "zz"]}, {"kind": "dst", "id": ["c", "d"]})
    assert set(map(tuple, pairs.to_numpy())) == {("a", "c"), ("b", "c")}


def test_a_dict_selector_picks_alive_vertices_meeting_every_condition_in_any_order():
    kinds = np.array(["src", "dst", "dst", None, "dst", "src"], dtype=object)
    colours = np.array(["red", "red", None, "red", "blue", "red"], dtype=object)
    state = build_state(np.arange(6), [0, 1], [1, 2], directed=False,
                        vertex_columns={"kind": ("string", kinds), "colour": ("string", colours)})
    batch, _ = validate([update("remove_vertex", 1, 0, None, 1)], "int64")
    state, _ = apply_batch(state, batch)
    frame = vertex_frame(state)
    for selector in ({"id": [0, 1, 2, 5], "kind": "dst"}, {"kind": "dst", "id": [0, 1, 2, 5]},
                     {"colour": "red", "kind": ["src", "dst"]}, {"kind": "dst", "colour": "red"}, {"id": 4}, {}):
        expected = frame
        for name, wanted in selector.items():
            expected = expected[expected[name].isin(np.atleast_1d(wanted))]
        assert state.ids.to_numpy()[select_vertices(state, selector)].tolist() == sorted(expected["id"].tolist())


def test_graph_view_is_a_stable_picture_of_its_batch():
    state = build_state(np.arange(3), [0], [1], directed=False)
    batch, _ = validate([update("set_edge", 0, 1, 2.5, 1), update("set_vertex", 2, 0, 1.0, 2)], "int64")
    state, _ = apply_batch(state, batch)
    view = GraphView(state)
    batch, _ = validate([update("remove_edge", 0, 1, None, 3), update("remove_vertex", 2, 0, None, 4)], "int64")
    later, _ = apply_batch(state, batch)
    assert view.seq == 1 and view.time == 2.0
    assert view.edges().to_dict("records") == [{"src": 0, "dst": 1, "w": 2.5}]
    assert sorted(view.vertices()["id"]) == [0, 1, 2]
    assert view.vertices() is view.vertices()
    assert GraphView(later).edges().empty and sorted(GraphView(later).vertices()["id"]) == [0, 1]


@settings(max_examples=30, deadline=None)
@given(directed=st.booleans(), n=st.integers(20, 60), density=st.floats(0.3, 1.5), seed=st.integers(0, 10**6),
       steps=st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40), st.integers(0, 3)), min_size=1, max_size=5))
def test_components_after_removals_match_from_scratch(directed, n, density, seed, steps):
    """Removals either recompute the touched region (small components) or, when they touch most of
    the graph, everything in one call; reused edge slots and vertex removals in between."""
    rng = np.random.default_rng(seed)
    m = int(density * n)
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    state = build_state(np.arange(n), src, dst, directed)
    ref = Reference(range(n), zip(src.tolist(), dst.tolist()), directed)
    seq = 0
    for removes, adds, vertex_removals in steps:
        present = [ref.edges[k][2] for k in ref.edges if ref.edges[k][0] > 0]
        picked = rng.permutation(len(present))[:removes]
        updates = [update("remove_edge", *present[i], None, 0) for i in picked]
        updates += [update("add_edge", int(a), int(b), None, 0) for a, b in rng.integers(0, n + 3, (adds, 2))]
        updates += [update("remove_vertex", int(x), 0, None, 0) for x in rng.integers(0, n, vertex_removals)]
        if not updates:
            continue
        for i in rng.permutation(len(updates)):
            seq += 1
            updates[i]["seq"], updates[i]["time"] = seq, float(seq)
        updates.sort(key=lambda u: u["seq"])
        refused = sum(ref.apply(u) is not None for u in updates)
        state, outcome = apply_batch(state, validate(updates, "int64")[0])
        assert len(outcome.rejected) == refused
        assert (state.comp == components_from_scratch(state)).all()
        assert live_partition(components_frame(state)) == ref.partition()
        assert live_edge_counts(edge_frame(state), directed) == ref.edge_counts()


def test_an_edge_added_then_cut_by_a_vertex_removal_in_the_same_batch_joins_nothing():
    """Found by the property test above: the edge's pair was merged although it was gone at the end."""
    state = build_state(np.arange(N), [0], [1], directed=False)
    batch = validate([update("add_edge", 1, 2, None, 1), update("remove_vertex", 1, 0, None, 2),
                      update("add_edge", 1, 1, None, 3)], "int64")[0]
    state, _ = apply_batch(state, batch)
    assert (state.comp == components_from_scratch(state)).all() and state.comp[2] == 2


def test_a_removed_label_vertex_recreated_later_in_the_batch_exists_only_from_its_creation():
    """Vertex 0 labels the path 0-1-2; removed, then referenced before and after an add_edge brings
    it back in the same batch: only the later references find it, the rest splits off with label 1,
    and the input state keeps its labels."""
    state = build_state(np.arange(5), [0, 1, 3], [1, 2, 4], directed=False)
    batch = validate([update("remove_vertex", 0, 0, None, 1), update("set_vertex", 0, 0, 1.0, 2),
                      update("add_edge", 0, 3, None, 3), update("set_vertex", 0, 0, 2.0, 4),
                      update("remove_edge", 3, 4, None, 5)], "int64")[0]
    after, outcome = apply_batch(state, batch)
    assert outcome.rejected["seq"].tolist() == [2]
    assert after.comp.tolist() == [0, 1, 1, 0, 4] and state.comp.tolist() == [0, 0, 0, 3, 3]
    assert (after.comp == components_from_scratch(after)).all()
    assert vertex_frame(after).set_index("id").loc[0, "w"] == 2.0


def test_a_removal_in_the_giant_component_of_the_alive_vertices_recomputes_in_one_pass(monkeypatch):
    """A state whose vids are mostly dead (as a worker's: every template vertex, alive only where
    it holds their edges) and whose giant component holds most of the alive vertices but a
    minority of the vids: a removal there takes the one pass over every slot, not the cut-out
    region, and the components still equal NetworkX's."""
    import hatrick.live as live

    n = 60
    path = np.arange(24)
    state = build_state(np.arange(n), np.r_[path[:-1], 30], np.r_[path[1:], 31], False)
    state, _ = apply_batch(state, validate([update("remove_vertex", int(x), 0, None, seq) for seq, x in
                                            enumerate(range(32, n), 1)], "int64")[0])
    passes = []
    slot_components = live._slot_components
    monkeypatch.setattr(live, "_slot_components", lambda *args: passes.append(1) or slot_components(*args))
    state, _ = apply_batch(state, validate([update("remove_edge", 5, 6, None, 100)], "int64")[0])
    assert 2 * 24 < n and 2 * 24 > state.alive.sum() and passes == [1]
    graph = nx.Graph(list(zip(np.r_[path[:5], path[6:-1], 30], np.r_[path[1:6], path[7:], 31])))
    graph.add_nodes_from(range(32))
    assert live_partition(components_frame(state)) == sorted(sorted(c) for c in nx.connected_components(graph))


def test_a_dict_selector_matches_values_as_pandas_isin_for_every_kind_and_any_number_of_options():
    """Selections compare values by numpy per option for a few options and by pandas' isin for many:
    both pick what pandas' isin picks among the set values of the vertex frame, for every kind of
    value, values of the other kinds among the options included."""
    rng = np.random.default_rng(3)
    n = 60
    columns = {"s": ("string", np.where(rng.random(n) < 0.2, None, rng.choice(["a", "b", "c", "1"], n)).astype(object)),
               "d": ("double", np.where(rng.random(n) < 0.2, np.nan, rng.integers(0, 4, n).astype(float))),
               "i": ("int64", rng.integers(0, 4, n).astype(object)),
               "f": ("bool", rng.random(n) < 0.5)}
    state = build_state(np.arange(n), [0], [1], directed=False, vertex_columns=columns)
    frame = vertex_frame(state)
    few = [["a", 1], ["1"], [2.0], [1, True], [True], ["x", None], []]
    many = [["a", "b", 1, 2.0, 3, "z", "y", "x", "w", True]]
    for name in columns:
        for options in few + many:
            expected = frame[frame[name].notna() & frame[name].isin(options)]       # unset values match nothing
            picked = state.ids.to_numpy()[select_vertices(state, {name: options})]
            assert picked.tolist() == sorted(expected["id"].tolist()), (name, options)


def test_the_edge_walk_kernels_equal_their_array_definitions():
    """:func:`hatrick.live._walk`, ``_fates`` and ``_settle`` (one numba pass each) against the
    update-by-update walk and the masked numpy gathers and scatters they replace, on keys that
    repeat within the batch (added, removed to nothing and added back, set while absent)."""
    from hatrick.live import _fates, _settle, _walk
    from hatrick.updates import ADD_EDGE, REMOVE_EDGE, SET_EDGE

    rng = np.random.default_rng(7)
    for _ in range(20):
        keys, rows, slots = int(rng.integers(1, 30)), int(rng.integers(1, 120)), 50
        group = rng.integers(0, keys, rows)
        op = rng.choice(np.array([ADD_EDGE, REMOVE_EDGE, SET_EDGE], np.int8), rows, p=[0.45, 0.4, 0.15])
        carried = (op == ADD_EDGE) & (rng.random(rows) < 0.3)
        slot = np.where(rng.random(keys) < 0.5, rng.choice(slots, keys, replace=False), -1)
        mult = rng.integers(1, 3, slots)
        time = rng.random(rows).round(1)
        m0, first, valid, keep, final, last_reset, latest, applied = _walk(group, op, carried, slot, mult, time)

        m = np.where(slot >= 0, mult[np.maximum(slot, 0)], 0)
        assert (m0 == m).all()
        want_valid, want_reset, want_latest = np.zeros(rows, bool), np.full(keys, -1), np.full(keys, -np.inf)
        for i, (g, o) in enumerate(zip(group, op)):
            delta = {ADD_EDGE: 1, REMOVE_EDGE: -1}.get(int(o), 0)
            want_valid[i] = delta == 1 or m[g] > 0
            if want_valid[i]:
                m[g] += delta
                if delta == -1 and m[g] == 0:
                    want_reset[g] = i
                if delta >= 0:
                    want_latest[g] = max(want_latest[g], time[i])
        setting = (op == SET_EDGE) | carried
        assert (valid == want_valid).all() and (final == m).all() and (last_reset == want_reset).all()
        assert (latest == want_latest).all() and applied == int((want_valid & ~setting).sum())
        assert (first[np.unique(group)] == [np.flatnonzero(group == g)[0] for g in np.unique(group)]).all()
        assert (keep == want_valid & setting & (np.arange(rows) > want_reset[group]) & (m[group] > 0)).all()

        gone, dropped, fresh = _fates(slot, m0, final)
        assert (gone == np.flatnonzero((slot >= 0) & (m0 > 0) & (final == 0))).all()
        assert (dropped == np.flatnonzero((slot >= 0) & (final == 0))).all()
        assert (fresh == np.flatnonzero((slot < 0) & (final > 0))).all()

        slot[dropped] = -1
        slot[fresh] = np.setdiff1d(np.arange(slots), slot)[:len(fresh)]       # slots allocated to the new keys
        mult[slot[fresh]] = 0
        src, dst = rng.integers(0, 99, slots), rng.integers(0, 99, slots)
        touched = rng.random(slots).round(1)
        want_mult, want_touched = mult.copy(), touched.copy()
        have = slot >= 0
        want_mult[slot[have]] = final[have]
        want_touched[slot[have]] = np.maximum(touched[slot[have]], latest[have])
        appeared = have & (m0 == 0)
        u, v = _settle(slot, m0, final, latest, mult, touched, src, dst)
        assert (mult == want_mult).all() and (touched == want_touched).all()
        assert (u == src[slot[appeared]]).all() and (v == dst[slot[appeared]]).all() and appeared.sum() == len(fresh)
