"""Contract changes between runs on one data directory, through the stream and dbt:
an added attribute lands (older rows read it as null, in raw and in dbt's raw view);
a renamed column or a changed type is refused at start and nothing is written."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest
import yaml
from packaged_contracts import packaged_contracts_dir

from streaming.cli import main
from streaming.io.layout import DataLayout
from streaming.runtime.dbt_runner import run_dbt
from streaming.samples.generator import write_landing_files

pytestmark = [pytest.mark.spark, pytest.mark.dbt]


def customer_record(cust_id: str, event_id: str, seconds: int, **extra: dict) -> str:
    keys = {"id": {"S": cust_id}, "custName": {"S": "Ana"}}
    image = {**keys, "email": {"S": f"{cust_id}@example.com"},
             "registrationDate": {"S": "2026-11-01T10:00:00Z"}, **extra}
    return json.dumps({
        "eventID": event_id, "eventName": "INSERT", "eventSource": "aws:dynamodb",
        "eventSourceARN": "arn:aws:dynamodb:eu-west-1:123456789012:table/customers/stream/2026-11-01T00:00:00.000",
        "dynamodb": {"Keys": keys, "NewImage": image, "ApproximateCreationDateTime": seconds,
                     "SequenceNumber": str(seconds)},
    })


def edit_customers_contract(contracts_dir: Path, edit) -> None:
    path = contracts_dir / "customers.yml"
    document = yaml.safe_load(path.read_text())
    edit(document["attributes"])
    path.write_text(yaml.safe_dump(document, sort_keys=False))


def raw_files(layout: DataLayout) -> list[Path]:
    return sorted(layout.raw.rglob("*.parquet"))


@pytest.fixture(scope="module")
def evolved(spark, tmp_path_factory):
    """A data directory streamed under the packaged contracts of its two tables, then under
    those with an added attribute. The generator's records are the two tables' alone, and each
    further contract would only add Spark planning to both streams."""
    root = tmp_path_factory.mktemp("evolution")
    layout = DataLayout(root / "data")
    contracts_dir = Path(packaged_contracts_dir(root / "contracts", "customers", "orders"))
    write_landing_files(layout.landing, seed=31, customers=4, orders_per_customer=1, records_per_file=40,
                        malformed_rate=0.0)
    from streaming.operations.stream import stream

    stream(layout, sink="parquet", contracts_dir=str(contracts_dir), spark=spark, out=lambda _: None)

    edit_customers_contract(contracts_dir, lambda attributes: attributes.update(
        loyaltyTier={"column": "loyalty_tier", "type": "S", "description": "Loyalty programme tier."}))
    later = layout.landing / "2099" / "01" / "01" / "00"
    later.mkdir(parents=True)
    (later / "late.jsonl").write_text(customer_record("z-1", "evolved-1", 4_070_908_800, loyaltyTier={"S": "gold"}) + "\n")
    printed: list[str] = []
    stream(layout, sink="parquet", contracts_dir=str(contracts_dir), spark=spark, out=printed.append)
    return layout, contracts_dir, printed


def test_an_added_attribute_lands_and_older_rows_read_it_as_null(evolved):
    layout, _, printed = evolved
    assert any("loyaltyTier" in line for line in printed), "the addition is reported at start"
    pattern = str(layout.raw / "customers_changes" / "*" / "*" / "*.parquet")
    with duckdb.connect() as con:
        rows = con.execute(
            f"select _batch_id, loyalty_tier, _contract_version from read_parquet('{pattern}', union_by_name = true)"
        ).fetchall()
    versions = {batch: version for batch, _, version in rows}
    assert [tier for batch, tier, _ in rows if tier is not None] == ["gold"]
    assert {tier for batch, tier, _ in rows if batch == 0} == {None}
    assert len(set(versions.values())) == 2, "each batch carries the contract version it was decoded with"

    result = run_dbt(["build"], layout.root)
    assert result.success, result.exception
    with duckdb.connect(str(layout.root / "lakehouse.duckdb"), read_only=True) as con:
        tiers = con.execute("select id, loyalty_tier from raw.customers_changes where loyalty_tier is not null").fetchall()
        nulls = con.execute("select count(*) from raw.customers_changes where loyalty_tier is null").fetchone()[0]
        emails = con.execute("select count(*) from lakehouse_staging.stg_dynamodb__customers "
                             "where not is_deleted and email is null").fetchone()[0]
    assert tiers == [("z-1", "gold")] and nulls > 0
    assert emails == 0


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda attributes: attributes["email"].update(column="email_address"), "email"),
        (lambda attributes: attributes["registrationDate"].update(type="N"), "registrationDate"),
    ],
    ids=["renamed column", "changed type"],
)
def test_a_rename_or_type_change_is_refused_and_writes_nothing(evolved, tmp_path, capsys, change, expected):
    layout, contracts_dir, _ = evolved
    changed_dir = tmp_path / "contracts"
    shutil.copytree(contracts_dir, changed_dir)
    edit_customers_contract(changed_dir, change)
    later = layout.landing / "2099" / "01" / "02" / "00"
    later.mkdir(parents=True, exist_ok=True)
    (later / f"{expected}.jsonl").write_text(customer_record("z-2", f"refused-{expected}", 4_070_995_200) + "\n")
    before = raw_files(layout)

    code = main(["stream", "--data-dir", str(layout.root), "--contracts-dir", str(changed_dir)])

    err = capsys.readouterr().err
    shutil.rmtree(later)
    assert code == 2 and "Traceback" not in err
    assert expected in err and "lakehouse reprocess" in err
    assert raw_files(layout) == before
