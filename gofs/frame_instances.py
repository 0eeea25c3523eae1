"""Append an instance whose vertex values are a Spark DataFrame, aligned and written on the executors.

The driver never collects the values or the graph's ids: each Spark task reads
the id column of its own partitions, joins, and writes that partition's
row-aligned instance file; the driver checks the outcome and commits one log
entry (:mod:`gofs.manifest`). Types are Spark's own, carried as Arrow (a
nullable integer stays an integer).
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from gofs import files, housekeeping, layout, manifest as manifest_io
from gofs.errors import InputError
from gofs.instances import after_commit, check_schema, log_entry, open_for_append, static_types, time_range, \
    with_template_values
from sparkshim.compat import arrow_schema, forgets_zip_importers, spark_schema

_P, _VID, _GIVEN = "_gofs_partition", "_gofs_vid", "_gofs_given"    # named apart from any user column


def append_vertex_frame(path: str, frame, start: float, end: float | None = None, columns=None, spark=None) -> int:
    """Append one instance holding ``frame``'s columns as vertex attributes; returns its id.

    Parameters
    ----------
    path : the GoFS graph.
    frame : Spark DataFrame with an ``id`` column (the graph's vertex ids) and the values;
        vertices it does not mention get nulls (a column named like a static attribute
        overrides it for the vertices it mentions; the others keep the template's value).
    start, end : the instance's time range (``end`` defaults to ``start``).
    columns : which columns to keep (default: all but ``id``).

    Raises InputError naming the column or id if ``frame`` lacks ``id``, mentions a
    vertex the graph does not have or one vertex twice, or a column's type differs
    from earlier instances; nothing is committed then.
    """
    names = [c for c in frame.columns if c != "id"] if columns is None else list(columns)
    if "id" not in frame.columns:
        raise InputError(f"result frame: no 'id' column (columns: {frame.columns})")
    unknown = [c for c in names if c not in frame.columns]
    if unknown:
        raise InputError(f"result frame: no column '{unknown[0]}' (columns: {frame.columns})")
    values = frame.select("id", *names)
    types = arrow_schema(values.schema)
    spark = spark or frame.sparkSession
    fs, root = layout.filesystem(path)
    with open_for_append(fs, root) as (snapshot, locked):
        manifest = snapshot.manifest
        where = f"instance (start={start})"
        start, end = time_range(start, end, manifest, where)
        vschema = manifest_io.field_types(manifest["instance_schema"]["vertex"], f"{path}: instance schema")
        static = static_types(manifest, "vertex")
        attributes = pa.schema([types.field(c) for c in names])
        overrides = check_schema("vertex", attributes.empty_table(), vschema, static, f"{where} vertex values")
        attributes = pa.schema([pa.field(f.name, static[f.name]) if f.name in static else f for f in attributes])
        _check_id_type(types.field("id").type, manifest["id_type"], where)
        data = layout.version_root(root, snapshot.version)
        iid = housekeeping.next_instance_id(fs, data, snapshot)
        keys = _vertex_keys(spark, path, data, manifest)
        _validate(values, keys, where)
        try:
            _write_aligned(spark, path, data, manifest, iid, values, keys, attributes, overrides, where)
            vschema.update({f.name: f.type for f in attributes if f.name not in static})
            entry = {"op": "append", "data": snapshot.version,
                     "instances": [log_entry(iid, start, end, attributes.empty_table(), None, (None, None, None),
                                             {"vertex": overrides})],
                     "instance_schema": {"vertex": manifest_io.schema_fields(pa.schema(list(vschema.items()))),
                                         "edge": manifest["instance_schema"]["edge"]}}
            manifest_io.commit(fs, root, snapshot.head + 1, entry, durable=[layout.instance_dir(data, iid)])
        except manifest_io.CommitConflict:
            raise
        except BaseException:
            layout.remove(fs, layout.instance_dir(data, iid))
            raise
        after_commit(fs, root, locked)
    return iid


def _check_id_type(id_type: pa.DataType, graph_id_type: str, where: str) -> None:
    if pa.types.is_integer(id_type) != (graph_id_type == "int64"):
        raise InputError(f"{where} vertex values, field 'id': ids are {id_type} but the graph's ids are {graph_id_type}")


def _vertex_keys(spark, path: str, data: str, manifest: dict):
    """DataFrame (partition, vid, id) of every vertex, read by one task per partition."""
    k = manifest["num_partitions"]
    offsets = [q["vertex_offset"] for q in manifest["partitions"]]
    id_type = pa.int64() if manifest["id_type"] == "int64" else pa.string()
    schema = pa.schema([(_P, pa.int32()), (_VID, pa.int64()), ("id", id_type)])

    @forgets_zip_importers
    def read(batches):
        fs, _ = layout.filesystem(path)
        for batch in batches:
            for p in batch.column(0).to_pylist():
                ids = files.read_columns(fs, layout.template_vertices(data, p), ["id"]).column("id").cast(id_type)
                yield from pa.table({_P: pa.array(np.full(len(ids), p, np.int32)),
                                     _VID: pa.array(np.arange(offsets[p], offsets[p] + len(ids), dtype=np.int64)),
                                     "id": ids}, schema=schema).to_batches()

    seeds = spark.createDataFrame([(p,) for p in range(k)], "p int").repartition(max(k, 1))
    return seeds.mapInArrow(read, spark_schema(schema))


def _validate(values, keys, where: str) -> None:
    """Every id present, known to the graph and given once: one Spark job, first problem only."""
    from pyspark.sql import functions as F

    problem = values.select("id").join(keys.select("id", _P), "id", "left").groupBy("id") \
        .agg(F.count("*").alias("n"), F.max(F.col(_P).isNull().cast("int")).alias("unknown")) \
        .where((F.col("n") > 1) | (F.col("unknown") == 1)).limit(1).collect()
    if not problem:
        return
    row = problem[0]
    if row["id"] is None:
        raise InputError(f"{where} vertex values, field 'id': a vertex id is missing (null)")
    if row["unknown"]:
        raise InputError(f"{where} vertex values, field 'id': unknown vertex {row['id']!r}")
    raise InputError(f"{where} vertex values, field 'id': vertex {row['id']!r} given twice")


def _write_aligned(spark, path: str, data: str, manifest: dict, iid: int, values, keys, attributes: pa.Schema,
                   overrides: list[str], where: str):
    """Each task writes the instance file of the partitions it holds, rows in template order
    (override columns completed from the template's values where the frame names no vertex)."""
    from pyspark.sql import functions as F

    k = manifest["num_partitions"]
    names = attributes.names

    @forgets_zip_importers
    def write(batches):
        fs, _ = layout.filesystem(path)
        batches = [b for b in batches if b.num_rows]
        if not batches:
            return
        table = pa.Table.from_batches(batches)
        for p in np.unique(table.column(_P).to_numpy()):
            rows = table.filter(pa.compute.equal(table.column(_P), int(p)))
            rows = rows.take(pa.array(np.argsort(rows.column(_VID).to_numpy(), kind="stable")))
            given = rows.column(_GIVEN).is_valid().to_numpy(zero_copy_only=False)
            if overrides:
                template = files.read_columns(fs, layout.template_vertices(data, int(p)), overrides)
            aligned = pa.table({n: with_template_values(rows.column(n).combine_chunks(), given,
                                                        template.column(n).combine_chunks(), f"{where}, field '{n}'")
                                if n in overrides else rows.column(n).cast(attributes.field(n).type)
                                for n in names}, schema=attributes)
            files.write_table(fs, layout.instance_vertices(data, iid, int(p)), aligned)
            yield pa.RecordBatch.from_pydict({"p": pa.array([int(p)], pa.int32()),
                                              "rows": pa.array([aligned.num_rows], pa.int64())})

    aligned = keys.join(values.withColumn(_GIVEN, F.lit(True)), "id", "left").select(_P, _VID, _GIVEN, *names) \
        .repartition(max(k, 1), F.col(_P))
    written = {r["p"]: r["rows"] for r in aligned.mapInArrow(write, "p int, rows long").collect()}
    fs, _ = layout.filesystem(path)
    for p, info in enumerate(manifest["partitions"]):
        if info["num_vertices"] == 0:
            files.write_table(fs, layout.instance_vertices(data, iid, p), attributes.empty_table())
        elif written.get(p) != info["num_vertices"]:
            raise RuntimeError(f"{layout.instance_vertices(data, iid, p)}: wrote {written.get(p)} rows, "
                               f"expected {info['num_vertices']}")
