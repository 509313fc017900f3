"""Where the local sink keeps the raw change logs (paths only: no Spark, no I/O).

```
<data root>/raw/<raw_table>_changes/_ingest_hour=<yyyy-MM-dd-HH>/_batch_id=<n>/part-*.parquet
<data root>/raw/_tmp/...        a batch being written; renamed into place when complete
```

Every reader (status, reconcile, backfill checks, dbt's DuckDB views) lists files with
`CHANGE_LOG_FILE_GLOB`, so a batch folder under `_tmp` is invisible until its rename.
"""
from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from streaming.contract import INGEST_HOUR_COLUMN, TableContract

BATCH_COLUMN = "_batch_id"
# Hidden from every reader: no glob below starts inside it.
TEMPORARY_FOLDER = "_tmp"
CHANGE_LOG_FILE_GLOB = f"{INGEST_HOUR_COLUMN}=*/{BATCH_COLUMN}=*/*.parquet"


def ingest_hour(ingested_at: datetime) -> str:
    """The change-log partition of a batch ingested at `ingested_at` (`yyyy-MM-dd-HH`, UTC)."""
    return ingested_at.astimezone(timezone.utc).strftime("%Y-%m-%d-%H")


def change_log_dir(raw_root: Path, contract: TableContract) -> Path:
    return raw_root / contract.changes_table


def change_log_files(table_dir: Path) -> list[Path]:
    return sorted(table_dir.glob(CHANGE_LOG_FILE_GLOB))


def hour_folder(hour: str) -> str:
    return f"{INGEST_HOUR_COLUMN}={hour}"


def batch_folder(batch_id: int) -> str:
    return f"{BATCH_COLUMN}={batch_id}"


def batch_ids(table_dir: Path) -> set[int]:
    return {int(folder.name.split("=", 1)[1]) for folder in table_dir.glob(f"{INGEST_HOUR_COLUMN}=*/{BATCH_COLUMN}=*")}
