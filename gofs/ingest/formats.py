"""Rules both ingest engines share: which format a path holds, what the graph is called,
which types a schema may name, and the words of each input error.

Both readers (:mod:`gofs.ingest.read_local`, :mod:`gofs.ingest.spark`) take these
from here, so the same input gets the same answer or the same error on either engine.
"""
from __future__ import annotations

import os
import sys

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.fs as pafs

from gofs import layout
from gofs.errors import InputError

FORMATS = ("csv", "edgelist", "parquet")

TYPES = {"int": pa.int64(), "float": pa.float64(), "str": pa.string(), "bool": pa.bool_()}
"""Type names accepted in ``schema`` arguments and the Arrow types they mean."""

WHAT = {"int": "an integer", "float": "a number", "str": "a string", "bool": "a boolean (true/false/1/0)"}
"""How an error names the type a value failed to convert to."""

GZIP_MAGIC = b"\x1f\x8b"
EDGE_LIST_SUFFIXES = (".txt", ".tsv", ".edges", ".el")
PARQUET_SUFFIXES = (".parquet", ".pq")


def paths_of(source) -> list[str]:
    """A path or a list of paths as a list of strings."""
    return [os.fspath(p) for p in source] if isinstance(source, (list, tuple)) else [os.fspath(source)]


def is_directory(path: str) -> bool | None:
    """Whether ``path`` is a directory; None if pyarrow cannot reach its filesystem (only Spark does)."""
    try:
        fs, root = layout.filesystem(path)
        return fs.get_file_info(root).type == pafs.FileType.Directory
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError):
        return None


def guess_format(path: str, directory: bool | None) -> str:
    """The format a path holds, from its suffix: ``.txt .tsv .edges .el`` (and any other ``.gz``)
    an edge list, ``.csv`` / ``.csv.gz`` CSV, ``.parquet .pq`` or a directory Parquet.
    ``directory`` None (not known): a path without a suffix is taken for a directory."""
    base = path.rstrip("/").rpartition("/")[2].lower()
    if directory or path.endswith("/"):
        return "parquet"
    if base.endswith(".gz"):
        return "csv" if base.endswith(".csv.gz") else "edgelist"
    suffix = os.path.splitext(base)[1]
    if suffix in EDGE_LIST_SUFFIXES:
        return "edgelist"
    if suffix == ".csv":
        return "csv"
    if suffix in PARQUET_SUFFIXES or (directory is None and not suffix):
        return "parquet"
    raise InputError(f"{path}: cannot tell the format from the suffix {suffix!r}; "
                     "pass format='edgelist', 'csv' or 'parquet'")


def check_format(format: str) -> None:
    if format not in FORMATS:
        raise InputError(f"format must be one of {list(FORMATS)}, got {format!r}")


def graph_name(path: str, directory: bool | None) -> str:
    """The graph's default name: the file name without ``.gz`` and its suffix, or the directory's name."""
    base = path.rstrip("/").rpartition("/")[2]
    if directory:
        return base
    base = base[:-3] if base.endswith(".gz") else base
    return os.path.splitext(base)[0] or base


def check_type_names(types: dict[str, str]) -> None:
    for column, name in types.items():
        if name not in TYPES:
            raise InputError(f"schema type for {column!r} must be one of {sorted(TYPES)}, got {name!r}")


def is_spark_frame(obj) -> bool:
    """isinstance of a Spark DataFrame, without importing pyspark where it was never imported."""
    return "pyspark.sql" in sys.modules and isinstance(obj, sys.modules["pyspark.sql"].DataFrame)


# --------------------------------------------------------------------------- error texts

def wrong_field_count(where: str, names: list[str], found: int, separator: str) -> InputError:
    hint = "; name the extra columns with weight= or attribute_names=" \
        if separator == " " and found > len(names) else ""
    return InputError(f"{where}: expected {len(names)} fields ({separator.join(names)}), found {found}{hint}")


def not_utf8(where: str) -> InputError:
    return InputError(f"{where}: not valid UTF-8 text")


def not_gzip(source: str) -> InputError:
    return InputError(f"{source}: not a readable gzip file (corrupt or truncated)")


def not_parquet(source: str) -> InputError:
    return InputError(f"{source}: not a readable Parquet file (corrupt, truncated, or another format)")


def not_a(where: str, column: str, value, kind: str) -> InputError:
    return InputError(f"{where}, column {column!r}: {value!r} is not {WHAT[kind]}")


def missing_id(place: str) -> InputError:
    """``place``: where the id is, column included (``"v.csv line 3, column 'id'"``)."""
    return InputError(f"{place}: missing vertex id")


def duplicate_id(place: str, value) -> InputError:
    return InputError(f"{place}: duplicate vertex id {value!r}")


def unique_vertex_ids(ids, place) -> np.ndarray:
    """``ids`` (an Arrow column of vertex ids) as numpy; InputError naming the first row
    (``place(row)``, column included) whose id is missing or repeats an earlier one."""
    if ids.null_count:
        raise missing_id(place(int(np.flatnonzero(ids.is_null().to_numpy(zero_copy_only=False))[0])))
    values = ids.to_numpy(zero_copy_only=False)
    duplicated = pd.Index(values).duplicated()
    if duplicated.any():
        row = int(np.flatnonzero(duplicated)[0])
        raise duplicate_id(place(row), ids[row].as_py())
    return values
