"""What ``compute`` can do besides reading its sub-graph: send, halt, aggregate."""
from __future__ import annotations

import numpy as np

from gofs.errors import InputError
from gopher.messages import Outbox


class ComputeContext:
    """Per-task context; ``subgraph`` is the one being computed."""

    def __init__(self, superstep: int, outbox: Outbox, aggregated: dict, globals_: dict,
                 message_dtype, instance: dict | None = None):
        self.superstep = superstep
        self.outbox = outbox
        self.aggregated = aggregated
        self.globals = globals_
        self.instance = instance
        self.message_dtype = np.dtype(message_dtype)
        self.partials: dict = {}
        self._subgraph = None
        self._voters: list = []           # the sub-graphs that voted to halt (read and cleared by the worker)
        self._aggregators = {}
        self._inbox = None                # the partition's messages (set by the worker)

    def _begin(self, subgraph) -> None:
        self._subgraph = subgraph

    def partition_messages(self):
        """Every message the partition received in this superstep as one
        :class:`gopher.messages.Messages`: ``vertices`` are positions among the partition's
        vertices (what a :meth:`gopher.subgraph.Subgraph.partition_pass` indexes); for
        :meth:`gopher.program.SubgraphProgram.compute_partition`."""
        return self._inbox.for_partition()

    # sending ---------------------------------------------------------------------
    def send_to_vertex(self, vertex_id: int, value) -> None:
        self.send_to_vertices(np.array([vertex_id], dtype=np.int64), np.array([value], dtype=self.message_dtype))

    def send_to_vertices(self, vertex_ids, values) -> None:
        """Batched: one message per (global vertex id, value) pair; a scalar value is repeated."""
        vertex_ids = np.asarray(vertex_ids, dtype=np.int64)
        values = np.broadcast_to(np.asarray(values, dtype=self.message_dtype), vertex_ids.shape)
        if len(vertex_ids):
            self.outbox.add_vertex_batch(vertex_ids, np.ascontiguousarray(values))

    def send_to_subgraph(self, subgraph_id: int, payload) -> None:
        self.send_to_subgraphs(np.array([subgraph_id], dtype=np.int64), [payload])

    def send_to_subgraphs(self, subgraph_ids, payloads) -> None:
        """Batched: one payload per sub-graph id, as a list, tuple or array of the same length;
        any other value is sent to each id (to send one tuple to many, use ``[t] * len(ids)``)."""
        subgraph_ids = np.asarray(subgraph_ids, dtype=np.int64).reshape(-1)
        if not isinstance(payloads, (list, tuple, np.ndarray)):
            payloads = [payloads] * len(subgraph_ids)
        elif len(payloads) != len(subgraph_ids):
            raise InputError(f"send_to_subgraphs: {len(subgraph_ids)} sub-graph ids but {len(payloads)} payloads")
        self._post(subgraph_ids.copy() if subgraph_ids.flags.writeable else subgraph_ids, payloads)

    def _post(self, subgraph_ids: np.ndarray, payloads) -> None:
        """Queue one batch: ``subgraph_ids`` (int64, never changed afterwards), a payload each."""
        if len(subgraph_ids):
            self.outbox.add_subgraph_batch(subgraph_ids, self._subgraph.id if self._subgraph is not None else -1,
                                           payloads)

    def send_to_neighbors(self, payload, direction: str = "both") -> None:
        """Send ``payload`` (any picklable value, a tuple or list included) to every adjacent sub-graph."""
        subgraph = self._subgraph
        neighbors = subgraph._neighbors.get(direction)     # Subgraph.neighbors' own cache: this runs once
        if neighbors is None:                              # per sub-graph, a method call costs as much
            neighbors = subgraph.neighbors(direction)      # read-only int64: queued as it is
        if len(neighbors):                                 # _post inline
            outbox = self.outbox
            outbox.subgraph_targets.append(neighbors)
            outbox.subgraph_senders.append(subgraph.id)
            outbox.subgraph_payloads.extend([payload] * len(neighbors))

    def send_to_neighbors_of(self, subgraphs, payloads, direction: str = "both") -> None:
        """For :meth:`gopher.program.SubgraphProgram.compute_partition`: what ``send_to_neighbors``
        in the ``compute`` of each of ``subgraphs`` (the partition's active sub-graphs it was given)
        sends, as one batch for the partition. ``payloads``: one per sub-graph of ``subgraphs``
        (a list, tuple or array of that length), or any other value, sent by all of them."""
        pairs = subgraphs.neighbor_pairs(direction)
        position, senders, targets = pairs.position, pairs.senders, pairs.targets
        if not len(targets):
            return
        if isinstance(payloads, (list, tuple, np.ndarray)):
            if len(payloads) != len(subgraphs):
                raise InputError(f"send_to_neighbors_of: {len(subgraphs)} sub-graphs but {len(payloads)} payloads")
            payloads = [payloads[i] for i in position.tolist()]
        else:
            payloads = [payloads] * len(targets)
        self.outbox.add_subgraph_batch(targets, senders, payloads)

    def send_to_all(self, payload) -> None:
        """Send ``payload`` to every sub-graph of the graph (delivered once per partition)."""
        self.outbox.broadcasts.append(payload)

    # control ---------------------------------------------------------------------
    def vote_to_halt(self) -> None:
        """Stay inactive until a message arrives."""
        self._voters.append(self._subgraph)

    def aggregate(self, name: str, value) -> None:
        """Contribute ``value`` to aggregator ``name``; the result is in ``ctx.aggregated`` next superstep."""
        agg = self._aggregators[name]
        self.partials[name] = value if name not in self.partials else agg.combine(self.partials[name], value)


class MasterContext:
    """Driver-side view after a superstep: aggregates, globals for the next one, halting.
    In time-series runs ``instance`` is the instance the superstep belonged to."""

    def __init__(self, superstep: int, aggregated: dict, globals_: dict, metrics, instance: dict | None = None):
        self.superstep = superstep
        self.aggregated = aggregated
        self.globals = globals_
        self.metrics = metrics
        self.instance = instance
        self.halted = False

    def halt(self) -> None:
        self.halted = True
