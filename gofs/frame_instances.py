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
from gofs.instances import _check_schema, _entry, after_commit, open_for_append
from sparkshim.compat import arrow_schema, forgets_zip_importers, spark_schema

_P, _VID = "_gofs_partition", "_gofs_vid"      # key columns, named apart from any user column


def append_vertex_frame(path: str, frame, start: float, end: float | None = None, columns=None, spark=None) -> int:
    """Append one instance holding ``frame``'s columns as vertex attributes; returns its id.

    Parameters
    ----------
    path : the GoFS graph.
    frame : Spark DataFrame with an ``id`` column (the graph's vertex ids) and the values;
        vertices it does not mention get nulls.
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
        start, end = _time_range(start, end, manifest, where)
        vschema = manifest_io.field_types(manifest["instance_schema"]["vertex"], f"{path}: instance schema")
        static = {f["name"] for f in manifest["vertex_schema"]} | {"id", "vid", "sg", "instance", "start", "end"}
        attributes = pa.schema([types.field(c) for c in names])
        _check_schema("vertex", attributes.empty_table(), vschema, static, f"{where} vertex values")
        _check_id_type(types.field("id").type, manifest["id_type"], where)
        data = layout.version_root(root, snapshot.version)
        iid = housekeeping.next_instance_id(fs, data, snapshot)
        keys = _vertex_keys(spark, path, data, manifest)
        _validate(values, keys, where)
        try:
            _write_aligned(spark, path, data, manifest, iid, values, keys, attributes)
            vschema.update({f.name: f.type for f in attributes})
            entry = {"op": "append", "data": snapshot.version,
                     "instances": [_entry(iid, start, end, attributes.empty_table(), None, (None, None, None))],
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


def _time_range(start, end, manifest: dict, where: str) -> tuple[float, float]:
    try:
        start = float(start)
        end = float(end if end is not None else start)
    except (TypeError, ValueError):
        raise InputError(f"{where}: start/end must be numbers") from None
    if not (np.isfinite(start) and np.isfinite(end)) or end < start:
        raise InputError(f"{where}: need finite start <= end, got start {start}, end {end}")
    if manifest["instances"] and start < manifest["instances"][-1]["start"]:
        raise InputError(f"{where}: starts before the previous instance ({manifest['instances'][-1]['start']}); "
                         "instances are appended in time order")
    return start, end


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


def _write_aligned(spark, path: str, data: str, manifest: dict, iid: int, values, keys, attributes: pa.Schema):
    """Each task writes the instance file of the partitions it holds, rows in template order."""
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
            aligned = pa.table({n: rows.column(n).cast(attributes.field(n).type) for n in names}, schema=attributes)
            files.write_table(fs, layout.instance_vertices(data, iid, int(p)), aligned)
            yield pa.RecordBatch.from_pydict({"p": pa.array([int(p)], pa.int32()),
                                              "rows": pa.array([aligned.num_rows], pa.int64())})

    aligned = keys.join(values, "id", "left").select(_P, _VID, *names).repartition(max(k, 1), F.col(_P))
    written = {r["p"]: r["rows"] for r in aligned.mapInArrow(write, "p int, rows long").collect()}
    fs, _ = layout.filesystem(path)
    for p, info in enumerate(manifest["partitions"]):
        if info["num_vertices"] == 0:
            files.write_table(fs, layout.instance_vertices(data, iid, p), attributes.empty_table())
        elif written.get(p) != info["num_vertices"]:
            raise RuntimeError(f"{layout.instance_vertices(data, iid, p)}: wrote {written.get(p)} rows, "
                               f"expected {info['num_vertices']}")
