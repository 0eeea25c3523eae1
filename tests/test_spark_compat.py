"""The private-PySpark shims in sparkshim.compat: each still works, and no other module uses internals.

A PySpark upgrade fails ``test_pyspark_version_is_one_the_shims_were_tested_on`` first: re-check
every shim against the new version (Spark 4 has public replacements for some), then add it.
"""
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pyarrow as pa
import pyspark
import pytest

from sparkshim import compat as spark_compat

ROOT = Path(__file__).resolve().parents[1]
PRIVATE = re.compile(r"\._jsc\b|\._jvm\b|\._gateway\b|\._jdf\b|_collect_as_arrow|_ensure_initialized|pyspark\.sql\.pandas\.types")


def test_pyspark_version_is_one_the_shims_were_tested_on():
    version = ".".join(pyspark.__version__.split(".")[:2])
    assert version in spark_compat.TESTED_SPARK, (
        f"PySpark {pyspark.__version__}: sparkshim.compat was tested on {spark_compat.TESTED_SPARK} only; "
        "check each shim against this version before adding it")


def test_no_module_but_the_shim_touches_spark_internals():
    offenders = []
    for package in ("sparkshim", "gofs", "gopher", "algorithms", "hatrick", "goffish"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if path.relative_to(ROOT).as_posix() == "sparkshim/compat.py":
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if PRIVATE.search(line):
                    offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert offenders == []


def test_schemas_convert_both_ways():
    schema = pa.schema([("id", pa.int64()), ("name", pa.string()), ("tags", pa.list_(pa.string())),
                        ("when", pa.timestamp("us", tz="UTC")), ("x", pa.float32())])
    struct = spark_compat.spark_schema(schema)
    assert [f.name for f in struct.fields] == schema.names
    back = spark_compat.arrow_schema(struct)
    assert back.names == schema.names and back.field("x").type == pa.float32()


def test_schema_conversions_match_pysparks_own_without_importing_distutils():
    """The shim maps types with public classes; PySpark's internal converter is the oracle (it
    imports distutils on every call, the 0.1 s the shim saves a first run)."""
    from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
    from pyspark.sql.types import StructField, StructType, TimestampNTZType

    types = [pa.bool_(), pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.float32(), pa.float64(), pa.string(),
             pa.large_string(), pa.binary(), pa.large_binary(), pa.date32(), pa.timestamp("us", tz="UTC"),
             pa.timestamp("ms"), pa.duration("s"), pa.null(), pa.decimal128(10, 2), pa.list_(pa.int32()),
             pa.map_(pa.string(), pa.float64()), pa.struct([("a", pa.int64()), ("b", pa.list_(pa.string()))]),
             pa.dictionary(pa.int32(), pa.string())]
    schema = pa.schema([pa.field(f"c{i}", t, nullable=i % 2 == 0 or t == pa.null()) for i, t in enumerate(types)])
    struct = spark_compat.spark_schema(schema)
    assert struct == from_arrow_schema(schema)
    assert spark_compat.arrow_schema(struct) == to_arrow_schema(struct)
    ntz = StructType([StructField("t", TimestampNTZType())])
    assert spark_compat.arrow_schema(ntz) == to_arrow_schema(ntz)
    with pytest.raises(TypeError, match="uint8"):
        spark_compat.spark_schema(pa.schema([("u", pa.uint8())]))
    script = ("import sys, pyarrow as pa; from sparkshim import compat; "
              "compat.arrow_schema(compat.spark_schema(pa.schema([('x', pa.int64())]))); "
              "print('distutils' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=ROOT).stdout.strip() == "False"


def test_settings_before_sql_state_are_what_the_runtime_conf_says(spark):
    fresh = spark.newSession()                     # its SQL state is built on first use
    keys = ("spark.master", "spark.app.name", "spark.sql.shuffle.partitions", "spark.goffish.unset")
    early = spark_compat.settings_before_sql_state(fresh, keys)
    assert early == {key: fresh.conf.get(key, None) for key in keys} and early["spark.goffish.unset"] is None
    assert spark_compat.settings_before_sql_state(fresh, keys) is None      # built by fresh.conf


def test_collect_arrow_keeps_nullable_integers_exact(spark):
    df = spark.createDataFrame([(1, 2**60 + 1), (2, None)], "id long, big long")
    table = spark_compat.collect_arrow(df)
    assert table.schema.field("big").type == pa.int64()
    assert sorted(table.to_pylist(), key=lambda r: r["id"]) == [{"id": 1, "big": 2**60 + 1}, {"id": 2, "big": None}]
    assert spark_compat.collect_arrow(df.where("id < 0")).num_rows == 0


def test_release_local_checkpoint_frees_its_blocks(spark):
    before = spark_compat.persistent_rdd_ids(spark)
    checkpoint = spark.range(100).localCheckpoint()
    assert len(spark_compat.persistent_rdd_ids(spark) - before) == 1
    spark_compat.release_local_checkpoint(checkpoint)
    assert spark_compat.persistent_rdd_ids(spark) - before == set()


def test_thread_properties_carry_the_callers_local_properties_to_another_thread(spark):
    sc = spark.sparkContext
    sc.setLocalProperty("goffish.test.carried", "yes")
    try:
        properties = spark_compat.thread_properties(spark)
    finally:
        sc.setLocalProperty("goffish.test.carried", None)
    seen = []

    def other():
        spark_compat.adopt_thread_properties(spark, properties)
        seen.append(sc.getLocalProperty("goffish.test.carried"))

    thread = threading.Thread(target=other)
    thread.start()
    thread.join()
    assert seen == ["yes"] and sc.getLocalProperty("goffish.test.carried") is None


def test_forget_zip_importers_caches_none_and_imports_from_the_zip_still_work(spark):
    def task(numbers):
        import importlib
        import sys
        import zipimport

        from sparkshim.compat import forget_zip_importers

        list(numbers)
        importlib.import_module("pyspark.sql.avro")       # from pyspark.zip: caches a zip importer
        before = sum(isinstance(f, zipimport.zipimporter) for f in sys.path_importer_cache.values())
        forget_zip_importers()
        after = sum(isinstance(f, zipimport.zipimporter) for f in sys.path_importer_cache.values())
        module = importlib.import_module("pyspark.sql.avro.functions")     # needs one again
        yield before, after, module.__name__

    [(before, after, name)] = spark.sparkContext.parallelize([0], 1).mapPartitions(task).collect()
    assert before > 0 and after == 0 and name == "pyspark.sql.avro.functions"


def test_forgets_zip_importers_passes_rows_through_and_leaves_none_however_the_task_ends(spark):
    def task(numbers):
        import importlib
        import sys
        import zipimport

        from sparkshim.compat import forgets_zip_importers

        def zip_importers():
            return sum(isinstance(f, zipimport.zipimporter) for f in sys.path_importer_cache.values())

        def failing(rows):
            yield from rows
            raise ValueError("the program failed")

        importlib.import_module("pyspark.sql.avro")           # from pyspark.zip: caches a zip importer
        counts = [zip_importers()]
        rows = list(forgets_zip_importers(lambda rows: (2 * r for r in rows))(numbers))
        counts.append(zip_importers())
        importlib.import_module("pyspark.sql.protobuf")       # caches one again
        counts.append(zip_importers())
        try:
            list(forgets_zip_importers(failing)(iter([1])))
        except ValueError:
            counts.append(zip_importers())
        yield rows, counts

    [(rows, counts)] = spark.sparkContext.parallelize([1, 2, 3], 1).mapPartitions(task).collect()
    assert rows == [2, 4, 6]
    assert counts[0] > 0 and counts[1] == 0 and counts[2] > 0 and counts[3] == 0 and len(counts) == 4


def test_connect_to_submitted_jvm_is_harmless_when_connected(spark):
    spark_compat.connect_to_submitted_jvm()
    assert spark.range(3).count() == 3


def test_driver_jvm_pid_is_the_java_process_this_session_started(spark):
    pid = spark_compat.driver_jvm_pid(spark)
    with open(f"/proc/{pid}/stat") as stat:
        name, rest = stat.read().split(") ", 1)
    assert name.endswith("(java") and int(rest.split()[1]) == os.getpid()     # its parent: this process


def test_end_jvm_ends_this_processs_jvm_and_waits_for_it():
    """In a fresh process (the tests' own JVM must live on): the JVM exits cleanly, as a JVM that
    writes a class-data archive at exit must; a process without one gets None."""
    script = ("from pyspark import SparkContext\n"
              "from sparkshim.compat import end_jvm, jvm_started\n"
              "print('NONE', end_jvm())\n"
              "sc = SparkContext('local[1]', 'end-jvm')\n"
              "process = SparkContext._gateway.proc\n"
              "sc.stop()\n"
              "print('CODE', end_jvm(), process.poll(), jvm_started())\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "NONE None" in done.stdout and "CODE 0 0 False" in done.stdout
