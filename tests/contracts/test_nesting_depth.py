"""Nesting depth: no declared attribute nests deeper than the raw tables' readers follow
(model.MAX_NESTING_DEPTH, issue 45 B4). DynamoDB allows 31 levels below an item; hudi-rs
cannot parse a Hudi table's schema with 31 levels of maps, and then every reader of the
table (status, reconcile, dbt) failed. The loader refuses a deeper declaration, naming the
file, line and attribute; a table registered with one is told how to get out of it.
"""
from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from contract_files import load_contract, write_contract
from lakehouse_dbt.hudi_raw import UnreadableHudiTable, read_hudi_snapshot
from streaming.contracts.evolution import ContractEvolutionError, check_evolution, schema_document
from streaming.contracts.inference.contract import infer_contract
from streaming.contracts.inference.render import render_contract
from streaming.contracts.inference.sample import ItemSample
from streaming.contracts.loader import load_contract_file
from streaming.contracts.model import MAX_NESTING_DEPTH, AttributeSpec, ContractError, nesting_depth
from streaming.contracts.spark_schema import change_log_schema
from streaming.io.formats.hudi.sink import HudiSchemaError, HudiSink, table_column_order
from streaming.io.layout import DataLayout
from streaming.operations.stream import stream

DYNAMODB_DEEPEST_MAP = 31  # 32 levels in an item, the item itself one of them


def nested_maps(levels: int, leaf: dict[str, Any] | None = None) -> dict[str, Any]:
    """A declaration of `levels` maps, each holding the next under `m`, the last a string `v`."""
    spec: dict[str, Any] = leaf or {"type": "S"}
    for _ in range(levels):
        spec = {"type": "M", "fields": {"m" if spec.get("type") in ("M", "L") else "v": spec}}
    return spec


def nested_lists(levels: int) -> dict[str, Any]:
    spec: dict[str, Any] = {"type": "N"}
    for _ in range(levels):
        spec = {"type": "L", "items": spec}
    return spec


def contract_document(deep: dict[str, Any]) -> dict[str, Any]:
    return {
        "table": "things",
        "raw_table": "things",
        "key": {"partition_key": "id"},
        "attributes": {"id": {"type": "S"}, "deep": deep},
        "partitioning": {"column": "id_suffix", "expression": "substring(id, -1, 1)"},
    }


@pytest.mark.parametrize("levels", [1, 2, 17])
def test_nesting_depth_counts_maps_and_lists_on_the_deepest_path(tmp_path, levels):
    contract = load_contract(write_contract(tmp_path, contract_document(nested_maps(levels))))
    assert nesting_depth(contract.attribute("deep")) == levels
    mixed = {"type": "L", "items": nested_maps(levels)}
    contract = load_contract(write_contract(tmp_path, contract_document(mixed)))
    assert nesting_depth(contract.attribute("deep")) == levels + 1
    assert nesting_depth(contract.attribute("id")) == 0


def test_the_deepest_map_dynamodb_allows_is_refused_at_load_naming_file_and_attribute(tmp_path):
    path = write_contract(tmp_path, contract_document(nested_maps(DYNAMODB_DEEPEST_MAP)))
    with pytest.raises(ContractError) as refused:
        load_contract_file(path)
    message = str(refused.value)
    assert message.startswith(f"{path}: line ")
    assert "attributes.deep" in message and "'deep' nests 31 levels" in message
    assert f"at most {MAX_NESTING_DEPTH}" in message and "_extra_attributes" in message


@pytest.mark.parametrize("deep", [nested_maps(MAX_NESTING_DEPTH + 1), nested_lists(MAX_NESTING_DEPTH + 1)])
def test_one_level_over_the_limit_is_refused_and_the_limit_loads(tmp_path, deep):
    with pytest.raises(ContractError, match=f"nests {MAX_NESTING_DEPTH + 1} levels"):
        load_contract_file(write_contract(tmp_path, contract_document(deep)))
    at_limit = nested_maps(MAX_NESTING_DEPTH) if deep["type"] == "M" else nested_lists(MAX_NESTING_DEPTH)
    contract = load_contract(write_contract(tmp_path, contract_document(at_limit)))
    assert nesting_depth(contract.attribute("deep")) == MAX_NESTING_DEPTH


def test_an_entity_attribute_too_deep_is_refused_at_its_own_place(tmp_path):
    document = {
        "table": "app",
        "key": {"partition_key": "pk", "sort_key": "sk"},
        "attributes": {"pk": {"type": "S"}, "sk": {"type": "S"}},
        "partitioning": {"column": "pk_suffix", "expression": "substring(pk, -1, 1)"},
        "entities": {"users": {"raw_table": "app_users", "match": {"sort_key_prefix": "USER#"},
                               "attributes": {"profile": nested_maps(MAX_NESTING_DEPTH + 1)}}},
    }
    with pytest.raises(ContractError, match=r"entities\.users\.attributes\.profile: attribute 'profile' nests"):
        load_contract_file(write_contract(tmp_path, document))


def registered_too_deep(tmp_path):
    """The contract as an earlier version registered it, with the 31-level map (the loader
    now refuses it, so it is built here as that version loaded it), and the same contract
    cut down to the limit."""
    current = load_contract(write_contract(tmp_path, contract_document(nested_maps(MAX_NESTING_DEPTH))))
    deep = current.attribute("deep")
    too_deep = replace(deep, fields=(AttributeSpec("m", "m", "M", fields=deep.fields),))
    assert nesting_depth(too_deep) == DYNAMODB_DEEPEST_MAP
    return schema_document(replace(current, attributes=(current.attribute("id"), too_deep))), current


def test_removing_an_attribute_registered_too_deep_is_allowed_and_reported(tmp_path):
    registered, current = registered_too_deep(tmp_path)
    report = check_evolution(registered, replace(current, attributes=(current.attribute("id"),)))
    assert report.allowed and report.current_version != report.previous_version
    (removed,) = report.harmless
    assert removed.startswith("attribute 'deep': column 'deep' (M) -> removed: it nests 31 levels")
    assert "its column is dropped from the raw tables" in removed


def test_cutting_an_attribute_registered_too_deep_is_refused_with_the_way_out(tmp_path):
    registered, current = registered_too_deep(tmp_path)
    with pytest.raises(ContractEvolutionError) as refused:
        check_evolution(registered, current)
    message = str(refused.value)
    assert "attribute 'deep' was registered 31 levels of maps and lists deep" in message
    assert "remove it from the contract" in message and "lakehouse reprocess --to <new data root>" in message


def deepest_item(key: str) -> dict[str, Any]:
    """An item holding the deepest map DynamoDB accepts, a `name` beside each level's map."""
    value: dict[str, Any] = {"M": {"name": {"S": "level 31"}}}
    for level in range(DYNAMODB_DEEPEST_MAP - 1, 0, -1):
        value = {"M": {"name": {"S": f"level {level}"}, "m": value}}
    return {"id": {"S": key}, "deep": value}


def proposed_contract(tmp_path: Path, items: list[dict[str, Any]]):
    sample = ItemSample()
    for image in items:
        sample.add(image, keys={"id": image["id"]})
    proposal = infer_contract("things", sample)
    path = tmp_path / "things.yml"
    path.write_text(render_contract(proposal), encoding="utf-8")
    (contract,) = load_contract_file(path)
    return contract, path.read_text(encoding="utf-8")


def test_inference_proposes_the_deepest_map_down_to_the_limit_and_leaves_the_rest_out(tmp_path):
    contract, text = proposed_contract(tmp_path, [deepest_item(f"k{n}") for n in range(3)])
    deep = contract.attribute("deep")
    assert nesting_depth(deep) == MAX_NESTING_DEPTH
    innermost = deep
    for _ in range(MAX_NESTING_DEPTH - 1):
        innermost = next(field for field in innermost.fields if field.name == "m")
    assert [field.name for field in innermost.fields] == ["name"]
    assert f"a M nested {MAX_NESTING_DEPTH + 1} levels deep, deeper than the raw tables' readers follow" in text


def test_inference_leaves_out_a_chain_of_maps_too_deep_to_declare(tmp_path):
    """A map holding only the next map, 31 deep: no level can be declared without a field
    beyond the limit, so the attribute is left out whole, saying why, and lands in
    _extra_attributes."""
    chain: dict[str, Any] = {"S": "leaf"}
    for _ in range(DYNAMODB_DEEPEST_MAP):
        chain = {"M": {"m": chain}}
    contract, text = proposed_contract(tmp_path, [{"id": {"S": "k1"}, "deep": chain, "n": {"N": "1"}}])
    assert [spec.name for spec in contract.attributes] == ["id", "n"]
    assert "REVIEW: deep left out: a map whose fields nest deeper than the raw tables' readers follow" in text


def test_hudi_rs_reads_the_deepest_declarable_value_and_the_rest_is_in_extra_attributes(hudi_spark, tmp_path):
    """The inferred contract of an item 31 maps deep, streamed into Hudi: hudi-rs, as dbt and
    status read the raw tables, reads the table (30 levels of maps); the 31st level is kept
    as DynamoDB JSON in _extra_attributes."""
    image = deepest_item("k1")
    contracts = tmp_path / "contracts"
    contracts.mkdir()
    contract, text = proposed_contract(contracts, [image])
    layout = DataLayout(tmp_path / "data")
    landing = layout.landing / "2026" / "11" / "01" / "00"
    landing.mkdir(parents=True)
    record = {"eventID": "e1", "eventName": "INSERT", "recordFormat": "application/json", "tableName": "things",
              "eventSource": "aws:dynamodb", "dynamodb": {"ApproximateCreationDateTime": 1_793_492_213_000,
                                                          "Keys": {"id": image["id"]}, "NewImage": image,
                                                          "SizeBytes": len(json.dumps(image))}}
    (landing / "cdc-000001.jsonl").write_text(json.dumps(record) + "\n")
    stream(layout, sink="hudi", spark=hudi_spark, contracts_dir=str(contracts), out=lambda _: None)

    for table in (contract.raw_table, contract.changes_table):
        (row,) = read_hudi_snapshot(str(layout.root / "raw" / table)).to_pylist()
        value, levels = row["deep"], 1
        while "m" in value:
            value, levels = value["m"], levels + 1
        assert (levels, value["name"]) == (MAX_NESTING_DEPTH, f"level {MAX_NESTING_DEPTH}")
        beyond = image["deep"]
        for _ in range(MAX_NESTING_DEPTH):
            beyond = beyond["M"]["m"]
        assert json.loads(row["_extra_attributes"]) == {"deep" + ".m" * MAX_NESTING_DEPTH: beyond}


def test_only_a_column_too_deep_for_hudi_rs_may_leave_the_table():
    table = ("id", "deep", "name", "_meta")
    assert table_column_order(["id", "name", "_meta", "added"], table, droppable={"deep"}) == [
        "id", "name", "_meta", "added"]
    with pytest.raises(HudiSchemaError, match=r"\['name'\]"):
        table_column_order(["id", "_meta"], table, droppable={"deep"})


def changes_of(spark, contract, keys: list[str], batch: int, deep: Any = None):
    """A batch of the change log's rows for `keys`, each holding `deep` when the contract declares it."""
    schema = change_log_schema(contract)
    rows = []
    for key in keys:
        row = {name: None for name in schema.fieldNames()}
        row.update(id=key, id_suffix=key[-1], _event_name="INSERT", _is_deleted=False, _is_ttl_delete=False,
                   _ordering_value=f"{batch:020d}" + "0" * 64, _event_id=f"{key}-{batch}", _batch_id=batch,
                   _ingested_at=datetime(2026, 11, 1, tzinfo=timezone.utc), _ingest_hour="2026-11-01-00")
        if "deep" in schema.fieldNames():
            row["deep"] = deep
        rows.append(tuple(row[name] for name in schema.fieldNames()))
    return spark.createDataFrame(rows, schema)


def test_a_table_written_too_deep_reads_again_once_the_attribute_is_removed(hudi_spark, tmp_path):
    """A table an earlier version wrote with a 31-level map is unreadable to hudi-rs; once
    the contract no longer declares it, the sink's next write drops its column and hudi-rs
    reads every row again, those written before included."""
    _, current = registered_too_deep(tmp_path)
    deep = current.attribute("deep")
    too_deep_contract = replace(current, attributes=(
        current.attribute("id"), replace(deep, fields=(AttributeSpec("m", "m", "M", fields=deep.fields),))))
    value: Any = ("leaf",)
    for _ in range(DYNAMODB_DEEPEST_MAP - 1):
        value = (value,)
    raw = tmp_path / "raw"
    HudiSink(str(raw), "raw", {"things": too_deep_contract}, sync_mode="none", stream_id="s").write(
        changes_of(hudi_spark, too_deep_contract, ["k1", "k2"], 1, value), too_deep_contract, 1)
    with pytest.raises(UnreadableHudiTable, match="Failed to parse Avro schema"):
        read_hudi_snapshot(str(raw / "things"))

    without = replace(current, attributes=(current.attribute("id"),))
    HudiSink(str(raw), "raw", {"things": without}, sync_mode="none", stream_id="s").write(
        changes_of(hudi_spark, without, ["k2", "k3"], 2), without, 2)
    for table, expected in (("things", ["k1", "k2", "k3"]), ("things_changes", ["k1", "k2", "k2", "k3"])):
        read = read_hudi_snapshot(str(raw / table))
        assert "deep" not in read.column_names, table
        assert sorted(read.column("id").to_pylist()) == expected, table
        assert sorted(row.id for row in hudi_spark.read.format("hudi").load(str(raw / table)).collect()) == expected
