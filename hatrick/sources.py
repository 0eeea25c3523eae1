"""Where updates come from: Structured Streaming sources, and the aging source.

The embedded default is a directory that JSON-lines (or Parquet) files of
updates are dropped into: no server needed, and Spark's file source with a
checkpoint location replays an uncommitted micro-batch after a crash, which the
stream's high-water marks turn into exactly-once. The socket source (one JSON
update per line) is for demos; Kafka works when its connector jar is on
Spark's classpath (``spark.jars.packages`` with
``org.apache.spark:spark-sql-kafka-0-10_2.12:<spark version>``), else a clear
error says so. Each micro-batch reaches the stream through ``foreachBatch``.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from gofs.errors import InputError
from sparkshim.compat import jvm_has_class


def update_schema(id_type: str) -> str:
    """Spark DDL of an update row; ``value`` is text (parsed per attribute kind when applied)."""
    t = "bigint" if id_type == "int64" else "string"
    return (f"op string, id {t}, src {t}, dst {t}, attribute string, value string, "
            f"producer string, seq bigint, time double")


def file_source(spark, path: str, id_type: str, format: str = "json", max_files_per_trigger: int | None = None):
    """A streaming DataFrame of the update files appearing in directory ``path``, with the file of
    each row (``_file``) and, for JSON lines, its text (``_line``), so that a bad row is reported
    with its file and line. Blank lines are skipped."""
    from pyspark.sql import functions as F

    if format not in ("json", "parquet"):
        raise InputError(f"format must be 'json' (JSON lines) or 'parquet', got {format!r}")
    reader = spark.readStream
    if max_files_per_trigger:
        reader = reader.option("maxFilesPerTrigger", int(max_files_per_trigger))
    if format == "parquet":
        return reader.schema(update_schema(id_type)).parquet(path).withColumn("_file", F.input_file_name())
    lines = reader.text(path).where(F.trim("value") != "")
    return lines.select(F.from_json("value", update_schema(id_type)).alias("u"), F.col("value").alias("_line"),
                        F.input_file_name().alias("_file")).select("u.*", "_line", "_file")


def source_lines(files: np.ndarray, lines: np.ndarray | None) -> list[str]:
    """Where each row came from: ``<file> line <n>`` (the first line of the file with that text,
    found by reading the file: only done for rows being reported), or ``<file>``."""
    from urllib.parse import unquote, urlparse

    numbers: dict = {}
    out = []
    for i, uri in enumerate(files):
        parsed = urlparse(str(uri))
        path = unquote(parsed.path) if parsed.scheme in ("file", "") else str(uri)
        if lines is None:
            out.append(path)
            continue
        if path not in numbers:
            try:
                with open(path, encoding="utf-8", errors="replace") as f:
                    numbers[path] = {}
                    for k, text in enumerate(f, 1):
                        numbers[path].setdefault(text.rstrip("\r\n"), k)
            except OSError:
                numbers[path] = {}
        k = numbers[path].get(str(lines[i]).rstrip("\r\n"))
        out.append(f"{path} line {k}" if k else path)
    return out


def socket_source(spark, host: str, port: int, id_type: str):
    """Updates as JSON lines from a TCP socket (Spark's socket source; for demos, not fault tolerant)."""
    from pyspark.sql import functions as F

    lines = spark.readStream.format("socket").option("host", host).option("port", int(port)).load()
    return lines.select(F.from_json("value", update_schema(id_type)).alias("u")).select("u.*")


def kafka_source(spark, servers: str, topic: str, id_type: str, starting_offsets: str = "earliest"):
    """Updates as JSON messages on a Kafka topic; needs the spark-sql-kafka connector on the classpath."""
    from pyspark.sql import functions as F

    if not jvm_has_class(spark, "org.apache.spark.sql.kafka010.KafkaSourceProvider"):
        raise InputError("Kafka source: the spark-sql-kafka-0-10 connector is not on Spark's classpath; start "
                         "Spark with spark.jars.packages=org.apache.spark:spark-sql-kafka-0-10_2.12:"
                         f"{spark.version}")
    raw = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", servers)
           .option("subscribe", topic).option("startingOffsets", starting_offsets).load())
    return raw.select(F.from_json(F.col("value").cast("string"), update_schema(id_type)).alias("u")).select("u.*")


def _trigger(trigger: str) -> dict:
    if trigger == "availableNow":
        return {"availableNow": True}
    if trigger == "once":
        return {"once": True}
    if trigger.startswith("processingTime="):
        return {"processingTime": trigger.split("=", 1)[1]}
    raise InputError(f"trigger must be 'availableNow', 'once' or 'processingTime=<interval>', got {trigger!r}")


def start_query(stream, source, format: str, trigger: str, checkpoint_location: str,
                max_files_per_trigger: int | None):
    """Start a Structured Streaming query that feeds ``stream`` batch by batch."""
    spark = stream.graph.spark
    if isinstance(source, str):
        frame = file_source(spark, source, stream.id_type, format, max_files_per_trigger)
    elif getattr(source, "isStreaming", False):
        missing = {"op", "producer", "seq"} - set(source.columns)
        if missing:
            raise InputError(f"streaming source: missing column(s) {sorted(missing)} (columns: {source.columns})")
        frame = source
    else:
        raise InputError(f"source must be a directory path or a streaming DataFrame, got {type(source).__name__}")
    return (frame.writeStream.foreachBatch(stream._foreach_batch)
            .option("checkpointLocation", checkpoint_location).trigger(**_trigger(trigger)).start())


def aging_updates(src: np.ndarray, dst: np.ndarray, time: float, first_seq: int,
                  producer: str = "aging") -> pd.DataFrame:
    """Removals of the stale edge copies ``src``-``dst`` (see
    :meth:`hatrick.partitioned.PartitionedGraph.stale_edges`) at event time ``time``.

    Emitted by producer ``producer`` with seqs from ``first_seq``; the removals are derived from
    the live graph alone, so after a restart the same ones are emitted again and de-duplicated."""
    if not len(src):
        return pd.DataFrame(columns=["op", "src", "dst", "producer", "seq", "time"])
    return pd.DataFrame({"op": "remove_edge", "src": src, "dst": dst, "producer": producer,
                         "seq": np.arange(first_seq, first_seq + len(src)), "time": time})
