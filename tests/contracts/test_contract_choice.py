"""Which contracts the commands read (streaming/contracts/loader.py, choose_contracts): a
user's own in streaming/contracts/ alone, else the demo's sample tables, said in one line;
a folder named by --contracts-dir or $LAKEHOUSE_CONTRACTS_DIR wins. The user's folder is
the package's, so these tests point the loader at a temporary one instead of writing there."""
from __future__ import annotations

import fnmatch
import json
import tomllib
import zipfile
from pathlib import Path

import pytest
from cli_processes import REPO, fresh_python

from deploy.config import ConfigError, deployed_contracts, parse_config
from streaming.cli import main
from streaming.contracts import loader
from streaming.contracts.loader import (
    CONTRACTS_DIR_ENV,
    OWN_CONTRACTS_DIR,
    SAMPLE_CONTRACTS_DIR,
    choose_contracts,
    contract_files,
    load_contracts,
)
from streaming.io.layout import DataLayout
from streaming.operations.demo import generate, run_demo
from streaming.operations.docs_site import generate_docs
from streaming.operations.status import status
from streaming.operations.stream import stream
from streaming.pipeline.reasons import UNKNOWN_TABLE
from streaming.runtime.dbt_runner import with_samples_var
from streaming.runtime.package_zip import build_package_zip
from streaming.runtime.startup import load_checked_contracts

SAMPLE_RAW_TABLES = ["app_invoices", "app_tenants", "app_unrouted", "app_users", "customers", "orders"]
SHOP_CONTRACT = """\
table: shop
raw_table: shop_orders
key:
  partition_key: order_id
attributes:
  order_id: {column: order_id, type: S}
  total: {column: total, type: N, cast: "decimal(12,2)"}
partitioning: {column: order_bucket, expression: "substring(order_id, -1, 1)"}
"""
FALLBACK = ("no contracts of your own in streaming/contracts/: using the sample tables app, customers, orders "
            "(lakehouse contract infer adds yours; docs/contracts.md)")


@pytest.fixture
def own_contracts(tmp_path, monkeypatch) -> Path:
    """The user's contracts folder, empty: a temporary stand-in for streaming/contracts/."""
    folder = tmp_path / "own-contracts"
    folder.mkdir()
    monkeypatch.setattr(loader, "own_contracts_folder", lambda: folder)
    monkeypatch.delenv(CONTRACTS_DIR_ENV, raising=False)
    return folder


def test_the_repository_ships_the_samples_beside_the_users_folder_not_in_it():
    # `lakehouse contract infer --out streaming/contracts/<table>.yml` writes there (docs/contracts.md).
    assert contract_files(OWN_CONTRACTS_DIR) == []
    assert [path.name for path in contract_files(SAMPLE_CONTRACTS_DIR)] == ["app.yml", "customers.yml", "orders.yml"]


def test_the_wheel_ships_every_sample_contract():
    package_data = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"][
        "package-data"]
    samples_package = REPO / "streaming" / "samples"
    shipped = [path for path in contract_files(SAMPLE_CONTRACTS_DIR)
               if any(fnmatch.fnmatch(path.relative_to(samples_package).as_posix(), pattern)
                      for pattern in package_data["streaming.samples"])]
    assert shipped == contract_files(SAMPLE_CONTRACTS_DIR)


def test_a_users_own_contract_is_read_alone(own_contracts):
    (own_contracts / "shop.yml").write_text(SHOP_CONTRACT, encoding="utf-8")

    chosen = choose_contracts()

    assert (chosen.folder, chosen.is_samples, chosen.fallback_notice()) == (own_contracts, False, None)
    assert sorted(load_contracts()) == ["shop_orders"]
    said: list[str] = []
    assert sorted(load_checked_contracts(report=said.append)) == ["shop_orders"]
    assert said == []


def test_without_contracts_of_ones_own_the_samples_are_read_and_said_once(own_contracts):
    chosen = choose_contracts()

    assert chosen.is_samples and not chosen.named
    assert sorted(load_contracts()) == SAMPLE_RAW_TABLES
    said: list[str] = []
    assert sorted(load_checked_contracts(report=said.append)) == SAMPLE_RAW_TABLES
    assert said == [FALLBACK]


def test_a_named_folder_wins_and_naming_the_samples_is_no_fallback(own_contracts, tmp_path, monkeypatch):
    (own_contracts / "shop.yml").write_text(SHOP_CONTRACT, encoding="utf-8")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "shop.yml").write_text(SHOP_CONTRACT.replace("shop_orders", "shop_sales"), encoding="utf-8")

    assert sorted(load_contracts(elsewhere)) == ["shop_sales"]
    monkeypatch.setenv(CONTRACTS_DIR_ENV, str(elsewhere))
    assert sorted(load_contracts()) == ["shop_sales"]
    named_samples = choose_contracts(SAMPLE_CONTRACTS_DIR)
    assert named_samples.is_samples and named_samples.fallback_notice() is None


def test_status_counts_the_users_tables_alone_or_says_it_counts_the_samples(own_contracts, tmp_path):
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    fallen_back = status(DataLayout(data_dir))
    assert sorted(fallen_back.change_rows) == SAMPLE_RAW_TABLES
    assert fallen_back.lines()[0] == FALLBACK

    (own_contracts / "shop.yml").write_text(SHOP_CONTRACT, encoding="utf-8")
    own = status(DataLayout(data_dir))

    assert list(own.change_rows) == ["shop_orders"]
    assert not any("sample tables" in line for line in own.lines())


def test_the_cli_status_prints_the_fallback_line_once(own_contracts, tmp_path, capsys):
    (tmp_path / "data").mkdir()

    assert main(["status", "--data-dir", str(tmp_path / "data")]) == 0

    assert capsys.readouterr().out.count("sample tables") == 1


def test_dbt_builds_the_sample_models_only_for_the_samples(own_contracts):
    said: list[str] = []
    assert with_samples_var(["build"], choose_contracts(), said.append) == [
        "build", "--vars", '{"lakehouse_samples": true}']
    assert said == [FALLBACK]

    (own_contracts / "shop.yml").write_text(SHOP_CONTRACT, encoding="utf-8")
    said.clear()
    assert with_samples_var(["build", "--vars", "{pii_mode: mask}"], choose_contracts(), said.append) == [
        "build", "--vars", '{"lakehouse_samples": false, "pii_mode": "mask"}']
    assert said == []
    # A command that sets the var itself keeps it.
    assert with_samples_var(["build", "--vars", "{lakehouse_samples: true}"], choose_contracts(), said.append) == [
        "build", "--vars", '{"lakehouse_samples": true}']


def _zipped_contracts(archive: Path) -> list[str]:
    """The contract files in the zip: YAML files of the user's or the samples' folder."""
    return sorted(name for name in zipfile.ZipFile(archive).namelist()
                  if name.startswith(("streaming/contracts/", "streaming/samples/contracts/"))
                  and name.endswith((".yml", ".yaml")))


def _raw_tables_read_from(archive: Path) -> list[str]:
    """The raw tables the Glue job's default contracts name, read from the zip alone."""
    probe = (f"import sys; sys.path.insert(0, {str(archive)!r}); "
             "from streaming.contracts.loader import load_contracts; print(' '.join(sorted(load_contracts())))")
    completed = fresh_python(probe)
    assert completed.returncode == 0, completed.stderr
    return completed.stdout.split()


def test_the_glue_jobs_zip_holds_the_users_contracts_alone(own_contracts, tmp_path):
    (own_contracts / "shop.yml").write_text(SHOP_CONTRACT, encoding="utf-8")

    archive = build_package_zip(tmp_path / "job" / "streaming.zip", contracts=choose_contracts())

    assert _zipped_contracts(archive) == ["streaming/contracts/shop.yml"]
    assert _raw_tables_read_from(archive) == ["shop_orders"]


def test_the_glue_jobs_zip_holds_the_samples_when_they_were_fallen_back_on(own_contracts, tmp_path):
    archive = build_package_zip(tmp_path / "job" / "streaming.zip", contracts=choose_contracts())

    assert _zipped_contracts(archive) == [f"streaming/contracts/{name}" for name in ("app.yml", "customers.yml",
                                                                                       "orders.yml")]
    assert _raw_tables_read_from(archive) == SAMPLE_RAW_TABLES


def test_a_deploy_of_the_samples_needs_a_config_naming_them_and_warns(own_contracts):
    said: list[str] = []
    samples_config = parse_config({"dynamodb_tables": ["customers", "orders"]})

    assert deployed_contracts(samples_config, said.append).is_samples
    assert said == [f"WARNING: the job streams the demo's tables: {FALLBACK}"]
    with pytest.raises(ConfigError, match="no contract in streaming/contracts/ for shop"):
        deployed_contracts(parse_config({"dynamodb_tables": ["shop"]}), said.append)

    (own_contracts / "shop.yml").write_text(SHOP_CONTRACT, encoding="utf-8")
    said.clear()
    assert not deployed_contracts(parse_config({"dynamodb_tables": ["shop"]}), said.append).is_samples
    assert said == []
    with pytest.raises(ConfigError, match="no contract in streaming/contracts/ for customers, orders"):
        deployed_contracts(samples_config, said.append)


def test_the_demo_streams_the_samples_and_the_users_stream_its_own_table_alone(spark, own_contracts, tmp_path):
    # The user's own contract: their `customers` table, shaped as the sample's.
    (own_contracts / "customers.yml").write_bytes((SAMPLE_CONTRACTS_DIR / "customers.yml").read_bytes())
    demo_printed: list[str] = []

    demo = run_demo(DataLayout(tmp_path / "demo"), seed=5, customers=3, tenants=0, record_format="streams",
                    sink="parquet", build_marts=False, spark=spark, out=demo_printed.append)

    assert sorted(demo.status.change_rows) == SAMPLE_RAW_TABLES
    assert demo.status.quarantine_by_reason == demo.generation.malformed_by_reason, "no sample table unknown"
    assert not [line for line in demo_printed if "sample tables" in line], "the demo names the samples itself"

    # The same sample changes streamed by the user's lakehouse: only their table lands.
    layout = DataLayout(tmp_path / "own")
    generation = generate(layout, seed=5, customers=3, tenants=0, record_format="streams", out=lambda _: None)
    stream_printed: list[str] = []
    stream(layout, sink="parquet", spark=spark, out=stream_printed.append)

    report = status(layout)
    assert list(report.change_rows) == ["customers"]
    assert report.change_rows["customers"] == sum(generation.events["customers"].values())
    assert report.quarantine_by_reason[UNKNOWN_TABLE] > 0, "the orders' changes have no contract of the user's"
    assert not [line for line in stream_printed + report.lines() if "sample tables" in line]


@pytest.mark.dbt
def test_lakehouse_dbt_lists_the_sample_models_only_while_the_samples_are_the_contracts(
    own_contracts, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    data_dir = tmp_path / "lake"
    data_dir.mkdir()
    list_models = ["dbt", "ls", "--resource-type", "model", "--output", "name", "--quiet",
                   "--data-dir", str(data_dir)]

    assert main(list_models) == 0
    fallen_back = capsys.readouterr().out.splitlines()
    (own_contracts / "shop.yml").write_text(SHOP_CONTRACT, encoding="utf-8")
    assert main(list_models) == 0
    own = capsys.readouterr().out.splitlines()

    assert fallen_back[0] == FALLBACK and {"stg_dynamodb__customers", "stg_dynamodb__app_users"} <= set(fallen_back)
    assert FALLBACK not in own and not {"stg_dynamodb__customers", "stg_dynamodb__app_users"} & set(own)


@pytest.mark.dbt
def test_the_docs_site_of_a_lakehouse_of_ones_own_leaves_the_sample_models_out(own_contracts, tmp_path):
    (own_contracts / "shop.yml").write_text(SHOP_CONTRACT, encoding="utf-8")
    data_dir = tmp_path / "lake"
    data_dir.mkdir()
    said: list[str] = []

    manifest = json.loads((generate_docs(data_dir, out=said.append) / "manifest.json").read_text(encoding="utf-8"))

    sample_model = "model.dynamodb_lakehouse.stg_dynamodb__customers"
    assert sample_model in manifest["disabled"] and sample_model not in manifest["nodes"]
    assert said == []
