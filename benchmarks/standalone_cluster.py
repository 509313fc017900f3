"""A Spark standalone cluster on 127.0.0.1 from the pyspark installation's own classes:
one master and N workers, each a separate JVM in its own process group.

Used by the cluster drill and its short test. Every daemon and the executors a worker
starts bind to 127.0.0.1 only (`--host` for the RPC endpoints, `SPARK_LOCAL_IP` for the
web UIs and block managers), and everything is killed when the context exits.
"""
from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from streaming.runtime.spark_session import ensure_java

LOOPBACK = "127.0.0.1"
# Spark's own daemons default to a 1 GB heap; these only keep cluster state.
DAEMON_HEAP = "256m"
MASTER_READY = "I have been elected leader"
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"
WORKER_READY = "Successfully registered with master"
# Addresses a socket bound to the loopback interface reports (IPv4, or mapped into IPv6).
LOOPBACK_ADDRESSES = frozenset({LOOPBACK, f"::ffff:{LOOPBACK}"})


class ClusterStartError(RuntimeError):
    """A daemon exited or did not report ready in time; the message carries its log's tail."""


def spark_home() -> Path:
    """The pyspark package folder: it holds `jars/`, which the worker also puts on its executors' classpath."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def free_port() -> int:
    """A port free on 127.0.0.1 right now (the daemon binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOOPBACK, 0))
        return int(probe.getsockname()[1])


@dataclass
class Daemon:
    name: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def log_tail(self, characters: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-characters:]
        except OSError:
            return ""

    def processes(self) -> list[psutil.Process]:
        """The daemon and what it started (a worker's executors)."""
        try:
            root = psutil.Process(self.process.pid)
            return [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def executors(self) -> list[psutil.Process]:
        """The executor JVMs this worker started for applications."""
        found = []
        for process in self.processes()[1:]:
            try:
                if EXECUTOR_CLASS in process.cmdline():
                    found.append(process)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        return found

    def kill(self) -> None:
        """SIGKILL the daemon's process group: a worker and its executors die together, as
        when their machine is lost."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait()


@dataclass
class StandaloneCluster:
    master_url: str
    master: Daemon
    workers: list[Daemon] = field(default_factory=list)

    def daemons(self) -> list[Daemon]:
        return [self.master, *self.workers]

    def listening_addresses(self) -> set[str]:
        """Local addresses of every listening TCP socket of the daemons and their executors."""
        found = set()
        for daemon in self.daemons():
            for process in daemon.processes():
                try:
                    connections = process.net_connections(kind="tcp")
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue
                found |= {conn.laddr.ip for conn in connections if conn.status == psutil.CONN_LISTEN}
        return found


def scala_version(home: Path) -> str:
    """The Scala binary version of Spark's own jars (`spark-core_2.12-3.5.6.jar` -> 2.12)."""
    cores = sorted(home.glob("jars/spark-core_*.jar"))
    if not cores:
        raise ClusterStartError(f"no spark-core jar under {home / 'jars'}: is this a pyspark installation?")
    return cores[0].name.removeprefix("spark-core_").split("-", 1)[0]


def daemon_environment(work_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["JAVA_HOME"] = ensure_java()
    env["SPARK_HOME"] = str(spark_home())
    # A worker builds its executors' command line with Spark's launcher, which otherwise
    # looks for a source build's target folders to guess it (spark-class sets it the same way).
    env["SPARK_SCALA_VERSION"] = scala_version(spark_home())
    env["SPARK_LOCAL_IP"] = LOOPBACK
    # Executors' shuffle and spill files stay inside the drill's folder.
    env["SPARK_LOCAL_DIRS"] = str(work_dir / "local")
    return env


# prctl(2) option: the signal the kernel sends a process when the thread that started it exits.
PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """Runs in the daemon's process before exec: a drill killed before its clean-up
    (SIGKILL, a timeout) leaves no JVM behind. Linux only; elsewhere the clean-up stays."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def _java() -> str:
    return str(Path(ensure_java()) / "bin" / "java")


def _start_daemon(name: str, main_class: str, arguments: list[str], work_dir: Path) -> Daemon:
    log_path = work_dir / f"{name}.log"
    command = [_java(), f"-Xmx{DAEMON_HEAP}", "-cp", str(spark_home() / "jars" / "*"), main_class, *arguments]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=work_dir,
                                   env=daemon_environment(work_dir), start_new_session=True,
                                   preexec_fn=_die_with_parent)
    return Daemon(name, process, log_path)


def _await_log_line(daemon: Daemon, line: str, deadline: float) -> None:
    while line not in daemon.log_tail(characters=1_000_000):
        if daemon.process.poll() is not None:
            raise ClusterStartError(f"{daemon.name} exited with {daemon.process.returncode}:\n{daemon.log_tail()}")
        if time.monotonic() > deadline:
            raise ClusterStartError(f"{daemon.name} not ready (no {line!r} in its log):\n{daemon.log_tail()}")
        time.sleep(0.2)


@contextmanager
def standalone_cluster(work_dir: Path, *, workers: int = 2, cores_per_worker: int = 1,
                       memory_per_worker: str = "1g", start_timeout_s: float = 120) -> Iterator[StandaloneCluster]:
    """A master and `workers` workers on 127.0.0.1, all registered; killed on exit."""
    work_dir.mkdir(parents=True, exist_ok=True)
    (work_dir / "local").mkdir(exist_ok=True)
    deadline = time.monotonic() + start_timeout_s
    with ExitStack() as cleanup:
        port = free_port()
        master = _start_daemon("master", "org.apache.spark.deploy.master.Master",
                               ["--host", LOOPBACK, "--port", str(port), "--webui-port", str(free_port())], work_dir)
        cleanup.callback(master.kill)
        cluster = StandaloneCluster(f"spark://{LOOPBACK}:{port}", master)
        _await_log_line(master, MASTER_READY, deadline)
        for number in range(workers):
            worker_dir = work_dir / f"worker-{number}"
            worker_dir.mkdir(exist_ok=True)
            worker = _start_daemon(
                f"worker-{number}", "org.apache.spark.deploy.worker.Worker",
                [cluster.master_url, "--host", LOOPBACK, "--port", str(free_port()),
                 "--webui-port", str(free_port()), "--cores", str(cores_per_worker),
                 "--memory", memory_per_worker, "--work-dir", str(worker_dir)],
                work_dir,
            )
            cleanup.callback(worker.kill)
            cluster.workers.append(worker)
        for worker in cluster.workers:
            _await_log_line(worker, WORKER_READY, deadline)
        yield cluster
