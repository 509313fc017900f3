"""The runbook's initial load (docs/operations.md, "Initial load"), run command by command
as real `lakehouse` processes in a fresh working directory, the way an operator types them.

On the way the test does what operators do wrong or what befalls them: the backfill is
killed with SIGKILL midway and run again, run again while the stream runs (refused,
naming what to do), and run again after it succeeded; the stream is stopped as the
refusal says and started again for later changes (a stream killed mid-batch is
tests/runtime/test_stream_loop.py's and the kill_9 drill's).
At the end the raw change log holds every exported item once and every landed change
once, and the current state reconciles with an export taken after the last change.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import signal
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pytest
from cli_processes import REPO, LakehouseProcess, checkout_env

from streaming.io.layout import DATA_DIR_ENV, RAW_DIR_ENV
from streaming.io.formats.registry import format_on_disk
from streaming.operations.batches.backfill import backfill_run_id, run_log_path
from streaming.samples.export_writer import write_full_export
from streaming.samples.generator import ORDERS, GeneratedCDC, generate_cdc, land_cdc

RUNBOOK = REPO / "docs" / "operations.md"
SECTION = "## Initial load: a DynamoDB export, then the stream"
BACKFILL = "lakehouse backfill --export exports/AWSDynamoDB/<export-id> --table orders"
STREAM = "lakehouse stream --trigger processing-time &"
# The section's two shell blocks, as this test runs them (comments aside).
FIRST_LOAD = [
    f"{BACKFILL} --dry-run",
    BACKFILL,
    ("lakehouse reconcile --source exports/AWSDynamoDB/<export-id> --target data/raw --table orders "
     "--json data/reconcile-orders.json"),
    STREAM,
    "lakehouse dbt build",
]
STREAM_RUNNING = ["kill <pid>", BACKFILL, STREAM]

EXPORT_TIME = datetime(2026, 11, 1, 2, 0, 0, 250000, tzinfo=UTC)
# Changes that arrive from this time on land after the first stream has stopped.
SECOND_LANDING = datetime(2026, 11, 1, 5, tzinfo=UTC)
# After the last generated change: an export then is the final state.
LATER_EXPORT_TIME = datetime(2026, 11, 2, tzinfo=UTC)
CHECKPOINT = Path("data/checkpoints/landing_to_raw")


def documented_blocks() -> list[list[str]]:
    """The shell blocks of the runbook's section, one normalised command per line."""
    section = RUNBOOK.read_text(encoding="utf-8").split(SECTION, 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^```bash\n(.*?)^```", section, re.DOTALL | re.MULTILINE)
    return [[" ".join(words) for words in (shlex.split(line, comments=True) for line in block.splitlines())
             if words] for block in blocks]


def test_the_runbook_shows_the_commands_the_initial_load_test_runs():
    assert documented_blocks() == [FIRST_LOAD, STREAM_RUNNING]


class Operator:
    """Types runbook commands in a shell whose working directory is `home`."""

    def __init__(self, home: Path, export_id: str) -> None:
        self.home = home
        self.export_id = export_id
        # The runbook's paths are relative (./data, exports/...): nothing may point elsewhere.
        self.env = {name: value for name, value in checkout_env().items() if name not in (DATA_DIR_ENV, RAW_DIR_ENV)}

    def start(self, line: str) -> LakehouseProcess:
        words = shlex.split(line.replace("<export-id>", self.export_id))
        assert words[0] == "lakehouse", line
        return LakehouseProcess(words[1:-1] if words[-1] == "&" else words[1:], cwd=self.home, env=self.env)

    def run(self, line: str, expect: int = 0) -> LakehouseProcess:
        process = self.start(line)
        code = process.wait()
        assert code == expect, f"{line}: exit {code}\n{process.out}\n{process.err}"
        return process


def land(landing: Path, cdc: GeneratedCDC, since_us: int, until_us: int) -> set[str]:
    """Land the records that arrived in [since, until); returns the event ids of their orders."""
    chosen = [(record, at) for record, at in zip(cdc.records, cdc.arrival_times_us) if since_us <= at < until_us]
    land_cdc(landing, replace(cdc, records=[r for r, _ in chosen], arrival_times_us=[at for _, at in chosen]),
             records_per_file=20)
    return {json.loads(record)["eventID"] for record, _ in chosen if json.loads(record)["tableName"] == ORDERS}


def change_log(home: Path, select: str, where: str) -> list[tuple]:
    """`select` over the rows of the orders change log that match `where`, read by the
    format the runbook's commands wrote (the default sink's, as an operator gets)."""
    raw = home / "data" / "raw"
    written_by = format_on_disk(raw)
    assert written_by is not None, f"no raw table under {raw}"
    with duckdb.connect() as con:
        assert written_by.register(con, "orders_changes", raw / "orders_changes")
        return con.execute(f"select {select} from orders_changes where {where} order by all").fetchall()


def backfilled_rows(home: Path, batch: int) -> list[tuple]:
    """The backfill's rows, `_ingested_at` aside (it is the time of an attempt), and the
    Hudi commit's own columns (its instant and file names are an attempt's too)."""
    return change_log(home, "columns(lambda c: c != '_ingested_at' and not starts_with(c, '_hoodie_'))", f"_batch_id = {batch}")


def micros(moment: datetime) -> int:
    return int(moment.timestamp() * 1_000_000)


# Two to three minutes of real processes: `make drills` runs it; `make test` keeps the
# suite within its budget and still checks, above, that the runbook shows these commands.
@pytest.mark.drill
@pytest.mark.spark
@pytest.mark.dbt
def test_the_runbooks_initial_load_runs_as_documented(tmp_path):
    cdc = generate_cdc(seed=31, customers=6, orders_per_customer=2, duplicate_rate=0.0, malformed_rate=0.0,
                       record_format="kinesis")
    exported = cdc.state_at(ORDERS, EXPORT_TIME)
    export = write_full_export(tmp_path / "exports", ORDERS, exported.values(), EXPORT_TIME)
    later = write_full_export(tmp_path / "exports", ORDERS, cdc.state_at(ORDERS, LATER_EXPORT_TIME).values(),
                              LATER_EXPORT_TIME)
    # The change capture was on before the export: landing files from before it are there.
    first_events = land(tmp_path / "data" / "landing", cdc, 0, micros(SECOND_LANDING))
    assert min(cdc.arrival_times_us) < micros(EXPORT_TIME) < micros(SECOND_LANDING) < max(cdc.arrival_times_us)
    operator = Operator(tmp_path, export.name)
    batch = backfill_run_id(export.name)
    dry_run, backfill, reconcile, stream, dbt_build = FIRST_LOAD
    started: list[LakehouseProcess] = []
    try:
        assert "dry run: nothing was written" in operator.run(dry_run).out
        assert not (tmp_path / "data" / "raw").exists()

        # The backfill dies midway (SIGKILL, as a lost machine would); the same command finishes it.
        killed = operator.start(backfill)
        started.append(killed)
        killed.wait_until(lambda: "processing one batch" in killed.out, "the backfill's batch")
        killed.signal_group(signal.SIGKILL)
        killed.wait()
        assert json.loads(run_log_path(tmp_path / "data", export.name).read_text())["status"] == "running"
        staging = tmp_path / "data" / "backfills" / "_staging" / export.name
        assert staging.is_dir(), "it died midway, its staged batch left behind"
        finished = operator.run(backfill)
        assert not staging.exists()
        assert "taking over the lock" in finished.out
        # The summary gives the landed rows, then each raw table's share of them.
        assert re.search(rf"landed={len(exported)} \([^)]*\) quarantined=0", finished.out), finished.out
        backfilled = backfilled_rows(tmp_path, batch)
        keys = change_log(tmp_path, "customer_id, order_id", f"_batch_id = {batch}")
        assert len(backfilled) == len(exported) == len(set(keys))

        # Before the stream, raw holds the export exactly.
        assert "result: OK" in operator.run(reconcile).out
        assert json.loads((tmp_path / "data" / "reconcile-orders.json").read_text())["ok"] is True

        streaming = operator.start(stream)
        started.append(streaming)
        streaming.wait_until((tmp_path / CHECKPOINT / "commits" / "0").is_file, "the first committed batch")
        operator.run(dbt_build)

        # A backfill while the stream runs is refused and says what to do, then does it.
        refused = operator.run(backfill, expect=2)
        assert f"being written by `lakehouse stream` (pid {streaming.pid} on host" in refused.err
        assert "run `lakehouse backfill` again, then start the stream again" in refused.err
        assert backfilled_rows(tmp_path, batch) == backfilled
        stop, again, restart = STREAM_RUNNING
        pid = int(re.search(r"stop the stream with `kill (\d+)`", refused.err).group(1))
        assert stop == "kill <pid>"
        os.kill(pid, signal.SIGTERM)
        assert streaming.wait() == 0 and "\nstopped\n" in streaming.out, streaming.err
        # It had succeeded before the stream started: run again, it writes nothing (on Hudi
        # its change log would take the rows a second time) and says so.
        assert "already succeeded" in operator.run(again).out
        assert backfilled_rows(tmp_path, batch) == backfilled, "a succeeded backfill is not landed twice"

        # Later changes arrive and the restarted stream takes them from its checkpoint. (A
        # stream killed mid-batch replays that batch: tests/runtime/test_stream_loop.py and the
        # kill_9 drill.)
        second_events = land(tmp_path / "data" / "landing", cdc, micros(SECOND_LANDING), micros(LATER_EXPORT_TIME))
        assert second_events
        resumed = operator.start(restart)
        started.append(resumed)
        resumed.wait_until((tmp_path / CHECKPOINT / "commits" / "1").is_file, "the restarted stream's batch")
        os.kill(resumed.pid, signal.SIGTERM)
        assert resumed.wait() == 0, resumed.err

        final = operator.run(f"lakehouse reconcile --source exports/AWSDynamoDB/{later.name} --target data/raw "
                             "--table orders")
        assert "result: OK" in final.out
    finally:
        for process in started:
            process.stop()
    # Every exported item once, every landed change once: nothing lost, nothing doubled.
    assert backfilled_rows(tmp_path, batch) == backfilled
    streamed = [event_id for (event_id,) in change_log(tmp_path, "_event_id", "_batch_id >= 0")]
    assert sorted(streamed) == sorted(first_events | second_events)
