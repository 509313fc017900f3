"""`lakehouse dbt --table T` and the inputs a selected build reads but does not build,
worked out on small graphs shaped like dbt's manifest (the real project's builds are in
tests/dbt/test_dbt_one_table.py)."""
from __future__ import annotations

from pathlib import Path

import pytest

from streaming.cli import main
from streaming.runtime.dbt_selection import gives_own_selection, listing_of, table_nodes, unbuilt_inputs

P = "dynamodb_lakehouse"


def _manifest(edges: dict[str, list[str]]) -> dict:
    """A manifest whose graph has `edges` (parent -> children); each node's relation is
    lakehouse.s.<name>."""
    ids = set(edges) | {child for children in edges.values() for child in children}
    parents: dict[str, list[str]] = {uid: [] for uid in ids}
    for parent, children in edges.items():
        for child in children:
            parents[child].append(parent)
    sources = {uid: {"source_name": "dynamodb", "name": uid.rsplit(".", 1)[1]} for uid in ids
               if uid.startswith("source.")}
    nodes = {uid: {"name": uid.rsplit(".", 1)[1], "database": "lakehouse", "schema": "s",
                   "alias": uid.rsplit(".", 1)[1], "config": {"materialized": "table"}}
             for uid in ids if not uid.startswith(("source.", "unit_test."))}
    return {"sources": sources, "nodes": nodes, "unit_tests": {}, "parent_map": parents,
            "child_map": {uid: list(edges.get(uid, [])) for uid in ids}}


def _id(kind: str, name: str) -> str:
    return f"{kind}.{P}.dynamodb.{name}" if kind == "source" else f"{kind}.{P}.{name}"


SRC_ORDERS, SRC_ORDERS_LOG, SRC_CUSTOMERS = (_id("source", "orders"), _id("source", "orders_changes"),
                                             _id("source", "customers_changes"))
STG_ORDERS, STG_CUSTOMERS, FCT, FRESHNESS = (_id("model", "stg_orders"), _id("model", "stg_customers"),
                                             _id("model", "fct_orders"), _id("model", "mart_freshness"))
STATUSES, DOMAINS = _id("seed", "order_statuses"), _id("seed", "free_mail_domains")
TEST_STATUS, TEST_CROSS, TEST_SEED = (_id("test", "relationships_stg_orders_status"),
                                      _id("test", "relationships_fct_orders_customer"),
                                      _id("test", "unique_order_statuses_code"))
UNIT = f"unit_test.{P}.stg_orders.amount_is_exact"

PROJECT = _manifest({
    SRC_ORDERS_LOG: [STG_ORDERS],
    SRC_ORDERS: [],
    SRC_CUSTOMERS: [STG_CUSTOMERS],
    STATUSES: [STG_ORDERS, TEST_STATUS, TEST_SEED],
    DOMAINS: [STG_CUSTOMERS],
    STG_ORDERS: [FCT, TEST_STATUS, UNIT],
    FCT: [FRESHNESS, TEST_CROSS],
    STG_CUSTOMERS: [FRESHNESS, TEST_CROSS],
})


def test_a_table_is_its_own_sources_descendants_without_what_reads_another_table_plus_its_seeds() -> None:
    selected = table_nodes(PROJECT, "orders", ["orders"])

    assert selected.nodes == {STG_ORDERS, FCT, TEST_STATUS, UNIT, STATUSES, TEST_SEED}
    assert selected.arguments == ["--select", "source:dynamodb.orders+", "source:dynamodb.orders_changes+",
                                  "order_statuses", "--exclude", "source:dynamodb.customers_changes+"]
    assert selected.counts() == {"models": 2, "seed": 1, "data tests": 2, "unit test": 1}


def test_a_table_without_models_is_refused_naming_scaffold() -> None:
    with pytest.raises(ValueError, match=r"lakehouse scaffold --table app"):
        table_nodes(PROJECT, "app", ["app_users"])


def _relations(*ids: str) -> set[tuple[str, str, str]]:
    return {("lakehouse", "s", uid.rsplit(".", 1)[1]) for uid in ids}


def test_a_selected_build_loads_the_unloaded_seed_it_reads_and_leaves_out_a_test_of_an_unbuilt_model() -> None:
    # `build --select stg_orders+1` on a fresh data directory.
    selected = [STG_ORDERS, FCT, TEST_STATUS, TEST_CROSS, UNIT]

    fresh = unbuilt_inputs(PROJECT, selected, "build", set())
    assert fresh.seeds == ("order_statuses",)
    assert fresh.tests == {"relationships_fct_orders_customer": ("stg_customers",)}
    assert fresh.models == {}

    built = unbuilt_inputs(PROJECT, selected, "build", _relations(STATUSES, STG_CUSTOMERS))
    assert (built.seeds, built.tests, built.models) == ((), {}, {})


def test_a_selected_seed_is_loaded_by_build_but_not_by_run() -> None:
    assert unbuilt_inputs(PROJECT, [STATUSES, STG_ORDERS], "build", set()).seeds == ()
    assert unbuilt_inputs(PROJECT, [STATUSES, STG_ORDERS], "run", set()).seeds == ("order_statuses",)


def test_a_model_reading_an_unbuilt_unselected_model_is_named() -> None:
    assert unbuilt_inputs(PROJECT, [FCT], "run", set()).models == {"fct_orders": ("stg_orders",)}


def test_the_listing_selects_what_the_command_selects_with_dbts_own_reading_of_it() -> None:
    listing = listing_of(["build", "-s", "a+1", "b", "--full-refresh", "--exclude=c", "--vars", "{x: 1}",
                          "--select", "d"])
    assert listing is not None and listing.command == "build" and not listing.by_selector
    assert listing.arguments[:6] == ["--select", "a+1", "b", "d", "--exclude", "c"]
    assert "--vars" not in listing.arguments and "--full-refresh" not in listing.arguments
    # A whole build loads every seed itself; `run` loads none, so every run is checked.
    assert listing_of(["build", "--full-refresh"]) is None
    assert listing_of(["run"]) is not None
    assert listing_of(["test", "--select", "a"]) is None
    assert listing_of(["build", "--help"]) is None


def test_own_selection_options_are_found_in_every_spelling() -> None:
    assert gives_own_selection(["build", "--select=x"]) == "--select"
    assert gives_own_selection(["build", "-m", "x"]) == "-m"
    assert gives_own_selection(["build", "--exclude", "x"]) is None


@pytest.fixture
def dbt_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[list[str], dict]]:
    calls: list[tuple[list[str], dict]] = []
    monkeypatch.setattr("streaming.runtime.dbt_runner.run_dbt_command",
                        lambda data_dir, args, **options: calls.append((list(args), options)))
    return calls


def test_table_option_is_ours_and_names_the_tables_raw_tables(tmp_path: Path, dbt_calls) -> None:
    assert main(["dbt", "build", "--table", "app", "--data-dir", str(tmp_path), "--full-refresh"]) == 0
    (args, options), = dbt_calls
    assert args == ["build", "--full-refresh"]
    name, raw_tables = options["table"]
    assert name == "app" and set(raw_tables) == {"app_tenants", "app_users", "app_invoices", "app_unrouted"}


def test_an_unknown_table_is_refused_in_one_line_naming_the_known_ones(tmp_path: Path, dbt_calls, capsys) -> None:
    assert main(["dbt", "build", "--table", "nosuch", "--data-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err == ("lakehouse dbt: --table nosuch: no contract declares that table; "
                                       "the contracts declare app, customers, orders\n")
    assert dbt_calls == []


def test_table_with_its_own_select_is_refused(tmp_path: Path, dbt_calls, capsys) -> None:
    assert main(["dbt", "build", "--table", "orders", "--select", "fct_orders", "--data-dir", str(tmp_path)]) == 2
    assert "--table orders chooses the nodes itself, so it takes no --select" in capsys.readouterr().err
    assert dbt_calls == []


def test_dbt_help_tells_of_table(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["dbt", "--help"])
    assert "--table T selects the nodes of the DynamoDB table T" in " ".join(capsys.readouterr().out.split())
