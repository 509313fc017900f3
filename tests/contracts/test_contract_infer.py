"""`lakehouse contract infer` (streaming/contracts/inference/, io/item_samples.py):
every proposal here is loaded with the unchanged loader, then compared with what the
hand-written contracts say, or with what a hostile sample must give."""
from __future__ import annotations

import gzip
import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from cli_processes import fresh_python
from streaming.cli import main
from streaming.contracts.inference.contract import infer_contract
from streaming.contracts.inference.render import render_contract, report
from streaming.contracts.inference.sample import InferenceError, ItemSample
from streaming.contracts.loader import load_contract_file, load_contracts
from streaming.contracts.model import TableContract
from streaming.io.item_samples import sample_export, sample_file, sample_landing
from streaming.samples.export_writer import write_full_export, write_incremental_export
from streaming.samples.generator import generate_cdc, land_cdc

FIXTURES = Path(__file__).parents[1] / "fixtures" / "inference"
ONLINE_SHOP = FIXTURES / "AnOnlineShop_facets.json"


@pytest.fixture(scope="module")
def generated():
    # No malformed records: the tests below compare with the packaged contracts, and a
    # record built to be quarantined (an amount sent as S) is a conflict by design.
    return generate_cdc(seed=11, customers=40, tenants=15, malformed_rate=0.0)


@pytest.fixture(scope="module")
def records_file(generated, tmp_path_factory):
    path = tmp_path_factory.mktemp("records") / "records.jsonl"
    path.write_text("\n".join(generated.records) + "\n", encoding="utf-8")
    return path


def proposed(table: str, sample: ItemSample, tmp_path: Path, **options) -> dict[str, TableContract]:
    """Infer, write and load the proposal as `lakehouse contract infer --out` would."""
    path = tmp_path / f"{table}.yml"
    path.write_text(render_contract(infer_contract(table, sample, **options)), encoding="utf-8")
    return {contract.raw_table: contract for contract in load_contract_file(path)}


def spec_of(contract: TableContract) -> dict[str, tuple]:
    """attribute -> (type, column, cast, item type, field names): what decides a raw column and its cast."""
    return {a.name: (a.type, a.column, a.cast, a.items.type if a.items else None, tuple(f.name for f in a.fields))
            for a in contract.attributes}


def items_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


# --------------------------------------------------------------------------- the generator's tables


def test_app_inference_finds_tenants_users_and_invoices_with_the_rules_and_types_of_app_yml(records_file, tmp_path):
    inferred = proposed("app", sample_file(records_file, "app", 10_000), tmp_path)
    packaged = load_contracts()
    for raw_table in ("app_tenants", "app_users", "app_invoices"):
        assert inferred[raw_table].route == packaged[raw_table].route
        hand_written = spec_of(packaged[raw_table])
        # Every attribute app.yml declares is inferred alike; inference may add what the
        # generator writes beyond it (an invoice's rare purchaseOrder).
        assert {name: spec_of(inferred[raw_table])[name] for name in hand_written} == hand_written
    assert inferred["app_users"].attribute("email").pii
    assert inferred["app_invoices"].attribute("purchaseOrder").type == "S"


def test_app_audit_and_api_key_items_become_entities_of_their_own_never_mixed_into_another(records_file, tmp_path):
    inferred = proposed("app", sample_file(records_file, "app", 10_000), tmp_path)
    assert inferred["app_audits"].route.sort_key_prefix == "AUDIT#"
    assert inferred["app_apikeys"].route.sort_key_prefix == "APIKEY#"
    audit_only = {"action", "actor", "at"}
    api_key_only = {"label", "scopes", "lastUsedAt"}
    for raw_table, contract in inferred.items():
        names = {a.name for a in contract.attributes}
        assert (names & audit_only) == (audit_only if raw_table == "app_audits" else set())
        assert (names & api_key_only) == (api_key_only if raw_table == "app_apikeys" else set())
    # `at` is reserved in DuckDB: the column is named apart, as names.py asks.
    assert inferred["app_audits"].attribute("at").column == "at_value"


def test_a_kind_with_too_few_items_stays_unrouted_with_its_count_and_an_example_key(records_file, tmp_path):
    sample = sample_file(records_file, "app", 10_000)
    api_keys = sum(1 for item in sample.items.values() if item["sk"]["S"].startswith("APIKEY#"))
    proposal = infer_contract("app", sample, min_entity_items=api_keys + 1)
    assert "apikeys" not in [entity.name for entity in proposal.entities]
    unrouted = next(kind for kind in proposal.unrouted if kind.kind == "APIKEY#")
    assert unrouted.items == api_keys and "sk=APIKEY#" in unrouted.example_key
    text = render_contract(proposal)
    assert f"unrouted kind APIKEY#: {api_keys} item(s), e.g. pk=TENANT#" in text
    (tmp_path / "app.yml").write_text(text)
    assert "app_apikeys" not in {c.raw_table for c in load_contract_file(tmp_path / "app.yml")}


@pytest.mark.parametrize("table", ["customers", "orders"])
def test_plain_tables_are_inferred_as_their_packaged_contracts_declare_them(table, records_file, tmp_path):
    inferred = proposed(table, sample_file(records_file, table, 10_000), tmp_path)
    hand_written = load_contracts()[table]
    assert list(inferred) == [table]
    contract = inferred[table]
    assert (contract.partition_key, contract.sort_key) == (hand_written.partition_key, hand_written.sort_key)
    expected = spec_of(hand_written)
    if table == "orders":
        # The generator writes amounts of 38 significant digits (20 before the point, 18
        # after): decimal(38,18) is the one cast every sampled amount fits; orders.yml's
        # decimal(18,2) turns those into null in staging.
        expected["amount"] = ("N", "amount", "decimal(38,18)", None, ())
        # promoCode is on 5% of the orders, beyond orders.yml.
        assert spec_of(contract).pop("promoCode") == ("S", "promo_code", None, None, ())
    assert {name: spec for name, spec in spec_of(contract).items() if name != "promoCode"} == expected
    # giftMessage is free text, PII by what people write into it: nothing in its name or shape says so.
    hand_written_pii = {a.name for a in hand_written.attributes if a.pii} - {"giftMessage"}
    assert {a.name for a in contract.attributes if a.pii} == hand_written_pii


def test_both_aws_record_shapes_give_the_same_contract(tmp_path):
    contracts = []
    for record_format in ("streams", "kinesis"):
        landing = tmp_path / record_format / "landing"
        land_cdc(landing, generate_cdc(seed=5, customers=10, tenants=6, malformed_rate=0.0,
                                       record_format=record_format), file_layout="firehose", gzip=True)
        sample = sample_landing(landing, "app", 10_000)
        assert sample.skipped["of another table"] > 0
        contracts.append({name: (c.route, spec_of(c)) for name, c in proposed("app", sample, tmp_path).items()})
    assert contracts[0] == contracts[1]
    assert set(contracts[0]) >= {"app_tenants", "app_users", "app_invoices", "app_unrouted"}


def test_a_full_export_without_keys_needs_the_key_named_and_then_matches_the_contract(generated, tmp_path):
    items = [item for item in generated.expected_state["customers"].values() if item is not None]
    export = write_full_export(tmp_path / "export", "customers", items, datetime(2026, 11, 2, tzinfo=timezone.utc))
    sample = sample_export(export, "customers", 10_000)
    assert len(sample.items) == len(items) and not sample.key_names
    with pytest.raises(InferenceError, match="give the key with --key"):
        infer_contract("customers", sample)
    inferred = proposed("customers", sample, tmp_path, key=["id", "custName"])
    assert spec_of(inferred["customers"]) == spec_of(load_contracts()["customers"])


def test_an_incremental_export_gives_the_keys_from_its_records(generated, tmp_path):
    start, end = datetime(2026, 11, 1, tzinfo=timezone.utc), datetime(2026, 11, 3, tzinfo=timezone.utc)
    export = write_incremental_export(tmp_path / "export", "app", generated.changes_between("app_users", start, end),
                                      start, end)
    inferred = proposed("app", sample_export(export, "app", 10_000), tmp_path)
    # Users only: one kind of item, so one raw table, keyed as the records' Keys say.
    assert list(inferred) == ["app"]
    assert (inferred["app"].partition_key, inferred["app"].sort_key) == ("pk", "sk")
    assert inferred["app"].attribute("lastLoginAt").cast == "timestamp"


# --------------------------------------------------------------------------- a public single-table model


def test_public_online_shop_model_routes_by_entity_type_and_leaves_the_single_invoice_unrouted(tmp_path):
    proposal = infer_contract("OnlineShop", sample_file(ONLINE_SHOP, "OnlineShop", 10_000))
    inferred = proposed("OnlineShop", sample_file(ONLINE_SHOP, "OnlineShop", 10_000), tmp_path)
    assert {name: c.route.equals for name, c in inferred.items() if c.route} == {
        "online_shop_customers": "customer", "online_shop_products": "product",
        "online_shop_warehouses": "warehouse", "online_shop_warehouse_items": "warehouseItem",
        "online_shop_order_items": "orderItem", "online_shop_shipments": "shipment",
        "online_shop_shipment_items": "shipmentItem", "online_shop_payments": "payment"}
    assert [(k.kind, k.items, k.example_key) for k in proposal.unrouted] == [
        ("invoice", 1, "PK=o#12345, SK=i#55443")]
    assert inferred["online_shop_customers"].attribute("Email").pii
    shipments = inferred["online_shop_shipments"]
    assert shipments.attribute("GSI1-PK").column == "gsi1_pk"
    # `Date` is reserved in Athena's DDL; every value is an ISO-8601 date-time.
    assert (shipments.attribute("Date").column, shipments.attribute("Date").cast) == ("date_value", "timestamp")
    # Prices are numbers written as S: no cast reads them, and the report says so.
    assert any("Price" in point and "numbers written as text" in point
                                for point in proposal.undecided)


# --------------------------------------------------------------------------- hostile samples


def item(pk: str, sk: str, **attributes) -> dict:
    return {"pk": {"S": pk}, "sk": {"S": sk}, **attributes}


def sample_of(items: list[dict], max_items: int = 10_000) -> ItemSample:
    sample = ItemSample(max_items)
    for image in items:
        sample.add(image, {"pk": image["pk"], "sk": image["sk"]})
    return sample


def test_an_attribute_of_two_types_is_left_out_reported_and_the_proposal_still_loads(tmp_path):
    items = [item("A#1", f"B#{n}", size={"N": str(n)} if n % 2 else {"S": "large"}, colour={"S": "red"})
             for n in range(10)]
    proposal = infer_contract("things", sample_of(items))
    assert proposal.conflicts == ["attributes: size seen as N 5x, S 5x"]
    assert "REVIEW: size left out: seen as N (5 items) and S (5 items)" in render_contract(proposal)
    loaded = proposed("things", sample_of(items), tmp_path)["things"]
    assert [a.name for a in loaded.attributes] == ["pk", "sk", "colour"]


def test_an_empty_sample_is_refused_with_what_was_read(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(InferenceError, match="no item of table 'app' in the sample \\(0 records read\\)"):
        infer_contract("app", sample_file(empty, "app", 100))
    other_table = tmp_path / "other.jsonl"
    other_table.write_text(json.dumps({"tableName": "orders", "dynamodb": {"NewImage": item("a", "b")}}) + "\n")
    with pytest.raises(InferenceError, match="1 of another table"):
        infer_contract("app", sample_file(other_table, "app", 100))


def test_a_400_kb_item_is_read_and_inferred(tmp_path):
    large = item("DOC#1", "DOC#1", body={"S": "x" * 400_000})
    landing = tmp_path / "landing"
    landing.mkdir()
    record = {"tableName": "docs", "eventName": "INSERT",
              "dynamodb": {"Keys": {"pk": large["pk"], "sk": large["sk"]}, "NewImage": large}}
    (landing / "cdc-000001.jsonl.gz").write_bytes(gzip.compress((json.dumps(record) + "\n").encode()))
    loaded = proposed("docs", sample_landing(landing, "docs", 10), tmp_path)["docs"]
    assert loaded.attribute("body").type == "S"


def test_keys_without_a_common_prefix_give_one_raw_table(tmp_path):
    items = [item(f"{word}-{n}", f"{n:04d}", note={"S": "n"}) for n, word in enumerate(["alpha", "beta", "x"] * 4)]
    proposal = infer_contract("notes", sample_of(items))
    assert proposal.raw_table == "notes" and not proposal.entities
    assert "no key prefix tells kinds apart" in proposal.routing


def test_a_key_without_prefix_among_prefixed_ones_stays_unrouted(tmp_path):
    items = ([item("T#1", f"USER#{n}", email={"S": f"u{n}@example.com"}) for n in range(3)]
             + [item("T#1", f"INVOICE#{n}", total={"N": "1.5"}) for n in range(3)]
             + [item("T#1", "settings", theme={"S": "dark"})])
    proposal = infer_contract("app", sample_of(items))
    assert [e.match for e in proposal.entities] == [{"sort_key_prefix": "INVOICE#"}, {"sort_key_prefix": "USER#"}]
    assert [(k.items, k.why) for k in proposal.unrouted] == [(1, "its sort key has no `KIND#` prefix to match on")]
    assert set(proposed("app", sample_of(items), tmp_path)) == {"app_invoices", "app_users", "app_unrouted"}


def test_kinds_one_prefix_cannot_tell_apart_stay_unrouted(tmp_path):
    items = ([item("C#1", f"ORDER#{n}", total={"N": "3"}) for n in range(3)]
             + [item("C#1", f"ORDER#{n}#LINE#{m}", sku={"S": "s"}) for n in range(3) for m in range(2)]
             + [item("C#1", f"PROFILE#{n}", email={"S": "c@example.com"}) for n in range(2)])
    proposal = infer_contract("shop", sample_of(items))
    assert [e.name for e in proposal.entities] == ["profiles"]
    (ambiguous,) = proposal.unrouted
    assert ambiguous.items == 9 and "ORDER#* / ORDER#*#LINE#*" in ambiguous.why


def test_a_discriminator_attribute_wins_over_key_prefixes(tmp_path):
    items = ([item("C#1", f"ORDER#{n}", _et={"S": "order"}, total={"N": "3"}) for n in range(3)]
             + [item("C#1", f"ORDER#{n}#LINE#1", _et={"S": "line"}, sku={"S": "s"}) for n in range(3)])
    loaded = proposed("shop", sample_of(items), tmp_path)
    assert {c.raw_table: c.route.equals for c in loaded.values() if c.route} == {"shop_orders": "order",
                                                                              "shop_lines": "line"}


def test_kinds_told_apart_only_by_both_prefixes_get_rules_on_both_keys(tmp_path):
    items = ([item(f"ORG#{n}", "META#", title={"S": "org"}) for n in range(2)]
             + [item(f"USER#{n}", "META#", email={"S": f"u{n}@example.com"}) for n in range(2)]
             + [item(f"USER#{n}", f"ORDER#o{n}{m}", total={"N": "2.5"}) for n in range(2) for m in range(2)])
    loaded = proposed("shop", sample_of(items), tmp_path)
    # `META#` is each item's own record, so its partition key names it; an order is the
    # user's, named by both keys.
    assert {c.raw_table: (c.route.partition_key_prefix, c.route.sort_key_prefix)
            for c in loaded.values() if c.route} == {
        "shop_orgs": ("ORG#", "META#"), "shop_users": ("USER#", "META#"), "shop_user_orders": ("USER#", "ORDER#")}


def test_an_unnamed_attribute_whose_values_own_attributes_is_a_discriminator(tmp_path):
    items = ([{"id": {"S": f"a{n}"}, "rec": {"S": "author"}, "born": {"S": "1970-01-01"}} for n in range(3)]
             + [{"id": {"S": f"b{n}"}, "rec": {"S": "book"}, "isbn": {"S": "978"}} for n in range(3)])
    sample = ItemSample()
    for image in items:
        sample.add(image, {"id": image["id"]})
    proposal = infer_contract("library", sample)
    assert [(e.name, e.match) for e in proposal.entities] == [
        ("authors", {"attribute": "rec", "equals": "author"}), ("books", {"attribute": "rec", "equals": "book"})]
    assert proposal.entities[0].attributes[0].cast == "date"


def test_a_sample_file_may_mix_export_lines_items_and_records_of_other_tables(tmp_path):
    lines = [{"Item": item("A#1", "B#1")},
             {"Keys": {"pk": {"S": "A#2"}, "sk": {"S": "B#2"}}, "OldImage": item("A#2", "B#2")},
             item("A#3", "B#3"),
             {"eventSourceARN": "arn:aws:dynamodb:eu-west-1:1:table/other/stream/x", "dynamodb": {"NewImage": item("x", "y")}},
             {"eventSourceARN": "arn:aws:dynamodb:eu-west-1:1:table/things/stream/x", "eventName": "REMOVE",
              "dynamodb": {"Keys": {"pk": {"S": "A#4"}, "sk": {"S": "B#4"}}, "OldImage": item("A#4", "B#4")}}]
    path = tmp_path / "sample.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\nnot json\n")
    sample = sample_file(path, "things", 100)
    assert sorted(image["pk"]["S"] for image in sample.items.values()) == ["A#1", "A#2", "A#3", "A#4"]
    assert dict(sample.skipped) == {"of another table": 1, "unreadable record (invalid_json)": 1}


def test_a_status_on_every_item_is_no_discriminator():
    items = [item(f"c{n}", f"o{n}", status={"S": ["PAID", "PLACED"][n % 2]}, total={"N": "2"}) for n in range(20)]
    assert infer_contract("orders", sample_of(items)).entities == []


def test_attribute_names_differing_only_in_case_keep_one(tmp_path):
    items = [item("A#1", f"B#{n}", Status={"S": "x"}, status={"S": "y"}) for n in range(3)]
    loaded = proposed("things", sample_of(items), tmp_path)["things"]
    assert [a.name for a in loaded.attributes] == ["pk", "sk", "Status"]


def test_reserved_words_and_model_columns_get_columns_of_their_own(tmp_path):
    items = [item("A#1", f"B#{n}", order={"S": "o"}, end={"S": "e"}, changeRank={"N": "1"}, **{"2fa": {"BOOL": True}})
             for n in range(3)]
    loaded = proposed("things", sample_of(items), tmp_path)["things"]
    assert {a.name: a.column for a in loaded.attributes if a.name not in ("pk", "sk")} == {
        "order": "order_value", "end": "end_value", "changeRank": "change_rank_value", "2fa": "attr_2fa"}


def test_hostile_names_and_values_never_make_a_proposal_the_loader_refuses(tmp_path):
    items = [item("A#1", f"B#{n}", type={"S": "{{ evil }}" if n % 2 else "on"}, weird={"X": "1"},
                  **{"on": {"S": "y"}, "key: colon": {"S": "z"}, "multi\nline": {"S": "w"}})
             for n in range(6)]
    loaded = proposed("things", sample_of(items), tmp_path)
    assert {c.raw_table: c.route.equals for c in loaded.values() if c.route} == {"things_evils": "{{ evil }}",
                                                                              "things_ons": "on"}
    columns = {a.name: a.column for a in loaded["things_evils"].attributes}
    assert columns == {"pk": "pk", "sk": "sk", "type": "type", "on": "on_value", "key: colon": "key_colon",
                       "multi\nline": "multi_line"}
    assert "{{" not in loaded["things_evils"].description


def test_casts_are_proposed_only_when_every_sampled_value_fits():
    items = [item("A#1", f"B#{n}",
                  at={"S": "2026-11-01T10:00:00Z" if n else "yesterday"},
                  day={"S": "2026-11-01"},
                  price={"N": ["1.5", "20.125", "3"][n % 3]},
                  count={"N": str(n)},
                  seen={"N": str(1_767_225_600 + n)},
                  flag={"S": "true" if n % 2 else "false"},
                  ratio={"N": "1E+3"})
             for n in range(6)]
    attributes = {a.name: a for a in infer_contract("things", sample_of(items)).shared}
    assert {name: attributes[name].cast for name in ("at", "day", "price", "count", "seen", "flag", "ratio")} == {
        "at": None, "day": "date", "price": "decimal(18,3)", "count": "bigint", "seen": "bigint", "flag": None,
        "ratio": None}
    assert attributes["at"].undecided == ["5 of 6 values are ISO-8601 dates or times, the rest are not: "
                                          "no cast proposed"]
    assert "epoch seconds" in attributes["seen"].undecided[0]
    assert "no cast reads text as boolean" in attributes["flag"].undecided[0]
    assert "exponent notation" in attributes["ratio"].undecided[0]


def test_every_proposed_cast_is_one_staging_applies_none_inside_a_list():
    """Issue 45 C2: casts were proposed inside lists (`lines[].qty`, a list of numbers), which
    staging keeps as raw has them: typed and checked nowhere. A map field's cast stays: the
    scaffolded staging types it in a column of its own. A number key is cast (C3)."""
    items = [{"id": {"N": str(n)}, "scores": {"L": [{"N": "1.5"}, {"N": str(n)}]},
              "lines": {"L": [{"M": {"qty": {"N": str(n)}, "size": {"M": {"cm": {"N": "2"}}}}}]},
              "info": {"M": {"rating": {"N": f"7.{n}"}}}} for n in range(4)]
    sample = ItemSample(10_000)
    for image in items:
        sample.add(image, {"id": image["id"]})
    attributes = {a.name: a for a in infer_contract("scores", sample).shared}
    assert attributes["id"].cast == "bigint"
    assert attributes["info"].fields[0].cast == "decimal(18,1)"
    assert attributes["scores"].items.cast is None
    (line,) = [attributes["lines"].items]
    qty, size = line.fields
    assert (qty.cast, size.fields[0].cast) == (None, None)
    assert qty.notes == ["no cast: each value seen is an integer (4 values) (bigint would fit); staging keeps a list "
                         "as raw has it, so add the cast when a model of yours unnests the list (typed_by_contract "
                         "with the element's path)"]


def test_pii_is_proposed_from_names_and_value_shapes_and_marked_for_review():
    items = [item("A#1", f"B#{n}", contact={"S": f"p{n}@example.org"}, mobile={"S": "+44 20 7946 0000"},
                  origin={"S": f"10.0.0.{n}"}, firstName={"S": "Ana"}, name={"S": "Acme"}, plan={"S": "FREE"})
             for n in range(4)]
    proposal = infer_contract("people", sample_of(items))
    assert {a.name for a in proposal.shared if a.pii} == {"contact", "mobile", "origin", "firstName"}
    text = render_contract(proposal)
    assert text.count("pii: PROPOSED, confirm") == 4
    assert any(point.startswith("attributes.name: named like a name") for point in proposal.undecided)


def test_max_items_bounds_the_sample_and_the_output_says_so(records_file):
    sample = sample_file(records_file, "app", 25)
    assert len(sample.items) == 25 and sample.stopped_early
    proposal = infer_contract("app", sample)
    assert "stopped at --max-items 25" in render_contract(proposal)
    assert report(proposal)["sample"] == {"items": 25, "records_read": sample.records_read, "max_items": 25,
                                         "stopped_at_max_items": True, "skipped": dict(sample.skipped),
                                         "earlier_images": sample.earlier_images,
                                         "earlier_images_left_out": sample.earlier_left_out}


def test_inference_runs_where_pyspark_is_absent():
    # A None entry makes any `import pyspark` raise ImportError in the fresh interpreter.
    probe = (
        "import sys; sys.modules['pyspark'] = None; "
        "from streaming.contracts.inference.contract import infer_contract; "
        "from streaming.contracts.inference.render import render_contract; "
        "from streaming.contracts.inference.sample import ItemSample; "
        "sample = ItemSample(); "
        "[sample.add({'pk': {'S': f'T#{n}'}, 'sk': {'S': f'{kind}#{n}'}}, None) for kind in ('A', 'B') for n in range(3)]; "
        "print(render_contract(infer_contract('things', sample)).count('sort_key_prefix'))"
    )
    completed = fresh_python(probe)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == "2"


# --------------------------------------------------------------------------- the command


def test_contract_infer_command_writes_a_loadable_contract_and_its_report(tmp_path, capsys):
    out, report_file = tmp_path / "contracts" / "OnlineShop.yml", tmp_path / "report.json"
    out.parent.mkdir()
    argv = ["contract", "infer", "--table", "OnlineShop", "--sample", str(ONLINE_SHOP), "--out", str(out),
            "--report", str(report_file)]
    assert main(argv) == 0
    assert len(load_contract_file(out)) == 9
    written = json.loads(report_file.read_text())
    assert written["columns"]["online_shop_shipments"]["Date"] == "date_value"
    assert [entity["items"] for entity in written["entities"]] == [3, 3, 3, 2, 2, 2, 2, 2]
    assert "online_shop_unrouted: 1 items" in capsys.readouterr().out
    # A second run never overwrites the reviewed file without --force.
    assert main(argv) == 2
    assert f"--out {out} exists; infer never overwrites a file unless --force" in capsys.readouterr().err


# --------------------------------------------------------------------------- single-table designs in public shapes


BATTLE_ROYALE = FIXTURES / "battle_royale.jsonl"
CONSTANT_SORT_KEYS = FIXTURES / "constant_sort_keys.jsonl"
GITHUB = FIXTURES / "github_accounts.jsonl"


def routes_of(contracts: dict[str, TableContract]) -> dict[str, dict[str, str]]:
    return {name: {field: value for field, value in vars(c.route).items() if value is not None}
            for name, c in contracts.items() if c.route is not None}


def test_an_items_own_record_under_a_metadata_sort_key_is_named_and_routed_by_its_partition_key(tmp_path):
    # Pattern A1 in the AWS gaming tutorial's shape: users and games both under `#METADATA#<id>`.
    proposal = infer_contract("BattleRoyale", sample_file(BATTLE_ROYALE, "BattleRoyale", 10_000))
    assert proposal.unrouted == []
    routes = routes_of(proposed("BattleRoyale", sample_file(BATTLE_ROYALE, "BattleRoyale", 10_000), tmp_path))
    assert routes["battle_royale_users"] == {"partition_key_prefix": "USER#", "sort_key_prefix": "#METADATA#"}
    assert routes["battle_royale_games"] == {"partition_key_prefix": "GAME#", "sort_key_prefix": "#METADATA#"}
    games = next(entity for entity in proposal.entities if entity.name == "games")
    assert "its sort key (#METADATA#*) marks the item's own record" in games.named
    assert "named from its partition key" in render_contract(proposal)


def test_constant_sort_keys_get_an_exact_sort_key_rule_beside_their_partition_key_prefix(tmp_path):
    # Pattern A1 with constants (`PROFILE` under users and under orgs, `root`, `METADATA`).
    routes = routes_of(proposed("Accounts", sample_file(CONSTANT_SORT_KEYS, "Accounts", 10_000), tmp_path))
    assert {name: route for name, route in routes.items() if "sort_key_equals" in route} == {
        "accounts_users": {"partition_key_prefix": "USER#", "sort_key_equals": "PROFILE"},
        "accounts_orgs": {"partition_key_prefix": "ORG#", "sort_key_equals": "PROFILE"},
        "accounts_devices": {"partition_key_prefix": "DEVICE#", "sort_key_equals": "root"},
        "accounts_orders": {"partition_key_prefix": "ORDER#", "sort_key_equals": "METADATA"}}


def test_a_kind_holding_one_value_in_its_sort_key_is_one_entity_not_one_shape_per_value(tmp_path):
    # Pattern A2: `state#OR`, `state#WA`, ... and `STATUS#SHIPPED`, `STATUS#PAID`, ...
    proposal = infer_contract("Accounts", sample_file(CONSTANT_SORT_KEYS, "Accounts", 10_000))
    assert proposal.unrouted == []
    by_name = {entity.name: entity for entity in proposal.entities}
    assert (by_name["country_states"].items, by_name["country_states"].match) == (
        15, {"partition_key_prefix": "COUNTRY#", "sort_key_prefix": "state#"})
    assert (by_name["order_statuses"].items, by_name["order_statuses"].match) == (
        14, {"partition_key_prefix": "ORDER#", "sort_key_prefix": "STATUS#"})


def test_the_same_sort_key_prefix_under_another_partition_key_prefix_is_another_entity(tmp_path):
    # Pattern A3: `USER#x` under `GAME#y` is a game's player; under `USER#x` the user itself.
    items = ([item(f"USER#u{n}", f"USER#u{n}", email={"S": f"u{n}@example.com"}) for n in range(5)]
             + [item(f"GAME#g{n % 2}", f"USER#u{n}", score={"N": str(n)}) for n in range(6)])
    routes = routes_of(proposed("games", sample_of(items), tmp_path))
    # The partition key alone tells them apart here, so the rule reads it alone; the names
    # still come from both keys.
    assert routes == {"games_users": {"partition_key_prefix": "USER#"},
                      "games_game_users": {"partition_key_prefix": "GAME#"}}
    battle = infer_contract("BattleRoyale", sample_file(BATTLE_ROYALE, "BattleRoyale", 10_000))
    players = next(entity for entity in battle.entities if entity.match.get("sort_key_prefix") == "USER#")
    assert (players.name, players.items) == ("game_users", 12)
    assert "named from both keys: USER#* items under GAME#* partitions" in render_contract(battle)


def test_a_type_attribute_held_by_most_items_splits_the_kinds_keys_cannot_tell_apart(tmp_path):
    # Pattern A4 in the shape of DeBrie's GitHub model: users and organizations share
    # `ACCOUNT#<name>`; `Type` is on accounts and repositories, not on issues.
    sample = sample_file(GITHUB, "GitHub", 10_000)
    assert sum("Type" in image for image in sample.items.values()) < len(sample.items)
    proposal = infer_contract("GitHub", sample)
    assert proposal.unrouted == []
    routes = routes_of(proposed("GitHub", sample_file(GITHUB, "GitHub", 10_000), tmp_path))
    assert routes == {
        "git_hub_users": {"sort_key_prefix": "ACCOUNT#", "attribute": "Type", "equals": "User"},
        "git_hub_organizations": {"sort_key_prefix": "ACCOUNT#", "attribute": "Type", "equals": "Organization"},
        "git_hub_repos": {"sort_key_prefix": "REPO#"},
        "git_hub_repo_issues": {"sort_key_prefix": "ISSUE#"}}
    assert "also by the attribute 'Type', named like an entity type" in render_contract(proposal)


def test_shapes_one_prefix_cannot_tell_apart_are_split_by_a_type_most_of_them_hold(tmp_path):
    items = ([item("C#1", f"ORDER#{n}", entityType={"S": "order"}, total={"N": "3"}) for n in range(5)]
             + [item("C#1", f"ORDER#{n}#LINE#{m}", entityType={"S": "line"}, sku={"S": "s"})
                for n in range(3) for m in range(2)]
             + [item("C#1", "ORDER#9#LINE#1", sku={"S": "s"})])
    proposal = infer_contract("shop", sample_of(items))
    assert {entity.name: (entity.items, entity.match) for entity in proposal.entities} == {
        "orders": (5, {"sort_key_prefix": "ORDER#", "attribute": "entityType", "equals": "order"}),
        "lines": (6, {"sort_key_prefix": "ORDER#", "attribute": "entityType", "equals": "line"})}
    (without,) = proposal.unrouted
    assert without.items == 1 and "which these items do not hold" in without.why
    assert set(proposed("shop", sample_of(items), tmp_path)) == {"shop_orders", "shop_lines", "shop_unrouted"}


def test_a_word_as_sort_key_under_partition_keys_without_a_prefix_is_a_value_not_a_kind():
    items = [item(f"c{n}", ["ACTIVE", "INACTIVE"][n % 2], plan={"S": "free"}) for n in range(12)]
    proposal = infer_contract("subscriptions", sample_of(items))
    assert proposal.entities == [] and proposal.raw_table == "subscriptions"


def test_a_rule_that_could_take_another_kinds_items_is_left_unrouted_with_why_and_the_proposal_loads(tmp_path):
    # The notes have no key prefix; their `type` alone would also match a USER# item.
    items = ([item("T#1", f"USER#{n}", email={"S": f"u{n}@example.com"}) for n in range(6)]
             + [item("T#1", f"n{n:03d}x", type={"S": "note"}, text={"S": "t"}) for n in range(5)]
             + [item("T#1", f"m{n:03d}x", type={"S": "memo"}, body={"S": "b"}) for n in range(5)])
    proposal = infer_contract("docs", sample_of(items))
    assert [(entity.name, entity.match) for entity in proposal.entities] == [("users", {"sort_key_prefix": "USER#"})]
    assert sorted((kind.kind, kind.why) for kind in proposal.unrouted) == [
        (value, f"its rule (type = '{value}') could also take the items of kind USER# (sort key starts with 'USER#')")
        for value in ("memo", "note")]
    assert set(proposed("docs", sample_of(items), tmp_path)) == {"docs_users", "docs_unrouted"}


def test_without_key_prefixes_a_type_attribute_most_items_hold_makes_the_entities(tmp_path):
    items = ([{"id": {"S": f"a{n}"}, "__typename": {"S": "Author"}, "born": {"S": "1970-01-01"}} for n in range(6)]
             + [{"id": {"S": f"b{n}"}, "__typename": {"S": "Book"}, "isbn": {"S": "978"}} for n in range(6)]
             + [{"id": {"S": "c0"}, "isbn": {"S": "979"}}])
    sample = ItemSample()
    for image in items:
        sample.add(image, {"id": image["id"]})
    proposal = infer_contract("library", sample)
    assert [(entity.name, entity.match) for entity in proposal.entities] == [
        ("authors", {"attribute": "__typename", "equals": "Author"}),
        ("books", {"attribute": "__typename", "equals": "Book"})]
    assert [(kind.items, "which these items do not hold" in kind.why) for kind in proposal.unrouted] == [(1, True)]
    assert "held by most items" in proposal.routing


def test_a_type_attribute_whose_values_hold_the_same_attributes_does_not_split_a_routed_kind():
    # AnOnlineShop's payments carry `Type` GiftCard or MasterCard: a payment method, not an entity.
    items = ([item(f"o#{n}", f"pm#{n}", Type={"S": ["GiftCard", "MasterCard"][n % 2]}, Amount={"N": "5"})
              for n in range(6)]
             + [item(f"o#{n}", f"sh#{n}", ShipDate={"S": "2020-06-22"}) for n in range(6)])
    proposal = infer_contract("shop", sample_of(items))
    assert [(entity.match, entity.items) for entity in proposal.entities] == [
        ({"sort_key_prefix": "pm#"}, 6), ({"sort_key_prefix": "sh#"}, 6)]


def test_the_public_online_shop_with_its_entity_type_on_most_items_is_routed_by_keys_and_named_by_type():
    # AWS's model with EntityType taken off its one invoice: no attribute is on every item,
    # so the keys route, EntityType splits `p#` (products and order items), and names.
    (table,) = json.loads(ONLINE_SHOP.read_text())["DataModel"]
    sample = ItemSample()
    for image in (image for facet in table["TableFacets"] for image in facet["TableData"]):
        if image["SK"]["S"].startswith("i#"):
            image = {name: value for name, value in image.items() if name != "EntityType"}
        sample.add(image, {"PK": image["PK"], "SK": image["SK"]})
    proposal = infer_contract("OnlineShop", sample)
    assert {entity.name: entity.match for entity in proposal.entities} == {
        "customers": {"sort_key_prefix": "c#"}, "shipment_items": {"sort_key_prefix": "shp#"},
        "payments": {"sort_key_prefix": "pmn#"}, "shipments": {"sort_key_prefix": "sh#"},
        "products": {"sort_key_prefix": "p#", "attribute": "EntityType", "equals": "product"},
        "order_items": {"sort_key_prefix": "p#", "attribute": "EntityType", "equals": "orderItem"},
        "warehouses": {"sort_key_prefix": "w#", "attribute": "EntityType", "equals": "warehouse"},
        "warehouse_items": {"sort_key_prefix": "w#", "attribute": "EntityType", "equals": "warehouseItem"}}
    customers = next(entity for entity in proposal.entities if entity.name == "customers")
    assert customers.named == "named from the EntityType value its items hold"
    assert [(kind.kind, kind.items) for kind in proposal.unrouted] == [("i#", 1)]

@pytest.mark.parametrize("fixture", [BATTLE_ROYALE, CONSTANT_SORT_KEYS, GITHUB])
def test_every_kind_of_five_items_or_more_gets_an_entity_of_its_own(fixture, tmp_path):
    table = fixture.stem
    proposal = infer_contract(table, sample_file(fixture, table, 10_000))
    assert proposal.unrouted == [] and len(proposal.entities) >= 3
    assert all(entity.items >= 5 for entity in proposal.entities)
    # The proposal loads with the unchanged loader, each entity's rule its own.
    assert len(proposed(table, sample_file(fixture, table, 10_000), tmp_path)) == len(proposal.entities) + 1
