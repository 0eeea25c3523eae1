"""One SparkSession (local[2]) for the whole test run.

It serves a thousand tests: its driver JVM gets 2 GiB, not the default 1 GiB, and keeps the
plans of the last 100 SQL queries, not 1,000 (the whole suite once ran the default heap out)."""
import os

import pytest

os.environ.setdefault("PYSPARK_PYTHON", __import__("sys").executable)


@pytest.fixture(scope="session")
def spark():
    from goffish.session import session

    spark = session(master="local[2]", app_name="goffish-tests",
                    conf={"spark.sql.shuffle.partitions": "4", "spark.default.parallelism": "4",
                          "spark.ui.enabled": "false", "spark.driver.memory": "2g",
                          "spark.sql.ui.retainedExecutions": "100",
                          "spark.ui.showConsoleProgress": "false"})
    yield spark
    spark.stop()
