"""Run one benchmark case in a fresh subprocess and measure it from the outside.

The case prints one line `RESULT <json>` on stdout; this module adds the peak resident
memory of the whole process tree (Python driver plus the JVM it starts), sampled with
psutil, and the wall time including JVM start-up.
"""
from __future__ import annotations

import ctypes
import functools
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

if TYPE_CHECKING:
    from benchmarks.datasets import LandingSet


def prepare_run(only: str | None, known: tuple[str, ...], results_dir: Path, work: Path) -> tuple[str, ...]:
    """The parts `--only` selects (all when absent), with results/ ready and an empty work folder."""
    selected = tuple(only.split(",")) if only else known
    unknown = set(selected) - set(known)
    if unknown:
        raise SystemExit(f"unknown parts {sorted(unknown)}; choose from {', '.join(known)}")
    results_dir.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    return selected

RESULT_PREFIX = "RESULT "
REPO_ROOT = Path(__file__).resolve().parent.parent


class CaseFailedError(RuntimeError):
    """A benchmark case exited non-zero or printed no result."""


@dataclass
class CaseRun:
    case: str
    params: dict[str, Any]
    result: dict[str, Any]
    peak_rss_bytes: int
    wall_seconds: float
    returncode: int
    stderr_tail: str = field(repr=False, default="")
    peak_pss_bytes: int = 0


def tree_cpu_seconds(root: psutil.Process) -> float:
    """User and system CPU seconds of `root` and its living descendants: on a shared
    machine the work a run did, where its wall time also counts the others' load."""
    total = 0.0
    try:
        processes = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return total
    for process in processes:
        try:
            times = process.cpu_times()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        total += times.user + times.system
    return total


# kcmp(2) on this machine's architecture, and its KCMP_VM type: whether two processes
# share one address space (linux include/uapi/linux/kcmp.h; the syscall tables of
# arch/x86/entry/syscalls/syscall_64.tbl and include/uapi/asm-generic/unistd.h).
_SYS_KCMP = {"x86_64": 312, "aarch64": 272}.get(platform.machine())
_KCMP_VM = 1


def shares_address_space(pid: int, other: int) -> bool:
    """Whether two processes run in one address space: a JVM starting a command clones
    itself with CLONE_VM (glibc's posix_spawn), and until that child executes the command
    it reports the JVM's whole resident memory as its own. False where kcmp is missing."""
    if _SYS_KCMP is None:
        return False
    return _libc().syscall(_SYS_KCMP, pid, other, _KCMP_VM, 0, 0) == 0


@functools.cache
def _libc() -> ctypes.CDLL:
    """The C library, loaded once: the sampler asks about every process five times a second."""
    return ctypes.CDLL(None, use_errno=True)


def _proportional_bytes(pid: int) -> int:
    """The process's proportional set size: each page it shares with others counted by
    its share (linux Documentation/filesystems/proc.rst, smaps_rollup)."""
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) * 1024
    raise OSError(f"no Pss in /proc/{pid}/smaps_rollup")


@dataclass(frozen=True)
class TreeMemory:
    """Resident memory of a process tree, each address space counted once: `rss` sums
    the processes' resident sets (pages two processes share, such as a forked Python
    worker's and its daemon's, count in both); `pss` splits shared pages between their
    sharers, so it adds up to the tree's own memory (0 where /proc has no smaps_rollup)."""

    rss: int
    pss: int


def tree_memory(root: psutil.Process) -> TreeMemory:
    """The memory of `root` and all its descendants (processes may vanish meanwhile). A
    process still sharing its parent's address space is its parent's memory, not more."""
    try:
        processes = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return TreeMemory(0, 0)
    rss = pss = 0
    for process in processes:
        try:
            if process is not root and shares_address_space(process.pid, process.ppid()):
                continue
            rss += process.memory_info().rss
            pss += _proportional_bytes(process.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied, OSError):
            continue
    return TreeMemory(rss, pss)


class PeakRssSampler:
    """Samples the memory of a process tree on a thread until stopped; keeps the maxima
    (`peak`: resident sets, `peak_pss`: proportional sets)."""

    def __init__(self, pid: int, interval: float = 0.2) -> None:
        self._process = psutil.Process(pid)
        self._interval = interval
        self._stop = threading.Event()
        self.peak = 0
        self.peak_pss = 0
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            memory = tree_memory(self._process)
            self.peak = max(self.peak, memory.rss)
            self.peak_pss = max(self.peak_pss, memory.pss)
            self._stop.wait(self._interval)

    def __enter__(self) -> PeakRssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def case_command(case: str, params: dict[str, Any]) -> list[str]:
    return [sys.executable, "-m", "benchmarks.cases", case, json.dumps(params)]


def case_environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    # The packages are run from the checkout, not installed: `streaming` and the dbt
    # helpers `lakehouse_dbt` (whose project directory is found from its own path).
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), str(REPO_ROOT / "dbt_project"),
                                                      env.get("PYTHONPATH")]))
    env.update(extra or {})
    return env


def kill_tree(process: subprocess.Popen[str]) -> None:
    """SIGKILL the case's whole session (driver and JVM), as a crash would."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def parse_result(stdout: str) -> dict[str, Any] | None:
    for line in reversed(stdout.splitlines()):
        if line.startswith(RESULT_PREFIX):
            return json.loads(line[len(RESULT_PREFIX):])
    return None


def start_case(case: str, params: dict[str, Any], env: dict[str, str] | None = None,
               log_path: Path | None = None) -> subprocess.Popen[str]:
    """Start `case` in a new process session (so that its whole tree can be killed at once).

    With `log_path` its output goes to that file: a caller that does not read the
    pipes while the case runs must not let them fill up and stall the case.
    """
    output: Any = open(log_path, "w") if log_path else subprocess.PIPE  # noqa: SIM115 (closed with the process)
    try:
        return subprocess.Popen(
            case_command(case, params),
            cwd=REPO_ROOT,
            env=case_environment(env),
            stdout=output,
            stderr=subprocess.STDOUT if log_path else subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
    finally:
        if log_path:
            output.close()


def run_case(
    case: str,
    params: dict[str, Any],
    *,
    timeout: float = 3600,
    env: dict[str, str] | None = None,
    check: bool = True,
) -> CaseRun:
    """Run `case` with `params` in a fresh process; kill it after `timeout` seconds."""
    started = time.monotonic()
    process = start_case(case, params, env)
    with PeakRssSampler(process.pid) as sampler:
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_tree(process)
            stdout, stderr = process.communicate()
            raise CaseFailedError(f"case {case} timed out after {timeout:.0f}s:\n{stderr[-3000:]}") from None
    wall = time.monotonic() - started
    result = parse_result(stdout)
    if check and (process.returncode != 0 or result is None):
        raise CaseFailedError(f"case {case} exited {process.returncode}:\n{stderr[-3000:]}")
    return CaseRun(case, params, result or {}, sampler.peak, wall, process.returncode, stderr[-3000:],
                   peak_pss_bytes=sampler.peak_pss)


def stream_run(landing: LandingSet, data_dir: Path, master: str, *, label: str,
               max_files_per_trigger: int | None = None, driver_memory: str | None = None,
               contracts_dir: Path | None = None, sink: str = "parquet") -> CaseRun:
    """The stream case over `landing` into a fresh `data_dir`, which must read every record
    of it: a figure from a run that read less would compare unequal work."""
    shutil.rmtree(data_dir, ignore_errors=True)
    params: dict[str, Any] = {"label": label, "data_dir": str(data_dir), "landing_dir": str(landing.root),
                              "master": master, "max_files_per_trigger": max_files_per_trigger, "sink": sink}
    if driver_memory:
        params["driver_memory"] = driver_memory
    if contracts_dir:
        params["contracts_dir"] = str(contracts_dir)
    run = run_case("stream", params)
    if run.result["records_in"] != landing.records:
        raise RuntimeError(f"{label}: the job read {run.result['records_in']} records, the landing set holds {landing.records}")
    return run


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine_info() -> dict[str, Any]:
    """What the figures were measured on, recorded next to them."""
    from importlib.metadata import PackageNotFoundError, version

    versions = {}
    for package in ("pyspark", "dbt-core", "dbt-duckdb", "duckdb", "pyarrow", "hypothesis", "psutil"):
        try:
            versions[package] = version(package)
        except PackageNotFoundError:
            versions[package] = None
    java = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False)
    return {
        "nproc": os.cpu_count(),
        "ram_bytes": psutil.virtual_memory().total,
        "cpu_model": _cpu_model(),
        "load_average_at_start": os.getloadavg(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "java": (java.stderr or java.stdout).splitlines()[0] if (java.stderr or java.stdout) else None,
        "versions": versions,
    }
