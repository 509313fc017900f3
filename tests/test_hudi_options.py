"""Hudi write options built from the real table contracts (pure, no Spark)."""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from streaming.contract import load_contracts
from streaming.hudi_options import (
    COMPLEX_KEY_GENERATOR,
    NONPARTITIONED_KEY_GENERATOR,
    SIMPLE_KEY_GENERATOR,
    HudiOptionsError,
    hudi_table_path,
    hudi_write_options,
)


@pytest.fixture(scope="module")
def contracts():
    return load_contracts()


@pytest.mark.parametrize(
    ("table", "record_key", "partition_field"),
    [("customers", "id,cust_name", "id_suffix"), ("orders", "customer_id,order_id", "customer_suffix")],
)
def test_options_follow_the_contract(contracts, table, record_key, partition_field):
    options = hudi_write_options(contracts[table], base_path="s3://lake/raw/", database="raw_db")

    assert options["hoodie.base.path"] == f"s3://lake/raw/{table}"
    assert options["hoodie.table.name"] == table
    assert options["hoodie.datasource.write.table.type"] == "COPY_ON_WRITE"
    assert options["hoodie.datasource.write.operation"] == "upsert"
    assert options["hoodie.datasource.write.recordkey.field"] == record_key
    # Both tables have a sort key, so the record key has two fields.
    assert options["hoodie.datasource.write.keygenerator.class"] == COMPLEX_KEY_GENERATOR
    assert options["hoodie.datasource.write.partitionpath.field"] == partition_field
    assert options["hoodie.datasource.write.hive_style_partitioning"] == "true"
    assert options["hoodie.datasource.hive_sync.partition_fields"] == partition_field
    assert options["hoodie.datasource.hive_sync.partition_extractor_class"] == (
        "org.apache.hudi.hive.MultiPartKeysValueExtractor"
    )
    assert options["hoodie.datasource.hive_sync.database"] == "raw_db"
    assert options["hoodie.datasource.hive_sync.table"] == table


def test_table_version_is_pinned_for_athena(contracts):
    options = hudi_write_options(contracts["customers"], base_path="/tmp/raw", database="raw")
    assert options["hoodie.write.table.version"] == "6"
    assert options["hoodie.write.auto.upgrade"] == "false"


def test_event_time_ordering_on_the_ordering_value(contracts):
    options = hudi_write_options(contracts["orders"], base_path="/tmp/raw", database="raw")
    assert options["hoodie.datasource.write.precombine.field"] == "_ordering_value"
    assert options["hoodie.payload.ordering.field"] == "_ordering_value"
    assert options["hoodie.datasource.write.payload.class"] == (
        "org.apache.hudi.common.model.DefaultHoodieRecordPayload"
    )


def test_cleaner_retention_is_configurable(contracts):
    default = hudi_write_options(contracts["orders"], base_path="/r", database="raw")
    custom = hudi_write_options(contracts["orders"], base_path="/r", database="raw", cleaner_commits_retained=48)
    assert default["hoodie.cleaner.policy"] == "KEEP_LATEST_COMMITS"
    assert default["hoodie.cleaner.commits.retained"] == "10"
    assert custom["hoodie.cleaner.commits.retained"] == "48"
    with pytest.raises(HudiOptionsError):
        hudi_write_options(contracts["orders"], base_path="/r", database="raw", cleaner_commits_retained=0)


def test_sync_modes(contracts):
    hms = hudi_write_options(contracts["customers"], base_path="/r", database="raw", sync_mode="hms")
    glue = hudi_write_options(contracts["customers"], base_path="/r", database="raw", sync_mode="glue")
    none = hudi_write_options(contracts["customers"], base_path="/r", database="raw", sync_mode="none")

    assert hms["hoodie.datasource.hive_sync.enable"] == "true"
    assert hms["hoodie.datasource.hive_sync.mode"] == "hms"
    assert hms["hoodie.datasource.hive_sync.support_timestamp"] == "true"
    assert "hoodie.meta.sync.client.tool.class" not in hms
    assert glue["hoodie.meta.sync.client.tool.class"] == "org.apache.hudi.aws.sync.AwsGlueCatalogSyncTool"
    assert glue["hoodie.datasource.hive_sync.database"] == "raw"
    assert none["hoodie.datasource.hive_sync.enable"] == "false"
    assert not any(key.startswith("hoodie.datasource.hive_sync.database") for key in none)
    with pytest.raises(HudiOptionsError, match="sync_mode"):
        hudi_write_options(contracts["customers"], base_path="/r", database="raw", sync_mode="jdbc")


def test_extra_options_override(contracts):
    options = hudi_write_options(
        contracts["orders"],
        base_path="/r",
        database="raw",
        extra={"hoodie.upsert.shuffle.parallelism": 8, "hoodie.cleaner.commits.retained": "3",
               "hoodie.write.table.version": "6"},
    )
    assert options["hoodie.upsert.shuffle.parallelism"] == "8"
    assert options["hoodie.cleaner.commits.retained"] == "3"
    assert options["hoodie.write.table.version"] == "6"


@pytest.mark.parametrize(
    ("key", "value"), [("hoodie.write.table.version", "8"), ("hoodie.write.auto.upgrade", "true")]
)
def test_extra_options_cannot_leave_table_version_6(contracts, key, value):
    with pytest.raises(HudiOptionsError, match="Athena"):
        hudi_write_options(contracts["orders"], base_path="/r", database="raw", extra={key: value})


@dataclass(frozen=True)
class _Keys:
    raw_table: str
    key_columns: tuple[str, ...]
    partition_column: str | None


@pytest.mark.parametrize(
    ("keys", "generator", "extractor"),
    [
        (_Keys("t", ("id",), "bucket"), SIMPLE_KEY_GENERATOR, "org.apache.hudi.hive.MultiPartKeysValueExtractor"),
        (_Keys("t", ("id", "sk"), "bucket"), COMPLEX_KEY_GENERATOR, "org.apache.hudi.hive.MultiPartKeysValueExtractor"),
        (_Keys("t", ("id",), None), NONPARTITIONED_KEY_GENERATOR, "org.apache.hudi.hive.NonPartitionedExtractor"),
        (_Keys("t", ("id", "sk"), None), NONPARTITIONED_KEY_GENERATOR, "org.apache.hudi.hive.NonPartitionedExtractor"),
    ],
)
def test_key_generator_by_key_shape(keys, generator, extractor):
    options = hudi_write_options(keys, base_path="/r", database="raw")
    assert options["hoodie.datasource.write.keygenerator.class"] == generator
    assert options["hoodie.datasource.hive_sync.partition_extractor_class"] == extractor
    assert options["hoodie.datasource.write.recordkey.field"] == ",".join(keys.key_columns)


def test_table_path():
    assert hudi_table_path("s3://b/raw/", "orders") == "s3://b/raw/orders"
