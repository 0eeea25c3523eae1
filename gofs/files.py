"""Parquet reads that open only the files and columns asked for, and record it.

Every read of a GoFS data file goes through :func:`read_columns`, which keeps a
trace of (path, columns) per process. Tests use the trace to prove that a
time-range, attribute-subset read touches only the matching files and columns.
"""
from __future__ import annotations

import contextlib

import pyarrow as pa
import pyarrow.parquet as pq

from gofs.errors import DataError

_trace: list[tuple[str, tuple[str, ...]]] | None = None


@contextlib.contextmanager
def traced():
    """Collect every (path, columns) read inside the block into the yielded list."""
    global _trace
    previous, _trace = _trace, []
    try:
        yield _trace
    finally:
        _trace = previous


def read_columns(fs, path: str, columns: list[str] | None):
    """Read ``columns`` (all if None) of one Parquet file."""
    if _trace is not None:
        _trace.append((path, tuple(columns) if columns is not None else ("*",)))
    try:
        with fs.open_input_file(path) as handle:
            return pq.read_table(handle, columns=columns)
    except FileNotFoundError:
        raise DataError(f"{path}: missing; the graph was replaced while this job ran (open it again) "
                        "or the file was deleted") from None
    except (pa.ArrowInvalid, OSError) as exc:
        raise DataError(f"{path}: unreadable Parquet file ({exc})") from None
