"""Where the job's time goes: microseconds per record of each stage of one batch.

One Spark session (a case of its own, `benchmarks.cases stages`) runs the stages of
`process_batch` over the same landing files, each timed alone and the best of
`rounds` runs kept. A stage's cost is the difference between two runs that differ by
that stage only, each ending in Spark's `noop` sink, which computes every column and
writes nothing:

- split:    the landing files -> envelope rows (the Python splitter on the executors,
            Arrow batches to the JVM)
- envelope: each payload's envelope parsed (envelope.py), from the split envelope kept
            as Parquet, minus reading that Parquet
- typing:   routing, the typed images, the per-attribute checks and raw columns
            (decode.py without `_extra_attributes`)
- extras:   `_extra_attributes` (extras.py): the full decode minus the one without it
- ordering: de-duplication per raw table (ordering.py) over the kept decoded rows
- writes:   the rest of `process_batch` with the local Parquet sink: keeping the
            decoded rows, the count jobs, the change-log and quarantine writes, and
            building the batch's plans (which the other stages leave out: their frames
            are built before the clock starts)

The per-record figures are wall time on all cores over records in (2 cores: twice
that in CPU time); their sum is close to, not exactly, one `process_batch`.
"""
from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from streaming.contracts.loader import load_contracts
from streaming.io.landing_ledger import LandedFile
from streaming.io.formats.parquet.sink import LocalParquetSink
from streaming.io.quarantine_writer import QuarantineWriter
from streaming.io.sources import files_envelope, local_landing_files
from streaming.pipeline import decode
from streaming.pipeline.batch import Pipeline
from streaming.pipeline.envelope import parse_projections, project
from streaming.pipeline.ordering import drop_duplicate_events
from streaming.pipeline.sink_capabilities import SinkCapabilities

STAGES = ("split", "envelope", "typing", "extras", "ordering", "writes")


def _noop(frame: DataFrame) -> None:
    frame.write.format("noop").mode("overwrite").save()


def _best(rounds: int, run: Callable[[], Any]) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.monotonic()
        run()
        best = min(best, time.monotonic() - started)
    return best


def _best_noop(rounds: int, frames: Callable[[], list[DataFrame]]) -> float:
    """The fastest of `rounds` runs computing `frames`, each built before its clock starts:
    a stage's cost is its execution, not the building of its plan."""
    best = float("inf")
    for _ in range(rounds):
        built = frames()
        started = time.monotonic()
        for frame in built:
            _noop(frame)
        best = min(best, time.monotonic() - started)
    return best


def _decode_without_extras(envelope: DataFrame, contracts: dict) -> DataFrame:
    """The decode with `_extra_attributes` always null: the typing stage alone."""
    real = decode.extra_attributes
    decode.decode_projections.cache_clear()
    decode.extra_attributes = lambda *_: F.lit(None).cast("string")
    try:
        return decode.decode_records(envelope, contracts)
    finally:
        decode.extra_attributes = real
        decode.decode_projections.cache_clear()


def _kept_envelope(spark: SparkSession, params: dict[str, Any]) -> tuple[list[LandedFile], str]:
    """The files below `params["landing_dir"]` and their envelope, written once as Parquet
    in `params["work_dir"]`: each run reads it back instead of splitting the files again."""
    # Absolute: the splitter opens `file:<path>`, which a relative path does not name.
    landing = Path(params["landing_dir"]).resolve()
    files = [LandedFile(f"file:{path}", path.stat().st_size, 0) for path in local_landing_files(landing)]
    envelope_path = str(Path(params["work_dir"]) / "envelope.parquet")
    shutil.rmtree(envelope_path, ignore_errors=True)
    files_envelope(spark, files).write.parquet(envelope_path)
    return files, envelope_path


def profile_stages(spark: SparkSession, params: dict[str, Any]) -> dict[str, Any]:
    """Params: `landing_dir`, `work_dir`, `rounds` (default 2), `contracts_dir` (default:
    the packaged contracts). Returns seconds and microseconds per record of each stage."""
    work = Path(params["work_dir"])
    rounds = int(params.get("rounds", 2))
    contracts = load_contracts(params.get("contracts_dir"))
    files, envelope_path = _kept_envelope(spark, params)

    def envelope() -> DataFrame:
        return spark.read.parquet(envelope_path)

    records = envelope().count()
    tables = {contract.table for contract in contracts.values()}
    split = _best_noop(rounds, lambda: [files_envelope(spark, files)])
    read = _best_noop(rounds, lambda: [envelope()])
    parsed = _best_noop(rounds, lambda: [project(envelope(), parse_projections(tables, True))])
    typed = _best_noop(rounds, lambda: [_decode_without_extras(envelope(), contracts)])
    decoded = _best_noop(rounds, lambda: [decode.decode_records(envelope(), contracts)])

    # Kept as process_batch keeps them, so the tables' rows and ordering are measured from the kept rows.
    kept = decode.kept_apart_from_its_plan(decode.decode_records(envelope(), contracts))
    kept.count()
    rows = {table: decode.table_rows(kept, contracts, table) for table in contracts}
    plain = _best_noop(rounds, lambda: list(rows.values()))
    ordered = _best_noop(rounds, lambda: [drop_duplicate_events(frame, contracts[table]) for table, frame in rows.items()])
    decode.release_kept(kept)

    def batch(attempt: list[int]) -> None:
        data = work / f"pipeline-{attempt[0]}"
        attempt[0] += 1
        pipeline = Pipeline(contracts, LocalParquetSink(str(data)), QuarantineWriter(str(data)),
                            clock=lambda: datetime(2026, 11, 25, tzinfo=timezone.utc))
        pipeline.process_batch(envelope(), 0)

    whole = _best(rounds, lambda attempt=[0]: batch(attempt))
    seconds = {
        "split": split,
        "envelope": parsed - read,
        "typing": typed - parsed,
        "extras": decoded - typed,
        "ordering": ordered - plain,
        "writes": whole - decoded - (ordered - plain),
    }
    return {
        "records": records,
        "rounds": rounds,
        "seconds": seconds,
        "us_per_record": {stage: value / records * 1e6 for stage, value in seconds.items()},
        "process_batch_seconds": whole,
    }


# The Hudi lens: one micro-batch through `process_batch` on the Hudi sink, each commit
# timed where the sink hands it to Hudi. Every variant writes into tables that exist (a
# small priming batch first, written with the variant's options), as a running stream
# does; a table's first commit also creates it. "one table at a time" is the reference
# the commits' shares are taken from; each lever is one option changed against "as
# configured" (two raw tables' commits at once), and both ratios are reported. Option
# keys and values are Hudi 1.0.2's (apache/hudi, tag release-1.0.2).
HUDI_VARIANTS: dict[str, dict[str, Any]] = {
    # The sink as the job runs it: two raw tables' commits at once.
    "as configured": {"concurrent": 2},
    "one table at a time": {},
    # Every raw table's commits at once (a table's own two still in order): each table
    # has its own timeline and write client, so Hudi needs no lock between them.
    "all tables at once": {"concurrent": "all"},
    # The sink declared a one-pass reader: each commit computes its table's distinct
    # changes from the decoded records again instead of reading them cached.
    "changes uncached": {"concurrent": 2, "uncached": True},
    # latest_per_key already leaves one row per key: Hudi's own de-duplication of the
    # upsert's input (a shuffle) finds nothing to combine.
    "no in-batch combine": {"concurrent": 2, "options": {"hoodie.combine.before.upsert": "false"}},
    # Hudi persists its input records before profiling them (BaseSparkCommitActionExecutor),
    # serialized by default; kept as objects, as the pipeline keeps its own cache.
    "hudi input cache deserialized": {"concurrent": 2,
                                      "options": {"hoodie.write.tagged.record.storage.level": "MEMORY_AND_DISK"}},
    # The change log through bulk_insert's row writer: no conversion to Hudi records, no
    # persisted copy of them and no workload profile.
    "change log bulk_insert": {"concurrent": 2, "insert_options": {"hoodie.datasource.write.operation": "bulk_insert"}},
    # The same, its rows first repartitioned by partition path (HoodieWriteConfig.
    # BULK_INSERT_SORT_MODE, BulkInsertSortMode.PARTITION_PATH_REPARTITION): one file per
    # ingest hour a commit, as insert writes, instead of one per input partition and hour.
    "change log bulk_insert by hour": {"concurrent": 2, "insert_options": {
        "hoodie.datasource.write.operation": "bulk_insert", "hoodie.bulkinsert.sort.mode": "PARTITION_PATH_REPARTITION"}},
    # The same, coalesced to one Spark partition (HoodieWriteConfig.BULKINSERT_PARALLELISM_VALUE;
    # the NONE sort mode's NonSortPartitionerWithRows coalesces to it): a batch's rows share
    # one ingest hour, so one file a commit, without the shuffle of the repartition by hour.
    "change log bulk_insert in one file": {"concurrent": 2, "insert_options": {
        "hoodie.datasource.write.operation": "bulk_insert", "hoodie.bulkinsert.shuffle.parallelism": "1"}},
    # Both levers that skip work the pipeline already did: no in-batch combine on the
    # upsert, and the change log through bulk_insert by hour.
    "no combine and change log bulk_insert by hour": {
        "concurrent": 2, "upsert_options": {"hoodie.combine.before.upsert": "false"},
        "insert_options": {"hoodie.datasource.write.operation": "bulk_insert",
                           "hoodie.bulkinsert.sort.mode": "PARTITION_PATH_REPARTITION"}},
    # The current state's bucket count before 2026-11-29: 4 file groups per partition, each
    # rewritten by a commit that touches it (the sink records the count it writes with).
    "4 buckets per partition": {"concurrent": 2, "upsert_options": {
        "hoodie.bucket.index.num.buckets": "4", "lakehouse.buckets_per_partition": "4"}},
    # Records kept as Spark's InternalRow through the write instead of converted to Avro:
    # Hudi picks the merger class whose strategy id is the table's (event-time ordering,
    # from DefaultHoodieRecordPayload) among these (HoodieWriteConfig.RECORD_MERGE_IMPL_CLASSES),
    # and its record type decides the write path (HoodieSparkRecord, HoodieSparkParquetWriter).
    "Spark records": {"concurrent": 2, "options": {
        "hoodie.write.record.merge.custom.implementation.classes": "org.apache.hudi.DefaultSparkRecordMerger"}},
    # Markers written as files beside the data instead of through the timeline server
    # (HoodieWriteConfig.MARKERS_TYPE, default TIMELINE_SERVER_BASED).
    "direct markers": {"concurrent": 2, "options": {"hoodie.write.markers.type": "DIRECT"}},
    # No timeline server started for each commit's write client (HoodieWriteConfig.
    # EMBEDDED_TIMELINE_SERVER_ENABLE); the markers then fall back to direct ones.
    "no embedded timeline server": {"concurrent": 2, "options": {"hoodie.embed.timeline.server": "false"}},
    # One timeline server for every write client of the JVM instead of one per commit
    # (HoodieWriteConfig.EMBEDDED_TIMELINE_SERVER_REUSE_ENABLED, default false).
    "timeline server reused": {"concurrent": 2, "options": {"hoodie.embed.timeline.server.reuse.enabled": "true"}},
    # The cleaner planned after every commit instead of every tenth (CLEAN_EVERY_COMMITS).
    "clean every commit": {"concurrent": 2, "options": {"hoodie.clean.trigger.max.commits": "1"}},
    # Neither cleaning nor archival run inside the commit (HoodieCleanConfig.AUTO_CLEAN,
    # HoodieArchivalConfig.AUTO_ARCHIVE): what their checks cost a commit.
    "no inline clean or archival": {"concurrent": 2, "options": {"hoodie.clean.automatic": "false",
                                                                 "hoodie.archive.automatic": "false"}},
    # Parquet pages compressed with Snappy or Zstandard instead of Hudi 1.0.2's default
    # gzip (HoodieStorageConfig.PARQUET_COMPRESSION_CODEC_NAME); a COW upsert recompresses
    # every file group it rewrites.
    "snappy": {"concurrent": 2, "options": {"hoodie.parquet.compression.codec": "snappy"}},
    "zstd": {"concurrent": 2, "options": {"hoodie.parquet.compression.codec": "zstd"}},
    # A Hudi bloom filter in the footer of each Parquet file written, as before 2026-11-29
    # (HoodieStorageConfig.PARQUET_WITH_BLOOM_FILTER_ENABLED, default true): about 431 KB a
    # file at the default 60,000 entries, built, written and read back with every file.
    "bloom filters": {"concurrent": 2, "options": {"hoodie.parquet.bloom.filter.enabled": "true"}},
    # The current state's upsert with a lookup index instead of BUCKET (HoodieIndexConfig.
    # INDEX_TYPE): SIMPLE joins the batch's keys with the keys stored in the partitions
    # touched, BLOOM first prunes files by key ranges and bloom filters.
    "current state SIMPLE index": {"concurrent": 2, "upsert_options": {"hoodie.index.type": "SIMPLE"}},
    "current state BLOOM index": {"concurrent": 2, "upsert_options": {"hoodie.index.type": "BLOOM"}},
}
HUDI_REFERENCE = "one table at a time"
HUDI_AS_CONFIGURED = "as configured"
# Records of the priming batch that creates every table before the timed one.
HUDI_PRIMING_RECORDS = 2_000


def _plan_outline(frame: DataFrame) -> dict[str, Any]:
    """What a write's physical plan computes before Hudi sees the rows: its leaves (a
    cached relation is a leaf: `InMemoryTableScan(<its columns>)`) and its shuffles."""
    leaves: list[str] = []
    exchanges = 0
    nodes = [frame._jdf.queryExecution().executedPlan()]
    while nodes:
        node = nodes.pop()
        name = node.nodeName()
        if name.startswith("AdaptiveSparkPlan"):
            nodes.append(node.inputPlan())
            continue
        exchanges += "Exchange" in name
        children = node.children()
        if children.isEmpty():
            columns = node.relation().output().size() if name == "InMemoryTableScan" else node.output().size()
            leaves.append(f"{name}({columns})")
        nodes.extend(children.apply(index) for index in range(children.size()))
    return {"leaves": sorted(leaves), "exchanges": exchanges}


class TimedHudiWriter:
    """Wraps the sink's Hudi writer: each commit's wall time, the Spark jobs it ran (one
    job group per commit) and the plan of its input, with a variant's options laid over."""

    def __init__(self, inner: Callable[..., None], spark: SparkSession, variant: dict[str, Any]) -> None:
        self.inner = inner
        self.spark = spark
        self.options = variant.get("options", {})
        self.by_operation = {"insert": variant.get("insert_options", {}), "upsert": variant.get("upsert_options", {})}
        self.commits: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self.start_timing()

    def start_timing(self) -> None:
        """Forget the commits so far; each later commit's start and end count in seconds
        from here (when commits overlapped, and how long the batch ran before its first)."""
        with self._lock:
            self.commits = []
            self._origin = time.monotonic()

    def __call__(self, frame: DataFrame, options: Any, path: str) -> None:
        operation = options["hoodie.datasource.write.operation"]
        options = {**options, **self.options, **self.by_operation.get(operation, {})}
        context = self.spark.sparkContext
        # Unique per writer and commit: a group's job ids outlive it, and every variant
        # writes the same table paths in the one session.
        group = f"hudi-lens-{id(self)}-{len(self.commits)}-{path}"
        # A thread's job group is its JVM thread's (PySpark's pinned threads): both tables'
        # commits at once stay apart.
        context.setJobGroup(group, group)
        started = time.monotonic()
        try:
            self.inner(frame, options, path)
        finally:
            seconds = time.monotonic() - started
            context.setLocalProperty("spark.jobGroup.id", None)
        tracker = context.statusTracker()
        jobs = tracker.getJobIdsForGroup(group)
        stages = [stage for info in map(tracker.getJobInfo, jobs) if info for stage in info.stageIds]
        # Planned after the clock: Hudi plans the frame again for its own write.
        outline = _plan_outline(frame)
        with self._lock:
            self.commits.append({"table": path.rstrip("/").rsplit("/", 1)[1], "operation": operation,
                                 "written_as": options["hoodie.datasource.write.operation"], "seconds": seconds,
                                 "started": started - self._origin, "ended": started - self._origin + seconds,
                                 "jobs": len(jobs), "stages": len(stages), **outline})


def hudi_batch_inputs(spark: SparkSession, params: dict[str, Any]) -> tuple[DataFrame, DataFrame | None, int]:
    """The timed batch (every record below `params["landing_dir"]`, its envelope kept as
    Parquet in `params["work_dir"]`), the priming batch taken from it (its first
    `params["priming_records"]`, default HUDI_PRIMING_RECORDS; none at 0), and its records."""
    envelope = spark.read.parquet(_kept_envelope(spark, params)[1])
    priming = int(params.get("priming_records", HUDI_PRIMING_RECORDS))
    return envelope, envelope.limit(priming) if priming else None, envelope.count()


def hudi_batch(spark: SparkSession, envelope: DataFrame, priming: DataFrame | None, contracts: dict, data: Path,
               variant: dict[str, Any]) -> dict[str, Any]:
    """The priming batch, then the timed one, on a fresh data dir with the variant's sink
    (without a priming batch, the timed one's first commit of each table creates it)."""
    from streaming.io.formats.hudi.sink import HudiSink
    from streaming.io.formats.hudi.timeline import LocalFiles, table_commits
    from streaming.io.layout import RAW_FOLDER, uri
    from streaming.io.formats.hudi.options import batch_marker

    shutil.rmtree(data, ignore_errors=True)
    stream_id = "hudi-lens"
    sink = HudiSink(uri(str(data.resolve()), RAW_FOLDER), "raw", contracts, sync_mode="none", stream_id=stream_id)
    concurrent = variant.get("concurrent")
    sink.capabilities = SinkCapabilities(writes_tables_concurrently=bool(concurrent),
                                         reads_changes_once=bool(variant.get("uncached")))
    pipeline = Pipeline(contracts, sink, QuarantineWriter(str(data)),
                        clock=lambda: datetime(2026, 11, 25, tzinfo=timezone.utc))
    if concurrent:
        # The pipeline's pool of raw-table writes, as wide as the variant says.
        pipeline._writers = ThreadPoolExecutor(max_workers=len(contracts) if concurrent == "all" else int(concurrent),
                                               thread_name_prefix="raw-write")
    # The variant's options from the priming batch on: the tables are created with them.
    timed = TimedHudiWriter(sink._writer, spark, variant)
    sink._writer = timed
    started = time.monotonic()
    if priming is not None:
        pipeline.process_batch(priming, 0)
    priming_seconds = time.monotonic() - started
    context = spark.sparkContext
    # The batch's own jobs (decode, counts, caches), apart from its commits' groups.
    group = f"hudi-lens-batch-{id(timed)}"
    context.setJobGroup(group, group)
    timed.start_timing()
    started = time.monotonic()
    try:
        report = pipeline.process_batch(envelope, 1)
    finally:
        seconds = time.monotonic() - started
        context.setLocalProperty("spark.jobGroup.id", None)
        if pipeline._writers is not None:
            pipeline._writers.shutdown()
    batch_jobs = len(context.statusTracker().getJobIdsForGroup(group))
    newest = {}
    for commit in timed.commits:
        history = table_commits(LocalFiles(), str(data / RAW_FOLDER / commit["table"]))
        newest[commit["table"]] = history[-1]
    return {
        "seconds": seconds,
        "priming_seconds": priming_seconds,
        "landed": report.landed,
        "quarantined": report.quarantined,
        "commits": timed.commits,
        # Seconds of the batch before its first commit started, and its Spark jobs outside its commits.
        "before_first_commit_seconds": min((commit["started"] for commit in timed.commits), default=seconds),
        "batch_jobs": batch_jobs,
        "files_written": {table: commit.files_written for table, commit in newest.items()},
        # A replay is recognised by the marker of the table's newest commit (streaming/io/formats/hudi/sink.py).
        "markers_kept": all(commit.batch_marker == batch_marker(stream_id, 1) for commit in newest.values()),
    }


def profile_hudi_writes(spark: SparkSession, params: dict[str, Any]) -> dict[str, Any]:
    """Params: `landing_dir`, `work_dir`, `rounds` (default 2), `variants` (names of
    HUDI_VARIANTS, default all), `contracts_dir`. Each round runs every variant once, in
    turn, the order reversed every other round; a variant's fastest batch counts."""
    work = Path(params["work_dir"])
    rounds = int(params.get("rounds", 2))
    names = list(params.get("variants") or HUDI_VARIANTS)
    contracts = load_contracts(params.get("contracts_dir"))
    envelope, priming, records = hudi_batch_inputs(spark, params)
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    failed: dict[str, str] = {}
    for number in range(rounds):
        for name in names if number % 2 == 0 else reversed(names):
            if name in failed:
                continue
            try:
                runs[name].append(hudi_batch(spark, envelope, priming, contracts, work / "hudi", HUDI_VARIANTS[name]))
            except Exception as exc:  # a variant Hudi refuses is a finding, not the end of the others
                failed[name] = f"{type(exc).__name__}: {str(exc)[:1500]}"
                runs.pop(name)
    shutil.rmtree(work / "hudi", ignore_errors=True)
    return {**hudi_figures(records, runs), "failed": failed}


def hudi_figures(records: int, runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Each variant's fastest batch against the reference's and against the sink as
    configured, and the reference's commits per raw table: the change-log INSERT and the
    current-state UPSERT as shares of the batch."""
    best = {name: min(batches, key=lambda batch: batch["seconds"]) for name, batches in runs.items()}
    landed = {name: batch["landed"] for name, batch in best.items()}
    if len({json.dumps(value, sort_keys=True) for value in landed.values()}) > 1:
        raise RuntimeError(f"the Hudi variants landed different rows: {landed}")
    reference = best.get(HUDI_REFERENCE)
    if reference and not any(reference["landed"].values()):
        raise RuntimeError("the Hudi lens's batch landed no rows: no commit to measure")
    tables: dict[str, dict[str, Any]] = {}
    if reference:
        for commit in reference["commits"]:
            kind = "insert" if commit["operation"] == "insert" else "upsert"
            table = commit["table"].removesuffix("_changes") if kind == "insert" else commit["table"]
            tables.setdefault(table, {})[kind] = {**commit, "share": commit["seconds"] / reference["seconds"]}
    return {
        "records": records,
        "rounds": len(next(iter(runs.values()), [])),
        "seconds": {name: [batch["seconds"] for batch in batches] for name, batches in runs.items()},
        "best_seconds": {name: batch["seconds"] for name, batch in best.items()},
        "over_reference": {name: batch["seconds"] / reference["seconds"] for name, batch in best.items()} if reference else {},
        "over_as_configured": ({name: batch["seconds"] / best[HUDI_AS_CONFIGURED]["seconds"] for name, batch in best.items()}
                               if HUDI_AS_CONFIGURED in best else {}),
        "before_first_commit_seconds": {name: batch.get("before_first_commit_seconds") for name, batch in best.items()},
        "batch_jobs": {name: batch.get("batch_jobs") for name, batch in best.items()},
        "hudi_share": sum(c["seconds"] for c in reference["commits"]) / reference["seconds"] if reference else None,
        "tables": tables,
        "landed": reference["landed"] if reference else next(iter(landed.values()), {}),
        "files_written": {name: batch["files_written"] for name, batch in best.items()},
        "markers_kept": {name: batch["markers_kept"] for name, batch in best.items()},
        "commits": {name: batch["commits"] for name, batch in best.items()},
    }
