"""The sample CDC generator: realistic histories, both AWS formats, known faults, for the
plain tables and the single-table design `app`."""
from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from datetime import datetime, timedelta, timezone
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import pytest

from streaming.contracts.loader import load_contracts
from streaming.contracts.model import contracts_of_table
from streaming.samples.export_writer import write_full_export
from streaming.samples.generator import APP_RAW_TABLES, UNDECLARED_APP_KINDS, generate_cdc, write_landing_files

UTC = timezone.utc
TTL_PRINCIPAL = "dynamodb.amazonaws.com"


@pytest.fixture(scope="module")
def contracts():
    return load_contracts()


@pytest.fixture(scope="module")
def cdc():
    return generate_cdc(seed=11, customers=80, malformed_rate=0.05, tenants=12)


def event_time_us(record: dict[str, Any]) -> int:
    """ApproximateCreationDateTime in microseconds, whatever the record's format."""
    dynamodb = record["dynamodb"]
    value = int(dynamodb["ApproximateCreationDateTime"])
    if "tableName" not in record:  # DynamoDB Streams: epoch seconds
        return value * 1_000_000
    if dynamodb.get("ApproximateCreationDateTimePrecision") == "MICROSECOND":
        return value
    return value * 1000


def table_of(record: dict[str, Any]) -> str:
    if "tableName" in record:
        return record["tableName"]
    return record["eventSourceARN"].split(":table/")[1].split("/")[0]


def raw_table_of(record: dict[str, Any], contracts) -> str:
    """The raw table the contract's routes give a record, worked out here in plain Python
    from its keys (the app contract routes on sort-key prefixes only)."""
    described = contracts_of_table(contracts, table_of(record))
    if len(described) == 1:
        return next(iter(described))
    keys = record["dynamodb"]["Keys"]
    for name, contract in described.items():
        route = contract.route
        if route is not None and keys[contract.sort_key]["S"].startswith(route.sort_key_prefix):
            return name
    (unrouted,) = [name for name, contract in described.items() if contract.unrouted]
    return unrouted


def item_key(record: dict[str, Any], key_attributes: tuple[str, ...]) -> tuple[str, ...]:
    keys = record["dynamodb"]["Keys"]
    return tuple(keys[name]["S"] for name in key_attributes)


def valid_records_lines(cdc) -> list[str]:
    bad = {line for line, _ in cdc.malformed}
    return [line for line in cdc.records if line not in bad]


def valid_records(cdc) -> list[dict[str, Any]]:
    return [json.loads(line) for line in valid_records_lines(cdc)]


def test_same_seed_same_output_and_other_seed_differs():
    first = generate_cdc(seed=5, customers=15)
    second = generate_cdc(seed=5, customers=15)
    other = generate_cdc(seed=6, customers=15)
    assert first.records == second.records
    assert first.expected_state == second.expected_state
    assert first.records != other.records


def test_in_order_replay_of_the_valid_records_reproduces_expected_state(cdc, contracts):
    by_key: dict[tuple[str, tuple[str, ...]], dict[str, dict[str, Any]]] = defaultdict(dict)
    for record in valid_records(cdc):
        table = raw_table_of(record, contracts)
        by_key[(table, item_key(record, cdc.key_attributes[table]))][record["eventID"]] = record
    replayed: dict[str, dict[tuple[str, ...], Any]] = {table: {} for table in cdc.expected_state}
    ttl_deleted: dict[str, set[tuple[str, ...]]] = {table: set() for table in cdc.expected_state}
    for (table, key), events in by_key.items():
        in_order = sorted(events.values(), key=event_time_us)
        times = [event_time_us(event) for event in in_order]
        assert len(set(times)) == len(times), f"{table} {key}: same-key events share a timestamp"
        last = in_order[-1]
        replayed[table][key] = last["dynamodb"].get("NewImage") if last["eventName"] != "REMOVE" else None
        identity = last.get("userIdentity") or {}
        if last["eventName"] == "REMOVE" and identity.get("principalId") == TTL_PRINCIPAL:
            ttl_deleted[table].add(key)
    assert set(replayed) == {"customers", "orders", *APP_RAW_TABLES}
    assert replayed == cdc.expected_state
    assert ttl_deleted == cdc.ttl_deleted
    assert ttl_deleted["customers"] | ttl_deleted["orders"], "no TTL delete survived as a final state"
    assert ttl_deleted["app_unrouted"], "no audit entry expired"


def test_record_images_match_the_true_history_at_their_time(cdc, contracts):
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    checked = Counter()
    for record in valid_records(cdc)[::7]:
        table = raw_table_of(record, contracts)
        key = item_key(record, cdc.key_attributes[table])
        dynamodb = record["dynamodb"]
        reported = epoch + timedelta(microseconds=event_time_us(record))
        # The reported time is the true time truncated to the record's precision, and
        # same-key events are at least a second apart.
        resolution = timedelta(seconds=1) if "tableName" not in record else (
            timedelta(microseconds=1) if dynamodb.get("ApproximateCreationDateTimePrecision") == "MICROSECOND"
            else timedelta(milliseconds=1))
        after = cdc.state_at(table, reported + resolution - timedelta(microseconds=1)).get(key)
        before = cdc.state_at(table, reported - timedelta(microseconds=1)).get(key)
        assert dynamodb.get("NewImage") == after
        assert dynamodb.get("OldImage") == before
        checked[record["eventName"], table.startswith("app_")] += 1
    assert set(checked) == {(name, app) for name in ("INSERT", "MODIFY", "REMOVE") for app in (False, True)}


def test_true_events_are_the_distinct_valid_records_in_event_order(cdc, contracts):
    """true_events(table) is what the delivered records hold once de-duplicated by
    eventID: same count per event name, same keys, names, TTL flags and new images,
    and each event's exact time truncates to the time its record reports."""
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    for table in ("customers", "orders", *APP_RAW_TABLES):
        events = cdc.true_events(table)
        assert Counter(event.event_name for event in events) == cdc.event_counts[table]
        assert [event.event_time for event in events] == sorted(event.event_time for event in events)
        distinct = {record["eventID"]: record for record in valid_records(cdc)
                    if raw_table_of(record, contracts) == table}
        delivered = Counter(
            (item_key(record, cdc.key_attributes[table]), record["eventName"],
             json.dumps(record["dynamodb"].get("NewImage"), sort_keys=True),
             (record.get("userIdentity") or {}).get("principalId") == TTL_PRINCIPAL)
            for record in distinct.values()
        )
        true = Counter((event.key, event.event_name, json.dumps(event.new_image, sort_keys=True), event.is_ttl_delete)
                       for event in events)
        assert delivered == true
        reported = sorted(epoch + timedelta(microseconds=event_time_us(record)) for record in distinct.values())
        assert all(timedelta(0) <= event.event_time - time < timedelta(seconds=1)
                   for event, time in zip(events, reported))


def test_item_histories_cover_every_kind_of_change(cdc, contracts):
    for table in ("customers", "orders", *APP_RAW_TABLES):
        assert {"INSERT", "MODIFY", "REMOVE"} <= set(cdc.event_counts[table]), table
    names_per_id = Counter(key[0] for key in cdc.expected_state["customers"])
    assert max(names_per_id.values()) >= 2, "no customer id with several custName sort keys"
    histories: dict[tuple[str, tuple[str, ...]], list[dict[str, Any]]] = defaultdict(list)
    seen = set()
    for record in valid_records(cdc):
        if record["eventID"] not in seen:
            seen.add(record["eventID"])
            table = raw_table_of(record, contracts)
            histories[(table, item_key(record, cdc.key_attributes[table]))].append(record)
    reinserted = 0
    changed = Counter()
    for events in histories.values():
        names = [event["eventName"] for event in sorted(events, key=event_time_us)]
        reinserted += any(a == "REMOVE" and b == "INSERT" for a, b in zip(names, names[1:]))
        for event in events:
            if event["eventName"] == "MODIFY":
                new, old = event["dynamodb"]["NewImage"], event["dynamodb"]["OldImage"]
                changed.update(name for name in new if new.get(name) != old.get(name))
    assert reinserted > 0
    assert {"email", "status", "amount", "plan", "role", "lastLoginAt", "issuedAt", "lastUsedAt"} <= set(changed)


def test_orders_exercise_every_contract_attribute_type(cdc, contracts):
    images = [image for image in cdc.expected_state["orders"].values() if image is not None]
    for record in valid_records(cdc):
        if table_of(record) == "orders" and "NewImage" in record["dynamodb"]:
            images.append(record["dynamodb"]["NewImage"])
    declared = {spec.name: spec.type for spec in contracts["orders"].attributes}
    seen_types: dict[str, set[str]] = defaultdict(set)
    extra = set()
    for image in images:
        for name, value in image.items():
            (descriptor,) = value.keys()
            seen_types[name].add(descriptor)
            if name not in declared:
                extra.add(name)
    for name, descriptor in declared.items():
        assert descriptor in seen_types[name], f"{name} never carries its declared type {descriptor}"
    assert "NULL" in seen_types["giftMessage"]
    assert extra, "no attribute outside the contract (for _extra_attributes)"
    amounts = [image["amount"]["N"] for image in images]
    longest = max(len(amount.replace(".", "").lstrip("0")) for amount in amounts)
    assert longest == 38
    for amount in amounts:
        assert Decimal(amount).is_finite()
    line_item = images[0]["lineItems"]["L"][0]["M"]
    assert set(line_item) == {field.name for field in contracts["orders"].attribute("lineItems").items.fields}


# The kind of item each raw table of the app contract takes, by sort-key prefix.
APP_KINDS = {"app_tenants": ("TENANT#",), "app_users": ("USER#",), "app_invoices": ("INVOICE#",),
             "app_unrouted": UNDECLARED_APP_KINDS}


def test_app_items_are_kept_per_raw_table_of_their_kind(cdc, contracts):
    assert {table: cdc.source_tables[table] for table in APP_RAW_TABLES} == dict.fromkeys(APP_RAW_TABLES, "app")
    for table, prefixes in APP_KINDS.items():
        assert cdc.key_attributes[table] == ("pk", "sk")
        keys = list(cdc.expected_state[table])
        assert keys and all(pk.startswith("TENANT#") and sk.startswith(prefixes) for pk, sk in keys), table
        assert {prefix for prefix in prefixes if any(sk.startswith(prefix) for _, sk in keys)} == set(prefixes)
    tenants = {pk for pk, _ in cdc.expected_state["app_tenants"]}
    assert all(sk == pk for pk, sk in cdc.expected_state["app_tenants"])
    assert len(tenants) == 12
    assert {pk for table in APP_RAW_TABLES for pk, _ in cdc.expected_state[table]} == tenants
    # A tenant's other items are created after the tenant.
    created = {}
    for event in cdc.true_events("app_tenants"):
        created.setdefault(event.key[0], event.event_time)
    for table in ("app_users", "app_invoices", "app_unrouted"):
        assert all(event.event_time > created[event.key[0]] for event in cdc.true_events(table)), table


def test_app_entity_images_carry_their_contract_attributes(cdc, contracts):
    images: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in valid_records(cdc):
        if table_of(record) == "app" and "NewImage" in record["dynamodb"]:
            images[raw_table_of(record, contracts)].append(record["dynamodb"]["NewImage"])
    for table in ("app_tenants", "app_users", "app_invoices"):
        declared = {spec.name: spec.type for spec in contracts[table].attributes}
        seen = {(name, descriptor) for image in images[table] for name, value in image.items() for descriptor in value}
        assert set(declared.items()) <= seen, table
    users = images["app_users"]
    assert any("lastLoginAt" not in user for user in users), "a user who never signed in has no lastLoginAt"
    invoices = images["app_invoices"]
    assert all(("issuedAt" in invoice) == (invoice["status"]["S"] != "DRAFT") for invoice in invoices)
    for invoice in invoices:
        amount = Decimal(invoice["amount"]["N"])
        assert amount == amount.quantize(Decimal("0.01")) and abs(amount) < Decimal(10) ** 16, "fits decimal(18,2)"
        assert all(set(line["M"]) == {"sku", "qty"} for line in invoice["lines"]["L"])
    declared_fields = {name for table in APP_RAW_TABLES for name in contracts[table].business_columns}
    assert any(set(invoice) - declared_fields for invoice in invoices), "no attribute for _extra_attributes"
    # Undeclared kinds carry attributes of their own, which only the unrouted table's record keeps.
    assert {"action", "actor", "label", "scopes"} <= {name for image in images["app_unrouted"] for name in image}
    # Index attributes never repeat PII: a user's e-mail stays in the PII column alone.
    assert not any(user["email"]["S"] in user["gsi1pk"]["S"] + user["gsi1sk"]["S"] for user in users)


def test_tenants_leave_the_customers_and_orders_truth_as_it_was():
    plain = generate_cdc(seed=5, customers=15)
    with_app = generate_cdc(seed=5, customers=15, tenants=3)
    assert set(plain.expected_state) == set(plain.event_counts) == {"customers", "orders"}
    assert set(with_app.expected_state) == {"customers", "orders", *APP_RAW_TABLES}
    for table in ("customers", "orders"):
        assert with_app.expected_state[table] == plain.expected_state[table]
        assert with_app.true_events(table) == plain.true_events(table)
    app_only = generate_cdc(seed=5, customers=0, tenants=3)
    assert app_only.expected_state["customers"] == app_only.expected_state["orders"] == {}
    assert {table_of(json.loads(line)) for line in valid_records_lines(app_only)} == {"app"}
    with pytest.raises(ValueError, match="tenants must not be negative"):
        generate_cdc(seed=5, customers=1, tenants=-1)


def test_an_export_of_the_app_table_holds_the_items_of_all_its_raw_tables(cdc, tmp_path: Path):
    from streaming.io.dynamodb_export import read_export_manifest

    moment = datetime(2026, 11, 3, tzinfo=UTC)
    items = [item for table in APP_RAW_TABLES for item in cdc.state_at(table, moment).values()]
    assert len({item["sk"]["S"].split("#")[0] for item in items}) == 5

    manifest = read_export_manifest(write_full_export(tmp_path, "app", items, moment))

    assert (manifest.table_name, sum(entry.item_count for entry in manifest.data_files)) == ("app", len(items))
    with pytest.raises(ValueError, match="no table contract for DynamoDB table 'app_users'"):
        write_full_export(tmp_path, "app_users", items, moment)


def test_both_aws_formats_use_the_documented_fields(cdc):
    streams = [r for r in valid_records(cdc) if "eventSourceARN" in r]
    kinesis = [r for r in valid_records(cdc) if "tableName" in r]
    assert {table_of(r) for r in streams} == {table_of(r) for r in kinesis} == {"customers", "orders", "app"}
    for record in streams:
        assert record["eventSource"] == "aws:dynamodb" and record["eventVersion"] == "1.1"
        assert re.fullmatch(r"arn:aws:dynamodb:[a-z0-9-]+:\d{12}:table/(customers|orders|app)/stream/.+",
                            record["eventSourceARN"])
        assert re.fullmatch(r"\d{21,}", record["dynamodb"]["SequenceNumber"])
        assert record["dynamodb"]["StreamViewType"] == "NEW_AND_OLD_IMAGES"
        assert isinstance(record["dynamodb"]["SizeBytes"], int)
    precisions = Counter(r["dynamodb"].get("ApproximateCreationDateTimePrecision") for r in kinesis)
    assert set(precisions) == {"MICROSECOND", "MILLISECOND", None}
    assert any("SequenceNumber" not in r["dynamodb"] for r in kinesis)
    assert any("SequenceNumber" in r["dynamodb"] for r in kinesis)
    for record in kinesis:
        assert record["recordFormat"] == "application/json" and record["eventSource"] == "aws:dynamodb"
        assert set(record) >= {"awsRegion", "eventID", "eventName", "userIdentity", "dynamodb"}
    ttl = [r for r in valid_records(cdc) if r.get("userIdentity")]
    assert ttl and all(r["eventName"] == "REMOVE" for r in ttl)
    assert all(r["userIdentity"] == {"type": "Service", "principalId": TTL_PRINCIPAL} for r in ttl)


@pytest.mark.parametrize(("record_format", "marker"), [("streams", "eventSourceARN"), ("kinesis", "tableName")])
def test_single_format_runs_emit_only_that_format(record_format, marker):
    cdc = generate_cdc(seed=2, customers=10, malformed_rate=0.0, record_format=record_format)
    assert all(marker in json.loads(line) for line in cdc.records)


def test_sequence_numbers_increase_per_key_in_true_order(cdc, contracts):
    per_key: dict[tuple[str, tuple[str, ...]], list[tuple[int, int]]] = defaultdict(list)
    for record in valid_records(cdc):
        if "SequenceNumber" in record["dynamodb"]:
            table = raw_table_of(record, contracts)
            key = (table, item_key(record, cdc.key_attributes[table]))
            per_key[key].append((event_time_us(record), int(record["dynamodb"]["SequenceNumber"])))
    assert per_key
    for events in per_key.values():
        numbers = [number for _, number in sorted(set(events))]
        assert numbers == sorted(numbers)


def test_duplicates_are_identical_redeliveries(cdc):
    malformed = {line for line, _ in cdc.malformed}
    counts = Counter(line for line in cdc.records if line not in malformed)
    redelivered = {line: n for line, n in counts.items() if n > 1}
    assert sum(n - 1 for n in redelivered.values()) == cdc.duplicates > 0
    event_ids = Counter(json.loads(line)["eventID"] for line in redelivered)
    assert all(n == 1 for n in event_ids.values()), "a duplicate must repeat its record verbatim"


def test_records_arrive_out_of_order_only_when_asked():
    def inversions(cdc) -> int:
        last_seen: dict[tuple[str, tuple[str, ...]], int] = {}
        count = 0
        for record in valid_records(cdc):
            table = table_of(record)
            key = (table, item_key(record, cdc.key_attributes[table]))
            ts = event_time_us(record)
            count += ts < last_seen.get(key, -1)
            last_seen[key] = max(ts, last_seen.get(key, -1))
        return count

    shuffled = generate_cdc(seed=4, customers=60, out_of_order_rate=0.3, duplicate_rate=0.0)
    ordered = generate_cdc(seed=4, customers=60, out_of_order_rate=0.0, duplicate_rate=0.0)
    assert inversions(shuffled) > 0
    assert inversions(ordered) == 0


def test_malformed_records_carry_their_fault_and_reason(contracts):
    cdc = generate_cdc(seed=9, customers=40, malformed_rate=0.05, tenants=8)
    true_events = sum(sum(counts.values()) for counts in cdc.event_counts.values())
    assert len(cdc.malformed) == round(true_events * 0.05)
    reasons = Counter(reason.split(":")[0] for _, reason in cdc.malformed)
    assert set(reasons) == {"invalid_json", "unknown_table", "unknown_event_name", "missing_key",
                            "type_mismatch", "invalid_number", "missing_new_image", "missing_event_time"}
    in_stream = Counter(cdc.records)
    faulty_tables = set()
    for line, reason in cdc.malformed:
        assert in_stream[line] >= 1
        if reason == "invalid_json":
            with pytest.raises(json.JSONDecodeError):
                json.loads(line)
            continue
        record = json.loads(line)
        dynamodb = record["dynamodb"]
        kind, _, detail = reason.partition(":")
        described = contracts_of_table(contracts, table_of(record))
        faulty_tables.add(table_of(record))
        if kind == "unknown_table":
            assert not described
        elif kind == "unknown_event_name":
            assert record["eventName"] not in ("INSERT", "MODIFY", "REMOVE")
        elif kind == "missing_key":
            assert all(detail in contract.key_attributes for contract in described.values())
            assert detail not in dynamodb["Keys"]
        elif kind == "type_mismatch":
            attribute, expected = detail.split(":")
            assert expected == contracts[raw_table_of(record, contracts)].attribute(attribute).type
            assert expected not in dynamodb["NewImage"][attribute]
        elif kind == "invalid_number":
            with pytest.raises(InvalidOperation):
                Decimal(dynamodb["NewImage"][detail]["N"].replace(",", "!"))
        elif kind == "missing_new_image":
            assert record["eventName"] in ("INSERT", "MODIFY") and "NewImage" not in dynamodb
        else:
            assert kind == "missing_event_time" and "ApproximateCreationDateTime" not in dynamodb
    assert faulty_tables >= {"customers", "orders", "app"}, "every contracted table gets faulty records"


def test_state_at_and_changes_between_agree_with_the_history(cdc):
    start = datetime(2026, 11, 1, tzinfo=UTC)
    assert cdc.state_at("orders", start - timedelta(seconds=1)) == {}
    final = {key: image for key, image in cdc.expected_state["orders"].items() if image is not None}
    assert cdc.state_at("orders", start + timedelta(days=365)) == final

    a_remove = next(r for r in valid_records(cdc) if r["eventName"] == "REMOVE" and table_of(r) == "orders")
    removed_at = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=event_time_us(a_remove))
    windows = [
        (start + timedelta(hours=1), start + timedelta(hours=4)),
        # Same-key events are at least 1 s apart, so this window holds the REMOVE alone.
        (removed_at.replace(microsecond=0), removed_at.replace(microsecond=0) + timedelta(seconds=1)),
    ]
    kinds = set()
    for window_start, window_end in windows:
        before = cdc.state_at("orders", window_start - timedelta(microseconds=1))
        after = cdc.state_at("orders", window_end - timedelta(microseconds=1))
        replayed = dict(before)
        for change in cdc.changes_between("orders", window_start, window_end):
            key = (change.keys["customerId"]["S"], change.keys["orderId"]["S"])
            assert change.old_image == before.get(key)
            assert window_start.timestamp() * 1e6 <= change.write_time_us < window_end.timestamp() * 1e6
            kinds.add("insert" if change.old_image is None else "remove" if change.new_image is None else "modify")
            if change.new_image is None:
                replayed.pop(key)
            else:
                replayed[key] = change.new_image
        assert replayed == after
    assert kinds == {"insert", "modify", "remove"}


def test_landing_files_follow_the_firehose_layout(tmp_path: Path):
    kwargs = {"seed": 3, "customers": 40, "start": datetime(2026, 11, 1, 22, 30, tzinfo=UTC)}
    cdc = generate_cdc(**kwargs)
    summary = write_landing_files(tmp_path, records_per_file=100, **kwargs)
    assert summary.records == len(cdc.records)
    assert summary.duplicates == cdc.duplicates and summary.malformed == len(cdc.malformed)
    assert summary.events == {table: dict(counts) for table, counts in cdc.event_counts.items()}
    assert sum(summary.malformed_by_reason.values()) == summary.malformed
    written: list[str] = []
    for index, path in enumerate(summary.files):
        relative = path.relative_to(tmp_path)
        assert re.fullmatch(r"\d{4}/\d{2}/\d{2}/\d{2}/cdc-\d{6}\.jsonl", relative.as_posix())
        first_arrival = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=cdc.arrival_times_us[index * 100])
        assert relative.parent.as_posix() == first_arrival.strftime("%Y/%m/%d/%H")
        lines = path.read_text(encoding="utf-8").splitlines()
        assert 0 < len(lines) <= 100
        written.extend(lines)
    assert written == cdc.records
    assert len({path.parent for path in summary.files}) > 1, "expected files in more than one hour folder"
    tables_per_file = [{table_of(json.loads(line)) for line in path.read_text().splitlines()
                        if line not in {bad for bad, _ in cdc.malformed}} for path in summary.files]
    assert any(tables >= {"customers", "orders"} for tables in tables_per_file)

    again = write_landing_files(tmp_path, records_per_file=100, **kwargs)
    assert not set(again.files) & set(summary.files), "a second run overwrote landed files"


@pytest.mark.parametrize(
    "kwargs",
    [{"record_format": "avro"}, {"delete_rate": 1.5}, {"delete_rate": 0.8, "ttl_delete_rate": 0.3}],
)
def test_invalid_arguments_are_rejected(kwargs):
    with pytest.raises(ValueError):
        generate_cdc(customers=1, **kwargs)


# Firehose's object names (https://docs.aws.amazon.com/firehose/latest/dev/s3-object-name.html):
# <stream>-<version>-<yyyy>-<MM>-<dd>-<HH>-<mm>-<ss>-<uuid>, `.gz` with GZIP.
FIREHOSE_OBJECT_NAME = (r"lakehouse-cdc-1-(\d{4})-(\d{2})-(\d{2})-(\d{2})-\d{2}-\d{2}-"
                        r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")


@pytest.mark.parametrize("compressed", [False, True])
def test_firehose_layout_concatenates_records_in_firehose_named_objects(tmp_path: Path, compressed: bool):
    import gzip
    import io

    from streaming.io.landing_reader import split_object_records

    kwargs = {"seed": 4, "customers": 30, "malformed_rate": 0.05}
    cdc = generate_cdc(**kwargs)
    summary = write_landing_files(tmp_path, records_per_file=40, file_layout="firehose", gzip=compressed, **kwargs)
    broken = {line for line, reason in cdc.malformed if reason == "invalid_json"}
    assert broken
    split: list[str] = []
    for path in summary.files:
        relative = path.relative_to(tmp_path).as_posix()
        name_pattern = FIREHOSE_OBJECT_NAME + (r"\.gz" if compressed else "")
        match = re.fullmatch(r"(\d{4})/(\d{2})/(\d{2})/(\d{2})/" + name_pattern, relative)
        assert match, relative
        assert match.groups()[:4] == match.groups()[4:], "the name's hour is its folder's"
        data = path.read_bytes()
        assert data.startswith(b"\x1f\x8b") == compressed
        content = gzip.decompress(data) if compressed else data
        records = [record.payload.decode() for record in split_object_records(io.BytesIO(data))]
        # No delimiter between records: only a record that is not JSON stands on a line of its own.
        assert content.count(b"\n") == 2 * sum(record in broken for record in records)
        assert b"}{" in content
        split += records
    assert split == [record for record in cdc.records]
    assert summary.records == len(cdc.records) and summary.malformed == len(cdc.malformed)


def test_lakehouse_generate_writes_gzipped_firehose_objects(tmp_path: Path):
    from streaming.cli import main

    assert main(["generate", "--data-dir", str(tmp_path), "--customers", "5", "--records-per-file", "20",
                 "--layout", "firehose", "--gzip"]) == 0

    files = sorted((tmp_path / "landing").rglob("*"))
    objects = [path for path in files if path.is_file()]
    assert objects and all(re.fullmatch(FIREHOSE_OBJECT_NAME + r"\.gz", path.name) for path in objects)
    assert all(path.read_bytes()[:2] == b"\x1f\x8b" for path in objects)
