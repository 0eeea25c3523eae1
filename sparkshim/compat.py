"""The only place that touches PySpark internals; each use says why no public API does.

``tests/test_spark_compat.py`` exercises every function here and checks the
PySpark version against :data:`TESTED_SPARK`, so a Spark upgrade fails that test
first and loudly, instead of some run later. When upgrading: Spark 4 has
public ``DataFrame.toArrow()`` (replaces :func:`collect_arrow`) and
``DataFrame.localCheckpoint(storageLevel=...)``.
"""
from __future__ import annotations

import functools
import os
import weakref

import pyarrow as pa

TESTED_SPARK = ("3.5",)


def spark_schema(schema: pa.Schema):
    """Arrow schema -> Spark StructType (for ``mapInArrow`` and reading result files), the
    mapping of PySpark 3.5's internal ``from_arrow_type`` made from public types: that one
    imports ``distutils`` on every call, 0.1 s of a first run's driver time."""
    from pyspark.sql.types import StructField, StructType

    return StructType([StructField(f.name, _spark_type(f.type), nullable=f.nullable) for f in schema])


def arrow_schema(struct) -> pa.Schema:
    """Spark StructType -> Arrow schema (PySpark 3.5's ``to_arrow_type`` from public types, as above)."""
    return pa.schema([pa.field(f.name, _arrow_type(f.dataType), nullable=f.nullable) for f in struct.fields])


@functools.cache
def _plain_types() -> tuple:
    """(Arrow type test, Spark type, Arrow type Spark writes) for the types without parameters."""
    from pyspark.sql import types as T

    t = pa.types
    return ((t.is_boolean, T.BooleanType(), pa.bool_()), (t.is_int8, T.ByteType(), pa.int8()),
            (t.is_int16, T.ShortType(), pa.int16()), (t.is_int32, T.IntegerType(), pa.int32()),
            (t.is_int64, T.LongType(), pa.int64()), (t.is_float32, T.FloatType(), pa.float32()),
            (t.is_float64, T.DoubleType(), pa.float64()), (t.is_string, T.StringType(), pa.string()),
            (t.is_large_string, T.StringType(), pa.string()), (t.is_binary, T.BinaryType(), pa.binary()),
            (t.is_large_binary, T.BinaryType(), pa.binary()), (t.is_date32, T.DateType(), pa.date32()),
            (t.is_timestamp, T.TimestampType(), pa.timestamp("us", tz="UTC")),
            (t.is_duration, T.DayTimeIntervalType(), pa.duration("us")), (t.is_null, T.NullType(), pa.null()))


def _spark_type(at: pa.DataType):
    from pyspark.sql import types as T

    for test, spark_type, _ in _plain_types():
        if test(at):
            return spark_type
    if pa.types.is_decimal(at):
        return T.DecimalType(precision=at.precision, scale=at.scale)
    if pa.types.is_list(at):
        return T.ArrayType(_spark_type(at.value_type))
    if pa.types.is_map(at):
        return T.MapType(_spark_type(at.key_type), _spark_type(at.item_type))
    if pa.types.is_struct(at):
        return spark_schema(pa.schema(list(at)))
    if pa.types.is_dictionary(at):
        return _spark_type(at.value_type)
    raise TypeError(f"no Spark type for the Arrow type {at}")


def _arrow_type(dt) -> pa.DataType:
    from pyspark.sql import types as T

    for _, spark_type, arrow_type in _plain_types():
        if type(dt) is type(spark_type):
            return arrow_type
    if isinstance(dt, T.TimestampNTZType):
        return pa.timestamp("us")
    if isinstance(dt, T.DecimalType):
        return pa.decimal128(dt.precision, dt.scale)
    if isinstance(dt, T.ArrayType):
        return pa.list_(pa.field("element", _arrow_type(dt.elementType), nullable=dt.containsNull))
    if isinstance(dt, T.MapType):
        return pa.map_(pa.field("key", _arrow_type(dt.keyType), nullable=False),
                       pa.field("value", _arrow_type(dt.valueType), nullable=dt.valueContainsNull))
    if isinstance(dt, T.StructType):
        return pa.struct(list(arrow_schema(dt)))
    if isinstance(dt, T.UserDefinedType):
        return _arrow_type(dt.sqlType())
    raise TypeError(f"no Arrow type for the Spark type {dt}")


def collect_arrow(df) -> pa.Table:
    """Collect a DataFrame as an Arrow table with its exact types. ``toPandas`` turns nullable
    integers into floats; PySpark 3.5 has no public ``toArrow``, only ``_collect_as_arrow``."""
    batches = df._collect_as_arrow()
    schema = arrow_schema(df.schema)
    return pa.Table.from_batches(batches).cast(schema) if batches else schema.empty_table()


def connect_to_submitted_jvm() -> None:
    """Under spark-submit, connect to the already running JVM so that ``SparkConf()`` sees the
    submitted master and ``--conf`` settings before a session exists (no public API does)."""
    from pyspark import SparkContext

    SparkContext._ensure_initialized()


def release_local_checkpoint(df) -> None:
    """Drop the cached blocks behind a ``localCheckpoint()``-ed DataFrame. ``unpersist()`` does
    not reach them (they belong to an RDD inside the plan), and without this every
    checkpoint stays in executor memory until the JVM garbage-collects the RDD."""
    plan = df._jdf.queryExecution().logical()
    if plan.getClass().getSimpleName() != "LogicalRDD":
        raise TypeError(f"not a checkpointed DataFrame (its plan is {plan.getClass().getSimpleName()})")
    plan.rdd().unpersist(True)


def persistent_rdd_ids(spark) -> set[int]:
    """Ids of the RDDs holding cached blocks, local checkpoints included (leak tests: a run
    must leave no id that was not there before it)."""
    return {int(i) for i in spark.sparkContext._jsc.getPersistentRDDs().keySet().toArray()}


_WITH_SQL_STATE: weakref.WeakSet = weakref.WeakSet()     # sessions seen with their SQL state built


def settings_before_sql_state(spark, keys) -> dict | None:
    """``{key: value or None}`` as ``spark.conf.get`` would give them, read without building the
    session's SQL state, or None once that state exists (then ``spark.conf`` is cheap and holds
    any runtime change). ``spark.conf`` builds the state (Spark's ``SessionState``: ~0.5 s of a
    fresh JVM, 2.8 s loaded), and no public API reads a setting without it. Until it exists the
    runtime conf is the session's initial options over the SparkContext's conf, read here."""
    if spark in _WITH_SQL_STATE:
        return None
    try:
        session = spark._jsparkSession
        state = session.getClass().getDeclaredField("sessionState")
        state.setAccessible(True)
        if state.get(session) is not None or session.parentSessionState().isDefined():
            _WITH_SQL_STATE.add(spark)       # a state is never unbuilt: later runs need not ask
            return None
        options, conf = session.initialSessionOptions(), spark.sparkContext._jsc.sc().conf()
    except Exception:                    # another Spark build: the public way
        return None
    return {key: options.apply(key) if options.contains(key) else conf.get(key, None) for key in keys}


def thread_properties(spark):
    """The calling thread's Spark local properties (job group, scheduler pool, ...) for a thread
    that runs a job on its behalf, as ``pyspark.InheritableThread`` copies them at its start; None
    where PySpark does not pin threads (then there is nothing per thread to copy). A thread kept
    for the next job cannot be an InheritableThread: that one copies only when it starts and
    closes its Py4J connection when it ends, so each run paid a new connection (its
    authentication and a JVM thread: 2-10 ms). No public API copies them."""
    from py4j.clientserver import ClientServer
    from pyspark import SparkContext

    if not isinstance(SparkContext._gateway, ClientServer):
        return None
    return spark.sparkContext._jsc.sc().getLocalProperties().clone()


def adopt_thread_properties(spark, properties) -> None:
    """Make ``properties`` (:func:`thread_properties`) the calling thread's, replacing its own."""
    if properties is not None:
        spark.sparkContext._jsc.sc().setLocalProperties(properties)


def forget_zip_importers() -> None:
    """In a Python worker, at the end of a task: drop the zip importers from
    ``sys.path_importer_cache``. PySpark 3.5's worker calls ``importlib.invalidate_caches()``
    before every task (``setup_spark_files``), and on Python >= 3.10 that makes every cached zip
    importer read its archive's directory again: pyspark.zip once per package imported from it,
    py4j's zip, spark-core's jar (13 here), ~90 ms of CPU a task, most of a warm run's fixed
    cost. Dropped, an importer is made again only where an import needs one, from zipimport's
    own directory cache (no archive read); what imports, and from where, does not change."""
    import sys
    import zipimport

    for path, finder in list(sys.path_importer_cache.items()):
        if isinstance(finder, zipimport.zipimporter):
            sys.path_importer_cache.pop(path, None)


def forgets_zip_importers(function):
    """A Spark task function (an iterator of rows or batches in, one out) that calls
    :func:`forget_zip_importers` when its task ends, however it ends: every Python job goffish
    runs (Gopher's stages, GoFS's reads and ingest jobs) is one, so a worker pays the re-read
    on its first goffish task, not on every task."""

    @functools.wraps(function)
    def task(iterator):
        try:
            yield from function(iterator)
        finally:
            forget_zip_importers()

    return task


def jvm_started() -> bool:
    """Whether this Python process already has a Spark JVM (a session, or spark-submit's)."""
    from pyspark import SparkContext

    return SparkContext._gateway is not None


def end_jvm(timeout: float = 120.0) -> int | None:
    """End the JVM this Python process started and wait for it: its exit code (None if it had
    none). PySpark keeps its JVM until the process exits and offers no public way to end it; a
    JVM asked to write a class-data archive at exit (:mod:`goffish.class_archive`) has written
    it once this returns 0. The JVM ends when its standard input closes."""
    from pyspark import SparkContext

    process = getattr(SparkContext._gateway, "proc", None)
    if process is None:
        return None
    process.stdin.close()
    code = process.wait(timeout)
    SparkContext._gateway = SparkContext._jvm = None
    return code


def jvm_has_class(spark, name: str) -> bool:
    """Whether a JVM class (a connector, say) is on the driver's classpath."""
    try:
        spark._jvm.java.lang.Class.forName(name)
        return True
    except Exception:
        return False


def jvm_usage(spark) -> dict:
    """What the driver JVM has done so far, for a profile of a fresh process's first run (deltas
    between two calls): CPU seconds of its JIT compiler threads (``jit_cpu``) and of all its threads
    (``cpu``), from /proc (None off Linux), classes loaded, milliseconds of JIT compilation, and
    Spark's generated code: classes compiled with Janino and the milliseconds that took (Spark's
    ``CodegenMetrics``, no public API; the sum of its sampled times, exact below 1,028 compiles)."""
    jvm = spark._jvm
    beans = jvm.java.lang.management.ManagementFactory
    codegen = jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()
    usage = {"classes": beans.getClassLoadingMXBean().getTotalLoadedClassCount(),
             "jit_ms": beans.getCompilationMXBean().getTotalCompilationTime(),
             "codegen": codegen.getCount(), "codegen_ms": float(jvm.java.util.Arrays.stream(codegen.getSnapshot().getValues()).sum()),
             "cpu": None, "jit_cpu": None}
    process = f"/proc/{driver_jvm_pid(spark)}"
    if os.path.isdir(process):
        usage["cpu"], usage["jit_cpu"] = _cpu_seconds(f"{process}/stat"), 0.0
        for thread in os.listdir(f"{process}/task"):
            try:
                with open(f"{process}/task/{thread}/comm") as name:
                    if name.read().startswith(("C1 ", "C2 ")):
                        usage["jit_cpu"] += _cpu_seconds(f"{process}/task/{thread}/stat")
            except OSError:             # a compiler thread ended meanwhile (HotSpot adds and ends them)
                continue
    return usage


def driver_jvm_pid(spark) -> int:
    """The process id of the driver's JVM (Py4J's gateway; no public API names it)."""
    return spark._jvm.java.lang.ProcessHandle.current().pid()


def _cpu_seconds(stat: str) -> float:
    """utime + stime of a /proc stat file (a process's includes its ended threads)."""
    with open(stat) as file:
        fields = file.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
