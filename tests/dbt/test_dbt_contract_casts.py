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
from contract_files import load_contract
from dbt_scenario import DAY_2, EVENT_WINDOW, INGESTED, WITHOUT_UNIT_TESTS

from streaming.cli import main as lakehouse
from streaming.contracts.loader import SAMPLE_CONTRACTS_DIR, load_contracts
from streaming.contracts.model import ContractError
from streaming.io.layout import DataLayout
from streaming.operations.contract_casts import MACRO_PATH, all_casts, column_casts, expected_macro, main
from streaming.operations.status import status
from streaming.runtime.dbt_runner import PROJECT_DIR, run_dbt
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
    document = yaml.safe_load((SAMPLE_CONTRACTS_DIR / "orders.yml").read_text(encoding="utf-8"))
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
    """A new batch through the real raw layout and an incremental build, data tests included
    (not the unit tests, which read no raw batch)."""
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

    result = run_dbt(["build", *EVENT_WINDOW, *WITHOUT_UNIT_TESTS], scenario_copy)

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


def _column_tests() -> dict[tuple[str, str], dict[str, dict]]:
    """(model, column) -> test name -> its config, from every models YAML of the project
    (hand-written and scaffolded)."""
    found: dict[tuple[str, str], dict[str, dict]] = {}
    for path in sorted((PROJECT_DIR / "dbt_project" / "models").rglob("*.yml")):
        for model in (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("models") or []:
            for column in model.get("columns") or []:
                tests = [test if isinstance(test, dict) else {test: {}} for test in column.get("data_tests") or []]
                found[(model["name"], column["name"])] = {name: (options or {}).get("config", {})
                                                          for test in tests for name, options in test.items()}
    return found


def test_every_cast_column_of_a_staging_model_warns_when_a_value_does_not_fit() -> None:
    """Issue 30 item 2: the columns come from the contracts' casts (top-level ones: list
    items stay in their list in staging), the tests from the models' YAML."""
    cast_columns = {(f"stg_dynamodb__{raw_table}", path)
                    for raw_table, casts in all_casts(load_contracts(SAMPLE_CONTRACTS_DIR).values()).items()
                    for path in casts if "." not in path and "[" not in path}
    tested = {key: tests["fits_contract_cast"] for key, tests in _column_tests().items() if "fits_contract_cast" in tests}

    assert len(cast_columns) == 7
    assert set(tested) == cast_columns
    assert {key: config.get("severity") for key, config in tested.items()} == dict.fromkeys(cast_columns, "warn")


def test_status_counts_the_values_that_did_not_fit_their_cast(built_scenario: Path, capsys) -> None:
    """Issue 30 item 2: order o5's amount 12.345 does not fit decimal(18,2); c3's
    registration date `March 1st` was corrected by a later change."""
    report = status(DataLayout(built_scenario))

    assert report.cast_misfits == {"stg_dynamodb__customers": {"registration_date": 0},
                                   "stg_dynamodb__orders": {"created_at": 0, "amount": 1},
                                   # built empty: the scenario has no app changes
                                   "stg_dynamodb__app_invoices": {"amount": 0, "issued_at": 0},
                                   "stg_dynamodb__app_tenants": {"created_at": 0},
                                   "stg_dynamodb__app_users": {"last_login_at": 0}}
    assert lakehouse(["status", "--data-dir", str(built_scenario)]) == 0
    out = capsys.readouterr().out.splitlines()
    start = out.index("cast misfits: 1 rows hold a value that does not fit its contract cast (null, its text in "
                      "<column>_text), in the 5 staging tables with casts of the last dbt build:")
    assert out[start + 1].split() == ["stg_dynamodb__orders.amount", "1"]


def test_status_before_any_dbt_build_says_the_misfits_are_not_counted(tmp_path: Path) -> None:
    write_raw_batch(tmp_path, "orders", 0, [{"customer_id": "c1", "order_id": "o1", "amount": "1.005",
                                             "_event_ts": DAY_2}], INGESTED[0])

    report = status(DataLayout(tmp_path))

    assert report.cast_misfits == {}
    assert "cast misfits: not counted, no dbt build in this data directory yet (lakehouse dbt build)" in report.lines()
