"""Ingest on Spark, for graphs that do not fit in the driver.

The same stages as :mod:`gofs.ingest.local`, each a Spark job, writing the same
on-disk format through the same commit (:func:`gofs.ingest.commit.write_version`):

- **read**: Spark reads the edges (SNAP text, CSV, Parquet, gz; any filesystem
  Spark reaches) and one aggregation validates every row; edge lists that pyarrow
  reaches are parsed by byte range in tasks with the local engine's parser instead
  (:mod:`gofs.ingest.spark_text`, one job), Spark's text source taking over for
  any input that reader declines. Bad input raises
  :class:`InputError` naming the file and the line within it (found by
  re-reading only that file). Edge ids (``eid``) are positions in Spark's read
  order (for one file, its line order), numbered with per-range or per-partition
  offsets. The read's last job asks for the edges' dense numbers (:class:`_Asked`):
  each byte-range task does it on the rows it parsed, else one job over Spark's rows.
- **ids**: dense vertex indices in order of first appearance (``src`` before
  ``dst``, edge by edge), exactly as the local engine numbers them, in three
  Python jobs whose rows move as Arrow files (:func:`gofs.spark_jobs.put_exchange`):
  each id's first position is found by id bucket, each slice of the positions is
  sorted and numbered by one task (its size gives the offsets) and answers the asks,
  and the edges are written on their numbers and sent, with the vertices, to their
  vertex ranges for the sub-graphs (:func:`_dense_ids`).
- **partition**: ``multilevel`` (:mod:`gofs.partition.multilevel`), ``hash``, ``spark-lp``
  on Spark, or ``metis`` (collects the edges to the driver).
- **subgraphs**: four Python jobs whose rows move as Arrow exchange files: the labels,
  vertices and edges (the last two sent there by the ids stage) meet by vertex range,
  which gives each vertex and each edge end its partition; task p is sent its vertices, the edges it is the source of and the cut edges it
  is the destination of, runs the same scipy kernel as the local engine
  (:func:`gofs.subgraphs.discover`), keeps its pieces and sends each cut edge's other
  partition the local numbers of its end (:func:`_subgraphs`); the driver turns the
  per-partition counts into vertex and sub-graph offsets.
- **write**: one job: task p reads its pieces and its cut edges' far numbers, writes its
  vertex and edge files (pyarrow, staged under a temporary name) and its rows of the
  sub-graph and meta-graph tables, and returns its statistics; then one task
  writes the two tables from those rows; the driver assembles the manifest
  from the statistics and commits.

Each stage hands its result on as a scratch file (:class:`gofs.spark_jobs.ScratchFrames`),
so a later stage's queries start from files, not from the plans of every join before them.

Given the same input file, partitioner and seed, both engines write the same
template, row for row. The driver only ever holds O(partitions) rows: the multilevel partitioner's
METIS step runs in one executor task on a coarse graph bounded by its budget.
"""
from __future__ import annotations

import contextlib
import csv
import functools
import re
import urllib.parse

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from gofs import files, housekeeping, layout, manifest as manifest_io
from gofs.errors import InputError
import gofs.ingest.formats as formats
from gofs.ingest.commit import write_version
from gofs.ingest.formats import TYPES
from gofs.ingest.spark_text import read_ranges
from gofs.spark_jobs import JobProfile, ScratchFrames, id_buckets, put_exchange, take_exchange
from gofs.partition import check_partitioner, partition_frames
from sparkshim.compat import arrow_schema, forgets_zip_importers, release_local_checkpoint, spark_schema
from gofs.subgraphs import discover, histogram_from_bins

_INT_PATTERN = r"^[+-]?[0-9]+$"


# --------------------------------------------------------------------------- the engine

def ingest_on_spark(spark, source, path: str, num_partitions: int = 4, partitioner: str | None = None,
           overwrite: bool = False, name: str | None = None, seed: int = 0, format: str | None = None,
           directed: bool = False, weight: str | None = None, attribute_names: list[str] | None = None,
           id_type: str = "auto", schema: dict | None = None, src: str = "src", dst: str = "dst",
           vertices_path=None, id_column: str = "id", vertices=None, timings: dict | None = None,
           jobs: dict | None = None,
           **partitioner_options) -> dict:
    """Ingest ``source`` into a GoFS graph at ``path`` with Spark doing the work.

    Parameters
    ----------
    spark : the SparkSession.
    source : a path or list of paths (edge list, CSV with a header, Parquet; ``.gz`` text
        accepted; any URI Spark reads) or a Spark DataFrame of edges (``src``, ``dst``, attributes).
    partitioner : ``"multilevel"`` (default), ``"hash"``, ``"spark-lp"`` or ``"metis"``
        (METIS on the driver: collects every edge there).
    format, directed, weight, attribute_names, id_type, schema, src, dst : as for
        :func:`gofs.ingest.read_local.read_graph`.
    vertices_path, id_column : a vertex file (or directory) of the same format (CSV or Parquet)
        whose ``id_column`` holds the vertex id and whose other columns become vertex
        attributes, as for :func:`gofs.ingest.read_local.read_csv` / :func:`gofs.ingest.read_local.read_parquet`.
    vertices : with an edges DataFrame, a DataFrame of vertices (``id_column`` and attributes),
        as a GraphFrame's: its vertices that no edge names are kept.
    timings : receives seconds per stage (read, ids, partition, subgraphs, write).
    jobs : receives the Spark work per stage: ``{stage: {"jobs", "stages", "skipped", "tasks"}}``
        (:class:`gofs.spark_jobs.JobProfile`).
    partitioner_options : passed to :func:`gofs.partition.multilevel.multilevel_labels`
        (``driver_budget_bytes``, ``driver_budget_edges``, ``refine_min_moves``, ``report`` ...).

    Returns
    -------
    The committed manifest, as :func:`gofs.ingest.ingest` returns it.

    Example
    -------
    >>> ingest_on_spark(spark, "hdfs:///data/roadNet-CA.txt.gz", "hdfs:///graphs/ca.gofs", 16)   # doctest: +SKIP
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    partitioner = partitioner or "multilevel"
    check_partitioner(partitioner, partitioner_options)
    if num_partitions < 1:
        raise InputError(f"num_partitions must be >= 1, got {num_partitions}")
    fs, root = layout.filesystem(path)
    housekeeping.check_target(fs, root, path, overwrite)
    timings = {} if timings is None else timings
    profile = JobProfile(spark, timings)
    run = _Run(spark, StorageLevel.DISK_ONLY, profile)
    try:
        with profile.stage("read"):
            edges = _read(run, source, format=format, directed=directed, weight=weight,
                          attribute_names=attribute_names, id_type=id_type, schema=schema, src=src, dst=dst,
                          vertices_path=vertices_path, id_column=id_column, vertices=vertices)
            if edges.asked is None:
                with run.step("ask"):
                    edges.asked = _ask_frame(run, edges.frame, edges.counts)

        with profile.stage("ids"):
            vertices, dense_edges, n, ranged = _dense_ids(run, edges, edges.vertices)

        with profile.stage("partition"):
            parts = run.checkpointed(partition_frames(spark, partitioner, dense_edges,
                                                      vertices.select(F.col("v").alias("vid")), n, num_partitions,
                                                      seed, **partitioner_options))

        with profile.stage("subgraphs"):
            found = _subgraphs(run, dense_edges, vertices, parts, n, num_partitions, ranged)

        vertex_attributes = edges.vertices.attributes if edges.vertices is not None else pa.schema([])

        def write_files(data: str) -> dict:
            stats = _write_template(run, path, fs, data, found, edges, num_partitions)
            sizes = np.array([p["num_vertices"] for p in stats["partitions"]])
            return {
                "name": name or edges.name or root.rstrip("/").rpartition("/")[2],
                "directed": bool(directed),
                "id_type": "int64" if edges.id_type == pa.int64() else "string",
                "num_vertices": int(n),
                "num_edges": int(edges.count),
                "partitioner": partitioner,
                "num_partitions": int(num_partitions),
                "seed": int(seed),
                "vertex_schema": manifest_io.schema_fields(vertex_attributes),
                "edge_schema": manifest_io.schema_fields(edges.attributes),
                "cut_edges": stats["cut_edges"],
                "balance": float(sizes.max() / sizes.mean()) if n else 1.0,
                "subgraphs": stats["subgraphs"],
                "partitions": stats["partitions"],
            }

        with profile.stage("write"):
            manifest = write_version(fs, root, path, overwrite, write_files)
        if jobs is not None:
            jobs.update(profile.summary())
            for stage, steps in profile.steps().items():
                jobs[stage]["steps"] = steps
    finally:
        run.release()
    return manifest


class _Run:
    """The frames one ingest wrote as scratch files, persisted (to disk: the driver's JVM stays
    small) or checkpointed.

    A stage's result goes to :meth:`scratch` (written now, in the stage that asked for it, and
    read back without its plan's history); :meth:`keep` is for frames whose partitions must
    keep their order and contents between jobs (row numbering), which a file scan does not keep.
    """

    def __init__(self, spark, level, profile: JobProfile):
        self.spark, self.level, self.step = spark, level, profile.step
        self.persisted, self.checkpoints = [], []
        self.scratch = ScratchFrames(spark, "ingest")

    def keep(self, frame):
        frame = frame.persist(self.level)
        self.persisted.append(frame)
        return frame

    def checkpointed(self, frame):
        self.checkpoints.append(frame)
        return frame

    def release(self) -> None:
        for frame in self.persisted:
            frame.unpersist()
        for frame in self.checkpoints:
            release_local_checkpoint(frame)
        self.scratch.remove()


# --------------------------------------------------------------------------- read

class _Edges:
    """What the read stage hands on: the edges as asks for their ends' numbers (:class:`_Asked`) and
    their description, plus the vertex file's rows (:class:`_VertexRows`) if one was given. A read
    through Spark's sources gives ``frame`` (sid, did[, attrs struct]) and its ``counts`` (rows per
    Spark partition), from which the read stage's last job makes the asks."""

    def __init__(self, frame, count, id_type, attributes: pa.Schema, name, vertices=None, counts=None, asked=None):
        self.frame, self.count, self.id_type, self.attributes, self.name = frame, count, id_type, attributes, name
        self.vertices, self.counts, self.asked = vertices, counts, asked


class _Scan:
    """One validated input (edges or vertices) before its ids are typed.

    ``data`` holds the id columns as read, ``counts`` the rows per Spark partition,
    ``text_ids`` whether some id is not an integer (ids are typed over both files
    together, as the local readers do), ``attributes`` the typed other columns,
    ``reread(uri)`` one file read again and ``where(uri, row)`` how to name its row.
    """

    def __init__(self, data, counts, text_ids: bool, attributes: list, reread, where):
        self.data, self.counts, self.text_ids, self.attributes = data, counts, text_ids, attributes
        self.reread, self.where = reread, where


class _VertexRows:
    """The vertex file(s): ``frame`` (vpos, id, _file[, vattrs struct]) numbered in read order
    (one file: line order), ``count`` rows, ``attributes`` the Arrow schema of ``vattrs``."""

    def __init__(self, frame, count, attributes: pa.Schema, scan: _Scan, id_column: str, id_kind: str):
        self.frame, self.count, self.attributes, self.scan = frame, count, attributes, scan
        self.id_column, self.id_kind = id_column, id_kind


def _read(run, source, format, directed, weight, attribute_names, id_type, schema, src, dst,
          vertices_path=None, id_column="id", vertices=None) -> _Edges:
    spark = run.spark
    if id_type not in ("auto", "int", "str"):
        raise InputError(f"id_type must be 'auto', 'int' or 'str', got {id_type!r}")
    schema = dict(schema or {})
    formats.check_type_names(schema)
    if formats.is_spark_frame(source):
        if vertices_path is not None:
            raise InputError("vertices_path: with an edges DataFrame, pass the vertices as a DataFrame (vertices=)")
        return _read_frame(run, source, src, dst, schema, vertices, id_column)
    if vertices is not None:
        raise InputError("vertices= goes with an edges DataFrame; with files, name the vertex file (vertices_path=)")
    paths = formats.paths_of(source)
    directory = formats.is_directory(paths[0])
    format = format or formats.guess_format(paths[0], directory)
    formats.check_format(format)
    name = formats.graph_name(paths[0], directory)
    if vertices_path is not None and format not in ("csv", "parquet"):
        raise InputError(f"vertices_path is read with format 'csv' or 'parquet' (as by the local readers), "
                         f"not {format!r}")
    if format == "edgelist":
        if weight is not None and attribute_names is not None:
            raise InputError("give weight or attribute_names, not both")
        return _read_edge_list(run, paths, [*([weight] if weight else attribute_names or [])],
                               id_type, schema, name)
    if src == dst:
        raise InputError(f"src and dst must be different columns, both are {src!r}")
    inputs = [(paths, (src, dst))] + ([(formats.paths_of(vertices_path), (id_column,))] if vertices_path is not None else [])
    columns = [_csv_header(spark, where) if format == "csv" else _parquet_columns(spark, where)
               for where, _ in inputs]
    for (where, ids), present in zip(inputs, columns):
        for column in ids:
            if column not in present:
                raise InputError(f"{where[0]}: no column {column!r} (columns: {', '.join(present)})")
    unknown = [c for c in schema if not any(c in present for present in columns)]
    if unknown:
        present = "; ".join(f"{where[0]}: {', '.join(cols)}" for (where, _), cols in zip(inputs, columns))
        raise InputError(f"schema names column {unknown[0]!r}, which no file has ({present})")
    scans = []
    for (where, ids), present in zip(inputs, columns):
        own = {c: t for c, t in schema.items() if c in present}
        scans.append(_scan_csv(spark, where, present, ids, own) if format == "csv"
                     else _scan_parquet(spark, where, ids, own))
    return _edges_of(scans, src, dst, name, id_column)


def _valid(column, kind: str):
    """Whether a text value converts to ``kind`` (null: no value, checked elsewhere)."""
    from pyspark.sql import functions as F

    if kind == "int":
        return column.rlike(_INT_PATTERN) & column.cast("long").isNotNull()
    if kind == "float":
        return column.cast("double").isNotNull()
    if kind == "bool":
        return F.lower(column).isin("true", "false", "1", "0")
    return F.lit(True)


def _typed(column, kind: str):
    from pyspark.sql import functions as F

    if kind == "bool":
        return F.lower(column).isin("true", "1")
    return column.cast({"int": "long", "float": "double", "str": "string"}[kind])


def _source_name(uri: str) -> str:
    """A file as the user named it: local ``file:`` URIs become plain paths."""
    if uri.startswith("file:"):
        return urllib.parse.unquote(urllib.parse.urlparse(uri).path)
    return uri


def _read_edge_list(run, paths, attributes, id_type, schema, name) -> _Edges:
    """Edge lists by byte range in tasks (:mod:`gofs.ingest.spark_text`); where that reader
    declines (a problem in the input among others), by Spark's text source, checked in one
    aggregation whose failures are located by re-reading the file."""
    from pyspark.sql import functions as F

    spark = run.spark
    names = ["src", "dst", *attributes]
    if len(set(names)) != len(names):
        raise InputError(f"column names must be distinct and not src/dst, got {names}")
    unknown = sorted(set(schema) - set(attributes))
    if unknown:
        raise InputError(f"{paths[0]}: schema names column {unknown[0]!r}, but the attribute columns are "
                         f"{attributes} (name them with weight= or attribute_names=)")
    kinds = {a: schema.get(a, "float") for a in attributes}
    text = _spark_read(spark, paths, lambda reader: reader.text(paths))
    asked = _Asked(run.scratch.directory(), _exchange_tasks(spark))
    attribute_types = pa.schema([(a, TYPES[kinds[a]]) for a in attributes])
    with run.step("byte ranges"):
        ranges = read_ranges(spark, sorted(text.inputFiles()), names, {"src": id_type, "dst": id_type, **kinds},
                             functools.partial(_ask_range, asked.exchange, asked.buckets, attribute_types))
    if ranges is not None:
        asked.have(ranges.rows)
        return _Edges(None, ranges.count, TYPES["str" if ranges.text_ids else "int"], attribute_types, name,
                      asked=asked)
    id_kind = {"auto": "int", "int": "int", "str": "str"}[id_type]

    def parsed(text):
        """Data lines (not blank, not comments) with their fields and whether their bytes are
        UTF-8 (:func:`_utf8`); other columns kept."""
        line = F.regexp_replace(F.col("value"), r"^\s+|\s+$", "")
        kept = [c for c in text.columns if c != "value"]
        return text.select(F.input_file_name().alias("_file"), line.alias("_line"), _utf8(F.col("value")), *kept) \
            .where((F.col("_line") != "") & ~F.substring("_line", 1, 1).isin("#", "%")) \
            .withColumn("_fields", F.split("_line", r"\s+"))

    def problems(frame):
        fields = F.col("_fields")
        count_ok = (F.size(fields) == len(names)) & F.col("_utf8")
        value_ok = F.lit(True)
        for i, column in enumerate(names[2:], start=2):
            value_ok = value_ok & _valid(fields.getItem(i), kinds[column])
        if id_type == "int":
            value_ok = value_ok & _valid(fields.getItem(0), "int") & _valid(fields.getItem(1), "int")
        return ~count_ok, count_ok & ~value_ok

    data = parsed(text)
    bad_count, bad_value = problems(data)
    fields = F.col("_fields")
    text_ids = ~(_valid(fields.getItem(0), "int") & _valid(fields.getItem(1), "int"))
    counts, totals = _partition_counts(data, {"bad": (bad_count | bad_value), "text_ids": text_ids})
    if totals["bad"]:
        bad = bad_count | bad_value
        first = data.where(bad).agg(F.min("_file")).first()[0]
        lines = _indexed(_spark_read(spark, [first], lambda reader: reader.text(first)), "_number")
        row = parsed(lines).where(bad).orderBy("_number").select("_number", "_line", "_utf8").first()
        where = f"{_source_name(first)} line {int(row['_number']) + 1}"
        if not row["_utf8"]:
            raise formats.not_utf8(where)
        raise _edge_list_error(where, row["_line"], names, kinds, id_type)
    if id_type == "auto" and totals["text_ids"]:
        id_kind = "str"
    columns = [_typed(fields.getItem(0), id_kind).alias("sid"), _typed(fields.getItem(1), id_kind).alias("did")]
    typed_attributes = [_typed(fields.getItem(i), kinds[a]).alias(a) for i, a in enumerate(names[2:], start=2)]
    return _finish(data, counts, columns, typed_attributes, TYPES[id_kind], name)


def _edge_list_error(where: str, line: str, names, kinds, id_type) -> InputError:
    fields = line.split()
    if len(fields) != len(names):
        return formats.wrong_field_count(where, names, len(fields), " ")
    wanted = {**({"src": "int", "dst": "int"} if id_type == "int" else {}), **kinds}
    for column, value in zip(names, fields):
        if column in wanted and not _converts(value, wanted[column]):
            return formats.not_a(where, column, value, wanted[column])
    return InputError(f"{where}: cannot be read")


def _utf8(value):
    """Whether a text line's bytes are UTF-8: Spark keeps a line's bytes as read, and only
    encoding it through Java (which replaces what is not UTF-8) changes them."""
    from pyspark.sql import functions as F

    return (value.cast("binary") == F.encode(value, "UTF-8")).alias("_utf8")


def _converts(value: str, kind: str) -> bool:
    """The driver-side twin of :func:`_valid`, used only to word an error about one value."""
    if kind == "int":
        try:
            return -2**63 <= int(value) < 2**63 and value.lstrip("+-").isdigit()
        except ValueError:
            return False
    if kind == "float":
        try:
            float(value)
            return True
        except ValueError:
            return False
    if kind == "bool":
        return value.lower() in ("true", "false", "1", "0")
    return True


def _csv_header(spark, paths) -> list[str]:
    return _spark_read(spark, paths, lambda reader: reader.option("header", True).csv(paths)).columns


def _scan_csv(spark, paths, header, id_columns, schema) -> _Scan:
    """Every row checked in one job (corrupt records, missing ids, ``schema`` casts) and every
    other column's type inferred over the whole column: int, else float, else bool, else str."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType

    layout_ = StructType([StructField(c, StringType()) for c in header] + [StructField("_corrupt", StringType())])

    def read(reader, where):
        return reader.schema(layout_).option("header", True).option("mode", "PERMISSIVE") \
            .option("columnNameOfCorruptRecord", "_corrupt").csv(where)

    data = _spark_read(spark, paths, lambda reader: read(reader, paths)).withColumn("_file", F.input_file_name())
    attributes = [c for c in header if c not in id_columns]
    checks = {"bad": F.col("_corrupt").isNotNull()}
    for column in id_columns:
        checks["bad"] = checks["bad"] | F.col(column).isNull()
    for column, kind in schema.items():
        checks["bad"] = checks["bad"] | (F.col(column).isNotNull() & ~_valid(F.col(column), kind))
    integer_ids = F.lit(True)
    for column in id_columns:
        integer_ids = integer_ids & _valid(F.coalesce(F.col(column), F.lit("0")), "int")
    checks["text_ids"] = ~integer_ids
    for column in attributes:
        if column not in schema:
            for kind in ("int", "float", "bool"):
                checks[f"{kind}:{column}"] = F.col(column).isNotNull() & ~_valid(F.col(column), kind)
    checks["replaced"] = F.lit(False)
    for column in header:
        checks["replaced"] = checks["replaced"] | F.col(column).contains("\ufffd")
    counts, totals = _partition_counts(data, checks)
    if totals["replaced"]:
        _check_utf8(spark, _first_file(data, checks["replaced"], header))
    if totals["bad"]:
        first = _first_file(data, checks["bad"], header)
        rows = _indexed(_spark_read(spark, [first], lambda reader: read(reader, first)), "_row")
        row = rows.where(checks["bad"]).orderBy("_row").first()
        raise _csv_error(spark, _source_name(first), first, int(row["_row"]), row, header, id_columns, schema)
    kinds = {c: schema.get(c) or next((k for k in ("int", "float", "bool") if not totals[f"{k}:{c}"]), "str")
             for c in attributes}
    return _Scan(data, counts, bool(totals["text_ids"]), [_typed(F.col(c), kinds[c]).alias(c) for c in attributes],
                 reread=lambda uri: read(spark.read, uri),
                 where=lambda uri, row: f"{_source_name(uri)} line {_csv_line(spark, uri, row)}")


def _first_file(data, condition, header) -> str:
    """The first file holding a row that meets ``condition``. Every column is read: with fewer,
    Spark's CSV parser does not see that a short row is short."""
    from pyspark.sql import functions as F

    every = F.struct(F.col("_file"), F.col("_corrupt"), *[F.col(c) for c in header])
    return data.where(condition).agg(F.min(every).alias("m")).first()["m"]["_file"]


def _check_utf8(spark, uri: str) -> None:
    """Name the first line of a CSV file whose bytes are not UTF-8 (Spark's CSV reader replaced
    them); a file that holds U+FFFD as written passes."""
    from pyspark.sql import functions as F

    lines = _indexed(_spark_read(spark, [uri], lambda reader: reader.text(uri)), "_number")
    bad = lines.where(~_utf8(F.col("value"))).orderBy("_number").select("_number").first()
    if bad is not None:
        raise formats.not_utf8(f"{_source_name(uri)} line {int(bad['_number']) + 1}")


def _csv_line(spark, uri: str, row_index: int) -> int:
    """The physical line (1-based) of data row ``row_index`` of one CSV file (blank lines skipped)."""
    from pyspark.sql import functions as F

    lines = _indexed(_spark_read(spark, [uri], lambda reader: reader.text(uri)), "_number") \
        .where((F.col("_number") > 0) & (F.trim(F.col("value")) != ""))
    return int(_indexed(lines.select("_number"), "_row").where(F.col("_row") == row_index).first()["_number"]) + 1


def _csv_error(spark, source, uri, row_index, row, header, id_columns, schema) -> InputError:
    """Word the error about data row ``row_index`` of one CSV file, with its physical line."""
    number = _csv_line(spark, uri, row_index)
    where = f"{source} line {number}"
    if row["_corrupt"] is not None:
        return formats.wrong_field_count(where, header, len(next(csv.reader([row["_corrupt"]]), [])), ", ")
    for column in id_columns:
        if row[column] is None:
            return formats.missing_id(f"{where}, column {column!r}")
    for column, kind in schema.items():
        if row[column] is not None and not _converts(row[column], kind):
            return formats.not_a(where, column, row[column], kind)
    return InputError(f"{source} line {number}: cannot be read")


def _parquet_columns(spark, paths) -> list[str]:
    return _spark_read(spark, paths, lambda reader: reader.parquet(*paths)).columns


def _scan_parquet(spark, paths, id_columns, schema) -> _Scan:
    from pyspark.sql import functions as F

    data = _spark_read(spark, paths, lambda reader: reader.parquet(*paths)).withColumn("_file", F.input_file_name())
    return _checked_frame(spark, data, id_columns, schema, lambda uri: spark.read.parquet(uri), paths[0])


def _read_frame(run, frame, src, dst, schema, vertices=None, id_column="id") -> _Edges:
    from pyspark.sql import functions as F

    inputs = [(frame, (src, dst), "edges DataFrame")]
    if vertices is not None:
        if not formats.is_spark_frame(vertices):
            raise InputError(f"vertices= must be a Spark DataFrame, got {type(vertices).__name__}")
        inputs.append((vertices, (id_column,), "vertices DataFrame"))
    for data, ids, what in inputs:
        for column in ids:
            if column not in data.columns:
                raise InputError(f"{what}: no column {column!r} (columns: {', '.join(data.columns)})")
    unknown = [c for c in schema if not any(c in data.columns for data, _, _ in inputs)]
    if unknown:
        raise InputError(f"schema names column {unknown[0]!r}, which no DataFrame has "
                         f"(columns: {'; '.join(', '.join(data.columns) for data, _, _ in inputs)})")
    scans = []
    for data, ids, what in inputs:
        data = run.keep(data.withColumn("_file", F.lit(what)))     # row positions must not change between jobs
        own = {c: t for c, t in schema.items() if c in data.columns}
        scans.append(_checked_frame(run.spark, data, ids, own, None, what))
    return _edges_of(scans, src, dst, None, id_column)


def _edges_of(scans: list, src: str, dst: str, name, id_column: str) -> _Edges:
    """The read stage's result from the edges' scan and, if given, the vertices' one: ids typed
    over both together (text if either has a text id), as the local readers type them."""
    from pyspark.sql import functions as F

    id_kind = "str" if any(scan.text_ids for scan in scans) else "int"
    edges = _finish(scans[0].data, scans[0].counts,
                    [_typed(F.col(src), id_kind).alias("sid"), _typed(F.col(dst), id_kind).alias("did")],
                    scans[0].attributes, TYPES[id_kind], name)
    if len(scans) > 1:
        edges.vertices = _vertex_rows(scans[1], id_column, id_kind)
    return edges


def _checked_frame(spark, data, id_columns, schema, reread, source: str) -> _Scan:
    """Typed columns (Parquet, DataFrames): check the ids' types, nulls and schema casts."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegralType, StringType

    id_types = {c: data.schema[c].dataType for c in id_columns}
    for column, kind in id_types.items():
        if not isinstance(kind, (IntegralType, StringType)):
            raise InputError(f"{source}, column {column!r}: vertex ids must be integers or strings, "
                             f"not {kind.simpleString()}")
    integer_ids = all(isinstance(k, IntegralType) for k in id_types.values())
    attributes = [c for c in data.columns if c not in (*id_columns, "_file")]
    checks = {"bad": F.lit(False)}
    for column in id_columns:
        checks["bad"] = checks["bad"] | F.col(column).isNull()
    for column, kind in schema.items():
        cast = _typed(F.col(column).cast("string"), kind)
        checks["bad"] = checks["bad"] | (F.col(column).isNotNull() & cast.isNull())
    counts, totals = _partition_counts(data, checks)
    if totals["bad"]:
        if reread is None:
            rows = _indexed(data, "_row")
            where = source
        else:
            first = data.where(checks["bad"]).agg(F.min("_file")).first()[0]
            rows, where = _indexed(reread(first), "_row"), _source_name(first)
        row = rows.where(checks["bad"]).orderBy("_row").first()
        for column in id_columns:
            if row[column] is None:
                raise formats.missing_id(f"{where} row {row['_row']}, column {column!r}")
        for column, kind in schema.items():
            value = row[column]
            if value is not None:
                raise formats.not_a(f"{where} row {row['_row']}", column, value, kind)
    typed = [(_typed(F.col(c).cast("string"), schema[c]) if c in schema else F.col(c)).alias(c) for c in attributes]
    return _Scan(data, counts, not integer_ids, typed, reread=reread,
                 where=lambda uri, row: f"{_source_name(uri)} row {row}")


def _spark_read(spark, paths, read):
    """Run a reader, turning Spark's missing-path and unreadable-file errors into an InputError
    naming the path."""
    from pyspark.errors import AnalysisException

    try:
        with _named_read_errors():
            return read(spark.read)
    except AnalysisException as exc:
        if "PATH_NOT_FOUND" in str(exc) or "Path does not exist" in str(exc):
            raise InputError(f"{paths[0] if len(paths) == 1 else paths}: no such file or directory") from None
        raise


_UNREADABLE_FILE = re.compile(r"Encountered error while reading file (\S+?)\. Details")
_NOT_PARQUET = re.compile(r"Could not read footer for file: (\S+?)\. |(\S+) is not a Parquet file")


@contextlib.contextmanager
def _named_read_errors():
    """A Spark job that failed on a file it could not decode (a corrupt ``.gz``, a file that is
    not Parquet) raises the same InputError the local readers raise, naming the file."""
    from py4j.protocol import Py4JJavaError

    try:
        yield
    except Py4JJavaError as exc:
        text = str(exc.java_exception)
        parquet, unreadable = _NOT_PARQUET.search(text), _UNREADABLE_FILE.search(text)
        if parquet:
            raise formats.not_parquet(_source_name(parquet.group(1) or parquet.group(2))) from None
        if unreadable and unreadable.group(1).endswith(".gz"):
            raise formats.not_gzip(_source_name(unreadable.group(1))) from None
        raise


def _partition_counts(frame, checks: dict) -> tuple[dict, dict]:
    """One job: rows per Spark partition (for row numbering) and how many rows fail each check."""
    from pyspark.sql import functions as F

    sums = [F.sum(F.coalesce(check, F.lit(False)).cast("long")).alias(f"c{i}") for i, check in enumerate(checks.values())]
    with _named_read_errors():
        rows = frame.groupBy(F.spark_partition_id().alias("_p")).agg(F.count(F.lit(1)).alias("_n"), *sums).collect()
    counts = {int(r["_p"]): int(r["_n"]) for r in rows}
    totals = {name: sum(int(r[f"c{i}"] or 0) for r in rows) for i, name in enumerate(checks)}
    return counts, totals


def _indexed(frame, name: str, counts: dict | None = None):
    """``frame`` with a consecutive 0-based row number in partition order.

    ``frame`` must yield the same rows in the same partitions every time it is
    computed (a file scan, or a persisted frame). ``counts`` (rows per Spark
    partition) saves the counting job when already known.
    """
    from pyspark.sql import functions as F

    if counts is None:
        counts, _ = _partition_counts(frame, {})
    size = max(counts, default=-1) + 1
    offsets = np.concatenate([[0], np.cumsum([counts.get(p, 0) for p in range(size)])])[:-1] if size else np.zeros(1)
    pid = F.spark_partition_id()
    start = F.element_at(F.array(*[F.lit(int(o)) for o in offsets]), pid + 1)
    within = F.monotonically_increasing_id() - F.shiftleft(pid.cast("long"), 33)
    return frame.withColumn(name, start + within)


def _finish(data, counts, ids, attributes, id_type, name) -> _Edges:
    """The read's result from ``data`` typed by ``ids`` and ``attributes`` (column expressions),
    with ``counts`` (rows per Spark partition): edge ids are positions in partition order."""
    from pyspark.sql import functions as F

    columns = [*ids]
    if attributes:
        columns.append(F.struct(*attributes).alias("attrs"))
    frame = data.select(*columns)
    attribute_schema = arrow_schema(frame.schema["attrs"].dataType) if attributes else pa.schema([])
    return _Edges(frame, sum(counts.values()), id_type, attribute_schema, name, counts=counts)


def _vertex_rows(scan: _Scan, id_column: str, id_kind: str) -> _VertexRows:
    from pyspark.sql import functions as F

    numbered = _indexed(scan.data, "vpos", scan.counts)
    columns = [F.col("vpos"), _typed(F.col(id_column), id_kind).alias("id"), F.col("_file")]
    if scan.attributes:
        columns.append(F.struct(*scan.attributes).alias("vattrs"))
    frame = numbered.select(*columns)
    attributes = arrow_schema(frame.schema["vattrs"].dataType) if scan.attributes else pa.schema([])
    if "id" in attributes.names:
        raise InputError(f"{_source_name(scan.data.select('_file').first()[0])}: two columns would be named 'id'")
    return _VertexRows(frame, sum(scan.counts.values()), attributes, scan, id_column, id_kind)


def _check_unique_ids(rows: _VertexRows) -> None:
    """One job; if an id repeats, name the file and line of its first repetition."""
    from pyspark.sql import functions as F

    frame = rows.frame
    repeated = frame.groupBy("id").agg(F.count(F.lit(1)).alias("_n"), F.min("vpos").alias("_first")) \
        .where(F.col("_n") > 1)
    if not repeated.take(1):
        return
    second = frame.join(repeated, "id").where(F.col("vpos") > F.col("_first")).orderBy("vpos") \
        .select("id", "_file", "_first", "vpos").first()
    value, uri = second["id"], second["_file"]
    if rows.scan.reread is None:            # a DataFrame: its rows are numbered as read
        raise formats.duplicate_id(f"{uri} row {second['vpos']}, column {rows.id_column!r}", value)
    first_file = frame.where(F.col("vpos") == second["_first"]).select("_file").first()[0]
    reread = _indexed(rows.scan.reread(uri), "_row")
    same = reread.where(_typed(F.col(rows.id_column).cast("string"), rows.id_kind) == F.lit(value)) \
        .orderBy("_row").select("_row").take(2)
    row = int(same[min(len(same) - 1, 1 if first_file == uri else 0)]["_row"])
    raise formats.duplicate_id(f"{rows.scan.where(uri, row)}, column {rows.id_column!r}", value)


# --------------------------------------------------------------------------- dense ids

def _exchange_tasks(spark) -> int:
    """How many tasks each of the ids and sub-graph stages' exchange jobs runs (id buckets, position
    slices, vertex ranges): one per core. Their rows move as files, not through a Spark shuffle,
    so ``spark.sql.shuffle.partitions`` does not apply; more tasks than cores only added each
    task's fixed cost (at 1M road edges on 2 cores, 8 tasks a job instead of 2 cost the ids
    stage 1.6x its CPU time) and, per job, one read per sender and receiver pair."""
    return max(1, spark.sparkContext.defaultParallelism)


def _indices(spark, count: int):
    """The indices ``0..count-1`` (partitions, askers) as a frame of at most one Spark partition
    per core, each task taking its indices in turn: a task's fixed cost (its launch, its
    Python worker's round trip) is paid once per core, not once per index."""
    return spark.range(0, count, 1, max(1, min(count, _exchange_tasks(spark))))


class _Asked:
    """The edges as asks for their ends' dense numbers, in the exchange directory ``exchange``: each
    asker t (a byte range of the input, or a Spark partition of a read through Spark's sources)
    sent its distinct ids to their ``buckets`` with their first positions in t and kept its edges
    as indices into what it sent (:func:`_ask`). ``askers``: the t with edges, ``starts`` (their
    first edge ids) and ``rows`` (their edges), in that order; edge ids follow read order."""

    def __init__(self, exchange: str, buckets: int):
        self.exchange, self.buckets = exchange, buckets
        self.askers, self.starts, self.rows = [], np.zeros(0, np.int64), np.zeros(0, np.int64)

    def have(self, rows: np.ndarray) -> None:
        """Asker t has ``rows[t]`` edges (t in read order)."""
        rows = np.asarray(rows, np.int64)
        self.askers = [int(t) for t in np.flatnonzero(rows)]
        self.starts = (np.cumsum(rows) - rows)[self.askers]
        self.rows = rows[self.askers]


def _ask(exchange: str, buckets: int, t: int, sid: pa.Array, did: pa.Array, attrs) -> None:
    """In asker t's task: its distinct ids sent to their buckets as ``(id, pos, j)`` (j: the id's
    index in t's list, pos: its first position among t's ends, ``src`` then ``dst``, edge by edge),
    and its edges kept as ``(s, d[, attrs])``, their ends' indices in that list."""
    rows = len(sid)
    ends = pa.concat_arrays([sid, did])
    asks = pc.unique(ends)
    found = pc.index_in(ends, value_set=asks).to_numpy()
    first = np.full(len(asks), 2 * rows, np.int64)
    np.minimum.at(first, found, np.arange(2 * rows, dtype=np.int64))
    fs, (asks_path,) = _exchange_files(exchange, "asks", [t])
    _, (edges_path,) = _exchange_files(exchange, "edges", [t])
    put_exchange(fs, asks_path, pa.table({"id": asks, "pos": first, "j": np.arange(len(asks), dtype=np.int64)}),
                 id_buckets(asks, buckets), buckets)
    put_exchange(fs, edges_path, pa.table({"s": found[:rows], "d": found[rows:],
                                           **({"attrs": attrs} if attrs is not None else {})}),
                 np.zeros(rows, np.int64), 1)


def _ask_range(exchange: str, buckets: int, attributes: pa.Schema, r: int, table: pa.Table) -> None:
    """:func:`_ask` for byte range r's parsed rows (:func:`gofs.ingest.spark_text.read_ranges`)."""
    attrs = None
    if len(attributes):
        attrs = pa.StructArray.from_arrays([table.column(f.name).combine_chunks().cast(f.type) for f in attributes],
                                           fields=list(attributes))
    _ask(exchange, buckets, r, table.column("src").combine_chunks(), table.column("dst").combine_chunks(), attrs)


def _ask_frame(run, frame, counts: dict) -> _Asked:
    """One job: each Spark partition t of ``frame`` (sid, did[, attrs]) asks (:func:`_ask`); its
    edge ids are positions in partition order (``counts``: rows per partition, as counted)."""
    from pyspark.sql import functions as F

    spark = run.spark
    asked = _Asked(run.scratch.directory(), _exchange_tasks(spark))
    frame.select(F.spark_partition_id().alias("t"), "*").mapInArrow(forgets_zip_importers(
        functools.partial(_ask_partition, asked.exchange, asked.buckets)), "t int").collect()
    asked.have([counts.get(t, 0) for t in range(max(counts, default=-1) + 1)])
    return asked


def _ask_partition(exchange: str, buckets: int, batches):
    """Task: one Spark partition t ``(t, sid, did[, attrs])`` asks (:func:`_ask`)."""
    batches = list(batches)
    table = pa.Table.from_batches(batches) if batches else None
    if table is None or table.num_rows == 0:
        return
    t = int(table.column("t")[0].as_py())
    _ask(exchange, buckets, t, table.column("sid").combine_chunks(), table.column("did").combine_chunks(),
         table.column("attrs").combine_chunks() if "attrs" in table.column_names else None)
    yield pa.RecordBatch.from_pydict({"t": np.array([t], np.int32)})


class _Ranged:
    """What the ids stage leaves for the sub-graphs: the dense edges (``edges``: the askers that sent
    them) and, where they carry no attributes, the vertices (``vertices``: the slices that sent them,
    those with vertices; else None) already sent to their vertex-range buckets (``buckets`` of them)
    in the exchange directory ``exchange`` (:func:`_to_ranges`'s files)."""

    def __init__(self, exchange: str, buckets: int, edges: list[int], vertices: list[int] | None):
        self.exchange, self.buckets, self.edges, self.vertices = exchange, buckets, edges, vertices


def _dense_ids(run, edges: _Edges, vertex_rows: _VertexRows | None = None):
    """``(id, v[, vattrs])`` with v in order of first appearance, the edges as ``(eid, src, dst[, attrs])``,
    n, and what was sent on to the sub-graphs (:class:`_Ranged`).

    First appearance as the local engine counts it (:func:`gofs.ingest.local.dense_ids`): the
    vertex file's rows in order, then every ``src`` column value in edge order, then every
    ``dst`` value in edge order. Vertices only in the edges get null attributes.

    Each end is a position (vertex row, then ``src`` by edge, then ``dst`` by edge). The read left
    each asker's distinct ids with their first positions in it at their buckets (:class:`_Asked`);
    three Python jobs whose rows move as Arrow exchange files (:func:`gofs.spark_jobs.put_exchange`),
    not through Spark's row shuffles: bucket b takes each id's least position (over the vertex rows,
    :func:`_send_vertex_ids`, and the askers) and sends it, and each ask with that position, to
    the task of its slice of the position range (:func:`_first_positions`; fixed bounds: no
    sampling job, no global sort); slice s sorts its ids by position, numbers them from 0 and
    answers each ask its number (:func:`_numbered_slices`); v is the slice's offset (from the
    slices' counts) plus that number, with which each asker writes its edges and sends them to
    their sources' vertex ranges, and each slice its vertices to theirs (:func:`_write_dense`).
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegerType, LongType, StructField, StructType

    spark = run.spark
    asked, m = edges.asked, edges.count
    nv = 0 if vertex_rows is None else vertex_rows.count
    slices = asked.buckets
    exchange = asked.exchange
    known = []
    if vertex_rows is not None:
        _check_unique_ids(vertex_rows)
    with run.step("first positions, numbered slices"):
        if vertex_rows is not None:
            known = sorted(int(row["t"]) for row in vertex_rows.frame.select(
                F.spark_partition_id().alias("t"), "id", "vpos").mapInArrow(forgets_zip_importers(
                    functools.partial(_send_vertex_ids, exchange, slices)), "t int").collect())
        tasks = spark.range(0, slices, 1, slices)
        tasks.mapInArrow(forgets_zip_importers(functools.partial(
            _first_positions, exchange, asked, known, nv, m, max(1, nv + 2 * m))), "b long").collect()
        directory = run.scratch.directory()
        fs, root = layout.filesystem(directory)
        fs.create_dir(root, recursive=True)         # read back even if no task writes there
        sizes = tasks.mapInArrow(forgets_zip_importers(functools.partial(
            _numbered_slices, directory, exchange, slices, len(asked.askers))), _SLICE_SIZES).collect()
    counts = np.zeros(slices, np.int64)
    for row in sizes:
        counts[row["slice"]] += row["count"]
    offsets = np.concatenate([[0], np.cumsum(counts)])[:-1]
    n = int(counts.sum())
    id_type = spark_schema(pa.schema([("id", edges.id_type)]))["id"].dataType
    start = F.element_at(F.array(*[F.lit(int(o)) for o in offsets]), F.col("slice") + 1)
    numbered = spark.read.schema(StructType([StructField("id", id_type), StructField("slice", IntegerType()),
                                             StructField("number", LongType())])).parquet(directory)
    vertices = numbered.select("id", (start + F.col("number")).alias("v"))
    with_attributes = vertex_rows is not None and len(vertex_rows.attributes)
    if with_attributes:
        with run.step("vertex attributes"):
            vertices = run.scratch(vertices.join(vertex_rows.frame.select("id", "vattrs"), "id", "left"))
    ranged = _Ranged(run.scratch.directory(), asked.buckets, asked.askers,
                     None if with_attributes else [int(p) for p in np.flatnonzero(counts)])
    with run.step("dense edges"):
        dense = _dense_edges(run, edges, directory, offsets, n, ranged)
    return vertices, dense, n, ranged


def _dense_edges(run, edges: _Edges, numbered: str, offsets: np.ndarray, n: int, ranged: _Ranged):
    """One Python job (:func:`_write_dense`): each asker's edges ``(eid, src, dst[, attrs])`` on dense
    numbers, written as files and sent to their sources' vertex ranges, and (``ranged.vertices``)
    each slice's vertices ``(v, id)`` sent to theirs; the edges' files read back."""
    spark = run.spark
    asked = edges.asked
    directory = run.scratch.directory()
    fs, root = layout.filesystem(directory)
    fs.create_dir(root, recursive=True)         # read back even if no task writes there
    count = len(asked.askers) + len(ranged.vertices or [])
    if count:
        _indices(spark, count).mapInArrow(forgets_zip_importers(functools.partial(
            _write_dense, asked, numbered, offsets, n, ranged, directory)), "t long").collect()
    fields = [("eid", pa.int64()), ("src", pa.int64()), ("dst", pa.int64())]
    if len(edges.attributes):
        fields.append(("attrs", pa.struct(list(edges.attributes))))
    return spark.read.schema(spark_schema(pa.schema(fields))).parquet(directory)


def _exchange_files(exchange: str, kind: str, tasks) -> tuple:
    """``(filesystem, [path, ...])`` of the ``kind`` exchange files the given tasks wrote."""
    fs, root = layout.filesystem(exchange)
    return fs, [layout.join(root, kind, layout.part_file(i)) for i in tasks]


_SLICE_SIZES = "slice int, count long"


def _send_vertex_ids(exchange: str, buckets: int, batches):
    """Task: the vertex rows ``(t, id, vpos)`` of one Spark partition t sent to their ids' buckets
    as ``(id, pos)`` (:func:`_first_positions`)."""
    batches = list(batches)
    table = pa.Table.from_batches(batches) if batches else None
    if table is None or table.num_rows == 0:
        return
    t = int(table.column("t")[0].as_py())
    ids = table.column("id").combine_chunks()
    fs, (path,) = _exchange_files(exchange, "known", [t])
    put_exchange(fs, path, pa.table({"id": ids, "pos": table.column("vpos")}), id_buckets(ids, buckets), buckets)
    yield pa.RecordBatch.from_pydict({"t": np.array([t], np.int32)})


def _first_positions(exchange: str, asked: _Asked, known: list[int], nv: int, m: int, positions: int, batches):
    """Task: for bucket b, each of its ids' least position over the vertex rows and the askers
    (an asker's positions made global: ``nv + eid`` for a ``src``, ``nv + m + eid`` for a ``dst``),
    sent to the slice of the position range it falls in as ``firsts (id, pos)``, and each ask
    sent there with its id's least position as ``wants (pos, a, j)`` (a: the asker's index)
    (:func:`_numbered_slices`)."""
    slices = asked.buckets
    fs, known_paths = _exchange_files(exchange, "known", known)
    ask_paths = _exchange_files(exchange, "asks", asked.askers)[1]
    for batch in batches:
        for b in batch.column(0).to_pylist():
            pieces = [take_exchange(fs, [path], b) for path in ask_paths]
            ends = [take_exchange(fs, known_paths, b)] if known_paths else []
            ends += [pa.table({"id": piece.column("id"), "pos": _global_positions(piece.column("pos").to_numpy(),
                                                                                 start, rows, nv, m)})
                     for piece, start, rows in zip(pieces, asked.starts, asked.rows)]
            ends = pa.concat_tables(ends) if ends else pa.table({"id": pa.array([], pa.int64()),
                                                                  "pos": pa.array([], pa.int64())})
            first = ends.group_by("id").aggregate([("pos", "min")]).rename_columns(["id", "pos"])
            first_pos = first.column("pos").to_numpy()
            put_exchange(fs, _exchange_files(exchange, "firsts", [b])[1][0], first, first_pos * slices // positions,
                         slices)
            ids = pa.concat_arrays([piece.column("id").combine_chunks() for piece in pieces]) if pieces else None
            wanted = first_pos[pc.index_in(ids, value_set=first.column("id")).to_numpy()] if pieces \
                else np.zeros(0, np.int64)
            put_exchange(fs, _exchange_files(exchange, "wants", [b])[1][0], pa.table({
                "pos": wanted,
                "a": np.repeat(np.arange(len(pieces), dtype=np.int64), [piece.num_rows for piece in pieces]),
                "j": np.concatenate([piece.column("j").to_numpy() for piece in pieces] or [np.zeros(0, np.int64)])}),
                wanted * slices // positions, slices)
            yield pa.RecordBatch.from_pydict({"b": np.array([b], np.int64)})


def _global_positions(local: np.ndarray, start: int, rows: int, nv: int, m: int) -> np.ndarray:
    """An asker's positions among its own ends (``rows`` sources, then as many destinations) as
    positions among all ends: ``nv + eid`` for a ``src``, ``nv + m + eid`` for a ``dst``, its
    edge ids from ``start``."""
    return np.where(local < rows, nv + start + local, nv + m + start + local - rows)


def _numbered_slices(directory: str, exchange: str, buckets: int, askers: int, batches):
    """Task: for slice s of the position range, its ids' first positions from every bucket
    (:func:`_first_positions`) sorted, numbered from 0 and written as ``(id, slice, number)``
    under ``directory``, and each ask it was sent answered its number, to the asker, as
    ``(j, number)``; ``(slice, count)`` returned."""
    fs, root = layout.filesystem(directory)
    exchange_fs, paths = _exchange_files(exchange, "firsts", range(buckets))
    wants_paths = _exchange_files(exchange, "wants", range(buckets))[1]
    for batch in batches:
        for piece in batch.column(0).to_pylist():
            rows = take_exchange(exchange_fs, paths, piece)
            pos = rows.column("pos").to_numpy()
            order = np.argsort(pos, kind="stable")
            rows = rows.take(pa.array(order))
            count = rows.num_rows
            if count:
                files.put_table(fs, layout.join(root, layout.part_file(piece)), pa.table({
                    "id": rows.column("id"), "slice": np.full(count, piece, np.int32),
                    "number": np.arange(count, dtype=np.int64)}))
            wants = take_exchange(exchange_fs, wants_paths, piece)
            number = np.searchsorted(pos[order], wants.column("pos").to_numpy())
            _, (path,) = _exchange_files(exchange, "answers", [piece])
            put_exchange(exchange_fs, path, pa.table({"j": wants.column("j"), "number": number}),
                         wants.column("a").to_numpy(), askers)
            yield pa.RecordBatch.from_pydict({"slice": np.array([piece], np.int32),
                                              "count": np.array([count], np.int64)})


def _write_dense(asked: _Asked, numbered: str, offsets: np.ndarray, n: int, ranged: _Ranged, directory: str,
                 batches):
    """Task i: for an asker (``i < len(asked.askers)``), its edges ``(eid, src, dst[, attrs])`` on dense
    numbers (its asks' answers from every slice, each plus the slice's offset) written under
    ``directory`` and sent to their sources' vertex-range buckets (``edges``); for a slice after
    them, its vertices ``(v, id)`` sent to theirs (``vertices``) (:func:`_to_ranges`'s files)."""
    fs, root = layout.filesystem(directory)
    exchange_fs, answer_paths = _exchange_files(asked.exchange, "answers", range(asked.buckets))
    for batch in batches:
        for i in batch.column(0).to_pylist():
            if i >= len(asked.askers):
                s = ranged.vertices[i - len(asked.askers)]
                piece_fs, piece = layout.filesystem(layout.join(numbered, layout.part_file(s)))
                rows = pq.read_table(piece, filesystem=piece_fs)
                table = pa.table({"v": offsets[s] + rows.column("number").to_numpy(), "id": rows.column("id")})
                put_exchange(exchange_fs, _exchange_files(ranged.exchange, "vertices", [s])[1][0], table,
                             _range_bucket(table.column("v").to_numpy(), n, asked.buckets), asked.buckets)
                yield pa.RecordBatch.from_pydict({"t": np.array([i], np.int64)})
                continue
            t = asked.askers[i]
            kept = take_exchange(exchange_fs, _exchange_files(asked.exchange, "edges", [t])[1], 0)
            answers = [take_exchange(exchange_fs, [path], i) for path in answer_paths]
            v = np.empty(sum(a.num_rows for a in answers), np.int64)
            for s, a in enumerate(answers):
                v[a.column("j").to_numpy()] = offsets[s] + a.column("number").to_numpy()
            table = pa.table({"eid": asked.starts[i] + np.arange(kept.num_rows, dtype=np.int64),
                              "src": v[kept.column("s").to_numpy()], "dst": v[kept.column("d").to_numpy()],
                              **({"attrs": kept.column("attrs")} if "attrs" in kept.column_names else {})})
            files.put_table(fs, layout.join(root, layout.part_file(t)), table)
            put_exchange(exchange_fs, _exchange_files(ranged.exchange, "edges", [t])[1][0], table,
                         _range_bucket(table.column("src").to_numpy(), n, asked.buckets), asked.buckets)
            yield pa.RecordBatch.from_pydict({"t": np.array([i], np.int64)})


# --------------------------------------------------------------------------- sub-graphs

class _Discovered:
    """What discovery hands the write: the exchange directory holding each partition's pieces
    (:func:`_discover_partition`) and the far ends' numbers it sent, and the vertex and sub-graph
    offsets of the partitions."""

    def __init__(self, exchange: str, offsets: dict):
        self.exchange, self.offsets = exchange, offsets


_SIZES = "part int, vertices long, subgraphs long"


def _subgraphs(run, edges, vertices, parts, n: int, k: int, ranged: _Ranged) -> _Discovered:
    """Four Python jobs whose rows move as Arrow exchange files (:func:`gofs.spark_jobs.put_exchange`;
    a join of every vertex and edge with the labels and a shuffle to the partitions' tasks cost
    ~1.6x their CPU time at 1M road edges). Labels are sent to the bucket of the vertex range that
    holds their vertex (:func:`_to_ranges`), where the ids stage sent the edges (by source) and the
    vertices (``ranged``; vertices with attributes are sent by one more job here); bucket b labels
    its vertices, sending them to their partitions, and its edges' sources, sending the edges on
    to their destinations' buckets (:func:`_label_sources`), which label the destinations and send
    each edge to its source's partition and a cut edge also to its destination's
    (:func:`_label_destinations`); task p finds the sub-graphs of its local edges with the local
    engine's scipy kernel and keeps its pieces, sending each cut edge's far partition the local
    numbers of its own end (:func:`_discover_partition`). The driver turns the partitions' sizes
    into vertex and sub-graph offsets."""
    from pyspark.sql import functions as F

    spark = run.spark
    buckets = ranged.buckets
    attrs = ["attrs"] if "attrs" in edges.columns else []
    vattrs = ["vattrs"] if "vattrs" in vertices.columns else []
    frames = [parts.select(F.col("vid").cast("long").alias("vid"), F.col("part").cast("int").alias("part")),
              vertices.select("v", "id", *vattrs), edges.select("eid", "src", "dst", *attrs)]
    schemas = [arrow_schema(frame.schema) for frame in frames]
    exchange = ranged.exchange

    def tasks(function, *args):
        return forgets_zip_importers(functools.partial(function, exchange, *args))

    def to_ranges(kind: int) -> list[int]:
        return sorted(int(r["t"]) for r in frames[kind].select(F.spark_partition_id().alias("t"), "*").mapInArrow(
            tasks(_to_ranges, n, buckets, kind), "t int").collect())

    with run.step("to vertex ranges"):
        senders = [to_ranges(0), ranged.vertices if ranged.vertices is not None else to_ranges(1), ranged.edges]
    ranges = spark.range(0, buckets, 1, buckets)
    with run.step("labelled"):
        ranges.mapInArrow(tasks(_label_sources, n, buckets, k, senders, schemas), "b long").collect()
        ranges.mapInArrow(tasks(_label_destinations, n, buckets, k, senders[0], schemas[0]),
                          "b long").collect()
    with run.step("discover"):
        sizes = _indices(spark, k).mapInArrow(tasks(_discover_partition, buckets, k), _SIZES).collect()
    num_vertices = np.zeros(k, np.int64)
    num_subgraphs = np.zeros(k, np.int64)
    for row in sizes:
        num_vertices[row["part"]], num_subgraphs[row["part"]] = row["vertices"], row["subgraphs"]
    offsets = {"vertex": np.concatenate([[0], np.cumsum(num_vertices)]),
               "subgraph": np.concatenate([[0], np.cumsum(num_subgraphs)])}
    return _Discovered(exchange, offsets)


_KINDS = ("labels", "vertices")


def _range_bucket(v: np.ndarray, n: int, buckets: int) -> np.ndarray:
    """The bucket of each vertex number: ``buckets`` equal ranges of ``0..n-1``."""
    return v * buckets // max(n, 1)


def _labels_of(fs, paths: list[str], b: int, n: int, buckets: int, schema: pa.Schema) -> tuple:
    """``(first vertex, partition of each vertex)`` of range bucket b, from the labels sent to it."""
    labels = take_exchange(fs, paths, b, schema)
    lo, hi = (-(-i * n // buckets) for i in (b, b + 1))
    part = np.zeros(hi - lo, np.int32)
    part[labels.column("vid").to_numpy() - lo] = labels.column("part").to_numpy()
    return lo, part


def _to_ranges(exchange: str, n: int, buckets: int, kind: int, batches):
    """Task: one Spark partition t of the labels ``(vid, part)`` or the vertices ``(v, id[, vattrs])``
    (``kind`` 0, 1: one job each, so that no rows carry the others' columns) sent to their vertices'
    range buckets (as :func:`_write_dense` sends the edges); t returned."""
    batches = list(batches)
    table = pa.Table.from_batches(batches) if batches else None
    if table is None or table.num_rows == 0:
        return
    t = int(table.column("t")[0].as_py())
    table = table.drop_columns(["t"])
    fs, (path,) = _exchange_files(exchange, _KINDS[kind], [t])
    put_exchange(fs, path, table, _range_bucket(table.column(("vid", "v")[kind]).to_numpy(), n, buckets),
                 buckets)
    yield pa.RecordBatch.from_pydict({"t": np.array([t], np.int32)})


def _label_sources(exchange: str, n: int, buckets: int, k: int, senders: list, schemas: list, batches):
    """Task: for range bucket b, its vertices ``(v, id[, vattrs])`` sent to their partitions
    (``members``), its edges sent with their sources' partitions (``src_part``) to their
    destinations' buckets (``halves``, :func:`_label_destinations`)."""
    fs, paths = _exchange_files(exchange, "labels", senders[0])
    vertex_paths, edge_paths = (_exchange_files(exchange, kind, tasks)[1]
                                for kind, tasks in (("vertices", senders[1]), ("edges", senders[2])))
    for batch in batches:
        for b in batch.column(0).to_pylist():
            lo, part = _labels_of(fs, paths, b, n, buckets, schemas[0])
            members = take_exchange(fs, vertex_paths, b, schemas[1])
            put_exchange(fs, _exchange_files(exchange, "members", [b])[1][0], members,
                         part[members.column("v").to_numpy() - lo], k)
            edges = take_exchange(fs, edge_paths, b, schemas[2])
            edges = edges.append_column("src_part", pa.array(part[edges.column("src").to_numpy() - lo]))
            put_exchange(fs, _exchange_files(exchange, "halves", [b])[1][0], edges,
                         _range_bucket(edges.column("dst").to_numpy(), n, buckets), buckets)
            yield pa.RecordBatch.from_pydict({"b": np.array([b], np.int64)})


def _label_destinations(exchange: str, n: int, buckets: int, k: int, labelled: list, schema: pa.Schema, batches):
    """Task: for range bucket b, the edges whose destination it holds ``(eid, src, dst[, attrs],
    src_part)`` sent to their sources' partitions (``mirror`` false, ``far_part`` the destination's)
    and the cut ones also to their destinations' (``mirror`` true, ``far_part`` the source's)."""
    fs, paths = _exchange_files(exchange, "labels", labelled)
    halves = _exchange_files(exchange, "halves", range(buckets))[1]
    for batch in batches:
        for b in batch.column(0).to_pylist():
            lo, part = _labels_of(fs, paths, b, n, buckets, schema)
            edges = take_exchange(fs, halves, b)
            src_part = edges.column("src_part").to_numpy()
            dst_part = part[edges.column("dst").to_numpy() - lo]
            cut = np.flatnonzero(dst_part != src_part)
            edges = edges.drop_columns(["src_part"])
            owned = pa.concat_tables([
                edges.append_column("far_part", pa.array(dst_part))
                     .append_column("mirror", pa.array(np.zeros(edges.num_rows, bool))),
                edges.take(pa.array(cut)).append_column("far_part", pa.array(src_part[cut]))
                     .append_column("mirror", pa.array(np.ones(cut.size, bool)))])
            put_exchange(fs, _exchange_files(exchange, "owned", [b])[1][0], owned,
                         np.concatenate([src_part, dst_part[cut]]), k)
            yield pa.RecordBatch.from_pydict({"b": np.array([b], np.int64)})


def _discover_partition(exchange: str, buckets: int, k: int, batches):
    """Task: for partition p, its vertices (``members``) and the edges it holds (``owned``: those
    whose source it owns, and the cut ones whose destination it owns, ``mirror``); the sub-graphs
    of its local edges found by the scipy kernel of the local engine (vertices numbered in
    dense-id order first, as it does). Keeps its vertices ``(lsg, id[, vattrs])`` in local vertex
    order and its edges ``(eid, mirror, far_part, lvid, lsg, far_lvid, far_lsg[, attrs])`` (its own
    end's local numbers, the far end's where local, -1 where cut) as its pieces, sends each cut
    edge's far partition its own end's numbers (``far``: ``key`` = 2 eid + mirror), and returns
    ``(p, vertices, sub-graphs)``."""
    fs, members_paths = _exchange_files(exchange, "members", range(buckets))
    owned_paths = _exchange_files(exchange, "owned", range(buckets))[1]
    for batch in batches:
        for p in batch.column(0).to_pylist():
            members = take_exchange(fs, members_paths, p)
            members = members.take(pa.array(np.argsort(members.column("v").to_numpy(), kind="stable")))
            rows = take_exchange(fs, owned_paths, p)
            v = members.column("v").to_numpy()
            mirror = rows.column("mirror").to_numpy(zero_copy_only=False)
            far_part = rows.column("far_part").to_numpy()
            src, dst = rows.column("src").to_numpy(), rows.column("dst").to_numpy()
            own = np.searchsorted(v, np.where(mirror, dst, src))
            local = np.flatnonzero(far_part == p)         # a mirror's far end is always another partition's
            far = np.searchsorted(v, dst[local])
            found = discover(v.size, own[local], far, np.zeros(v.size, np.int64), 1)
            lvid, lsg = found.new_of_old, found.subgraph[found.new_of_old]
            far_lvid, far_lsg = np.full(rows.num_rows, -1, np.int64), np.full(rows.num_rows, -1, np.int64)
            far_lvid[local], far_lsg[local] = lvid[far], lsg[far]
            order = np.argsort(lvid, kind="stable")
            put_exchange(fs, _exchange_files(exchange, "vertex-pieces", [p])[1][0], pa.table({
                "lsg": lsg[order], "id": members.column("id").take(pa.array(order)),
                **({"vattrs": members.column("vattrs").take(pa.array(order))}
                   if "vattrs" in members.column_names else {})}), np.zeros(v.size, np.int64), 1)
            put_exchange(fs, _exchange_files(exchange, "edge-pieces", [p])[1][0], pa.table({
                "eid": rows.column("eid"), "mirror": mirror, "far_part": far_part, "lvid": lvid[own],
                "lsg": lsg[own], "far_lvid": far_lvid, "far_lsg": far_lsg,
                **({"attrs": rows.column("attrs")} if "attrs" in rows.column_names else {})}),
                np.zeros(rows.num_rows, np.int64), 1)
            cut = np.flatnonzero(far_part != p)
            put_exchange(fs, _exchange_files(exchange, "far", [p])[1][0], pa.table({
                "key": 2 * rows.column("eid").to_numpy()[cut] + mirror[cut], "lvid": lvid[own[cut]],
                "lsg": lsg[own[cut]]}), far_part[cut].astype(np.int64), k)
            yield pa.RecordBatch.from_pydict({"part": np.array([p], np.int32), "vertices": np.array([v.size], np.int64),
                                              "subgraphs": np.array([int(lsg.max()) + 1 if v.size else 0], np.int64)})


# --------------------------------------------------------------------------- write

_WRITTEN = "part int, vertices boolean, edges boolean, num_edges long, local_edges long, cut_edges long, " \
           "largest long, bins array<long>"
_WRITTEN_ARROW = pa.schema([("part", pa.int32()), ("vertices", pa.bool_()), ("edges", pa.bool_()),
                            ("num_edges", pa.int64()), ("local_edges", pa.int64()), ("cut_edges", pa.int64()),
                            ("largest", pa.int64()), ("bins", pa.list_(pa.int64()))])


def _vertex_table(rows: pa.Table, id_type: pa.DataType, attributes: pa.Schema) -> pa.Table:
    columns = {"vid": rows.column("vid").cast(pa.int64()), "id": rows.column("id").cast(id_type),
               "sg": rows.column("sg").cast(pa.int64())}
    if len(attributes):
        values = rows.column("vattrs").combine_chunks()     # null for vertices only in the edges
        for field, child in zip(attributes, values.flatten()):
            columns[field.name] = child.cast(field.type)
    return pa.table(columns)


def _edge_table(rows: pa.Table, attributes: pa.Schema) -> pa.Table:
    columns = {"eid": rows.column("eid"), "src": rows.column("src"), "dst": rows.column("dst"),
               "remote": rows.column("remote"), "mirror": rows.column("mirror"),
               "dst_part": rows.column("dst_part").cast(pa.int32()), "dst_sg": rows.column("dst_sg")}
    if len(attributes):
        values = rows.column("attrs").combine_chunks()
        for i, field in enumerate(attributes):
            columns[field.name] = values.field(i).cast(field.type)
    return pa.table(columns)


def _edge_statistics(rows: pa.Table) -> tuple[dict, pa.Table, dict]:
    """Per sub-graph local/cut counts (``{"sg", "local", "cut"}``, by source sub-graph), the
    meta-graph rows ``(sg, nbr_sg, edges)`` of canonical cut edges, sorted, and the partition's
    edge counts."""
    remote = rows.column("remote").to_numpy(zero_copy_only=False)
    mirror = rows.column("mirror").to_numpy(zero_copy_only=False)
    src_sg, dst_sg = rows.column("src_sg").to_numpy(), rows.column("dst_sg").to_numpy()
    canonical = ~mirror
    sgs, where = np.unique(src_sg, return_inverse=True)
    counts = {"sg": sgs, "local": np.bincount(where, weights=canonical & ~remote, minlength=sgs.size).astype(np.int64),
              "cut": np.bincount(where, weights=remote, minlength=sgs.size).astype(np.int64)}
    crossing = canonical & remote
    pairs = pd.DataFrame({"sg": src_sg[crossing], "nbr_sg": dst_sg[crossing]}).groupby(["sg", "nbr_sg"]).size()
    meta = pa.table({"sg": pairs.index.get_level_values(0).to_numpy(np.int64),
                     "nbr_sg": pairs.index.get_level_values(1).to_numpy(np.int64), "edges": pairs.to_numpy(np.int64)})
    totals = {"num_edges": int(canonical.sum()), "local_edges": int((canonical & ~remote).sum()),
              "cut_edges": int(crossing.sum())}
    return counts, meta, totals


def _subgraph_file(table):
    columns = ["sg", "partition", "num_vertices", "local_edges", "cut_edges"]
    if table is None:
        return pa.table({"sg": pa.array([], pa.int64()), "partition": pa.array([], pa.int32()),
                         **{c: pa.array([], pa.int64()) for c in columns[2:]}})
    order = np.argsort(table.column("sg").to_numpy(), kind="stable")
    table = table.take(pa.array(order))
    return pa.table({"sg": table.column("sg"), "partition": table.column("partition").cast(pa.int32()),
                     **{c: table.column(c).cast(pa.int64()) for c in columns[2:]}})


def _metagraph_file(table):
    if table is None:
        frame = pd.DataFrame({"sg": np.array([], np.int64), "nbr_sg": np.array([], np.int64),
                              "edges": np.array([], np.int64)})
    else:
        frame = table.to_pandas().sort_values(["sg", "nbr_sg"], kind="stable", ignore_index=True)
    return pa.Table.from_pandas(frame[["sg", "nbr_sg", "edges"]].astype(np.int64), preserve_index=False)


def _write_template(run, path, fs, data, found: _Discovered, described: _Edges, k) -> dict:
    """Task p writes partition p's vertex and edge files (:func:`_write_partition`), then one
    task the sub-graph and meta-graph tables from the pieces they left (:func:`_write_tables`);
    returns the manifest's statistics, from what the partition tasks returned."""
    spark = run.spark
    offsets = found.offsets
    tables = run.scratch.directory()
    task = forgets_zip_importers(functools.partial(
        _write_partition, path, data, found, k, tables, described.id_type,
        described.vertices.attributes if described.vertices is not None else pa.schema([]), described.attributes))
    with run.step("partition files"):
        written = {r["part"]: r for r in _indices(spark, k).mapInArrow(task, _WRITTEN).collect()}
    with run.step("sub-graph and meta-graph tables"):
        spark.range(0, 1, 1, 1).mapInArrow(forgets_zip_importers(functools.partial(_write_tables, path, data, tables, k)),
                                           "rows long").collect()
    _write_empty_partitions(fs, data, k, {p for p, r in written.items() if r["vertices"]},
                            {p for p, r in written.items() if r["edges"]}, described)
    partitions, bins = [], np.zeros(64, np.int64)
    for p in range(k):
        r = written.get(p)
        partitions.append({
            "id": p,
            "vertex_offset": int(offsets["vertex"][p]),
            "num_vertices": int(offsets["vertex"][p + 1] - offsets["vertex"][p]),
            "num_edges": int(r["num_edges"]) if r else 0,
            "local_edges": int(r["local_edges"]) if r else 0,
            "cut_edges": int(r["cut_edges"]) if r else 0,
            "subgraph_offset": int(offsets["subgraph"][p]),
            "num_subgraphs": int(offsets["subgraph"][p + 1] - offsets["subgraph"][p]),
            "largest_subgraph": int(r["largest"]) if r else 0,
        })
        if r:
            bins[:len(r["bins"])] += np.asarray(r["bins"], np.int64)
    return {"partitions": partitions, "cut_edges": sum(p["cut_edges"] for p in partitions),
            "subgraphs": {"count": int(offsets["subgraph"][-1]),
                          "largest": max((p["largest_subgraph"] for p in partitions), default=0),
                          "size_histogram": histogram_from_bins(bins[:np.flatnonzero(bins).max() + 1]
                                                                if bins.any() else bins[:0])}}


def _write_partition(path: str, data: str, found: _Discovered, k: int, tables: str, id_type: pa.DataType,
                     vertex_attributes: pa.Schema, attributes: pa.Schema, batches):
    """Task: partition p's vertex and edge files from its pieces (:func:`_discover_partition`) and the
    far ends' numbers its cut edges were sent, its sub-graph and meta-graph rows as pieces under
    ``tables``, and its statistics returned (:data:`_WRITTEN`); nothing for a partition without
    vertices (its empty files are the driver's: :func:`_write_empty_partitions`)."""
    fs, _ = layout.filesystem(path)
    exchange_fs, far_paths = _exchange_files(found.exchange, "far", range(k))
    vertex_offsets, subgraph_offsets = found.offsets["vertex"], found.offsets["subgraph"]
    for batch in batches:
        for p in batch.column(0).to_pylist():
            own = take_exchange(exchange_fs, _exchange_files(found.exchange, "vertex-pieces", [p])[1], 0)
            if own.num_rows == 0:
                continue
            sg = subgraph_offsets[p] + own.column("lsg").to_numpy()
            vertex_rows = own.drop_columns(["lsg"]).append_column(
                "vid", pa.array(vertex_offsets[p] + np.arange(own.num_rows, dtype=np.int64))) \
                .append_column("sg", pa.array(sg))
            files.put_table(fs, layout.template_vertices(data, p), _vertex_table(vertex_rows, id_type, vertex_attributes))
            rows = take_exchange(exchange_fs, _exchange_files(found.exchange, "edge-pieces", [p])[1], 0)
            yield _write_edges(fs, data, tables, p, rows, take_exchange(exchange_fs, far_paths, p), sg,
                               found.offsets, attributes)


def _write_edges(fs, data: str, tables: str, p: int, rows: pa.Table, far: pa.Table, sg: np.ndarray,
                 offsets: dict, attributes: pa.Schema) -> pa.RecordBatch:
    """Partition p's edge file, canonical edges and the mirrors of the cut edges it holds as destination
    (``src`` its own end), from its edge piece and the far ends' local numbers ``far`` (``key`` =
    2 eid + the sender's ``mirror``); its sub-graph and meta-graph rows; its statistics."""
    eid, mirror = rows.column("eid").to_numpy(), rows.column("mirror").to_numpy(zero_copy_only=False)
    dst_part = rows.column("far_part").to_numpy().astype(np.int64)
    far_lvid, far_lsg = rows.column("far_lvid").to_numpy().copy(), rows.column("far_lsg").to_numpy().copy()
    remote = np.flatnonzero(dst_part != p)
    keys = far.column("key").to_numpy()
    by_key = np.argsort(keys, kind="stable")
    there = by_key[np.searchsorted(keys, 2 * eid[remote] + ~mirror[remote], sorter=by_key)]
    far_lvid[remote], far_lsg[remote] = far.column("lvid").to_numpy()[there], far.column("lsg").to_numpy()[there]
    src = offsets["vertex"][p] + rows.column("lvid").to_numpy()
    src_sg = offsets["subgraph"][p] + rows.column("lsg").to_numpy()
    dst = offsets["vertex"][dst_part] + far_lvid
    dst_sg = offsets["subgraph"][dst_part] + far_lsg
    order = np.lexsort((eid, mirror, dst, src))
    table = pa.table({"eid": eid[order], "src": src[order], "dst": dst[order], "remote": dst_part[order] != p,
                      "mirror": mirror[order], "dst_part": dst_part[order], "dst_sg": dst_sg[order],
                      "src_sg": src_sg[order]})
    if len(attributes):
        table = table.append_column("attrs", rows.column("attrs").take(pa.array(order)))
    if table.num_rows:
        files.put_table(fs, layout.template_edges(data, p), _edge_table(table, attributes))
    counts, meta, totals = _edge_statistics(table)
    subgraph_ids, sizes = np.unique(sg, return_counts=True)
    local, cut = np.zeros(subgraph_ids.size, np.int64), np.zeros(subgraph_ids.size, np.int64)
    where = np.searchsorted(subgraph_ids, counts["sg"])      # an edge's source sub-graph is one of p's
    local[where], cut[where] = counts["local"], counts["cut"]
    scratch_tables_fs, tables_root = layout.filesystem(tables)
    files.put_table(scratch_tables_fs, layout.join(tables_root, "subgraphs", layout.part_file(p)), pa.table({
        "sg": subgraph_ids, "partition": np.full(subgraph_ids.size, p, np.int32),
        "num_vertices": sizes.astype(np.int64),
        "local_edges": local, "cut_edges": cut}))
    files.put_table(scratch_tables_fs, layout.join(tables_root, "metagraph", layout.part_file(p)), meta)
    bins = np.bincount(np.floor(np.log2(sizes)).astype(np.int64)) if sizes.size else np.zeros(0, np.int64)
    return pa.RecordBatch.from_pylist([{
        "part": p, "vertices": True, "edges": table.num_rows > 0, **totals,
        "largest": int(sizes.max()) if sizes.size else 0, "bins": bins.tolist()}],
        schema=_WRITTEN_ARROW)


def _write_tables(path: str, data: str, tables: str, k: int, batches):
    """Task: the sub-graph and meta-graph tables from the partitions' pieces (each sorted, and
    partition p's sub-graph ids all below p+1's, so the pieces in order are the tables)."""
    for _ in batches:
        pass
    fs, _ = layout.filesystem(path)
    tables_fs, root = layout.filesystem(tables)
    for name, build in (("subgraphs", _subgraph_file), ("metagraph", _metagraph_file)):
        pieces = [layout.join(root, name, layout.part_file(p)) for p in range(k)]
        pieces = [pq.read_table(piece, filesystem=tables_fs) for piece in pieces if layout.exists(tables_fs, piece)]
        table = pa.concat_tables(pieces) if pieces else None
        files.put_table(fs, layout.join(data, "template", f"{name}.parquet"),
                        build(table if table is not None and table.num_rows else None))
    yield pa.RecordBatch.from_pydict({"rows": np.zeros(1, np.int64)})


def _write_empty_partitions(fs, data, k, with_vertices, with_edges, described: _Edges) -> None:
    """Partitions that no task saw (no vertices, or no edges) still get their (empty) files."""
    for p in range(k):
        if p not in with_vertices:
            empty = {"vid": pa.array([], pa.int64()), "id": pa.array([], described.id_type),
                     "sg": pa.array([], pa.int64())}
            if described.vertices is not None:
                empty.update({f.name: pa.array([], f.type) for f in described.vertices.attributes})
            empty = pa.table(empty)
            files.put_table(fs, layout.template_vertices(data, p), empty)
        if p not in with_edges:
            empty = {"eid": pa.array([], pa.int64()), "src": pa.array([], pa.int64()),
                     "dst": pa.array([], pa.int64()), "remote": pa.array([], pa.bool_()),
                     "mirror": pa.array([], pa.bool_()), "dst_part": pa.array([], pa.int32()),
                     "dst_sg": pa.array([], pa.int64())}
            empty.update({f.name: pa.array([], f.type) for f in described.attributes})
            files.put_table(fs, layout.template_edges(data, p), pa.table(empty))
