"""Table contracts: loading, defaults, validation messages, raw schema."""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyspark.sql import types as T

from contract_files import load_contract
from streaming.contracts.loader import load_contracts, snake_case
from streaming.contracts.model import ContractError, parse_cast
from streaming.contracts.spark_schema import change_log_schema, check_partition_expression, raw_schema

VALID: dict[str, Any] = {
    "table": "Orders",
    "raw_table": "orders",
    "description": "Every attribute type.",
    "key": {"partition_key": "customerId", "sort_key": "orderId"},
    "attributes": {
        "customerId": {"type": "S"},
        "orderId": {"type": "N", "column": "order_no"},
        "amount": {"type": "N", "cast": "decimal(18,2)"},
        "isGift": {"type": "BOOL"},
        "receiptDigest": {"type": "B"},
        "tags": {"type": "SS", "pii": True},
        "packageWeightsKg": {"type": "NS"},
        "attachmentChecksums": {"type": "BS"},
        "lineItems": {
            "type": "L",
            "items": {"type": "M", "fields": {"sku": {"type": "S"}, "unitPrice": {"type": "N"}}},
        },
        "shippingAddress": {"type": "M", "pii": True, "fields": {"postCode": {"type": "S"}}},
    },
    "partitioning": {"column": "customer_suffix", "expression": "substring(customer_id, -1, 1)"},
}


def write_contract(directory: Path, document: dict[str, Any], name: str = "orders.yml") -> Path:
    path = directory / name
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return path


def changed(**changes: Any) -> dict[str, Any]:
    """VALID with top-level keys replaced; a value of None removes the key."""
    document = copy.deepcopy(VALID)
    for key, value in changes.items():
        if value is None:
            document.pop(key)
        else:
            document[key] = value
    return document


def with_attributes(**attributes: Any) -> dict[str, Any]:
    document = copy.deepcopy(VALID)
    document["attributes"].update(attributes)
    return document


def test_packaged_contracts_load_and_describe_the_article_tables():
    contracts = load_contracts()

    assert set(contracts) == {"customers", "orders", "app_tenants", "app_users", "app_invoices", "app_unrouted"}
    customers = contracts["customers"]
    assert customers.key_columns == ("id", "cust_name")
    assert customers.partition_column == "id_suffix"
    orders = contracts["orders"]
    assert {spec.type for spec in orders.attributes} == {"S", "N", "B", "BOOL", "SS", "NS", "BS", "L", "M"}


def test_loads_every_type_with_snake_case_defaults(tmp_path):
    contract = load_contract(write_contract(tmp_path, VALID))

    assert contract.table == "Orders"
    assert contract.raw_table == "orders"
    assert contract.key_attributes == ("customerId", "orderId")
    assert contract.key_columns == ("customer_id", "order_no")  # explicit column wins
    assert contract.business_columns[:4] == ("customer_id", "order_no", "amount", "is_gift")
    assert contract.pii_columns == ("tags", "shipping_address")
    assert contract.attribute("amount").cast == "decimal(18,2)"
    assert contract.attribute("isGift").pii is False
    line_items = contract.attribute("lineItems")
    assert line_items.items is not None
    assert [(field.name, field.column) for field in line_items.items.fields] == [
        ("sku", "sku"),
        ("unitPrice", "unit_price"),
    ]
    assert contract.attribute("shippingAddress").fields[0].column == "post_code"
    with pytest.raises(KeyError):
        contract.attribute("nope")


def test_table_without_sort_key_has_a_single_key_column(tmp_path):
    document = changed(key={"partition_key": "customerId"})
    contract = load_contract(write_contract(tmp_path, document))

    assert contract.sort_key is None
    assert contract.key_attributes == ("customerId",)
    assert contract.key_columns == ("customer_id",)


@pytest.mark.parametrize(
    ("name", "column"),
    [
        ("custName", "cust_name"),
        ("registrationDate", "registration_date"),
        ("receiptURL", "receipt_url"),
        ("HTTPStatusCode", "http_status_code"),
        ("order-id", "order_id"),
        ("already_snake", "already_snake"),
        ("sku2Code", "sku2_code"),
    ],
)
def test_snake_case(name, column):
    assert snake_case(name) == column


def test_raw_schema_is_business_then_partition_then_metadata(tmp_path):
    contract = load_contract(write_contract(tmp_path, VALID))

    schema = raw_schema(contract)

    assert [(field.name, field.dataType) for field in schema.fields] == [
        ("customer_id", T.StringType()),
        ("order_no", T.StringType()),
        ("amount", T.StringType()),
        ("is_gift", T.BooleanType()),
        ("receipt_digest", T.BinaryType()),
        ("tags", T.ArrayType(T.StringType())),
        ("package_weights_kg", T.ArrayType(T.StringType())),
        ("attachment_checksums", T.ArrayType(T.BinaryType())),
        (
            "line_items",
            T.ArrayType(
                T.StructType([T.StructField("sku", T.StringType()), T.StructField("unit_price", T.StringType())])
            ),
        ),
        ("shipping_address", T.StructType([T.StructField("post_code", T.StringType())])),
        ("customer_suffix", T.StringType()),
        ("_event_name", T.StringType()),
        ("_is_deleted", T.BooleanType()),
        ("_is_ttl_delete", T.BooleanType()),
        ("_event_ts", T.TimestampType()),
        ("_sequence_number", T.StringType()),
        ("_ordering_value", T.StringType()),
        ("_event_id", T.StringType()),
        ("_source_table", T.StringType()),
        ("_extra_attributes", T.StringType()),
        ("_ingested_at", T.TimestampType()),
        ("_batch_id", T.LongType()),
        ("_contract_version", T.StringType()),
    ]
    assert change_log_schema(contract).fieldNames() == [*schema.fieldNames(), "_ingest_hour"]


def test_a_raw_table_may_not_take_the_change_log_name_of_another(tmp_path):
    first = write_contract(tmp_path, VALID)
    second = yaml.safe_load(first.read_text())
    second.update(table="orders_archive", raw_table=f"{second['raw_table']}_changes")
    (tmp_path / "archive.yml").write_text(yaml.safe_dump(second))

    with pytest.raises(ContractError, match="is the name of the change log of"):
        load_contracts(tmp_path)


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        (with_attributes(amount={"type": "DECIMAL"}), "attributes.amount.type 'DECIMAL'"),
        (with_attributes(amount={"column": "amount"}), "attributes.amount.type None"),
        (changed(key={"sort_key": "orderId"}), "key.partition_key is required"),
        (
            changed(key={"partition_key": "customerId", "sort_key": "createdAt"}),
            "key.sort_key 'createdAt' is not declared",
        ),
        (with_attributes(orderId={"type": "BOOL"}), "key.sort_key 'orderId' has type BOOL"),
        (with_attributes(customerId={"type": "SS"}), "key.partition_key 'customerId' has type SS"),
        (with_attributes(amountTotal={"type": "N", "column": "amount"}), "duplicate column name 'amount'"),
        (with_attributes(customerSuffix={"type": "S"}), "duplicate column name 'customer_suffix'"),
        (
            with_attributes(shippingAddress={"type": "M", "fields": {"zip": {"type": "S"}, "ZIP": {"type": "S"}}}),
            "attributes.shippingAddress.fields: duplicate column name 'zip'",
        ),
        (with_attributes(lineItems={"type": "L"}), "attributes.lineItems: type L needs items"),
        (with_attributes(shippingAddress={"type": "M"}), "attributes.shippingAddress: type M needs fields"),
        (
            with_attributes(tags={"type": "SS", "items": {"type": "S"}}),
            "attributes.tags.items is only allowed with type L",
        ),
        (
            with_attributes(lineItems={"type": "L", "items": {"type": "M", "fields": {"qty": {"type": "INT"}}}}),
            "attributes.lineItems.items.fields.qty.type 'INT'",
        ),
        (with_attributes(amount={"type": "N", "nullable": True}), "attributes.amount.nullable"),
        (with_attributes(amount={"type": "N", "pii": "yes"}), "attributes.amount.pii must be true or false"),
        (with_attributes(amount={"type": "N", "column": "Amount"}), "attributes.amount.column 'Amount'"),
        (changed(owner="data-team"), "unknown keys ['owner']"),
        (changed(partitioning={"column": "p", "expression": "  "}), "partitioning.expression is empty"),
        (changed(partitioning={"column": "p"}), "partitioning.expression is empty"),
        (changed(partitioning=None), "partitioning: must be a mapping"),
        (changed(attributes={}), "attributes: must be a non-empty mapping"),
        (changed(table=None), "table is required"),
        # cast: only the SQL types staging knows how to reach exactly from the raw text.
        (
            with_attributes(amount={"type": "N", "cast": "decimel(18,2)"}),
            "attributes.amount.cast 'decimel(18,2)' is not a cast staging knows",
        ),
        (with_attributes(amount={"type": "N", "cast": "decimal(39,2)"}), "attributes.amount.cast 'decimal(39,2)'"),
        (with_attributes(amount={"type": "N", "cast": "decimal(2,3)"}), "attributes.amount.cast 'decimal(2,3)'"),
        (with_attributes(amount={"type": "N", "cast": "double"}), "attributes.amount.cast 'double'"),
        (with_attributes(amount={"type": "N", "cast": 18}), "attributes.amount.cast 18"),
        (with_attributes(isGift={"type": "BOOL", "cast": "boolean"}), "attributes.isGift.cast 'boolean'"),
        (
            with_attributes(
                lineItems={"type": "L", "items": {"type": "M", "fields": {"qty": {"type": "N", "cast": "int"}}}}
            ),
            "attributes.lineItems.items.fields.qty.cast 'int'",
        ),
    ],
)
def test_invalid_contract_names_the_file_and_the_field(tmp_path, document, expected):
    path = write_contract(tmp_path, document)

    with pytest.raises(ContractError) as error:
        load_contract(path)

    assert str(path) in str(error.value)
    assert expected in str(error.value)


@pytest.mark.parametrize("cast", ["decimal(18,2)", "decimal(38, 10)", "decimal(1,0)", "bigint"])
def test_number_casts_staging_can_reach_exactly_load(tmp_path, cast):
    contract = load_contract(write_contract(tmp_path, with_attributes(amount={"type": "N", "cast": cast})))

    assert contract.attribute("amount").cast == cast


def test_parse_cast_reads_precision_and_scale():
    assert parse_cast("decimal(18,2)") == ("decimal", 18, 2)
    assert parse_cast("decimal( 38 , 0 )") == ("decimal", 38, 0)
    assert parse_cast("timestamp") == ("timestamp", 0, 0)
    assert parse_cast("decimal(0,0)") is None
    assert parse_cast("Decimal(18,2)") is None


def test_invalid_yaml_is_a_contract_error(tmp_path):
    path = tmp_path / "broken.yml"
    path.write_text("table: x\n  nested: {a: b\n", encoding="utf-8")

    with pytest.raises(ContractError, match="broken.yml: not valid YAML"):
        load_contract(path)


def test_two_contracts_for_one_table_are_rejected(tmp_path):
    first = write_contract(tmp_path, VALID, "a.yml")
    write_contract(tmp_path, changed(raw_table="orders_copy"), "b.yml")

    with pytest.raises(ContractError) as error:
        load_contracts(tmp_path)

    assert "b.yml: table 'Orders' is already defined in" in str(error.value)
    assert str(first) in str(error.value)


def test_two_contracts_for_one_raw_table_are_rejected(tmp_path):
    write_contract(tmp_path, VALID, "a.yml")
    write_contract(tmp_path, changed(table="OrdersV2"), "b.yml")

    with pytest.raises(ContractError, match="raw_table 'orders' is already used by"):
        load_contracts(tmp_path)


def test_contracts_directory_comes_from_the_environment(tmp_path, monkeypatch):
    write_contract(tmp_path, VALID, "orders.yaml")
    monkeypatch.setenv("LAKEHOUSE_CONTRACTS_DIR", str(tmp_path))

    contracts = load_contracts()
    assert list(contracts) == ["orders"]  # keyed by raw table
    assert contracts["orders"].table == "Orders"


def test_directory_without_contracts_is_an_error(tmp_path):
    with pytest.raises(ContractError, match="no table contracts"):
        load_contracts(tmp_path)
    with pytest.raises(ContractError, match="does not exist"):
        load_contracts(tmp_path / "missing")


def test_partition_expression_on_key_columns_passes(spark, tmp_path):
    contract = load_contract(write_contract(tmp_path, VALID))

    check_partition_expression(spark, contract)  # raises on failure


def test_the_partition_expression_is_evaluated_without_a_spark_job(spark, tmp_path):
    """Every stream start checks each contract's expression; a job apiece cost about half
    a second. On an inline table Spark's optimizer computes it by itself."""
    contract = load_contract(write_contract(tmp_path, VALID))
    spark.sparkContext.setJobGroup("partition-expression-check", "the check")
    try:
        check_partition_expression(spark, contract)
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    assert spark.sparkContext.statusTracker().getJobIdsForGroup("partition-expression-check") == []


@pytest.mark.parametrize(
    "expression",
    [
        "substring(amount, 1, 1)",  # a business column: null on every tombstone
        "substring(_event_name, 1, 1)",  # metadata is not a key either
        "substring(customer_id, 1",  # not even SQL
    ],
)
def test_partition_expression_outside_the_key_fails_fast(spark, tmp_path, expression):
    document = changed(partitioning={"column": "customer_suffix", "expression": expression})
    contract = load_contract(write_contract(tmp_path, document))

    with pytest.raises(ContractError) as error:
        check_partition_expression(spark, contract)

    assert "'Orders'" in str(error.value)
    assert expression in str(error.value)
    assert "['customer_id', 'order_no']" in str(error.value)


# --------------------------------------------------------------------------- file-level mistakes


def test_a_non_utf8_byte_is_a_contract_error_naming_the_line(tmp_path):
    path = write_contract(tmp_path, VALID)
    lines = path.read_bytes().splitlines(keepends=True)
    # A Latin-1 "é" typed into a description, as an editor in another encoding saves it.
    lines[2] = b'description: "Commandes r\xe9centes"\n'
    path.write_bytes(b"".join(lines))

    with pytest.raises(ContractError) as error:
        load_contract(path)

    assert str(error.value).startswith(f"{path}: line 3, column 26: byte 0xe9 is not UTF-8")


HAND_WRITTEN = """\
table: Orders
raw_table: orders
key:
  partition_key: customerId
  sort_key: orderId
attributes:
  customerId:
    type: S
  orderId:
    type: S
  lineItems:
    type: L
    items:
      type: M
      fields:
        sku: {type: S}
partitioning:
  column: customer_suffix
  expression: "substring(customer_id, -1, 1)"
"""
# where: (insert after line, inserted text, key, line of its first occurrence)
DUPLICATED = {
    "top level": (2, "raw_table: orders_v2\n", "raw_table", 2),
    "an attribute": (10, "  customerId:\n    type: N\n", "customerId", 7),
    "inside an attribute": (8, "    type: N\n", "type", 8),
    "a nested field": (16, "        sku: {type: N}\n", "sku", 16),
}


def test_the_hand_written_contract_loads(tmp_path):
    path = tmp_path / "orders.yml"
    path.write_text(HAND_WRITTEN, encoding="utf-8")

    assert [spec.name for spec in load_contract(path).attributes] == ["customerId", "orderId", "lineItems"]


@pytest.mark.parametrize("where", list(DUPLICATED))
def test_a_duplicated_key_at_any_level_is_a_contract_error(tmp_path, where):
    after, inserted, key, first = DUPLICATED[where]
    lines = HAND_WRITTEN.splitlines(keepends=True)
    path = tmp_path / "orders.yml"
    path.write_text("".join(lines[:after]) + inserted + "".join(lines[after:]), encoding="utf-8")

    with pytest.raises(ContractError) as error:
        load_contract(path)

    assert str(error.value).startswith(
        f"{path}: line {after + 1}: key {key!r} appears twice in one mapping (first at line {first})"
    )
    assert "YAML keys must be unique" in str(error.value)


def test_a_merge_key_may_still_override_what_it_merges(tmp_path):
    text = yaml.safe_dump(VALID, sort_keys=False).replace(
        "  customerId:\n    type: S\n", "  customerId: &text\n    type: S\n", 1
    ).replace("  isGift:\n    type: BOOL\n", "  isGift:\n    <<: *text\n    type: BOOL\n", 1)
    path = tmp_path / "orders.yml"
    path.write_text(text, encoding="utf-8")

    assert load_contract(path).attribute("isGift").type == "BOOL"


@pytest.mark.parametrize(
    "expression",
    [
        "concat(customer_id, cast(rand() as string))",
        "substring(uuid(), 1, 1)",
        "date_format(current_timestamp(), 'yyyy-MM-dd')",
        "cast(now() as string)",
        "cast(current_date as string)",
        "cast(unix_timestamp() as string)",
        "concat(customer_id, current_user())",
        "cast(monotonically_increasing_id() % 4 as string)",
    ],
)
def test_a_nondeterministic_partition_expression_is_refused_at_load(tmp_path, expression):
    path = write_contract(tmp_path, changed(partitioning={"column": "customer_suffix", "expression": expression}))

    with pytest.raises(ContractError, match="a key must get the same partition every time") as error:
        load_contract(path)

    assert f"partitioning.expression {expression!r} calls" in str(error.value)


@pytest.mark.parametrize(
    "expression",
    [
        "concat(substring(customer_id, -1, 1), 'rand()')",  # the word is in a string literal
        "cast(unix_timestamp(customer_id, 'yyyy') as string)",  # with an argument it reads no clock
        "lower(substring(customer_id, 1, 2))",
    ],
)
def test_a_deterministic_partition_expression_loads(tmp_path, expression):
    path = write_contract(tmp_path, changed(partitioning={"column": "customer_suffix", "expression": expression}))

    assert load_contract(path).partition_expression == expression


@pytest.mark.parametrize("expression", ["rand()", "concat(customer_id, cast(random(7) as string))",
                                        "cast(spark_partition_id() as string)"])
def test_spark_itself_refuses_a_nondeterministic_partition_expression(spark, tmp_path, expression):
    """The session check asks Spark's analyzed expression, so it does not depend on the
    load-time list: the contract here bypasses that list."""
    import dataclasses

    contract = dataclasses.replace(load_contract(write_contract(tmp_path, VALID)), partition_expression=expression)

    with pytest.raises(ContractError, match=r"is not deterministic \(Spark says so\)"):
        check_partition_expression(spark, contract)
