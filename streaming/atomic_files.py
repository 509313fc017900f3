"""Writing a local file so that a reader sees the old content or the new, never a part;
and reading back a folder of such JSON run records.

Every state file the project keeps beside its data (the raw pointer, the stream identity,
ledger entries, run records, registered contract versions) goes through here. Imports
nothing of `streaming`, so every layer may use it.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

# Of the target's name, in its temporary file's: the rest (dot, random part, `.tmp`) is short.
_NAME_PART = 200

def write_text_atomically(path: Path | str, text: str) -> None:
    """Replace `path` with `text` in one rename, creating its folder if needed.

    The temporary file sits beside the target, so os.replace is a rename within one file
    system; its leading dot keeps it out of listings that skip hidden names. It is
    flushed to disk first, so a crash right after the rename cannot leave an empty file.
    Its name starts like the target's, cut short so that a target named up to the file
    system's 255 bytes still gets one.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name[:_NAME_PART]}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def write_json_atomically(path: Path | str, document: Any, *, indent: int = 2) -> None:
    """`document` as indented JSON with a final newline, written atomically."""
    write_text_atomically(path, json.dumps(document, indent=indent) + "\n")


def read_json_records(folder: Path) -> list[dict[str, Any]]:
    """Every `*.json` record directly in `folder` (none when it does not exist), by file name.

    The run logs of backfills and replays are such folders; the temporary files of
    `write_text_atomically` end in `.tmp` and are never read.
    """
    if not folder.is_dir():
        return []
    return [json.loads(path.read_text(encoding="utf-8")) for path in sorted(folder.glob("*.json"))]
