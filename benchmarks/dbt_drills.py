"""dbt drills on the local target: incremental equals full refresh after random batch
histories, and a build killed midway leaves the previous tables readable."""
from __future__ import annotations

import random
import shutil
import time
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import duckdb

from benchmarks.measure import kill_tree, start_case
from streaming.io.layout import DataLayout

SCHEMAS = ("lakehouse_staging", "lakehouse_intermediate", "lakehouse_marts")
_STATUSES = ("PLACED", "PAID", "SHIPPED", "DELIVERED", "CANCELLED")


def random_history(rng: random.Random, batches: int, keys: int) -> list[dict[str, Any]]:
    """Raw batches of both tables: updates, deletes, late older events, re-deliveries.

    Batches are ingested between 1 and 5 hours apart, so some arrive beyond the
    project's raw look-back window (3 h) and some inside it. Times end near the present:
    the daily activity mart is a microbatch model whose scheduled runs redo only the
    last days before now, and older late events are its documented manual backfill.
    """
    history: list[dict[str, Any]] = []
    ingested = datetime.now(timezone.utc).replace(minute=0, second=0, microsecond=0) - timedelta(hours=5 * batches)
    delivered: list[tuple[str, dict[str, Any]]] = []
    sequence = 0
    for _ in range(batches):
        ingested += timedelta(hours=rng.randint(1, 5))
        rows: dict[str, list[dict[str, Any]]] = {"customers": [], "orders": []}
        for _ in range(rng.randint(keys // 2, keys * 2)):
            sequence += 1
            key = rng.randrange(keys)
            # Mostly recent events; some much older (late arrivals).
            event_ts = ingested - timedelta(minutes=rng.choice([rng.randint(1, 50), rng.randint(60, 720)]))
            removed = rng.random() < 0.15
            if rng.random() < 0.5:
                row: dict[str, Any] = {"id": f"c{key}", "cust_name": f"Name {key % 3}"}
                if not removed:
                    row.update(email=f"user{sequence}@example.com", registration_date="2025-12-01T00:00:00Z")
                table = "customers"
            else:
                row = {"customer_id": f"c{key}", "order_id": f"o{key}"}
                if not removed:
                    row.update(created_at="2026-01-31T10:00:00Z", status=rng.choice(_STATUSES),
                               amount=f"{rng.randint(1, 99999) / 100:.2f}", currency="EUR", is_gift=False,
                               line_items=[{"sku": "A", "quantity": str(rng.randint(1, 4)), "unit_price": "2.50"}])
                table = "orders"
            row.update(_event_ts=event_ts, sequence=sequence, _event_name="REMOVE" if removed else rng.choice(["INSERT", "MODIFY"]))
            rows[table].append(row)
            delivered.append((table, row))
        for table, row in rng.sample(delivered, min(len(delivered), 2)):  # re-delivered copies
            rows[table].append(dict(row))
        history.append({"ingested_at": ingested, "rows": rows})
    return history


def write_history(data_dir: Path, history: list[dict[str, Any]], upto: int) -> None:
    from streaming.samples.raw_fixtures import write_raw_batch

    for batch_id in range(upto):
        batch = history[batch_id]
        for table, rows in batch["rows"].items():
            if rows:
                write_raw_batch(data_dir, table, batch_id, rows, batch["ingested_at"])


def _build(data_dir: Path, *args: str) -> None:
    from streaming.runtime.dbt_runner import run_dbt

    result = run_dbt(["build", *args], data_dir)
    if not result.success:
        failed = [f"{node.node.unique_id}: {node.message}" for node in (result.result or [])
                  if str(node.status) not in {"success", "pass"}]
        raise RuntimeError(f"dbt build {' '.join(args)} failed: {result.exception or failed[:5]}")


def _share_pii_key(source: Path, twin: Path) -> None:
    """The twin directory is built with the source's PII key: the drills compare their
    tables cell by cell, and each data directory would otherwise get its own key."""
    from lakehouse_dbt.pii_key import ensure_local_key, key_file

    twin_key = key_file(twin)
    twin_key.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    shutil.copy2(ensure_local_key(source), twin_key)


# Columns that say when a build ran, not what it computed: two builds of the same
# data differ there by design (mart_freshness.built_at).
BUILD_TIME_COLUMNS = ("built_at",)


def relations(data_dir: Path) -> dict[str, Counter[tuple[Any, ...]]]:
    """Rows of every model relation (staging, intermediate, marts) as multisets,
    without the build-time columns."""
    with duckdb.connect(str(DataLayout(data_dir).dbt_database), read_only=True) as con:
        names = con.execute(
            "select table_schema, table_name from information_schema.tables where table_schema in ?", [list(SCHEMAS)]
        ).fetchall()
        excluded = ", ".join(f'"{column}"' for column in BUILD_TIME_COLUMNS)

        def rows(schema: str, name: str) -> list[tuple[Any, ...]]:
            columns = {column for (column,) in con.execute(
                "select column_name from information_schema.columns where table_schema = ? and table_name = ?",
                [schema, name]).fetchall()}
            kept = f"* exclude ({excluded})" if columns & set(BUILD_TIME_COLUMNS) else "*"
            return con.execute(f'select {kept} from {schema}."{name}"').fetchall()

        return {f"{schema}.{name}": Counter(tuple(repr(value) for value in row) for row in rows(schema, name))
                for schema, name in sorted(names)}


def differing(left: dict[str, Counter[tuple[Any, ...]]], right: dict[str, Counter[tuple[Any, ...]]]) -> list[str]:
    return [name for name in sorted(set(left) | set(right)) if left.get(name) != right.get(name)]


def incremental_equals_full_refresh(work: Path, histories: int, batches: int, keys: int, seed: int,
                                    progress: Any) -> dict[str, Any]:
    rng = random.Random(seed)
    outcomes = []
    for number in range(histories):
        history = random_history(rng, batches, keys)
        incremental, full = work / f"history-{number}-incremental", work / f"history-{number}-full"
        for folder in (incremental, full):
            shutil.rmtree(folder, ignore_errors=True)
        for upto in range(1, batches + 1):
            write_history(incremental, history, upto)
            _build(incremental)
        write_history(full, history, batches)
        _share_pii_key(incremental, full)
        _build(full, "--full-refresh")
        diff = differing(relations(incremental), relations(full))
        outcomes.append({"batches": batches, "change_rows": sum(len(rows) for b in history for rows in b["rows"].values()),
                         "differing_relations": diff})
        progress(f"dbt history {number + 1}/{histories}: incremental vs full refresh differ in {diff or 'nothing'}")
    return {
        "passed": all(not outcome["differing_relations"] for outcome in outcomes),
        "checks": len(outcomes),
        "summary": f"{sum(not o['differing_relations'] for o in outcomes)}/{len(outcomes)} histories: incremental == full refresh",
        "histories": outcomes,
    }


def killed_build_keeps_previous_tables(work: Path, keys: int, seed: int, timeout_s: float = 600) -> dict[str, Any]:
    """Build, add a batch, SIGKILL the next build once a mart has started, check what is readable."""
    rng = random.Random(seed)
    history = random_history(rng, 3, keys)
    data_dir = work / "killed-build"
    shutil.rmtree(data_dir, ignore_errors=True)
    write_history(data_dir, history, 2)
    _build(data_dir)
    before = relations(data_dir)
    write_history(data_dir, history, 3)
    log_file = DataLayout(data_dir).dbt_log
    log_offset = log_file.stat().st_size if log_file.exists() else 0
    process = start_case("dbt_build", {"data_dir": str(data_dir), "args": ["build"]}, log_path=work / "killed-build.log")
    deadline = time.monotonic() + timeout_s
    killed_after = None
    while process.poll() is None and time.monotonic() < deadline:
        text = log_file.read_text(errors="replace")[log_offset:] if log_file.exists() else ""
        if "START sql table model lakehouse_marts" in text:
            kill_tree(process)
            killed_after = text.count(" OK created ")
            break
        time.sleep(0.05)
    process.wait()
    readable, unreadable = [], []
    after_kill: dict[str, Counter[tuple[Any, ...]]] = {}
    try:
        after_kill = relations(data_dir)
        readable = sorted(after_kill)
    except duckdb.Error as exc:
        unreadable = [f"database: {exc}"]
    missing = sorted(set(before) - set(after_kill))
    _build(data_dir)
    after_rerun = relations(data_dir)
    # A model the killed build did not finish must still hold its previous rows; one it
    # finished holds the new rows. Anything else is a torn table.
    torn = [name for name in before if name in after_kill
            and after_kill[name] not in (before[name], after_rerun.get(name))]
    full = work / "killed-build-full"
    shutil.rmtree(full, ignore_errors=True)
    write_history(full, history, 3)
    _share_pii_key(data_dir, full)
    _build(full, "--full-refresh")
    rerun_diff = differing(after_rerun, relations(full))
    passed = killed_after is not None and not unreadable and not missing and not torn and not rerun_diff
    return {
        "passed": passed,
        "checks": len(before),
        "summary": (f"killed after {killed_after} models; {len(readable)}/{len(before)} relations readable, "
                    f"{len(torn)} torn; rerun == full refresh: {not rerun_diff}") if killed_after is not None
                   else "the build finished before it could be killed",
        "killed": killed_after is not None,
        "models_done_before_kill": killed_after,
        "unreadable": unreadable,
        "missing_relations": missing,
        "torn_relations": torn,
        "rerun_differs_from_full_refresh": rerun_diff,
    }
