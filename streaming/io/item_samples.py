"""Items of one DynamoDB table, read for `lakehouse contract infer` (streaming/contracts/inference/).

Three sources, each read until the sample holds `max_items` distinct items:

- **an export** (`--export DIR`): the folder backfill reads, validated the same way
  (dynamodb_export.read_export_manifest); a full export's `Item`s, an incremental one's
  NewImage and OldImage with its `Keys`;
- **landing files** (`--landing DIR`): change records as the stream reads them (listed as
  sources.local_landing_files lists them, split by landing_reader), of both AWS shapes:
  DynamoDB Streams records, whose table is in `eventSourceARN`, and Kinesis Data Streams
  records, which name it in `tableName`;
- **a sample file** (`--sample FILE`): lines of either record shape, export lines, bare
  items in DynamoDB JSON, or a NoSQL Workbench data model (one JSON document whose
  `DataModel` holds the table's `KeyAttributes` and `TableData`).

Records of other tables are skipped and counted, as are records that are not JSON.
"""
from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from streaming.contracts.inference.sample import InferenceError, ItemSample
from streaming.io.dynamodb_export import INCREMENTAL_EXPORT, read_export_manifest
from streaming.io.landing_reader import split_object_records
from streaming.io.sources import local_landing_files

_TABLE_IN_ARN = re.compile(r":table/([^/]+)")
# What a skipped record is counted as.
OTHER_TABLE = "of another table"
NOT_JSON = "not a JSON object"
NO_IMAGE = "no item image"
# A NoSQL Workbench model is one JSON object whose first member is one of the model's own
# (`ModelName` in the models Workbench exports, e.g. tests/fixtures/inference/), holding
# text, a list or an object that is no DynamoDB type descriptor: no change record, export
# line or item opens so. Only the file's first bytes are read to tell.
_SNIFFED_BYTES = 4096
_WORKBENCH_OPENING = re.compile(
    rb'(?:\xef\xbb\xbf)?\s*\{\s*"(?:ModelName|ModelMetadata|DataModel)"\s*:\s*'
    rb'(?!\{\s*"(?:S|N|B|SS|NS|BS|M|L|NULL|BOOL)"\s*:)[\["{]')


def sample_export(export_dir: Path | str, table: str, max_items: int) -> ItemSample:
    manifest = read_export_manifest(export_dir)
    if manifest.table_name != table:
        raise InferenceError(f"{export_dir}: export is of table {manifest.table_name!r}, not {table!r}")
    sample = ItemSample(max_items)
    incremental = manifest.export_type == INCREMENTAL_EXPORT
    for data_file in manifest.data_files:
        with gzip.open(data_file.path, "rb") as lines:
            for line in lines:
                if not line.strip():
                    continue
                row = _json_object(line)
                if row is None:
                    sample.skip(NOT_JSON)
                elif incremental:
                    _add_change(sample, row, row.get("Keys"))
                else:
                    _add_image(sample, row.get("Item"), None)
                if sample.stopped_early:
                    return sample
    return sample


def sample_landing(landing_dir: Path | str, table: str, max_items: int) -> ItemSample:
    landing = Path(landing_dir)
    if not landing.is_dir():
        raise InferenceError(f"{landing}: landing folder not found")
    sample = ItemSample(max_items)
    for path in local_landing_files(landing):
        _sample_records(path, table, sample)
        if sample.stopped_early:
            break
    return sample


def sample_file(path: Path | str, table: str, max_items: int) -> ItemSample:
    path = Path(path)
    model = _workbench_model(path)
    sample = ItemSample(max_items)
    if model is not None:
        _sample_workbench(model, table, sample, path)
    else:
        _sample_records(path, table, sample)
    return sample


def _sample_records(path: Path, table: str, sample: ItemSample) -> None:
    with open(path, "rb") as stream:
        for record in split_object_records(stream):
            if record.reason is not None:
                # The landing reader's reason: invalid_json, record_too_large, ...
                sample.skip(f"unreadable record ({record.reason})")
                continue
            row = _json_object(record.payload)
            if row is None:
                sample.skip(NOT_JSON)
            else:
                _add_row(sample, row, table)
            if sample.stopped_early:
                return


def _add_row(sample: ItemSample, row: Mapping[str, Any], table: str) -> None:
    """One record of any shape the module docstring lists."""
    change = row.get("dynamodb")
    if isinstance(change, dict):
        arn = _TABLE_IN_ARN.search(str(row.get("eventSourceARN", "")))
        if (row.get("tableName") or (arn.group(1) if arn else None)) != table:
            sample.skip(OTHER_TABLE)
            return
        _add_change(sample, change, change.get("Keys"))
    elif "Item" in row:
        _add_image(sample, row["Item"], None)
    elif "Keys" in row:
        _add_change(sample, row, row["Keys"])
    else:
        _add_image(sample, row, None)


def _add_change(sample: ItemSample, change: Mapping[str, Any], keys: Any) -> None:
    """A change's NewImage as the item's last image, with its OldImage as an earlier one
    (both are typed); a deletion's OldImage as the last."""
    new, old = change.get("NewImage"), change.get("OldImage")
    if new:
        _add_image(sample, new, keys, old if _is_image(old) else None)
    else:
        _add_image(sample, old, keys)


def _add_image(sample: ItemSample, image: Any, keys: Any, earlier: Any = None) -> None:
    if _is_image(image):
        sample.add(image, keys if isinstance(keys, dict) else None, earlier)
    else:
        sample.skip(NO_IMAGE)


def _is_image(image: Any) -> bool:
    return isinstance(image, dict) and bool(image) and all(isinstance(value, dict) for value in image.values())


def _json_object(payload: bytes) -> dict[str, Any] | None:
    try:
        row = json.loads(payload)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return None
    return row if isinstance(row, dict) else None


def _workbench_model(path: Path) -> dict[str, Any] | None:
    """The file as a NoSQL Workbench model, or None when it is records or items. Only a
    file whose first bytes open a model is read whole: a file of records is streamed, so
    a large one costs no more memory than `--max-items` items."""
    with open(path, "rb") as stream:
        if not _WORKBENCH_OPENING.match(stream.read(_SNIFFED_BYTES)):
            return None
    try:
        document = json.loads(path.read_bytes())
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return None
    return document if isinstance(document, dict) and isinstance(document.get("DataModel"), list) else None


def _sample_workbench(model: Mapping[str, Any], table: str, sample: ItemSample, path: Path) -> None:
    tables = {entry.get("TableName"): entry for entry in model["DataModel"] if isinstance(entry, dict)}
    if table not in tables:
        raise InferenceError(f"{path}: the model has no table {table!r}; it has {sorted(map(str, tables))}")
    entry = tables[table]
    key_attributes = entry.get("KeyAttributes") or {}
    sample.declared_key = tuple(
        key_attributes[role]["AttributeName"] for role in ("PartitionKey", "SortKey") if role in key_attributes
    )
    for item in _workbench_items(entry):
        _add_image(sample, item, None)
        if sample.stopped_early:
            return


def _workbench_items(entry: Mapping[str, Any]) -> Iterator[Any]:
    """A model's sample items: the table's `TableData`, and each facet's (older models)."""
    yield from entry.get("TableData") or ()
    for facet in entry.get("TableFacets") or ():
        yield from facet.get("TableData") or ()
