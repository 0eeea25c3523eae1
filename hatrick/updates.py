"""The update model: what a stream may say, checked and turned into a columnar batch.

An update is one row with ``op`` (see :data:`OPS`), ``id`` (vertex ops) or
``src``/``dst`` (edge ops), ``attribute``/``value`` (set ops; a null value
unsets), and ``producer``, ``seq``, ``time``. Checks that need only the row
itself happen here (unknown op, missing or mistyped ids, missing producer/seq);
checks that need the graph (no such edge, wrong attribute type) happen when the
batch is applied (:mod:`hatrick.live`). Either way a bad update is reported with
its producer and seq and has no effect at all.
"""
from __future__ import annotations

import time as _time
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from numba import njit

from gofs.errors import InputError
from gofs.numba_cache import serialise_compilation

serialise_compilation()  # one compilation at a time on this machine: numba's kernel cache stays whole

OPS = ("add_vertex", "remove_vertex", "add_edge", "remove_edge", "set_vertex", "set_edge")
ADD_VERTEX, REMOVE_VERTEX, ADD_EDGE, REMOVE_EDGE, SET_VERTEX, SET_EDGE = range(len(OPS))
VERTEX_OPS = (ADD_VERTEX, REMOVE_VERTEX, SET_VERTEX)
IS_VERTEX_OP = np.isin(np.arange(len(OPS)), VERTEX_OPS)     # by op code (a lookup for the routing and checking kernels)
COLUMNS = ("op", "id", "src", "dst", "attribute", "value", "producer", "seq", "time")
REJECTED_COLUMNS = ["producer", "seq", "op", "reason"]
MAX_SEQ = 1 << 62      # a seq near 2**63 would leave its producer no seq above the mark


class UpdateError(InputError):
    """Updates were refused; ``rejected`` lists each with producer, seq, op and reason."""

    def __init__(self, message: str, rejected: pd.DataFrame):
        super().__init__(message)
        self.rejected = rejected


@dataclass
class UpdateBatch:
    """Checked updates, one numpy array per field, in the order they are applied.

    ``a`` is the vertex id of a vertex op and the source of an edge op; ``b`` the
    destination of an edge op (unused for vertex ops). ``text_values`` is set when
    values came as text (file, socket and Kafka sources) and are parsed per attribute.
    A column absent from the updates (e.g. ``attribute`` and ``value`` of edge updates) is one
    null seen by every row (a read-only stride-0 view): :meth:`take` keeps it so and pickling
    sends the null once, so routing a batch to workers copies and ships only the columns it has.
    ``producer_codes`` (codes, names), where :func:`validate` made it, is the producer column
    factorized (``producer == names[codes]``): admitting, routing and shipping a batch then
    handle small integers, not one Python string per row, and ``producer`` is made from them
    only where it is read (a rejection names its producer): the constructor takes None for it.
    """

    op: np.ndarray
    a: np.ndarray
    b: np.ndarray
    attribute: np.ndarray
    value: np.ndarray
    _producer: np.ndarray | None
    seq: np.ndarray
    time: np.ndarray
    text_values: bool = False
    producer_codes: tuple | None = None

    @property
    def producer(self) -> np.ndarray:
        """The producer of each row."""
        if self._producer is None:
            codes, names = self.producer_codes
            self._producer = names[codes]
        return self._producer

    def __len__(self) -> int:
        return len(self.op)

    def take(self, rows) -> "UpdateBatch":
        op = self.op[rows]
        codes = self.producer_codes
        if codes is not None:
            codes = (codes[0][rows], codes[1])
        return UpdateBatch(op, self.a[rows], self.b[rows], _take(self.attribute, rows, len(op)),
                           _take(self.value, rows, len(op)), self._producer[rows] if codes is None else None,
                           self.seq[rows], self.time[rows], self.text_values, codes)

    def __reduce__(self):
        producer = self.producer if self.producer_codes is None else self.producer_codes
        return _unpickled_batch, (self.op, self.a, self.b, _packed(self.attribute), _packed(self.value),
                                  producer, self.seq, self.time, self.text_values)

    def rejected(self, rows, reasons) -> pd.DataFrame:
        """Rows ``rows`` as a rejection table with ``reasons`` (a string or one per row)."""
        rows = np.asarray(rows, dtype=np.int64)
        return pd.DataFrame({"producer": self.producer[rows], "seq": self.seq[rows],
                             "op": np.asarray(OPS, dtype=object)[self.op[rows]],
                             "reason": np.broadcast_to(np.asarray(reasons, dtype=object), rows.shape)})


def absent_column(n: int) -> np.ndarray:
    """A column of ``n`` nulls as one null seen by every row (see :class:`UpdateBatch`)."""
    return np.broadcast_to(_NULL, (n,))


_NULL = np.full(1, None, dtype=object)


def is_absent(column: np.ndarray) -> bool:
    """Whether ``column`` is an :func:`absent_column` (every row null, nothing to read per row)."""
    return column.strides == (0,)


def _take(column: np.ndarray, rows, count: int) -> np.ndarray:
    """``column[rows]`` (``count`` of them) as a new array, never a view of ``column`` (whose data may
    be the caller's frame); an absent column stays one null."""
    if is_absent(column):
        return absent_column(count)
    return column[rows].copy() if isinstance(rows, slice) else column[rows]


def _packed(column: np.ndarray):
    return len(column) if is_absent(column) else column


def _unpickled_batch(op, a, b, attribute, value, producer, seq, time, text_values) -> UpdateBatch:
    attribute, value = (absent_column(c) if isinstance(c, int) else c for c in (attribute, value))
    codes = producer if isinstance(producer, tuple) else None
    if codes is not None:
        producer = None
    return UpdateBatch(op, a, b, attribute, value, producer, seq, time, text_values, codes)


def to_frame(updates) -> pd.DataFrame:
    """A pandas DataFrame of ``updates``: a pandas or Spark DataFrame, a list of dicts, or a dict of columns."""
    if isinstance(updates, pd.DataFrame):
        return updates
    if hasattr(updates, "toPandas") and hasattr(updates, "schema"):
        return updates.toPandas()
    if isinstance(updates, dict):
        return pd.DataFrame(updates)
    if isinstance(updates, (list, tuple)):
        if not updates:
            return pd.DataFrame({c: pd.Series(dtype=object) for c in ("op", "producer", "seq")})
        if not isinstance(updates[0], dict):
            raise InputError(f"updates: a list of dicts is expected, item 0 is {type(updates[0]).__name__}")
        return pd.DataFrame.from_records(list(updates))
    raise InputError(f"updates: expected a pandas/Spark DataFrame or a list of dicts, got {type(updates).__name__}")


_EMPTY_REJECTED = pd.DataFrame(columns=REJECTED_COLUMNS)


def empty_rejected() -> pd.DataFrame:
    """A new, empty rejection table (a shallow copy of one built once: building a frame, or a deep
    copy, costs more; the copy's columns are its own, and it has no rows to share)."""
    return _EMPTY_REJECTED.copy(deep=False)


class _Columns(dict):
    """The update columns of ``frame`` by name; one it lacks reads as nulls (made when first read:
    an edge batch has no ``id``, ``attribute`` or ``value``, and only a row that needs them reads them).
    ``given`` names the columns ``frame`` has (a pandas column index answers ``in`` far slower)."""

    def __init__(self, frame: pd.DataFrame, names: list):
        self.given = frozenset(c for c in COLUMNS if c in names)
        super().__init__((c, frame[c]) for c in COLUMNS if c in self.given)
        self.rows = len(frame)

    def __missing__(self, name: str) -> pd.Series:
        self[name] = absent = pd.Series(np.full(self.rows, None, dtype=object), dtype=object)
        return absent


class _Reasons:
    """The first reason each row is bad for (rows flagged later keep their first reason)."""

    def __init__(self, n: int):
        self.text = None                        # made at the first bad row (most batches have none)
        self.bad = np.zeros(n, bool)

    def flag(self, mask: np.ndarray, reason) -> None:
        new = mask & ~self.bad
        if new.any():
            if self.text is None:
                self.text = np.full(len(self.bad), None, dtype=object)
            self.text[new] = reason if isinstance(reason, str) else np.asarray(reason, dtype=object)[new[mask]]
            self.bad |= new


def _ids(column: pd.Series, id_type: str, need: np.ndarray, field: str, reasons: _Reasons) -> np.ndarray:
    """``column`` as the graph's id type; rows in ``need`` that are missing or mistyped get a reason."""
    if id_type == "int64" and _plain_kind(column) in "iu":
        return column.to_numpy(np.int64)                 # a numpy integer column has no nulls
    if not need.any():                                   # nobody reads this field's values
        return np.zeros(len(column), np.int64) if id_type == "int64" else np.full(len(column), None, object)
    missing = need & column.isna().to_numpy()
    reasons.flag(missing, f"field '{field}' is missing")
    if id_type == "int64":
        numbers = pd.to_numeric(column, errors="coerce")
        bad = need & ~missing & (numbers.isna() | (numbers % 1 != 0)).to_numpy()
        reasons.flag(bad, f"field '{field}': ids of this graph are integers")
        return numbers.fillna(0).to_numpy().astype(np.int64)
    values = _objects(column)
    if pd.api.types.infer_dtype(column, skipna=True) not in ("string", "empty"):
        bad = need & ~missing & ~column.map(lambda v: isinstance(v, str)).to_numpy(bool)
        reasons.flag(bad, f"field '{field}': ids of this graph are strings")
    return values


def _objects(column: pd.Series) -> np.ndarray:
    """``column`` as an object array. A text column is factorized first, so each distinct string
    becomes one Python object (shared by its rows) instead of one per row."""
    if pd.api.types.is_string_dtype(column.dtype) and column.dtype != object:
        codes, uniques = pd.factorize(column, use_na_sentinel=True)
        table = np.append(np.asarray(uniques, dtype=object), None)
        return table[codes]                                # code -1 (null) picks the trailing None
    return column.to_numpy(dtype=object)


def _arrow_strings(column: pd.Series) -> pa.Array | None:
    """The Arrow array of a text column pandas keeps in Arrow (pandas 3's default ``str``), else None.
    Arrow's kernels look its strings up without making a Python object per row."""
    if isinstance(column.dtype, pd.StringDtype) and column.dtype.storage == "pyarrow":
        strings = pa.array(column)
        return strings.combine_chunks() if isinstance(strings, pa.ChunkedArray) else strings
    return None


def _factorize(column: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(codes, distinct values) of ``column`` as :func:`pandas.factorize` gives them (code -1: null;
    values no row uses may be listed too): a categorical column's own codes and categories (no
    pass over its values), Arrow's dictionary encoding for a column kept in Arrow."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        return column.array.codes, np.asarray(column.dtype.categories, dtype=object)
    strings = _arrow_strings(column)
    if strings is None:
        codes, uniques = pd.factorize(column, use_na_sentinel=True)
        return codes, np.asarray(uniques, dtype=object)
    encoded = pc.dictionary_encode(strings)
    return (encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64),
            np.asarray(encoded.dictionary.to_pylist(), dtype=object))


def _missing(column: pd.Series) -> np.ndarray:
    """Where ``column`` is null (for a column kept in Arrow, from its validity bitmap; for a
    categorical one, from its codes)."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        return column.array.codes < 0
    strings = _arrow_strings(column)
    if strings is None:
        return column.isna().to_numpy()
    if not strings.null_count:
        return np.zeros(len(strings), bool)
    return strings.is_null().to_numpy(zero_copy_only=False)


_OPS_ARROW = pa.array(OPS)


def _op_codes(column: pd.Series) -> np.ndarray:
    """Index in OPS of each row's op (-1: unknown or missing), looking up each distinct value once."""
    strings = _arrow_strings(column)
    if strings is not None:
        return pc.index_in(strings, value_set=_OPS_ARROW).fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int8)
    codes, uniques = _factorize(column)
    lookup = np.array([OPS.index(v) if isinstance(v, str) and v in OPS else -1 for v in uniques] + [-1], np.int8)
    return lookup[codes.astype(np.intp, copy=False)]       # numpy indexes by small integers far slower


def _plain_kind(column: pd.Series) -> str:
    """The numpy kind letter of a column with a plain numpy dtype ("" for object/extension dtypes)."""
    return column.dtype.kind if isinstance(column.dtype, np.dtype) and column.dtype != object else "-"


def _numbers(column: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """``column`` as float64 and where it is not a number."""
    if _plain_kind(column) in "iuf":
        values = column.to_numpy(np.float64)
        return values, np.isnan(values)
    values = pd.to_numeric(column, errors="coerce").to_numpy(np.float64)
    return values, np.isnan(values)


_SCALAR_COLUMNS = ("empty", "floating", "integer", "string", "boolean", "mixed-integer-float")


def _is_scalar(v) -> bool:
    return v is None or isinstance(v, (str, int, float, bool, np.number, np.bool_, np.str_))


def validate(updates, id_type: str, text_values: bool = False, locate=None) -> tuple[UpdateBatch, pd.DataFrame]:
    """Check each update on its own and return the good ones (sorted by event time, ties in
    arrival order) as an :class:`UpdateBatch`, and the bad ones as a rejection table.

    ``id_type`` is "int64" or "string" (the graph's). A missing ``time`` column means "now".
    Raises InputError if the table lacks a column every update needs (``op``, ``producer``, ``seq``).
    ``locate(rows)``, if given, says where bad rows came from (e.g. file and line); it prefixes their reasons.
    Typed columns (integer ids and seq, float time, text or categorical op/producer: a categorical
    column's codes and categories are read, not its values) take vectorised paths;
    columns of Python objects are checked value by value.
    """
    frame = to_frame(updates)
    if len(frame) == 0 and len(frame.columns) == 0:
        frame = to_frame([])
    column_names = list(frame.columns)
    for column in ("op", "producer", "seq"):
        if column not in column_names:
            raise InputError(f"updates: no '{column}' column (columns: {column_names}); "
                             f"every update needs op, producer and seq")
    unknown = [c for c in column_names if c not in COLUMNS]
    if unknown:
        raise InputError(f"updates: unknown column '{unknown[0]}' (known: {', '.join(COLUMNS)})")
    n = len(frame)
    if not (isinstance(frame.index, pd.RangeIndex) and frame.index.start == 0 and frame.index.step == 1):
        frame = frame.reset_index(drop=True)
    col = _Columns(frame, column_names)
    reasons = _Reasons(n)

    op = _op_codes(col["op"])
    reasons.flag(_missing(col["op"]), "field 'op' is missing")
    bad_op = op < 0
    if bad_op.any():
        reasons.flag(bad_op, [f"unknown op {v!r} (ops: {', '.join(OPS)})" for v in col["op"][bad_op]])
    no_producer = _missing(col["producer"])
    reasons.flag(no_producer, "field 'producer' is missing")
    producer_codes, producers = _factorize(col["producer"])
    if no_producer.any() or not all(isinstance(p, str) for p in producers):
        producer = np.array(["" if m else str(v) for v, m in zip(_objects(col["producer"]), no_producer)],
                            dtype=object)
        codes = None
    else:                                                # one Python string per producer, shared by its rows
        producer_names = np.asarray(producers, dtype=object)
        codes = producer_codes.astype(np.int32 if len(producer_names) < 1 << 31 else np.int64)
        producer = None                                  # the batch makes it if it is read
    if _plain_kind(col["seq"]) in "iu":
        seq = col["seq"].to_numpy(np.int64)
    else:
        seq_num, no_seq = _numbers(col["seq"])
        reasons.flag(no_seq | (seq_num % 1 != 0), "field 'seq' must be an integer")
        outside = ~no_seq & ((seq_num < 0) | (seq_num >= float(MAX_SEQ)))
        seq = np.where(no_seq | outside, -1, seq_num).astype(np.int64)
    out_of_range = (seq < 0) | (seq >= MAX_SEQ)
    if out_of_range.any():
        shown = col["seq"][out_of_range].tolist()
        reasons.flag(out_of_range, [f"field 'seq' must be an integer in [0, 2**62), got {v!r}" for v in shown])
    if "time" in col.given:
        times, bad_time = _numbers(col["time"])
        reasons.flag(bad_time, "field 'time' must be a number")
    else:
        times = np.full(n, _time.time())

    vertex_op, edge_op, setter, adds, vertex_ops, setters, edge_adds = _op_kinds(op, IS_VERTEX_OP)
    ids = col["id"] if "id" in col.given else col["src"]
    a_vertex = _ids(ids, id_type, vertex_op, "id", reasons)
    a_edge = _ids(col["src"], id_type, edge_op, "src", reasons)
    b = _ids(col["dst"], id_type, edge_op, "dst", reasons)
    a = a_vertex if vertex_ops == n else a_edge if not vertex_ops else np.where(vertex_op, a_vertex, a_edge)
    if id_type == "int64":
        a = a.astype(np.int64, copy=False)
    attribute = _objects(col["attribute"]) if "attribute" in col.given else absent_column(n)
    if setters:
        names = col["attribute"][setter]
        if pd.api.types.is_string_dtype(names.dtype) and names.dtype != object:
            named = (names.notna() & (names != "")).to_numpy(bool)
        else:
            named = names.map(lambda v: isinstance(v, str) and v != "").to_numpy(bool)
        no_attr = np.zeros(n, bool)
        no_attr[np.flatnonzero(setter)[~named]] = True
        reasons.flag(no_attr, "field 'attribute' must name an attribute")
    if edge_adds and ("attribute" in col.given or "value" in col.given):
        given = adds & col["attribute"].notna().to_numpy()
        if given.any():
            named = col["attribute"].map(lambda v: isinstance(v, str) and v != "").to_numpy(bool)
            reasons.flag(given & ~named, "field 'attribute' must name an attribute")
        reasons.flag(adds & ~given & col["value"].notna().to_numpy(), "field 'value' needs field 'attribute'")
    value = _objects(col["value"]) if "value" in col.given else absent_column(n)
    if "value" in col.given and len(value) and pd.api.types.infer_dtype(value, skipna=True) not in _SCALAR_COLUMNS:
        odd = ~pd.Series(value, dtype=object).map(_is_scalar).to_numpy(bool)
        reasons.flag(odd, [f"field 'value': {type(v).__name__} values are not supported "
                           f"(numbers, strings, booleans or null)" for v in value[odd]])

    bad = reasons.bad
    good = np.flatnonzero(~bad) if bad.any() else slice(None)     # a slice: each column copied whole
    picked = times[good]
    if len(picked) > 1 and (picked[1:] < picked[:-1]).any():
        good = np.arange(n)[good][np.argsort(picked, kind="stable")]
    count = len(picked)
    batch = UpdateBatch(*(_take(column, good, count) for column in (op, a, b, attribute, value)),
                        None if codes is not None else producer[good], _take(seq, good, count),
                        _take(times, good, count), text_values,
                        None if codes is None else (_take(codes, good, count), producer_names))
    if not bad.any():
        return batch, empty_rejected()
    text = reasons.text[bad]
    if locate is not None:
        text = np.array([f"{where}: {reason}" for where, reason in zip(locate(np.flatnonzero(bad)), text)], object)
    producer = producer if codes is None else producer_names[codes]
    rejected = pd.DataFrame({"producer": producer[bad], "seq": seq[bad],
                             "op": col["op"][bad].to_numpy(dtype=object), "reason": text})
    return batch, rejected


@njit(cache=True, nogil=True)
def _op_kinds(op, is_vertex_op):
    """Per row, from its op code (-1: unknown, none of these): a vertex op, an edge op, a set op,
    an ``add_edge``; and how many rows are vertex ops, set ops and ``add_edge`` s: one pass over
    the codes, not a numpy pass per op compared (and one more per ``any``)."""
    n = len(op)
    vertex, edge, setter, adds = (np.zeros(n, np.bool_), np.zeros(n, np.bool_), np.zeros(n, np.bool_),
                                  np.zeros(n, np.bool_))
    vertex_ops = setters = edge_adds = 0
    for i in range(n):
        code = op[i]
        if code < 0:
            continue
        is_vertex = is_vertex_op[code]
        is_set = (code == SET_VERTEX) | (code == SET_EDGE)
        is_add = code == ADD_EDGE
        vertex[i], edge[i], setter[i], adds[i] = is_vertex, not is_vertex, is_set, is_add
        vertex_ops += is_vertex
        setters += is_set
        edge_adds += is_add
    return vertex, edge, setter, adds, vertex_ops, setters, edge_adds


# attribute values --------------------------------------------------------------------------------
DTYPES = {"double": np.float64, "int64": np.int64, "bool": np.bool_, "string": object}


def kind_of_type(arrow_type_name: str) -> str | None:
    """The value kind of a GoFS schema type name, or None if streams cannot set it."""
    return {"double": "double", "float": "double", "int64": "int64", "int32": "int64", "bool": "bool",
            "string": "string", "large_string": "string"}.get(arrow_type_name)


def infer_kind(value, text: bool) -> str | None:
    """The kind a new attribute gets from its first value (None: unsupported)."""
    if text and isinstance(value, str):
        if value in ("true", "false"):
            return "bool"
        try:
            int(value)
            return "int64"
        except ValueError:
            pass
        try:
            float(value)
            return "double"
        except ValueError:
            return "string"
    if isinstance(value, (bool, np.bool_)):
        return "bool"
    if isinstance(value, (int, np.integer)):
        return "int64"
    if isinstance(value, (float, np.floating)):
        return "double"
    if isinstance(value, str):
        return "string"
    return None


def coerce(values: np.ndarray, kind: str, text: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Values as ``kind``: (typed values, is-null (an unset), ok). A non-null value that is not
    of the kind (or, for text, does not parse as it) is not ok."""
    series = pd.Series(values, dtype=object)
    null = series.isna().to_numpy()
    if kind == "string":
        ok = null | series.map(lambda v: isinstance(v, str)).to_numpy(bool)
        return np.where(null, None, series.to_numpy()).astype(object), null, ok
    if kind == "bool":
        if text:
            lowered = series.map(lambda v: v.lower() if isinstance(v, str) else v)
            typed = lowered.map({"true": True, "false": False, True: True, False: False})
        else:
            typed = series.map(lambda v: bool(v) if isinstance(v, (bool, np.bool_)) else None)
        ok = null | typed.notna().to_numpy()
        return typed.fillna(False).to_numpy(bool), null, ok
    is_bool = series.map(lambda v: isinstance(v, (bool, np.bool_))).to_numpy(bool)
    is_text = series.map(lambda v: isinstance(v, str)).to_numpy(bool)
    numbers = pd.to_numeric(series, errors="coerce")
    ok = null | (numbers.notna().to_numpy() & ~is_bool & (text | ~is_text))
    if kind == "int64":
        ok &= null | (numbers.fillna(0) % 1 == 0).to_numpy()
        return numbers.fillna(0).to_numpy().astype(np.int64), null, ok
    return numbers.fillna(np.nan).to_numpy(np.float64), null, ok
