"""What one micro-batch costs on the Hudi sink against the raw tables it writes (issue 29).

Each configuration (records a batch x raw tables) is one batch through `process_batch`
on the Hudi sink as the job configures it (two raw tables' commits at once), into
tables a small priming batch has created first: the Hudi lens's batch and timed writer
(benchmarks/stages.py, `hudi_batch`). Every raw table that gets rows costs two Hudi
commits, the change log's INSERT and the current state's UPSERT. The table counts:

- 6: the packaged contracts: customers, orders and the single-table `app`, routed to
  app_tenants, app_users, app_invoices and app_unrouted;
- 2: the customers and orders contracts alone; the app records (about a quarter) go to
  the quarantine as unknown_table instead;
- 12: the packaged contracts and a renamed copy of each (`customers_b`, `orders_b`,
  `app_b` routed to `app_tenants_b`, ...), validated by the contract loader; half of the
  batch's records are the packaged tables' and the other half the same records renamed
  to the copies' tables, so that the batch holds as many records as at 2 and 6 tables.
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import yaml
from pyspark.sql import SparkSession

from benchmarks.datasets import LandingSet, prefix_set, renamed_copy_set
from benchmarks.measure import run_case
from streaming.contracts.loader import SAMPLE_CONTRACTS_DIR, load_contracts

TABLE_COUNTS = (2, 6, 12)
# The copies' names: each table name and raw table name of the packaged contracts with this suffix.
COPY_SUFFIX = "_b"
_TWO_TABLES = ("customers.yml", "orders.yml")


def renamed_contract(document: dict[str, Any], suffix: str = COPY_SUFFIX) -> dict[str, Any]:
    """The contract document `document` for a DynamoDB table named `<table><suffix>`, each
    raw table it names (its own, its entities', its unrouted table) suffixed alike."""
    renamed = {**document, "table": document["table"] + suffix}
    for key in ("raw_table", "unrouted_table"):
        if key in document:
            renamed[key] = document[key] + suffix
    if "entities" in document:
        renamed["entities"] = {name: {**entity, **({"raw_table": entity["raw_table"] + suffix}
                                                   if "raw_table" in entity else {})}
                               for name, entity in document["entities"].items()}
    return renamed


def _packaged_documents() -> dict[str, dict[str, Any]]:
    return {path.name: yaml.safe_load(path.read_text(encoding="utf-8"))
            for path in sorted(SAMPLE_CONTRACTS_DIR.glob("*.yml"))}


def copy_renames() -> dict[str, str]:
    """DynamoDB table name -> its copy's, for every packaged contract."""
    return {document["table"]: renamed_contract(document)["table"] for document in _packaged_documents().values()}


def contracts_folder(table_count: int, folder: Path) -> Path:
    """A folder of contract files that lands a batch of the generated tables in
    `table_count` raw tables (2, 6 or 12), checked by loading it as the job does."""
    if table_count not in TABLE_COUNTS:
        raise ValueError(f"the Hudi tables bench takes {', '.join(map(str, TABLE_COUNTS))} raw tables, not {table_count}")
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for name, document in _packaged_documents().items():
        if table_count == 2 and name not in _TWO_TABLES:
            continue
        shutil.copyfile(SAMPLE_CONTRACTS_DIR / name, folder / name)
        if table_count == 12:
            copy = folder / f"{Path(name).stem}{COPY_SUFFIX}.yml"
            copy.write_text(yaml.safe_dump(renamed_contract(document), sort_keys=False), encoding="utf-8")
    raw_tables = sorted(load_contracts(folder))
    if len(raw_tables) != table_count:
        raise RuntimeError(f"{folder}: the contracts name {len(raw_tables)} raw tables, not {table_count}: {raw_tables}")
    return folder


def landing_for(base: LandingSet, records: int, table_count: int, target_root: Path) -> LandingSet:
    """About `records` landing records of `base` for `table_count` raw tables: a prefix of
    it, or at 12 tables a prefix of half as many with each record's renamed copy beside it."""
    if table_count != 12:
        return prefix_set(base, records, target_root)
    half = prefix_set(base, records // 2, target_root.with_name(target_root.name + "-originals"))
    try:
        return renamed_copy_set(half, copy_renames(), target_root)
    finally:
        shutil.rmtree(half.root, ignore_errors=True)


def batch_figures(batch: dict[str, Any]) -> dict[str, Any]:
    """One timed batch of `hudi_batch` as this bench reports it: its wall time, its Hudi
    commits' sum and span (first start to last end: less than the sum when they overlapped)
    and their number, seconds per commit, and the raw tables that got rows."""
    commits = batch["commits"]
    commit_seconds = sum(commit["seconds"] for commit in commits)
    span = max((c["ended"] for c in commits), default=0.0) - min((c["started"] for c in commits), default=0.0)
    return {
        "seconds": batch["seconds"],
        "priming_seconds": batch["priming_seconds"],
        "commits": len(commits),
        "commit_seconds": commit_seconds,
        "commit_span_seconds": span,
        "seconds_per_commit": commit_seconds / len(commits) if commits else None,
        "batch_seconds_per_commit": batch["seconds"] / len(commits) if commits else None,
        "raw_tables_landed": sum(1 for rows in batch["landed"].values() if rows),
        "landed": batch["landed"],
        "quarantined": batch["quarantined"],
        "markers_kept": batch["markers_kept"],
        "commit_list": commits,
    }


def measure_table_count(spark: SparkSession, params: dict[str, Any]) -> dict[str, Any]:
    """Params: `landing_dir`, `work_dir`, `contracts_dir`, `priming_records` (default
    HUDI_PRIMING_RECORDS; 0: no priming batch). The priming batch, then the timed one, on
    the Hudi sink as configured; the figures of `batch_figures`."""
    from benchmarks.stages import HUDI_VARIANTS, hudi_batch, hudi_batch_inputs

    contracts = load_contracts(params["contracts_dir"])
    envelope, priming, records = hudi_batch_inputs(spark, params)
    data = Path(params["work_dir"]) / "hudi"
    batch = hudi_batch(spark, envelope, priming, contracts, data, HUDI_VARIANTS["as configured"])
    shutil.rmtree(data, ignore_errors=True)
    return {"records": records, "raw_tables": len(contracts), **batch_figures(batch)}


def measure_configuration(base: LandingSet, records: int, table_count: int, work: Path) -> dict[str, Any]:
    """One configuration in a fresh process (its own JVM): its landing set and contracts
    made here, its figures and the process tree's peak memory returned."""
    folder = work / f"hudi-tables-{records}-{table_count}"
    landing = landing_for(base, records, table_count, folder / "landing-set")
    try:
        run = run_case("hudi_tables", {"label": f"hudi-tables-{records}-{table_count}", "landing_dir": str(landing.root),
                                       "work_dir": str(folder / "work"),
                                       "contracts_dir": str(contracts_folder(table_count, folder / "contracts"))})
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if run.result["records"] != landing.records:
        raise RuntimeError(f"the batch read {run.result['records']} records, the landing set holds {landing.records}")
    return {"size": records, **run.result, "peak_rss_bytes": run.peak_rss_bytes, "case_wall_seconds": run.wall_seconds}
