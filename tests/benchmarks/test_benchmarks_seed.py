"""The yardstick on Hudi, `seed_job` (benchmarks/seed_job.py): the source article's job.

Its Hudi options are read from the article itself (../shared/reference/), so the peer
cannot drift from what a reader of the article would write. One Hudi check runs the
job over generated files and reads its tables back through hudi-rs.
"""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from benchmarks.seed_job import (
    PARTITION_COLUMNS,
    compare_with_ours,
    run_seed_job,
    seed_hudi_options,
    tables_to_attributes,
)
from streaming.contracts.loader import load_contracts

ARTICLE = Path(__file__).resolve().parents[3] / "shared" / "reference" / "glue-hudi-kinesis-realtime-datalake.txt"
# The article's options this local run leaves out: its Hive sync (no metastore here) and
# what names its own S3 table; `className` selects the Glue connector.
NOT_CARRIED_OVER = {"className", "path", "hoodie.table.name", "hoodie.datasource.hive_sync.use_jdbc",
                    "hoodie.datasource.hive_sync.database", "hoodie.datasource.hive_sync.table",
                    "hoodie.datasource.hive_sync.enable", "hoodie.datasource.hive_sync.partition_extractor_class",
                    "hoodie.datasource.hive_sync.partition_fields"}
# Hudi 1.0 renamed the cleaner's keys (HoodieCleanConfig keeps the old ones as alternatives).
RENAMED = {"hoodie.cleaner.policy": "hoodie.clean.policy", "hoodie.cleaner.commits.retained": "hoodie.clean.commits.retained"}


def _article_config(name: str) -> dict[str, object]:
    """The literal entries of the dictionary the article's script assigns to `name` (its
    `path` is an expression, and is not carried over)."""
    line = next(line for line in ARTICLE.read_text(encoding="utf-8").splitlines() if line.startswith(f"{name} = {{"))
    node = ast.parse(line).body[0].value
    return {ast.literal_eval(key): ast.literal_eval(value) for key, value in zip(node.keys, node.values, strict=True)
            if isinstance(value, ast.Constant)}


@pytest.mark.skipif(not ARTICLE.is_file(), reason=f"the source article is not at {ARTICLE} (shared/ beside the checkout)")
def test_the_seed_job_writes_with_the_article_s_own_hudi_options() -> None:
    article = {**_article_config("commonConfig"), **_article_config("partitionDataConfig"),
               **_article_config("incrementalConfig")}
    ours = seed_hudi_options("customers", "/tmp/x", ["id"])
    for key, value in article.items():
        if key in NOT_CARRIED_OVER:
            continue
        expected = re.sub(r"\s*,\s*", ",", str(value).strip()).replace("partitionkey,partitionkey2", ",".join(PARTITION_COLUMNS))
        assert ours[RENAMED.get(key, key)] == expected, key
    # The article's precombine field is its record key: the flaw the yardstick keeps.
    assert ours["hoodie.datasource.write.precombine.field"] == ours["hoodie.datasource.write.recordkey.field"] == "id"
    # With a sort key, the record key is the whole key and the precombine field its first part.
    composite = seed_hudi_options("customers", "/tmp/x", ["id", "cust_name"])
    assert composite["hoodie.datasource.write.recordkey.field"] == "id,cust_name"
    assert composite["hoodie.datasource.write.precombine.field"] == "id"
    assert ours["hoodie.write.table.version"] == "6"


def test_the_seed_job_writes_one_table_per_dynamodb_table() -> None:
    tables = tables_to_attributes(load_contracts())
    assert sorted(tables) == ["app", "customers", "orders"]
    keys, attributes = tables["app"]
    assert keys == ["pk", "sk"]
    # The single-table design's entities' attributes, each once.
    names = [spec.name for spec in attributes]
    assert len(names) == len(set(names)) and {"pk", "sk", "email"} <= set(names)


@pytest.mark.hudi
def test_the_seed_job_upserts_each_table_s_new_images_into_hudi(hudi_spark, tmp_path: Path) -> None:
    from benchmarks.datasets import generate_landing
    from benchmarks.hudi_tables import contracts_folder

    landing = generate_landing(tmp_path / "landing", 200, records_per_file=100, seed=5)
    contracts = contracts_folder(2, tmp_path / "contracts")
    result = run_seed_job(hudi_spark, {"landing_dir": str(landing.root), "out_dir": str(tmp_path / "seed"),
                                       "contracts_dir": str(contracts)})

    assert result["records_in"] == landing.records
    assert result["batches"] == 1 and result["commits"] == {"customers": 1, "orders": 1}
    # Each key whose NewImage arrived holds one of its own INSERT or MODIFY events; keys
    # whose only records were REMOVEs are absent (a REMOVE carries no NewImage).
    events: dict[tuple[str, str], set[str]] = {}
    for file in landing.files:
        for line in file.path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            table = record.get("tableName") or re.search(r"table/([^/]+)/stream", record.get("eventSourceARN", ""))
            table = table if isinstance(table, str) or table is None else table.group(1)
            image = (record.get("dynamodb") or {}).get("NewImage")
            if table == "customers" and isinstance(image, dict) and {"id", "custName"} <= set(image):
                key = (image["id"].get("S"), image["custName"].get("S"))
                events.setdefault(key, set()).add(record["eventID"])
    from lakehouse_dbt.hudi_raw import read_hudi_snapshot

    rows = read_hudi_snapshot(str(tmp_path / "seed" / "customers")).to_pylist()
    assert rows and len(rows) == len({(row["id"], row["cust_name"]) for row in rows})
    for row in rows:
        assert row["eventID"] in events[(row["id"], row["cust_name"])]
        assert (row["partitionkey"], row["partitionkey2"]) == (row["id"][-1], row["id"][-2])
    # Compared with itself as "ours" would need our tables; with none, every key is missing from ours.
    figures = compare_with_ours(tmp_path / "no-raw", tmp_path / "seed", str(contracts))
    assert figures["customers"]["ours"] == 0 and figures["customers"]["theirs"] == len(rows)
