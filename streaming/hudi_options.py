"""Hudi write options for one raw table, derived from its table contract.

Pure: no Spark here, so every option is unit-tested without the Hudi bundle.
Keys are the Spark datasource keys understood by Hudi 0.15 and 1.0.x (Glue 5.1).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, Protocol, Sequence

# Athena reads Hudi tables up to 0.15, i.e. table version 6; Hudi 1.0 writes
# version 8 unless told otherwise, so both keys are pinned and not overridable.
ATHENA_TABLE_VERSION = "6"
TABLE_VERSION_KEY = "hoodie.write.table.version"
AUTO_UPGRADE_KEY = "hoodie.write.auto.upgrade"

ORDERING_FIELD = "_ordering_value"
# Honours the ordering field when merging with what is already stored, so a late,
# older change never overwrites a newer one (event-time ordering).
EVENT_TIME_PAYLOAD = "org.apache.hudi.common.model.DefaultHoodieRecordPayload"
GLUE_SYNC_TOOL = "org.apache.hudi.aws.sync.AwsGlueCatalogSyncTool"

SIMPLE_KEY_GENERATOR = "org.apache.hudi.keygen.SimpleKeyGenerator"
COMPLEX_KEY_GENERATOR = "org.apache.hudi.keygen.ComplexKeyGenerator"
NONPARTITIONED_KEY_GENERATOR = "org.apache.hudi.keygen.NonpartitionedKeyGenerator"
MULTI_PART_KEYS_EXTRACTOR = "org.apache.hudi.hive.MultiPartKeysValueExtractor"
NONPARTITIONED_EXTRACTOR = "org.apache.hudi.hive.NonPartitionedExtractor"

SyncMode = Literal["hms", "glue", "none"]


class HudiOptionsError(ValueError):
    """The requested options would produce a table Athena or the raw layer cannot use."""


class KeyedContract(Protocol):
    """The parts of a TableContract the Hudi options need."""

    raw_table: str
    key_columns: Sequence[str]
    partition_column: str | None


def key_generator_class(key_columns: Sequence[str], partition_column: str | None) -> str:
    """Pick the key generator for the record key fields and the partition field."""
    if not key_columns:
        raise HudiOptionsError("a Hudi record key needs at least one key column")
    if not partition_column:
        return NONPARTITIONED_KEY_GENERATOR
    if len(key_columns) == 1:
        return SIMPLE_KEY_GENERATOR
    return COMPLEX_KEY_GENERATOR


def _sync_options(sync_mode: SyncMode, database: str, table: str, partition_column: str | None) -> dict[str, str]:
    if sync_mode == "none":
        return {"hoodie.datasource.hive_sync.enable": "false"}
    options = {
        "hoodie.datasource.hive_sync.enable": "true",
        "hoodie.datasource.hive_sync.database": database,
        "hoodie.datasource.hive_sync.table": table,
        # Without this, timestamps are synced as bigint and Athena shows epoch numbers.
        "hoodie.datasource.hive_sync.support_timestamp": "true",
        "hoodie.datasource.hive_sync.partition_fields": partition_column or "",
        "hoodie.datasource.hive_sync.partition_extractor_class": (
            MULTI_PART_KEYS_EXTRACTOR if partition_column else NONPARTITIONED_EXTRACTOR
        ),
    }
    if sync_mode == "hms":
        # On Glue the Hive metastore client is the Glue Data Catalog, so "hms" syncs there.
        options["hoodie.datasource.hive_sync.mode"] = "hms"
    elif sync_mode == "glue":
        # Direct AWS SDK sync, for runtimes whose metastore is not the Glue Catalog.
        options["hoodie.datasource.meta.sync.enable"] = "true"
        options["hoodie.meta.sync.client.tool.class"] = GLUE_SYNC_TOOL
    else:
        raise HudiOptionsError(f"sync_mode must be 'hms', 'glue' or 'none', not {sync_mode!r}")
    return options


def _reject_version_overrides(extra: Mapping[str, str]) -> None:
    version = extra.get(TABLE_VERSION_KEY)
    if version is not None and str(version) != ATHENA_TABLE_VERSION:
        raise HudiOptionsError(
            f"{TABLE_VERSION_KEY}={version} is not allowed: Athena reads Hudi tables up to "
            f"version {ATHENA_TABLE_VERSION} (Hudi 0.15), so the raw table must stay on it"
        )
    upgrade = extra.get(AUTO_UPGRADE_KEY)
    if upgrade is not None and str(upgrade).lower() != "false":
        raise HudiOptionsError(
            f"{AUTO_UPGRADE_KEY}={upgrade} is not allowed: an automatic upgrade moves the table "
            f"past version {ATHENA_TABLE_VERSION}, which Athena cannot read"
        )


def hudi_table_path(base_path: str, raw_table: str) -> str:
    """Where one raw table lives under the raw base path (local folder or S3 prefix)."""
    return f"{base_path.rstrip('/')}/{raw_table}"


def hudi_write_options(
    contract: KeyedContract,
    *,
    base_path: str,
    database: str,
    cleaner_commits_retained: int = 10,
    sync_mode: SyncMode = "hms",
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Options for `df.write.format("hudi").options(**opts).mode("append")` on one raw table.

    The table is saved at `hudi_table_path(base_path, raw_table)`; `extra` overrides any
    option except the table version pin (HudiOptionsError).
    """
    if cleaner_commits_retained < 1:
        raise HudiOptionsError("cleaner_commits_retained must be at least 1")
    table = contract.raw_table
    key_columns = list(contract.key_columns)
    partition_column = contract.partition_column or None
    options = {
        "hoodie.base.path": hudi_table_path(base_path, table),
        "hoodie.table.name": table,
        "hoodie.datasource.write.table.name": table,
        "hoodie.datasource.write.table.type": "COPY_ON_WRITE",
        "hoodie.datasource.write.operation": "upsert",
        TABLE_VERSION_KEY: ATHENA_TABLE_VERSION,
        AUTO_UPGRADE_KEY: "false",
        "hoodie.datasource.write.recordkey.field": ",".join(key_columns),
        "hoodie.datasource.write.keygenerator.class": key_generator_class(key_columns, partition_column),
        "hoodie.datasource.write.partitionpath.field": partition_column or "",
        "hoodie.datasource.write.hive_style_partitioning": "true",
        "hoodie.datasource.write.precombine.field": ORDERING_FIELD,
        "hoodie.datasource.write.payload.class": EVENT_TIME_PAYLOAD,
        "hoodie.payload.ordering.field": ORDERING_FIELD,
        "hoodie.cleaner.policy": "KEEP_LATEST_COMMITS",
        "hoodie.cleaner.commits.retained": str(cleaner_commits_retained),
    }
    options.update(_sync_options(sync_mode, database, table, partition_column))
    if extra:
        _reject_version_overrides(extra)
        options.update({key: str(value) for key, value in extra.items()})
    return options
