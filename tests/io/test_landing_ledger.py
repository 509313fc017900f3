"""The ledger of landing files each batch read, and the warnings for files changed since."""
from __future__ import annotations

import json
import os

from streaming.io.landing_ledger import LandedFile, changed_files, record_batch
from streaming.io.layout import DataLayout
from streaming.operations.status import status


def landed(path) -> LandedFile:
    stat = path.stat()
    return LandedFile(f"file:{path}", stat.st_size, stat.st_mtime_ns // 1_000_000)


def test_unchanged_files_give_no_warning_and_a_replay_rewrites_its_entry(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    first.write_bytes(b'{"a":1}')
    second.write_bytes(b'{"a":2}')
    ledger = tmp_path / "ledger"
    record_batch(ledger, 0, [landed(first)])
    record_batch(ledger, 0, [landed(first), landed(second)])  # the replay of batch 0

    (entry,) = [json.loads(path.read_text()) for path in ledger.iterdir()]
    assert entry["batch_id"] == 0 and [f["path"] for f in entry["files"]] == [f"file:{first}", f"file:{second}"]
    assert changed_files(ledger) == []


def test_a_rewrite_with_the_same_size_is_caught_by_its_modification_time(tmp_path):
    path = tmp_path / "file"
    path.write_bytes(b'{"a":1}')
    os.utime(path, (1_800_000_000, 1_800_000_000))
    record_batch(tmp_path / "ledger", 3, [landed(path)])
    path.write_bytes(b'{"a":9}')
    os.utime(path, (1_800_000_100, 1_800_000_100))

    (changed,) = changed_files(tmp_path / "ledger")
    assert (changed.batch_id, changed.processed_length, changed.length) == (3, 7, 7)
    assert (changed.processed_modified_ms, changed.modified_ms) == (1_800_000_000_000, 1_800_000_100_000)


def test_deleted_and_remote_files_are_not_reported(tmp_path):
    gone = tmp_path / "gone"
    gone.write_bytes(b"{}")
    entry = landed(gone)
    gone.unlink()
    record_batch(tmp_path / "ledger", 0, [entry, LandedFile("s3://bucket/key", 1, 1)])
    assert changed_files(tmp_path / "ledger") == []


def test_status_warns_about_a_landing_file_appended_to_after_it_was_read(tmp_path):
    layout = DataLayout(tmp_path / "data")
    path = layout.landing / "2026" / "11" / "23" / "10" / "ddb-cdc-1-2026-11-23-10-00-00-uuid"
    path.parent.mkdir(parents=True)
    path.write_bytes(b'{"a":1}')
    record_batch(layout.raw / "_landing", 0, [landed(path)])
    assert not [line for line in status(layout).lines() if "WARNING" in line]

    with path.open("ab") as out:
        out.write(b'{"a":2}')

    (warning,) = [line for line in status(layout).lines() if line.startswith("WARNING")]
    assert str(path) in warning and "batch 0" in warning and "7 bytes" in warning and "14 bytes" in warning
