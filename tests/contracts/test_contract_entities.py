"""Single-table designs in contracts: entities, their routes, and the errors naming file, field and line."""
from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from contract_files import load_contract
from streaming.contracts.loader import load_contract_file, load_contracts
from streaming.contracts.model import CHANGE_RECORD_COLUMN, ContractError, Route
from streaming.contracts.spark_schema import raw_schema

SINGLE_TABLE: dict[str, Any] = {
    "table": "shop-app",
    "description": "One table, three kinds of items.",
    "key": {"partition_key": "pk", "sort_key": "sk"},
    "attributes": {"pk": {"type": "S"}, "sk": {"type": "S"}, "gsi1pk": {"type": "S"}},
    "partitioning": {"column": "pk_suffix", "expression": "substring(pk, -1, 1)"},
    "entities": {
        "accounts": {"raw_table": "shop_accounts", "match": {"sort_key_prefix": "ACCOUNT#"},
                     "attributes": {"email": {"type": "S", "pii": True}}},
        "carts": {"raw_table": "shop_carts", "match": {"sort_key_prefix": "CART#"},
                  "attributes": {"total": {"type": "N", "cast": "decimal(18,2)"}}},
        "events": {"raw_table": "shop_events", "match": {"sort_key_prefix": "EVENT#", "attribute": "kind",
                                                          "equals": "CLICK"}},
    },
}


def write(directory: Path, document: dict[str, Any], name: str = "shop.yml") -> Path:
    path = directory / name
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return path


def edited(edit) -> dict[str, Any]:
    document = copy.deepcopy(SINGLE_TABLE)
    edit(document)
    return document


def line_of(path: Path, text: str, after: str = "") -> int:
    """The 1-based line of the first line holding `text` after the first line holding `after`."""
    lines = path.read_text(encoding="utf-8").splitlines()
    start = next(number for number, line in enumerate(lines) if after in line) if after else 0
    return next(number for number, line in enumerate(lines) if number >= start and text in line) + 1


def test_a_file_with_entities_describes_one_raw_table_per_entity_and_the_unrouted_one(tmp_path):
    accounts, carts, events, unrouted = load_contract_file(write(tmp_path, SINGLE_TABLE))

    assert [c.raw_table for c in (accounts, carts, events, unrouted)] == [
        "shop_accounts", "shop_carts", "shop_events", "shop_app_unrouted"]
    assert {c.table for c in (accounts, carts, events, unrouted)} == {"shop-app"}
    assert accounts.entity == "accounts" and accounts.route == Route(sort_key_prefix="ACCOUNT#")
    assert events.route == Route(sort_key_prefix="EVENT#", attribute="kind", equals="CLICK")
    # Shared attributes first (keys included), then the entity's own.
    assert accounts.business_columns == ("pk", "sk", "gsi1pk", "email")
    assert accounts.pii_columns == ("email",)
    assert carts.attribute("total").cast == "decimal(18,2)"
    assert unrouted.unrouted and unrouted.route is None and unrouted.business_columns == ("pk", "sk", "gsi1pk")
    assert CHANGE_RECORD_COLUMN in raw_schema(unrouted).fieldNames()
    assert CHANGE_RECORD_COLUMN not in raw_schema(accounts).fieldNames()


def test_a_plain_contract_is_one_raw_table_and_keeps_its_schema(tmp_path):
    plain = {k: v for k, v in SINGLE_TABLE.items() if k != "entities"} | {"raw_table": "shop"}

    (contract,) = load_contract_file(write(tmp_path, plain))

    assert contract == load_contract(tmp_path / "shop.yml")
    assert not contract.is_routed and contract.entity is None
    assert CHANGE_RECORD_COLUMN not in raw_schema(contract).fieldNames()


def test_the_packaged_app_contract_lands_three_entities_and_the_rest(tmp_path):
    contracts = load_contracts()

    app = {name: c for name, c in contracts.items() if c.table == "app"}
    assert list(app) == ["app_tenants", "app_users", "app_invoices", "app_unrouted"]
    assert {c.key_columns for c in app.values()} == {("pk", "sk")}
    assert contracts["app_users"].pii_columns == ("email",)
    assert contracts["app_invoices"].attribute("amount").cast == "decimal(18,2)"
    lines = contracts["app_invoices"].attribute("lines")
    assert lines.type == "L" and [f.name for f in lines.items.fields] == ["sku", "qty"]


def test_the_unrouted_table_may_be_named(tmp_path):
    *_, unrouted = load_contract_file(write(tmp_path, edited(lambda d: d.update(unrouted_table="shop_other"))))
    assert unrouted.raw_table == "shop_other"


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ({"sort_key_prefix": "USER#"}, {"sort_key_prefix": "USER#ADMIN#"}),  # one prefix starts the other
        ({"sort_key_prefix": "USER#"}, {"partition_key_prefix": "TENANT#"}),  # different keys: both can hold
        ({"sort_key_prefix": "USER#"}, {"attribute": "kind", "equals": "USER"}),
        ({"attribute": "kind", "equals": "A"}, {"attribute": "type", "equals": "B"}),  # two attributes
    ],
)
def test_rules_an_item_could_match_twice_are_refused_naming_both_entities_and_lines(tmp_path, first, second):
    def overlapping(document):
        document["entities"] = {
            "first": {"raw_table": "shop_first", "match": first},
            "second": {"raw_table": "shop_second", "match": second},
        }

    path = write(tmp_path, edited(overlapping))
    first_line = line_of(path, "match:", after="first:")
    second_line = line_of(path, "match:", after="second:")

    with pytest.raises(ContractError) as error:
        load_contracts(tmp_path)
    message = str(error.value)
    assert f"{path}: line {second_line}: entities.second.match: an item could match both entity 'first'" in message
    assert f"line {first_line}: entities.first.match" in message


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ({"sort_key_prefix": "USER#"}, {"sort_key_prefix": "USERS#"}),
        ({"attribute": "kind", "equals": "A"}, {"attribute": "kind", "equals": "B"}),
        ({"sort_key_prefix": "X#", "attribute": "kind", "equals": "A"}, {"attribute": "kind", "equals": "B"}),
    ],
)
def test_exclusive_rules_load(tmp_path, first, second):
    def exclusive(document):
        document["entities"] = {
            "first": {"raw_table": "shop_first", "match": first},
            "second": {"raw_table": "shop_second", "match": second},
        }

    assert len(load_contract_file(write(tmp_path, edited(exclusive)))) == 3


def test_an_entity_without_a_match_rule_is_refused_with_its_line(tmp_path):
    path = write(tmp_path, edited(lambda d: d["entities"]["carts"].pop("match")))
    with pytest.raises(ContractError, match=rf"^{re.escape(str(path))}: line {line_of(path, 'carts:')}: "
                                            r"entities\.carts\.match: every entity needs a match rule"):
        load_contracts(tmp_path)


def test_two_entities_sharing_a_raw_table_are_refused(tmp_path):
    path = write(tmp_path, edited(lambda d: d["entities"]["carts"].update(raw_table="shop_accounts")))
    line = line_of(path, "raw_table: shop_accounts", after="carts:")
    with pytest.raises(ContractError, match=rf"line {line}: entities\.carts\.raw_table: 'shop_accounts' is already "
                                            r"the raw table of entities\.accounts"):
        load_contracts(tmp_path)


def test_a_key_attribute_redeclared_with_another_type_is_refused(tmp_path):
    path = write(tmp_path, edited(lambda d: d["entities"]["carts"]["attributes"].update(sk={"type": "N"})))
    line = line_of(path, "sk:", after="carts:")
    with pytest.raises(ContractError, match=rf"line {line}: entities\.carts\.attributes\.sk: redeclares the key "
                                            r"attribute 'sk' \(type S, column sk\) as type N"):
        load_contracts(tmp_path)


def test_a_shared_attribute_repeated_with_its_type_may_carry_an_entity_description(tmp_path):
    document = edited(lambda d: d["entities"]["carts"]["attributes"].update(
        gsi1pk={"type": "S", "description": "The cart's owner."}))
    carts = load_contract_file(write(tmp_path, document))[1]
    assert carts.attribute("gsi1pk").description == "The cart's owner."
    assert carts.business_columns == ("pk", "sk", "gsi1pk", "total")


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.update(raw_table="shop"), "remove the top-level raw_table"),
        (lambda d: d["entities"]["carts"].update(match={"attribute": "kind"}), "attribute and equals go together"),
        (lambda d: d["entities"]["carts"].update(match={"sort_key_prefix": ""}), "must be non-empty text"),
        (lambda d: d["entities"]["carts"].update(match={"attribute": "sk", "equals": "x"}), "with a prefix rule"),
        (lambda d: d["entities"]["carts"].update(match={"prefix": "x"}), "unknown keys"),
        (lambda d: d["entities"].update(Bad={"raw_table": "x", "match": {"sort_key_prefix": "B#"}}),
         "must be lower snake_case"),
        (lambda d: d.update(entities={}), "non-empty mapping"),
    ],
)
def test_invalid_entity_declarations_are_refused(tmp_path, edit, message):
    with pytest.raises(ContractError, match=re.escape(message)):
        load_contract_file(write(tmp_path, edited(edit)))


def test_a_prefix_on_a_number_key_is_refused(tmp_path):
    document = edited(lambda d: d["attributes"].update(sk={"type": "N"}))
    with pytest.raises(ContractError, match="the key 'sk' has type N; a prefix needs an S key"):
        load_contract_file(write(tmp_path, document))


def test_an_entity_raw_table_may_not_clash_with_another_files_tables(tmp_path):
    write(tmp_path, SINGLE_TABLE)
    plain = {k: v for k, v in SINGLE_TABLE.items() if k != "entities"} | {"table": "carts", "raw_table": "shop_carts"}
    write(tmp_path, plain, "carts.yml")
    with pytest.raises(ContractError, match="raw_table 'shop_carts' is already used by"):
        load_contracts(tmp_path)


# --------------------------------------------------------------------------- a whole sort key


def with_entities(entities: dict[str, Any]) -> dict[str, Any]:
    return edited(lambda d: d.update(entities=entities))


def test_a_whole_sort_key_rule_loads_beside_a_partition_key_prefix(tmp_path):
    users, orgs, orders, _ = load_contract_file(write(tmp_path, with_entities({
        "users": {"raw_table": "shop_users", "match": {"partition_key_prefix": "USER#", "sort_key_equals": "PROFILE"}},
        "orgs": {"raw_table": "shop_orgs", "match": {"partition_key_prefix": "ORG#", "sort_key_equals": "PROFILE"}},
        "orders": {"raw_table": "shop_orders", "match": {"sort_key_prefix": "ORDER#"}},
    })))
    assert users.route == Route(partition_key_prefix="USER#", sort_key_equals="PROFILE")
    assert users.route.describe() == "partition key starts with 'USER#' and sort key is 'PROFILE'"
    assert orgs.route.sort_key_equals == "PROFILE" and orders.route.sort_key_equals is None


@pytest.mark.parametrize(
    ("first", "second", "overlap"),
    [
        ({"sort_key_equals": "A"}, {"sort_key_equals": "B"}, False),
        ({"sort_key_equals": "A"}, {"sort_key_prefix": "ADDRESS#"}, False),  # a whole `A` is no `ADDRESS#...`
        ({"sort_key_equals": "ADDRESS#1"}, {"sort_key_prefix": "ADDRESS#"}, True),
        ({"sort_key_equals": "A"}, {"sort_key_equals": "A"}, True),
        ({"sort_key_equals": "A"}, {"partition_key_prefix": "USER#"}, True),
        ({"sort_key_equals": "A", "partition_key_prefix": "USER#"},
         {"sort_key_equals": "A", "partition_key_prefix": "ORG#"}, False),
    ],
)
def test_a_whole_sort_key_overlaps_only_the_rules_that_could_take_the_same_item(tmp_path, first, second, overlap):
    document = with_entities({"first": {"raw_table": "shop_first", "match": first},
                              "second": {"raw_table": "shop_second", "match": second}})
    assert Route(**first).may_overlap(Route(**second)) is overlap
    if overlap:
        with pytest.raises(ContractError, match="an item could match both entity 'first'"):
            load_contract_file(write(tmp_path, document))
    else:
        assert len(load_contract_file(write(tmp_path, document))) == 3


@pytest.mark.parametrize(
    ("match", "message"),
    [
        ({"sort_key_prefix": "P", "sort_key_equals": "PROFILE"},
         "entities.carts.match.sort_key_equals: give sort_key_prefix or sort_key_equals, not both"),
        ({"sort_key_equals": ""}, "entities.carts.match.sort_key_equals: must be non-empty text"),
        ({"sort_key_equals": 7}, "entities.carts.match.sort_key_equals: must be non-empty text"),
    ],
)
def test_an_invalid_whole_sort_key_rule_is_refused_naming_file_line_and_field(tmp_path, match, message):
    path = write(tmp_path, edited(lambda d: d["entities"]["carts"].update(match=match)))
    with pytest.raises(ContractError, match=rf"^{re.escape(str(path))}: line \d+: {re.escape(message)}"):
        load_contract_file(path)


def test_a_whole_sort_key_rule_needs_a_text_sort_key(tmp_path):
    document = edited(lambda d: (d["attributes"].update(sk={"type": "N"}),
                                 d.update(entities={"carts": {"raw_table": "shop_carts",
                                                              "match": {"sort_key_equals": "1"}}})))
    path = write(tmp_path, document)
    with pytest.raises(ContractError, match=rf"^{re.escape(str(path))}: line \d+: entities\.carts\.match\."
                                            r"sort_key_equals: the key 'sk' has type N; "
                                            r"sort_key_equals needs an S key"):
        load_contract_file(path)
    plain = {k: v for k, v in SINGLE_TABLE.items() if k != "key"} | {"key": {"partition_key": "pk"}}
    plain["entities"] = {"carts": {"raw_table": "shop_carts", "match": {"sort_key_equals": "CART"}}}
    with pytest.raises(ContractError, match=r"entities\.carts\.match\.sort_key_equals: the table has no sort key"):
        load_contract_file(write(tmp_path, plain, "nosort.yml"))
