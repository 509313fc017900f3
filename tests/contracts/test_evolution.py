"""Contract evolution: versions, the allowed / harmless / refused rules, the registry and the start-up guard.

Every contract here is one of the packaged contracts, copied with yaml into a temporary
file and edited the way an operator would edit it, then loaded by `load_contract`.
"""
from __future__ import annotations

import copy
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml

from contract_files import checked_and_registered, load_contract, write_contract
from streaming.contracts.evolution import (
    ContractEvolutionError,
    ContractRegistry,
    LocalFileSystem,
    S3FileSystem,
    check_evolution,
    contract_version,
    evolution_changes,
    schema_document,
)
from streaming.contracts.loader import SAMPLE_CONTRACTS_DIR, load_contracts
from streaming.contracts.model import METADATA_COLUMNS, TableContract
from streaming.contracts.spark_schema import raw_schema

NOW = datetime(2026, 11, 23, 18, 0, tzinfo=timezone.utc)
ADDITION_NOTE = "(null in rows written before)"


def packaged(table: str) -> dict[str, Any]:
    return yaml.safe_load((SAMPLE_CONTRACTS_DIR / f"{table}.yml").read_text(encoding="utf-8"))


def edited(table: str, edit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    document = copy.deepcopy(packaged(table))
    edit(document)
    return document


def load(tmp_path: Path, document: dict[str, Any]) -> TableContract:
    """The contract a stream would load from this YAML document."""
    folder = tmp_path / f"contract-{len(list(tmp_path.glob('contract-*')))}"
    return load_contract(write_contract(folder, document))


def contracts_dir(tmp_path: Path, name: str, **documents: dict[str, Any]) -> dict[str, TableContract]:
    folder = tmp_path / name
    for table, document in documents.items():
        write_contract(folder, document, f"{table}.yml")
    return load_contracts(folder)


def write_rows(raw_root: Path, *raw_tables: str) -> None:
    """A change-log file in each raw table: rows written under the registered versions bind them."""
    for raw_table in raw_tables:
        folder = raw_root / f"{raw_table}_changes" / "_ingest_hour=2026-11-23-18" / "_batch_id=0"
        folder.mkdir(parents=True)
        (folder / "part-0.parquet").write_bytes(b"PAR1")


def reversed_mapping(value: Any) -> Any:
    """The same YAML content with every mapping's keys in the opposite order."""
    if isinstance(value, dict):
        return {key: reversed_mapping(value[key]) for key in reversed(list(value))}
    return value


class RecordingFileSystem(LocalFileSystem):
    """Local files, remembering which paths were written."""

    def __init__(self) -> None:
        self.writes: list[str] = []

    def write_text(self, path: str, text: str) -> None:
        self.writes.append(path)
        super().write_text(path, text)


def files_under(root: Path) -> list[Path]:
    return sorted(path for path in root.rglob("*") if path.is_file())


# --------------------------------------------------------------------------- schema document and version


def test_schema_document_describes_the_raw_columns_and_annotations(tmp_path: Path) -> None:
    orders = load(tmp_path, packaged("orders"))
    document = schema_document(orders)

    assert json.loads(json.dumps(document)) == document
    assert document["table"] == "orders" and document["raw_table"] == "orders"
    assert document["key"] == {"partition_key": "customerId", "sort_key": "orderId"}
    assert document["partitioning"] == {"column": "customer_suffix", "expression": "substring(customer_id, -1, 1)"}
    # The top-level columns are exactly raw_schema's business and partition columns.
    documented = [spec["column"] for spec in document["attributes"].values()] + [document["partitioning"]["column"]]
    assert documented == [name for name in raw_schema(orders).fieldNames() if name not in METADATA_COLUMNS]
    line_items = document["attributes"]["lineItems"]
    assert line_items["column"] == "line_items" and line_items["type"] == "L"
    assert line_items["items"]["type"] == "M" and "column" not in line_items["items"]
    assert line_items["items"]["fields"]["quantity"] == {
        "column": "quantity", "type": "N", "cast": "bigint", "pii": False, "description": ""
    }
    address = document["attributes"]["shippingAddress"]
    assert list(address["fields"]) == ["street", "city", "postcode", "country"]
    assert address["pii"] is True
    assert document["attributes"]["amount"]["cast"] == "decimal(18,2)"


def test_version_is_sha256_of_the_documented_canonical_json(tmp_path: Path) -> None:
    contract = load(tmp_path, {
        "table": "Tiny",
        "raw_table": "tiny",
        "description": "Not part of the version.",
        "key": {"partition_key": "id"},
        "attributes": {"id": {"type": "S", "pii": True, "description": "Neither is this."}},
        "partitioning": {"column": "id_suffix", "expression": "substring(id, -1, 1)"},
    })
    column_part = {
        "format": 1,
        "table": "Tiny",
        "raw_table": "tiny",
        "key": {"partition_key": "id", "sort_key": None},
        "partitioning": {"column": "id_suffix", "expression": "substring(id, -1, 1)"},
        "attributes": {"id": {"column": "id", "type": "S"}},
    }
    canonical = json.dumps(column_part, sort_keys=True, separators=(",", ":"), ensure_ascii=True)

    assert contract_version(contract) == hashlib.sha256(canonical.encode("ascii")).hexdigest()[:12]


def test_version_ignores_load_repetition_and_key_order(tmp_path: Path) -> None:
    for table in ("customers", "orders"):
        original = packaged(table)
        reordered = reversed_mapping(original)
        assert yaml.safe_dump(reordered, sort_keys=False) != yaml.safe_dump(original, sort_keys=False)

        first, again, shuffled = load(tmp_path, original), load(tmp_path, original), load(tmp_path, reordered)

        assert contract_version(first) == contract_version(again) == contract_version(shuffled)
        assert len(contract_version(first)) == 12 and int(contract_version(first), 16) >= 0


def test_version_is_the_same_in_other_python_processes(tmp_path: Path) -> None:
    path = write_contract(tmp_path / "orders", packaged("orders"))
    program = (
        "import sys; from streaming.contracts.loader import load_contract_file; from streaming.contracts.evolution import contract_version; "
        "print(contract_version(load_contract_file(sys.argv[1])[0]))"
    )
    versions = set()
    for seed in ("1", "2"):
        environment = {**os.environ, "PYTHONHASHSEED": seed}
        result = subprocess.run([sys.executable, "-c", program, str(path)], capture_output=True, text=True,
                                env=environment, cwd=Path(__file__).parents[2], check=True, timeout=120)
        versions.add(result.stdout.strip())

    assert versions == {contract_version(load_contract(path))}


def test_annotation_edits_keep_the_version_and_additions_change_it(tmp_path: Path) -> None:
    original = load(tmp_path, packaged("customers"))

    def annotate(document: dict[str, Any]) -> None:
        document["description"] = "Customers, rewritten."
        document["attributes"]["email"]["pii"] = False
        document["attributes"]["registrationDate"]["cast"] = "date"

    def add_phone(document: dict[str, Any]) -> None:
        document["attributes"]["phoneNumber"] = {"type": "S", "pii": True}

    assert contract_version(load(tmp_path, edited("customers", annotate))) == contract_version(original)
    assert contract_version(load(tmp_path, edited("customers", add_phone))) != contract_version(original)


# --------------------------------------------------------------------------- rules


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """An edit setting a dotted path of the YAML document (the last key is created if missing)."""
    def edit(document: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target = document
        for key in parents:
            target = target[key]
        target[last] = value
    return edit


def _delete(path: str) -> Callable[[dict[str, Any]], None]:
    def edit(document: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target = document
        for key in parents:
            target = target[key]
        del target[last]
    return edit


def _rename_email_attribute(document: dict[str, Any]) -> None:
    document["attributes"]["emailAddress"] = document["attributes"].pop("email")


REFUSED = [
    pytest.param("customers", _set("attributes.email.column", "email_address"),
                 "attribute 'email': column 'email' -> 'email_address'", id="column-renamed"),
    pytest.param("orders", _set("attributes.amount.type", "S"),
                 "attribute 'amount': type N -> S", id="type-N-to-S"),
    pytest.param("orders", _set("attributes.lineItems.items", {"type": "S"}),
                 "attribute 'lineItems[]': type M -> S", id="list-item-type"),
    pytest.param("orders", _set("attributes.lineItems.items.fields.quantity.type", "S"),
                 "attribute 'lineItems[].quantity': type N -> S", id="list-item-field-type"),
    pytest.param("orders", _set("attributes.shippingAddress.fields.postcode", {"type": "N"}),
                 "attribute 'shippingAddress.postcode': type S -> N", id="map-field-type"),
    pytest.param("customers", _delete("attributes.email"),
                 "attribute 'email': column 'email' (S) -> removed", id="attribute-removed"),
    pytest.param("orders", _delete("attributes.shippingAddress.fields.country"),
                 "attribute 'shippingAddress.country': column 'country' (S) -> removed", id="map-field-removed"),
    pytest.param("customers", _rename_email_attribute,
                 "attribute 'email' -> 'emailAddress': column 'email' now fed by a renamed attribute",
                 id="attribute-dropped-and-added"),
    pytest.param("customers", _set("partitioning.expression", "substring(id, -2, 2)"),
                 "partitioning.expression: 'substring(id, -1, 1)' -> 'substring(id, -2, 2)'",
                 id="partition-expression"),
    pytest.param("customers", _set("partitioning.column", "id_bucket"),
                 "partitioning.column: 'id_suffix' -> 'id_bucket'", id="partition-column"),
    pytest.param("customers", _delete("key.sort_key"), "key.sort_key: 'custName' -> none", id="sort-key"),
    pytest.param("orders", _set("key.partition_key", "orderId"),
                 "key.partition_key: 'customerId' -> 'orderId'", id="partition-key"),
    pytest.param("customers", _set("raw_table", "clients"), "raw_table: 'customers' -> 'clients'", id="raw-table"),
    pytest.param("customers", _set("table", "clients"), "table: 'customers' -> 'clients'", id="dynamodb-table"),
]


@pytest.mark.parametrize(("table", "edit", "refusal"), REFUSED)
def test_changes_of_existing_columns_are_refused(
    tmp_path: Path, table: str, edit: Callable[[dict[str, Any]], None], refusal: str
) -> None:
    registered = schema_document(load(tmp_path, packaged(table)))
    current = load(tmp_path, edited(table, edit))

    report = evolution_changes(registered, current)

    assert report.refused == (refusal,)
    assert report.additions == () and not report.allowed
    with pytest.raises(ContractEvolutionError) as refused:
        check_evolution(registered, current)
    message = str(refused.value)
    assert f"raw table '{current.raw_table}'" in message
    assert refusal in message
    assert "lakehouse reprocess --to <new data root>" in message and "lakehouse switch" in message
    assert refused.value.reports == (report,)


def test_refused_error_is_a_value_error_naming_old_and_new_versions(tmp_path: Path) -> None:
    original = load(tmp_path, packaged("customers"))
    renamed = load(tmp_path, edited("customers", _set("attributes.email.column", "email_address")))

    with pytest.raises(ValueError) as refused:
        check_evolution(schema_document(original), renamed)

    assert isinstance(refused.value, ContractEvolutionError)
    assert f"{contract_version(original)} -> contract version {contract_version(renamed)}" in str(refused.value)


def test_adding_an_attribute_is_allowed(tmp_path: Path) -> None:
    registered = schema_document(load(tmp_path, packaged("customers")))
    current = load(tmp_path, edited("customers", _set("attributes.phoneNumber", {"type": "S", "pii": True})))

    report = check_evolution(registered, current)

    assert report.allowed
    assert report.additions == (f"attribute 'phoneNumber': absent -> column 'phone_number' (S) {ADDITION_NOTE}",)
    assert report.refused == () and report.harmless == ()
    assert report.current_version == contract_version(current) != report.previous_version


def test_adding_fields_to_a_map_and_to_list_items_is_allowed(tmp_path: Path) -> None:
    registered = schema_document(load(tmp_path, packaged("orders")))

    def add_fields(document: dict[str, Any]) -> None:
        document["attributes"]["shippingAddress"]["fields"]["region"] = {"type": "S"}
        document["attributes"]["lineItems"]["items"]["fields"]["discount"] = {"type": "N", "cast": "decimal(18,2)"}

    report = check_evolution(registered, load(tmp_path, edited("orders", add_fields)))

    assert report.additions == (
        f"attribute 'lineItems[].discount': absent -> column 'discount' (N) {ADDITION_NOTE}",
        f"attribute 'shippingAddress.region': absent -> column 'region' (S) {ADDITION_NOTE}",
    )
    assert report.refused == ()


def test_description_pii_and_cast_edits_are_allowed_and_reported(tmp_path: Path) -> None:
    registered = schema_document(load(tmp_path, packaged("orders")))

    def annotate(document: dict[str, Any]) -> None:
        document["description"] = "Orders."
        document["attributes"]["giftMessage"]["pii"] = False
        document["attributes"]["amount"]["cast"] = "decimal(20,4)"
        document["attributes"]["lineItems"]["items"]["fields"]["sku"]["description"] = "Stock keeping unit."

    report = check_evolution(registered, load(tmp_path, edited("orders", annotate)))

    assert report.harmless == (
        "description: 'Customer orders, one item per (customerId, orderId).' -> 'Orders.'",
        "attribute 'amount': cast 'decimal(18,2)' -> 'decimal(20,4)'",
        "attribute 'giftMessage': pii true -> false",
        "attribute 'lineItems[].sku': description '' -> 'Stock keeping unit.'",
    )
    assert report.additions == () and report.refused == ()
    assert report.previous_version == report.current_version


def test_every_refused_change_of_one_contract_is_listed(tmp_path: Path) -> None:
    registered = schema_document(load(tmp_path, packaged("customers")))

    def several(document: dict[str, Any]) -> None:
        document["attributes"]["email"]["column"] = "email_address"
        document["attributes"]["registrationDate"]["type"] = "N"
        document["attributes"]["phoneNumber"] = {"type": "S"}

    report = evolution_changes(registered, load(tmp_path, edited("customers", several)))

    assert report.refused == (
        "attribute 'email': column 'email' -> 'email_address'",
        "attribute 'registrationDate': type S -> N",
    )
    assert report.additions == (f"attribute 'phoneNumber': absent -> column 'phone_number' (S) {ADDITION_NOTE}",)


def test_a_registered_document_of_another_format_is_not_compared(tmp_path: Path) -> None:
    contract = load(tmp_path, packaged("customers"))
    registered = {**schema_document(contract), "format": 2}

    with pytest.raises(ValueError, match="has format 2"):
        evolution_changes(registered, contract)


# --------------------------------------------------------------------------- registry


def test_register_stores_the_schema_document_under_the_raw_root(tmp_path: Path) -> None:
    contract = load(tmp_path, packaged("customers"))
    registry = ContractRegistry(tmp_path / "raw")

    version = registry.register(contract, NOW)

    path = tmp_path / "raw" / "_contracts" / "customers" / f"{version}.json"
    stored = json.loads(path.read_text(encoding="utf-8"))
    assert version == contract_version(contract)
    assert stored == {**schema_document(contract), "version": version, "sequence": 1,
                      "registered_at": "2026-11-23T18:00:00+00:00"}
    assert registry.latest("customers") == stored
    assert registry.latest("orders") is None


def test_register_is_idempotent(tmp_path: Path) -> None:
    contract = load(tmp_path, packaged("customers"))
    files = RecordingFileSystem()
    registry = ContractRegistry(tmp_path / "raw", files)

    first = registry.register(contract, NOW)
    stored = files_under(tmp_path / "raw")
    content = stored[0].read_text(encoding="utf-8")
    second = registry.register(load(tmp_path, packaged("customers")), NOW + timedelta(hours=1))

    assert first == second
    assert len(files.writes) == 1
    assert files_under(tmp_path / "raw") == stored and stored[0].read_text(encoding="utf-8") == content


def test_latest_follows_registration_order(tmp_path: Path) -> None:
    registry = ContractRegistry(tmp_path / "raw")
    original = load(tmp_path, packaged("customers"))
    grown = load(tmp_path, edited("customers", _set("attributes.phoneNumber", {"type": "S"})))

    registry.register(original, NOW)
    # An earlier clock must not make the older version look newer: order is the sequence.
    newer = registry.register(grown, NOW - timedelta(days=1))

    latest = registry.latest("customers")
    assert latest is not None and latest["version"] == newer and latest["sequence"] == 2
    assert [entry["version"] for entry in registry.entries("customers")] == [contract_version(original), newer]


def test_registry_writes_leave_no_temporary_files(tmp_path: Path) -> None:
    registry = ContractRegistry(tmp_path / "raw")
    registry.register(load(tmp_path, packaged("customers")), NOW)
    registry.register(load(tmp_path, packaged("orders")), NOW)

    names = [path.name for path in files_under(tmp_path / "raw")]
    assert len(names) == 2
    assert all(name.endswith(".json") and not name.startswith(".") for name in names)


def test_a_failed_write_leaves_neither_entry_nor_temporary_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    registry = ContractRegistry(tmp_path / "raw")
    original = load(tmp_path, packaged("customers"))
    registry.register(original, NOW)
    before = {path: path.read_bytes() for path in files_under(tmp_path / "raw")}

    def fail(source: str, target: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr("streaming.atomic_files.os.replace", fail)
    with pytest.raises(OSError, match="disk full"):
        registry.register(load(tmp_path, edited("customers", _set("attributes.phoneNumber", {"type": "S"}))), NOW)

    assert {path: path.read_bytes() for path in files_under(tmp_path / "raw")} == before
    assert registry.latest("customers")["version"] == contract_version(original)  # type: ignore[index]


def test_a_leftover_temporary_file_is_not_read_as_an_entry(tmp_path: Path) -> None:
    registry = ContractRegistry(tmp_path / "raw")
    version = registry.register(load(tmp_path, packaged("customers")), NOW)
    # What a crash between writing and renaming leaves behind: half a document.
    (tmp_path / "raw" / "_contracts" / "customers" / ".abc.json.1234.tmp").write_text('{"format": 1', encoding="utf-8")

    assert registry.latest("customers")["version"] == version  # type: ignore[index]


def test_register_needs_an_aware_time(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        ContractRegistry(tmp_path / "raw").register(load(tmp_path, packaged("customers")), datetime(2026, 11, 23))


# --------------------------------------------------------------------------- guard


def test_guard_registers_every_contract_on_a_fresh_root(tmp_path: Path) -> None:
    contracts = load_contracts(SAMPLE_CONTRACTS_DIR)
    registry = ContractRegistry(tmp_path / "raw")

    versions = checked_and_registered(registry, contracts, NOW)

    assert versions == {c.raw_table: contract_version(c) for c in contracts.values()}
    assert sorted(registry.raw_tables()) == sorted(contracts)


def test_guard_restart_with_the_same_contracts_writes_nothing(tmp_path: Path) -> None:
    contracts = load_contracts(SAMPLE_CONTRACTS_DIR)
    first = checked_and_registered(ContractRegistry(tmp_path / "raw"), contracts, NOW)
    files = RecordingFileSystem()
    reported: list[str] = []

    again = checked_and_registered(ContractRegistry(tmp_path / "raw", files), contracts, NOW, report=reported.append)

    assert again == first and files.writes == [] and reported == []


def test_guard_registers_an_allowed_addition_and_reports_it(tmp_path: Path) -> None:
    registry = ContractRegistry(tmp_path / "raw")
    before = checked_and_registered(registry, load_contracts(SAMPLE_CONTRACTS_DIR), NOW)
    write_rows(tmp_path / "raw", "customers")
    grown = contracts_dir(tmp_path, "grown", customers=edited("customers", _set("attributes.phoneNumber", {"type": "S"})),
                          orders=packaged("orders"))
    reported: list[str] = []

    after = checked_and_registered(registry, grown, NOW + timedelta(hours=1), report=reported.append)

    assert after["orders"] == before["orders"]
    assert after["customers"] == contract_version(grown["customers"]) != before["customers"]
    assert registry.latest("customers")["version"] == after["customers"]  # type: ignore[index]
    assert reported == [
        f"raw table 'customers' contract {before['customers']} -> {after['customers']}: "
        f"attribute 'phoneNumber': absent -> column 'phone_number' (S) {ADDITION_NOTE}"
    ]


def test_guard_refuses_every_changed_table_at_once_and_registers_nothing(tmp_path: Path) -> None:
    registry = ContractRegistry(tmp_path / "raw")
    before = checked_and_registered(registry, load_contracts(SAMPLE_CONTRACTS_DIR), NOW)
    write_rows(tmp_path / "raw", "customers", "orders")
    changed = contracts_dir(
        tmp_path, "changed",
        customers=edited("customers", _set("attributes.email.column", "email_address")),
        orders=edited("orders", _set("attributes.amount.type", "S")),
    )
    files = RecordingFileSystem()

    with pytest.raises(ContractEvolutionError) as refused:
        checked_and_registered(ContractRegistry(tmp_path / "raw", files), changed, NOW)

    message = str(refused.value)
    assert "refused for 2 raw table(s)" in message
    assert "raw table 'customers'" in message and "attribute 'email': column 'email' -> 'email_address'" in message
    assert "raw table 'orders'" in message and "attribute 'amount': type N -> S" in message
    assert "lakehouse reprocess --to" in message
    assert files.writes == []
    assert {table: registry.latest(table)["version"] for table in before} == before  # type: ignore[index]


def test_guard_registers_nothing_when_one_table_is_refused(tmp_path: Path) -> None:
    registry = ContractRegistry(tmp_path / "raw")
    before = checked_and_registered(registry, load_contracts(SAMPLE_CONTRACTS_DIR), NOW)
    write_rows(tmp_path / "raw", "customers", "orders")
    mixed = contracts_dir(
        tmp_path, "mixed",
        customers=edited("customers", _delete("attributes.email")),
        orders=edited("orders", _set("attributes.couponCode", {"type": "S"})),
    )

    with pytest.raises(ContractEvolutionError) as refused:
        checked_and_registered(registry, mixed, NOW)

    assert [report.raw_table for report in refused.value.reports] == ["customers"]
    assert registry.latest("orders")["version"] == before["orders"]  # type: ignore[index]


def test_guard_refuses_a_renamed_raw_table(tmp_path: Path) -> None:
    registry = ContractRegistry(tmp_path / "raw")
    checked_and_registered(registry, load_contracts(SAMPLE_CONTRACTS_DIR), NOW)
    write_rows(tmp_path / "raw", "customers")
    renamed = contracts_dir(tmp_path, "renamed", customers=edited("customers", _set("raw_table", "clients")),
                            orders=packaged("orders"))

    with pytest.raises(ContractEvolutionError, match="raw_table: 'customers' -> 'clients'"):
        checked_and_registered(registry, renamed, NOW)
    assert registry.latest("clients") is None


def test_guard_registers_a_new_table_beside_registered_ones(tmp_path: Path) -> None:
    registry = ContractRegistry(tmp_path / "raw")
    checked_and_registered(registry, contracts_dir(tmp_path, "one", customers=packaged("customers")), NOW)
    both = load_contracts(SAMPLE_CONTRACTS_DIR)

    versions = checked_and_registered(registry, both, NOW)

    assert versions["orders"] == contract_version(both["orders"])
    assert registry.latest("orders")["sequence"] == 1  # type: ignore[index]


# --------------------------------------------------------------------------- S3 (moto)


@pytest.fixture()
def s3(mocked_aws: None) -> Any:
    import boto3

    client = boto3.client("s3", region_name="eu-west-1")
    client.create_bucket(Bucket="lake", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
    yield client


def test_registry_on_s3_sits_beside_the_hudi_tables(s3: Any, tmp_path: Path) -> None:
    # A Hudi table's own files under the same raw root must not be taken for registry entries.
    s3.put_object(Bucket="lake", Key="raw/customers/.hoodie/hoodie.properties", Body=b"hoodie.table.name=customers\n")
    contracts = load_contracts(SAMPLE_CONTRACTS_DIR)
    registry = ContractRegistry("s3://lake/raw/")

    versions = checked_and_registered(registry, contracts, NOW)
    again = checked_and_registered(registry, contracts, NOW + timedelta(hours=1))

    keys = sorted(item["Key"] for item in s3.list_objects_v2(Bucket="lake", Prefix="raw/_contracts/")["Contents"])
    assert keys == [f"raw/_contracts/{table}/{versions[table]}.json" for table in sorted(contracts)]
    assert again == versions
    assert sorted(registry.raw_tables()) == sorted(contracts)
    stored = json.loads(s3.get_object(Bucket="lake", Key=f"raw/_contracts/customers/{versions['customers']}.json")["Body"].read())
    assert stored == {**schema_document(contracts["customers"]), "version": versions["customers"], "sequence": 1,
                      "registered_at": NOW.isoformat()}


def test_registry_on_s3_refuses_a_changed_contract(s3: Any, tmp_path: Path) -> None:
    registry = ContractRegistry("s3://lake/raw")
    checked_and_registered(registry, load_contracts(SAMPLE_CONTRACTS_DIR), NOW)
    s3.put_object(Bucket="lake", Key="raw/customers_changes/_ingest_hour=2026-11-23-18/part-0.parquet", Body=b"PAR1")
    changed = contracts_dir(tmp_path, "changed", customers=edited("customers", _delete("attributes.email")),
                            orders=packaged("orders"))

    with pytest.raises(ContractEvolutionError, match="attribute 'email': column 'email' \\(S\\) -> removed"):
        checked_and_registered(registry, changed, NOW)


def test_an_s3a_raw_root_keeps_its_registry_in_the_same_s3_objects(s3: Any, tmp_path: Path, monkeypatch) -> None:
    # S3A (a Spark job outside Glue) names the bucket s3a://; taken for a local path, the
    # registry went to a folder named `s3a:` in the working directory.
    monkeypatch.chdir(tmp_path)
    contracts = load_contracts(SAMPLE_CONTRACTS_DIR)
    versions = checked_and_registered(ContractRegistry("s3a://lake/raw"), contracts, NOW)

    assert not (tmp_path / "s3a:").exists()
    keys = sorted(item["Key"] for item in s3.list_objects_v2(Bucket="lake", Prefix="raw/_contracts/")["Contents"])
    assert keys == [f"raw/_contracts/{table}/{versions[table]}.json" for table in sorted(contracts)]
    assert checked_and_registered(ContractRegistry("s3://lake/raw"), contracts, NOW) == versions


def test_a_raw_root_under_another_url_scheme_is_refused(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="'gs://lake/raw': the contract registry is kept on S3"):
        ContractRegistry("gs://lake/raw")
    assert list(tmp_path.iterdir()) == []


def test_s3_paths_must_be_s3_locations() -> None:
    with pytest.raises(ValueError, match="not an s3:// location"):
        S3FileSystem(client=object()).read_text("/tmp/raw/_contracts")


# --------------------------------------------------------------------------- entities of a single-table design


def _entity(name: str, edit: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    def apply(document: dict[str, Any]) -> None:
        edit(document["entities"][name])
    return apply


def test_another_match_rule_for_an_entity_with_rows_is_refused_naming_both_rules(tmp_path: Path) -> None:
    registry = ContractRegistry(tmp_path / "raw")
    checked_and_registered(registry, contracts_dir(tmp_path, "before", app=packaged("app")), NOW)
    write_rows(tmp_path / "raw", "app_users")
    moved = edited("app", _entity("users", lambda users: users.update(match={"sort_key_prefix": "MEMBER#"})))

    with pytest.raises(ContractEvolutionError) as refused:
        checked_and_registered(registry, contracts_dir(tmp_path, "after", app=moved), NOW)

    message = str(refused.value)
    assert "raw table 'app_users'" in message
    assert "match: sort key starts with 'USER#' -> sort key starts with 'MEMBER#'" in message
    assert [report.raw_table for report in refused.value.reports] == ["app_users"]


def test_another_match_rule_keeps_the_version_and_binds_nothing_before_rows(tmp_path: Path) -> None:
    registry = ContractRegistry(tmp_path / "raw")
    before = checked_and_registered(registry, contracts_dir(tmp_path, "before", app=packaged("app")), NOW)
    moved = edited("app", _entity("users", lambda users: users.update(match={"sort_key_prefix": "MEMBER#"})))

    after = checked_and_registered(registry, contracts_dir(tmp_path, "after", app=moved), NOW)

    assert after == before, "the match rule decides rows, not columns: the version stays"


def test_an_entity_removed_while_its_raw_table_holds_rows_is_refused(tmp_path: Path) -> None:
    registry = ContractRegistry(tmp_path / "raw")
    checked_and_registered(registry, contracts_dir(tmp_path, "before", app=packaged("app")), NOW)
    write_rows(tmp_path / "raw", "app_invoices")

    with pytest.raises(ContractEvolutionError) as refused:
        checked_and_registered(registry, contracts_dir(tmp_path, "after", app=edited("app", _delete("entities.invoices"))),
                        NOW)

    assert [report.raw_table for report in refused.value.reports] == ["app_invoices"]
    assert "entity removed: no contract of table 'app' declares raw table 'app_invoices' any more" \
        in str(refused.value)


def _invoices_become_bills(document: dict[str, Any]) -> None:
    """Entity invoices removed, and entity bills added with the same match rule."""
    invoices = document["entities"].pop("invoices")
    document["entities"]["bills"] = {**invoices, "raw_table": "app_bills"}


def test_an_entity_removed_and_another_added_is_refused_as_a_removal_not_a_rename(tmp_path: Path) -> None:
    registry = ContractRegistry(tmp_path / "raw")
    checked_and_registered(registry, contracts_dir(tmp_path, "before", app=packaged("app")), NOW)
    write_rows(tmp_path / "raw", "app_invoices")

    with pytest.raises(ContractEvolutionError) as refused:
        checked_and_registered(registry, contracts_dir(tmp_path, "after", app=edited("app", _invoices_become_bills)), NOW)

    assert [report.raw_table for report in refused.value.reports] == ["app_invoices"]
    assert "entity removed" in str(refused.value) and "raw_table:" not in str(refused.value)


def test_an_entity_without_rows_may_go_and_a_new_one_may_come(tmp_path: Path) -> None:
    registry = ContractRegistry(tmp_path / "raw")
    checked_and_registered(registry, contracts_dir(tmp_path, "before", app=packaged("app")), NOW)
    write_rows(tmp_path / "raw", "app_users")

    versions = checked_and_registered(registry, contracts_dir(tmp_path, "after", app=edited("app", _invoices_become_bills)), NOW)

    assert "app_bills" in versions and "app_invoices" not in versions
    assert registry.latest("app_bills")["route"] == {"partition_key_prefix": None, "sort_key_prefix": "INVOICE#",
                                                     "attribute": None, "equals": None}
