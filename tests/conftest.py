"""One SparkSession (local[2]) for the whole test run."""
import os

import pytest

os.environ.setdefault("PYSPARK_PYTHON", __import__("sys").executable)


@pytest.fixture(scope="session")
def spark():
    from goffish.session import session

    spark = session(master="local[2]", app_name="goffish-tests",
                    conf={"spark.sql.shuffle.partitions": "4", "spark.default.parallelism": "4",
                          "spark.ui.enabled": "false",
                          "spark.ui.showConsoleProgress": "false"})
    yield spark
    spark.stop()
