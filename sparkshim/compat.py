"""The only place that touches PySpark internals; each use says why no public API does.

``tests/test_spark_compat.py`` exercises every function here and checks the
PySpark version against :data:`TESTED_SPARK`, so a Spark upgrade fails that test
first and loudly, instead of some run later. When upgrading: Spark 4 has
public ``DataFrame.toArrow()`` (replaces :func:`collect_arrow`) and
``DataFrame.localCheckpoint(storageLevel=...)``.
"""
from __future__ import annotations

import pyarrow as pa

TESTED_SPARK = ("3.5",)


def spark_schema(schema: pa.Schema):
    """Arrow schema -> Spark StructType (for ``mapInArrow``). PySpark 3.5 has this only in
    the internal ``pyspark.sql.pandas.types``."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema)


def arrow_schema(struct) -> pa.Schema:
    """Spark StructType -> Arrow schema (internal ``pyspark.sql.pandas.types`` in 3.5)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(struct)


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


def jvm_started() -> bool:
    """Whether this Python process already has a Spark JVM (a session, or spark-submit's)."""
    from pyspark import SparkContext

    return SparkContext._gateway is not None


def jvm_has_class(spark, name: str) -> bool:
    """Whether a JVM class (a connector, say) is on the driver's classpath."""
    try:
        spark._jvm.java.lang.Class.forName(name)
        return True
    except Exception:
        return False
