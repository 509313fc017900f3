"""The data directory of `lakehouse demo`: the demo clears only a directory it made itself.

`LAKEHOUSE_DATA_DIR` may name real data (docs/dbt.md exports it for plain dbt runs), so
"start from scratch" must never mean "delete whatever is there". The demo writes a marker
file into a directory it creates; a later demo clears a directory only when that marker
is there, and refuses a non-empty directory without it.
"""
from __future__ import annotations

import shutil
from pathlib import Path

from streaming.data_lock import LOCK_FILE

DEMO_MARKER = ".lakehouse-demo"


class DemoDirRefused(Exception):
    """The directory holds data the demo did not create."""


def prepare_demo_dir(root: Path) -> str:
    """Make `root` an empty demo directory; says what it did ("created" or "cleared").

    Clearing removes everything but the marker and the lock file (the caller holds the
    lock): landing, raw, checkpoints, quarantine, backfills, the switch pointer, dbt's
    DuckDB file and its target, so a second demo with another seed shares nothing with
    the first. A root switched elsewhere keeps its data: only the pointer goes.
    """
    entries = [entry for entry in root.iterdir() if entry.name != LOCK_FILE] if root.is_dir() else []
    if not entries:
        root.mkdir(parents=True, exist_ok=True)
        (root / DEMO_MARKER).write_text("made by `lakehouse demo`; a later demo may clear this directory\n")
        return "created"
    if not (root / DEMO_MARKER).is_file():
        raise DemoDirRefused(
            f"{root} is not empty and was not made by `lakehouse demo`; the demo clears only a directory "
            "it created itself. Give it a new or empty folder with --data-dir (check LAKEHOUSE_DATA_DIR)"
        )
    for entry in entries:
        if entry.name == DEMO_MARKER:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    return "cleared"
