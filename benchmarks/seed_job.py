"""The yardstick on Hudi (DESIGN.md decision 15): the source article's own job, `seed_job`.

`../shared/reference/glue-hudi-kinesis-realtime-datalake.txt` is the design this project
grew from. Its micro-batch function counts the batch, maps `dynamodb.NewImage.<attr>.S`
(and the envelope's fields) to columns, derives two partition columns from the key's
last two characters, and upserts the frame into one Hudi table per DynamoDB table. It
keeps no change log and no quarantine, and it orders nothing by event time: its
precombine field is the record key itself, so which of a key's changes a batch keeps
is up to Hudi's combine, and a later batch's older change overwrites a newer one.

Built here as faithfully as the same landing files allow, each choice named where it
departs from the article:

- The landing files hold both of AWS's record formats; the article reads only the
  Kinesis one (`tableName`), so the table name falls back to the one in
  `eventSourceARN` (otherwise a third of the records would go nowhere).
- The article maps string attributes only. Every declared top-level attribute of the
  table's contracts is mapped here: a scalar by its type code (`.S`, `.N`, `.BOOL`), any
  other as its DynamoDB JSON text.
- A REMOVE record has no NewImage, so its mapped key is null, which Hudi refuses; such
  records are left out (the article never meant to handle deletes).
- The schema is inferred once before the clock starts, as the `json-schema` copy does;
  the article's Glue source infers it per batch, which costs it more, not less.
- Hudi writes table version 6 (what Athena reads), and no catalog sync runs locally.
"""
from __future__ import annotations

import shutil
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import psutil
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from benchmarks.measure import tree_cpu_seconds
from streaming.contracts.loader import load_contracts
from streaming.contracts.model import AttributeSpec, TableContract
from streaming.io.formats.hudi.options import ATHENA_TABLE_VERSION, AUTO_UPGRADE_KEY, COMPLEX_KEY_GENERATOR, TABLE_VERSION_KEY
from streaming.io.layout import HUDI_TIMELINE_FOLDER

# The article's envelope columns, as its ApplyMapping names them.
ENVELOPE_COLUMNS = {"eventName": ("eventName",), "eventID": ("eventID",), "awsRegion": ("awsRegion",),
                    "eventSource": ("eventSource",), "recordFormat": ("recordFormat",),
                    "ApproximateCreationDateTime": ("dynamodb", "ApproximateCreationDateTime"),
                    "SizeBytes": ("dynamodb", "SizeBytes")}
SCALAR_CODES = ("S", "N", "BOOL")
PARTITION_COLUMNS = ("partitionkey", "partitionkey2")
_TABLE_FROM_ARN = r"table/([^/]+)/stream"


def seed_hudi_options(table: str, path: str, key_columns: list[str]) -> dict[str, str]:
    """The article's `combinedConf` for one DynamoDB table: its record key, precombine
    field (the key itself), hive-style partitions on the two derived columns through the
    complex key generator, upsert with 68 shuffle partitions, KEEP_LATEST_COMMITS with 2
    retained. Its Hive sync settings are left out (no metastore here), and table version
    6 is pinned as for the project's own tables."""
    return {
        "hoodie.table.name": table,
        "hoodie.datasource.write.table.name": table,
        "hoodie.datasource.write.hive_style_partitioning": "true",
        "hoodie.datasource.write.precombine.field": key_columns[0],
        "hoodie.datasource.write.recordkey.field": ",".join(key_columns),
        "hoodie.consistency.check.enabled": "true",
        "hoodie.datasource.write.keygenerator.class": COMPLEX_KEY_GENERATOR,
        "hoodie.datasource.write.partitionpath.field": ",".join(PARTITION_COLUMNS),
        "hoodie.upsert.shuffle.parallelism": "68",
        "hoodie.datasource.write.operation": "upsert",
        "hoodie.clean.policy": "KEEP_LATEST_COMMITS",
        "hoodie.clean.commits.retained": "2",
        TABLE_VERSION_KEY: ATHENA_TABLE_VERSION,
        AUTO_UPGRADE_KEY: "false",
        "path": path,
    }


def tables_to_attributes(contracts: dict[str, TableContract]) -> dict[str, tuple[list[str], list[AttributeSpec]]]:
    """DynamoDB table -> (its key columns, every top-level attribute its contracts declare),
    one Hudi table each, as the article writes one per DynamoDB table."""
    keys: dict[str, list[str]] = {}
    attributes: dict[str, dict[str, AttributeSpec]] = defaultdict(dict)
    for contract in contracts.values():
        keys.setdefault(contract.table, list(contract.key_columns))
        for spec in contract.attributes:
            attributes[contract.table].setdefault(spec.name, spec)
    return {table: (keys[table], list(attributes[table].values())) for table in keys}


def _field(frame: DataFrame, path: tuple[str, ...]) -> Column | None:
    """The nested field `path` of the frame, or None where the inferred schema lacks it."""
    data_type = frame.schema
    column: Column | None = None
    for name in path:
        names = getattr(data_type, "names", None)
        if not names or name not in names:
            return None
        column = F.col(f"`{name}`") if column is None else column.getField(name)
        data_type = data_type[name].dataType
    return column


def mapped_table(frame: DataFrame, key_columns: list[str], attributes: list[AttributeSpec]) -> DataFrame:
    """One table's records as the article's ApplyMapping gives them, plus its partition columns."""
    selected = []
    for column, path in ENVELOPE_COLUMNS.items():
        value = _field(frame, path)
        selected.append((value if value is not None else F.lit(None)).alias(column))
    for spec in attributes:
        code = spec.type if spec.type in SCALAR_CODES else None
        descriptor = _field(frame, ("dynamodb", "NewImage", spec.name))
        if descriptor is None:
            value = F.lit(None).cast("string")
        elif code:
            value = _field(frame, ("dynamodb", "NewImage", spec.name, code))
            value = value if value is not None else F.lit(None).cast("string")
        else:
            value = F.to_json(descriptor)
        selected.append(value.alias(spec.column))
    mapped = frame.select(*selected).where(F.col(f"`{key_columns[0]}`").isNotNull())
    key = F.col(f"`{key_columns[0]}`").cast("string")
    return mapped.withColumn(PARTITION_COLUMNS[0], key.substr(-1, 1)).withColumn(PARTITION_COLUMNS[1], key.substr(-2, 1))


def completed_commits(table_dir: Path) -> int:
    """Completed commits on a table version 6 timeline (`.hoodie/<instant>.commit`)."""
    return len(list((table_dir / HUDI_TIMELINE_FOLDER).glob("*.commit")))


def run_seed_job(spark: SparkSession, params: dict[str, Any]) -> dict[str, Any]:
    """Params: `landing_dir`, `out_dir`, `contracts_dir` (default: packaged),
    `max_files_per_trigger`. The article's job as a Structured Streaming query with an
    availableNow trigger; returns its seconds, CPU seconds, records, batches and commits."""
    landing, out = params["landing_dir"], Path(params["out_dir"])
    tables = tables_to_attributes(load_contracts(params.get("contracts_dir")))
    schema = (spark.read.option("recursiveFileLookup", "true").option("pathGlobFilter", "*.jsonl")
              .json(landing).schema)
    records = {"in": 0, "batches": 0}

    def process_batch(batch: DataFrame, batch_id: int) -> None:
        count = batch.count()  # the article's `if data_frame.count() > 0`
        records["in"] += count
        records["batches"] += 1
        if not count:
            return
        named = batch.withColumn("_seed_table", F.coalesce(F.col("tableName"),
                                                           F.regexp_extract("eventSourceARN", _TABLE_FROM_ARN, 1)))
        for table, (key_columns, attributes) in tables.items():
            rows = mapped_table(named.where(F.col("_seed_table") == table), key_columns, attributes)
            (rows.write.format("hudi").options(**seed_hudi_options(table, str(out / table), key_columns))
             .mode("append").save())

    driver = psutil.Process()
    cpu_before = tree_cpu_seconds(driver)
    started = time.monotonic()
    reader = (spark.readStream.schema(schema).option("recursiveFileLookup", "true").option("pathGlobFilter", "*.jsonl")
              .option("maxFileAge", "3650d"))
    if params.get("max_files_per_trigger"):
        reader = reader.option("maxFilesPerTrigger", int(params["max_files_per_trigger"]))
    query = (reader.json(landing).writeStream.foreachBatch(process_batch)
             .option("checkpointLocation", str(out / "_checkpoint")).trigger(availableNow=True).start())
    query.awaitTermination()
    seconds = time.monotonic() - started
    return {
        "seconds": seconds,
        "cpu_seconds": tree_cpu_seconds(driver) - cpu_before,
        "records_in": records["in"],
        "batches": records["batches"],
        "commits": {table: completed_commits(out / table) for table in tables if (out / table).is_dir()},
    }


def _keyed(table_dir: Path, key_columns: list[str], event_column: str, deleted_column: str | None = None
           ) -> dict[tuple, tuple[str, bool]]:
    """Each key's (event id, deleted) in the table's snapshot, read once; not deleted
    where the table has no `deleted_column`. Empty before the table's first commit."""
    from lakehouse_dbt.hudi_raw import read_hudi_snapshot

    table = read_hudi_snapshot(str(table_dir)) if (table_dir / HUDI_TIMELINE_FOLDER).is_dir() else None
    if table is None:
        return {}
    rows = table.select([*key_columns, event_column, *([deleted_column] if deleted_column else [])]).to_pylist()
    return {tuple(row[name] for name in key_columns): (row[event_column], bool(deleted_column and row[deleted_column]))
            for row in rows}


def compare_with_ours(our_raw_dir: Path, seed_out: Path, contracts_dir: str | None) -> dict[str, dict[str, int]]:
    """Per DynamoDB table, the article's rows against our current state (which the kill
    drill and the sink differential hold exact): keys both hold with the same last event,
    keys whose row is an older change (`stale`), keys ours holds deleted and the article's
    job still holds (`deleted_live`), and keys it lacks (`missing`)."""
    contracts = load_contracts(contracts_dir)
    figures: dict[str, dict[str, int]] = {}
    for table, (key_columns, _) in tables_to_attributes(contracts).items():
        ours: dict[tuple, tuple[str, bool]] = {}
        for contract in contracts.values():
            if contract.table == table:
                # An item that moved entity is a tombstone in one raw table and live in another.
                for key, row in _keyed(our_raw_dir / contract.raw_table, key_columns, "_event_id", "_is_deleted").items():
                    if key not in ours or ours[key][1]:
                        ours[key] = row
        ours_live = {key: event for key, (event, deleted) in ours.items() if not deleted}
        theirs = {key: event for key, (event, _) in _keyed(seed_out / table, key_columns, "eventID").items()}
        figures[table] = {
            "ours": len(ours_live),
            "theirs": len(theirs),
            "same": sum(1 for key, event in theirs.items() if ours_live.get(key) == event),
            "stale": sum(1 for key, event in theirs.items() if key in ours_live and ours_live[key] != event),
            "deleted_live": sum(1 for key in theirs if key in ours and key not in ours_live),
            "missing": sum(1 for key in ours_live if key not in theirs),
        }
    return figures


def _our_commits(raw_dir: Path) -> int:
    return sum(completed_commits(table) for table in raw_dir.iterdir() if table.is_dir())


def measure_seed(base: Any, records: int, table_count: int, work: Path) -> dict[str, Any]:
    """Our job on Hudi, our job on Parquet and the article's job over the same landing
    files (`records` of `base` for `table_count` raw tables, as the hudi-tables section
    makes them), one fresh process each, in that order; the article's job takes as many
    files a batch as ours did. Returns each run's figures and the rows compared."""
    from benchmarks.hudi_tables import contracts_folder, landing_for
    from benchmarks.measure import run_case, stream_run
    from streaming.io.layout import DataLayout

    folder = work / f"seed-{records}-{table_count}"
    landing = landing_for(base, records, table_count, folder / "landing-set")
    contracts = contracts_folder(table_count, folder / "contracts")
    try:
        runs = {sink: stream_run(landing, folder / f"ours-{sink}", "local[2]", label=f"seed-ours-{sink}",
                                 contracts_dir=contracts, sink=sink) for sink in ("hudi", "parquet")}
        seed = run_case("seed_job", {"label": "seed-job", "landing_dir": str(landing.root),
                                     "out_dir": str(folder / "seed"), "contracts_dir": str(contracts),
                                     "max_files_per_trigger": runs["hudi"].result["files_per_trigger"]})
        if seed.result["records_in"] != landing.records:
            raise RuntimeError(f"the article's job read {seed.result['records_in']} records, "
                               f"the landing set holds {landing.records}")
        our_raw = DataLayout(folder / "ours-hudi").raw
        rows = compare_with_ours(our_raw, folder / "seed", str(contracts))

        def figures(run: Any, batches: int, commits: int | None) -> dict[str, Any]:
            return {"seconds": run.result["seconds"], "wall_seconds": run.wall_seconds,
                    "events_per_s": landing.records / run.result["seconds"],
                    "cpu_s_per_1000_events": 1000 * run.result["cpu_seconds"] / landing.records,
                    "batches": batches, "commits": commits,
                    "commits_per_batch": commits / batches if commits is not None and batches else None,
                    "peak_pss_bytes": run.peak_pss_bytes}

        ours_hudi, ours_parquet = runs["hudi"], runs["parquet"]
        result = {
            "records": landing.records, "raw_tables": table_count,
            "ours_hudi": {**figures(ours_hudi, len(ours_hudi.result["batch_seconds"]), _our_commits(our_raw)),
                          "batch_seconds": ours_hudi.result["batch_seconds"]},
            "ours_parquet": {**figures(ours_parquet, len(ours_parquet.result["batch_seconds"]), None),
                             "batch_seconds": ours_parquet.result["batch_seconds"]},
            "seed_job": figures(seed, seed.result["batches"], sum(seed.result["commits"].values())),
            "rows": rows,
        }
        result["ours_over_seed"] = result["ours_hudi"]["events_per_s"] / result["seed_job"]["events_per_s"]
        result["hudi_batch_over_parquet_batch"] = (sum(ours_hudi.result["batch_seconds"])
                                                   / sum(ours_parquet.result["batch_seconds"]))
        result["hudi_cpu_over_parquet_cpu"] = (result["ours_hudi"]["cpu_s_per_1000_events"]
                                               / result["ours_parquet"]["cpu_s_per_1000_events"])
        return result
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def seed_line(row: dict[str, Any]) -> str:
    ours, theirs = row["ours_hudi"], row["seed_job"]
    differ = sum(figures["stale"] + figures["deleted_live"] + figures["missing"] for figures in row["rows"].values())
    return (f"seed       {row['records']:>8,} records {row['raw_tables']:>2} raw tables: ours on hudi "
            f"{ours['events_per_s']:,.0f} ev/s ({ours['cpu_s_per_1000_events']:.2f} CPU s/1k, "
            f"{ours['commits_per_batch']:.0f} commits a batch), the article's job {theirs['events_per_s']:,.0f} ev/s "
            f"({theirs['cpu_s_per_1000_events']:.2f} CPU s/1k, {theirs['commits_per_batch']:.0f} commits a batch): "
            f"ours/article {row['ours_over_seed']:.2f} x; our hudi/parquet batch {row['hudi_batch_over_parquet_batch']:.2f} x, "
            f"CPU {row['hudi_cpu_over_parquet_cpu']:.2f} x; the article's rows differ from the current state at {differ:,} keys")
