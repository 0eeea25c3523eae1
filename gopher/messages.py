"""Message batches: what a task sends, combined, and what a sub-graph receives.

Vertex messages travel as numpy arrays (destination vertex id, value); a
combiner (min, max, sum or any numpy ufunc) merges messages to the same vertex
before they leave the task. Sub-graph messages carry arbitrary picklable
payloads. A task's messages leave it as one batch per destination task and lane
(:class:`Outbox`, :class:`Mailboxes`); what a task takes in is sorted once for all
of its partitions (:class:`Arrivals`), each partition's :class:`Inbox` a slice of
it. Broadcasts (send to all) travel once per task.
"""
from __future__ import annotations

from bisect import bisect_left
from itertools import repeat

import numpy as np

from gofs.errors import InputError
from gofs.vids import added_vid, partition_of_vids

COMBINERS = {"min": np.minimum, "max": np.maximum, "sum": np.add}


def combiner_ufunc(combiner):
    if combiner is None or isinstance(combiner, np.ufunc):
        return combiner
    try:
        return COMBINERS[combiner]
    except KeyError:
        raise InputError(f"unknown combiner {combiner!r}: use one of {sorted(COMBINERS)} or a numpy ufunc") from None


def combine(targets: np.ndarray, values: np.ndarray, ufunc) -> tuple[np.ndarray, np.ndarray]:
    """Merge values sent to the same target with ``ufunc`` (vectorised: sort + reduceat)."""
    if ufunc is None or len(targets) < 2:
        return targets, values
    order = np.argsort(targets, kind="stable")
    targets, values = targets[order], values[order]
    starts = np.flatnonzero(np.concatenate(([True], targets[1:] != targets[:-1])))
    return targets[starts], ufunc.reduceat(values, starts, axis=0)


def _run_bounds(sorted_keys: np.ndarray) -> np.ndarray:
    """Where each run of equal keys starts, and the end (``np.r_`` would cost more than the pass)."""
    return np.flatnonzero(np.concatenate(([True], sorted_keys[1:] != sorted_keys[:-1], [True])))


class Outbox:
    """Everything one task sends during a superstep, before routing.

    Sub-graph messages are kept as the batches the program sent (target arrays, one sender
    and a count per batch), joined only when routed: a sub-graph that messages its
    neighbours costs a few list appends, not a Python int per target."""

    def __init__(self):
        self.vertex_targets: list[np.ndarray] = []
        self.vertex_values: list[np.ndarray] = []
        self.subgraph_targets: list[np.ndarray] = []
        self.subgraph_senders: list = []       # per batch of subgraph_targets: one sender, or an array of one per target
        self._sender_arrays = False            # some batch has an array of senders
        self.subgraph_payloads: list = []
        self.broadcasts: list = []
        self._vertex_messages = 0

    def add_vertex_batch(self, targets: np.ndarray, values: np.ndarray) -> None:
        self.vertex_targets.append(targets)
        self.vertex_values.append(values)
        self._vertex_messages += len(targets)

    def add_subgraph_batch(self, targets: np.ndarray, senders, payloads: list) -> None:
        """Queue sub-graph messages: ``targets`` (int64, never changed afterwards), their sender
        (one id, or an int64 array of one per target) and a payload each."""
        self.subgraph_targets.append(targets)
        self.subgraph_senders.append(senders)
        self.subgraph_payloads.extend(payloads)
        if isinstance(senders, np.ndarray):
            self._sender_arrays = True

    def count(self) -> int:
        """Messages queued so far (a task's partitions share one outbox: each reads it before and after)."""
        return self._vertex_messages + len(self.subgraph_payloads) + len(self.broadcasts)

    def route(self, mailboxes: "Mailboxes", ufunc) -> dict[int, dict]:
        """Group messages by destination task, one batch each: {mailbox: batch dict} (a task with
        many partitions gets one batch, not one per partition; :class:`Arrivals` sorts it to them)."""
        batches: dict[int, dict] = {}
        if self.vertex_targets:
            targets = np.concatenate(self.vertex_targets)
            values = np.concatenate(self.vertex_values)
            targets, values = combine(targets, values, ufunc)
            order, groups = mailboxes.split(mailboxes.of_vids(targets))
            targets, values = targets[order], values[order]
            for box, a, b in groups:
                batches.setdefault(box, {})["vertex"] = (targets[a:b], values[a:b])
        if self.subgraph_payloads:
            targets = np.concatenate(self.subgraph_targets)
            if self._sender_arrays:
                senders = np.concatenate([s if isinstance(s, np.ndarray) else np.full(len(t), s, np.int64)
                                          for s, t in zip(self.subgraph_senders, self.subgraph_targets)])
            else:
                senders = np.repeat(np.asarray(self.subgraph_senders, dtype=np.int64),
                                    [len(t) for t in self.subgraph_targets])
            order, groups = mailboxes.split(mailboxes.of_subgraphs(targets))    # each in the order sent
            targets, senders = targets[order], senders[order]
            payloads = self.subgraph_payloads
            payloads = [payloads[i] for i in order.tolist()]
            for box, a, b in groups:
                batches.setdefault(box, {})["subgraph"] = (targets[a:b], senders[a:b], payloads[a:b])
        if self.broadcasts:
            for box in mailboxes.all:
                batches.setdefault(box, {})["broadcast"] = list(self.broadcasts)
        return batches


class Mailboxes:
    """Where messages go: each task takes in its messages at one of its partitions, its
    *mailbox* (``of_partition``: each partition's task's)."""

    def __init__(self, vertex_offsets: np.ndarray, subgraph_offsets: np.ndarray, of_partition: np.ndarray):
        self.vertex_offsets, self.subgraph_offsets, self.of_partition = vertex_offsets, subgraph_offsets, of_partition
        self.all = sorted(set(of_partition.tolist()))
        self._ends = np.array([*self.all, self.all[-1] + 1], np.int64)
        # the mailbox of every sub-graph id: the template's, then each partition's added vertices'
        # (:mod:`gofs.vids`): routing looks a batch's targets up in one gather
        self._subgraph_boxes = np.concatenate([np.repeat(of_partition, np.diff(subgraph_offsets)), of_partition])

    def of_vids(self, vids: np.ndarray) -> np.ndarray:
        return self.of_partition[partition_of_vids(self.vertex_offsets, vids)]

    def of_subgraphs(self, subgraph_ids: np.ndarray) -> np.ndarray:
        return self._subgraph_boxes[subgraph_ids]

    def split(self, boxes: np.ndarray) -> tuple[np.ndarray, list]:
        """(order, [(mailbox, a, b)]): ``order`` sorts messages by their ``boxes``, each mailbox's
        in the order sent; a mailbox's are ``a:b`` of them in that order."""
        order = np.argsort(boxes, kind="stable")
        bounds = np.searchsorted(boxes[order], self._ends).tolist()
        return order, [(box, a, b) for box, a, b in zip(self.all, bounds, bounds[1:]) if a < b]


class Messages:
    """Messages delivered to one sub-graph in this superstep.

    ``vertices`` are local vertex indices and ``values`` their (combined) values;
    ``payloads`` are sub-graph messages with their ``senders``; broadcasts are
    appended to ``payloads`` with sender -1. A partition's messages at once
    (``ctx.partition_messages()``) also name the sub-graph each payload was sent to
    (``targets``, global ids, -1 for a broadcast: sent to all); a sub-graph's have None.
    A sub-graph that received nothing gets one read-only instance shared with the others
    (its ``payloads`` an empty tuple): read messages, never change them.
    """

    __slots__ = ("vertices", "values", "payloads", "_senders", "targets")

    def __init__(self, vertices=None, values=None, senders=None, payloads=None, targets=None):
        self.vertices = np.empty(0, np.int64) if vertices is None else vertices
        self.values = np.empty(0) if values is None else values
        self._senders = senders           # int64 array, or a list of ints made one when first read
        self.payloads = [] if payloads is None else payloads
        self.targets = targets

    @property
    def senders(self) -> np.ndarray:
        """The sender of each payload (int64; -1 for a broadcast). Made an array only when read:
        a program that reads only its payloads does not pay a conversion per sub-graph."""
        if not isinstance(self._senders, np.ndarray):
            self._senders = np.array(self._senders or (), dtype=np.int64)
        return self._senders

    def __len__(self) -> int:
        return len(self.vertices) + len(self.payloads)

    def __bool__(self) -> bool:
        return len(self) > 0


class Arrivals:
    """Every message a task's partitions received for one lane in this superstep, sorted by
    target once for the task: each partition's :class:`Inbox` is a slice of it (a task with many
    partitions sorts its messages once, not once per partition). Messages to one target keep
    the order they were delivered in (forward messages first, where ``batches`` lists them first)."""

    def __init__(self, batches: list[dict], vertex_offsets: np.ndarray, ufunc):
        vt, vv, sent, self.broadcasts = [], [], [], []
        for b in batches:
            if "vertex" in b:
                vt.append(b["vertex"][0])
                vv.append(b["vertex"][1])
            if "subgraph" in b:
                sent.append(b["subgraph"])
            if "broadcast" in b:
                self.broadcasts.extend(b["broadcast"])
        self.vertices = None                  # (vids, values, bounds): by vid, combined
        if vt:
            targets, values = np.concatenate(vt), np.concatenate(vv)
            if ufunc is not None:
                targets, values = combine(targets, values, ufunc)
            else:
                order = np.argsort(targets, kind="stable")
                targets, values = targets[order], values[order]
            self.vertices = (targets, values, _VidBounds(targets, vertex_offsets))
        self.subgraphs = None                 # _Runs: by target sub-graph
        if sent:
            if len(sent) == 1:                # one batch (a peer's, or this task's own): no concatenation
                targets, senders, payloads = sent[0]
                senders = np.asarray(senders, np.int64)
            else:
                targets = np.concatenate([t for t, _, _ in sent])
                senders = np.concatenate([np.asarray(s, np.int64) for _, s, _ in sent])
                payloads = [m for _, _, ms in sent for m in ms]
            order = np.argsort(targets, kind="stable")
            targets = targets[order]
            bounds = _run_bounds(targets)
            self.subgraphs = _Runs(targets[bounds[:-1]].tolist(), bounds.tolist(), senders, payloads, order)

    def inbox(self, bundle) -> "Inbox":
        """The messages of ``bundle``'s partition (which takes its local numbers from the bundle)."""
        p, local, values = bundle.partition, None, None
        if self.vertices is not None:
            vids, values, bounds = self.vertices
            a, b, c, d = bounds.of(p)
            if c < d:
                vids, values = np.concatenate([vids[a:b], vids[c:d]]), np.concatenate([values[a:b], values[c:d]])
            else:
                vids, values = vids[a:b], values[a:b]
            local = bundle.local_index(vids)      # ascending: template vertices first, then added ones
            if c < d:
                here = local >= 0                 # not a vertex that only another instance adds
                local, values = local[here], values[here]
        return Inbox(bundle, local, values, self.subgraphs, self.broadcasts)


class _Runs:
    """A task's sub-graph messages grouped by target: ``keys`` (ascending global target ids, one
    per run) and run ``bounds`` (run i is ``bounds[i]:bounds[i + 1]`` of :meth:`sent`), Python
    lists: a partition finds its runs by bisection, without a numpy call."""

    def __init__(self, keys: list, bounds: list, senders: np.ndarray, payloads: list, order: np.ndarray):
        self.keys, self.bounds = keys, bounds
        self._delivered = (senders, payloads, order)      # as delivered, and the order that sorts them
        self._sent = None

    def sent(self) -> tuple[list, list]:
        """(senders, payloads) in run order, made when first read: a program that never reads its
        sub-graph messages pays nothing per message here."""
        if self._sent is None:
            senders, payloads, order = self._delivered
            self._sent = senders[order].tolist(), [payloads[i] for i in order.tolist()]
        return self._sent

    def of(self, bundle) -> tuple[list, int]:
        """([(local target, a, b)] of ``bundle``'s partition, its message count): its template
        sub-graphs' runs, and its added vertices' sub-graph's where this instance adds some here
        (a message to it is dropped where it adds none)."""
        keys, bounds, first = self.keys, self.bounds, bundle.sg_offset
        added = bundle.added_vids is not None
        lo = bisect_left(keys, first)
        hi = bisect_left(keys, first + bundle.num_subgraphs - int(added), lo)
        runs = [(keys[i] - first, bounds[i], bounds[i + 1]) for i in range(lo, hi)]
        count = bounds[hi] - bounds[lo]
        if added:
            i = bisect_left(keys, bundle.added_subgraph, hi)
            if i < len(keys) and keys[i] == bundle.added_subgraph:
                runs.append((bundle.num_subgraphs - 1, bounds[i], bounds[i + 1]))
                count += bounds[i + 1] - bounds[i]
        return runs, count


class _VidBounds:
    """Where each partition's vids lie in ascending ``vids``: its template vertices' (from
    ``offsets``: every partition's first vid, then the template's count) and those an instance
    adds there (:mod:`gofs.vids`), sought only where some are."""

    def __init__(self, vids: np.ndarray, offsets: np.ndarray):
        self.template = np.searchsorted(vids, offsets).tolist()
        added = len(vids) and vids[-1] >= offsets[-1]
        self.added = np.searchsorted(vids, added_vid(offsets[-1], np.arange(len(offsets)), 0)).tolist() \
            if added else None

    def of(self, p: int) -> tuple[int, int, int, int]:
        """(a, b, c, d): partition ``p``'s template ids are ``a:b``, its added ones ``c:d``."""
        a, b = self.template[p], self.template[p + 1]
        if self.added is None:
            return a, b, 0, 0
        return a, b, self.added[p], self.added[p + 1]


class Inbox:
    """All messages a partition received, split per local sub-graph on demand: a slice of its
    task's :class:`Arrivals`, vertex messages as ascending local positions (``local``,
    ``values``) and sub-graph messages by ascending local target, each in the order delivered.

    Its sub-graph messages are made into per-target lists only when a sub-graph's or the
    partition's messages are first read: a partition whose program never reads them (or runs
    ``compute_partition`` without them) pays for finding its runs, not for those lists."""

    def __init__(self, bundle, local, values, runs: "_Runs | None", broadcasts: list):
        self.sg_starts = bundle.sg_starts
        self._subgraph_id = bundle.subgraph_id
        self.broadcasts = broadcasts
        if local is not None:
            self.local, self.values = local, values
            self.vertex_bounds = np.searchsorted(local, self.sg_starts)
            self._no_values = values[:0]               # what a sub-graph without vertex messages gets
            self._no_values.flags.writeable = False
            self._empty = None                         # made when first asked for (:attr:`empty`)
        else:                                 # no vertex messages: none of the passes above
            self.local, self.values = _NO_VERTICES, _NO_VALUES
            self._no_values, self._empty = _NO_VALUES, _NO_MESSAGES
            self.vertex_bounds = None
        self._bounds = None                   # vertex_bounds as Python ints, made for for_subgraph
        self._starts = None
        self.local_count = len(self.local)
        self._runs, received = ([], 0) if runs is None else runs.of(bundle)     # [(local target, a, b)]
        self._source = runs
        self._subgraph_messages = None
        self.count = self.local_count + received + len(broadcasts)

    @property
    def subgraph_messages(self) -> dict[int, tuple[list, list]]:
        """{local target sub-graph: ([sender], [payload])}, each in the order sent."""
        if self._subgraph_messages is None:
            senders, payloads = self._source.sent() if self._runs else _NO_PAYLOADS
            self._subgraph_messages = {k: (senders[a:b], payloads[a:b]) for k, a, b in self._runs}
        return self._subgraph_messages

    def receiving(self) -> np.ndarray:
        """Over the local sub-graphs: True where at least one message arrived."""
        if self.broadcasts:
            return np.ones(len(self.sg_starts) - 1, dtype=bool)
        if self.vertex_bounds is None:
            mask = np.zeros(len(self.sg_starts) - 1, dtype=bool)
        else:
            mask = np.diff(self.vertex_bounds) > 0
        mask[[k for k, _, _ in self._runs]] = True
        return mask

    def for_partition(self) -> Messages:
        """The partition's messages at once (vertices as positions in the partition)."""
        by_target = self.subgraph_messages
        order = sorted(by_target)
        senders = [s for k in order for s in by_target[k][0]]
        payloads = [m for k in order for m in by_target[k][1]]
        targets = np.repeat(np.array([self._subgraph_id(k) for k in order] + [-1], np.int64),
                            [len(by_target[k][1]) for k in order] + [len(self.broadcasts)])
        return Messages(self.local, self.values, senders + [-1] * len(self.broadcasts), payloads + self.broadcasts,
                        targets)

    @property
    def empty(self) -> "Messages":
        """What every sub-graph that received nothing in this superstep gets: one read-only
        :class:`Messages`, not a new object and list per sub-graph (its ``values`` have the dtype
        of the vertex messages that arrived, if any)."""
        if self._empty is None:
            self._empty = _NoMessages(self._no_values)
        return self._empty

    def for_subgraphs(self, ks: list) -> list:
        """``for_subgraph`` of each of ``ks`` (local sub-graph numbers). Where only sub-graph
        messages arrived: made for the sub-graphs that received some, the others get
        :attr:`empty`, without a Python call per sub-graph."""
        if self.local_count or self.broadcasts:
            return [self.for_subgraph(k) for k in ks]
        none, (senders, payloads) = self._no_values, self._source.sent() if self._runs else _NO_PAYLOADS
        made = {k: Messages(_NO_VERTICES, none, senders[a:b], payloads[a:b]) for k, a, b in self._runs}
        return list(map(made.get, ks, repeat(self.empty)))

    def for_subgraph(self, k: int) -> Messages:
        by_target = self._subgraph_messages              # not the property: this runs once per sub-graph
        if by_target is None:
            by_target = self.subgraph_messages
        senders, payloads = by_target.get(k, _NO_PAYLOADS)
        if self._bounds is None:              # Python ints: this runs once per sub-graph
            bounds = np.zeros(len(self.sg_starts), np.int64) if self.vertex_bounds is None else self.vertex_bounds
            self._bounds, self._starts = bounds.tolist(), self.sg_starts.tolist()
        a, b = self._bounds[k], self._bounds[k + 1]
        if self.broadcasts:
            senders, payloads = [*senders, *[-1] * len(self.broadcasts)], [*payloads, *self.broadcasts]
        if a == b:
            return Messages(_NO_VERTICES, self._no_values, senders, payloads) if payloads else self.empty
        return Messages(self.local[a:b] - self._starts[k], self.values[a:b], senders if senders else _NO_VERTICES,
                        payloads if payloads else [])


class _NoMessages(Messages):
    """:attr:`Inbox.empty`: shared by sub-graphs, so it cannot be changed (its payloads are an
    empty tuple; ``values``, empty, is read-only)."""

    __slots__ = ()

    def __init__(self, values: np.ndarray):
        for name, value in (("vertices", _NO_VERTICES), ("values", values), ("_senders", _NO_VERTICES),
                            ("payloads", ()), ("targets", None)):
            object.__setattr__(self, name, value)

    def __setattr__(self, name, value):
        raise AttributeError("the messages of a sub-graph that received none are shared: they cannot be changed")


_NO_VERTICES = np.empty(0, np.int64)          # shared by every empty message list: it cannot be changed
_NO_VERTICES.flags.writeable = False
_NO_VALUES = np.empty(0)
_NO_VALUES.flags.writeable = False
_NO_PAYLOADS = ((), ())                # (senders, payloads) of a sub-graph nobody messaged
_NO_MESSAGES = _NoMessages(_NO_VALUES)
