"""The data directory's layout: the one place that names its folders, files, environment
variables and the stream's query name. Paths only: no Spark, and no I/O beyond reading
and writing the active-raw pointer and checking that a data directory can be read.

```
<data dir>/landing/...                          landing files, as Firehose names them
<data dir>/active_raw.json                      after `lakehouse switch`: the active data root
<data dir>/.lakehouse.lock                      the single-writer lock (streaming/runtime/data_lock.py)
<data dir>/.lakehouse-demo                      marks a folder `lakehouse demo` made, and may clear
<data root>/reprocess.json                      marks a data root `lakehouse reprocess` rebuilt
<data root>/raw/<raw_table>_changes/_ingest_hour=<yyyy-MM-dd-HH>/_batch_id=<n>/part-*.parquet
<data root>/raw/_tmp/...                        a batch being written; renamed into place when complete
<data root>/raw/_tmp/<format>_warm_up/         a processing-time stream's warm-up tables, removed once written
<data root>/raw/_landing/                       the landing ledger (what each batch read)
<data root>/raw/_stream.json                    the stream identity (streaming/runtime/stream_identity.py)
<data root>/raw/_contracts/                     registered contract versions (streaming/contracts/evolution.py)
<data root>/quarantine/_batch_id=<n>/*.parquet  rejected records with their reason
<data root>/checkpoints/landing_to_raw/         the stream's Structured Streaming checkpoint (metadata, commits/)
<data root>/backfills/<export id>.json          a backfill's run log; _staging/<export id>/{input,output}/ while it runs
<data root>/replays/<replay id>.json            a quarantine replay's run log; <replay id>/ its records and output
<data root>/unrouted_replays/<replay id>.json   an unrouted replay's run log
<data dir>/dbt/{target,logs}/                   dbt's output for this data directory (manifest.json, dbt.log)
<data dir>/lakehouse.duckdb                     the local dbt target's database (dbt_project/lakehouse_dbt/duckdb_database.py opens it)
<data dir>/secrets/pii_key                      the local PII key (dbt_project/lakehouse_dbt/pii_key.py)
<data dir>/athena-local/...                     the local Trino and metastore, their logs and state (streaming/runtime/athena_local.py)
```

Three names are defined below this layer and only listed here: the contract registry's
folder in streaming/contracts/evolution.py (contracts import nothing of io), and the
database and PII key files in dbt_project/lakehouse_dbt/data_dir.py (the dbt image has
no `streaming`). tests/project/test_layout_names.py fails on any of these names written into a
path anywhere else.

The data root is the data directory itself until `lakehouse switch` points readers at a
rebuilt copy (streaming/operations/batches/switch.py). Every reader lists change-log files
with `CHANGE_LOG_FILE_GLOB`, so a batch folder under `_tmp` is invisible until its rename.
On S3 (Glue) the same folder names sit under the job's prefixes; `uri` joins them.
"""
from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

# The environment names are dbt's (lakehouse_dbt/env.py): the dbt image has no streaming.
from lakehouse_dbt.data_dir import DATABASE_FILE
from lakehouse_dbt.env import DATA_DIR_ENV, RAW_DIR_ENV
from streaming.atomic_files import write_json_atomically
from streaming.contracts.model import INGEST_HOUR_COLUMN, TableContract, ingest_hour
from streaming.errors import OperatorError

log = logging.getLogger(__name__)

# The local stream's query name, and so its checkpoint folder; `reprocess` writes its
# checkpoint under the same name, so the stream continues from it after a switch.
QUERY_NAME = "landing_to_raw"
POINTER_FILE = "active_raw.json"
LANDING_FOLDER = "landing"
RAW_FOLDER = "raw"
QUARANTINE_FOLDER = "quarantine"
CHECKPOINTS_FOLDER = "checkpoints"
DBT_FOLDER = "dbt"
LOCK_FILE = ".lakehouse.lock"
DEMO_MARKER = ".lakehouse-demo"
REPROCESS_MARKER = "reprocess.json"
# Inside dbt/: dbt's own folder and file names.
DBT_TARGET_FOLDER = "target"
DBT_LOGS_FOLDER = "logs"
DBT_MANIFEST_FILE = "manifest.json"
DBT_LOG_FILE = "dbt.log"
# Inside raw/: hidden from every reader, since no glob below starts inside them.
TEMPORARY_FOLDER = "_tmp"
LEDGER_FOLDER = "_landing"
STREAM_IDENTITY_FILE = "_stream.json"
# Inside a checkpoint: Spark's own names, the query id (StreamMetadata) and one file per
# committed batch.
CHECKPOINT_METADATA_FILE = "metadata"
CHECKPOINT_COMMITS_FOLDER = "commits"
# The run logs of the one-off batches (streaming/operations/batches/recorded_batch.py).
BACKFILLS_FOLDER = "backfills"
# Inside backfills/: a backfill's input and output until it is published.
BACKFILL_STAGING_FOLDER = "_staging"
BACKFILL_INPUT_FOLDER = "input"
BACKFILL_OUTPUT_FOLDER = "output"
QUARANTINE_REPLAYS_FOLDER = "replays"
# Inside replays/<replay id>/: the records the replay took.
REPLAY_RECORDS_FILE = "records.jsonl"
UNROUTED_REPLAYS_FOLDER = "unrouted_replays"
# The local stand-in for Athena and Glue keeps everything it writes in here.
ATHENA_LOCAL_FOLDER = "athena-local"

BATCH_COLUMN = "_batch_id"
BATCH_FOLDER_GLOB = f"{INGEST_HOUR_COLUMN}=*/{BATCH_COLUMN}=*"
CHANGE_LOG_FILE_GLOB = f"{BATCH_FOLDER_GLOB}/*.parquet"
QUARANTINE_FILE_GLOB = f"{BATCH_COLUMN}=*/*.parquet"


class PointerError(OperatorError):
    """The active-raw pointer cannot be read."""


class DataDirUnusable(OperatorError):
    """The data directory a command reads is missing, not a folder, or not readable."""


_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
# Characters a data directory's path cannot hold, and why. No reader takes them literally,
# and none of them can be escaped: DuckDB reads `\` as `/` in a database path and in the
# paths and globs it reads, so dbt would read the raw tables of, and write the database
# of, `/x/b/s/data` for `/x/b\s/data`; Hadoop reads a name holding `:` as a URI with a
# scheme, so the stream's first write would fail (URISyntaxException) after start-up.
_UNUSABLE_CHARACTERS = {
    "\\": "a backslash, which DuckDB reads as `/`: dbt would read and write another folder's files",
    ":": "a colon, which makes the path a URI to Spark and Hadoop: the stream could not write there",
}


def local_data_dir(text: str) -> Path:
    """A data directory given as text: a local folder, never a URL, whose path every
    reader takes literally. Taken as a path, `s3://bucket/x` would quietly become a local
    folder named `s3:`. The path is checked as given (made absolute, as Spark sees it) and
    with its symbolic links resolved (as dbt sees it); a refusal comes before anything is
    written, so every command refuses the same folder in the same words."""
    if _URL.match(text):
        raise DataDirUnusable(
            f"data directory {text!r} is a URL; a data directory is a local folder. On AWS the Glue job "
            "writes the S3 tables (docs/deploy-aws.md); `lakehouse` commands work on a local data directory"
        )
    path = Path(text)
    for seen in dict.fromkeys((str(path.absolute()), str(path.resolve()))):
        for character, why in _UNUSABLE_CHARACTERS.items():
            if character in seen:
                raise DataDirUnusable(
                    f"data directory {seen} holds {why}; choose a folder whose path has no "
                    + " or ".join(f"`{unusable}`" for unusable in _UNUSABLE_CHARACTERS)
                )
    return path


def default_data_dir() -> Path:
    return local_data_dir(os.environ.get(DATA_DIR_ENV) or "data")


def require_data_dir(data_dir: Path) -> None:
    """Refuse a data directory that a reading command would take as empty: a mistyped
    path would otherwise report no rows, or have dbt build empty marts."""
    if not data_dir.exists():
        raise DataDirUnusable(f"data directory {data_dir} does not exist; give --data-dir, or run `lakehouse demo`")
    if not data_dir.is_dir():
        raise DataDirUnusable(f"data directory {data_dir} is not a folder; give --data-dir")
    if not os.access(data_dir, os.R_OK | os.X_OK):
        raise DataDirUnusable(f"data directory {data_dir} cannot be read (permission denied)")


def uri(root: str, *parts: str) -> str:
    """`root` (a local path or an s3:// prefix) joined with folder names by `/`."""
    return "/".join([root.rstrip("/"), *parts])


@dataclass(frozen=True)
class DataLayout:
    """One data root's folders. For a data directory, `active()` is the root readers use."""

    root: Path

    @property
    def landing(self) -> Path:
        return self.root / LANDING_FOLDER

    @property
    def raw(self) -> Path:
        return self.root / RAW_FOLDER

    @property
    def quarantine(self) -> Path:
        return self.root / QUARANTINE_FOLDER

    @property
    def landing_ledger(self) -> Path:
        return self.raw / LEDGER_FOLDER

    @property
    def stream_identity(self) -> Path:
        return self.raw / STREAM_IDENTITY_FILE

    @property
    def lock(self) -> Path:
        return self.root / LOCK_FILE

    @property
    def demo_marker(self) -> Path:
        return self.root / DEMO_MARKER

    @property
    def reprocess_marker(self) -> Path:
        return self.root / REPROCESS_MARKER

    @property
    def dbt_target(self) -> Path:
        return self.root / DBT_FOLDER / DBT_TARGET_FOLDER

    @property
    def dbt_manifest(self) -> Path:
        return self.dbt_target / DBT_MANIFEST_FILE

    @property
    def dbt_logs(self) -> Path:
        return self.root / DBT_FOLDER / DBT_LOGS_FOLDER

    @property
    def dbt_log(self) -> Path:
        return self.dbt_logs / DBT_LOG_FILE

    @property
    def dbt_database(self) -> Path:
        return self.root / DATABASE_FILE

    @property
    def checkpoints(self) -> Path:
        return self.root / CHECKPOINTS_FOLDER

    def checkpoint(self, query_name: str = QUERY_NAME) -> Path:
        return self.checkpoints / query_name

    def quarantine_files(self) -> list[Path]:
        return sorted(self.quarantine.glob(QUARANTINE_FILE_GLOB))

    def quarantine_batch_ids(self) -> set[int]:
        return {int(folder.name.split("=", 1)[1]) for folder in self.quarantine.glob(f"{BATCH_COLUMN}=*")}

    def active(self) -> DataLayout:
        """Where raw tables, quarantine and checkpoints of this data directory live now."""
        return DataLayout(read_pointer(self.root).data_root)


# --------------------------------------------------------------------------- raw change logs


def change_log_dir(raw_root: Path, contract: TableContract) -> Path:
    return raw_root / contract.changes_table


def change_log_files(table_dir: Path) -> list[Path]:
    return sorted(table_dir.glob(CHANGE_LOG_FILE_GLOB))


def hour_folder(hour: str) -> str:
    return f"{INGEST_HOUR_COLUMN}={hour}"


def hour_folder_of(ingested_at: datetime) -> str:
    """The change-log partition folder of a batch ingested at `ingested_at`."""
    return hour_folder(ingest_hour(ingested_at))


def batch_folder(batch_id: int) -> str:
    return f"{BATCH_COLUMN}={batch_id}"


def batch_ids(table_dir: Path) -> set[int]:
    return {int(folder.name.split("=", 1)[1]) for folder in table_dir.glob(BATCH_FOLDER_GLOB)}


# --------------------------------------------------------------------------- raw formats' folders

# A folder holding this is a Hudi table (change log or current state), not a Parquet change
# log: the Hudi format's room (streaming/io/formats/hudi/) tells its tables by it.
HUDI_TIMELINE_FOLDER = ".hoodie"


# --------------------------------------------------------------------------- the active-raw pointer


@dataclass(frozen=True)
class ActiveRaw:
    """Which data root readers use; `previous` is where a rollback goes."""

    data_root: Path
    previous: Path | None
    switched_at: str | None

    @property
    def raw_dir(self) -> Path:
        return self.data_root / RAW_FOLDER


def read_pointer(data_dir: Path) -> ActiveRaw:
    """The active data root of `data_dir`: the pointer's target, or `data_dir` itself."""
    path = data_dir / POINTER_FILE
    if not path.is_file():
        return ActiveRaw(data_dir, None, None)
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        previous = document.get("previous")
        return ActiveRaw(Path(document["data_root"]), Path(previous) if previous else None, document.get("switched_at"))
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise PointerError(f"{path} is not a valid raw pointer ({exc}); fix or delete it") from exc


def write_pointer(data_dir: Path, target: Path, previous: Path) -> ActiveRaw:
    """Point readers of `data_dir` at `target`, replacing the pointer in one rename."""
    switched_at = datetime.now(timezone.utc).isoformat()
    document = {"data_root": str(target), "raw_dir": str(target / RAW_FOLDER), "previous": str(previous),
                "switched_at": switched_at}
    write_json_atomically(data_dir / POINTER_FILE, document)
    log.info("switched raw readers of %s to %s (previous %s)", data_dir, target, previous)
    return ActiveRaw(target, previous, switched_at)


def is_switched(data_dir: Path) -> bool:
    return (data_dir / POINTER_FILE).is_file()


def dbt_env(data_dir: Path) -> dict[str, str]:
    """What dbt needs to read this data directory: itself and its active raw folder."""
    return {DATA_DIR_ENV: str(data_dir.resolve()), RAW_DIR_ENV: str(read_pointer(data_dir).raw_dir.resolve())}
