"""A Hive metastore that a local stream's Hudi tables are synced to (`lakehouse stream
--catalog thrift://host:port`, the local Athena's of streaming/runtime/athena_local.py),
reached through the Hive client the Spark session ships."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class MetastoreUnusable(RuntimeError):
    """The metastore did not answer as a Hive metastore; the message says which and how."""


def create_database(spark: SparkSession, metastore_uri: str, database: str) -> bool:
    """Create `database` in the metastore at `metastore_uri` unless it is there; returns
    whether it was created.

    Hudi's sync creates a missing database at a table's first sync
    (hoodie.datasource.hive_sync.auto_create_database), but the stream commits two tables
    at once: both find no database, and the second to create it logs an ERROR with its
    stack (HMSDDLExecutor.createDatabase) before its sync goes on. Created before the
    first commit, neither does. This is also the start's check that a metastore answers
    there, not only a listening port.
    """
    from py4j.protocol import Py4JJavaError

    hive = spark.sparkContext._jvm.org.apache.hadoop.hive
    conf = hive.conf.HiveConf()
    conf.set("hive.metastore.uris", metastore_uri)
    # Fail within seconds, not after Hive's default three connection attempts.
    conf.set("hive.metastore.connect.retries", "1")
    try:
        client = hive.metastore.HiveMetaStoreClient(conf)
    except Py4JJavaError as exc:
        raise MetastoreUnusable(f"{metastore_uri} does not answer as a Hive metastore "
                                f"({_first_line(exc)}): give the address `make athena-local` printed") from exc
    try:
        if database in client.getAllDatabases():
            return False
        # Where Hudi's sync would create it: no description that matters, the metastore's
        # warehouse as its location.
        client.createDatabase(hive.metastore.api.Database(database, "raw tables of the local stream", None, None))
        return True
    except Py4JJavaError as exc:
        raise MetastoreUnusable(f"could not create database {database} in the metastore at {metastore_uri}: "
                                f"{_first_line(exc)}") from exc
    finally:
        client.close()


def _first_line(exc: Exception) -> str:
    java = getattr(exc, "java_exception", None)
    text = str(java.toString()) if java is not None else str(exc)
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__
