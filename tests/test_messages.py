"""gopher.messages: a task's sends routed to the destination tasks' mailboxes, and what arrives
sorted to the task's partitions and sub-graphs, against a plain-Python oracle (no Spark)."""
from types import SimpleNamespace

import numpy as np
import pytest

from gofs.bundle import _local_index
from gofs.vids import ADDED_STRIDE, added_vid
from gopher.messages import Arrivals, Mailboxes, Outbox

SUBGRAPHS = [3, 1, 4, 2]                 # per partition; every sub-graph has 2 vertices
OWNERS = [0, 1, 1, 0]                    # the task of each partition: mailboxes 0 and 1
SG_OFFSETS = np.array([0, 3, 4, 8, 10])
V_OFFSETS = SG_OFFSETS * 2
S, N = int(SG_OFFSETS[-1]), int(V_OFFSETS[-1])
ADDED = {2: added_vid(N, 2, np.arange(3))}   # this instance adds 3 vertices in partition 2, none elsewhere


def _bundle(p: int):
    """What :meth:`gopher.messages.Arrivals.inbox` reads of a partition bundle."""
    added = ADDED.get(p)
    n = SUBGRAPHS[p] + (added is not None)
    starts = np.r_[np.arange(SUBGRAPHS[p] + 1) * 2, [] if added is None else [SUBGRAPHS[p] * 2 + len(added)]]
    return SimpleNamespace(
        partition=p, sg_offset=int(SG_OFFSETS[p]), num_subgraphs=n, sg_starts=starts.astype(np.int64),
        added_vids=added, added_subgraph=S + p, vid_offset=int(V_OFFSETS[p]),
        subgraph_id=lambda k, p=p, n=n: S + p if added is not None and k == n - 1 else int(SG_OFFSETS[p]) + k,
        local_index=lambda vids, p=p: _local_index(vids, int(V_OFFSETS[p]), SUBGRAPHS[p] * 2, ADDED.get(p)))


def _local_of(target: int):
    """(partition, local sub-graph) of a sub-graph id, None where no partition holds it now."""
    if target >= S:
        p = target - S
        return (p, SUBGRAPHS[p]) if p in ADDED else None
    p = int(np.searchsorted(SG_OFFSETS, target, side="right")) - 1
    return p, target - int(SG_OFFSETS[p])


def _vertex_of(vid: int):
    """(partition, local vertex position) of a vid, None where no partition holds it now."""
    if vid >= N:
        p, j = divmod(vid - N, ADDED_STRIDE)
        return (p, SUBGRAPHS[p] * 2 + j) if p in ADDED and j < len(ADDED[p]) else None
    p = int(np.searchsorted(V_OFFSETS, vid, side="right")) - 1
    return p, vid - int(V_OFFSETS[p])


def test_every_subgraph_id_has_its_tasks_mailbox():
    """Template sub-graphs and each partition's sub-graph of added vertices (``S + p``) map to the
    mailbox of their partition's task."""
    boxes = [0, 1, 1, 0]                     # each partition's task's mailbox (OWNERS' first partitions)
    mailboxes = Mailboxes(V_OFFSETS, SG_OFFSETS, np.array(boxes, np.int64))
    ids = np.r_[np.arange(S), S + np.arange(len(SUBGRAPHS))]
    expected = [boxes[p] for p, count in enumerate(SUBGRAPHS) for _ in range(count)] + boxes
    assert mailboxes.of_subgraphs(ids).tolist() == expected


@pytest.mark.parametrize("combiner", [None, np.minimum])
@pytest.mark.parametrize("seed", range(4))
def test_random_sends_arrive_as_sent_across_partitions_and_tasks(seed, combiner):
    """Two tasks send random sub-graph and vertex messages (to template and added ids, to a
    sub-graph of added vertices that one partition lacks, duplicates included) and broadcasts;
    each task takes in its own batch first, then its peer's. Every partition's sub-graphs get
    exactly theirs: senders and payloads in the order delivered, vertex values combined (or all,
    in order), counts and ``receiving`` to match; what no partition holds now is dropped."""
    rng = np.random.default_rng(seed)
    mailboxes = Mailboxes(V_OFFSETS, SG_OFFSETS, np.array([0, 1, 1, 0], np.int64))
    subgraph_ids = np.r_[np.arange(S), S + 2, S + 3]
    vids = np.r_[np.arange(N), ADDED[2], added_vid(N, 2, 7), added_vid(N, 3, 0)]
    routed, sent = [], []                   # per sending task: its batches, and what it sent in order
    for task in (0, 1):
        box, log = Outbox(), []
        for _ in range(rng.integers(1, 12)):
            sender = int(rng.integers(S))
            targets = rng.choice(subgraph_ids, rng.integers(1, 6))
            payloads = [(task, sender, i, int(rng.integers(100))) for i in range(len(targets))]
            box.add_subgraph_batch(targets, sender, payloads)
            log += [("sg", int(t), sender, m) for t, m in zip(targets, payloads)]
            to = rng.choice(vids, rng.integers(1, 6))
            values = rng.integers(0, 1000, len(to)).astype(float)
            box.add_vertex_batch(to, values)
            log += [("v", int(t), None, v) for t, v in zip(to, values)]
        if rng.random() < 0.5:
            box.broadcasts.append(("all", task))
            log.append(("all", None, None, ("all", task)))
        routed.append(box.route(mailboxes, combiner))
        sent.append(log)
    for batches in routed:
        assert set(batches) <= {0, 1}
    for task, mailbox in ((0, 0), (1, 1)):
        order = (task, 1 - task)            # its own batch first, then its peer's
        arrivals = Arrivals([routed[j][mailbox] for j in order if mailbox in routed[j]], V_OFFSETS, combiner)
        delivered = [entry for j in order for entry in sent[j]]
        broadcasts = [m for kind, _, _, m in delivered if kind == "all"]
        for p in (p for p in range(4) if OWNERS[p] == task):
            bundle = _bundle(p)
            inbox = arrivals.inbox(bundle)
            n = bundle.num_subgraphs
            got = inbox.for_subgraphs(list(range(n)))
            want_sg = {k: [] for k in range(n)}
            want_v = {k: {} for k in range(n)}
            for kind, target, sender, message in delivered:
                where = _local_of(target) if kind == "sg" else _vertex_of(target) if kind == "v" else None
                if where is None or where[0] != p:
                    continue
                if kind == "sg":
                    want_sg[where[1]].append((sender, message))
                else:
                    k = int(np.searchsorted(bundle.sg_starts, where[1], side="right")) - 1
                    want_v[k].setdefault(where[1] - int(bundle.sg_starts[k]), []).append(message)
            for k in range(n):
                messages = got[k]
                assert list(zip(messages.senders.tolist(), messages.payloads)) == \
                    want_sg[k] + [(-1, m) for m in broadcasts], (p, k)
                if combiner is None:
                    pairs = [(v, x) for v, xs in sorted(want_v[k].items()) for x in xs]
                else:
                    pairs = [(v, min(xs)) for v, xs in sorted(want_v[k].items())]
                assert list(zip(messages.vertices.tolist(), messages.values.tolist())) == pairs, (p, k)
            vertex_count = sum(len(xs) if combiner is None else 1 for want in want_v.values() for xs in want.values())
            assert inbox.count == sum(map(len, want_sg.values())) + vertex_count + len(broadcasts)
            receiving = [bool(want_sg[k] or want_v[k] or broadcasts) for k in range(n)]
            assert inbox.receiving().tolist() == receiving
