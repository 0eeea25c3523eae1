"""Message batches: what a partition sends, combined, and what a sub-graph receives.

Vertex messages travel as numpy arrays (destination vertex id, value); a
combiner (min, max, sum or any numpy ufunc) merges messages to the same vertex
before they leave the task. Sub-graph messages carry arbitrary picklable
payloads. Broadcasts (send to all) travel once per partition.
"""
from __future__ import annotations

import numpy as np

from gofs.errors import InputError
from gofs.vids import partition_of_subgraphs, partition_of_vids

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
        self.subgraph_senders: list[int] = []      # one per batch of subgraph_targets
        self.subgraph_payloads: list = []
        self.broadcasts: list = []
        self._vertex_messages = 0

    def add_vertex_batch(self, targets: np.ndarray, values: np.ndarray) -> None:
        self.vertex_targets.append(targets)
        self.vertex_values.append(values)
        self._vertex_messages += len(targets)

    def count(self) -> int:
        """Messages queued so far (a task's partitions share one outbox: each reads it before and after)."""
        return self._vertex_messages + len(self.subgraph_payloads) + len(self.broadcasts)

    def route(self, vertex_offsets: np.ndarray, subgraph_offsets: np.ndarray, ufunc) -> dict[int, dict]:
        """Group messages by destination partition: {partition: batch dict}."""
        batches: dict[int, dict] = {}
        if self.vertex_targets:
            targets = np.concatenate(self.vertex_targets)
            values = np.concatenate(self.vertex_values)
            targets, values = combine(targets, values, ufunc)
            parts = partition_of_vids(vertex_offsets, targets)
            order = np.argsort(parts, kind="stable")
            parts, targets, values = parts[order], targets[order], values[order]
            bounds = _run_bounds(parts)
            for a, b in zip(bounds[:-1], bounds[1:]):
                batches.setdefault(int(parts[a]), {})["vertex"] = (targets[a:b], values[a:b])
        if self.subgraph_payloads:
            targets = np.concatenate(self.subgraph_targets)
            senders = np.repeat(np.asarray(self.subgraph_senders, dtype=np.int64),
                                [len(t) for t in self.subgraph_targets])
            parts = partition_of_subgraphs(subgraph_offsets, targets)
            order = np.argsort(parts, kind="stable")       # by destination, each in the order sent
            parts, rows = parts[order], order.tolist()
            bounds = _run_bounds(parts).tolist()
            for a, b in zip(bounds[:-1], bounds[1:]):
                batches.setdefault(int(parts[a]), {})["subgraph"] = (
                    targets[order[a:b]], senders[order[a:b]], [self.subgraph_payloads[i] for i in rows[a:b]])
        if self.broadcasts:
            for p in range(len(vertex_offsets) - 1):
                batches.setdefault(p, {})["broadcast"] = list(self.broadcasts)
        return batches


class Messages:
    """Messages delivered to one sub-graph in this superstep.

    ``vertices`` are local vertex indices and ``values`` their (combined) values;
    ``payloads`` are sub-graph messages with their ``senders``; broadcasts are
    appended to ``payloads`` with sender -1.
    """

    __slots__ = ("vertices", "values", "payloads", "_senders")

    def __init__(self, vertices=None, values=None, senders=None, payloads=None):
        self.vertices = np.empty(0, np.int64) if vertices is None else vertices
        self.values = np.empty(0) if values is None else values
        self._senders = senders           # int64 array, or a list of ints made one when first read
        self.payloads = [] if payloads is None else payloads

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


class Inbox:
    """All messages a partition received, split per local sub-graph on demand."""

    def __init__(self, batches: list[dict], bundle, ufunc):
        self.sg_starts = bundle.sg_starts
        vt = [b["vertex"][0] for b in batches if "vertex" in b]
        vv = [b["vertex"][1] for b in batches if "vertex" in b]
        if vt:
            targets, values = combine(np.concatenate(vt), np.concatenate(vv), ufunc)
            local = bundle.local_index(targets)
            here = local >= 0                 # not a vertex that only another instance adds
            local, values = local[here], values[here]
            order = np.argsort(local, kind="stable")
            self.local, self.values = local[order], values[order]
            self.vertex_bounds = np.searchsorted(self.local, self.sg_starts)
        else:                                 # no vertex messages: none of the passes above
            self.local, self.values = np.empty(0, np.int64), np.empty(0)
            self.vertex_bounds = np.zeros(len(self.sg_starts), np.int64)
        self._bounds = self.vertex_bounds.tolist()     # Python ints: for_subgraph runs once per sub-graph
        self._starts = self.sg_starts.tolist()
        self._no_values = self.values[:0]              # what a sub-graph without vertex messages gets
        self.local_count = len(self.local)
        self.subgraph_messages = _by_target(bundle, [b["subgraph"] for b in batches if "subgraph" in b])
        self.broadcasts = [m for b in batches for m in b.get("broadcast", [])]
        self.count = len(self.local) + sum(len(v[1]) for v in self.subgraph_messages.values()) + len(self.broadcasts)

    def receiving(self) -> np.ndarray:
        """Over the local sub-graphs: True where at least one message arrived."""
        if self.broadcasts:
            return np.ones(len(self.sg_starts) - 1, dtype=bool)
        mask = np.diff(self.vertex_bounds) > 0
        mask[list(self.subgraph_messages)] = True
        return mask

    def for_partition(self) -> Messages:
        """The partition's messages at once (vertices as positions in the partition)."""
        senders = [s for k in sorted(self.subgraph_messages) for s in self.subgraph_messages[k][0]]
        payloads = [m for k in sorted(self.subgraph_messages) for m in self.subgraph_messages[k][1]]
        return Messages(self.local, self.values, senders + [-1] * len(self.broadcasts), payloads + self.broadcasts)

    def for_subgraph(self, k: int) -> Messages:
        senders, payloads = self.subgraph_messages.get(k, _NO_PAYLOADS)
        if not (self.local_count or self.broadcasts):     # sub-graph messages only (or none)
            return Messages(_NO_VERTICES, self._no_values, senders if senders else _NO_VERTICES,
                            payloads if payloads else [])
        a, b = self._bounds[k], self._bounds[k + 1]
        if self.broadcasts:
            senders, payloads = [*senders, *[-1] * len(self.broadcasts)], [*payloads, *self.broadcasts]
        if a == b:
            return Messages(_NO_VERTICES, self._no_values, senders if senders else _NO_VERTICES,
                            payloads if payloads else [])
        return Messages(self.local[a:b] - self._starts[k], self.values[a:b], senders if senders else _NO_VERTICES,
                        payloads if payloads else [])


def _by_target(bundle, batches: list) -> dict[int, tuple[list, list]]:
    """Sub-graph messages ((global targets, senders, payloads) batches) per local target sub-graph:
    {target: ([sender], [payload])}, each in the order sent. Sorted in one pass (no Python work per
    message but taking its payload); messages to the sub-graph of added vertices where this
    instance adds none here are dropped."""
    if not batches:
        return {}
    targets = bundle.local_subgraph(np.concatenate([t for t, _, _ in batches]))
    senders = np.concatenate([np.asarray(s, np.int64) for _, s, _ in batches])
    payloads = [m for _, _, ms in batches for m in ms]
    order = np.argsort(targets, kind="stable")
    targets, senders = targets[order], senders[order].tolist()
    payloads = [payloads[i] for i in order.tolist()]
    bounds = _run_bounds(targets).tolist()
    targets = targets.tolist()
    return {targets[a]: (senders[a:b], payloads[a:b]) for a, b in zip(bounds[:-1], bounds[1:]) if targets[a] >= 0}


_NO_VERTICES = np.empty(0, np.int64)          # shared by every empty message list: it cannot be changed
_NO_VERTICES.flags.writeable = False
_NO_PAYLOADS = ((), ())                # (senders, payloads) of a sub-graph nobody messaged
