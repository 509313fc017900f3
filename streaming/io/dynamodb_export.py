"""Reading a DynamoDB export to S3 (point-in-time full and incremental): validate, replay.

The on-disk layout is the one AWS writes (DynamoDB developer guide, "DynamoDB table
export output format"):

    <prefix>/AWSDynamoDB/<export-id>/_started
    <prefix>/AWSDynamoDB/<export-id>/manifest-summary.json   (+ .checksum)
    <prefix>/AWSDynamoDB/<export-id>/manifest-files.json     (+ .checksum), JSON lines
    <prefix>/AWSDynamoDB/<export-id>/data/<random>.json.gz   full export data
    <prefix>/AWSDynamoDB/data/<random>.json.gz               incremental export data

A full export line is `{"Item": {...}}`; an incremental export line is
`{"Metadata": {"WriteTimestampMicros": {"N": "..."}}, "Keys": {...}, "NewImage": {...},
"OldImage": {...}}` where a missing NewImage means the item was deleted.

A backfill is "export -> change records -> the same pipeline": every export line becomes
one change record in the Kinesis-Data-Streams-for-DynamoDB format the decoder reads, so
an export and a CDC stream that overlaps it converge to the same state. Each record is
the item's snapshot at one time, not an event (snapshot_ordering says where it sorts).
"""
from __future__ import annotations

import base64
import gzip
import hashlib
import json
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from streaming.contracts.model import TableContract
from streaming.errors import OperatorError

EXPORT_ROOT_FOLDER = "AWSDynamoDB"
SUMMARY_FILE = "manifest-summary.json"
FILES_MANIFEST_FILE = "manifest-files.json"
FULL_EXPORT = "FULL_EXPORT"
INCREMENTAL_EXPORT = "INCREMENTAL_EXPORT"
OUTPUT_FORMAT = "DYNAMODB_JSON"
# Placeholder account and region for generated ARNs (the account id AWS uses in its docs).
# The region a replayed change record names (the decoder does not read it).
SAMPLE_REGION = "us-east-1"
# The eventID of every replayed export line starts with this: the marts tell an item's
# snapshot from a change event by it (macros/staging/backfill_snapshots.sql).
SNAPSHOT_EVENT_ID_PREFIX = "export:"
MICROS_PER_SECOND = 1_000_000

DynamoItem = dict[str, dict[str, Any]]


class ExportValidationError(OperatorError, ValueError):
    """The export directory is incomplete or does not match its manifests."""


@dataclass(frozen=True)
class ExportDataFile:
    path: Path
    s3_key: str
    item_count: int
    md5_checksum: str
    etag: str


@dataclass(frozen=True)
class ExportManifest:
    export_dir: Path
    export_id: str
    export_type: str
    export_arn: str
    table_arn: str
    table_name: str
    item_count: int
    export_time: datetime | None  # full export: the point in time exported
    export_from_time: datetime | None  # incremental export window [from, to)
    export_to_time: datetime | None
    data_files: tuple[ExportDataFile, ...]
    summary: Mapping[str, Any]


# --------------------------------------------------------------------------- reading


def read_export_manifest(export_dir: Path | str) -> ExportManifest:
    """Read and validate an export: manifests present, every data file there and intact."""
    export_dir = Path(export_dir)
    if not export_dir.is_dir():
        raise ExportValidationError(f"export directory not found: {export_dir}")
    summary = json.loads(_read_checked(export_dir, SUMMARY_FILE))
    files_manifest = _read_checked(export_dir, FILES_MANIFEST_FILE).decode("utf-8")
    if summary.get("outputFormat") != OUTPUT_FORMAT:
        raise ExportValidationError(
            f"{export_dir}: outputFormat {summary.get('outputFormat')!r} is not supported, only {OUTPUT_FORMAT}"
        )
    export_type = summary.get("exportType", FULL_EXPORT)
    if export_type not in (FULL_EXPORT, INCREMENTAL_EXPORT):
        raise ExportValidationError(f"{export_dir}: unknown exportType {export_type!r}")
    prefix_root = _prefix_root(export_dir)
    data_folder = _data_folder(export_dir, export_type)
    data_files = []
    for line_no, line in enumerate(files_manifest.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            data_files.append(_checked_data_file(prefix_root, data_folder, summary.get("s3Prefix"), entry))
        except json.JSONDecodeError as exc:
            raise ExportValidationError(f"{export_dir}/{FILES_MANIFEST_FILE} line {line_no}: not JSON ({exc})") from exc
        except KeyError as exc:
            raise ExportValidationError(
                f"{export_dir}/{FILES_MANIFEST_FILE} line {line_no}: missing field {exc.args[0]}"
            ) from exc
        except ExportValidationError as exc:
            raise ExportValidationError(f"{export_dir}/{FILES_MANIFEST_FILE} line {line_no}: {exc}") from exc
    listed = sum(data_file.item_count for data_file in data_files)
    if listed != summary.get("itemCount"):
        raise ExportValidationError(
            f"{export_dir}: {SUMMARY_FILE} itemCount {summary.get('itemCount')} != {listed} items in the data files"
        )
    times = {name: _parse_time(summary.get(name)) for name in ("exportTime", "exportFromTime", "exportToTime")}
    required = ("exportTime",) if export_type == FULL_EXPORT else ("exportFromTime", "exportToTime")
    for name in required:
        if times[name] is None:
            raise ExportValidationError(f"{export_dir}: {SUMMARY_FILE} of a {export_type} has no {name}")
    table_arn = summary.get("tableArn", "")
    return ExportManifest(
        export_dir=export_dir,
        export_id=export_dir.name,
        export_type=export_type,
        export_arn=summary.get("exportArn", ""),
        table_arn=table_arn,
        table_name=table_arn.rsplit("/", 1)[-1],
        item_count=listed,
        export_time=times["exportTime"],
        export_from_time=times["exportFromTime"],
        export_to_time=times["exportToTime"],
        data_files=tuple(data_files),
        summary=summary,
    )


def _read_checked(export_dir: Path, name: str) -> bytes:
    path = export_dir / name
    if not path.is_file():
        raise ExportValidationError(f"{export_dir}: {name} is missing")
    content = path.read_bytes()
    checksum_path = export_dir / name.replace(".json", ".checksum")
    if checksum_path.is_file():
        expected = checksum_path.read_text(encoding="ascii").strip()
        digest = hashlib.md5(content).digest()
        # Seen in the wild both as hex and as base64; accept either spelling.
        if expected not in (digest.hex(), base64.b64encode(digest).decode("ascii")):
            raise ExportValidationError(f"{path}: md5 does not match {checksum_path.name}")
    return content


def _checked_data_file(
    prefix_root: Path, data_folder: Path, s3_prefix: str | None, entry: Mapping[str, Any]
) -> ExportDataFile:
    s3_key = entry["dataFileS3Key"]
    path = _data_file_path(prefix_root, data_folder, s3_prefix, s3_key)
    if not path.is_file():
        raise ExportValidationError(f"data file listed in {FILES_MANIFEST_FILE} is missing: {path}")
    compressed = path.read_bytes()
    md5_checksum = base64.b64encode(hashlib.md5(compressed).digest()).decode("ascii")
    if md5_checksum != entry["md5Checksum"]:
        raise ExportValidationError(
            f"{path}: md5 {md5_checksum} does not match md5Checksum {entry['md5Checksum']} in {FILES_MANIFEST_FILE}"
        )
    try:
        lines = sum(1 for line in gzip.decompress(compressed).splitlines() if line.strip())
    except (OSError, EOFError, zlib.error) as exc:
        raise ExportValidationError(f"{path}: not a readable gzip file ({exc})") from exc
    if lines != entry["itemCount"]:
        raise ExportValidationError(f"{path}: {lines} lines but itemCount {entry['itemCount']} in {FILES_MANIFEST_FILE}")
    return ExportDataFile(path, s3_key, lines, entry["md5Checksum"], entry.get("etag", ""))


# What is wrong with a data-file line that cannot be replayed, as the reports name it.
NOT_UTF8 = "not UTF-8"
NOT_JSON = "not JSON"
NOT_AN_OBJECT = "not a JSON object"
NO_ITEM = "no Item object"
NO_KEYS = "no Keys object"
MISSING_KEY = "missing key attribute"
BAD_WRITE_TIME = "no usable Metadata.WriteTimestampMicros"
EXAMPLES_PER_PROBLEM = 3


class ExportLineError(ExportValidationError):
    """One data-file line that cannot become a change record."""

    def __init__(self, where: str, problem: str, detail: str = "") -> None:
        super().__init__(f"{where}: {problem}" + (f" ({detail})" if detail else ""))
        self.problem = problem


@dataclass
class RefusedLines:
    """Every line of an export that a backfill would refuse, counted by problem."""

    lines_checked: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def add(self, error: ExportLineError) -> None:
        self.counts[error.problem] = self.counts.get(error.problem, 0) + 1
        examples = self.examples.setdefault(error.problem, [])
        if len(examples) < EXAMPLES_PER_PROBLEM:
            examples.append(str(error))

    def lines(self) -> list[str]:
        out = [f"{self.total} of {self.lines_checked} export lines cannot be replayed:"]
        for problem, count in sorted(self.counts.items()):
            out.append(f"  {count} {problem}, first: " + "; ".join(self.examples[problem]))
        return out


def export_to_change_records(export_dir: Path | str, contract: TableContract) -> Iterator[str]:
    """Replay a validated export as Kinesis-Data-Streams-for-DynamoDB change records (JSON lines).

    Full export lines become INSERTs of the item's state at the export time; incremental
    lines INSERT / MODIFY / REMOVE of its state at their write timestamp (with the
    NEW_IMAGE view an update has no OldImage and comes out as an INSERT: the marts read
    these rows as snapshots, not events, so the name does not count). Each is placed by
    snapshot_ordering. Event ids are derived from the export id, data file and line so
    a re-run produces identical records. The first line that cannot be replayed raises
    its ExportLineError (`refused_export_lines` lists them all beforehand).

    `contract` is any raw table's contract of the exported DynamoDB table: only the table
    name and the key attributes are read, and a single-table design's entities and its
    unrouted table share both. Which raw table a record lands in is the decoder's
    business (streaming.pipeline.routing), as for a stream record.
    """
    for replayed in _replay(read_export_manifest(export_dir), contract):
        if isinstance(replayed, ExportLineError):
            raise replayed
        yield replayed


def refused_export_lines(manifest: ExportManifest, contract: TableContract) -> RefusedLines:
    """Replay every line without keeping the records; the lines a replay would refuse."""
    refused = RefusedLines()
    for replayed in _replay(manifest, contract):
        refused.lines_checked += 1
        if isinstance(replayed, ExportLineError):
            refused.add(replayed)
    return refused


def _replay(manifest: ExportManifest, contract: TableContract) -> Iterator[str | ExportLineError]:
    """Each non-blank data-file line as its change record, or as the error that refuses it."""
    table_name = contract.table
    if manifest.table_name != table_name:
        raise ExportValidationError(
            f"{manifest.export_dir}: export is of table {manifest.table_name!r}, not {table_name!r}"
        )
    key_names = contract.key_attributes
    incremental = manifest.export_type == INCREMENTAL_EXPORT
    export_time_us = epoch_micros(manifest.export_time) if manifest.export_time else 0
    for data_file in manifest.data_files:
        file_stem = data_file.path.name.removesuffix(".json.gz")
        with gzip.open(data_file.path, "rb") as lines:
            for line_no, raw_line in enumerate(lines, start=1):
                if not raw_line.strip():
                    continue
                event_id = f"{SNAPSHOT_EVENT_ID_PREFIX}{manifest.export_id}:{file_stem}:{line_no}"
                where = f"{data_file.path} line {line_no}"
                try:
                    row = _parse_export_line(raw_line, where)
                    if incremental:
                        yield _incremental_change_record(row, table_name, key_names, event_id, where)
                    else:
                        yield _full_export_change_record(row, table_name, key_names, event_id, export_time_us, where)
                except ExportLineError as error:
                    yield error


def _parse_export_line(raw_line: bytes, where: str) -> dict[str, Any]:
    try:
        line = raw_line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ExportLineError(where, NOT_UTF8, f"byte {raw_line[exc.start]:#04x} at column {exc.start + 1}") from exc
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ExportLineError(where, NOT_JSON, str(exc)) from exc
    if not isinstance(row, dict):
        raise ExportLineError(where, NOT_AN_OBJECT)
    return row


def _full_export_change_record(
    row: Mapping[str, Any],
    table_name: str,
    key_names: tuple[str, ...],
    event_id: str,
    export_time_us: int,
    where: str,
) -> str:
    item = row.get("Item")
    if not isinstance(item, dict):
        raise ExportLineError(where, NO_ITEM)
    missing = [name for name in key_names if name not in item]
    if missing:
        raise ExportLineError(where, MISSING_KEY, f"Item lacks {missing}")
    keys = {name: item[name] for name in key_names}
    return _change_record(table_name, event_id, "INSERT", export_time_us, keys, item, None)


def _incremental_change_record(
    row: Mapping[str, Any], table_name: str, key_names: tuple[str, ...], event_id: str, where: str
) -> str:
    keys = row.get("Keys")
    if not isinstance(keys, dict) or not keys:
        raise ExportLineError(where, NO_KEYS)
    missing = [name for name in key_names if name not in keys]
    if missing:
        raise ExportLineError(where, MISSING_KEY, f"Keys lacks {missing}")
    write_time_us = _write_timestamp_us(row.get("Metadata"), where)
    new_image, old_image = row.get("NewImage"), row.get("OldImage")
    if new_image is None:
        event_name = "REMOVE"
    elif old_image is None:
        # With the NEW_IMAGE view an update also lacks OldImage; MODIFY and INSERT
        # land the same way downstream, so only NEW_AND_OLD_IMAGES tells them apart.
        event_name = "INSERT"
    else:
        event_name = "MODIFY"
    return _change_record(table_name, event_id, event_name, write_time_us, keys, new_image, old_image)


def _write_timestamp_us(metadata: Any, where: str) -> int:
    raw = metadata.get("WriteTimestampMicros") if isinstance(metadata, dict) else None
    if isinstance(raw, dict):  # DynamoDB JSON: {"N": "1699999999999999"}
        raw = raw.get("N")
    try:
        return int(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        raise ExportLineError(where, BAD_WRITE_TIME) from exc


def snapshot_ordering(taken_us: int) -> tuple[int, str]:
    """(ApproximateCreationDateTime in µs, SequenceNumber) of an item's snapshot taken at
    epoch microsecond `taken_us`: where it sorts among the item's stream changes.

    DynamoDB Streams stamps a change with its second, rounded down (API reference,
    StreamRecord.ApproximateCreationDateTime), so a change stamped with the snapshot's
    own second may have been written after the snapshot was taken. The snapshot is
    therefore placed at the last microsecond before that second: every change stamped
    with that second or later wins over it, and every change stamped earlier is
    contained in it and loses. When the stream holds such a change, it also holds every
    later one, so the state converges to the newest write either way. Its sequence
    number is the exact time taken, which orders two snapshots of one second (a full
    export and an incremental one) by when they were taken.
    """
    return taken_us - taken_us % MICROS_PER_SECOND - 1, str(taken_us)


def _change_record(
    table_name: str,
    event_id: str,
    event_name: str,
    taken_us: int,
    keys: DynamoItem,
    new_image: DynamoItem | None,
    old_image: DynamoItem | None,
) -> str:
    placed_us, sequence_number = snapshot_ordering(taken_us)
    dynamodb: dict[str, Any] = {
        "ApproximateCreationDateTime": placed_us,
        "ApproximateCreationDateTimePrecision": "MICROSECOND",
        "Keys": keys,
        "SequenceNumber": sequence_number,
    }
    if new_image is not None:
        dynamodb["NewImage"] = new_image
    if old_image is not None:
        dynamodb["OldImage"] = old_image
    image = new_image if new_image is not None else old_image if old_image is not None else keys
    dynamodb["SizeBytes"] = len(json.dumps(image, separators=(",", ":")))
    record = {
        "awsRegion": SAMPLE_REGION,
        "eventID": event_id,
        "eventName": event_name,
        "userIdentity": None,
        "recordFormat": "application/json",
        "tableName": table_name,
        "dynamodb": dynamodb,
        "eventSource": "aws:dynamodb",
    }
    return json.dumps(record, separators=(",", ":"))


# --------------------------------------------------------------------------- helpers


def _prefix_root(export_dir: Path) -> Path:
    if export_dir.parent.name != EXPORT_ROOT_FOLDER:
        raise ExportValidationError(f"{export_dir}: an export directory lives in a folder named {EXPORT_ROOT_FOLDER}")
    return export_dir.parent.parent


def _data_folder(export_dir: Path, export_type: str) -> Path:
    """Where the export's data files are: its own `data/` (full), the shared `AWSDynamoDB/data/` (incremental)."""
    return export_dir.parent / "data" if export_type == INCREMENTAL_EXPORT else export_dir / "data"


def _data_file_path(prefix_root: Path, data_folder: Path, s3_prefix: str | None, s3_key: Any) -> Path:
    """The local file of a manifest's `dataFileS3Key`, which must name a file of this export.

    The key is an S3 key inside the export's bucket (`[<s3Prefix>/]AWSDynamoDB/...`; AWS's
    examples show it both with and without the prefix). A URL (another bucket), an
    absolute path, `.`/`..` segments, another prefix or a file outside the export's data
    folder is refused: the manifest decides which files are read, so it must not be able
    to point anywhere else.
    """
    if not isinstance(s3_key, str) or not s3_key:
        raise ExportValidationError(f"dataFileS3Key {s3_key!r} is not a key")
    if "://" in s3_key or s3_key.startswith("/") or "\\" in s3_key:
        raise ExportValidationError(
            f"dataFileS3Key {s3_key!r} is not a key inside the export's bucket (a URL or absolute path); refused"
        )
    segments = s3_key.split("/")
    if any(segment in ("", ".", "..") for segment in segments):
        raise ExportValidationError(f"dataFileS3Key {s3_key!r} has an empty, '.' or '..' segment; refused")
    if EXPORT_ROOT_FOLDER not in segments:
        raise ExportValidationError(f"dataFileS3Key {s3_key!r} does not contain {EXPORT_ROOT_FOLDER + '/'!r}")
    marker = segments.index(EXPORT_ROOT_FOLDER)
    key_prefix = "/".join(segments[:marker])
    if key_prefix and key_prefix != (s3_prefix or "").strip("/"):
        raise ExportValidationError(
            f"dataFileS3Key {s3_key!r} is under prefix {key_prefix!r}, not this export's s3Prefix {s3_prefix!r}; refused"
        )
    path = prefix_root.joinpath(*segments[marker:])
    # resolve(): a symlinked data folder must not lead out of the export either.
    if path.resolve().parent != data_folder.resolve():
        raise ExportValidationError(
            f"dataFileS3Key {s3_key!r} names {path}, which is not a file of the export's data folder {data_folder}; refused"
        )
    return path


def as_utc(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        raise ValueError("timestamps must be timezone-aware (UTC)")
    return moment.astimezone(timezone.utc)


def epoch_micros(moment: datetime) -> int:
    delta = as_utc(moment) - datetime(1970, 1, 1, tzinfo=timezone.utc)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00"))
