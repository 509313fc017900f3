"""Sample DynamoDB exports, written byte for byte in the layout AWS writes (DynamoDB
developer guide, "DynamoDB table export output format"; streaming/io/dynamodb_export.py
reads them): for the demo, the tests and the drills of `lakehouse backfill`."""
from __future__ import annotations

import base64
import gzip
import hashlib
import json
import zlib
from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

from streaming.contracts.loader import SAMPLE_CONTRACTS_DIR, load_contracts
from streaming.contracts.model import TableContract, contracts_of_table
from streaming.io.dynamodb_export import (
    EXPORT_ROOT_FOLDER,
    FILES_MANIFEST_FILE,
    FULL_EXPORT,
    INCREMENTAL_EXPORT,
    OUTPUT_FORMAT,
    SAMPLE_REGION,
    SUMMARY_FILE,
    DynamoItem,
    as_utc,
    epoch_micros,
)

SAMPLE_ACCOUNT = "123456789012"


class IncrementalChange(NamedTuple):
    """One item's net change inside an incremental export window."""

    keys: DynamoItem
    new_image: DynamoItem | None  # None: the item was deleted in the window
    old_image: DynamoItem | None  # None: the item did not exist before the window
    write_time_us: int


def write_full_export(
    out_dir: Path | str,
    table_name: str,
    items: Iterable[DynamoItem],
    export_time: datetime,
    *,
    files: int = 2,
    contracts: Mapping[str, TableContract] | None = None,
) -> Path:
    """Write a FULL_EXPORT of DynamoDB table `table_name`'s `items` under `out_dir`;
    returns the export directory.

    `contracts` names the table's key (default: the sample tables' contracts)."""
    export_time = as_utc(export_time)
    export_id = _export_id(table_name, export_time, FULL_EXPORT)
    keys = _keys_for(table_name, contracts)
    lines_per_file = _empty_files(files)
    for item in items:
        _require_keys(item, keys, "item")
        lines_per_file[_partition_of(item, keys[0], files)].append(
            json.dumps({"Item": item}, separators=(",", ":"))
        )
    export_dir = Path(out_dir) / EXPORT_ROOT_FOLDER / export_id
    data_files = _write_data_files(export_dir / "data", f"{EXPORT_ROOT_FOLDER}/{export_id}/data", export_id, lines_per_file)
    summary = _summary_base(table_name, export_id, export_time, data_files)
    summary["version"] = "2020-06-30"
    # AWS writes times with millisecond precision; a replay uses this value.
    summary["exportTime"] = _iso(export_time)
    summary["exportType"] = FULL_EXPORT
    _write_manifests(export_dir, summary, data_files)
    return export_dir


def write_incremental_export(
    out_dir: Path | str,
    table_name: str,
    changes: Iterable[IncrementalChange],
    export_from_time: datetime,
    export_to_time: datetime,
    *,
    files: int = 2,
    contracts: Mapping[str, TableContract] | None = None,
) -> Path:
    """Write an INCREMENTAL_EXPORT (NEW_AND_OLD_IMAGES) of `changes`; returns the export directory."""
    export_from_time, export_to_time = as_utc(export_from_time), as_utc(export_to_time)
    if export_to_time <= export_from_time:
        raise ValueError("export_to_time must be after export_from_time")
    export_id = _export_id(table_name, export_to_time, INCREMENTAL_EXPORT)
    keys = _keys_for(table_name, contracts)
    lines_per_file = _empty_files(files)
    for change in changes:
        _require_keys(change.keys, keys, "change")
        line: dict[str, Any] = {
            "Metadata": {"WriteTimestampMicros": {"N": str(change.write_time_us)}},
            "Keys": change.keys,
        }
        if change.new_image is not None:
            line["NewImage"] = change.new_image
        if change.old_image is not None:
            line["OldImage"] = change.old_image
        lines_per_file[_partition_of(change.keys, keys[0], files)].append(json.dumps(line, separators=(",", ":")))
    root = Path(out_dir) / EXPORT_ROOT_FOLDER
    # Incremental exports share one data folder next to the export folders.
    data_files = _write_data_files(root / "data", f"{EXPORT_ROOT_FOLDER}/data", export_id, lines_per_file)
    summary = _summary_base(table_name, export_id, export_to_time, data_files)
    summary["version"] = "2023-08-01"
    summary["exportFromTime"] = _iso(export_from_time)
    summary["exportToTime"] = _iso(export_to_time)
    summary["outputView"] = "NEW_AND_OLD_IMAGES"
    summary["exportType"] = INCREMENTAL_EXPORT
    export_dir = root / export_id
    _write_manifests(export_dir, summary, data_files)
    return export_dir


def _empty_files(files: int) -> list[list[str]]:
    if files < 1:
        raise ValueError(f"an export has at least one data file, got files={files}")
    return [[] for _ in range(files)]


def _require_keys(item: Mapping[str, Any], key_names: tuple[str, ...], what: str) -> None:
    missing = [name for name in key_names if name not in item]
    if missing:
        raise ValueError(f"{what} lacks key attribute(s) {missing}: {json.dumps(item)[:200]}")


def _write_data_files(
    data_dir: Path, key_prefix: str, export_id: str, lines_per_file: list[list[str]]
) -> list[dict[str, Any]]:
    data_dir.mkdir(parents=True, exist_ok=True)
    entries = []
    for index, lines in enumerate(lines_per_file):
        name = _data_file_name(export_id, index)
        payload = "".join(line + "\n" for line in lines).encode("utf-8")
        # mtime=0 keeps the gzip bytes (and so the checksums) deterministic.
        compressed = gzip.compress(payload, mtime=0)
        (data_dir / name).write_bytes(compressed)
        digest = hashlib.md5(compressed).digest()
        entries.append(
            {
                "itemCount": len(lines),
                "md5Checksum": base64.b64encode(digest).decode("ascii"),
                "etag": digest.hex(),
                "dataFileS3Key": f"{key_prefix}/{name}",
                "_uncompressed_bytes": len(payload),
            }
        )
    return entries


def _summary_base(
    table_name: str, export_id: str, started: datetime, data_files: list[dict[str, Any]]
) -> dict[str, Any]:
    table_arn = f"arn:aws:dynamodb:{SAMPLE_REGION}:{SAMPLE_ACCOUNT}:table/{table_name}"
    return {
        "exportArn": f"{table_arn}/export/{export_id}",
        "startTime": _iso(started),
        "endTime": _iso(started),
        "tableArn": table_arn,
        "tableId": _stable_uuid(table_name),
        "s3Bucket": None,
        "s3Prefix": None,
        "s3SseAlgorithm": "AES256",
        "s3SseKmsKeyId": None,
        "manifestFilesS3Key": f"{EXPORT_ROOT_FOLDER}/{export_id}/{FILES_MANIFEST_FILE}",
        "billedSizeBytes": sum(entry["_uncompressed_bytes"] for entry in data_files),
        "itemCount": sum(entry["itemCount"] for entry in data_files),
        "outputFormat": OUTPUT_FORMAT,
    }


def _write_manifests(export_dir: Path, summary: dict[str, Any], data_files: list[dict[str, Any]]) -> None:
    export_dir.mkdir(parents=True, exist_ok=True)
    (export_dir / "_started").write_bytes(b"")
    files_manifest = "".join(
        json.dumps({k: v for k, v in entry.items() if not k.startswith("_")}) + "\n" for entry in data_files
    ).encode("utf-8")
    summary_bytes = json.dumps(summary, indent=2).encode("utf-8")
    for name, content in ((FILES_MANIFEST_FILE, files_manifest), (SUMMARY_FILE, summary_bytes)):
        (export_dir / name).write_bytes(content)
        (export_dir / name.replace(".json", ".checksum")).write_text(hashlib.md5(content).hexdigest(), encoding="ascii")


def _keys_for(table_name: str, contracts: Mapping[str, TableContract] | None) -> tuple[str, ...]:
    """The key of DynamoDB table `table_name`. An export holds a whole table: for a
    single-table design every raw table of it, which all share the table's key."""
    contracts = load_contracts(SAMPLE_CONTRACTS_DIR) if contracts is None else contracts
    described = contracts_of_table(contracts, table_name)
    if not described:
        known = sorted({contract.table for contract in contracts.values()})
        raise ValueError(f"no table contract for DynamoDB table {table_name!r}; known tables: {known}")
    return next(iter(described.values())).key_attributes


def _partition_of(item: Mapping[str, Any], partition_key: str, files: int) -> int:
    """Spread items over files by partition-key hash, as the export does per partition."""
    return zlib.crc32(json.dumps(item.get(partition_key), sort_keys=True).encode("utf-8")) % files


def _export_id(table_name: str, moment: datetime, export_type: str) -> str:
    millis = epoch_micros(moment) // 1000
    suffix = hashlib.md5(f"{table_name}:{export_type}:{millis}".encode()).hexdigest()[:8]
    return f"{millis:014d}-{suffix}"


def _data_file_name(export_id: str, index: int) -> str:
    digest = hashlib.sha1(f"{export_id}:{index}".encode()).digest()
    return base64.b32encode(digest).decode("ascii").lower()[:26] + ".json.gz"


def _stable_uuid(text: str) -> str:
    h = hashlib.md5(text.encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def _iso(moment: datetime) -> str:
    return as_utc(moment).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
