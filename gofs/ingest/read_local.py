"""Readers that turn every supported input into a :class:`GraphInput`.

Edge lists, CSV, Parquet, pandas, Spark/GraphFrames and NetworkX all end up as
the same pair of Arrow tables, so ingest validates and partitions one thing.
Bad input raises :class:`InputError` naming the file, the place and the column:
places in text files are 1-based lines (as editors count, comments and blank
lines included); places in Parquet files and DataFrames are 0-based rows (as
pandas and Arrow index).

Fast paths are vectorised (pandas' C tokenizer, Arrow casts); exact error
locations are worked out by a slower rescan only once an error is known.
"""
from __future__ import annotations

import csv
import gzip
import io
import os
import re
import sys
import warnings
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from gofs.errors import InputError
from gofs.graph_input import GraphInput
import gofs.ingest.formats as formats
from sparkshim.compat import collect_arrow

__all__ = ["read_graph", "read_edge_list", "read_csv", "read_parquet", "from_pandas",
           "from_dataframes", "from_graphframe", "from_networkx"]

_PANDAS_KINDS = {"int": "i", "float": "iuf", "bool": "b"}
_COMMENT_LINE = re.compile(rb"^[ \t]*[#%][^\n]*\n?", re.MULTILINE)


@dataclass(frozen=True)
class _Where:
    """Turns a row index into a place the user can find: a file line, or a row."""

    source: str
    line_of_row: Callable[[int], int] | None = None

    def __call__(self, row: int) -> str:
        if self.line_of_row is None:
            return f"{self.source} row {row}"
        return f"{self.source} line {self.line_of_row(row)}"


# --------------------------------------------------------------------------- dispatch

def read_graph(path_or_obj, format: str | None = None, **kw) -> GraphInput:
    """Read a graph from a path or an in-memory object, choosing the reader.

    Parameters
    ----------
    path_or_obj : a path (edge list, CSV, Parquet file or directory), a
        ``networkx`` graph, a ``graphframes.GraphFrame``, a Spark DataFrame of
        edges, or a pandas DataFrame of edges.
    format : ``"edgelist"``, ``"csv"`` or ``"parquet"``; by default guessed from
        the suffix (``.txt .tsv .edges .el .gz`` edge list, ``.csv`` and
        ``.csv.gz`` CSV, ``.parquet`` or a directory Parquet).
    **kw : passed to the chosen reader.

    Example
    -------
    >>> g = read_graph("roadNet-CA.txt.gz", directed=False)   # doctest: +SKIP
    """
    obj = path_or_obj
    if _instance_of(obj, "networkx", "Graph"):
        return from_networkx(obj, **kw)
    if _instance_of(obj, "graphframes", "GraphFrame"):
        return from_graphframe(obj, **kw)
    if _instance_of(obj, "pyspark.sql", "DataFrame"):
        return from_dataframes(None, obj, **kw)
    if isinstance(obj, pd.DataFrame):
        return from_pandas(obj, **kw)
    if not isinstance(obj, (str, os.PathLike)):
        raise TypeError(f"read_graph cannot read a {type(obj).__name__}")
    path = _existing(obj)
    readers = {"edgelist": read_edge_list, "csv": read_csv, "parquet": read_parquet}
    format = format or formats.guess_format(str(path), path.is_dir())
    formats.check_format(format)
    return readers[format](path, **kw)


def _instance_of(obj, module: str, cls: str) -> bool:
    """isinstance without importing optional libraries: if never imported, obj cannot be one."""
    return module in sys.modules and isinstance(obj, getattr(sys.modules[module], cls))


# --------------------------------------------------------------------------- edge lists

def read_edge_list(path, directed: bool = False, weight: str | None = None,
                   attribute_names: list[str] | None = None, id_type: str = "auto",
                   schema: dict | None = None) -> GraphInput:
    """Read a SNAP-style edge list: ``src dst [attr ...]`` per line.

    Fields are separated by any whitespace; lines starting with ``#`` or ``%``
    are comments; blank lines are skipped; gzip files are read as is.

    Parameters
    ----------
    weight : name of a single third column (shorthand for ``attribute_names=[weight]``).
    attribute_names : names of all columns after ``src dst``.
    id_type : ``"int"`` (ids must be 64-bit integers), ``"str"``, or ``"auto"``
        (integers if every id parses as one, else strings).
    schema : ``{attribute: "int" | "float" | "str" | "bool"}``; attributes
        default to ``"float"``.

    Example
    -------
    >>> g = read_edge_list("web-Google.txt", directed=True)   # doctest: +SKIP
    >>> g = read_edge_list("roads.txt", weight="length")       # doctest: +SKIP
    """
    if weight is not None and attribute_names is not None:
        raise InputError("give weight or attribute_names, not both")
    if id_type not in ("auto", "int", "str"):
        raise InputError(f"id_type must be 'auto', 'int' or 'str', got {id_type!r}")
    path = _existing(path)
    source = str(path)
    names = ["src", "dst", *([weight] if weight is not None else attribute_names or [])]
    if len(set(names)) != len(names):
        raise InputError(f"column names must be distinct and not src/dst, got {names}")
    types = {"src": id_type, "dst": id_type, **_attribute_types(names[2:], schema, source)}
    data = _decoded_bytes(path)
    where = _Where(source, lambda row: _line_of_row(data, row))
    return _finish(parse_edge_list(data, names, types, source, where.line_of_row), None, directed=directed,
                   source=source, name=_graph_name(path), edge_where=where)


def parse_edge_list(data: bytes, names: list[str], types: dict[str, str], source: str,
                    line_of_row: Callable[[int], int] | None = None) -> pa.Table:
    """The edge-list lines of ``data`` (whole lines, already decompressed) as a table of
    ``names``: ids int64 (or text, as written, for ``"str"`` and text ``"auto"`` ids), each
    attribute of its type in ``types``; errors name ``source`` and the line ``line_of_row``
    gives. Shared with the Spark engine's read tasks, which parse their byte ranges with it
    (:mod:`gofs.ingest.spark_text`).
    """
    where = _Where(source, line_of_row)
    body = _without_comments(data)
    str_columns = [i for i, name in enumerate(names) if types[name] == "str"]
    try:
        frame = _parse_fields(body, dtype=dict.fromkeys(str_columns, object))
    except pd.errors.EmptyDataError:
        return pa.table({n: pa.array([], formats.TYPES.get(types[n], pa.int64())) for n in names})
    except pd.errors.ParserError:
        raise _field_count_error(data, source, names) from None
    except UnicodeDecodeError as exc:
        raise _encoding_error(data, source) or InputError(f"{source}: {exc}") from None
    if frame.shape[1] != len(names) or frame.isna().to_numpy().any():
        raise _field_count_error(data, source, names)
    frame.columns = names

    # Columns pandas inferred as something else are re-read as text, so that
    # errors quote the value as written.
    text_columns = [n for n in names if types[n] in _PANDAS_KINDS
                    and frame[n].dtype.kind not in _PANDAS_KINDS[types[n]]]
    auto_text_ids = types["src"] == "auto" and not all(frame[n].dtype == np.int64 for n in ("src", "dst"))
    if auto_text_ids:
        text_columns += ["src", "dst"]
    if text_columns:
        text = _parse_fields(body, usecols=[names.index(n) for n in text_columns], dtype=object)
        text.columns = [n for n in names if n in text_columns]
        for name in text_columns:
            frame[name] = text[name]

    columns = {n: _chunked(pa.array(frame[n])) for n in names}
    if auto_text_ids:
        columns.update(_ints_if_possible({n: columns[n] for n in ("src", "dst")}))
    typed = {n: t for n, t in types.items() if t != "auto"}
    columns.update(_cast_columns({n: columns[n] for n in typed}, typed, where))
    return pa.table(columns)


def _attribute_types(names: list[str], schema: dict | None, source: str) -> dict[str, str]:
    """Edge-list attributes are numbers unless the schema says otherwise."""
    schema = dict(schema or {})
    unknown = sorted(set(schema) - set(names))
    if unknown:
        raise InputError(f"{source}: schema names column {unknown[0]!r}, but the attribute columns are "
                         f"{names} (name them with weight= or attribute_names=)")
    types = {name: schema.get(name, "float") for name in names}
    formats.check_type_names(types)
    return types


def _parse_fields(body: bytes, **kw) -> pd.DataFrame:
    """Split whitespace-separated fields with pandas' C tokenizer; only empty fields are null.

    Mixed-type columns are re-read as text by the caller, so pandas' warning about them is noise.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pd.errors.DtypeWarning)
        return pd.read_csv(io.BytesIO(body), sep=r"\s+", header=None, engine="c",
                           keep_default_na=False, na_values=[""], **kw)


def _chunked(values: pa.Array | pa.ChunkedArray) -> pa.ChunkedArray:
    return values if isinstance(values, pa.ChunkedArray) else pa.chunked_array([values])


def _decoded_bytes(path: Path) -> bytes:
    data = path.read_bytes()
    if not data.startswith(formats.GZIP_MAGIC):
        return data
    try:
        return gzip.decompress(data)
    except (OSError, EOFError, zlib.error):
        raise formats.not_gzip(str(path)) from None


def _without_comments(data: bytes) -> bytes:
    """Drop comment lines; a file whose comments are all at the top costs no regex scan."""
    start = 0
    while start < len(data):
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end + 1
        line = data[start:end].strip()
        if line and not line.startswith((b"#", b"%")):
            break
        start = end
    body = data[start:]
    if b"#" in body or b"%" in body:
        body = _COMMENT_LINE.sub(b"", body)
    return body


def _data_lines(data: bytes) -> Iterator[tuple[int, bytes]]:
    """(1-based line number, stripped line) of each line that is neither blank nor a comment."""
    for number, line in enumerate(data.split(b"\n"), start=1):
        line = line.strip()
        if line and line[:1] not in b"#%":
            yield number, line


def _line_of_row(data: bytes, row: int) -> int:
    return next(islice(_data_lines(data), row, None))[0]


def _field_count_error(data: bytes, source: str, names: list[str]) -> InputError:
    for number, line in _data_lines(data):
        found = len(line.split())
        if found != len(names):
            return formats.wrong_field_count(f"{source} line {number}", names, found, " ")
    return InputError(f"{source}: lines do not split into {len(names)} fields ({' '.join(names)})")


def _encoding_error(data: bytes, source: str) -> InputError | None:
    """The line holding the first byte that is not UTF-8, if there is one."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        return formats.not_utf8(f"{source} line {line}")
    return None


# --------------------------------------------------------------------------- CSV

def read_csv(path, directed: bool = False, src: str = "src", dst: str = "dst",
             vertices_path=None, id_column: str = "id", schema: dict | None = None) -> GraphInput:
    """Read edges (and optionally vertices) from CSV files with a header row.

    Columns are typed from their whole content (int, else float, else bool,
    else str; only empty fields are null); ids are integers if every id in both
    files is one, else strings. ``.csv.gz`` files are read as is.

    Parameters
    ----------
    src, dst : edge columns holding the endpoints (renamed ``src``/``dst``).
    vertices_path : optional vertex CSV whose ``id_column`` holds the vertex id.
    schema : ``{column: "int" | "float" | "str" | "bool"}`` for columns of either
        file; a value that does not convert is reported with its line.

    Example
    -------
    >>> g = read_csv("edges.csv", src="from", dst="to", vertices_path="people.csv")  # doctest: +SKIP
    """
    schema = dict(schema or {})
    formats.check_type_names(schema)
    files = [(_existing(path), (src, dst))]
    if vertices_path is not None:
        files.append((_existing(vertices_path), (id_column,)))
    headers = [_csv_header(file) for file, _ in files]
    unknown = [c for c in schema if not any(c in header for header in headers)]
    if unknown:
        present = "; ".join(f"{file}: {', '.join(header)}" for (file, _), header in zip(files, headers))
        raise InputError(f"schema names column {unknown[0]!r}, which no file has ({present})")

    tables, wheres, text_ids = [], [], {}
    for (file, id_columns), header in zip(files, headers):
        missing = [c for c in id_columns if c not in header]
        if missing:
            raise InputError(f"{file}: no column {missing[0]!r} (columns: {', '.join(header)})")
        table, where = _read_csv_file(file, header, {c: t for c, t in schema.items() if c in header},
                                      keep_text=id_columns)
        tables.append(table)
        wheres.append(where)
        text_ids.update({(len(tables) - 1, c): table[c] for c in id_columns if c not in schema})
    for (index, column), values in _ints_if_possible(text_ids).items():
        tables[index] = tables[index].set_column(tables[index].column_names.index(column), column, values)
    return _finish(tables[0], tables[1] if len(tables) > 1 else None, src=src, dst=dst, id_column=id_column,
                   directed=directed, source=str(files[0][0]), name=_graph_name(files[0][0]),
                   edge_where=wheres[0], vertex_where=wheres[-1])


def _read_csv_file(path: Path, header: list[str], schema: dict[str, str],
                   keep_text: tuple[str, ...]) -> tuple[pa.Table, _Where]:
    """Read every column as text, then type whole columns, so inference never sees only a prefix.

    ``keep_text`` columns (the ids) stay text: whether they are integers is
    decided over both files together.
    """
    where = _Where(str(path), lambda row: _csv_line_of_row(path, row))
    options = pacsv.ConvertOptions(column_types=dict.fromkeys(header, pa.string()), null_values=[""],
                                   strings_can_be_null=True, quoted_strings_can_be_null=False)
    try:
        table = pacsv.read_csv(str(path), convert_options=options)
    except (pa.ArrowInvalid, OSError) as exc:
        raise (_encoding_error(_decoded_bytes(path), str(path)) or _csv_field_count_error(path, header)
               or InputError(f"{path}: {exc}")) from None
    typed = _cast_columns({c: table[c] for c in schema}, schema, where)
    columns = {c: typed[c] if c in typed else table[c] if c in keep_text else _inferred(table[c])
               for c in header}
    return pa.table(columns), where


def _inferred(values: pa.ChunkedArray) -> pa.ChunkedArray:
    """The narrowest of int, float, bool that holds every value; else the text."""
    for target in (pa.int64(), pa.float64(), pa.bool_()):
        try:
            return values.cast(target)
        except pa.ArrowInvalid:
            pass
    return values


def _open_text(path: Path):
    with path.open("rb") as probe:
        compressed = probe.read(2) == formats.GZIP_MAGIC
    opener = gzip.open if compressed else open
    return opener(path, "rt", encoding="utf-8-sig", newline="")


def _csv_header(path: Path) -> list[str]:
    try:
        with _open_text(path) as f:
            header = next(csv.reader(f), None)
    except (OSError, EOFError, zlib.error):
        raise formats.not_gzip(str(path)) from None
    except UnicodeDecodeError as exc:
        raise _encoding_error(_decoded_bytes(path), str(path)) or InputError(f"{path}: {exc}") from None
    if not header:
        raise InputError(f"{path} line 1: no header row")
    return header


def _csv_records(path: Path) -> Iterator[tuple[int, list[str]]]:
    """(first line number, fields) of each data record; empty lines are skipped, as pyarrow does."""
    with _open_text(path) as f:
        reader = csv.reader(f)
        next(reader)
        line = reader.line_num
        for record in reader:
            if record:
                yield line + 1, record
            line = reader.line_num


def _csv_line_of_row(path: Path, row: int) -> int:
    return next(islice(_csv_records(path), row, None))[0]


def _csv_field_count_error(path: Path, header: list[str]) -> InputError | None:
    for line, record in _csv_records(path):
        if len(record) != len(header):
            return formats.wrong_field_count(f"{path} line {line}", header, len(record), ", ")
    return None


# --------------------------------------------------------------------------- Parquet

def read_parquet(path, directed: bool = False, src: str = "src", dst: str = "dst",
                 vertices_path=None, id_column: str = "id", schema: dict | None = None) -> GraphInput:
    """Read edges (and optionally vertices) from a Parquet file or directory, keeping its types.

    ``schema`` casts columns (``{column: "int" | "float" | "str" | "bool"}``);
    a value that does not cast is reported with its 0-based row.
    """
    schema = dict(schema or {})
    formats.check_type_names(schema)
    paths = [_existing(path)] + ([_existing(vertices_path)] if vertices_path is not None else [])
    tables = [_parquet_table(p) for p in paths]
    unknown = [c for c in schema if not any(c in t.column_names for t in tables)]
    if unknown:
        present = "; ".join(f"{p}: {', '.join(t.column_names)}" for p, t in zip(paths, tables))
        raise InputError(f"schema names column {unknown[0]!r}, which no file has ({present})")
    wheres = [_Where(str(p)) for p in paths]
    for i, (table, where) in enumerate(zip(tables, wheres)):
        own = {c: t for c, t in schema.items() if c in table.column_names}
        for column, values in _cast_columns({c: table[c] for c in own}, own, where).items():
            tables[i] = tables[i].set_column(table.column_names.index(column), column, values)
    return _finish(tables[0], tables[1] if len(tables) > 1 else None, src=src, dst=dst, id_column=id_column,
                   directed=directed, source=str(paths[0]), name=_graph_name(paths[0]),
                   edge_where=wheres[0], vertex_where=wheres[-1])


def _parquet_table(path: Path) -> pa.Table:
    try:
        return pq.read_table(path)
    except (pa.ArrowInvalid, OSError):
        raise formats.not_parquet(str(path)) from None


# --------------------------------------------------------------------------- in-memory sources

def from_pandas(edges: pd.DataFrame, vertices: pd.DataFrame | None = None, directed: bool = False,
                src: str = "src", dst: str = "dst", id_column: str = "id") -> GraphInput:
    """Convert pandas DataFrames of edges (and optionally vertices); the index is ignored."""
    tables = [_pandas_table(edges, "edges DataFrame")]
    if vertices is not None:
        tables.append(_pandas_table(vertices, "vertices DataFrame"))
    return _finish(tables[0], tables[1] if len(tables) > 1 else None, src=src, dst=dst, id_column=id_column,
                   directed=directed, source="edges DataFrame", name=None,
                   edge_where=_Where("edges DataFrame"), vertex_where=_Where("vertices DataFrame"))


def _pandas_table(frame: pd.DataFrame, source: str) -> pa.Table:
    try:
        return pa.Table.from_pandas(frame, preserve_index=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise InputError(f"{source}: {exc}") from None


def from_dataframes(vertices_df, edges_df, directed: bool = True) -> GraphInput:
    """Collect Spark DataFrames (vertices with ``id`` or None; edges with ``src``, ``dst``)."""
    vertices = None if vertices_df is None else _spark_table(vertices_df)
    return _finish(_spark_table(edges_df), vertices, directed=directed, source="edges DataFrame", name=None,
                   edge_where=_Where("edges DataFrame"), vertex_where=_Where("vertices DataFrame"))


def from_graphframe(gf, directed: bool = True) -> GraphInput:
    """Collect a ``graphframes.GraphFrame`` (GraphFrames treats every graph as directed)."""
    return from_dataframes(gf.vertices, gf.edges, directed=directed)


def _spark_table(df) -> pa.Table:
    """Collect through Spark's Arrow path: toPandas would turn nullable ints into floats."""
    return collect_arrow(df)


def from_networkx(G) -> GraphInput:
    """Convert a NetworkX (Multi)(Di)Graph, keeping node and edge attributes and parallel edges.

    Node ids become int64 if every node is an integer, else their ``str()``;
    attributes missing on some nodes or edges become nulls.
    """
    nodes = list(G.nodes)
    as_int = all(isinstance(n, (int, np.integer)) and not isinstance(n, bool) and -2**63 <= n < 2**63
                 for n in nodes)
    key = int if as_int else str
    id_type = pa.int64() if as_int else pa.string()
    edge_list = list(G.edges(data=True))
    vertices = {"id": pa.array([key(n) for n in nodes], id_type),
                **_attribute_arrays([d for _, d in G.nodes(data=True)], "node", "id")}
    edges = {"src": pa.array([key(u) for u, _, _ in edge_list], id_type),
             "dst": pa.array([key(v) for _, v, _ in edge_list], id_type),
             **_attribute_arrays([d for _, _, d in edge_list], "edge", "src", "dst")}
    return GraphInput(edges=pa.table(edges), vertices=pa.table(vertices), directed=G.is_directed(),
                      source="networkx graph", name=G.graph.get("name") or None)


def _attribute_arrays(records: list[dict], kind: str, *reserved: str) -> dict[str, pa.Array]:
    names = list(dict.fromkeys(k for record in records for k in record))
    arrays = {}
    for name in names:
        if str(name) in reserved:
            raise InputError(f"networkx graph: {kind} attribute {name!r} clashes with the {name!r} column")
        try:
            arrays[str(name)] = pa.array([record.get(name) for record in records])
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise InputError(f"networkx graph: {kind} attribute {name!r} cannot be one column: {exc}") from None
    return arrays


# --------------------------------------------------------------------------- shared

def _graph_name(path: Path) -> str:
    return formats.graph_name(str(path), path.is_dir())


def _existing(path) -> Path:
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: no such file or directory")
    return path


def _cast_columns(columns: dict[str, pa.ChunkedArray], types: dict[str, str],
                  where: _Where) -> dict[str, pa.ChunkedArray]:
    """Cast each column to its named type; on failure report the earliest value that did not convert."""
    cast, failures = {}, []
    for position, (name, values) in enumerate(columns.items()):
        target = formats.TYPES[types[name]]
        try:
            cast[name] = values.cast(target)
        except pa.ArrowNotImplementedError:
            raise InputError(f"{where.source}, column {name!r}: cannot convert {values.type} "
                             f"to {types[name]}") from None
        except pa.ArrowInvalid:
            failures.append((_first_failure(values, target), position, name))
    if failures:
        row, _, name = min(failures)
        raise formats.not_a(where(row), name, columns[name][row].as_py(), types[name])
    return cast


def _first_failure(values: pa.ChunkedArray, target: pa.DataType) -> int:
    """Index of the first value that does not cast, by bisection so every probe stays vectorised."""
    good, bad = 0, len(values)
    while bad - good > 1:
        middle = (good + bad) // 2
        try:
            values.slice(0, middle).cast(target)
            good = middle
        except pa.ArrowInvalid:
            bad = middle
    return bad - 1


def _ints_if_possible(ids: dict) -> dict:
    """All text ids as int64 if every one parses, else unchanged: ids must agree across columns."""
    try:
        return {key: values.cast(pa.int64()) for key, values in ids.items()}
    except pa.ArrowInvalid:
        return ids


def _finish(edges: pa.Table, vertices: pa.Table | None, *, directed: bool, source: str, name: str | None,
            edge_where: _Where, vertex_where: _Where | None = None, src: str = "src", dst: str = "dst",
            id_column: str = "id") -> GraphInput:
    """Check and type the id columns, rename them, and build the GraphInput."""
    if src == dst:
        raise InputError(f"src and dst must be different columns, both are {src!r}")
    parts = [(edges, {src: "src", dst: "dst"}, edge_where)]
    if vertices is not None:
        parts.append((vertices, {id_column: "id"}, vertex_where))
    for table, renames, where in parts:
        _require_ids(table, tuple(renames), where)
    ids = _unified_ids(parts)
    tables = []
    for table, renames, where in parts:
        for column, new_name in renames.items():
            table = table.set_column(table.column_names.index(column), new_name, ids.pop(0))
        clash = [c for c in table.column_names if table.column_names.count(c) > 1]
        if clash:
            raise InputError(f"{where.source}: two columns would be named {clash[0]!r}")
        tables.append(_plain_strings(table))
    vertex_place = None if vertex_where is None else (lambda row: f"{vertex_where(row)}, column {id_column!r}")
    return GraphInput(edges=tables[0], vertices=tables[1] if len(tables) > 1 else None,
                      directed=directed, source=source, name=name, vertex_where=vertex_place)


def _require_ids(table: pa.Table, columns: tuple[str, ...], where: _Where) -> None:
    """Every id column must exist and be non-null: a null would become a phantom vertex."""
    for column in columns:
        if column not in table.column_names:
            raise InputError(f"{where.source}: no column {column!r} (columns: {', '.join(table.column_names)})")
    nulls = [(int(np.argmax(table[c].is_null().to_numpy(zero_copy_only=False))), i, c)
             for i, c in enumerate(columns) if table[c].null_count]
    if nulls:
        row, _, column = min(nulls)
        raise formats.missing_id(f"{where(row)}, column {column!r}")


def _unified_ids(parts) -> list[pa.ChunkedArray]:
    """Id columns as all int64 or all string, since edges and vertices must join on them."""
    ids = []
    for table, renames, where in parts:
        for column in renames:
            values = table[column]
            if pa.types.is_dictionary(values.type):
                values = values.cast(values.type.value_type)
            if not (pa.types.is_integer(values.type) or pa.types.is_string(values.type)
                    or pa.types.is_large_string(values.type)):
                raise InputError(f"{where.source}, column {column!r}: vertex ids must be integers or "
                                 f"strings, not {values.type}")
            ids.append((values, column, where))
    target = pa.int64() if all(pa.types.is_integer(v.type) for v, _, _ in ids) else pa.string()
    try:
        return [values.cast(target) for values, _, _ in ids]
    except pa.ArrowInvalid:
        raise InputError(f"{parts[0][2].source}: vertex ids do not fit in int64") from None


def _plain_strings(table: pa.Table) -> pa.Table:
    """pandas and Spark may hand over large_string; every source gives plain string."""
    return table.cast(pa.schema([f.with_type(pa.string()) if pa.types.is_large_string(f.type) else f
                                 for f in table.schema]))
