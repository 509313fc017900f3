"""The cluster drill's own pieces (benchmarks/cluster_drill.py); the drill itself starts a
standalone cluster and runs for minutes, so it is `make drills`, not a test."""
from __future__ import annotations

import os
from pathlib import Path

from benchmarks.cluster_drill import (
    REPO_ROOT,
    cli_environment,
    committed_batches,
    executors_fetched_jar,
    generate_landing,
    stream_command,
)


def test_landing_files_are_taken_in_name_order_by_spark(tmp_path: Path) -> None:
    files = generate_landing(tmp_path, customers=6, records_per_file=20, seed=5)

    assert len(files) >= 3 and files == sorted(files)
    # Spark's file source orders by modification time (ms): distinct times, rising with the
    # name, make the split into micro-batches the same in every run.
    times_ms = [int(path.stat().st_mtime * 1000) for path in files]
    assert times_ms == sorted(times_ms) and len(set(times_ms)) == len(files)


def test_cli_runs_this_checkout_with_capped_memory() -> None:
    env = cli_environment()

    assert env["PYTHONPATH"].split(os.pathsep)[:2] == [str(REPO_ROOT), str(REPO_ROOT / "dbt_project")]
    assert "--driver-memory 1g" in env["PYSPARK_SUBMIT_ARGS"]
    assert "spark.executor.memory=512m" in env["PYSPARK_SUBMIT_ARGS"]
    assert env["PYSPARK_SUBMIT_ARGS"].endswith("pyspark-shell")
    command = stream_command(Path("/data"), "spark://127.0.0.1:7077", 2)
    assert command[1:4] == ["-m", "streaming.cli", "stream"]
    assert command[command.index("--master") + 1] == "spark://127.0.0.1:7077"
    assert command[command.index("--max-files-per-trigger") + 1] == "2"
    assert command[command.index("--sink") + 1] == "parquet"
    assert stream_command(Path("/data"), "local[2]", 2, "hudi")[command.index("--sink") + 1] == "hudi"


def test_the_hudi_bundle_is_found_in_executor_folders(tmp_path: Path) -> None:
    jar = "hudi-spark3.5-bundle_2.12-1.0.2.jar"
    assert executors_fetched_jar(tmp_path, jar) == []
    executor = tmp_path / "worker-1" / "app-20261126-0000" / "0"
    executor.mkdir(parents=True)
    (executor / jar).touch()
    (executor / "stderr").touch()
    assert executors_fetched_jar(tmp_path, jar) == ["worker-1/app-20261126-0000/0"]


def test_committed_batches_counts_commit_files_only(tmp_path: Path) -> None:
    assert committed_batches(tmp_path) == 0
    commits = tmp_path / "checkpoints" / "landing_to_raw" / "commits"
    commits.mkdir(parents=True)
    for name in ("0", "1", ".1.crc"):
        (commits / name).write_text("v1")
    assert committed_batches(tmp_path) == 2
