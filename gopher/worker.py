"""Task-side half of the engine: runs inside Spark's Python workers.

Topology is loaded from GoFS once per worker process and partition, and kept
in a module-level cache that Spark's reused Python workers carry from one
superstep (and one run) to the next; only state and messages travel as records.
"""
from __future__ import annotations

import pickle
import time
import traceback
from collections import defaultdict

import numpy as np
import pyarrow as pa

from gofs.bundle import load_instance_attributes, load_partition
from gopher import aggregators as agg
from gopher.context import ComputeContext
from gopher.messages import Inbox, Outbox, combiner_ufunc
from gopher.subgraph import Subgraph

STATE, MESSAGES, SUMMARY = 0, 1, 2
RECORD_SCHEMA = pa.schema([("route", pa.int64()), ("dst", pa.int32()), ("kind", pa.int8()), ("payload", pa.binary())])

_TOPOLOGY: dict = {}
_MAX_CACHED = 64


class GopherProgramError(RuntimeError):
    """A sub-graph program raised: names the sub-graph, partition and superstep."""


def topology(store, p: int, program):
    """(bundle, [Subgraph]) for partition ``p``, cached per worker process."""
    key = (store.manifest.get("uuid", store.root), store.root, p,
           tuple(program.vertex_attributes), tuple(program.edge_attributes))
    cached = _TOPOLOGY.get(key)
    if cached is None:
        if len(_TOPOLOGY) >= _MAX_CACHED:
            _TOPOLOGY.pop(next(iter(_TOPOLOGY)))
        bundle = load_partition(store, p, program.vertex_attributes, program.edge_attributes)
        cached = (bundle, [Subgraph(bundle, k) for k in range(bundle.num_subgraphs)], {})
        _TOPOLOGY[key] = cached
    return cached


def _attach_instance(store, program, cached, instance) -> None:
    """Point every sub-graph of the partition at ``instance``'s attribute values."""
    bundle, subgraphs, loaded = cached
    if instance is None or not (program.instance_vertex_attributes or program.instance_edge_attributes):
        return
    key = (instance["id"], tuple(program.instance_vertex_attributes), tuple(program.instance_edge_attributes))
    if loaded.get("key") == key:
        return
    vertex, edge = load_instance_attributes(store, bundle, instance, program.instance_vertex_attributes,
                                            program.instance_edge_attributes)
    for sg in subgraphs:
        sg.clear_instance()
        sg._instance_vertex, sg._instance_edge = vertex, edge
    loaded["key"] = key


def _records(rows: list[tuple]) -> pa.RecordBatch:
    route, dst, kind, payload = zip(*rows) if rows else ((), (), (), ())
    return pa.RecordBatch.from_arrays([pa.array(route, pa.int64()), pa.array(dst, pa.int32()),
                                       pa.array(kind, pa.int8()), pa.array(payload, pa.binary())],
                                      schema=RECORD_SCHEMA)


def _group(batches) -> dict:
    grouped = defaultdict(lambda: {"state": None, "messages": []})
    for batch in batches:
        dsts = batch.column(1).to_pylist()
        kinds = batch.column(2).to_pylist()
        payloads = batch.column(3).to_pylist()
        for dst, kind, payload in zip(dsts, kinds, payloads):
            if kind == STATE:
                grouped[dst]["state"] = payload
            elif kind == MESSAGES:
                grouped[dst]["messages"].append(pickle.loads(payload))
    return grouped


def superstep_function(store, program, superstep: int, aggregated: dict, globals_: dict,
                       routes: list[int], vertex_offsets, subgraph_offsets, instance=None):
    """The mapInArrow function for one superstep."""
    ufunc = combiner_ufunc(program.combiner)
    specs = {name: agg.resolve(spec) for name, spec in program.aggregators.items()}

    def step(batches):
        for p, received in _group(batches).items():
            rows = _run_partition(p, received)
            yield _records(rows)

    def _run_partition(p, received):
        clock = time.perf_counter()
        cached = topology(store, p, program)
        _attach_instance(store, program, cached, instance)
        bundle, subgraphs, _ = cached
        n = len(subgraphs)
        if received["state"] is None:
            halted, states = np.zeros(n, dtype=bool), [{} for _ in range(n)]
        else:
            halted, states = pickle.loads(received["state"])
        inbox = Inbox(received["messages"], bundle, ufunc)
        active = np.union1d(np.flatnonzero(~halted), inbox.receivers()) if superstep else np.arange(n)
        outbox = Outbox()
        ctx = ComputeContext(superstep, outbox, aggregated, globals_, program.message_dtype, instance)
        ctx._aggregators = specs
        for k in active:
            sg = subgraphs[k]
            sg.state = states[k]
            ctx._begin(sg)
            try:
                program.compute(sg, inbox.for_subgraph(k), ctx)
            except Exception as exc:
                raise GopherProgramError(
                    f"{type(program).__name__}.compute failed on sub-graph {sg.id} (partition {p}) "
                    f"in superstep {superstep}: {exc!r}\n{traceback.format_exc()}") from exc
            halted[k] = ctx._halt
            states[k] = sg.state
        rows = []
        sent_bytes = 0
        for dst, batch in outbox.route(vertex_offsets, subgraph_offsets, ufunc).items():
            blob = pickle.dumps(batch, protocol=5)
            sent_bytes += len(blob)
            rows.append((routes[dst], dst, MESSAGES, blob))
        rows.append((routes[p], p, STATE, pickle.dumps((halted, states), protocol=5)))
        summary = {"partition": p, "active": int(len(active)), "halted": int(halted.sum()),
                   "subgraphs": n, "received": inbox.count, "sent": outbox.count(), "bytes": sent_bytes,
                   "partials": ctx.partials, "seconds": time.perf_counter() - clock}
        rows.append((-1, p, SUMMARY, pickle.dumps(summary, protocol=5)))
        return rows

    return step


def output_function(store, program, schema: pa.Schema, instance=None):
    """The mapInArrow function that turns final states into per-vertex result rows."""

    def output(batches):
        for p, received in _group(batches).items():
            cached = topology(store, p, program)
            _attach_instance(store, program, cached, instance)
            bundle, subgraphs, _ = cached
            _, states = pickle.loads(received["state"])
            columns = {name: [] for name in schema.names if name != "id"}
            for sg, state in zip(subgraphs, states):
                sg.state = state
                try:
                    values = program.output(sg)
                    for name in columns:
                        column = np.asarray(values[name])
                        if column.shape != (sg.num_vertices,):
                            raise ValueError(f"column {name!r} has shape {column.shape}, "
                                             f"expected ({sg.num_vertices},): one value per vertex")
                        columns[name].append(column)
                except Exception as exc:
                    raise GopherProgramError(
                        f"{type(program).__name__}.output failed on sub-graph {sg.id} (partition {p}): "
                        f"{exc!r}\n{traceback.format_exc()}") from exc
            arrays = [pa.array(bundle.ids, type=schema.field("id").type)]
            for name in columns:
                merged = np.concatenate(columns[name]) if columns[name] else np.empty(0)
                arrays.append(pa.array(merged, type=schema.field(name).type))
            yield pa.RecordBatch.from_arrays(arrays, schema=schema)

    return output
