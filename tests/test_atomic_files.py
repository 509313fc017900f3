"""Local state files are replaced whole or not at all (streaming/atomic_files.py)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from streaming.atomic_files import read_json_records, write_json_atomically, write_text_atomically


def test_a_write_creates_the_folder_and_replaces_the_old_content(tmp_path: Path) -> None:
    target = tmp_path / "state" / "pointer.json"
    write_json_atomically(target, {"data_root": "a"})
    write_json_atomically(target, {"data_root": "b"})
    assert json.loads(target.read_text()) == {"data_root": "b"}
    assert target.read_text().endswith("}\n")
    assert [path.name for path in target.parent.iterdir()] == ["pointer.json"]


def test_a_failed_rename_keeps_the_old_content_and_leaves_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "entry.txt"
    write_text_atomically(target, "old")

    def no_space(source: str, destination: str) -> None:
        raise OSError("No space left on device")

    monkeypatch.setattr("streaming.atomic_files.os.replace", no_space)
    with pytest.raises(OSError, match="No space left"):
        write_text_atomically(target, "new")
    assert target.read_text() == "old"
    assert [path.name for path in tmp_path.iterdir()] == ["entry.txt"]


def test_a_document_that_is_not_json_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    target = tmp_path / "run.json"
    with pytest.raises(TypeError):
        write_json_atomically(target, {"when": object()})
    assert not target.exists()


def test_run_records_are_read_by_file_name_and_a_missing_folder_has_none(tmp_path: Path) -> None:
    write_json_atomically(tmp_path / "runs" / "b.json", {"run": 2})
    write_json_atomically(tmp_path / "runs" / "a.json", {"run": 1})
    (tmp_path / "runs" / ".c.json.123.tmp").write_text("{half", encoding="utf-8")  # a write cut short

    assert read_json_records(tmp_path / "runs") == [{"run": 1}, {"run": 2}]
    assert read_json_records(tmp_path / "missing") == []
