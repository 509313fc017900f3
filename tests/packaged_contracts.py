"""A contracts folder holding some of the packaged contract files, for the Spark tests of
a table or two: a stream or a backfill plans every contract it is given, and each
contract the test is not about only adds planning time to each batch."""
from __future__ import annotations

import shutil
from pathlib import Path

from streaming.contracts.loader import SAMPLE_CONTRACTS_DIR


def packaged_contracts_dir(folder: Path, *names: str) -> str:
    """`folder` (created) holding the packaged contracts `names` (file names without .yml)."""
    folder.mkdir(parents=True)
    for name in names:
        shutil.copy(SAMPLE_CONTRACTS_DIR / f"{name}.yml", folder)
    return str(folder)
