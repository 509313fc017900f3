"""A Hive metastore that a local stream's Hudi tables are synced to (`lakehouse stream
--catalog thrift://host:port`, the local Athena's of streaming/runtime/athena_local.py),
reached through the Hive client the Spark session ships."""
from __future__ import annotations

from typing import TYPE_CHECKING

from streaming.errors import OperatorError
from streaming.io.jvm_errors import first_line, java_causes

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Where a catalog sync's throwables come from: Hudi's sync tools (HoodieMetaSyncException,
# org.apache.hudi.hive.HoodieHiveSyncException) and Hive's metastore client (MetaException).
_SYNC_CLASSES = ("org.apache.hudi.exception.HoodieMetaSyncException", "org.apache.hudi.hive.",
                 "org.apache.hudi.sync.", "org.apache.hadoop.hive.metastore.")
# How a metastore that is not there shows below them: Thrift's transport failing (a
# connection refused, reset or broken), which Hive's client, when it gives up connecting,
# names in its MetaException's message ("Could not connect to meta store using any of the
# URIs provided. Most recent failure: org.apache.thrift.transport.TTransportException:
# java.net.ConnectException: Connection refused").
_TRANSPORT_CLASSES = ("org.apache.thrift.transport.TTransportException", "java.net.ConnectException",
                      "java.net.SocketException", "java.net.SocketTimeoutException")
_TRANSPORT_WORDS = ("Could not connect to meta store", "TTransportException")


class MetastoreUnusable(RuntimeError):
    """The metastore did not answer as a Hive metastore; the message says which and how."""


class MetastoreUnreachable(OperatorError):
    """The metastore stopped answering while a batch synced its commits to it."""


def is_metastore_unreachable(exc: BaseException) -> bool:
    """Whether `exc` is a catalog sync that could not reach its Hive metastore: a throwable
    of the sync behind it, and below it the metastore's connection failing. A sync the
    metastore refused (a missing database, a schema it rejects) is none."""
    causes = java_causes(exc)
    in_sync = any(cause.class_name.startswith(_SYNC_CLASSES) for cause in causes)
    return in_sync and any(cause.class_name in _TRANSPORT_CLASSES
                           or any(words in cause.message for words in _TRANSPORT_WORDS) for cause in causes)


def metastore_unreachable_refusal(metastore_uri: str, batch_id: int) -> MetastoreUnreachable:
    """The one line for a batch stopped by a metastore that no longer answers."""
    return MetastoreUnreachable(
        f"the Hive metastore at {metastore_uri} stopped answering while batch {batch_id} synced its commits to it: "
        "restart it (`make athena-local`), then run the stream again: the batch is replayed, a commit already "
        "written is synced, not written twice"
    )


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
                                f"({first_line(exc)}): give the address `make athena-local` printed") from exc
    try:
        if database in client.getAllDatabases():
            return False
        # Where Hudi's sync would create it: no description that matters, the metastore's
        # warehouse as its location.
        client.createDatabase(hive.metastore.api.Database(database, "raw tables of the local stream", None, None))
        return True
    except Py4JJavaError as exc:
        raise MetastoreUnusable(f"could not create database {database} in the metastore at {metastore_uri}: "
                                f"{first_line(exc)}") from exc
    finally:
        client.close()
