"""The contracts' `cast:` drives staging: the generated macro contract_casts() holds
exactly what streaming/contracts/*.yml say, every cast types its column in the built
tables, a cast that cannot work fails with a message naming where, and edge numbers
written as raw Parquet come out exact or null and flagged."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest
import yaml
from dbt_scenario import DAY_2, EVENT_WINDOW, INGESTED

from streaming.contracts.model import PACKAGED_CONTRACTS_DIR, ContractError, load_contract, load_contracts
from streaming.operations.contract_casts import MACRO_PATH, all_casts, column_casts, expected_macro, main
from streaming.runtime.dbt_runner import run_dbt
from streaming.samples.raw_fixtures import write_raw_batch

pytestmark = pytest.mark.dbt

# Where a cast column lands: top-level columns in the table's staging model, the
# fields of list items in the model that unnests the list.
STAGING_SCHEMA = "lakehouse_staging"
LIST_ITEM_MODELS = {("orders", "line_items"): ("lakehouse_intermediate", "int_orders__lines_unnested")}
# Lists whose items no model unnests yet (the scaffolded staging models keep a list as raw
# has it): their item casts wait for the model that unnests them.
LISTS_NOT_UNNESTED = {("app_invoices", "lines")}
DUCKDB_TYPES = {"timestamp": "TIMESTAMP", "date": "DATE", "bigint": "BIGINT"}


def _contract_copy(tmp_path: Path, edit) -> Path:
    """The packaged orders contract, edited, alone in a contracts folder."""
    document = yaml.safe_load((PACKAGED_CONTRACTS_DIR / "orders.yml").read_text(encoding="utf-8"))
    edit(document)
    folder = tmp_path / "contracts"
    folder.mkdir()
    (folder / "orders.yml").write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return folder


def test_generated_macro_holds_the_contracts_casts() -> None:
    assert MACRO_PATH.read_text(encoding="utf-8") == expected_macro(), (
        "macros/contracts/contract_casts.sql is out of date: run python -m streaming.operations.contract_casts"
    )
    assert all_casts(load_contracts().values())["orders"]["line_items[].unit_price"] == {
        "cast": "decimal(18,2)", "type": "decimal", "precision": 18, "scale": 2,
    }


def test_check_reports_a_contract_edit_the_macro_has_not_seen(tmp_path: Path, monkeypatch) -> None:
    def widen_amount(document: dict) -> None:
        document["attributes"]["amount"]["cast"] = "decimal(20,4)"

    monkeypatch.setenv("LAKEHOUSE_CONTRACTS_DIR", str(_contract_copy(tmp_path, widen_amount)))
    before = MACRO_PATH.read_text(encoding="utf-8")

    assert main(["--check"]) == 1
    assert '"cast": "decimal(20,4)"' in expected_macro()
    assert MACRO_PATH.read_text(encoding="utf-8") == before


def test_a_misspelt_cast_fails_naming_the_file_and_the_field(tmp_path: Path, monkeypatch) -> None:
    def misspell(document: dict) -> None:
        document["attributes"]["amount"]["cast"] = "decimel(18,2)"

    folder = _contract_copy(tmp_path, misspell)
    monkeypatch.setenv("LAKEHOUSE_CONTRACTS_DIR", str(folder))

    with pytest.raises(ContractError, match=r"orders\.yml: attributes\.amount\.cast 'decimel\(18,2\)'"):
        main(["--check"])


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (
            lambda document: document["attributes"]["amount"].update(cast="timestamp"),
            "contract 'orders': attributes.amount.cast 'timestamp' cannot type a N attribute",
        ),
        (
            lambda document: document["attributes"]["status"].update(cast="decimal(18,2)"),
            "attributes.status.cast 'decimal(18,2)' cannot type a S attribute; use one of ['timestamp', 'date']",
        ),
        (
            lambda document: document["attributes"]["isGift"].update(cast="bigint"),
            "attributes.isGift.cast 'bigint' cannot type a BOOL attribute; use one of none",
        ),
        (
            lambda document: document["attributes"]["lineItems"]["items"]["fields"]["sku"].update(cast="bigint"),
            "attributes.lineItems.items.fields.sku.cast 'bigint' cannot type a S attribute",
        ),
    ],
)
def test_a_cast_that_cannot_read_its_raw_type_is_refused(tmp_path: Path, edit, expected: str) -> None:
    contract = load_contract(_contract_copy(tmp_path, edit) / "orders.yml")

    with pytest.raises(ContractError) as error:
        column_casts(contract)

    assert expected in str(error.value)


def test_a_model_asking_for_a_cast_the_contract_lacks_does_not_compile(tmp_path: Path) -> None:
    result = run_dbt(["compile", "--inline", "select {{ typed_by_contract('orders', 'status') }} as status"], tmp_path)

    assert not result.success
    # dbt reports the parse failure of an inline query in general terms; the log has why.
    log = (tmp_path / "dbt" / "logs" / "dbt.log").read_text(encoding="utf-8")
    assert "the contract of orders declares no cast for status; it has amount, created_at" in log


def test_every_cast_types_its_column_in_the_built_tables(built_scenario: Path) -> None:
    with duckdb.connect(str(built_scenario / "lakehouse.duckdb"), read_only=True) as connection:
        built = {
            (schema, table, column): data_type
            for schema, table, column, data_type in connection.sql(
                "select table_schema, table_name, column_name, data_type from information_schema.columns"
            ).fetchall()
        }
    typed = {}
    for raw_table, casts in all_casts(load_contracts().values()).items():
        for path, cast in casts.items():
            if "[]." in path:
                list_column, column = path.split("[].")
                if (raw_table, list_column) in LISTS_NOT_UNNESTED:
                    continue
                schema, model = LIST_ITEM_MODELS[(raw_table, list_column)]
            else:
                schema, model, column = STAGING_SCHEMA, f"stg_dynamodb__{raw_table}", path
            expected = (
                f"DECIMAL({cast['precision']},{cast['scale']})" if cast["type"] == "decimal" else DUCKDB_TYPES[cast["type"]]
            )
            typed[f"{raw_table}.{path}"] = (built.get((schema, model, column)), expected)

    assert set(typed) == {
        "customers.registration_date", "orders.amount", "orders.created_at",
        "orders.line_items[].quantity", "orders.line_items[].unit_price",
        "app_tenants.created_at", "app_users.last_login_at", "app_invoices.amount", "app_invoices.issued_at",
    }
    assert {path: actual for path, (actual, _) in typed.items()} == {path: want for path, (_, want) in typed.items()}


def _line(sku: str, quantity: str, unit_price: str) -> dict[str, str]:
    return {"sku": sku, "quantity": quantity, "unit_price": unit_price}


def test_edge_numbers_from_raw_files_are_exact_or_null_and_flagged(scenario_copy: Path) -> None:
    """A new batch through the real raw layout and an incremental build, data tests included."""
    event_ts = DAY_2 + timedelta(hours=11)
    rows = [
        {"customer_id": "c8", "order_id": "o7", "created_at": "2024-03-02T11:00:00.123456Z", "status": "PAID",
         "amount": "-1E-130", "currency": "EUR", "_event_ts": event_ts, "sequence": 60,
         "line_items": [_line("G", "1.5", "2.00"), _line("H", "2", "1.00000000001"), _line("I", "1E+2", "5e-1")]},
        {"customer_id": "c8", "order_id": "o8", "created_at": "2024-03-02T11:01:00Z", "status": "PAID",
         "amount": "1.2E+3", "currency": "EUR", "_event_ts": event_ts, "sequence": 61,
         "line_items": [_line("J", "3", "400.00")]},
        {"customer_id": "c8", "order_id": "o9", "created_at": "2024-03-02T11:02:00Z", "status": "PAID",
         "amount": "123456789012345678901234567890123456.78", "currency": "EUR", "_event_ts": event_ts, "sequence": 62},
    ]
    write_raw_batch(scenario_copy, "orders", 4, rows, max(INGESTED.values()) + timedelta(hours=1))

    result = run_dbt(["build", *EVENT_WINDOW], scenario_copy)

    assert result.success, result.exception
    with duckdb.connect(str(scenario_copy / "lakehouse.duckdb"), read_only=True) as connection:
        orders = connection.sql(
            "select order_id, amount, is_amount_valid, cast(created_at as varchar) from lakehouse_staging.stg_dynamodb__orders"
            " where customer_id = 'c8' order by 1"
        ).fetchall()
        lines = connection.sql(
            "select sku, quantity, is_quantity_valid, unit_price, is_unit_price_valid, line_total"
            " from lakehouse_marts.fct_order_lines where customer_id = 'c8' order by 1"
        ).fetchall()
    assert orders == [
        ("o7", None, False, "2024-03-02 11:00:00.123456"),
        ("o8", Decimal("1200.00"), True, "2024-03-02 11:01:00"),
        ("o9", None, False, "2024-03-02 11:02:00"),
    ]
    assert lines == [
        ("G", None, False, Decimal("2.00"), True, None),
        ("H", 2, True, None, False, None),
        ("I", 100, True, Decimal("0.50"), True, Decimal("50.00")),
        ("J", 3, True, Decimal("400.00"), True, Decimal("1200.00")),
    ]
