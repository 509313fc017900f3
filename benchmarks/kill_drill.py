"""Kill -9 drill: crash the streaming job at random points and restart it until done.

The reference is a clean run over the same landing files (one file per trigger) on the
same sink; each trial kills the job's whole process tree (driver and JVM) once, either
through the `BENCH_KILL_AT` hook at a chosen write phase of a chosen batch or after a
random delay once the first offsets are logged, then restarts it until it finishes.
Every restart goes through the stream's start-up checks (stream identity, contracts),
which must accept it. The raw tables and the quarantine must equal the reference's as
row multisets, each row with its batch id (the columns a write stamps aside:
`_ingested_at`, the ingest hour, Hudi's `_hoodie_*`): nothing lost, nothing duplicated,
no half-written batch left in a scratch folder and no Hudi commit left pending.

With the Hudi sink (`sink="hudi"`) each raw table's write is two Hudi commits, the
change log's then the current state's, each carrying the batch marker; the trials then
also kill after a change log's commit and before its current state's
(`hudi_after_commit`), and inside a commit while its `.inflight` instant is on the
timeline (`hudi_inflight`, and `hudi_files` once a data file of it is written), and the
current-state tables are compared too (one row per key).

Two more scenarios run once per sink (`checkpoint_and_writer_drills`):
- lost checkpoint: a run killed mid-batch, then `checkpoints/` moved away: the restart
  must be refused with a message and change nothing; also with `raw/_stream.json` moved
  away: refused, or else the run must still equal the clean run (with Hudi that is the
  batch markers' job); the checkpoint put back, the restart must finish equal to it;
- second writer: a `lakehouse stream` started while one runs on the data directory
  must be refused (the data-dir lock) and the first must finish equal to the clean run.
"""
from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.cases import HUDI_KILL_PHASES, KILL_ENV, KILL_PHASES
from benchmarks.datasets import LandingSet
from benchmarks.measure import kill_tree, run_case, start_case
from benchmarks.rows import compare_data_dirs, data_dir_rows, pending_hudi_instants, staged_leftovers
from streaming.contracts.loader import load_contracts
from streaming.io.layout import CHECKPOINT_COMMITS_FOLDER, CHECKPOINTS_FOLDER, STREAM_IDENTITY_FILE, DataLayout

TIMER = "timer"
MAX_RESTARTS = 4
SINKS = ("parquet", "hudi")
# Ways to kill, per sink; a drill's first trials take them in this order (the Hudi
# sink's own points first), later trials at random.
HOWS = {"parquet": (*KILL_PHASES, TIMER), "hudi": (*HUDI_KILL_PHASES, *KILL_PHASES, TIMER)}
# A run that hangs (rather than failing) ends the trial instead of the drill.
RUN_TIMEOUT_S = 1800


@dataclass(frozen=True)
class KillSetup:
    """What every run of one drill shares: the landing files, the sink, the contracts."""

    landing: LandingSet
    sink: str = "parquet"
    contracts_dir: str | None = None


def _params(setup: KillSetup, data_dir: Path) -> dict[str, Any]:
    params = {"label": f"kill-drill-{setup.sink}", "data_dir": str(data_dir), "landing_dir": str(setup.landing.root),
              "max_files_per_trigger": 1, "master": "local[2]", "sink": setup.sink}
    if setup.contracts_dir:
        params["contracts_dir"] = setup.contracts_dir
    return params


def _restart_until_done(setup: KillSetup, data_dir: Path) -> tuple[int, bool, str | None]:
    restarts, finished, error = 0, False, None
    while not finished and restarts < MAX_RESTARTS:
        restarts += 1
        restart = run_case("stream", _params(setup, data_dir), check=False, timeout=RUN_TIMEOUT_S)
        finished = restart.returncode == 0
        # e.g. a start-up check refusing the restart: the reason is in the case's stderr.
        error = None if finished else restart.stderr_tail[-1500:]
    return restarts, finished, error


def _diff_figures(reference: dict[str, Any], data_dir: Path) -> dict[str, Any]:
    diffs = compare_data_dirs(reference, data_dir_rows(data_dir))
    return {
        "lost": sum(diff.lost for diff in diffs.values()),
        "duplicated": sum(diff.duplicated for diff in diffs.values()),
        "unexpected": sum(diff.unexpected for diff in diffs.values()),
        "differing_tables": {name: vars(diff) for name, diff in diffs.items() if not diff.equal},
        "equal": all(diff.equal for diff in diffs.values()),
    }


def committed_batches(data_dir: Path) -> int:
    commits = DataLayout(data_dir).checkpoint() / CHECKPOINT_COMMITS_FOLDER
    return len([path for path in commits.glob("[0-9]*")]) if commits.is_dir() else 0


def _killed_by_hook(setup: KillSetup, data_dir: Path, spec: str) -> bool:
    run = run_case("stream", _params(setup, data_dir), env={KILL_ENV: spec}, check=False, timeout=RUN_TIMEOUT_S)
    return run.returncode == -signal.SIGKILL


def _killed_by_timer(setup: KillSetup, data_dir: Path, rng: random.Random, max_delay_s: float) -> bool:
    offsets = DataLayout(data_dir).checkpoint() / "offsets" / "0"
    process = start_case("stream", _params(setup, data_dir), log_path=data_dir.parent / f"{data_dir.name}.log")
    deadline = time.monotonic() + 600
    while not offsets.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(rng.uniform(0, max_delay_s))
    finished_first = process.poll() is not None
    kill_tree(process)
    process.wait()
    return not finished_first


def plan_kill(how: str, rng: random.Random, batches: int) -> tuple[int, int | None]:
    """(batch id, Hudi commit of the batch or None) for one trial. A Hudi kill point names
    the first table's change-log commit (0) or current-state commit (1); killing after
    commit 0 is the point between a table's two commits."""
    batch_id = rng.randrange(batches)
    if how == "hudi_after_commit":
        return batch_id, 0
    if how in HUDI_KILL_PHASES:
        return batch_id, rng.choice((0, 1))
    return batch_id, None


def run_trial(setup: KillSetup, data_dir: Path, reference: dict[str, Any], rng: random.Random,
              max_delay_s: float, how: str) -> dict[str, Any]:
    shutil.rmtree(data_dir, ignore_errors=True)
    data_dir.mkdir(parents=True)
    landing = setup.landing
    batch_id, commit = plan_kill(how, rng, len(landing.files))
    started = time.monotonic()
    if how == TIMER:
        killed = _killed_by_timer(setup, data_dir, rng, max_delay_s)
    else:
        spec = f"{batch_id}:{how}" + ("" if commit is None else f":{commit}")
        killed = _killed_by_hook(setup, data_dir, spec)
    committed_at_kill = committed_batches(data_dir)
    # A commit the kill interrupted: its requested or in-flight instant, not completed.
    pending_at_kill = [str(path.relative_to(data_dir)) for path in pending_hudi_instants(data_dir)]
    restarts, finished, restart_error = _restart_until_done(setup, data_dir)
    diff = _diff_figures(reference, data_dir)
    leftovers = staged_leftovers(data_dir)
    trial = {
        "sink": setup.sink,
        "how": how,
        "batch_id": batch_id if how != TIMER else None,
        "hudi_commit": commit,
        "killed": killed,
        "committed_at_kill": committed_at_kill,
        "pending_at_kill": pending_at_kill,
        "restarts": restarts,
        "finished": finished,
        "committed_at_end": committed_batches(data_dir),
        **{key: diff[key] for key in ("lost", "duplicated", "unexpected", "differing_tables")},
        "staged_leftovers": [str(path.relative_to(data_dir)) for path in leftovers[:10]],
        "restart_error": restart_error,
        "seconds": time.monotonic() - started,
    }
    trial["passed"] = (finished and diff["equal"] and not leftovers
                       and trial["committed_at_end"] == len(landing.files))
    shutil.rmtree(data_dir, ignore_errors=True)
    return trial


def clean_reference(setup: KillSetup, clean_dir: Path) -> tuple[dict[str, Any], float]:
    """The clean run's rows and its seconds; refused when a contracted change log is empty
    (equal to an empty reference would prove nothing)."""
    shutil.rmtree(clean_dir, ignore_errors=True)
    started = time.monotonic()
    run_case("stream", _params(setup, clean_dir), timeout=RUN_TIMEOUT_S)
    seconds = time.monotonic() - started
    reference = data_dir_rows(clean_dir)
    empty = [f"raw/{contract.changes_table}" for contract in load_contracts(setup.contracts_dir).values()
             if not reference.get(f"raw/{contract.changes_table}")]
    if empty:
        raise RuntimeError(f"the clean run left no rows in {empty}; found {sorted(reference)}")
    return reference, seconds


def trial_hows(sink: str, trials: int, rng: random.Random) -> list[str]:
    hows = HOWS[sink]
    return [hows[number] if number < len(hows) else rng.choice(hows) for number in range(trials)]


def kill_drill(landing: LandingSet, work: Path, trials: int, seed: int, progress: Any, *, sink: str = "parquet",
               contracts_dir: str | None = None, scenarios: bool = True) -> dict[str, Any]:
    setup = KillSetup(landing, sink, contracts_dir)
    clean_dir = work / "clean"
    reference, clean_seconds = clean_reference(setup, clean_dir)
    progress(f"kill drill ({sink}): clean run took {clean_seconds:.0f}s; "
             f"{sum(sum(rows.values()) for rows in reference.values())} reference rows in {len(reference)} tables")
    rng = random.Random(seed)
    results = []
    for number, how in enumerate(trial_hows(sink, trials, rng)):
        trial = run_trial(setup, work / f"trial-{number:02d}", reference, rng, max_delay_s=0.6 * clean_seconds, how=how)
        results.append(trial)
        progress(f"kill trial ({sink}) {number + 1}/{trials}: {trial['how']} batch={trial['batch_id']} "
                 f"commit={trial['hudi_commit']} killed={trial['killed']} pending_at_kill={len(trial['pending_at_kill'])} "
                 f"restarts={trial['restarts']} lost={trial['lost']} duplicated={trial['duplicated']} "
                 f"unexpected={trial['unexpected']} leftovers={len(trial['staged_leftovers'])} "
                 f"({trial['seconds']:.0f}s) -> {'ok' if trial['passed'] else 'FAILED'}")
    scenario_results = checkpoint_and_writer_drills(setup, work, reference, progress) if scenarios else {}
    shutil.rmtree(clean_dir, ignore_errors=True)
    passed = all(trial["passed"] for trial in results) and all(s["passed"] for s in scenario_results.values())
    actually_killed = sum(trial["killed"] for trial in results)
    inside_commit = sum(bool(trial["pending_at_kill"]) for trial in results)
    summary = (f"{sink}: {sum(t['passed'] for t in results)}/{len(results)} trials equal the clean run "
               f"({actually_killed} killed mid-run" + (f", {inside_commit} inside a Hudi commit" if sink == "hudi" else "")
               + f"; lost={sum(t['lost'] for t in results)} duplicated={sum(t['duplicated'] for t in results)})")
    for name, scenario in scenario_results.items():
        summary += f"; {name}: {'ok' if scenario['passed'] else 'FAILED'}"
    return {
        "passed": passed,
        "sink": sink,
        "contracts_dir": contracts_dir,
        "checks": len(results) + len(scenario_results),
        "summary": summary,
        "clean_seconds": clean_seconds,
        "reference_rows": {name: sum(rows.values()) for name, rows in reference.items()},
        "trials": results,
        "scenarios": scenario_results,
    }


# --------------------------------------------------------------------------- lost checkpoint, second writer

def _mid_batch_kill_spec(setup: KillSetup) -> str:
    """Batch 1 killed with batch 0 committed: after the first table's change-log commit
    (Hudi), or after the first table's write (Parquet)."""
    return "1:hudi_after_commit:0" if setup.sink == "hudi" else "1:mid_write"


def lost_checkpoint_drill(setup: KillSetup, data_dir: Path, reference: dict[str, Any]) -> dict[str, Any]:
    """Kill mid-batch, lose the checkpoint (then also the stream record): the restart is
    refused and changes nothing, or else must still equal the clean run; with the
    checkpoint back, the restart finishes equal to the clean run."""
    shutil.rmtree(data_dir, ignore_errors=True)
    data_dir.mkdir(parents=True)
    started = time.monotonic()
    killed = _killed_by_hook(setup, data_dir, _mid_batch_kill_spec(setup))
    layout = DataLayout(data_dir)
    aside = data_dir.parent / f"{data_dir.name}-aside"
    shutil.rmtree(aside, ignore_errors=True)
    aside.mkdir()
    before = data_dir_rows(data_dir)
    shutil.move(layout.checkpoints, aside / CHECKPOINTS_FOLDER)
    refused = run_case("stream", _params(setup, data_dir), check=False, timeout=RUN_TIMEOUT_S)
    unchanged = data_dir_rows(data_dir) == before
    checkpoint_message = "checkpoint" in refused.stderr_tail and "is gone" in refused.stderr_tail
    # The record lost too: the start-up check has only the raw folders to go by.
    shutil.move(layout.stream_identity, aside / STREAM_IDENTITY_FILE)
    shutil.rmtree(layout.checkpoints, ignore_errors=True)
    without_record = run_case("stream", _params(setup, data_dir), check=False, timeout=RUN_TIMEOUT_S)
    record_refused = without_record.returncode not in (0, -signal.SIGKILL)
    if record_refused:
        record_outcome = _diff_figures(before, data_dir)  # nothing may have changed
        record_ok = record_outcome["equal"]
    else:
        record_outcome = _diff_figures(reference, data_dir)
        record_ok = record_outcome["equal"] and without_record.returncode == 0
    scenario = {
        "killed": killed,
        "refused_without_checkpoint": refused.returncode != 0,
        "refusal_message": refused.stderr_tail.strip().splitlines()[-1][:600] if refused.stderr_tail.strip() else "",
        "message_names_the_checkpoint": checkpoint_message,
        "unchanged_by_refused_start": unchanged,
        "without_record_refused": record_refused,
        "without_record_message": (without_record.stderr_tail.strip().splitlines()[-1][:600]
                                   if record_refused and without_record.stderr_tail.strip() else ""),
        "without_record": {key: record_outcome[key] for key in ("lost", "duplicated", "unexpected", "differing_tables")},
    }
    if record_refused:
        # Put the checkpoint and the record back: the stream resumes where it was killed.
        shutil.rmtree(layout.checkpoints, ignore_errors=True)
        shutil.move(aside / CHECKPOINTS_FOLDER, layout.checkpoints)
        shutil.move(aside / STREAM_IDENTITY_FILE, layout.stream_identity)
        restarts, finished, error = _restart_until_done(setup, data_dir)
        final = _diff_figures(reference, data_dir)
        scenario.update(restored_restarts=restarts, restored_finished=finished, restored_error=error,
                        restored={key: final[key] for key in ("lost", "duplicated", "unexpected", "differing_tables")})
        restored_ok = finished and final["equal"] and not staged_leftovers(data_dir)
    else:
        restored_ok = True
    scenario["passed"] = bool(killed and scenario["refused_without_checkpoint"] and checkpoint_message and unchanged
                              and record_ok and restored_ok)
    scenario["seconds"] = time.monotonic() - started
    shutil.rmtree(data_dir, ignore_errors=True)
    shutil.rmtree(aside, ignore_errors=True)
    return scenario


def _cli_command(setup: KillSetup, data_dir: Path) -> list[str]:
    import sys

    command = [sys.executable, "-m", "streaming.cli", "stream", "--data-dir", str(data_dir), "--sink", setup.sink,
               "--max-files-per-trigger", "1", "--master", "local[2]"]
    return command + (["--contracts-dir", setup.contracts_dir] if setup.contracts_dir else [])


def second_writer_data_dir(setup: KillSetup, data_dir: Path) -> Path:
    """A fresh data directory whose own landing folder holds a copy of the drill's landing
    files. `lakehouse stream` reads `<data dir>/landing` (it takes no other folder) and exits
    on an empty one before it takes the lock, so without the copy the second writer never
    reaches the lock. The first writer still reads the drill's folder: the quarantine keeps
    each record's landing path, which must equal the clean run's."""
    shutil.rmtree(data_dir, ignore_errors=True)
    data_dir.mkdir(parents=True)
    shutil.copytree(setup.landing.root, DataLayout(data_dir).landing)
    return data_dir


def second_writer_attempt(setup: KillSetup, data_dir: Path) -> subprocess.CompletedProcess[str]:
    """The second writer: the real `lakehouse stream` on `data_dir`, run to its end."""
    from benchmarks.cluster_drill import cli_environment

    return subprocess.run(_cli_command(setup, data_dir), env=cli_environment(), capture_output=True, text=True,
                          timeout=600)


def second_writer_drill(setup: KillSetup, data_dir: Path, reference: dict[str, Any]) -> dict[str, Any]:
    """`lakehouse stream` twice on one data directory: the second is refused by the lock
    while the first runs, and the first finishes equal to the clean run."""
    from streaming.runtime.data_lock import lock_path

    second_writer_data_dir(setup, data_dir)
    started = time.monotonic()
    # The first writer is the drill's own stream case (it holds the lock as `lakehouse
    # stream` does, and reads the clean run's landing files); the second the real CLI.
    first = start_case("stream", _params(setup, data_dir), log_path=data_dir.parent / f"{data_dir.name}-first.log")
    try:
        offsets = DataLayout(data_dir).checkpoint() / "offsets" / "0"
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while not offsets.exists() and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        first_running = first.poll() is None
        second = second_writer_attempt(setup, data_dir)
        first_still_running = first.poll() is None
        first_code = first.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if first.poll() is None:
            kill_tree(first)
            first.wait()
    log_path = data_dir.parent / f"{data_dir.name}-first.log"
    diff = _diff_figures(reference, data_dir)
    message = second.stderr.strip().splitlines()[-1][:600] if second.stderr.strip() else ""
    scenario = {
        "first_running_when_second_started": first_running and first_still_running,
        "second_exit_code": second.returncode,
        "second_message": message,
        "refused_by_the_lock": second.returncode == 2 and "is being written by" in second.stderr,
        "lock_record_left": bool(lock_path(data_dir).is_file() and lock_path(data_dir).read_text().strip()),
        "first_exit_code": first_code,
        "first_log_tail": None if first_code == 0 else log_path.read_text(errors="replace")[-1500:],
        **{key: diff[key] for key in ("lost", "duplicated", "unexpected", "differing_tables")},
        "seconds": time.monotonic() - started,
    }
    scenario["passed"] = bool(scenario["first_running_when_second_started"] and scenario["refused_by_the_lock"]
                              and first_code == 0 and diff["equal"] and not staged_leftovers(data_dir))
    shutil.rmtree(data_dir, ignore_errors=True)
    return scenario


def checkpoint_and_writer_drills(setup: KillSetup, work: Path, reference: dict[str, Any],
                                 progress: Any) -> dict[str, dict[str, Any]]:
    results = {}
    for name, drill in (("lost_checkpoint", lost_checkpoint_drill), ("second_writer", second_writer_drill)):
        try:
            results[name] = drill(setup, work / name, reference)
        except Exception as exc:  # reported, the other scenario still runs
            results[name] = {"passed": False, "error": f"{type(exc).__name__}: {str(exc)[:2000]}"}
        scenario = results[name]
        progress(f"kill drill ({setup.sink}) {name}: {'ok' if scenario['passed'] else 'FAILED'} "
                 f"{ {k: v for k, v in scenario.items() if k not in ('passed',)} }"[:1500])
    return results
