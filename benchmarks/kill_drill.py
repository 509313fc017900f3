"""Kill -9 drill: crash the streaming job at random points and restart it until done.

The reference is a clean run over the same landing files (one file per trigger); each
trial kills the job's whole process tree (driver and JVM) once, either through the
`BENCH_KILL_AT` hook at a chosen write phase of a chosen batch or after a random delay
once the first offsets are logged, then restarts it until it finishes. Every restart
goes through the stream's start-up checks (stream identity, contracts), which must
accept it. The raw change logs (every distinct change of each batch) and the quarantine
must equal the reference's as row multisets, each row with its batch id (`_ingested_at`
and the ingest-hour folder derived from it aside): nothing lost, nothing duplicated,
and no half-written batch left in a scratch folder.
"""
from __future__ import annotations

import random
import shutil
import signal
import time
from pathlib import Path
from typing import Any

from benchmarks.cases import KILL_ENV, KILL_PHASES
from benchmarks.datasets import LandingSet
from benchmarks.measure import kill_tree, run_case, start_case
from benchmarks.rows import compare_data_dirs, data_dir_rows, staged_leftovers
from streaming.contracts.model import load_contracts
from streaming.io.layout import DataLayout

TIMER = "timer"
MAX_RESTARTS = 4


def _params(landing: LandingSet, data_dir: Path) -> dict[str, Any]:
    return {"label": "kill-drill", "data_dir": str(data_dir), "landing_dir": str(landing.root),
            "max_files_per_trigger": 1, "master": "local[2]"}


def committed_batches(data_dir: Path) -> int:
    commits = DataLayout(data_dir).checkpoint() / "commits"
    return len([path for path in commits.glob("[0-9]*")]) if commits.is_dir() else 0


def _killed_by_hook(landing: LandingSet, data_dir: Path, batch_id: int, phase: str) -> bool:
    run = run_case("stream", _params(landing, data_dir), env={KILL_ENV: f"{batch_id}:{phase}"}, check=False)
    return run.returncode == -signal.SIGKILL


def _killed_by_timer(landing: LandingSet, data_dir: Path, rng: random.Random, max_delay_s: float) -> bool:
    offsets = DataLayout(data_dir).checkpoint() / "offsets" / "0"
    process = start_case("stream", _params(landing, data_dir), log_path=data_dir.parent / f"{data_dir.name}.log")
    deadline = time.monotonic() + 600
    while not offsets.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(rng.uniform(0, max_delay_s))
    finished_first = process.poll() is not None
    kill_tree(process)
    process.wait()
    return not finished_first


def run_trial(landing: LandingSet, data_dir: Path, reference: dict[str, Any], rng: random.Random,
              max_delay_s: float) -> dict[str, Any]:
    shutil.rmtree(data_dir, ignore_errors=True)
    data_dir.mkdir(parents=True)
    how = rng.choice([*KILL_PHASES, TIMER])
    batch_id = rng.randrange(len(landing.files))
    if how == TIMER:
        killed = _killed_by_timer(landing, data_dir, rng, max_delay_s)
    else:
        killed = _killed_by_hook(landing, data_dir, batch_id, how)
    committed_at_kill = committed_batches(data_dir)
    restarts = 0
    finished = False
    restart_error = None
    while not finished and restarts < MAX_RESTARTS:
        restarts += 1
        restart = run_case("stream", _params(landing, data_dir), check=False)
        finished = restart.returncode == 0
        # e.g. a start-up check refusing the restart: the reason is in the case's stderr.
        restart_error = None if finished else restart.stderr_tail[-1500:]
    diffs = compare_data_dirs(reference, data_dir_rows(data_dir))
    leftovers = staged_leftovers(data_dir)
    trial = {
        "how": how,
        "batch_id": batch_id if how != TIMER else None,
        "killed": killed,
        "committed_at_kill": committed_at_kill,
        "restarts": restarts,
        "finished": finished,
        "committed_at_end": committed_batches(data_dir),
        "lost": sum(diff.lost for diff in diffs.values()),
        "duplicated": sum(diff.duplicated for diff in diffs.values()),
        "unexpected": sum(diff.unexpected for diff in diffs.values()),
        "staged_leftovers": [str(path.relative_to(data_dir)) for path in leftovers[:10]],
        "restart_error": restart_error,
    }
    trial["passed"] = (finished and all(diff.equal for diff in diffs.values()) and not leftovers
                       and trial["committed_at_end"] == len(landing.files))
    shutil.rmtree(data_dir, ignore_errors=True)
    return trial


def kill_drill(landing: LandingSet, work: Path, trials: int, seed: int, progress: Any) -> dict[str, Any]:
    clean_dir = work / "clean"
    shutil.rmtree(clean_dir, ignore_errors=True)
    started = time.monotonic()
    run_case("stream", _params(landing, clean_dir))
    clean_seconds = time.monotonic() - started
    reference = data_dir_rows(clean_dir)
    # Equal to an empty reference would prove nothing.
    empty = [f"raw/{contract.changes_table}" for contract in load_contracts().values()
             if not reference.get(f"raw/{contract.changes_table}")]
    if empty:
        raise RuntimeError(f"the clean run left no rows in {empty}; found {sorted(reference)}")
    progress(f"kill drill: clean run took {clean_seconds:.0f}s; {sum(sum(rows.values()) for rows in reference.values())} reference rows")
    rng = random.Random(seed)
    results = []
    for number in range(trials):
        trial = run_trial(landing, work / f"trial-{number:02d}", reference, rng, max_delay_s=0.6 * clean_seconds)
        results.append(trial)
        progress(f"kill trial {number + 1}/{trials}: {trial['how']} batch={trial['batch_id']} killed={trial['killed']} "
                 f"restarts={trial['restarts']} lost={trial['lost']} duplicated={trial['duplicated']} "
                 f"unexpected={trial['unexpected']} leftovers={len(trial['staged_leftovers'])} "
                 f"-> {'ok' if trial['passed'] else 'FAILED'}")
    shutil.rmtree(clean_dir, ignore_errors=True)
    passed = all(trial["passed"] for trial in results)
    actually_killed = sum(trial["killed"] for trial in results)
    return {
        "passed": passed,
        "checks": len(results),
        "summary": f"{sum(t['passed'] for t in results)}/{len(results)} trials equal the clean run "
                   f"({actually_killed} killed mid-run)",
        "reference_rows": {name: sum(rows.values()) for name, rows in reference.items()},
        "trials": results,
    }
