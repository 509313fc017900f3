"""Every value DynamoDB accepts lands on the Hudi sink as on the Parquet sink, or goes to the
quarantine with its reason while the rest of its batch lands: NULL inside lists and maps at
any depth, empty lists and maps, lists of mixed types (issue 45, item 0).

A NULL element of a list once failed every Hudi commit of its batch ("Array contains a null
element"), so the stream stopped on it for good: Hudi's Parquet writer wrote 2-level lists
(streaming/io/formats/hudi/options.py, HUDI_HADOOP_CONF). Expected values come from boto3's
TypeDeserializer, read back by hudi-rs (as dbt reads the raw tables) and by Spark.
"""
from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from hudi import HudiReadOptions, HudiTableBuilder

from contract_files import load_contract
from streaming.contracts.model import AttributeSpec, TableContract
from streaming.contracts.spark_schema import change_log_schema
from streaming.io.formats.hudi import sink as hudi_sink
from streaming.io.formats.hudi.options import HUDI_HADOOP_CONF, PARQUET_AVRO_OLD_LIST_STRUCTURE_KEY
from streaming.io.formats.hudi.sink import HudiSink
from streaming.io.layout import DataLayout
from streaming.operations.stream import stream

SHAPES_CONTRACT: dict[str, Any] = {
    "table": "shapes",
    "raw_table": "shapes",
    "description": "One item per shape of value.",
    "key": {"partition_key": "id"},
    "attributes": {
        "id": {"type": "S"},
        "scores": {"type": "L", "items": {"type": "N"}},
        "lines": {"type": "L", "items": {"type": "M", "fields": {"sku": {"type": "S"}, "qty": {"type": "N"}}}},
        "grid": {"type": "L", "items": {"type": "L", "items": {"type": "S"}}},
        "info": {"type": "M", "fields": {
            "label": {"type": "S"},
            "codes": {"type": "L", "items": {"type": "N"}},
            "nested": {"type": "M", "fields": {"note": {"type": "S"}}},
        }},
        "tags": {"type": "SS"},
    },
    "partitioning": {"column": "id_suffix", "expression": "substring(id, -1, 1)"},
}
NULL = {"NULL": True}

# Items that land: key -> the item's other attributes, as DynamoDB JSON.
LANDING_SHAPES: dict[str, dict[str, Any]] = {
    "null_in_list": {"scores": {"L": [{"N": "35"}, NULL]}},
    "null_map_in_list": {"lines": {"L": [{"M": {"sku": {"S": "a"}, "qty": {"N": "2"}}}, NULL,
                                         {"M": {"sku": NULL}}]}},
    "null_in_nested_list": {"grid": {"L": [{"L": [{"S": "x"}, NULL]}, NULL, {"L": []}]}},
    "null_in_map": {"info": {"M": {"label": NULL, "codes": {"L": [NULL, {"N": "7"}]},
                                   "nested": {"M": {"note": NULL}}}}},
    "null_at_every_level": {"grid": {"L": [{"L": [NULL]}]}, "lines": {"L": [NULL]},
                            "info": {"M": {"codes": {"L": [NULL]}, "nested": NULL}}, "scores": NULL},
    "empty_lists": {"scores": {"L": []}, "grid": {"L": [{"L": []}]}, "lines": {"L": []}},
    "empty_maps": {"info": {"M": {"nested": {"M": {}}}}, "lines": {"L": [{"M": {}}]}},
    "set_beside_lists": {"tags": {"SS": ["b", "a"]}, "scores": {"L": [{"N": "1.50"}, NULL]}},
    # Undeclared attributes and fields keep their NULLs in _extra_attributes.
    "undeclared_nulls": {"notes": {"L": [{"S": "n"}, NULL, {"M": {}}]},
                         "info": {"M": {"label": {"S": "l"}, "extra": {"L": [NULL]}}}},
}
# Items of lists holding another type than the contract declares: quarantined, with the reason.
QUARANTINED_SHAPES: dict[str, tuple[dict[str, Any], str]] = {
    "mixed_list": ({"scores": {"L": [{"N": "1"}, {"S": "two"}]}}, "type_mismatch:scores[]:N"),
    "mixed_nested_list": ({"grid": {"L": [{"L": [{"S": "x"}]}, {"L": [{"N": "1"}]}]}}, "type_mismatch:grid[][]:S"),
    # DynamoDB holds no null in a set (test_a_string_set_with_a_null_is_not_dynamodbs).
    "null_in_string_set": ({"tags": {"SS": ["a", None]}}, "type_mismatch:tags:SS"),
}
COMPARED = ["id", "scores", "lines", "grid", "info", "tags", "_extra_attributes"]


def item(key: str, attributes: dict[str, Any]) -> dict[str, Any]:
    return {"id": {"S": key}, **attributes}


def write_landing(layout: DataLayout, name: str, items: list[dict[str, Any]], at_ms: int) -> None:
    """Kinesis Data Streams for DynamoDB records of INSERTs, one JSON line each."""
    folder = layout.landing / "2026" / "11" / "01" / "00"
    folder.mkdir(parents=True, exist_ok=True)
    records = [
        {"eventID": f"{name}-{number}", "eventName": "INSERT", "recordFormat": "application/json",
         "tableName": "shapes", "eventSource": "aws:dynamodb",
         "dynamodb": {"ApproximateCreationDateTime": at_ms + number, "Keys": {"id": image["id"]},
                      "NewImage": image, "SizeBytes": len(json.dumps(image))}}
        for number, image in enumerate(items)
    ]
    (folder / f"{name}.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))


def raw_value(spec: AttributeSpec, value: Any) -> Any:
    """A deserialized DynamoDB value as the raw layer keeps it: numbers as their text, maps
    by column with a declared field absent as null, sets sorted (DynamoDB keeps no order)."""
    if value is None:
        return None
    if spec.type == "N":
        return str(value)
    if spec.type == "SS":
        return sorted(value)
    if spec.type == "L":
        assert spec.items is not None
        return [raw_value(spec.items, element) for element in value]
    if spec.type == "M":
        return {field.column: raw_value(field, value.get(field.name)) for field in spec.fields}
    return value


def expected_row(contract: TableContract, image: dict[str, Any]) -> dict[str, Any]:
    deserialize = TypeDeserializer().deserialize
    values = {name: deserialize(descriptor) for name, descriptor in image.items()}
    row = {spec.column: raw_value(spec, values.get(spec.name)) for spec in contract.attributes}
    extra = undeclared(contract, image)
    row["_extra_attributes"] = json.dumps(extra) if extra else None
    return row


def undeclared(contract: TableContract, image: dict[str, Any]) -> dict[str, Any] | None:
    """The image's undeclared attributes and M fields by document path, as DynamoDB JSON."""
    found: dict[str, Any] = {}

    def walk(specs: tuple[AttributeSpec, ...], fields: dict[str, Any], prefix: str) -> None:
        declared = {spec.name: spec for spec in specs}
        for name, descriptor in fields.items():
            spec = declared.get(name)
            if spec is None:
                found[prefix + name] = descriptor
            elif spec.type == "M" and "M" in descriptor:
                walk(spec.fields, descriptor["M"], f"{prefix}{name}.")

    walk(contract.attributes, image, "")
    return found or None


def comparable(row: dict[str, Any]) -> dict[str, Any]:
    """One form for the three readers' rows: sets sorted, _extra_attributes parsed."""
    row = {name: row[name] for name in COMPARED}
    row["tags"] = sorted(row["tags"]) if row["tags"] is not None else None
    row["_extra_attributes"] = json.loads(row["_extra_attributes"]) if row["_extra_attributes"] else None
    return row


def hudi_rs_rows(table: Path) -> dict[str, dict[str, Any]]:
    batches = HudiTableBuilder.from_base_uri(str(table)).build().read(HudiReadOptions())
    return {row["id"]: comparable(row) for row in pa.Table.from_batches(batches).to_pylist()}


def spark_rows_of(spark, table: Path) -> list[dict[str, Any]]:
    frame = spark.read.format("hudi").load(str(table)).select(*COMPARED)
    return [comparable(row.asDict(recursive=True)) for row in frame.collect()]


def spark_rows(spark, table: Path) -> dict[str, dict[str, Any]]:
    return {row["id"]: row for row in spark_rows_of(spark, table)}


def parquet_sink_rows(table: Path) -> dict[str, dict[str, Any]]:
    rows = [row for path in sorted(table.rglob("*.parquet")) for row in pq.ParquetFile(path).read().to_pylist()]
    return {row["id"]: comparable(row) for row in rows}


def quarantine_reasons(layout: DataLayout) -> dict[str, str]:
    reasons = {}
    for path in layout.quarantine.rglob("*.parquet"):
        for row in pq.ParquetFile(path).read(columns=["reason", "payload"]).to_pylist():
            key = json.loads(row["payload"])["dynamodb"]["Keys"]["id"]["S"]
            reasons[key] = row["reason"]
    return reasons


@pytest.fixture(scope="module")
def contracts_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("contracts")
    (folder / "shapes.yml").write_text(yaml.safe_dump(SHAPES_CONTRACT, sort_keys=False))
    return folder


@pytest.fixture(scope="module")
def contract(contracts_dir) -> TableContract:
    return load_contract(contracts_dir / "shapes.yml")


@pytest.fixture(scope="module")
def landed(hudi_spark, tmp_path_factory, contracts_dir) -> dict[str, DataLayout]:
    """Every shape in one batch, streamed once per sink."""
    items = [item(key, shape) for key, shape in LANDING_SHAPES.items()]
    items += [item(key, shape) for key, (shape, _) in QUARANTINED_SHAPES.items()]
    layouts = {}
    for sink in ("parquet", "hudi"):
        layout = DataLayout(tmp_path_factory.mktemp(f"values_{sink}") / "data")
        write_landing(layout, "cdc-000001", items, 1_793_492_213_000)
        stream(layout, sink=sink, spark=hudi_spark, contracts_dir=str(contracts_dir), out=lambda _: None)
        layouts[sink] = layout
    return layouts


@pytest.fixture(scope="module")
def read_back(hudi_spark, landed) -> dict[str, dict[str, dict[str, Any]]]:
    hudi_raw = landed["hudi"].root / "raw"
    return {
        "hudi-rs current state": hudi_rs_rows(hudi_raw / "shapes"),
        "hudi-rs change log": hudi_rs_rows(hudi_raw / "shapes_changes"),
        "spark current state": spark_rows(hudi_spark, hudi_raw / "shapes"),
        "parquet sink": parquet_sink_rows(landed["parquet"].root / "raw" / "shapes_changes"),
    }


@pytest.mark.parametrize("shape", list(LANDING_SHAPES))
def test_each_shape_lands_on_the_hudi_sink_as_dynamodb_holds_it(read_back, contract, shape):
    expected = comparable(expected_row(contract, item(shape, LANDING_SHAPES[shape])))
    for reader, rows in read_back.items():
        assert rows.get(shape) == expected, reader


@pytest.mark.parametrize("sink", ["hudi", "parquet"])
def test_lists_of_another_type_are_quarantined_with_their_reason_and_the_batch_lands(landed, read_back, sink):
    assert quarantine_reasons(landed[sink]) == {key: reason for key, (_, reason) in QUARANTINED_SHAPES.items()}
    reader = "parquet sink" if sink == "parquet" else "hudi-rs change log"
    assert sorted(read_back[reader]) == sorted(LANDING_SHAPES)


def test_a_string_set_with_a_null_is_not_dynamodbs():
    """boto3 reads `{"SS": ["a", null]}` as {"a", None} but refuses to write that set: DynamoDB
    cannot hold it, so the sinks quarantine it (QUARANTINED_SHAPES) rather than land a null."""
    descriptor = QUARANTINED_SHAPES["null_in_string_set"][0]["tags"]
    assert TypeDeserializer().deserialize(descriptor) == {"a", None}
    with pytest.raises(TypeError, match="Unsupported type"):
        TypeSerializer().serialize({"a", None})


def test_hudi_writes_three_level_lists_under_parquet_avros_own_key(hudi_spark, landed):
    """The key is parquet-avro's AvroWriteSupport.WRITE_OLD_LIST_STRUCTURE, as the bundle's
    classes spell it, and the files Hudi wrote hold lists as `<name>.list.element`."""
    loader = hudi_spark.sparkContext._jvm.java.lang.Thread.currentThread().getContextClassLoader()
    support = loader.loadClass("org.apache.parquet.avro.AvroWriteSupport")
    assert support.getField("WRITE_OLD_LIST_STRUCTURE").get(None) == PARQUET_AVRO_OLD_LIST_STRUCTURE_KEY
    assert HUDI_HADOOP_CONF == {PARQUET_AVRO_OLD_LIST_STRUCTURE_KEY: "false"}
    for table in ("shapes", "shapes_changes"):
        files = list((landed["hudi"].root / "raw" / table).rglob("*.parquet"))
        assert files and {list_structure(path) for path in files} == {"new"}, table


def test_the_sink_sets_the_list_structure_on_a_session_it_did_not_build(spark, contract, tmp_path):
    """Glue builds its own session (streaming/runtime/glue_job.py), without local_session's
    settings: the sink sets the key on it before writing."""
    schema = change_log_schema(contract)
    row = {name: None for name in schema.fieldNames()}
    row.update(id="k1", id_suffix="1", _event_name="INSERT", _is_deleted=False, _is_ttl_delete=False,
               _ordering_value="0" * 84, _batch_id=1, _ingest_hour="2026-11-01-00")
    changes = spark.createDataFrame([tuple(row[name] for name in schema.fieldNames())], schema)
    written: list[str] = []
    hadoop_conf = spark.sparkContext._jsc.hadoopConfiguration()
    hadoop_conf.unset(PARQUET_AVRO_OLD_LIST_STRUCTURE_KEY)
    try:
        assert hadoop_conf.get(PARQUET_AVRO_OLD_LIST_STRUCTURE_KEY) is None
        sink = HudiSink(str(tmp_path), "raw", {"shapes": contract}, sync_mode="none", stream_id="s",
                        writer=lambda df, options, path: written.append(path))
        sink.write(changes, contract, 1, rows=1)
        assert written, "the sink wrote"
        assert hadoop_conf.get(PARQUET_AVRO_OLD_LIST_STRUCTURE_KEY) == "false"
    finally:
        hadoop_conf.set(PARQUET_AVRO_OLD_LIST_STRUCTURE_KEY, "false")


# Keys of one partition (`x`): more than its four buckets, so some file group holds two.
OLD_KEYS = [f"{letter}-x" for letter in "abcdefgh"]
CHANGES = LANDING_SHAPES["null_in_nested_list"] | LANDING_SHAPES["null_in_list"]


def old_values(key: str) -> dict[str, Any]:
    return {"scores": {"L": [{"N": "1"}]}, "grid": {"L": [{"L": [{"S": key}]}]},
            "info": {"M": {"codes": {"L": [{"N": "2"}]}}}}


@pytest.fixture(scope="module")
def old_then_new(hudi_spark, tmp_path_factory, contracts_dir) -> tuple[DataLayout, set[str]]:
    """A table written with the old 2-level lists (the writer's default, as before this
    setting), then upserted with NULL elements under the 3-level lists: the first key of
    each file group changes, so a group of two keys is merged, its other record old."""
    layout = DataLayout(tmp_path_factory.mktemp("old_lists") / "data")
    write_landing(layout, "cdc-000001", [item(key, old_values(key)) for key in OLD_KEYS], 1_793_492_213_000)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(hudi_sink, "HUDI_HADOOP_CONF", {PARQUET_AVRO_OLD_LIST_STRUCTURE_KEY: "true"})
        stream(layout, sink="hudi", spark=hudi_spark, contracts_dir=str(contracts_dir), out=lambda _: None)
    groups = [sorted(row["id"] for row in pq.ParquetFile(path).read(columns=["id"]).to_pylist())
              for path in (layout.root / "raw" / "shapes").rglob("*.parquet")]
    assert max(map(len, groups)) > 1, "a file group holds two keys"
    changed = {group[0] for group in groups}
    write_landing(layout, "cdc-000002", [item(key, CHANGES) for key in sorted(changed)], 1_793_492_299_000)
    stream(layout, sink="hudi", spark=hudi_spark, contracts_dir=str(contracts_dir), out=lambda _: None)
    return layout, changed


def list_structure(path: Path) -> str:
    """`old` for a 2-level list (`scores.array`), `new` for a 3-level one (`scores.list.element`)."""
    columns = {column.path for column in pq.ParquetFile(path).schema}
    return "new" if "scores.list.element" in columns else "old"


def test_a_table_of_old_list_files_takes_new_ones_and_reads_whole(hudi_spark, contract, old_then_new):
    layout, changed = old_then_new
    table = layout.root / "raw" / "shapes"
    structures = {list_structure(path) for path in (layout.root / "raw" / "shapes_changes").rglob("*.parquet")}
    assert structures == {"old", "new"}, "the change log holds files of both structures"
    # A file group the upsert rewrote holds a key it did not change: Hudi merged an old record.
    merged = [row["id"] for path in table.rglob("*.parquet") if list_structure(path) == "new"
              for row in pq.ParquetFile(path).read(columns=["id"]).to_pylist()]
    assert set(merged) - changed, "some old record went through a merge into a new file"

    expected = {key: comparable(expected_row(contract, item(key, CHANGES if key in changed else old_values(key))))
                for key in OLD_KEYS}
    assert hudi_rs_rows(table) == expected
    assert spark_rows(hudi_spark, table) == expected
    # The change log, which dbt reads, holds both structures side by side: every change reads.
    change_log = layout.root / "raw" / "shapes_changes"
    batches = HudiTableBuilder.from_base_uri(str(change_log)).build().read(HudiReadOptions())
    read_by_rs = sorted((row["id"], row["scores"]) for row in pa.Table.from_batches(batches).to_pylist())
    assert read_by_rs == sorted([(key, ["1"]) for key in OLD_KEYS] + [(key, ["35", None]) for key in changed])
    read_by_spark = spark_rows_of(hudi_spark, change_log)
    assert sorted((row["id"], row["scores"]) for row in read_by_spark) == read_by_rs
