"""Task-side half of time-series runs: many instances ("lanes") in one superstep.

A lane is one instance being analysed (independent and eventually dependent
runs have one lane per instance, all advancing together; a sequential run has
one lane that moves from instance to instance). Partition ``p``'s Spark task
holds the states of every lane in one record, receives every lane's messages
in one record per sender, and runs each lane's active sub-graphs against that
lane's instance attributes. Each sub-graph's state is kept pickled on its own,
so a superstep unpickles and re-pickles only the states of the sub-graphs it
runs: with many lanes, most states just pass through as bytes. Topology comes from :func:`gopher.worker.topology`
(loaded once per worker process); each instance's attributes are read once per
process and partition and kept with their :class:`Subgraph` views.

Records keep :data:`gopher.worker.RECORD_SCHEMA`; payloads are dicts keyed by
lane. ``FORWARD`` records carry messages for a lane's *next* instance and pass
through untouched until that instance starts.
"""
from __future__ import annotations

import pickle
import time
import traceback
from collections import OrderedDict, defaultdict
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from gofs import files
from gofs.bundle import load_instance_attributes
from gopher import aggregators as agg
from gopher.context import ComputeContext
from gopher.messages import Inbox, Outbox, combiner_ufunc
from gopher.subgraph import Subgraph
from gopher.worker import MESSAGES, STATE, SUMMARY, GopherProgramError, _records, topology

FORWARD = 3
MERGED = -1            # the lane that holds merge results

_VIEWS: OrderedDict = OrderedDict()
_MAX_VIEWS = 1024


@dataclass(frozen=True)
class LaneStep:
    """What one lane does in this superstep (sent from the driver)."""

    instance: dict
    index: int              # the instance's position in the run's selection
    count: int              # instances in the selection
    superstep: int          # superstep within the instance; 0 starts it
    aggregated: dict
    globals: dict
    sequential: bool


class TimeSeriesContext(ComputeContext):
    """The compute context of a time-series run.

    Besides :class:`gopher.context.ComputeContext`: ``instance`` (the manifest
    entry: ``id``, ``start``, ``end``, ...), ``instance_index`` and
    ``num_instances`` (position in, and size of, the selection), and in the
    sequential pattern the ``send_forward_*`` methods, whose messages arrive in
    superstep 0 of the next instance (combined with the program's combiner).
    ``superstep`` counts supersteps within the current instance.
    """

    def __init__(self, step: LaneStep, outbox: Outbox, forward: Outbox, message_dtype, aggregators):
        super().__init__(step.superstep, outbox, step.aggregated, step.globals, message_dtype, step.instance)
        self.instance_index = step.index
        self.num_instances = step.count
        self._aggregators = aggregators
        self._forward = ComputeContext(step.superstep, forward, {}, {}, message_dtype) if step.sequential else None

    def _begin(self, subgraph) -> None:
        super()._begin(subgraph)
        if self._forward is not None:
            self._forward._subgraph = subgraph

    def _forwarding(self) -> ComputeContext:
        if self._forward is None:
            raise RuntimeError("send_forward_* is for sequentially dependent runs (run_sequential)")
        return self._forward

    def send_forward_to_vertex(self, vertex_id: int, value) -> None:
        self._forwarding().send_to_vertex(vertex_id, value)

    def send_forward_to_vertices(self, vertex_ids, values) -> None:
        """Batched, like ``send_to_vertices``, delivered in the next instance."""
        self._forwarding().send_to_vertices(vertex_ids, values)

    def send_forward_to_subgraph(self, subgraph_id: int, payload) -> None:
        self._forwarding().send_to_subgraph(subgraph_id, payload)

    def send_forward_to_subgraphs(self, subgraph_ids, payloads) -> None:
        self._forwarding().send_to_subgraphs(subgraph_ids, payloads)


class _InstanceView:
    """The sub-graphs of one partition seen through one instance's attribute values."""

    def __init__(self, bundle, vertex: dict, edge: dict):
        self.bundle, self.vertex, self.edge = bundle, vertex, edge
        self._subgraphs: dict[int, Subgraph] = {}

    def subgraph(self, k: int) -> Subgraph:
        sg = self._subgraphs.get(k)
        if sg is None:
            sg = self._subgraphs[k] = Subgraph(self.bundle, k)
            sg._instance_vertex, sg._instance_edge = self.vertex, self.edge
        return sg


def _view(store, program, p: int, instance: dict | None) -> _InstanceView:
    bundle = topology(store, p, program)[0]
    vattrs, eattrs = tuple(program.instance_vertex_attributes), tuple(program.instance_edge_attributes)
    key = (store.manifest.get("uuid", store.root), store.root, p, tuple(program.vertex_attributes),
           tuple(program.edge_attributes), None if instance is None else instance["id"], vattrs, eattrs)
    view = _VIEWS.get(key)
    if view is None or view.bundle is not bundle:
        vertex, edge = ({}, {}) if instance is None or not (vattrs or eattrs) else \
            load_instance_attributes(store, bundle, instance, vattrs, eattrs)
        view = _VIEWS[key] = _InstanceView(bundle, vertex, edge)
        while len(_VIEWS) > _MAX_VIEWS:
            _VIEWS.popitem(last=False)
    _VIEWS.move_to_end(key)
    return view


def _state(blob: bytes | None) -> dict:
    return {} if blob is None else pickle.loads(blob)


def _received(batches) -> dict:
    """Per partition: lane states, in-instance messages and pending forward messages, by lane."""
    grouped = defaultdict(lambda: {"states": {}, "messages": defaultdict(list), "forward": defaultdict(list)})
    for batch in batches:
        for dst, kind, payload in zip(batch.column(1).to_pylist(), batch.column(2).to_pylist(),
                                      batch.column(3).to_pylist()):
            entry = grouped[dst]
            if kind == STATE:
                if payload is not None:
                    entry["states"].update(pickle.loads(payload))
            elif kind == MESSAGES:
                for lane, message in pickle.loads(payload).items():
                    entry["messages"][lane].append(message)
            elif kind == FORWARD:
                for lane, messages in pickle.loads(payload).items():
                    entry["forward"][lane].extend(messages)
    return grouped


def superstep_function(store, program, plan: dict[int, LaneStep], routes, vertex_offsets, subgraph_offsets):
    """The mapInArrow function for one superstep of the lanes in ``plan``; other lanes pass through."""
    ufunc = combiner_ufunc(program.combiner)
    specs = {name: agg.resolve(spec) for name, spec in program.aggregators.items()}

    def step(batches):
        for p, received in _received(batches).items():
            clock = time.perf_counter()
            with files.traced() as reads:
                rows, summary = _run_partition(p, received)
            summary["files"] = sorted(set(reads))
            summary["seconds"] = time.perf_counter() - clock
            rows.append((-1, p, SUMMARY, pickle.dumps(summary, protocol=5)))
            yield _records(rows)

    def _run_partition(p, received):
        states, outgoing, forward = received["states"], defaultdict(dict), defaultdict(lambda: defaultdict(list))
        summary = {"partition": p, "lanes": {}}
        for lane, messages in received["forward"].items():
            if lane in plan and plan[lane].superstep > 0:
                forward[p][lane].extend(messages)
        for lane, step in plan.items():
            view = _view(store, program, p, step.instance)
            n = view.bundle.num_subgraphs
            fresh = lane not in states
            halted, blobs = (np.zeros(n, dtype=bool), [None] * n) if fresh else states[lane]
            start = step.superstep == 0
            inbox = Inbox(received["forward"].get(lane, []) if start else received["messages"].get(lane, []),
                          view.bundle, ufunc)
            wake = start and (fresh or getattr(program, "wake_at_instance_start", True))
            active = np.arange(n) if wake else np.union1d(np.flatnonzero(~halted), inbox.receivers())
            out, ahead = Outbox(), Outbox()
            ctx = TimeSeriesContext(step, out, ahead, program.message_dtype, specs)
            for k in active:
                sg = view.subgraph(k)
                sg.state = _state(blobs[k])
                ctx._begin(sg)
                try:
                    program.compute(sg, inbox.for_subgraph(k), ctx)
                except Exception as exc:
                    raise GopherProgramError(
                        f"{type(program).__name__}.compute failed on sub-graph {sg.id} (partition {p}) in "
                        f"instance {step.instance['id']}, superstep {step.superstep}: {exc!r}\n"
                        f"{traceback.format_exc()}") from exc
                halted[k] = ctx._halt
                blobs[k] = pickle.dumps(sg.state, protocol=5)
            states[lane] = (halted, blobs)
            for dst, batch in out.route(vertex_offsets, subgraph_offsets, ufunc).items():
                outgoing[dst][lane] = batch
            for dst, batch in ahead.route(vertex_offsets, subgraph_offsets, ufunc).items():
                forward[dst][lane].append(batch)
            summary["lanes"][lane] = {"active": int(len(active)), "halted": int(halted.sum()), "subgraphs": n,
                                      "sent": out.count(), "forward": ahead.count(), "partials": ctx.partials}
        rows, sent_bytes = [], 0
        for kind, by_dst in ((MESSAGES, outgoing), (FORWARD, forward)):
            for dst, payload in by_dst.items():
                blob = pickle.dumps(dict(payload), protocol=5)
                sent_bytes += len(blob)
                rows.append((routes[dst], dst, kind, blob))
        rows.append((routes[p], p, STATE, pickle.dumps(states, protocol=5)))
        summary["bytes"] = sent_bytes
        return rows, summary

    return step


def merge_function(store, program, lanes: dict[int, dict], routes):
    """The mapInArrow function of the Merge step: ``program.merge`` once per sub-graph with its
    final state in every lane (``{instance id: state}``, in selection order); the merged states
    become lane :data:`MERGED`."""
    specs = {name: agg.resolve(spec) for name, spec in program.aggregators.items()}

    def merge(batches):
        for p, received in _received(batches).items():
            with files.traced() as reads:
                view = _view(store, program, p, None)
                n = view.bundle.num_subgraphs
                lane_states = received["states"]
                ctx = ComputeContext(0, Outbox(), {}, {}, program.message_dtype)
                ctx._aggregators = specs
                merged = []
                for k in range(n):
                    sg = view.subgraph(k)
                    sg.state = {}
                    ctx._begin(sg)
                    try:
                        program.merge(sg, {lanes[lane]["id"]: _state(lane_states[lane][1][k]) for lane in lanes},
                                      ctx)
                    except Exception as exc:
                        raise GopherProgramError(
                            f"{type(program).__name__}.merge failed on sub-graph {sg.id} (partition {p}): "
                            f"{exc!r}\n{traceback.format_exc()}") from exc
                    merged.append(pickle.dumps(sg.state, protocol=5))
            summary = {"partition": p, "lanes": {MERGED: {"partials": ctx.partials}}, "bytes": 0,
                       "files": sorted(set(reads))}
            yield _records([(routes[p], p, STATE, pickle.dumps({MERGED: (np.ones(n, dtype=bool), merged)},
                                                               protocol=5)),
                            (-1, p, SUMMARY, pickle.dumps(summary, protocol=5))])

    return merge


def output_function(store, program, lanes: dict[int, dict | None], schema: pa.Schema, method: str,
                    per_instance: bool):
    """The mapInArrow function that turns lane states into per-vertex rows: ``getattr(program,
    method)(subgraph)`` per sub-graph, after an ``instance`` column when ``per_instance``.
    A program may return numpy arrays or pyarrow arrays (e.g. list columns, or with nulls)."""
    names = schema.names[2:] if per_instance else schema.names[1:]

    def output(batches):
        for p, received in _received(batches).items():
            for lane, instance in lanes.items():
                view = _view(store, program, p, instance)
                _, blobs = received["states"][lane]
                columns = {name: [] for name in names}
                for k, blob in enumerate(blobs):
                    sg = view.subgraph(k)
                    sg.state = _state(blob)
                    values = getattr(program, method)(sg)
                    for name in names:
                        columns[name].append(values[name])
                arrays = [pa.array(view.bundle.ids, type=schema.field("id").type)]
                if per_instance:
                    arrays.insert(0, pa.array(np.full(view.bundle.num_vertices, instance["id"], np.int64)))
                for name in names:
                    arrays.append(_concat(columns[name], schema.field(name).type))
                yield pa.RecordBatch.from_arrays(arrays, schema=schema)

    return output


def _concat(pieces: list, type_: pa.DataType) -> pa.Array:
    if not pieces:
        return pa.array([], type=type_)
    if isinstance(pieces[0], (pa.Array, pa.ChunkedArray)):
        return pa.concat_arrays([p.combine_chunks() if isinstance(p, pa.ChunkedArray) else p
                                 for p in pieces]).cast(type_)
    return pa.array(np.concatenate([np.asarray(p) for p in pieces]), type=type_)
