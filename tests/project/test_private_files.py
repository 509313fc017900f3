"""A data directory holds clear PII: what the commands write there is its owner's alone."""
from __future__ import annotations

import os
import shutil
import stat

import pytest

from streaming.cli import main
from streaming.contracts.loader import SAMPLE_CONTRACTS_DIR
from streaming.io.layout import DataLayout
from streaming.operations.stream import stream


@pytest.mark.spark
def test_after_a_stream_no_file_under_the_data_dir_is_readable_by_group_or_others(spark, tmp_path):
    layout = DataLayout(tmp_path / "data")
    # One contract: the other tables' records are quarantined, so the stream still writes
    # a raw table, the quarantine, its checkpoint and its records, and Spark plans one table.
    contracts = tmp_path / "contracts"
    contracts.mkdir()
    shutil.copy(SAMPLE_CONTRACTS_DIR / "customers.yml", contracts)
    shell_umask = os.umask(0o022)  # a usual shell's
    try:
        assert main(["generate", "--data-dir", str(layout.root), "--customers", "3", "--tenants", "0",
                     "--records-per-file", "40"]) == 0
        os.umask(0o022)  # the stream alone must not depend on the CLI having set it
        stream(layout, sink="parquet", contracts_dir=str(contracts), spark=spark, out=lambda _: None)
    finally:
        os.umask(shell_umask)

    written = [layout.root, *layout.root.rglob("*")]
    assert any(path.suffix == ".parquet" for path in written) and any(".crc" in path.name for path in written)
    shared = [f"{stat.filemode(path.stat().st_mode)} {path.relative_to(tmp_path)}"
              for path in written if path.stat().st_mode & 0o077]
    assert shared == []
