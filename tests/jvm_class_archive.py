"""Write the class-data-sharing archive the suite's JVMs map (tests/jvm_options.py).

`make test` runs it once per venv: `python tests/jvm_class_archive.py <archive>`. It
starts Spark as a test does, runs the kinds of query the suite runs, and lets the JVM
write every class it loaded into the archive as it exits (-XX:ArchiveClassesAtExit,
Java 13 and later). Each later JVM started with -XX:SharedArchiveFile maps those
classes instead of loading and verifying them from the jars again.

The archive is written beside its final name and renamed once the JVM has ended, so a
JVM never maps half of one. A JVM whose classpath or Java differs from the one that
wrote it ignores it and loads its classes as usual.
"""
from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from jvm_options import BASE_JVM_OPTIONS


def write_archive(archive: Path) -> None:
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_name(archive.name + ".partial")
    partial.unlink(missing_ok=True)
    os.environ["PYSPARK_SUBMIT_ARGS"] = (
        f"--driver-java-options '{BASE_JVM_OPTIONS} -XX:ArchiveClassesAtExit={partial} -Xlog:cds*=off' pyspark-shell"
    )
    from pyspark import SparkContext
    from pyspark.sql import functions as F

    from streaming.runtime.spark_session import local_session

    spark = local_session(app_name="lakehouse-class-archive", master="local[2]", shuffle_partitions=2)
    with tempfile.TemporaryDirectory() as folder:
        rows = spark.range(100).select(
            F.col("id"), F.to_json(F.struct(F.col("id").cast("string").alias("S"))).alias("json")
        )
        parsed = rows.select("id", F.from_json("json", "S string").alias("value"))
        parsed.groupBy(F.col("id") % 3).agg(F.max("value")).write.parquet(f"{folder}/grouped")
        spark.read.parquet(f"{folder}/grouped").collect()
    gateway = SparkContext._gateway
    spark.stop()
    # The JVM writes the archive while it exits, which it does once its stdin closes.
    gateway.shutdown()
    gateway.proc.stdin.close()
    gateway.proc.wait(timeout=300)
    if not partial.is_file():
        raise SystemExit(f"the JVM wrote no class archive at {partial}")
    partial.replace(archive)


if __name__ == "__main__":
    write_archive(Path(sys.argv[1]).resolve())
