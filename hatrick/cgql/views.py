"""Graph snapshots that patterns read, and vectorised evaluation of vertex/edge conditions.

Patterns consume the ``GraphView`` protocol, satisfied by Hatrick's live graph
(``hatrick.live.GraphView``), by :class:`StoreInstanceView` (one stored GoFS
instance read whole into this process, for a replay or a comparison: a query
over a stored graph runs its past on Gopher and never reads one) and by
:class:`PandasView` (any pair of DataFrames; used for replays and tests):

- ``time`` (float) and ``seq`` (int, increasing per source);
- ``vertices()`` -> DataFrame with ``id`` and one column per vertex attribute;
- ``edges()`` -> DataFrame with ``src``, ``dst`` and one column per edge attribute.

A :class:`Snapshot` wraps one view: vertices sorted by id (so component
labels and cluster identities are deterministic), edge endpoints as vertex
positions (edges whose endpoint is not a vertex are dropped), and a cache of
masks keyed by the bound conditions, shared by every
registered query that sees the same view object.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import pandas as pd

from gofs.errors import InputError
from hatrick.cgql import nodes as n
from hatrick.cgql.errors import located

__all__ = ["GraphView", "PandasView", "StoreInstanceView", "Snapshot", "Bindings", "vertex_conditions_mask",
           "edge_condition_mask", "text_frame"]


@runtime_checkable
class GraphView(Protocol):
    time: float
    seq: int

    def vertices(self) -> pd.DataFrame: ...

    def edges(self) -> pd.DataFrame: ...


@dataclass
class PandasView:
    """A GraphView over given DataFrames."""
    time: float
    seq: int
    vertex_frame: pd.DataFrame
    edge_frame: pd.DataFrame
    directed: bool = True

    def vertices(self) -> pd.DataFrame:
        return self.vertex_frame

    def edges(self) -> pd.DataFrame:
        return self.edge_frame


class StoreInstanceView:
    """One stored GoFS instance as a GraphView: time = the instance's start, seq = its id.

    Reads, partition by partition through pyarrow, only ``vertex_attributes`` /
    ``edge_attributes`` (static or per-instance) of this instance; topology
    changes stored with the instance are applied by the store.
    """

    def __init__(self, store, instance: dict, vertex_attributes=(), edge_attributes=()):
        self.store, self.instance = store, instance
        self.time, self.seq = float(instance["start"]), int(instance["id"])
        self.directed = bool(store.directed)
        self._vertex_attributes, self._edge_attributes = list(vertex_attributes), list(edge_attributes)

    def vertices(self) -> pd.DataFrame:
        parts = [self.store.read_vertex_partition(p, attributes=self._vertex_attributes, instance=self.seq)
                 for p in range(self.store.num_partitions)]
        return _concat(parts, ["id", *self._vertex_attributes])

    def edges(self) -> pd.DataFrame:
        parts = [self.store.read_edge_partition(p, attributes=self._edge_attributes, instance=self.seq)
                 for p in range(self.store.num_partitions)]
        return _concat(parts, ["src", "dst", *self._edge_attributes])

    def __repr__(self) -> str:
        return f"StoreInstanceView({self.store.path!r}, instance={self.seq}, time={self.time})"


def _concat(tables, columns) -> pd.DataFrame:
    import pyarrow as pa

    table = pa.concat_tables(tables) if tables else None
    if table is None or table.num_rows == 0:
        return pd.DataFrame({c: [] for c in columns})
    return table.select(columns).to_pandas()


class Bindings:
    """What symbolic values mean during one evaluation: bound parameters and alias states."""

    def __init__(self, params: dict, aliases: dict | None = None):
        self.params, self.aliases = params, aliases or {}

    def scalar(self, value, where: str = "value"):
        """A Number/String/Word/Param/Duration as a Python value (Word: its text)."""
        if isinstance(value, n.Number):
            return value.value
        if isinstance(value, (n.String, n.Word)):
            return value.value
        if isinstance(value, n.Duration):
            return value.seconds
        if isinstance(value, n.Param):
            return self.param(value.name, value)
        raise located(value, f"{where}: {type(value).__name__.lower()} is not allowed here")

    def param(self, name: str, node):
        if name not in self.params:
            raise located(node, f"parameter {name!r} is not bound; pass params={{{name!r}: ...}} at registration")
        return self.params[name]


_snapshots: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


class Snapshot:
    """One view, prepared once for every query that sees it."""

    @classmethod
    def of(cls, view, directed: bool | None = None) -> "Snapshot":
        """The shared Snapshot of ``view`` (one per view object, when the view supports weak references)."""
        directed = bool(getattr(view, "directed", True) if directed is None else directed)
        try:
            cached = _snapshots.get(view)
        except TypeError:
            return cls(view, directed)
        if cached is None or cached.directed != directed:
            cached = cls(view, directed)
            _snapshots[view] = cached
        return cached

    def __init__(self, view, directed: bool = True):
        self.view, self.directed = view, directed
        self.time, self.seq = float(view.time), int(view.seq)
        vertices = view.vertices()
        if "id" not in vertices.columns:
            raise InputError(f"graph view at time {self.time}: vertices() has no 'id' column "
                             f"(columns: {list(vertices.columns)})")
        self.vertices = vertices.sort_values("id", kind="stable").reset_index(drop=True)
        self.ids = self.vertices["id"].to_numpy()
        self.index = pd.Index(self.ids)
        if not self.index.is_unique:
            raise InputError(f"graph view at time {self.time}: vertex ids are not unique")
        edges = view.edges()
        for column in ("src", "dst"):
            if column not in edges.columns:
                raise InputError(f"graph view at time {self.time}: edges() has no {column!r} column "
                                 f"(columns: {list(edges.columns)})")
        src, dst = self.index.get_indexer(edges["src"]), self.index.get_indexer(edges["dst"])
        keep = (src >= 0) & (dst >= 0)
        self.edges = edges[keep].reset_index(drop=True) if not keep.all() else edges.reset_index(drop=True)
        self.src, self.dst = src[keep].astype(np.int64), dst[keep].astype(np.int64)
        self.num_vertices = len(self.ids)
        self._cache: dict = {}

    # conditions ------------------------------------------------------------------
    def vertex_mask(self, conditions, bindings: Bindings) -> np.ndarray:
        """Vertices satisfying every condition (a tuple of VertexCondition)."""
        key = ("v", _bound_key(conditions, bindings))
        if key[1] is not None and key in self._cache:
            return self._cache[key]
        mask = vertex_conditions_mask(self.vertices, conditions, bindings, self)
        if key[1] is not None:
            self._cache[key] = mask
        return mask

    def edge_mask(self, condition: n.EdgeCondition | None, bindings: Bindings) -> np.ndarray:
        """Edges satisfying an edge condition (all edges when None)."""
        if condition is None:
            return np.ones(len(self.src), dtype=bool)
        key = ("e", _bound_key((condition,), bindings))
        if key[1] is not None and key in self._cache:
            return self._cache[key]
        mask = edge_condition_mask(self.edges, condition, bindings)
        if key[1] is not None:
            self._cache[key] = mask
        return mask

    def records(self, positions: np.ndarray) -> list[dict]:
        """Attribute dicts (without ``id``) of the vertices at ``positions``, for event payloads."""
        if "attribute_arrays" not in self._cache:
            self._cache["attribute_arrays"] = {c: self.vertices[c].to_numpy() for c in self.vertices.columns
                                               if c != "id"}
        arrays = self._cache["attribute_arrays"]
        columns = list(arrays)
        values = [arrays[c][positions].tolist() for c in columns]
        return [{c: _plain(v) for c, v in zip(columns, row)} for row in zip(*values)]


def vertex_conditions_mask(frame: pd.DataFrame, conditions, bindings: Bindings, snap=None) -> np.ndarray:
    """Rows of a vertex frame satisfying every condition; the one rule for live views, stored
    snapshots and the sub-graphs of a Gopher run (``snap`` only for ``alias.*`` wildcards)."""
    mask = np.ones(len(frame), dtype=bool)
    for c in conditions:
        mask &= _condition_mask(frame, c, bindings, "vertex", snap)
    return mask


def edge_condition_mask(frame: pd.DataFrame, condition: n.EdgeCondition, bindings: Bindings) -> np.ndarray:
    """Rows of an edge frame satisfying an edge condition (attribute conditions and labels)."""
    mask = np.ones(len(frame), dtype=bool)
    for c in condition.conditions:
        mask &= _condition_mask(frame, c, bindings, "edge", None)
    if condition.labels:
        column = next((c for c in ("type", "label") if c in frame.columns), None)
        if column is None:
            raise located(condition, f"edge label {condition.labels[0]!r} needs a 'type' or 'label' edge "
                                     f"attribute (edge attributes: {_attributes(frame, 'edge')})")
        mask &= frame[column].isin(list(condition.labels)).to_numpy()
    return mask


def _plain(value):
    """numpy scalars/arrays -> Python values (events are JSON-able)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.tolist()]
    if isinstance(value, float) and np.isnan(value):
        return None
    return value


def _attributes(frame: pd.DataFrame, kind: str) -> str:
    skip = {"id"} if kind == "vertex" else {"src", "dst"}
    return ", ".join(c for c in frame.columns if c not in skip) or "none"


def _bound_key(conditions, bindings: Bindings):
    """A cache key for conditions with their parameters bound; None when a wildcard makes it per-query."""
    values = []
    for c in conditions:
        items = c.value if isinstance(getattr(c, "value", None), tuple) else (getattr(c, "value", None),)
        for v in items:
            if isinstance(v, n.Wildcard):
                return None
            if isinstance(v, n.Param):
                values.append((v.name, repr(bindings.params.get(v.name))))
    return (conditions, tuple(values))


def _is_list_column(series: pd.Series) -> bool:
    if series.dtype != object:
        return False
    sample = series.dropna()
    return len(sample) > 0 and isinstance(sample.iloc[0], (list, tuple, np.ndarray))


def _condition_mask(frame: pd.DataFrame, c: n.VertexCondition, bindings: Bindings, kind: str, snap) -> np.ndarray:
    if c.attribute not in frame.columns:
        raise located(c, f"{kind} attribute {c.attribute!r} is not in the graph "
                         f"({kind} attributes: {_attributes(frame, kind)})")
    column = frame[c.attribute]
    if isinstance(column.dtype, pd.CategoricalDtype) and not isinstance(c.value, n.Wildcard):
        return _coded_mask(column, c, bindings, kind)
    if isinstance(c.value, n.Wildcard) and kind == "vertex" and not _is_list_column(column):
        hit = _same_value_as_members(c, bindings, snap, column)
        return hit if c.op == "=" else ~hit
    if c.op == "in" or isinstance(c.value, n.Wildcard):
        values = column.to_numpy()[_wildcard_values(c, bindings, snap)] if isinstance(c.value, n.Wildcard) \
            else [bindings.scalar(v, f"{c.attribute} IN") for v in c.value]
        if _is_list_column(column):
            return _list_contains(column, values)
        return column.isin(values).to_numpy() if c.op in ("in", "=") else ~column.isin(values).to_numpy()
    value = bindings.scalar(c.value, f"condition on {c.attribute!r}")
    if _is_list_column(column):
        if c.op not in ("=", "!="):
            raise located(c, f"{kind} attribute {c.attribute!r} holds lists: only = (contains) and != apply")
        contains = _list_contains(column, [value])
        return contains if c.op == "=" else ~contains
    numeric_column = pd.api.types.is_numeric_dtype(column.dtype) and not pd.api.types.is_bool_dtype(column.dtype)
    if numeric_column and isinstance(value, str):
        if c.op in ("=", "!="):
            return np.full(len(column), c.op == "!=")
        raise located(c, f"cannot compare numeric {kind} attribute {c.attribute!r} with {value!r}")
    try:
        result = _compare(column, c.op, value)
    except TypeError:
        raise located(c, f"cannot compare {kind} attribute {c.attribute!r} ({column.dtype}) with {value!r}") from None
    return np.asarray(result.fillna(False) if isinstance(result, pd.Series) else result, dtype=bool)


#: {(distinct values, whether one is missing, the condition bound, kind): the condition at each
#: distinct value}: a stored graph's few text values (edge types) come back in every partition and
#: instance, and deciding them through pandas costs more than gathering the codes
_CODED_DECISIONS: dict = {}
_CODED_DECISIONS_KEPT = 256
_CODED_DISTINCT_KEYED = 64          # more distinct values than this: decided each time, not kept


def _coded_mask(column: pd.Series, c: n.VertexCondition, bindings: Bindings, kind: str) -> np.ndarray:
    """A condition on a categorical column, decided once per distinct value (the same rule as
    on plain values; a missing value is one more distinct value) and gathered by code."""
    coded = column.array                      # the Categorical: its codes without a Series around them
    codes, categories = coded.codes, coded.categories
    missing = bool((codes < 0).any())
    bound = _bound_key((c,), bindings) if len(categories) <= _CODED_DISTINCT_KEYED else None
    key = None if bound is None else (str(categories.dtype), tuple(categories), missing, bound, kind)
    hit = None if key is None else _CODED_DECISIONS.get(key)
    if hit is None:
        distinct = categories.to_numpy(dtype=object)
        if missing:
            distinct = np.append(distinct, None)         # code -1 picks the last: the missing value
        hit = _condition_mask(text_frame({c.attribute: distinct}), c, bindings, kind, None)
        if key is not None:
            if len(_CODED_DECISIONS) >= _CODED_DECISIONS_KEPT:
                _CODED_DECISIONS.clear()
            hit.flags.writeable = False
            _CODED_DECISIONS[key] = hit
    return hit[codes]


def text_frame(columns: dict) -> pd.DataFrame:
    """The frame pandas makes of these arrays, text columns built from their distinct values:
    pandas would otherwise copy every row's string into its text array one by one."""
    out = {}
    for name, values in columns.items():
        if isinstance(values, np.ndarray) and values.dtype == object:
            codes, distinct = pd.factorize(values)
            if pd.api.types.infer_dtype(distinct, skipna=True) == "string":
                values = pd.array(distinct, dtype="str").take(codes, allow_fill=True)
        out[name] = values
    return pd.DataFrame(out, copy=False)


def _compare(column: pd.Series, op: str, value):
    if op == "=":
        return column == value
    if op == "!=":
        return (column != value) & column.notna()
    if op == "<":
        return column < value
    if op == "<=":
        return column <= value
    if op == ">":
        return column > value
    return column >= value


def _list_contains(column: pd.Series, values) -> np.ndarray:
    exploded = column.explode()
    hit = exploded.isin(values)
    return hit.groupby(level=0).any().reindex(column.index, fill_value=False).to_numpy(dtype=bool)


def _alias_state(c: n.VertexCondition, bindings: Bindings):
    alias = c.value.alias
    state = bindings.aliases.get(alias)
    if state is None:
        raise located(c.value, f"alias {alias!r} is not defined by a sub-query of this query (AS {alias})")
    return state


def _wildcard_values(c: n.VertexCondition, bindings: Bindings, snap) -> np.ndarray:
    """Positions of the members of the clusters currently reported under the wildcard's alias."""
    return _alias_state(c, bindings).reported_positions()


def _same_value_as_members(c: n.VertexCondition, bindings: Bindings, snap, column: pd.Series) -> np.ndarray:
    """The wildcard's rule: the rows whose ``c.attribute`` equals that of a member of a cluster
    the alias reports (a missing value equals none). Over a whole snapshot the members are
    positions in it (integer codes compared); over one partition of a Gopher run the alias's
    state is its :class:`ReportedMembers` there."""
    state = _alias_state(c, bindings)
    if isinstance(state, ReportedMembers):
        return state.same_value(c.attribute, column)
    codes = _codes(snap, c.attribute)
    member = np.zeros(codes.max() + 2 if len(codes) else 1, bool)
    member[codes[state.reported_positions()]] = True
    return member[codes] & (codes >= 0)


@dataclass
class ReportedMembers:
    """What an ``alias.*`` wildcard reads of its alias in one partition and instance of a Gopher
    run: ``mask``, which of the partition's vertices are members of a cluster the alias reports,
    and ``values``, {attribute: the distinct values the members of every partition have}
    (gathered between the tasks; ``id`` needs none: a vertex equals only itself)."""
    mask: np.ndarray
    values: dict

    def same_value(self, attribute: str, column: pd.Series) -> np.ndarray:
        if attribute == "id":
            return self.mask.copy()
        values = self.values[attribute]
        return column.isin(values).to_numpy(dtype=bool) & column.notna().to_numpy()


def _codes(snap, attribute: str) -> np.ndarray:
    """Integer codes of a vertex attribute (equal values, equal codes), once per snapshot."""
    key = ("codes", attribute)
    if key not in snap._cache:
        snap._cache[key] = pd.factorize(snap.vertices[attribute])[0] if attribute != "id" else \
            np.arange(snap.num_vertices)
    return snap._cache[key]
