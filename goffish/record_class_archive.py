"""Record the Spark driver JVM's class-data archive (:mod:`goffish.class_archive`) from a short job
like a user's first one: ``python -m goffish.record_class_archive`` (``./run.sh`` does it once at
set-up). The JVM writes the archive beside its final name when it exits; it is renamed into
place only once that JVM has ended cleanly, so no session ever maps part of one.
"""
from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from goffish.class_archive import JAVA_OPTIONS, QUIET, SETTING, default_path
from gofs.errors import SetupError


def build(path: Path | None = None, master: str = "local[2]") -> Path | None:
    """Record the archive at ``path`` (default: this runtime's, :func:`goffish.class_archive.default_path`)
    unless it exists, in this process, which must not have started a JVM yet."""
    from sparkshim.compat import end_jvm, jvm_started

    path = path or default_path()
    if path is None or path.is_file():
        return path
    if jvm_started():
        raise SetupError("goffish.record_class_archive: this process already has a JVM; run it in a fresh one")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, pending = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    os.close(fd)
    os.unlink(pending)                           # the JVM creates it
    try:
        spark = _session(pending, master)
        _first_job(spark)
        spark.stop()
        if end_jvm() != 0 or not os.path.getsize(pending):
            raise SetupError("goffish.record_class_archive: the JVM did not write its archive")
        os.replace(pending, path)
    finally:
        if os.path.exists(pending):
            os.unlink(pending)
    return path


def _session(pending: str, master: str):
    import goffish

    return goffish.session(master=master, conf={JAVA_OPTIONS: f"-XX:ArchiveClassesAtExit={pending} {QUIET}",
                                                SETTING: "off", "spark.ui.showConsoleProgress": "false"})


def _first_job(spark) -> None:
    """What a user's first job does: ingest, a Gopher run, then the usual first things done with
    its DataFrame (an aggregate, a grouping, a filter, pandas, a Parquet write)."""
    from pyspark.sql import functions as F

    import goffish
    from goffish.demo import SAMPLE
    from gofs.ingest.read_local import read_edge_list

    with tempfile.TemporaryDirectory(prefix="goffish-class-archive-") as work:
        g = goffish.ingest(read_edge_list(SAMPLE, weight="length"), os.path.join(work, "sample.gofs"),
                           num_partitions=4, spark=spark)
        result = g.connected_components(progress=False)
        frame = result.dataframe
        frame.agg(F.count(F.lit(1)), F.sum(F.when(~F.isnan("component"), F.col("component")).cast("double"))).first()
        frame.groupBy("component").count().orderBy(F.desc("count")).limit(3).collect()
        frame.filter(F.col("component") >= 0).toPandas()
        frame.write.parquet(os.path.join(work, "components.parquet"))
        result.to_arrow()
        result.unpersist()


if __name__ == "__main__":
    built = build()
    print(f"goffish: JVM class-data archive {built or 'not built (no Java found)'}", file=sys.stderr)
