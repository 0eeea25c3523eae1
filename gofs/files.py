"""Reading and durably writing GoFS files.

Reads: Parquet reads that open only the files and columns asked for, and record it.

Every read of a GoFS data file goes through :func:`read_columns` (whole columns),
:func:`read_rows` (some rows of a column) or :func:`find_rows` (where values are),
which record (path, columns) inside a :func:`traced` block of the same thread. The last two stream a column a
batch at a time, so what they hold is their answer, not the file. Tests use the trace to prove that a
time-range, attribute-subset read touches only the matching files and columns.

Arrays: :func:`arrow_array` turns a task's numpy results into Arrow without importing pandas.

Writes: :func:`write_table` writes a data file (:func:`put_table` from a Spark task),
:func:`sync` flushes what a commit is about to publish; :func:`write_atomic`
is the project's one way to replace a local file atomically.
"""
from __future__ import annotations

import contextlib
import contextvars
import os
import uuid

import numpy as np
import pyarrow as pa          # pyarrow.compute (~60 ms) is imported where used: a fresh Python worker imports this module
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from gofs.errors import DataError

#: the list that :func:`traced` collects into, scoped to the thread (and context) that opened it:
#: two supersteps or tests tracing at once in one process never see each other's reads
_trace: contextvars.ContextVar[list | None] = contextvars.ContextVar("gofs_file_trace", default=None)


@contextlib.contextmanager
def traced():
    """Collect every (path, columns) read inside the block, in this thread, into the yielded list."""
    reads: list[tuple[str, tuple[str, ...]]] = []
    token = _trace.set(reads)
    try:
        yield reads
    finally:
        _trace.reset(token)


def read_columns(fs, path: str, columns: list[str] | None, read_dictionary: list[str] | None = None):
    """Read ``columns`` (all if None) of one Parquet file; those in ``read_dictionary`` that hold
    text come back dictionary-encoded (as stored: no string is decoded per row). One file is read
    by ``ParquetFile``, not ``pq.read_table``: that one goes through ``pyarrow.dataset``, whose
    import imports pandas (~0.3 s quiet, 1.5 s loaded, of a fresh Python worker's first run)."""
    reads = _trace.get()
    if reads is not None:
        reads.append((path, tuple(columns) if columns is not None else ("*",)))
    try:
        with fs.open_input_file(path) as handle:
            return pq.ParquetFile(handle, read_dictionary=read_dictionary).read(columns=columns)
    except FileNotFoundError:
        raise DataError(f"{path}: missing; the graph was replaced while this job ran (open it again) "
                        "or the file was deleted") from None
    except (pa.ArrowInvalid, OSError) as exc:
        raise DataError(f"{path}: unreadable Parquet file ({exc})") from None


#: rows decoded at a time by the streaming reads below: their memory does not grow with the file
STREAM_BATCH_ROWS = 65_536
_STREAM_BUFFER_BYTES = 1 << 20


def _open_streaming(fs, path: str, columns: tuple[str, ...]):
    """A ParquetFile that decodes a column chunk a buffer at a time (the trace records the read)."""
    reads = _trace.get()
    if reads is not None:
        reads.append((path, columns))
    try:
        handle = fs.open_input_file(path)
        return handle, pq.ParquetFile(handle, buffer_size=_STREAM_BUFFER_BYTES)
    except FileNotFoundError:
        raise DataError(f"{path}: missing; the graph was replaced while this job ran (open it again) "
                        "or the file was deleted") from None
    except (pa.ArrowInvalid, OSError) as exc:
        raise DataError(f"{path}: unreadable Parquet file ({exc})") from None


def read_rows(fs, path: str, column: str, rows: np.ndarray) -> pa.Array:
    """Values of ``column`` at ``rows`` (sorted, unique row numbers) of one Parquet file, in
    that order. Only the row groups holding those rows are decoded, a batch at a time, so the
    memory used is that of the answer, not of the column."""
    rows = np.asarray(rows, dtype=np.int64)
    handle, parquet = _open_streaming(fs, path, (column,))
    with handle:
        field = parquet.schema_arrow.field(column)
        meta = parquet.metadata
        starts = np.cumsum([0] + [meta.row_group(g).num_rows for g in range(meta.num_row_groups)])
        if len(rows) and (rows[0] < 0 or rows[-1] >= starts[-1]):
            raise DataError(f"{path}: row {rows[-1] if rows[-1] >= starts[-1] else rows[0]} asked for, "
                            f"the file has {starts[-1]} rows")
        groups = np.unique(np.searchsorted(starts, rows, side="right") - 1)
        pieces = []
        for group in groups:
            position = int(starts[group])
            for batch in parquet.iter_batches(batch_size=STREAM_BATCH_ROWS, row_groups=[int(group)],
                                              columns=[column]):
                lo, hi = np.searchsorted(rows, [position, position + batch.num_rows])
                if hi > lo:
                    pieces.append(batch.column(0).take(pa.array(rows[lo:hi] - position)))
                position += batch.num_rows
                if hi == len(rows) or rows[hi] >= starts[group + 1]:
                    break
        return pa.concat_arrays(pieces) if pieces else pa.array([], field.type)


def find_rows(fs, path: str, column: str, values: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Where ``values`` occur in ``column`` of one Parquet file: (row numbers, index of the value
    found there), streaming the column a batch at a time and stopping once every value is found
    (each value is taken to occur at most once, as vertex ids do)."""
    import pyarrow.compute as pc

    handle, parquet = _open_streaming(fs, path, (column,))
    rows, which = [], []
    left = len(values)
    with handle:
        position = 0
        for batch in parquet.iter_batches(batch_size=STREAM_BATCH_ROWS, columns=[column]):
            hits = pc.index_in(batch.column(0), value_set=values)
            found = np.flatnonzero(pc.is_valid(hits).to_numpy(zero_copy_only=False))
            if len(found):
                rows.append(found + position)
                which.append(hits.filter(pc.is_valid(hits)).to_numpy().astype(np.int64))
                left -= len(found)
            position += batch.num_rows
            if left <= 0:
                break
    if not rows:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    return np.concatenate(rows), np.concatenate(which)


# --------------------------------------------------------------------------- writes

PARQUET_OPTIONS = {"compression": "zstd"}


def arrow_array(values, type_: pa.DataType | None = None) -> pa.Array:
    """``values`` (a 1-d numpy array) as an Arrow array of ``type_`` (default: the dtype's own).

    ``pa.array`` asks pyarrow's pandas shim whether ``values`` is a pandas object, which
    imports pandas: ~0.3 s of a fresh Python worker's first run that never uses pandas. Numbers
    and booleans go through their buffers instead (numbers zero-copy; a safe cast where
    ``type_`` differs, as ``pa.array`` does); anything else through ``pa.array``."""
    values = np.asarray(values)
    kind = values.dtype.kind
    if values.ndim != 1 or kind not in "biuf" or not values.dtype.isnative:
        return pa.array(values, type=type_)
    if kind == "b":
        array = pa.Array.from_buffers(pa.bool_(), len(values),
                                      [None, pa.py_buffer(np.packbits(values, bitorder="little"))])
    else:
        values = np.ascontiguousarray(values)
        array = pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), len(values), [None, pa.py_buffer(values)])
    return array if type_ is None or array.type == type_ else array.cast(type_)


def numpy_values(column) -> np.ndarray:
    """``column`` (an Arrow array or chunked array) as a numpy array, as
    ``to_numpy(zero_copy_only=False)`` gives it.

    pyarrow's ``to_numpy`` goes through its pandas conversion, which imports pandas (~0.3 s
    quiet, 1.5 s loaded, of a fresh Python worker's first run that never uses pandas). Numbers
    and booleans without nulls are read from their buffers instead (numbers zero-copy, read-only,
    where there is one chunk); anything else through ``to_numpy``."""
    kind = column.type
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    if column.null_count or not (pa.types.is_integer(kind) or pa.types.is_floating(kind)
                                 or pa.types.is_boolean(kind)):
        return column.to_numpy(zero_copy_only=False)
    if pa.types.is_boolean(kind):
        parts = [np.unpackbits(np.frombuffer(c.buffers()[1], np.uint8), bitorder="little")
                 [c.offset:c.offset + len(c)].astype(bool) if len(c) else np.empty(0, bool) for c in chunks]
    else:
        code = "f" if pa.types.is_floating(kind) else "i" if pa.types.is_signed_integer(kind) else "u"
        dtype = np.dtype(f"{code}{kind.bit_width // 8}")
        parts = [np.frombuffer(c.buffers()[1], dtype, count=len(c), offset=c.offset * dtype.itemsize)
                 if len(c) else np.empty(0, dtype) for c in chunks]
    if not parts:
        return np.empty(0, bool if pa.types.is_boolean(kind) else dtype)
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def write_table(fs, path: str, table: pa.Table) -> None:
    """Write one Parquet data file: integers delta-encoded (ids are sorted or nearly so,
    which makes them almost free), everything else dictionary-encoded, zstd."""
    fs.create_dir(path.rpartition("/")[0], recursive=True)
    integers = [f.name for f in table.schema if pa.types.is_integer(f.type)]
    others = [f.name for f in table.schema if f.name not in integers]
    with fs.open_output_stream(path) as stream:
        pq.write_table(table, stream, use_dictionary=others,
                       column_encoding={name: "DELTA_BINARY_PACKED" for name in integers}, **PARQUET_OPTIONS)


def put_table(fs, path: str, table: pa.Table) -> None:
    """:func:`write_table` under a temporary name, then moved in place: a retried or
    speculative Spark task never leaves a torn file under the final name."""
    directory, _, base = path.rpartition("/")
    staging = f"{directory}/.{base}.{uuid.uuid4().hex[:12]}.tmp"
    write_table(fs, staging, table)
    fs.move(staging, path)


# --------------------------------------------------------------------------- durable writes

def sync(fs, paths) -> None:
    """Flush ``paths`` (files, or directories with everything under them) and the directories
    that name them to the device. Only a local disk is flushed: HDFS and object stores make a
    file durable when it is closed."""
    if not isinstance(fs, pafs.LocalFileSystem):
        return
    directories = set()
    for path in paths:
        if os.path.isdir(path):
            for folder, _, names in os.walk(path, topdown=False):
                for name in names:
                    _fsync(os.path.join(folder, name))
                directories.add(folder)
        elif os.path.exists(path):
            _fsync(path)
        else:
            continue                    # never written (an instance with no files): nothing names it
        directories.add(os.path.dirname(path.rstrip("/")))
    for folder in sorted(directories, key=len, reverse=True):
        _fsync(folder)


def _fsync(path: str) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def write_atomic(path, data: bytes | None = None, write=None) -> None:
    """Replace the local file ``path`` in one step: written under a temporary name beside it,
    flushed, renamed over ``path``, and the directory flushed (and made, if missing). Give the bytes as ``data``, or
    ``write(binary_file)`` to write them; a failure leaves ``path`` as it was and no temporary file."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    staging = os.path.join(directory, f".{os.path.basename(path)}.{uuid.uuid4().hex[:12]}.tmp")
    try:
        with open(staging, "wb") as out:
            if write is None:
                out.write(data)
            else:
                write(out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(staging, path)
    except BaseException:
        if os.path.exists(staging):
            os.remove(staging)
        raise
    _fsync(directory)
