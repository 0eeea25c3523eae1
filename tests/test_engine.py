"""Gopher engine semantics, checked with small sub-graph programs on small stored graphs.

Each program records what ``compute`` saw in ``subgraph.state["log"]`` and
outputs it (as JSON, with the sub-graph id) for every vertex, so a test can
compare exactly what each sub-graph received in each superstep with what the
graph's topology (NetworkX plus the stored vertex -> sub-graph map) says.
"""
import json
import operator
import sys

import networkx as nx
import numpy as np
import pyarrow as pa
import pytest
from pyspark import cloudpickle

import graphs
from sparkshim.compat import persistent_rdd_ids
from gopher.aggregators import Aggregator
from gopher.program import SubgraphProgram
from gopher.worker import GopherProgramError

# Programs defined here travel to Spark's Python workers by value: the workers
# cannot import this test module by name.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


# --------------------------------------------------------------------------- programs

class Recording(SubgraphProgram):
    """Outputs, per vertex, its sub-graph id and that sub-graph's log (JSON)."""

    output_schema = {"sg": pa.int64(), "log": pa.string()}

    @staticmethod
    def log(subgraph, entry):
        subgraph.state.setdefault("log", []).append(entry)

    def output(self, subgraph):
        n = subgraph.num_vertices
        return {"sg": np.full(n, subgraph.id, dtype=np.int64),
                "log": np.array([json.dumps(subgraph.state.get("log", []))] * n, dtype=object)}


def _received(subgraph, messages):
    """Vertex messages as sorted [original vertex id, value] pairs."""
    ids = subgraph.ids[messages.vertices]
    return sorted([_plain(i), float(v)] for i, v in zip(ids, messages.values))


def _plain(value):
    return value.item() if isinstance(value, np.generic) else value


class VertexPing(Recording):
    """Superstep 0: send the sub-graph id along every outgoing remote edge; then log and halt."""

    def compute(self, subgraph, messages, ctx):
        self.log(subgraph, {"step": ctx.superstep, "got": _received(subgraph, messages)})
        if ctx.superstep == 0:
            remote = subgraph.remote_edges
            out = remote.outgoing(subgraph.directed)
            ctx.send_to_vertices(remote.dst[out], float(subgraph.id))
        ctx.vote_to_halt()


class ToOneVertex(Recording):
    """Every sub-graph sends k+1 and 2(k+1) (k: its id) to one vertex in superstep 0."""

    def __init__(self, target_vid: int, combiner):
        self.target_vid = target_vid
        self.combiner = combiner

    def compute(self, subgraph, messages, ctx):
        if ctx.superstep == 0:
            ctx.send_to_vertex(self.target_vid, subgraph.id + 1)
            ctx.send_to_vertices([self.target_vid], [2.0 * (subgraph.id + 1)])
        else:
            self.log(subgraph, {"step": ctx.superstep, "got": _received(subgraph, messages)})
        ctx.vote_to_halt()


class TokenChain(Recording):
    """Sub-graph 0 passes a token to 1, 1 to 2, ...; everyone halts every superstep."""

    def __init__(self, count: int):
        self.count = count

    def compute(self, subgraph, messages, ctx):
        state = subgraph.state
        if ctx.superstep == 0:
            state["mark"] = 7 * subgraph.id
        self.log(subgraph, {"step": ctx.superstep, "payloads": list(messages.payloads),
                            "mark": state["mark"]})
        if (ctx.superstep == 0 and subgraph.id == 0) or messages.payloads:
            if subgraph.id + 1 < self.count:
                ctx.send_to_subgraph(subgraph.id + 1, "token")
        ctx.vote_to_halt()


class HaltLater(Recording):
    """Sub-graph 0 stays active until superstep 3; the others halt at once. Counts its runs."""

    def compute(self, subgraph, messages, ctx):
        state = subgraph.state
        state["runs"] = state.get("runs", 0) + 1
        state["acc"] = state.get("acc", np.zeros(subgraph.num_vertices)) + ctx.superstep
        self.log(subgraph, ctx.superstep)
        if subgraph.id != 0 or ctx.superstep >= 3:
            ctx.vote_to_halt()

    output_schema = {**Recording.output_schema, "runs": pa.int64(), "acc": pa.float64()}

    def output(self, subgraph):
        out = super().output(subgraph)
        out["runs"] = np.full(subgraph.num_vertices, subgraph.state["runs"])
        out["acc"] = subgraph.state["acc"]
        return out


class NeighborHello(Recording):
    """Superstep 0: send a tuple to the adjacent sub-graphs; superstep 1: log (sender, payload)."""

    def __init__(self, direction: str = "both"):
        self.direction = direction

    def compute(self, subgraph, messages, ctx):
        if ctx.superstep == 0:
            ctx.send_to_neighbors(("hello", subgraph.id), direction=self.direction)
        else:
            self.log(subgraph, sorted([int(s), list(p)] for s, p in zip(messages.senders, messages.payloads)))
        ctx.vote_to_halt()


class NeighborHelloFromPartition(NeighborHello):
    """Superstep 0 (``compute``): sub-graphs of odd id halt; superstep 1: ``compute_partition``
    sends NeighborHello's hellos from the sub-graphs still active (even ids) in one batch;
    superstep 2: it logs each sub-graph's (sender, payload) from the partition's messages."""

    partition_messages = True

    def compute_partition(self, subgraphs, ctx):
        if ctx.superstep == 0:
            return False
        if ctx.superstep == 1:
            ids = subgraphs.ids
            assert ids.tolist() == [sg.id for sg in subgraphs]
            ctx.send_to_neighbors_of(subgraphs, [("hello", i) for i in ids.tolist()], direction=self.direction)
        else:
            messages = ctx.partition_messages()
            for sg in subgraphs:
                self.log(sg, sorted([int(s), list(p)] for s, p, t in
                                    zip(messages.senders, messages.payloads, messages.targets) if t == sg.id))
        return [True] * len(subgraphs)

    def compute(self, subgraph, messages, ctx):
        if subgraph.id % 2:
            ctx.vote_to_halt()


class Direct(Recording):
    """Superstep 0: one message to the next sub-graph, a batch to itself and the one after next."""

    def __init__(self, count: int):
        self.count = count

    def compute(self, subgraph, messages, ctx):
        k, n = subgraph.id, self.count
        if ctx.superstep == 0:
            ctx.send_to_subgraph((k + 1) % n, f"one{k}")
            ctx.send_to_subgraphs(np.array([k, (k + 2) % n]), [f"a{k}", f"b{k}"])
            ctx.send_to_subgraphs([(k + 3) % n], "c")
        else:
            self.log(subgraph, sorted([int(s), p] for s, p in zip(messages.senders, messages.payloads)))
        ctx.vote_to_halt()


class Broadcast(Recording):
    def compute(self, subgraph, messages, ctx):
        if ctx.superstep == 0:
            ctx.send_to_all(subgraph.id)
        else:
            self.log(subgraph, {"payloads": sorted(messages.payloads),
                                "senders": sorted(set(messages.senders.tolist()))})
        ctx.vote_to_halt()


def _union(a, b):
    return a | b


class Aggregating(Recording):
    aggregators = {"total": "sum", "low": "min", "high": "max",
                   "ids": Aggregator(_union, frozenset()), "product": lambda a, b: a * b}

    def compute(self, subgraph, messages, ctx):
        seen = {name: (sorted(v) if isinstance(v, frozenset) else _plain(v)) for name, v in ctx.aggregated.items()}
        self.log(subgraph, {"step": ctx.superstep, "aggregated": seen})
        if ctx.superstep == 0:
            ctx.aggregate("total", subgraph.num_vertices)
            ctx.aggregate("low", subgraph.id)
            ctx.aggregate("high", subgraph.id)
            ctx.aggregate("ids", frozenset([subgraph.id]))
            ctx.aggregate("product", 2)
        elif ctx.superstep == 1:
            ctx.aggregate("total", 1)
            ctx.vote_to_halt()


def _one_sum(parts):
    return [sum(parts)]


class PartitionWide(Recording):
    """Superstep 0: every sub-graph takes its rows of one pass over its whole partition, and checks
    them against its own view; ``vertices`` is packed to one number per task."""

    aggregators = {"builds": "sum", "wrong": "sum", "vertices": Aggregator(lambda a, b: a + b, [], pack=_one_sum)}

    def __init__(self, key):
        self.key = key

    def compute(self, subgraph, messages, ctx):
        def build(whole):
            ctx.aggregate("builds", 1)
            return {"vids": whole.vertex_ids, "src": whole.edge_src, "dst": whole.edge_dst,
                    "remote": whole.remote_edges.dst}

        whole = subgraph.partition_pass(self.key, build)
        rows = subgraph.vertex_rows
        wrong = [not np.array_equal(whole["vids"][rows], subgraph.vertex_ids),
                 not np.array_equal(whole["src"][subgraph.edge_rows] - rows.start, subgraph.edge_src),
                 not np.array_equal(whole["dst"][subgraph.edge_rows] - rows.start, subgraph.edge_dst),
                 not np.array_equal(whole["remote"][subgraph.remote_rows], subgraph.remote_edges.dst)]
        ctx.aggregate("wrong", sum(wrong))
        ctx.aggregate("vertices", [subgraph.num_vertices])
        ctx.vote_to_halt()


class ProcessWide(SubgraphProgram):
    """Builds one value per worker process (``process_pass``) and reports, per sub-graph, the
    process that computed it and, per build, the process that built it; superstep 1 reads it
    again from every partition."""

    aggregators = {"built_by": Aggregator(lambda a, b: a + b, []), "computed_by": Aggregator(lambda a, b: a | b, set()),
                   "wrong": "sum"}

    def __init__(self, key):
        self.key, self.built_by, self.computed_by = key, [], set()

    def master(self, ctx):
        self.built_by += ctx.aggregated["built_by"]
        self.computed_by |= ctx.aggregated["computed_by"]

    def compute(self, subgraph, messages, ctx):
        import os

        def build():
            ctx.aggregate("built_by", [os.getpid()])
            return np.arange(5)

        ctx.aggregate("wrong", int(not np.array_equal(subgraph.process_pass(self.key, build), np.arange(5))))
        ctx.aggregate("computed_by", {os.getpid()})
        if ctx.superstep == 1:
            ctx.vote_to_halt()


class PartitionStep(SubgraphProgram):
    """Superstep 0 once per partition (``compute_partition``): every remote edge carries one
    message; superstep 1, where messages arrived, runs ``compute`` per sub-graph."""

    aggregators = {"hook_calls": "sum", "hook_subgraphs": "sum", "computed": "sum", "sent": "sum",
                   "received": "sum"}

    def __init__(self):
        self.totals = []

    def compute_partition(self, subgraphs, ctx):
        if ctx.superstep != 0:
            return False
        remote = subgraphs[0].partition_pass(f"remote-{id(self)}", lambda whole: whole.remote_edges.dst)
        ctx.aggregate("hook_calls", 1)
        ctx.aggregate("hook_subgraphs", len(subgraphs))
        ctx.aggregate("sent", len(remote))
        ctx.send_to_vertices(remote, 1.0)
        return True

    def compute(self, subgraph, messages, ctx):
        ctx.aggregate("computed", 1)
        ctx.aggregate("received", len(messages.vertices))

    def master(self, ctx):
        self.totals.append({k: ctx.aggregated.get(k, 0) for k in self.aggregators})
        if ctx.superstep == 1:
            ctx.halt()


def test_compute_partition_runs_once_per_partition_when_no_messages_came(undirected):
    G, store = undirected
    program = PartitionStep()
    store.run(program, progress=False)
    first, second = program.totals
    assert first["hook_calls"] == store.num_partitions and first["hook_subgraphs"] == count(store)
    assert first["computed"] == 0 and first["sent"] > 0
    assert second["received"] == first["sent"]


class PartitionMessages(SubgraphProgram):
    """Every superstep in ``compute_partition`` (``partition_messages``): superstep 0 sends each
    remote edge's destination its own vid and votes every sub-graph but the partition's first
    to halt; superstep 1 reads the messages over the whole partition (positions in the
    partition) with only the first and the sub-graphs that received awake; superstep 2 has
    only the first sub-graphs."""

    message_dtype = "int64"
    combiner = "min"
    partition_messages = True
    aggregators = {"targets": Aggregator(operator.add, []), "received": "sum", "wrong": "sum", "active": "sum",
                   "asleep_but_active": "sum", "computed": "sum"}

    def __init__(self):
        self.totals = []

    def compute_partition(self, subgraphs, ctx):
        vids = subgraphs[0].partition_pass(f"vids-{id(self)}", lambda whole: (whole.vertex_ids, whole.remote_edges.dst))
        ctx.aggregate("active", len(subgraphs))
        if ctx.superstep == 0:
            ctx.send_to_vertices(vids[1], vids[1])
            ctx.aggregate("targets", vids[1].tolist())
        elif ctx.superstep == 1:
            messages = ctx.partition_messages()
            ctx.aggregate("received", len(messages.vertices))
            ctx.aggregate("wrong", int((vids[0][messages.vertices] != messages.values).sum()))
            woken = [sg for sg in subgraphs[1:] if not np.isin(np.arange(sg.vertex_rows.start, sg.vertex_rows.stop),
                                                                  messages.vertices).any()]
            ctx.aggregate("asleep_but_active", len(woken))
        votes = np.ones(len(subgraphs), bool)
        votes[0] = False
        return votes

    def compute(self, subgraph, messages, ctx):
        ctx.aggregate("computed", 1)

    def master(self, ctx):
        self.totals.append({k: ctx.aggregated.get(k, 0) for k in self.aggregators})
        if ctx.superstep == 2:
            ctx.halt()


def test_compute_partition_reads_the_partitions_messages_and_votes_halts(undirected):
    G, store = undirected
    program = PartitionMessages()
    store.run(program, progress=False)
    first, second, third = program.totals
    assert first["active"] == count(store) and first["computed"] == 0
    assert second["received"] == len(set(first["targets"])) > 0 and second["wrong"] == 0
    assert second["asleep_but_active"] == 0 and store.num_partitions < second["active"] < count(store)
    assert third["active"] == store.num_partitions and second["computed"] == third["computed"] == 0


class MasterDriven(Recording):
    """Never votes to halt; the master passes globals on and halts after superstep 2."""

    aggregators = {"active": "sum"}

    def __init__(self):
        self.seen = []

    def compute(self, subgraph, messages, ctx):
        self.log(subgraph, [ctx.superstep, ctx.globals.get("phase")])
        ctx.aggregate("active", 1)

    def master(self, ctx):
        self.seen.append((ctx.superstep, ctx.aggregated["active"]))
        ctx.globals["phase"] = f"after-{ctx.superstep}"
        if ctx.superstep == 2:
            ctx.halt()


class NeverHalts(Recording):
    def compute(self, subgraph, messages, ctx):
        self.log(subgraph, ctx.superstep)


class Explodes(Recording):
    def __init__(self, bad_subgraph: int, bad_superstep: int):
        self.bad_subgraph, self.bad_superstep = bad_subgraph, bad_superstep

    def compute(self, subgraph, messages, ctx):
        if subgraph.id == self.bad_subgraph and ctx.superstep == self.bad_superstep:
            raise ValueError("boom in user code")
        if ctx.superstep > self.bad_superstep:
            ctx.vote_to_halt()


# --------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def undirected(spark, tmp_path_factory):
    """Cliques in a ring (+ isolated vertex, + separate edge), hash-partitioned: 12 sub-graphs, many cut edges."""
    G = graphs.ring_of_cliques()
    return G, graphs.ingest_nx(G, tmp_path_factory.mktemp("engine") / "ring.gofs", spark, 3, "hash")


@pytest.fixture(scope="module")
def chain_graph(spark, tmp_path_factory):
    """The same graph METIS-partitioned: few sub-graphs, for the long-running token chain."""
    G = graphs.ring_of_cliques()
    return G, graphs.ingest_nx(G, tmp_path_factory.mktemp("engine") / "ring-metis.gofs", spark, 3, "metis")


@pytest.fixture(scope="module")
def directed(spark, tmp_path_factory):
    G = nx.gnm_random_graph(30, 45, seed=4, directed=True)
    return G, graphs.ingest_nx(G, tmp_path_factory.mktemp("engine") / "directed.gofs", spark, 3, "hash")


def run(G, store, program, **options):
    """Run ``program``; check the output has one row per original vertex; return (result, {sg: log})."""
    result = store.run(program, progress=False, **options)
    rows = result.dataframe.collect()
    assert sorted(r["id"] for r in rows) == sorted(G.nodes)
    sg_of = graphs.vertex_subgraphs(store)
    logs = {}
    for r in rows:
        assert r["sg"] == sg_of[r["id"]]
        logs.setdefault(r["sg"], json.loads(r["log"]))
        assert logs[r["sg"]] == json.loads(r["log"]), "vertices of one sub-graph disagree"
    assert sorted(logs) == list(range(store.manifest["subgraphs"]["count"]))
    return result, logs


def count(store) -> int:
    return store.manifest["subgraphs"]["count"]


# --------------------------------------------------------------------------- vertex messages

@pytest.mark.parametrize("which", ["undirected", "directed"])
def test_vertex_messages_arrive_in_the_next_superstep(which, request):
    G, store = request.getfixturevalue(which)
    sg = graphs.vertex_subgraphs(store)
    expected = {k: [] for k in range(count(store))}
    for u, v in G.edges():
        if sg[u] != sg[v]:
            expected[sg[v]].append([v, float(sg[u])])
            if not G.is_directed():
                expected[sg[u]].append([u, float(sg[v])])
    assert any(expected.values())
    result, logs = run(G, store, VertexPing())
    for k, log in logs.items():
        want = [{"step": 0, "got": []}]
        if expected[k]:
            want.append({"step": 1, "got": sorted(expected[k])})
        assert log == want, f"sub-graph {k}"
    assert result.metrics.num_supersteps == 2
    assert result.metrics.messages == sum(len(m) for m in expected.values())


@pytest.mark.parametrize("combiner, expect", [
    (None, lambda ks: sorted([k + 1.0 for k in ks] + [2.0 * (k + 1) for k in ks])),
    ("min", lambda ks: [1.0]),
    ("max", lambda ks: [2.0 * len(ks)]),
    ("sum", lambda ks: [3.0 * sum(k + 1 for k in ks)]),
    (np.maximum, lambda ks: [2.0 * len(ks)]),
], ids=["none", "min", "max", "sum", "ufunc"])
def test_combiner_merges_messages_to_one_vertex(undirected, combiner, expect):
    G, store = undirected
    target = 7
    sg = graphs.vertex_subgraphs(store)
    result, logs = run(G, store, ToOneVertex(store.vid_of(target), combiner))
    senders = list(range(count(store)))
    for k, log in logs.items():
        if k == sg[target]:
            assert log == [{"step": 1, "got": [[target, v] for v in expect(senders)]}]
        else:
            assert log == [], f"sub-graph {k} should not run after superstep 0"
    steps = result.metrics.supersteps
    assert [s.messages for s in steps] == [2 * len(senders), 0]


def test_combiner_shrinks_what_crosses_the_network(undirected):
    G, store = undirected
    target = store.vid_of(7)
    plain, _ = run(G, store, ToOneVertex(target, None))
    combined, _ = run(G, store, ToOneVertex(target, "sum"))
    assert combined.metrics.bytes < plain.metrics.bytes


def test_unknown_combiner_is_rejected(undirected):
    G, store = undirected
    with pytest.raises(ValueError, match="unknown combiner 'median'"):
        store.run(ToOneVertex(0, "median"), progress=False)


# --------------------------------------------------------------------------- halting

def test_halted_subgraph_runs_again_only_when_a_message_arrives(chain_graph):
    G, store = chain_graph
    n = count(store)
    assert n >= 4
    result, logs = run(G, store, TokenChain(n))
    for k, log in logs.items():
        want = [{"step": 0, "payloads": [], "mark": 7 * k}]
        if k > 0:
            # woken by the token in superstep k, with its state from superstep 0 intact
            want.append({"step": k, "payloads": ["token"], "mark": 7 * k})
        assert log == want, f"sub-graph {k}"
    steps = result.metrics.supersteps
    assert result.metrics.num_supersteps == n
    assert [s.active_subgraphs for s in steps] == [n] + [1] * (n - 1)
    assert [s.messages for s in steps] == [1] * (n - 1) + [0]


def test_active_subgraph_keeps_running_and_state_survives(undirected):
    G, store = undirected
    result, logs = run(G, store, HaltLater())
    assert logs[0] == [0, 1, 2, 3]
    assert all(log == [0] for k, log in logs.items() if k != 0)
    assert result.metrics.num_supersteps == 4
    assert [s.active_subgraphs for s in result.metrics.supersteps] == [count(store), 1, 1, 1]
    rows = result.dataframe.collect()
    sg = graphs.vertex_subgraphs(store)
    for r in rows:
        runs, acc = (4, 0 + 1 + 2 + 3) if sg[r["id"]] == 0 else (1, 0)
        assert (r["runs"], r["acc"]) == (runs, acc)


def test_max_supersteps_stops_a_program_that_never_halts(undirected):
    G, store = undirected
    result, logs = run(G, store, NeverHalts(), max_supersteps=3)
    assert result.metrics.num_supersteps == 3
    assert all(log == [0, 1, 2] for log in logs.values())


# --------------------------------------------------------------------------- sub-graph messages

def _meta_neighbors(G, sg, direction):
    """{sub-graph: sorted senders} for send_to_neighbors(direction) on G."""
    receivers = {}
    for u, v in G.edges():
        a, b = sg[u], sg[v]
        if a == b:
            continue
        if not G.is_directed() or direction == "both":
            pairs = [(a, b), (b, a)]
        elif direction == "out":
            pairs = [(a, b)]          # a sends to its out-neighbour b
        else:
            pairs = [(b, a)]          # b sends to its in-neighbour a
        for sender, receiver in pairs:
            receivers.setdefault(receiver, set()).add(sender)
    return {k: sorted(v) for k, v in receivers.items()}


class RandomNeighborSends(Recording):
    """Each superstep, each sub-graph sends to a random half of its neighbours (send_to_neighbors
    or send_to_subgraphs, at random) and logs what it sent and what it received; a sub-graph that
    received nothing logs whether its empty messages refuse to be changed."""

    def compute(self, subgraph, messages, ctx):
        step, me = ctx.superstep, subgraph.id
        got = [[int(s), p] for s, p in zip(messages.senders, messages.payloads)]
        frozen = None
        if not messages:
            try:
                messages.payloads = [1]
                frozen = False
            except AttributeError:
                frozen = messages.payloads == () and not messages.vertices.flags.writeable
        self.log(subgraph, {"step": step, "got": got, "frozen": frozen, "sent": []})
        if step == 3:
            ctx.vote_to_halt()
            return
        rng = np.random.default_rng([step, me])
        neighbors = subgraph.neighbors()
        if rng.random() < 0.5:
            payload = [step, me]
            if rng.random() < 0.5:
                ctx.send_to_neighbors(payload)
                subgraph.state["log"][-1]["sent"] = [[int(t), payload] for t in neighbors]
        else:
            chosen = neighbors[rng.random(len(neighbors)) < 0.5]
            payloads = [[step, me, i] for i in range(len(chosen))]
            ctx.send_to_subgraphs(chosen, payloads)
            subgraph.state["log"][-1]["sent"] = [[int(t), p] for t, p in zip(chosen, payloads)]


@pytest.mark.parametrize("which", ["undirected", "directed"])
def test_random_neighbor_sends_arrive_as_sent(which, request):
    """What each sub-graph receives in a superstep is what was sent to it in the one before, with
    its senders, each sender's messages in the order sent; empty inboxes are shared and read-only."""
    G, store = request.getfixturevalue(which)
    _, logs = run(G, store, RandomNeighborSends())
    expected = {}
    for k, log in logs.items():
        for entry in log:
            for target, payload in entry["sent"]:
                expected.setdefault((entry["step"] + 1, target), []).append([k, payload])
    assert sum(map(len, expected.values())) > 10
    empties = 0
    for k, log in logs.items():
        assert [e["step"] for e in log] == [0, 1, 2, 3]
        for entry in log:
            want = expected.get((entry["step"], k), [])
            assert sorted(entry["got"]) == sorted(want), f"sub-graph {k}, superstep {entry['step']}"
            by_sender = {}
            for sender, payload in entry["got"]:
                by_sender.setdefault(sender, []).append(payload)
            assert by_sender == {s: [p for t, p in want if t == s] for s in by_sender}      # order per sender
            assert entry["frozen"] is (None if want else True)
            empties += not want
    assert empties > 0


@pytest.mark.parametrize("which, direction", [("undirected", "both"), ("directed", "out"),
                                              ("directed", "in"), ("directed", "both")])
def test_send_to_neighbors_reaches_exactly_the_adjacent_subgraphs(which, direction, request):
    G, store = request.getfixturevalue(which)
    expected = _meta_neighbors(G, graphs.vertex_subgraphs(store), direction)
    result, logs = run(G, store, NeighborHello(direction))
    for k, log in logs.items():
        senders = expected.get(k, [])
        assert log == ([[[s, ["hello", s]] for s in senders]] if senders else []), f"sub-graph {k}"
    assert result.metrics.messages == sum(len(s) for s in expected.values())


@pytest.mark.parametrize("which, direction", [("undirected", "both"), ("directed", "out"),
                                              ("directed", "in"), ("directed", "both")])
def test_send_to_neighbors_of_sends_what_each_subgraph_would(which, direction, request):
    """The partition's one batch reaches what each active sub-graph's send_to_neighbors would,
    and the partition's messages name the sub-graph each was sent to."""
    G, store = request.getfixturevalue(which)
    everyone = _meta_neighbors(G, graphs.vertex_subgraphs(store), direction)
    expected = {k: [s for s in senders if s % 2 == 0] for k, senders in everyone.items()}
    expected = {k: senders for k, senders in expected.items() if senders}
    assert expected, "the graph gives the even sub-graphs no neighbours: the test would check nothing"
    result, logs = run(G, store, NeighborHelloFromPartition(direction))
    for k, log in logs.items():
        senders = expected.get(k, [])
        assert log == ([[[s, ["hello", s]] for s in senders]] if senders else []), f"sub-graph {k}"
    assert result.metrics.supersteps[1].messages == sum(len(s) for s in expected.values())


def test_send_to_subgraph_and_batched_sends_carry_payloads_and_senders(undirected):
    G, store = undirected
    n = count(store)
    expected = {k: [] for k in range(n)}
    for k in range(n):
        expected[(k + 1) % n].append([k, f"one{k}"])
        expected[k].append([k, f"a{k}"])
        expected[(k + 2) % n].append([k, f"b{k}"])
        expected[(k + 3) % n].append([k, "c"])
    result, logs = run(G, store, Direct(n))
    assert logs == {k: [sorted(v)] for k, v in expected.items()}
    assert result.metrics.supersteps[0].messages == 4 * n


def test_message_senders_are_an_int64_array_made_when_first_read():
    from gopher.messages import Messages

    messages = Messages(senders=[3, -1], payloads=["a", "b"])
    assert messages.senders.dtype == np.int64 and messages.senders.tolist() == [3, -1]
    assert messages.senders is messages.senders                 # made once
    assert Messages().senders.dtype == np.int64 and len(Messages().senders) == 0


def test_send_to_all_reaches_every_subgraph_once(undirected):
    G, store = undirected
    n = count(store)
    _, logs = run(G, store, Broadcast())
    assert logs == {k: [{"payloads": list(range(n)), "senders": [-1]}] for k in range(n)}


class SendsThenChanges(Recording):
    """Superstep 0: send a list kept in the state to the neighbours, to the next sub-graph and to
    everyone; superstep 1: keep what arrived (logged as it is at the end) and change the list."""

    def __init__(self, count: int):
        self.count = count

    def compute(self, subgraph, messages, ctx):
        if ctx.superstep == 0:
            sent = subgraph.state["sent"] = [subgraph.id]
            ctx.send_to_neighbors(sent)
            ctx.send_to_subgraph((subgraph.id + 1) % self.count, sent)
            ctx.send_to_all({"from": sent})
        else:
            self.log(subgraph, list(messages.payloads))
            subgraph.state["sent"].append("changed by its sender")
            ctx.vote_to_halt()


@pytest.mark.parametrize("tasks", [1, 2])
def test_a_receiver_never_shares_a_payload_with_its_sender(undirected, tasks):
    """Whether sender and receiver run in one task (the messages never leave it) or not, a
    payload arrives as it was sent: the sender's later changes to it are not seen."""
    G, store = undirected
    n = count(store)
    _, logs = run(G, store, SendsThenChanges(n), tasks=tasks)
    assert len(logs) == n
    for k, (got,) in logs.items():
        assert not [payload for payload in got if "changed by its sender" in json.dumps(payload)]
        assert [{"from": [j]} for j in range(n)] == sorted((p for p in got if isinstance(p, dict)),
                                                            key=lambda p: p["from"])
        assert [(k - 1) % n] in got


# --------------------------------------------------------------------------- aggregators and master

def test_aggregates_are_visible_in_the_next_superstep(undirected):
    G, store = undirected
    n = count(store)
    result, logs = run(G, store, Aggregating())
    first = {"total": G.number_of_nodes(), "low": 0, "high": n - 1, "ids": list(range(n)), "product": 2 ** n}
    for k, log in logs.items():
        assert log == [{"step": 0, "aggregated": {}}, {"step": 1, "aggregated": first}], f"sub-graph {k}"
    # after the last superstep: only "total" got contributions; the others fall back to their zero
    assert result.aggregated == {"total": n, "low": None, "high": None, "ids": frozenset(), "product": None}
    assert result.metrics.num_supersteps == 2


def test_master_sees_aggregates_sets_globals_and_halts(undirected):
    G, store = undirected
    n = count(store)
    program = MasterDriven()
    result, logs = run(G, store, program)
    assert program.seen == [(0, n), (1, n), (2, n)]
    assert all(log == [[0, None], [1, "after-0"], [2, "after-1"]] for log in logs.values())
    assert result.metrics.num_supersteps == 3


def test_partition_pass_runs_once_per_partition_and_packs_per_task(undirected):
    G, store = undirected
    result = store.run(PartitionWide(f"rows-{id(object())}"), progress=False, tasks=2)
    assert result.aggregated["builds"] == store.num_partitions
    assert result.aggregated["wrong"] == 0
    assert len(result.aggregated["vertices"]) == 2                 # one packed partial per task
    assert sum(result.aggregated["vertices"]) == G.number_of_nodes()


def test_process_pass_runs_once_per_worker_process(undirected):
    G, store = undirected
    assert store.num_partitions > 2
    program = ProcessWide(f"process-{id(object())}")
    result = store.run(program, progress=False, tasks=2)
    assert sorted(program.built_by) == sorted(program.computed_by)    # once a process, not once a partition
    assert len(program.computed_by) < store.num_partitions
    assert result.aggregated["wrong"] == 0


def test_unknown_aggregator_is_rejected(undirected):
    G, store = undirected

    class Bad(NeverHalts):
        aggregators = {"x": "median"}

    with pytest.raises(ValueError, match="unknown aggregator 'median'"):
        store.run(Bad(), progress=False)


# --------------------------------------------------------------------------- errors and metrics

def test_program_error_names_the_subgraph_and_superstep(undirected):
    G, store = undirected
    bad = count(store) - 1
    with pytest.raises(GopherProgramError) as info:
        store.run(Explodes(bad, 1), progress=False)
    message = str(info.value)
    assert f"sub-graph {bad} " in message
    assert "in superstep 1" in message
    assert "Explodes.compute" in message and "boom in user code" in message


def test_run_metrics_are_consistent(undirected):
    G, store = undirected
    n = count(store)
    result, _ = run(G, store, NeighborHello())
    metrics = result.metrics
    steps = metrics.supersteps
    meta = graphs.metagraph(store)
    assert metrics.program == "NeighborHello"
    assert [s.superstep for s in steps] == [0, 1]
    assert metrics.num_supersteps == 2
    assert steps[0].active_subgraphs == n
    assert steps[1].active_subgraphs == sum(1 for k in meta if meta.degree(k) > 0)
    assert steps[0].messages == 2 * meta.number_of_edges() and steps[1].messages == 0
    assert steps[0].bytes > 0 and steps[1].bytes == 0
    assert metrics.messages == sum(s.messages for s in steps)
    assert metrics.bytes == sum(s.bytes for s in steps)
    assert all(s.seconds > 0 for s in steps)
    assert metrics.seconds >= sum(s.seconds for s in steps) + metrics.output_seconds
    summary = metrics.as_dict()
    assert (summary["supersteps"], summary["messages"], summary["bytes"]) == (2, metrics.messages, metrics.bytes)
    assert summary["per_superstep"] == [vars(s) for s in steps]


class MismatchedBatch(Recording):
    def compute(self, subgraph, messages, ctx):
        ctx.send_to_subgraphs([0, 1], ["only one payload"])
        ctx.vote_to_halt()


def test_batched_send_with_mismatched_payloads_fails_clearly(undirected):
    G, store = undirected
    with pytest.raises(GopherProgramError, match="2 sub-graph ids but 1 payloads"):
        store.run(MismatchedBatch(), progress=False)


class BadOutput(Recording):
    """Computes fine; ``output`` raises on one sub-graph, or returns one value too many."""

    def __init__(self, bad_subgraph: int, mode: str):
        self.bad_subgraph, self.mode = bad_subgraph, mode

    def compute(self, subgraph, messages, ctx):
        ctx.vote_to_halt()

    def output(self, subgraph):
        out = super().output(subgraph)
        if subgraph.id == self.bad_subgraph:
            if self.mode == "raise":
                raise KeyError("no such result")
            out["sg"] = np.append(out["sg"], 0)
        return out


@pytest.mark.parametrize("mode, detail", [("raise", "KeyError('no such result')"),
                                          ("length", "one value per vertex")])
def test_output_error_names_the_subgraph(undirected, mode, detail):
    G, store = undirected
    bad = count(store) - 1
    with pytest.raises(GopherProgramError) as info:
        store.run(BadOutput(bad, mode), progress=False)
    message = str(info.value)
    assert f"BadOutput.output failed on sub-graph {bad} " in message and detail in message


def test_failed_run_leaves_nothing_cached(spark, undirected):
    G, store = undirected
    persisted = lambda: persistent_rdd_ids(spark)  # noqa: E731
    before = persisted()
    with pytest.raises(GopherProgramError):
        store.run(Explodes(count(store) - 1, 2), progress=False)
    assert persisted() - before == set()


class VoteByTurn(SubgraphProgram):
    """Sends nothing; sub-graph ``k`` computes until superstep ``2 * (k % 3)`` and votes to halt
    there (odd ids twice in the call), recording each superstep it ran in."""

    def compute(self, subgraph, messages, ctx):
        subgraph.state.setdefault("ran", []).append(ctx.superstep)
        if ctx.superstep == 2 * (subgraph.id % 3):
            ctx.vote_to_halt()
            if subgraph.id % 2:
                ctx.vote_to_halt()


def test_a_worker_counts_votes_and_leaves_halted_subgraphs_alone(undirected):
    """A task's halt votes, superstep by superstep, where all, some or none of the active
    sub-graphs vote (and some vote twice): its reports count the active and halted sub-graphs,
    and each sub-graph ran exactly in the supersteps up to its vote."""
    from gofs.store import as_store
    from gopher.worker import LaneStep, RunSpec, TaskWorker

    _, graph = undirected
    store = as_store(graph)
    spec = RunSpec(store, VoteByTurn(), 1,
                   np.array([p["vertex_offset"] for p in store.partitions] + [store.num_vertices]),
                   np.array([p["subgraph_offset"] for p in store.partitions] + [store.num_subgraphs]), 1 << 30)
    worker = TaskWorker(spec, list(range(store.num_partitions)))
    last = {k: 2 * (k % 3) for k in range(count(store))}
    for superstep in range(6):
        outgoing, summary = worker.step({0: LaneStep(None, 0, 1, superstep, {}, {}, False)})
        report = summary["lanes"][0]
        assert outgoing == {}
        assert (report["active"], report["halted"], report["subgraphs"]) == \
            (sum(s >= superstep for s in last.values()), sum(s <= superstep for s in last.values()), len(last))
    ran = {}
    for p, run in worker.partitions.items():
        first = store.partitions[p]["subgraph_offset"]
        ran.update({first + k: state.get("ran") for k, state in enumerate(run.lanes[0].states)})
    assert ran == {k: list(range(s + 1)) for k, s in last.items()}
