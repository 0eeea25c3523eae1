"""A worker's live state as a data file (:mod:`hatrick.datafile`, never a pickle).

The same file holds a state wherever it is written: a worker writes its own part of a full
checkpoint (:meth:`hatrick.partitioned.Worker.write_state`, in its Spark task or in the
driver's process), and a state travels as these bytes between the driver and a worker task
(:mod:`hatrick.executors`).
"""
from __future__ import annotations

import os

import pandas as pd

from gofs import files
from hatrick import datafile
from hatrick.live import Column, State, TemplateValues

FORMAT = 4          # 3: data files (no pickles), buffer summary per batch, snapshot record; 4: worker state files
CHUNK = 1 << 20     # bytes of a state file synced at a time
_datasync = getattr(os, "fdatasync", os.fsync)


def _columns_out(columns: dict) -> dict:
    return {name: {"values": c.values, "present": c.present} for name, c in columns.items()}


def _columns_in(tree: dict) -> dict:
    return {name: Column(c["values"], c["present"]) for name, c in tree.items()}


def state_to_tree(s: State) -> dict:
    return {"directed": s.directed, "ids": s.ids.to_numpy(), "alive": s.alive, "comp": s.comp,
            "vattrs": _columns_out(s.vattrs), "vkinds": dict(s.vkinds), "src": s.src, "dst": s.dst, "mult": s.mult,
            "touched": s.touched, "eattrs": _columns_out(s.eattrs),
            "ekinds": dict(s.ekinds), "static_vertex": sorted(s.static_vertex),
            "static_edge": sorted(s.static_edge), "batch": s.batch, "time": float(s.time), "free": s.free,
            "template": None if s.template is None else {
                "keys": s.template.keys, "edge": _columns_out(s.template.edge),
                "vertex": _columns_out(s.template.vertex), "size": s.template.size,
                "counts": s.template.counts, "vertices": s.template.vertices, "eids": s.template.eids}}


def _template_vertex(t: dict) -> dict:
    """The template's static vertex values; a state written while they were read-only kept only
    which vertices had one (the values were the state's own, never changed)."""
    if "vertex" in t["template"]:
        return _columns_in(t["template"]["vertex"])
    return {name: Column(t["vattrs"][name]["values"][:len(present)].copy(), present)
            for name, present in t["template"]["vertex_present"].items()}


def state_from_tree(t: dict) -> State:
    """The state a tree holds; its key index is built when first used (a file of an earlier
    version also holds a sorted one: that is not read)."""
    return State(bool(t["directed"]), pd.Index(t["ids"]), t["alive"], t["comp"], _columns_in(t["vattrs"]),
                 dict(t["vkinds"]), None, t["src"], t["dst"], t["mult"], t["touched"],
                 _columns_in(t["eattrs"]), dict(t["ekinds"]), frozenset(t["static_vertex"]),
                 frozenset(t["static_edge"]), int(t["batch"]), float(t["time"]), t["free"],
                 None if t["template"] is None else TemplateValues(t["template"]["keys"],
                                                                   _columns_in(t["template"]["edge"]),
                                                                   _template_vertex(t),
                                                                   int(t["template"]["size"]),
                                                                   t["template"]["counts"],
                                                                   int(t["template"]["vertices"]),
                                                                   t["template"].get("eids")))


def write_durably(path: str, data: bytes, chunk: int | None = None) -> None:
    """Write ``data`` to ``path`` atomically (:func:`gofs.files.write_atomic`). With ``chunk``, the
    data goes to disk ``chunk`` bytes at a time, each synced before the next is written: a state
    is megabytes, and a log fsync issued meanwhile (by another writer) would otherwise wait for
    all of them to reach the disk."""
    view = memoryview(data)
    step = chunk or max(len(view), 1)

    def write(out):
        for start in range(0, len(view), step):
            out.write(view[start:start + step])
            out.flush()
            _datasync(out.fileno())

    files.write_atomic(path, write=write)


def write_state_file(path: str, state: State) -> int:
    """Write ``state`` to ``path`` (atomically, synced); returns the bytes written."""
    data = datafile.dumps({"format": FORMAT, "state": state_to_tree(state)})
    write_durably(path, data, CHUNK)
    return len(data)
