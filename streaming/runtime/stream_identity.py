"""One stream identity per data root: a lost checkpoint or a moved data directory is
refused at start instead of silently reusing batch ids.

Structured Streaming numbers micro-batches from 0 in each new checkpoint, and its file
source remembers the landing files it has read by absolute path. So an operator who
deletes `checkpoints/`, or copies the data directory elsewhere, and restarts would
re-read every landing file as new and write batch 0, 1, ... again: over the batch
folders already in raw (rows lost where landing files have expired) or beside them
(rows duplicated; on Hudi, whose commits are recognised by stream id and batch id, a new
stream id would insert every change again). The first stream start on a data root records, in
`<root>/raw/_stream.json`, the checkpoint's query id (Spark's `<checkpoint>/metadata`)
and the absolute checkpoint and landing paths; every later start must match them. A
checkpoint that committed batches beside a raw folder without that record (deleted with
it) is refused too.

One table's change log deleted (or its newest batches) while the record survives is
caught by the record's `table_batches`: per change log, the newest stream batch it held
when the stream last started or finished. A later start is refused when the checkpoint
has committed that batch but the change log no longer holds it. A table whose first
batches were written since then (and deleted before the next start) is not covered.
"""
from __future__ import annotations

import json
import uuid
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path

from streaming.atomic_files import write_json_atomically
from streaming.contracts.model import TableContract
from streaming.errors import OperatorError
from streaming.io import layout as raw_layout
from streaming.io.formats.registry import format_of_table
from streaming.io.layout import DataLayout

_START_OVER = "to start over, move raw/, quarantine/ and checkpoints/ aside together"


class StreamIdentityError(OperatorError, RuntimeError):
    """The checkpoint does not belong to the raw tables it would write; the message says what to do."""


@dataclass(frozen=True)
class StreamIdentity:
    stream_id: str
    checkpoint: str
    landing: str
    recorded_at: str
    # Change log -> the newest stream batch it held when last seen; records written
    # before this field existed have none.
    table_batches: dict[str, int] = field(default_factory=dict)


def query_id_in_metadata(text: str) -> str:
    """The query id in the text of a checkpoint's `metadata` file: Spark writes it as the
    JSON object `{"id": "<uuid>"}` on its first line (StreamMetadata). ValueError when the
    text is not that."""
    try:
        query_id = json.loads(text.splitlines()[0])["id"]
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise ValueError(f"not a Structured Streaming checkpoint's metadata ({type(exc).__name__}: {exc})") from exc
    return str(query_id)


def checkpoint_stream_id(checkpoint_dir: Path) -> str | None:
    """The query id Spark keeps in `<checkpoint>/metadata`, or None without a checkpoint."""
    path = checkpoint_dir / raw_layout.CHECKPOINT_METADATA_FILE
    if not path.is_file():
        return None
    try:
        return query_id_in_metadata(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise StreamIdentityError(f"{path}: {exc}") from exc


def committed_batch_ids(checkpoint_dir: Path) -> set[int]:
    commits = checkpoint_dir / raw_layout.CHECKPOINT_COMMITS_FOLDER
    return {int(path.name) for path in commits.iterdir() if path.name.isdigit()} if commits.is_dir() else set()


def change_log_batch_ids(table_dir: Path) -> set[int]:
    """The batch ids a change log holds, as its raw format records them (RawFormat.batch_ids:
    batch folders, or the batch markers of completed commits); none before its first write."""
    raw_format = format_of_table(table_dir)
    return raw_format.batch_ids(table_dir) if raw_format is not None else set()


def table_batch_ids(data_root: Path, contracts: dict[str, TableContract]) -> dict[str, set[int]]:
    """Per change log, the stream batch ids (not backfills or replays, which are negative)
    it holds."""
    raw = DataLayout(data_root).raw
    return {
        contract.changes_table: {
            batch_id for batch_id in change_log_batch_ids(raw_layout.change_log_dir(raw, contract)) if batch_id >= 0
        }
        for contract in contracts.values()
    }


def written_batch_ids(data_root: Path, contracts: dict[str, TableContract]) -> set[int]:
    """Stream batch ids (not backfills, which are negative) with folders in raw or quarantine."""
    ids = set().union(*table_batch_ids(data_root, contracts).values())
    quarantined = DataLayout(data_root).quarantine_batch_ids()
    return ids | {batch_id for batch_id in quarantined if batch_id >= 0}


def read_identity(data_root: Path) -> StreamIdentity | None:
    path = DataLayout(data_root).stream_identity
    if not path.is_file():
        return None
    try:
        return StreamIdentity(**json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, TypeError) as exc:
        raise StreamIdentityError(f"{path} is not a stream identity record ({exc}); restore it from a backup") from exc


def claim_stream_identity(
    data_root: Path, checkpoint_dir: Path, landing_dir: Path, contracts: dict[str, TableContract]
) -> str:
    """The stream id the query on `checkpoint_dir` runs under, after checking that it is the
    stream that wrote `data_root`'s raw tables; raises StreamIdentityError otherwise."""
    checkpoint, landing = str(checkpoint_dir.resolve()), str(landing_dir.resolve())
    recorded = read_identity(data_root)
    checkpoint_id = checkpoint_stream_id(checkpoint_dir)
    written = written_batch_ids(data_root, contracts)
    if recorded is not None:
        _check_same_stream(recorded, checkpoint_id, checkpoint, landing, data_root)
        _check_table_batches(recorded, checkpoint_dir, table_batch_ids(data_root, contracts), data_root)
    elif written and checkpoint_id is None:
        raise StreamIdentityError(
            f"{DataLayout(data_root).raw} holds stream batches {_ids(written)} but there is no checkpoint at "
            f"{checkpoint}: restarting would read every landing file again under batch ids from 0. "
            f"Restore the checkpoint folder to resume; or rebuild with `lakehouse reprocess --to <new data root>` "
            f"and `lakehouse switch`; or, {_START_OVER}"
        )
    else:
        # No record (it lives in raw/) yet a checkpoint that committed batches, and no stream
        # batch in raw: raw was deleted under a live checkpoint. With batches in raw, it is a
        # raw folder from before these records existed, adopted below. (A committed batch
        # may leave no folder at all, e.g. an empty landing file, so folders are not matched
        # batch by batch.)
        committed = committed_batch_ids(checkpoint_dir)
        if committed and not written:
            raise StreamIdentityError(
                f"the checkpoint {checkpoint} committed batches {_ids(committed)}, but {DataLayout(data_root).raw} and "
                f"the quarantine hold none of them: raw was deleted or replaced. Restore it, or rebuild with "
                f"`lakehouse reprocess --to <new data root>`; or, {_START_OVER}"
            )
    if recorded is not None:
        record_table_batches(data_root, contracts)
        return recorded.stream_id
    stream_id = checkpoint_id or _new_checkpoint_identity(checkpoint_dir)
    _write_identity(data_root, StreamIdentity(stream_id, checkpoint, landing, datetime.now(timezone.utc).isoformat(),
                                              _newest_batches(table_batch_ids(data_root, contracts))))
    return stream_id


def record_table_batches(data_root: Path, contracts: dict[str, TableContract]) -> None:
    """Note in the stream identity record the newest batch each change log holds now
    (the stream calls this when it starts and when it finishes); a change log that holds
    none keeps what was noted before."""
    recorded = read_identity(data_root)
    if recorded is None:
        return
    newest = {**recorded.table_batches, **_newest_batches(table_batch_ids(data_root, contracts))}
    # Rewritten only on a change: an idle restart leaves the record as it was.
    if newest != recorded.table_batches:
        _write_identity(data_root, replace(recorded, table_batches=newest))


def _newest_batches(batches: dict[str, set[int]]) -> dict[str, int]:
    return {table: max(ids) for table, ids in batches.items() if ids}


def _check_table_batches(
    recorded: StreamIdentity, checkpoint_dir: Path, held: dict[str, set[int]], data_root: Path
) -> None:
    """Refuse when a contracted table's change log lost a batch the checkpoint committed
    and the record saw there. Spark keeps only its newest commit files, so a batch up to
    the newest commit counts as committed."""
    newest_commit = max(committed_batch_ids(checkpoint_dir), default=-1)
    lost = {table: batch_id for table, batch_id in recorded.table_batches.items()
            if table in held and batch_id <= newest_commit and batch_id not in held[table]}
    if lost:
        raw = DataLayout(data_root).raw
        gone = ", ".join(f"{raw / table} (batch {batch_id})" for table, batch_id in sorted(lost.items()))
        raise StreamIdentityError(
            f"the checkpoint {checkpoint_dir.resolve()} committed batches that these change logs held and no "
            f"longer hold: {gone}; raw folders were deleted under a live checkpoint, and the stream would not "
            f"write those batches again. Restore them, or rebuild with `lakehouse reprocess --to <new data root>` "
            f"and `lakehouse switch`; or, {_START_OVER}"
        )


def _check_same_stream(
    recorded: StreamIdentity, checkpoint_id: str | None, checkpoint: str, landing: str, data_root: Path
) -> None:
    record = DataLayout(data_root).stream_identity
    if recorded.landing != landing or recorded.checkpoint != checkpoint:
        raise StreamIdentityError(
            f"this data directory was moved: {record} was written for landing {recorded.landing} and checkpoint "
            f"{recorded.checkpoint}, not {landing} and {checkpoint}. The checkpoint lists landing files by "
            f"absolute path, so a restart here would read every file again as new. Move the directory back, "
            f"or rebuild here with `lakehouse reprocess --to <new data root>` and `lakehouse switch`"
        )
    if checkpoint_id is None:
        raise StreamIdentityError(
            f"the checkpoint {checkpoint} of stream {recorded.stream_id} is gone ({record} records it): "
            f"restarting would read every landing file again under batch ids from 0. Restore the checkpoint "
            f"folder to resume; or rebuild with `lakehouse reprocess --to <new data root>` and `lakehouse switch`; "
            f"or, {_START_OVER}"
        )
    if checkpoint_id != recorded.stream_id:
        raise StreamIdentityError(
            f"the checkpoint {checkpoint} belongs to stream {checkpoint_id}, but the raw tables were written by "
            f"stream {recorded.stream_id} ({record}): its batch ids would collide with theirs. Restore the "
            f"original checkpoint, or rebuild with `lakehouse reprocess --to <new data root>`; or, {_START_OVER}"
        )


def _new_checkpoint_identity(checkpoint_dir: Path) -> str:
    """Create Spark's checkpoint metadata with a fresh query id, so the id is known (and
    recorded) before the first batch runs; Spark reads an existing file instead of making one."""
    stream_id = str(uuid.uuid4())
    checkpoint_dir.mkdir(parents=True, exist_ok=True)
    metadata = checkpoint_dir / raw_layout.CHECKPOINT_METADATA_FILE
    metadata.write_text(json.dumps({"id": stream_id}) + "\n", encoding="utf-8")
    return stream_id


def _write_identity(data_root: Path, identity: StreamIdentity) -> None:
    write_json_atomically(DataLayout(data_root).stream_identity, asdict(identity))


def _ids(batch_ids: set[int]) -> str:
    ordered = sorted(batch_ids)
    return ", ".join(map(str, ordered)) if len(ordered) <= 6 else f"{ordered[0]}..{ordered[-1]} ({len(ordered)})"
