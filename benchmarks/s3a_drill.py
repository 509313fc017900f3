"""S3A drill: the stream writes its raw tables, quarantine and checkpoint through `s3a://`.

Production writes the raw tables to S3; everything else here writes a local folder. This
drill runs the job's start-up path (`streaming.runtime.startup.start_stream`) with ends of
its own, `LandingToS3`: the landing files of a local folder in, as `lakehouse stream`
reads them; the raw sink, the quarantine and the checkpoint under
`s3a://<bucket>/<prefix>` out, as the Glue job's ends (glue_job.KinesisToRaw) put them on
S3, the stream id taken from the checkpoint the way the Glue job takes it. `lakehouse
stream` itself takes only a local data directory (layout.local_data_dir refuses a URL).
S3 is moto's server on 127.0.0.1, in this process; Spark reaches it through Hadoop's S3A
file system (the pinned `jars.S3A_JARS`, fetched on first use) with the endpoint,
path-style access and the credentials provider given to `local_session(extra_conf=...)`.
The credentials are throwaway values made per run and passed only in the environment of
the drill's processes (S3A's EnvironmentVariableCredentialsProvider reads them there), so
they are in no Spark setting, file or log.

Per sink, over one small generated landing set (one file per micro-batch):
1. a clean local run (the kill drill's `clean_reference`), the reference;
2. the same files streamed to S3 in a process of its own, which then reads the Hudi
   tables back from S3 with Spark and with hudi-rs and compares them with the reference's;
3. the S3 prefix copied down and compared with the reference by the kill drill's
   helpers: change logs, current state (Hudi tables row for row; `lakehouse reconcile`'s
   comparison for both sinks) and quarantine, 0 lost, 0 duplicated, 0 unexpected, nothing
   left in a scratch folder or pending on a Hudi timeline.
4. Parquet sink only: crashes inside the folder rename that publishes a batch. On S3A a
   rename is a copy of every object, then a delete of the sources; not atomic. A hook in
   front of moto SIGKILLs the job (driver and JVM) at one request of batch 1's rename:
   `copied_not_deleted`, at the delete of the staged files once every copy is done, and
   `mid_copy` (full mode), right after the first data file's copy. What a reader could see
   at that moment is recorded (the batch's files in place against those still staged), then
   the job is restarted until done and must equal the reference.

Every run counts its S3 requests by kind, and the copies by where they land: the
Parquet sink and the quarantine publish by copy, the Hudi sink's raw tables should not.

    python -m benchmarks.s3a_drill '<json>'    the drill's S3 stream process (internal)
"""
from __future__ import annotations

import io
import json
import logging
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import psutil

from benchmarks.datasets import LandingSet, generate_landing
from benchmarks.kill_drill import KillSetup, clean_reference
from benchmarks.measure import REPO_ROOT, case_environment, parse_result
from benchmarks.rows import compare_data_dirs, compare_rows, data_dir_rows, staged_leftovers
from streaming.io.layout import (
    BATCH_COLUMN,
    CHECKPOINTS_FOLDER,
    QUARANTINE_FOLDER,
    QUERY_NAME,
    RAW_FOLDER,
    TEMPORARY_FOLDER,
    DataLayout,
    uri,
)
from streaming.runtime.trigger import DEFAULT_INTERVAL, Trigger

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from streaming.contracts.model import TableContract
    from streaming.io.quarantine_writer import QuarantineWriter
    from streaming.io.sinks import SinkName
    from streaming.io.sources import LandingStream
    from streaming.pipeline.batch import RawSink

BUCKET = "lakehouse-s3a-drill"
REGION = "us-east-1"
RUN_TIMEOUT_S = 1800
MAX_RESTARTS = 3
# The crash points of the Parquet sink's rename (module docstring, step 4); the quick run
# takes the first.
CRASH_POINTS = ("copied_not_deleted", "mid_copy")
CRASH_BATCH = 1
# Columns a write stamps: they differ between any two runs (benchmarks/rows.py).
STAMPED_COLUMNS = ("_ingested_at", "_ingest_hour")
# Where an S3 key sits in a data root, for the request counts: the checkpoint, a scratch
# folder (a batch being written: the sinks' `_tmp/`, and Spark's `_temporary/`, where task
# files wait for the job commit's rename), or a table's published files.
_AREAS = (("checkpoint", f"/{CHECKPOINTS_FOLDER}/"), ("scratch", f"/{TEMPORARY_FOLDER}/"),
          ("scratch", "/_temporary/"), ("quarantine", f"/{QUARANTINE_FOLDER}/"), ("raw", f"/{RAW_FOLDER}/"))


def s3a_spark_conf(endpoint: str, jars: list[Path]) -> dict[str, str]:
    """What local_session needs on top of its own settings to write `s3a://` to `endpoint`.

    `jars` replaces local_session's `spark.jars`, so it holds the Hudi bundle too.
    Path-style access: moto serves every bucket under one host name. No key in here: the
    provider reads AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY from the JVM's environment.
    """
    return {
        "spark.jars": ",".join(str(jar) for jar in jars),
        "spark.hadoop.fs.s3a.endpoint": endpoint,
        "spark.hadoop.fs.s3a.endpoint.region": REGION,
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
        "spark.hadoop.fs.s3a.aws.credentials.provider": "com.amazonaws.auth.EnvironmentVariableCredentialsProvider",
    }


def drill_environment(endpoint: str, credentials: Mapping[str, str]) -> dict[str, str]:
    """The S3 settings of the drill's processes: the JVM's S3A, boto3 (the contract registry)
    and hudi-rs each read them from the environment; no call may reach AWS itself."""
    return {
        **credentials,
        "AWS_REGION": REGION,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_ENDPOINT_URL": endpoint,
        # hudi-rs (object_store) refuses plain http unless told.
        "AWS_ALLOW_HTTP": "true",
        "AWS_EC2_METADATA_DISABLED": "true",
    }


def throwaway_credentials() -> dict[str, str]:
    """Made per run: moto takes any key, and nothing real is ever near the drill."""
    return {"AWS_ACCESS_KEY_ID": f"drill{uuid.uuid4().hex[:12]}", "AWS_SECRET_ACCESS_KEY": uuid.uuid4().hex}


# --------------------------------------------------------------------------- the stream's ends on S3

@dataclass(frozen=True)
class LandingToS3:
    """start_stream's ends for a local landing folder in and a data root on S3 out: the
    raw sink and the quarantine under `root` (`s3a://bucket/prefix`), the checkpoint under
    its `checkpoints/`. The landing ledger, a local file, is not kept (the Glue job keeps
    none either): it only reports landing files changed after they were read."""

    spark: SparkSession
    landing: Path
    root: str
    sink: SinkName
    max_files_per_trigger: int

    @property
    def raw_root(self) -> str:
        # The contract registry reads and writes `s3://` through boto3 and takes any other
        # root for a local path: an `s3a://` root would become a local folder named `s3a:`.
        # Its `s3://` name is the same bucket and keys that S3A writes.
        return uri("s3://" + self.root.split("://", 1)[1], RAW_FOLDER)

    @property
    def checkpoint_dir(self) -> str:
        return uri(self.root, CHECKPOINTS_FOLDER, QUERY_NAME)

    @property
    def trigger(self) -> Trigger:
        return "available-now"

    @property
    def interval(self) -> str:
        return DEFAULT_INTERVAL

    @property
    def query_name(self) -> str:
        return QUERY_NAME

    @property
    def catalog(self) -> str | None:
        return None

    def stream_id(self, contracts: Mapping[str, TableContract]) -> str:
        from streaming.io.storage import HadoopFiles
        from streaming.runtime.glue_job import checkpoint_query_id

        return checkpoint_query_id(HadoopFiles(self.spark), self.checkpoint_dir)

    def sinks(
        self, spark: SparkSession, contracts: Mapping[str, TableContract], stream_id: str
    ) -> tuple[RawSink, QuarantineWriter]:
        from streaming.io.quarantine_writer import QuarantineWriter
        from streaming.io.sinks import choose_sink

        raw_sink = choose_sink(self.sink, spark, data_dir=self.root, contracts=contracts, stream_id=stream_id)
        return raw_sink, QuarantineWriter(self.root)

    def source(self, spark: SparkSession, report: Callable[[str], None]) -> LandingStream:
        from streaming.io.sources import files_per_trigger, landing_files_stream

        size = files_per_trigger(spark, str(self.landing), self.max_files_per_trigger)
        report(f"streaming {self.landing} -> {self.root} ({size.explanation}) ...")
        return landing_files_stream(spark, str(self.landing), trigger_size=size)


def _json_rows(frame: DataFrame) -> DataFrame:
    """One JSON text per row, the stamped and Hudi meta columns left out: exceptAll then
    compares any column type (it refuses maps)."""
    from pyspark.sql import functions as F

    kept = [name for name in frame.columns if not name.startswith("_hoodie_") and name not in STAMPED_COLUMNS]
    return frame.select(F.to_json(F.struct(*kept)).alias("row"))


def spark_read_back(spark: SparkSession, root: str, reference_root: Path, tables: list[str]) -> dict[str, Any]:
    """Each Hudi table read by Spark from S3 and from the reference's folder: rows, and the
    rows each side has that the other lacks (with multiplicity)."""
    figures = {}
    for table in tables:
        on_s3 = _json_rows(spark.read.format("hudi").load(uri(root, RAW_FOLDER, table))).cache()
        local = _json_rows(spark.read.format("hudi").load(str(reference_root.resolve() / RAW_FOLDER / table))).cache()
        figures[table] = {"rows": on_s3.count(), "reference_rows": local.count(),
                          "missing": local.exceptAll(on_s3).count(), "extra": on_s3.exceptAll(local).count()}
        on_s3.unpersist()
        local.unpersist()
    return figures


def hudi_rs_read_back(root: str, reference: Mapping[str, Counter[Any]], tables: list[str]) -> dict[str, Any]:
    """Each Hudi table read by hudi-rs straight from S3 (endpoint from the environment),
    compared with the reference's rows as the kill drill compares them."""
    from benchmarks.rows import hudi_table_rows

    figures: dict[str, Any] = {}
    for table in tables:
        try:
            # hudi_table_rows hands its folder to hudi-rs, which takes a URL as well as a path.
            rows = hudi_table_rows(uri(root, RAW_FOLDER, table))  # type: ignore[arg-type]
        except Exception as exc:  # hudi-rs's own error says what it could not reach
            figures[table] = {"error": f"{type(exc).__name__}: {str(exc)[:600]}"}
            continue
        diff = compare_rows(reference[f"raw/{table}"], rows)
        figures[table] = {"rows": sum(rows.values()), **vars(diff)}
    return figures


def run_s3_stream(params: dict[str, Any]) -> dict[str, Any]:
    """The drill's S3 process: start_stream over LandingToS3, then (with `reference_dir`)
    the Hudi tables read back from S3 by Spark and hudi-rs."""
    from benchmarks.cases import RecordingPublisher
    from streaming.runtime.spark_session import local_session
    from streaming.runtime.startup import load_checked_contracts, start_stream

    spark = local_session(app_name="s3a-drill", master="local[2]",
                          extra_conf=s3a_spark_conf(params["endpoint"], [Path(jar) for jar in params["jars"]]))
    try:
        contracts = load_checked_contracts(params.get("contracts_dir"))
        ends = LandingToS3(spark, Path(params["landing_dir"]), params["root"], params["sink"],
                           params["max_files_per_trigger"])
        recorder = RecordingPublisher()
        started = time.monotonic()
        start_stream(spark, ends, contracts, print, metrics=recorder)
        result: dict[str, Any] = {
            "seconds": time.monotonic() - started,
            "batches": len(recorder.reports),
            "records_in": sum(report.records_in for report in recorder.reports),
            "quarantined": sum(report.quarantined for report in recorder.reports),
        }
        reference_dir = params.get("reference_dir")
        if reference_dir and params["sink"] == "hudi":
            tables = [name for contract in contracts.values() for name in (contract.changes_table, contract.raw_table)]
            result["spark_read_back"] = spark_read_back(spark, params["root"], Path(reference_dir), tables)
            result["hudi_rs_read_back"] = hudi_rs_read_back(params["root"], data_dir_rows(Path(reference_dir)), tables)
        return result
    finally:
        spark.stop()


# --------------------------------------------------------------------------- moto, with a crash hook

def request_kind(environ: Mapping[str, Any]) -> str:
    method = environ["REQUEST_METHOD"]
    if method == "PUT" and environ.get("HTTP_X_AMZ_COPY_SOURCE"):
        return "copy"
    if method == "POST" and "delete" in environ.get("QUERY_STRING", "").split("&"):
        return "bulk_delete"
    if method == "GET" and environ.get("PATH_INFO", "/").strip("/").count("/") == 0:
        return "list"
    return method.lower()


def key_area(key: str) -> str:
    """The part of a data root `key` belongs to (_AREAS), `other` for none."""
    return next((area for area, marker in _AREAS if marker in f"/{key}"), "other")


# A data file of batch n staged for its rename: `<root>/[raw/]_tmp/<table>/<n>/<attempt>/[<col>=<v>/]part-*`,
# not one of Spark's own task files under `_temporary/`.
def staged_file_pattern(batch_id: int) -> re.Pattern[str]:
    return re.compile(rf"/{TEMPORARY_FOLDER}/(?P<table>[^/]+)/{batch_id}/[0-9a-f]{{32}}/(?:[^/]+=[^/]+/)?part-[^/]+$")


@dataclass
class CrashHook:
    """Kills the job's process tree at one request of batch `batch_id`'s publishing rename:
    `copied_not_deleted` before the first delete of a staged data file (every copy done),
    `mid_copy` right after the first copy of one into place. Fires once."""

    point: str
    batch_id: int
    pid: int | None = None
    fired: dict[str, Any] | None = None

    def matches(self, kind: str, keys: list[str], copy_source: str) -> bool:
        staged = staged_file_pattern(self.batch_id)
        if self.point == "copied_not_deleted":
            return kind in ("delete", "bulk_delete") and any(staged.search(key) for key in keys)
        return kind == "copy" and bool(staged.search(copy_source))

    def fire(self, request: str) -> None:
        self.fired = {"request": request, "at": time.time()}
        if self.pid is not None:
            kill_process_tree(self.pid)


def kill_process_tree(pid: int) -> None:
    """SIGKILL `pid` and every descendant: the JVM runs in a session of its own
    (spark_session._start_driver_jvm), so the driver's process group does not hold it."""
    try:
        root = psutil.Process(pid)
        tree = [*root.children(recursive=True), root]
    except psutil.NoSuchProcess:
        return
    for process in tree:
        try:
            process.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            continue


def _deleted_keys(environ: dict[str, Any], kind: str) -> list[str]:
    """The keys a delete names; a bulk delete's body is read and put back for moto."""
    if kind == "delete":
        return [environ.get("PATH_INFO", "")]
    if kind != "bulk_delete":
        return []
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = environ["wsgi.input"].read(length)
    environ["wsgi.input"] = io.BytesIO(body)
    return re.findall(r"<Key>([^<]+)</Key>", body.decode("utf-8", "replace"))


@dataclass
class S3Traffic:
    """Counts of the requests moto served, by kind and, for copies, by area of the target."""

    kinds: Counter[str] = field(default_factory=Counter)
    copies: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def take(self) -> dict[str, Any]:
        with self.lock:
            figures = {"requests": dict(self.kinds), "copies_by_area": dict(self.copies)}
            self.kinds.clear()
            self.copies.clear()
        return figures


class CrashingS3:
    """moto's S3 as a WSGI app, with the request counts and the crash hook in front."""

    def __init__(self) -> None:
        from moto.server import DomainDispatcherApplication, create_backend_app

        self._moto = DomainDispatcherApplication(create_backend_app)
        self.traffic = S3Traffic()
        self.hook: CrashHook | None = None

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        kind = request_kind(environ)
        path = unquote(environ.get("PATH_INFO", ""))
        copy_source = unquote(environ.get("HTTP_X_AMZ_COPY_SOURCE", ""))
        with self.traffic.lock:
            self.traffic.kinds[kind] += 1
            if kind == "copy":
                self.traffic.copies[key_area(path)] += 1
        hook = self.hook
        if hook is None or hook.fired:
            return self._moto(environ, start_response)
        keys = [unquote(key) for key in _deleted_keys(environ, kind)]
        if not hook.matches(kind, keys, copy_source):
            return self._moto(environ, start_response)
        if hook.point == "copied_not_deleted":
            # The delete never reaches moto: the job dies with every copy made, no source deleted.
            staged = staged_file_pattern(hook.batch_id)
            hook.fire(f"{kind} of {len(keys)} keys, {next(key for key in keys if staged.search(key))} among them")
            start_response("503 Service Unavailable", [("Content-Length", "0")])
            return [b""]
        response = list(self._moto(environ, start_response))
        hook.fire(f"copy {copy_source} -> {path}")
        return response


@contextmanager
def moto_s3() -> Iterator[tuple[str, CrashingS3]]:
    """moto's S3 on 127.0.0.1 (a free port), in a thread of this process, as
    moto.server.ThreadedMotoServer runs it, with CrashingS3 in front."""
    from moto.server import MotoRequestHandler
    from werkzeug.serving import make_server

    app = CrashingS3()
    server = make_server("127.0.0.1", 0, app, threaded=True, request_handler=MotoRequestHandler)
    thread = threading.Thread(target=server.serve_forever, name="s3a-drill-moto", daemon=True)
    # werkzeug logs every request at INFO: thousands of lines a run, which S3Traffic counts instead.
    requests_log = logging.getLogger("werkzeug")
    level = requests_log.level
    requests_log.setLevel(logging.WARNING)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", app
    finally:
        server.shutdown()
        thread.join()
        requests_log.setLevel(level)


# --------------------------------------------------------------------------- the drill

@dataclass(frozen=True)
class S3Setup:
    """What every S3 run of one sink shares."""

    landing: LandingSet
    sink: str
    contracts_dir: str | None
    endpoint: str
    environment: dict[str, str]
    jars: tuple[str, ...]


def s3a_jars(sink: str) -> tuple[str, ...]:
    """The jars of the S3 runs: the S3A set, fetched now when missing, and the Hudi bundle.
    A jar that cannot be fetched ends the drill with one line saying which."""
    from streaming.io.formats.hudi.format import HUDI_SPARK_BUNDLE
    from streaming.runtime.jars import S3A_JARS, JarError, fetch, local_jar

    try:
        fetched = [fetch(jar) for jar in S3A_JARS]
    except JarError as exc:
        raise RuntimeError(f"{exc}: the s3a drill cannot run here") from None
    bundle = local_jar(HUDI_SPARK_BUNDLE)
    if bundle is None and sink == "hudi":
        raise RuntimeError("the Hudi bundle is not in .venv/jars: run `python -m streaming.runtime.jars fetch`")
    return tuple(str(jar) for jar in ([bundle] if bundle else []) + fetched)


def run_on_s3(setup: S3Setup, app: CrashingS3, root: str, log_path: Path, *,
              reference_dir: Path | None = None, hook: CrashHook | None = None) -> dict[str, Any]:
    """One S3 stream process (run_s3_stream) over the landing set into `root`."""
    params = {"endpoint": setup.endpoint, "jars": list(setup.jars), "root": root, "sink": setup.sink,
              "landing_dir": str(setup.landing.root), "contracts_dir": setup.contracts_dir,
              "max_files_per_trigger": 1, "reference_dir": str(reference_dir) if reference_dir else None}
    app.traffic.take()
    started = time.monotonic()
    with open(log_path, "w") as log:
        process = subprocess.Popen([sys.executable, "-m", "benchmarks.s3a_drill", json.dumps(params)], cwd=REPO_ROOT,
                                   env=case_environment(setup.environment), stdout=log, stderr=subprocess.STDOUT,
                                   text=True, start_new_session=True)
    if hook is not None:
        hook.pid = process.pid
        app.hook = hook
    try:
        returncode = process.wait(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        kill_process_tree(process.pid)
        process.wait()
        raise RuntimeError(f"the S3 run into {root} did not finish in {RUN_TIMEOUT_S}s") from None
    finally:
        app.hook = None
    output = log_path.read_text(errors="replace")
    return {"returncode": returncode, "wall_seconds": time.monotonic() - started,
            "result": parse_result(output), **app.traffic.take(),
            "log_tail": None if returncode == 0 else output[-2500:]}


def mirror(client: Any, root: str, into: Path) -> Path:
    """The objects under `root` (`s3a://bucket/prefix`) copied into the local folder `into`,
    so the kill drill's row readers read what S3 holds."""
    bucket, prefix = root.split("://", 1)[1].split("/", 1)
    shutil.rmtree(into, ignore_errors=True)
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/"):
        for item in page.get("Contents", []):
            if item["Key"].endswith("/"):  # a directory marker, no file
                continue
            target = into / item["Key"][len(prefix) + 1:]
            target.parent.mkdir(parents=True, exist_ok=True)
            client.download_file(bucket, item["Key"], str(target))
    return into


def batch_files_on_s3(client: Any, root: str, batch_id: int) -> dict[str, dict[str, int]]:
    """Per table, batch `batch_id`'s data files in place (what a reader lists) and still staged."""
    bucket, prefix = root.split("://", 1)[1].split("/", 1)
    published = re.compile(rf"/(?P<table>[^/_][^/]*)/(?:[^/]+=[^/]+/)?{BATCH_COLUMN}={batch_id}/part-[^/]+$")
    staged = staged_file_pattern(batch_id)
    found: dict[str, dict[str, int]] = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/"):
        for item in page.get("Contents", []):
            key = "/" + item["Key"]
            for where, pattern in (("staged", staged), ("published", published)):
                match = pattern.search(key)
                if match:
                    table = found.setdefault(match["table"], {"published": 0, "staged": 0})
                    table[where] += 1
                    break
    return found


def compare_with_reference(reference: dict[str, Counter[Any]], reference_dir: Path, copy: Path,
                           contracts_dir: str | None) -> dict[str, Any]:
    """The kill drill's comparison of a data root with the clean run's, plus the current
    state as `lakehouse reconcile` compares it."""
    from streaming.contracts.loader import load_contracts
    from streaming.operations.reconcile import reconcile

    rows = data_dir_rows(copy)
    diffs = compare_data_dirs(reference, rows)
    state = reconcile(str(DataLayout(reference_dir).raw), str(DataLayout(copy).raw), load_contracts(contracts_dir),
                      out=lambda line: None)
    leftovers = staged_leftovers(copy)
    return {
        "rows_compared": sum(sum(table.values()) for table in rows.values()),
        "lost": sum(diff.lost for diff in diffs.values()),
        "duplicated": sum(diff.duplicated for diff in diffs.values()),
        "unexpected": sum(diff.unexpected for diff in diffs.values()),
        "differing_tables": {name: vars(diff) for name, diff in diffs.items() if not diff.equal},
        "current_state_reconciles": state.ok,
        "current_state": [line for table in state.tables for line in table.lines()],
        "staged_leftovers": [str(path.relative_to(copy)) for path in leftovers[:10]],
    }


def _equal(comparison: dict[str, Any]) -> bool:
    return (comparison["lost"] == comparison["duplicated"] == comparison["unexpected"] == 0
            and comparison["current_state_reconciles"] and not comparison["staged_leftovers"])


def read_back_ok(result: dict[str, Any]) -> bool:
    """Every Hudi table read back from S3 by Spark and by hudi-rs equals the reference's."""
    spark_ok = all(table["missing"] == table["extra"] == 0 and table["rows"] == table["reference_rows"] > 0
                   for table in result["spark_read_back"].values())
    hudi_rs_ok = all("error" not in table and table["lost"] == table["duplicated"] == table["unexpected"] == 0
                     for table in result["hudi_rs_read_back"].values())
    return spark_ok and hudi_rs_ok


def crash_trial(setup: S3Setup, app: CrashingS3, client: Any, point: str, reference: dict[str, Counter[Any]],
                reference_dir: Path, work: Path) -> dict[str, Any]:
    """Kill the job at `point` of batch CRASH_BATCH's rename, look at what S3 holds, restart until done."""
    root = f"s3a://{BUCKET}/{setup.sink}-crash-{point}"
    started = time.monotonic()
    hook = CrashHook(point, CRASH_BATCH)
    crashed = run_on_s3(setup, app, root, work / f"crash-{point}.log", hook=hook)
    at_crash = batch_files_on_s3(client, root, CRASH_BATCH)
    restarts, finished, runs = 0, False, []
    while not finished and restarts < MAX_RESTARTS:
        restarts += 1
        run = run_on_s3(setup, app, root, work / f"crash-{point}-restart-{restarts}.log")
        runs.append({key: run[key] for key in ("returncode", "wall_seconds", "requests", "copies_by_area", "log_tail")})
        finished = run["returncode"] == 0
    comparison = compare_with_reference(reference, reference_dir, mirror(client, root, work / f"crash-{point}-copy"),
                                        setup.contracts_dir)
    trial = {
        "point": point,
        "killed": hook.fired is not None and crashed["returncode"] == -signal.SIGKILL,
        "killed_at": hook.fired["request"] if hook.fired else None,
        "batch_files_at_crash": at_crash,
        "restarts": restarts,
        "finished": finished,
        "restart_runs": runs,
        **comparison,
        "seconds": time.monotonic() - started,
    }
    trial["passed"] = trial["killed"] and finished and _equal(comparison)
    return trial


def s3a_drill(work: Path, *, files: int, records_per_file: int, seed: int, sink: str,
              contracts_dir: str | None, crash_points: tuple[str, ...],
              progress: Callable[[str], None]) -> dict[str, Any]:
    """The drill for one sink (module docstring); `crash_points` apply to the Parquet sink."""
    import boto3

    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    jars = s3a_jars(sink)
    landing = generate_landing(DataLayout(work / "landing-root").landing, files * records_per_file,
                               records_per_file=records_per_file, seed=seed)
    progress(f"s3a drill ({sink}): {len(landing.files)} landing files ({landing.records} records); clean local run")
    reference_dir = work / "local"
    reference, local_seconds = clean_reference(KillSetup(landing, sink, contracts_dir), reference_dir)
    credentials = throwaway_credentials()
    with moto_s3() as (endpoint, app):
        client = boto3.client("s3", endpoint_url=endpoint, region_name=REGION,
                              aws_access_key_id=credentials["AWS_ACCESS_KEY_ID"],
                              aws_secret_access_key=credentials["AWS_SECRET_ACCESS_KEY"])
        client.create_bucket(Bucket=BUCKET)
        setup = S3Setup(landing, sink, contracts_dir, endpoint, drill_environment(endpoint, credentials), jars)
        root = f"s3a://{BUCKET}/{sink}-clean"
        progress(f"s3a drill ({sink}): local run {local_seconds:.0f}s; streaming to {root} on moto ({endpoint})")
        run = run_on_s3(setup, app, root, work / "s3.log", reference_dir=reference_dir)
        if run["returncode"] != 0 or run["result"] is None:
            raise RuntimeError(f"the S3 run exited {run['returncode']}:\n{run['log_tail']}")
        comparison = compare_with_reference(reference, reference_dir, mirror(client, root, work / "s3-copy"),
                                            contracts_dir)
        progress(f"s3a drill ({sink}): S3 run {run['wall_seconds']:.0f}s; {comparison['rows_compared']} rows: "
                 f"lost={comparison['lost']} duplicated={comparison['duplicated']} "
                 f"unexpected={comparison['unexpected']}; requests {run['requests']}")
        trials = []
        for point in crash_points if sink == "parquet" else ():
            trial = crash_trial(setup, app, client, point, reference, reference_dir, work)
            trials.append(trial)
            progress(f"s3a drill ({sink}) crash {point}: killed={trial['killed']} at {trial['killed_at']}; "
                     f"batch {CRASH_BATCH} files then {trial['batch_files_at_crash']}; restarts={trial['restarts']} "
                     f"lost={trial['lost']} duplicated={trial['duplicated']} unexpected={trial['unexpected']} "
                     f"-> {'ok' if trial['passed'] else 'FAILED'}")
    result = run["result"]
    checks = {
        "S3 run read every record": result["records_in"] == landing.records,
        "rows equal the local run": _equal(comparison),
    }
    if sink == "hudi":
        checks["Spark and hudi-rs read the S3 tables back equal"] = read_back_ok(result)
    checks.update({f"crash {trial['point']}: restart equals the local run": trial["passed"] for trial in trials})
    failed = [name for name, ok in checks.items() if not ok]
    summary = (f"{sink}: {comparison['rows_compared']} rows from {landing.records} records in {result['batches']} "
               f"batches on s3a: lost={comparison['lost']} duplicated={comparison['duplicated']} "
               f"unexpected={comparison['unexpected']}; S3 run {run['wall_seconds']:.0f}s vs local "
               f"{local_seconds:.0f}s")
    if trials:
        summary += "; " + ", ".join(f"crash {trial['point']}: {'ok' if trial['passed'] else 'FAILED'}"
                                    for trial in trials)
    shutil.rmtree(work, ignore_errors=True)
    return {
        "passed": not failed,
        "sink": sink,
        "summary": summary + (f"; FAILED: {', '.join(failed)}" if failed else ""),
        "checks": len(checks),
        "check_results": checks,
        "landing_files": len(landing.files),
        "records": landing.records,
        "local_seconds": local_seconds,
        "s3_wall_seconds": run["wall_seconds"],
        "s3_stream_seconds": result["seconds"],
        "s3_requests": run["requests"],
        "s3_copies_by_area": run["copies_by_area"],
        "reference_rows": {name: sum(rows.values()) for name, rows in reference.items()},
        **comparison,
        **({"spark_read_back": result["spark_read_back"], "hudi_rs_read_back": result["hudi_rs_read_back"]}
           if sink == "hudi" else {}),
        "crash_trials": trials,
    }


def main(argv: list[str]) -> int:
    from benchmarks.measure import RESULT_PREFIX

    result = run_s3_stream(json.loads(argv[0]))
    print(RESULT_PREFIX + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
