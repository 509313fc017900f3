"""Cluster drill: `lakehouse stream` on a Spark standalone cluster, one worker killed mid-stream.

A master and two workers (1 core, 1 GB each) run as separate JVMs on 127.0.0.1
(`benchmarks.standalone_cluster`). The same generated landing files are streamed twice
with the real CLI, one file set per micro-batch:

1. `--master local[2]`, the reference;
2. `--master spark://127.0.0.1:<port>`, executors of 512 MB. Once the first batch is
   committed, one worker is SIGKILLed together with its executor; Spark reruns the lost
   tasks on the other worker and the stream finishes.

Both runs use the same sink (`sink`: `parquet`, or `hudi`, whose bundle local_session
passes in `spark.jars`: the driver serves it and each executor fetches it; the drill
checks that an executor of the cluster did). Both runs use one data-directory path in turn (the reference's result is moved aside
before the cluster run), so every column, `source_ref` included, must match; the CLI
gets it relative to its working directory, as `./data` is by default. Passed
when the change logs and the quarantine are equal row for row with each row's batch id
(`_ingested_at` aside: 0 lost, 0 duplicated, 0 unexpected), the current state per key
reconciles (`lakehouse reconcile`'s comparison; with Hudi the current-state tables are
also compared row for row per key), the killed worker had an executor,
batches were committed after the kill, and every listening socket of the cluster and
the driver was on 127.0.0.1.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

from benchmarks.rows import compare_data_dirs, data_dir_rows, staged_leftovers
from benchmarks.standalone_cluster import LOOPBACK_ADDRESSES, StandaloneCluster, standalone_cluster
from streaming.io.layout import CHECKPOINT_COMMITS_FOLDER, DataLayout

if TYPE_CHECKING:
    from streaming.operations.reconcile import ReconcileReport

REPO_ROOT = Path(__file__).resolve().parent.parent
EXECUTOR_MEMORY = "512m"
DRIVER_MEMORY = "1g"
RUN_TIMEOUT_S = 1200


def cli_environment() -> dict[str, str]:
    """The CLI runs this checkout's code (not an installed copy), with the drill's memory caps;
    executors start the same Python as the driver (PYSPARK_PYTHON)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(REPO_ROOT), str(REPO_ROOT / "dbt_project"), env.get("PYTHONPATH")]))
    env["PYSPARK_PYTHON"] = sys.executable
    # Read by pyspark when it starts the driver JVM, as spark-submit's own options.
    env["PYSPARK_SUBMIT_ARGS"] = (f"--driver-memory {DRIVER_MEMORY} "
                                  f"--conf spark.executor.memory={EXECUTOR_MEMORY} pyspark-shell")
    return env


def stream_command(data_dir: Path, master: str, files_per_batch: int, sink: str = "parquet") -> list[str]:
    return [sys.executable, "-m", "streaming.cli", "stream", "--data-dir", str(data_dir), "--sink", sink,
            "--master", master, "--max-files-per-trigger", str(files_per_batch)]


def executors_fetched_jar(cluster_dir: Path, jar_name: str) -> list[str]:
    """Executor folders of the cluster's workers (`worker-N/<app>/<executor>`) holding
    `jar_name`: a jar in `spark.jars` is fetched from the driver into each executor's
    folder before its classes are loaded there."""
    return sorted(str(path.parent.relative_to(cluster_dir)) for path in cluster_dir.glob(f"worker-*/app-*/*/{jar_name}"))


def generate_landing(data_dir: Path, customers: int, records_per_file: int, seed: int) -> list[Path]:
    """Sample CDC in `data_dir/landing`, files one second apart in name order.

    Spark's file source takes files oldest first; distinct modification times make the
    split into micro-batches the same in every run, so rows compare with their batch id.
    """
    from streaming.samples.generator import write_landing_files

    summary = write_landing_files(DataLayout(data_dir).landing, customers=customers, records_per_file=records_per_file,
                                  seed=seed)
    files = sorted(summary.files)
    oldest = time.time() - len(files) - 60
    for number, path in enumerate(files):
        os.utime(path, (oldest + number, oldest + number))
    return files


def committed_batches(data_dir: Path) -> int:
    commits = DataLayout(data_dir).checkpoint() / CHECKPOINT_COMMITS_FOLDER
    return len(list(commits.glob("[0-9]*"))) if commits.is_dir() else 0


def _listening_addresses(process: subprocess.Popen[bytes]) -> set[str]:
    found = set()
    try:
        tree = [psutil.Process(process.pid), *psutil.Process(process.pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return found
    for member in tree:
        try:
            found |= {conn.laddr.ip for conn in member.net_connections(kind="tcp")
                      if conn.status == psutil.CONN_LISTEN}
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def _start_cli(data_dir: Path, master: str, files_per_batch: int, log_path: Path,
               sink: str = "parquet") -> subprocess.Popen[bytes]:
    """`lakehouse stream` in its own process group, so its driver JVM can be stopped with it.

    The data directory is given relative to the driver's working directory, as the
    default `./data` is: an executor works in a folder of its own, so a path resolved
    there instead of on the driver would land rows in the wrong place.
    """
    with open(log_path, "wb") as log:
        return subprocess.Popen(stream_command(Path(data_dir.name), master, files_per_batch, sink), cwd=data_dir.parent,
                                env=cli_environment(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


def run_reference(data_dir: Path, files_per_batch: int, log_path: Path, sink: str = "parquet") -> float:
    started = time.monotonic()
    driver = _start_cli(data_dir, "local[2]", files_per_batch, log_path, sink)
    try:
        returncode = driver.wait(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"the local[2] reference run did not finish in {RUN_TIMEOUT_S}s") from None
    finally:
        _kill_group(driver)
    if returncode != 0:
        raise RuntimeError(f"the local[2] reference run exited {returncode}:\n{_tail(log_path)}")
    return time.monotonic() - started


def run_on_cluster_killing_a_worker(cluster: StandaloneCluster, data_dir: Path, files_per_batch: int,
                                    log_path: Path, progress: Callable[[str], None],
                                    sink: str = "parquet") -> dict[str, Any]:
    """Stream on `cluster`; after the first commit SIGKILL worker 0 and its executor."""
    started = time.monotonic()
    driver = _start_cli(data_dir, cluster.master_url, files_per_batch, log_path, sink)
    try:
        deadline = started + RUN_TIMEOUT_S
        while committed_batches(data_dir) == 0 and driver.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        if driver.poll() is not None or committed_batches(data_dir) == 0:
            raise RuntimeError(f"the cluster run ended or stalled before its first commit:\n{_tail(log_path)}")
        first_commit_seconds = time.monotonic() - started
        listening = cluster.listening_addresses() | _listening_addresses(driver)
        victim = cluster.workers[0]
        executors_killed = len(victim.executors())
        committed_at_kill = committed_batches(data_dir)
        victim.kill()
        progress(f"cluster drill: killed {victim.name} and its {executors_killed} executor(s) "
                 f"after {committed_at_kill} committed batch(es), {time.monotonic() - started:.0f}s in")
        returncode = driver.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"the cluster run did not finish in {RUN_TIMEOUT_S}s:\n{_tail(log_path)}") from None
    finally:
        _kill_group(driver)
    log_text = log_path.read_text(errors="replace")
    return {
        "returncode": returncode,
        "seconds": time.monotonic() - started,
        "first_commit_seconds": first_commit_seconds,
        "committed_at_kill": committed_at_kill,
        "committed_at_end": committed_batches(data_dir),
        "executors_killed": executors_killed,
        "driver_saw_executor_loss": "Lost executor" in log_text,
        "listening_addresses": sorted(listening),
        "log_tail": None if returncode == 0 else _tail(log_path),
    }


def _tail(path: Path, characters: int = 3000) -> str:
    """The log's end, after its first few exception lines (a JVM stack trace's tail alone
    does not say what failed)."""
    text = path.read_text(errors="replace")
    causes = [line for line in text.splitlines()
              if ("Exception:" in line or "Error:" in line) and not line.startswith("\tat ")][:6]
    return "\n".join(["...", *causes, "...", text[-characters:]]) if causes else text[-characters:]


def current_state_report(reference_raw: Path, cluster_raw: Path) -> ReconcileReport:
    from streaming.contracts.loader import SAMPLE_CONTRACTS_DIR, load_contracts
    from streaming.operations.reconcile import reconcile

    return reconcile(str(reference_raw), str(cluster_raw), load_contracts(SAMPLE_CONTRACTS_DIR))


def cluster_drill(work: Path, *, customers: int, records_per_file: int, files_per_batch: int, seed: int,
                  progress: Callable[[str], None], sink: str = "parquet") -> dict[str, Any]:
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    data_dir, reference_dir = work / "run", work / "reference"
    files = generate_landing(data_dir, customers, records_per_file, seed)
    pristine_landing = DataLayout(work).landing
    shutil.copytree(DataLayout(data_dir).landing, pristine_landing)
    batches = -(-len(files) // files_per_batch)
    progress(f"cluster drill ({sink}): {len(files)} landing files, {batches} micro-batches; local[2] reference run")
    reference_seconds = run_reference(data_dir, files_per_batch, work / "reference.log", sink)
    data_dir.rename(reference_dir)
    reference = data_dir_rows(reference_dir)
    if not all(reference.values()):
        raise RuntimeError(f"the reference run left an empty table: {[n for n, rows in reference.items() if not rows]}")
    data_dir.mkdir()
    shutil.copytree(pristine_landing, DataLayout(data_dir).landing)
    progress("cluster drill: starting a master and two workers on 127.0.0.1")
    cluster_started = time.monotonic()
    with standalone_cluster(work / "cluster") as cluster:
        start_seconds = time.monotonic() - cluster_started
        progress(f"cluster drill: {cluster.master_url} up in {start_seconds:.0f}s; streaming on it")
        run = run_on_cluster_killing_a_worker(cluster, data_dir, files_per_batch, work / "cluster-run.log", progress,
                                              sink)
        listening = set(run["listening_addresses"]) | cluster.listening_addresses()
    from streaming.io.formats.hudi.format import HUDI_SPARK_BUNDLE
    from streaming.runtime.jars import local_jar

    bundle = local_jar(HUDI_SPARK_BUNDLE)
    jar_fetched_by = executors_fetched_jar(work / "cluster", bundle.name) if bundle is not None else []
    diffs = compare_data_dirs(reference, data_dir_rows(data_dir))
    state = current_state_report(DataLayout(reference_dir).raw, DataLayout(data_dir).raw)
    leftovers = staged_leftovers(data_dir)
    lost = sum(diff.lost for diff in diffs.values())
    duplicated = sum(diff.duplicated for diff in diffs.values())
    unexpected = sum(diff.unexpected for diff in diffs.values())
    checks = {
        "cluster run finished": run["returncode"] == 0,
        "every batch committed": run["committed_at_end"] == batches,
        "killed mid-stream": run["committed_at_kill"] < batches,
        "killed worker had an executor": run["executors_killed"] >= 1,
        "rows equal the reference": lost == duplicated == unexpected == 0,
        "current state reconciles": state.ok,
        "no staged leftovers": not leftovers,
        "sockets on 127.0.0.1 only": bool(listening) and listening <= LOOPBACK_ADDRESSES,
    }
    if sink == "hudi":
        checks["executors fetched the Hudi bundle"] = bool(jar_fetched_by)
    reference_rows = {name: sum(rows.values()) for name, rows in reference.items()}
    summary = (f"{sink}: {sum(reference_rows.values())} rows in {batches} batches; worker killed after "
               f"{run['committed_at_kill']} commit(s): lost={lost} duplicated={duplicated} unexpected={unexpected}, "
               f"current state {'reconciles' if state.ok else 'DIFFERS'}; cluster run {run['seconds']:.0f}s "
               f"vs local[2] {reference_seconds:.0f}s")
    failed = [name for name, ok in checks.items() if not ok]
    shutil.rmtree(work, ignore_errors=True)
    return {
        "passed": not failed,
        "sink": sink,
        "hudi_bundle_fetched_by_executors": jar_fetched_by,
        "summary": summary + (f"; FAILED: {', '.join(failed)}" if failed else ""),
        "checks": len(checks),
        "check_results": checks,
        "landing_files": len(files),
        "batches": batches,
        "reference_rows": reference_rows,
        "lost": lost,
        "duplicated": duplicated,
        "unexpected": unexpected,
        "current_state": [line for table in state.tables for line in table.lines()],
        "cluster_start_seconds": start_seconds,
        "reference_seconds": reference_seconds,
        **{key: value for key, value in run.items() if key != "listening_addresses"},
        "listening_addresses": sorted(listening),
        "staged_leftovers": [str(path.relative_to(data_dir)) for path in leftovers[:10]],
    }
