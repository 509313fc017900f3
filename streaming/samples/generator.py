"""Seeded sample CDC for the contracted tables, in both AWS record formats.

Each item gets a true, strictly time-ordered history (INSERT, MODIFYs, maybe a REMOVE or
a TTL REMOVE, sometimes a re-INSERT). The history is then delivered the way a real
stream delivers it: DynamoDB Streams or Kinesis-Data-Streams-for-DynamoDB records,
re-delivered duplicates, arrival out of order, and a few malformed records whose
expected quarantine reason is known. `GeneratedCDC.expected_state` is the final item per
primary key, so a test can check that the pipeline converges to it.

Two plain tables, `customers` and `orders`, and on request (`tenants`) the single-table
design `app`: per tenant a TENANT# item, USER# and INVOICE# items, and items of kinds
the app contract declares no entity for (AUDIT#, APIKEY#). The ground truth is kept per
raw table, the generator's own statement of where each item belongs (tenants in
app_tenants, AUDIT# items in app_unrouted, ...), never derived from the routing code
it is there to check.

Same-key events are at least one second apart, so their order is decidable at every
timestamp precision (seconds, milliseconds, microseconds) even without a sequence number.
"""
from __future__ import annotations

import base64
import gc
import gzip as gzip_module
import json
import random
import re
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from operator import itemgetter
from pathlib import Path
from typing import Any

from streaming.contracts.loader import SAMPLE_CONTRACTS_DIR, load_contracts
from streaming.io.dynamodb_export import SAMPLE_REGION, DynamoItem
from streaming.pipeline import reasons
from streaming.samples.export_writer import SAMPLE_ACCOUNT, IncrementalChange

UTC = timezone.utc
CUSTOMERS = "customers"
ORDERS = "orders"
# The single-table design: its DynamoDB table, and the raw table of each kind of item.
APP = "app"
APP_TENANTS = "app_tenants"
APP_USERS = "app_users"
APP_INVOICES = "app_invoices"
APP_UNROUTED = "app_unrouted"
APP_RAW_TABLES = (APP_TENANTS, APP_USERS, APP_INVOICES, APP_UNROUTED)
# Sort-key prefixes of the app items no entity of the contract names.
UNDECLARED_APP_KINDS = ("AUDIT#", "APIKEY#")
RECORD_FORMATS = ("streams", "kinesis", "mixed")
TTL_USER_IDENTITY = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
_TTL_IDENTITY_JSON = json.dumps(TTL_USER_IDENTITY, separators=(",", ":"))
STREAM_LABEL = "2026-10-01T00:00:00.000"
UNKNOWN_TABLE = "inventory"

ItemKey = tuple[str, ...]

_MICROS = 1_000_000
_MIN_SAME_KEY_GAP_US = _MICROS  # keeps same-key order visible at seconds precision
_MEAN_EXTRA_GAP_S = 1800.0
# Items start uniformly over a span that grows with their number, so larger runs spread
# over more landing hours instead of crowding one.
_SECONDS_OF_ACTIVITY_PER_KEY = 4
_MIN_ACTIVITY_SPAN_S = 3 * 3600
_REINSERT_RATE = 0.3
_MULTI_NAME_RATE = 0.2
_DISORDER_WINDOW = 250  # records; a displaced record moves up to this far either way
_LATE_SHARE = 0.2  # of displaced records, arriving up to 20 windows late (other files)
_SEQUENCE_BASE = 10**23  # DynamoDB Streams sequence numbers have 21+ digits

_FIRST_NAMES = ("Ana", "Ben", "Chloé", "Dmitri", "Eve", "Farah", "Goran", "Hana", "Ivan", "Júlia",
                "Kenji", "Lena", "Mateo", "Nora", "Omar", "Priya", "Quinn", "Rosa", "Sven", "Tariq")
_LAST_NAMES = ("Silva", "Müller", "Okafor", "Nakamura", "Rossi", "Novak", "García", "Smith",
               "Kowalski", "Haddad", "Jensen", "O'Brien", "Dubois", "Petrov", "Lindqvist")
_MAIL_DOMAINS = ("example.com", "example.org", "mail.example.net")
_CURRENCIES = ("EUR", "USD", "GBP", "JPY")
_TAGS = ("new-customer", "promo", "express", "b2b", "fragile", "eco", "vip", "bulk")
_SKUS = tuple(f"SKU-{n:05d}" for n in range(1, 200, 7))
_CITIES = (("Lisbon", "PT"), ("Berlin", "DE"), ("Lagos", "NG"), ("Osaka", "JP"), ("Denver", "US"))
_STATUS_NEXT = {"PLACED": ("PAID", "CANCELLED"), "PAID": ("SHIPPED", "CANCELLED"),
                "SHIPPED": ("DELIVERED",), "DELIVERED": ("RETURNED",)}
_COMPANIES = ("Acme", "Globex", "Initech", "Umbrella", "Hooli", "Vandelay", "Wonka", "Tyrell", "Soylent", "Oscorp")
_COMPANY_FORMS = ("Ltd", "GmbH", "Inc.", "S.A.", "K.K.", "Oy")
_PLANS = ("FREE", "TEAM", "ENTERPRISE")
_ROLES = ("ADMIN", "MEMBER", "VIEWER")
_INVOICE_NEXT = {"DRAFT": ("ISSUED",), "ISSUED": ("PAID", "VOID")}
_AUDIT_ACTIONS = ("user.login", "user.invited", "invoice.issued", "invoice.paid", "plan.changed", "apikey.used")
_API_SCOPES = ("invoices:read", "invoices:write", "users:read", "audit:read")
# Per tenant: users, invoices, audit entries and API keys, each drawn between these bounds.
_USERS_PER_TENANT = (1, 6)
_INVOICES_PER_TENANT = (2, 10)
_AUDIT_ITEMS_PER_TENANT = (1, 8)
_API_KEYS_PER_TENANT = (0, 2)
# Audit entries are written once and expire through DynamoDB TTL; revoked API keys are deleted.
_AUDIT_TTL_DELETE_RATE = 0.4
_API_KEY_DELETE_RATE = 0.3



def invalid_number_reason(attribute: str) -> str:
    return f"invalid_number:{attribute}"


@dataclass(frozen=True)
class TrueEvent:
    """One change of an item as DynamoDB made it, before delivery shuffles or repeats it."""

    event_time: datetime  # exact, microseconds; a record may carry it at coarser precision
    key: ItemKey  # the key attribute values, in the contract's key order
    event_name: str  # INSERT, MODIFY or REMOVE
    new_image: DynamoItem | None  # None for REMOVE
    is_ttl_delete: bool


@dataclass
class GeneratedCDC:
    """Records in arrival order plus the ground truth to check a pipeline against."""

    records: list[str] = field(repr=False)
    # Every mapping below is keyed by raw table (`customers`, `orders`, and with tenants
    # `app_tenants`, `app_users`, `app_invoices`, `app_unrouted`).
    # Final item per primary key after the in-order history; None when deleted.
    expected_state: dict[str, dict[ItemKey, DynamoItem | None]] = field(repr=False)
    # Keys whose final event was a TTL delete (their expected_state value is None).
    ttl_deleted: dict[str, set[ItemKey]]
    malformed: list[tuple[str, str]] = field(repr=False)  # (line, expected quarantine reason)
    duplicates: int  # re-delivered copies among `records`
    event_counts: dict[str, Counter[str]]  # true events per table and eventName
    ttl_delete_events: int  # REMOVEs issued by DynamoDB TTL, among the true events
    key_attributes: dict[str, tuple[str, ...]]
    source_tables: dict[str, str]  # the DynamoDB table whose records land in each raw table
    arrival_times_us: list[int] = field(repr=False)  # per record: the time it reached the stream
    _events: list[Event] = field(repr=False)  # the true events, in event-time order
    _history: dict[str, dict[ItemKey, list[tuple[int, DynamoItem | None]]]] = field(repr=False)
    _keys: dict[str, dict[ItemKey, DynamoItem]] = field(repr=False)

    def state_at(self, table: str, moment: datetime) -> dict[ItemKey, DynamoItem]:
        """Items of raw table `table` as they were at `moment` (events at `moment` included)."""
        cutoff = _epoch_us(moment)
        state = {}
        for key, events in self._history[table].items():
            image = _image_at(events, cutoff, inclusive=True)
            if image is not None:
                state[key] = image
        return state

    def true_events(self, table: str) -> list[TrueEvent]:
        """The true events of raw table `table` in event-time order, each once (no re-deliveries,
        no malformed records): what a change log holds when nothing is lost or doubled."""
        return [
            TrueEvent(_from_epoch_us(ts), tuple(keys[name]["S"] for name in self.key_attributes[table]),
                      name, new, is_ttl)
            for ts, event_table, keys, name, new, _old, is_ttl in self._events
            if event_table == table
        ]

    def changes_between(self, table: str, start: datetime, end: datetime) -> list[IncrementalChange]:
        """Net change per item of raw table `table` in [start, end), as an incremental
        export reports it (an export of a single-table design holds its raw tables' changes)."""
        start_us, end_us = _epoch_us(start), _epoch_us(end)
        changes = []
        for key, events in self._history[table].items():
            in_window = [ts for ts, _ in events if start_us <= ts < end_us]
            if not in_window:
                continue
            before = _image_at(events, start_us, inclusive=False)
            after = _image_at(events, end_us, inclusive=False)
            if before is None and after is None:
                continue  # created and deleted inside the window: the export shows nothing
            changes.append(IncrementalChange(self._keys[table][key], after, before, in_window[-1]))
        return changes


@dataclass(frozen=True)
class GenerationSummary:
    records: int
    events: dict[str, dict[str, int]]  # raw table -> eventName -> true events
    ttl_delete_events: int
    malformed: int
    malformed_by_reason: dict[str, int]
    duplicates: int
    files: tuple[Path, ...]


def generate_cdc(
    *,
    seed: int = 7,
    customers: int = 200,
    orders_per_customer: int = 3,
    updates_per_item: int = 2,
    delete_rate: float = 0.1,
    ttl_delete_rate: float = 0.03,
    duplicate_rate: float = 0.05,
    out_of_order_rate: float = 0.2,
    malformed_rate: float = 0.01,
    record_format: str = "mixed",
    start: datetime = datetime(2026, 11, 1, tzinfo=UTC),
    tenants: int = 0,
) -> GeneratedCDC:
    """Generate CDC for the customers and orders tables and, with `tenants`, the app
    table's items of that many tenants; identical output for equal arguments.

    The app items' histories are drawn after those of customers and orders, so adding
    tenants leaves the true histories of customers and orders as they were (their
    records differ: eventIDs and formats are drawn as the merged stream is rendered).
    """
    if record_format not in RECORD_FORMATS:
        raise ValueError(f"record_format must be one of {RECORD_FORMATS}, got {record_format!r}")
    for name, rate in (("delete_rate", delete_rate), ("ttl_delete_rate", ttl_delete_rate),
                       ("duplicate_rate", duplicate_rate), ("out_of_order_rate", out_of_order_rate),
                       ("malformed_rate", malformed_rate)):
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"{name} must be within [0, 1], got {rate}")
    if delete_rate + ttl_delete_rate > 1.0:
        raise ValueError("delete_rate + ttl_delete_rate must not exceed 1")
    for name, count in (("customers", customers), ("orders_per_customer", orders_per_customer),
                        ("tenants", tenants)):
        if count < 0:
            raise ValueError(f"{name} must not be negative, got {count}")
    raw_tables = (CUSTOMERS, ORDERS, *(APP_RAW_TABLES if tenants else ()))
    contracts = load_contracts(SAMPLE_CONTRACTS_DIR)
    missing = set(raw_tables) - set(contracts)
    if missing:
        raise ValueError(f"no table contract for raw table(s) {sorted(missing)}")
    key_attributes = {table: contracts[table].key_attributes for table in raw_tables}
    source_tables = {table: contracts[table].table for table in raw_tables}
    with _cyclic_gc_paused():
        rng = _Rng(seed)
        histories = _Histories(rng, key_attributes, _epoch_us(start), updates_per_item, delete_rate, ttl_delete_rate)
        histories.build(customers, orders_per_customer)
        histories.build_app(tenants)
        events = histories.events
        events.sort(key=itemgetter(0))

        renderer = _Renderer(rng, record_format, source_tables)
        lines = [renderer.render(index, event) for index, event in enumerate(events)]
        malformed = _malformed_records(rng, renderer, events, key_attributes, round(len(events) * malformed_rate))

        arrivals: list[tuple[float, str, int]] = []
        duplicates = 0
        for index, (line, event) in enumerate(zip(lines, events)):
            arrivals.append((index + _displacement(rng, out_of_order_rate), line, event[0]))
            if rng.random() < duplicate_rate:
                duplicates += 1
                arrivals.append((index + rng.uniform(1, 4 * _DISORDER_WINDOW), line, event[0]))
        for line, _reason, source_index in malformed:
            arrivals.append((rng.uniform(0, len(events)), line, events[source_index][0]))
        arrivals.sort(key=itemgetter(0))

        event_counts: dict[str, Counter[str]] = {table: Counter() for table in raw_tables}
        for event in events:
            event_counts[event[1]][event[3]] += 1
        return GeneratedCDC(
            records=[line for _, line, _ in arrivals],
            expected_state=histories.final_state(),
            ttl_deleted=histories.ttl_deleted,
            malformed=[(line, reason) for line, reason, _ in malformed],
            duplicates=duplicates,
            event_counts=event_counts,
            ttl_delete_events=sum(1 for event in events if event[6]),
            key_attributes=key_attributes,
            source_tables=source_tables,
            arrival_times_us=[ts for _, _, ts in arrivals],
            _events=events,
            _history=histories.history,
            _keys=histories.key_items,
        )


@contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while building millions of acyclic objects.

    Left on, it rescans the ever-growing heap of long-lived records again and again,
    which costs about a third of the generator's run time.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


LANDING_LAYOUTS = ("jsonl", "firehose")
# The delivery stream's name and configuration version in Firehose object names.
FIREHOSE_STREAM_NAME = "lakehouse-cdc"
FIREHOSE_STREAM_VERSION = 1


def write_landing_files(
    landing_dir: Path | str, *, records_per_file: int = 500, file_layout: str = "jsonl", gzip: bool = False,
    **generate_kwargs: Any,
) -> GenerationSummary:
    """Generate CDC and land it in `file_layout` (see `land_cdc`), tables mixed."""
    return land_cdc(landing_dir, generate_cdc(**generate_kwargs), records_per_file=records_per_file,
                    file_layout=file_layout, gzip=gzip)


def land_cdc(
    landing_dir: Path | str, cdc: GeneratedCDC, *, records_per_file: int = 500, file_layout: str = "jsonl",
    gzip: bool = False,
) -> GenerationSummary:
    """Land generated CDC in `<landing>/<yyyy>/<MM>/<dd>/<HH>/` folders, tables mixed, as
    `file_layout` says; the caller keeps `cdc` and with it the true events to check the
    landed data against.

    `jsonl`: `cdc-<n>.jsonl`, one record per line; file numbers continue after any
    `cdc-<n>.jsonl[.gz]` already present, so a second run never overwrites the first.
    `firehose`: what a Firehose delivery stream without the AppendDelimiterToRecord
    processor writes (https://docs.aws.amazon.com/firehose/latest/dev/s3-object-name.html):
    `<stream>-<version>-<yyyy>-<MM>-<dd>-<HH>-<mm>-<ss>-<uuid>`, records concatenated with
    no delimiter. A malformed record that is not a JSON object stands on a line of its
    own, as text from a producer writing lines would: back to back, the reader could not
    tell it from its neighbours (it would quarantine the record before it as
    `trailing_garbage`, or the one after it as part of the broken one), and the summary's
    counts would not hold. `gzip` compresses each file and adds `.gz`, as Firehose does.

    The hour folder (and a Firehose name's time) comes from the first record of each
    file, as a Firehose delivery stream partitions by arrival time.
    """
    if records_per_file < 1:
        raise ValueError("records_per_file must be at least 1")
    if file_layout not in LANDING_LAYOUTS:
        raise ValueError(f"file_layout must be one of {', '.join(LANDING_LAYOUTS)}, not {file_layout!r}")
    landing = Path(landing_dir)
    number = _last_file_number(landing)
    broken = {line for line, reason in cdc.malformed if reason == reasons.INVALID_JSON}
    files = []
    for offset in range(0, len(cdc.records), records_per_file):
        number += 1
        first_arrival = _from_epoch_us(cdc.arrival_times_us[offset])
        folder = landing / first_arrival.strftime("%Y/%m/%d/%H")
        folder.mkdir(parents=True, exist_ok=True)
        chunk = cdc.records[offset:offset + records_per_file]
        if file_layout == "jsonl":
            name = f"cdc-{number:06d}.jsonl"
            content = "\n".join(chunk) + "\n"
        else:
            name = (f"{FIREHOSE_STREAM_NAME}-{FIREHOSE_STREAM_VERSION}-"
                    f"{first_arrival.strftime('%Y-%m-%d-%H-%M-%S')}-{uuid.uuid4()}")
            content = "".join(f"\n{record}\n" if record in broken else record for record in chunk)
        data = content.encode("utf-8")
        if gzip:
            name, data = name + ".gz", gzip_module.compress(data)
        path = folder / name
        path.write_bytes(data)
        files.append(path)
    return GenerationSummary(
        records=len(cdc.records),
        events={table: dict(counts) for table, counts in cdc.event_counts.items()},
        ttl_delete_events=cdc.ttl_delete_events,
        malformed=len(cdc.malformed),
        malformed_by_reason=dict(Counter(reason for _, reason in cdc.malformed)),
        duplicates=cdc.duplicates,
        files=tuple(files),
    )


# --------------------------------------------------------------------------- true history


class _Rng(random.Random):
    """Seeded random source with cheap draws for the hot path.

    `randint` and `choice` cost several Python calls each; these single-float draws
    are uniform enough for sample data and keep the generator fast.
    """

    def between(self, low: int, high: int) -> int:
        return low + int(self.random() * (high - low + 1))

    def pick(self, options: tuple[Any, ...] | list[Any]) -> Any:
        return options[int(self.random() * len(options))]

    def subset(self, options: tuple[str, ...], most: int) -> list[str]:
        return sorted({self.pick(options) for _ in range(self.between(1, most))})


# An event: (ts_us, raw table, keys, eventName, new_image, old_image, is_ttl_delete)
Event = tuple[int, str, DynamoItem, str, DynamoItem | None, DynamoItem | None, bool]


class _Histories:
    """Builds every item's true history; the events are appended unordered across keys."""

    def __init__(self, rng: _Rng, key_attributes: dict[str, tuple[str, ...]], start_us: int,
                 updates_per_item: int, delete_rate: float, ttl_delete_rate: float) -> None:
        self.rng = rng
        self.key_attributes = key_attributes
        self.start_us = start_us
        self.updates_per_item = updates_per_item
        self.delete_rate = delete_rate
        self.ttl_delete_rate = ttl_delete_rate
        self.events: list[Event] = []
        self.history: dict[str, dict[ItemKey, list[tuple[int, DynamoItem | None]]]] = {
            table: {} for table in key_attributes}
        self.key_items: dict[str, dict[ItemKey, DynamoItem]] = {table: {} for table in key_attributes}
        self.ttl_deleted: dict[str, set[ItemKey]] = {table: set() for table in key_attributes}
        self.span_us = 0

    def build(self, customers: int, orders_per_customer: int) -> None:
        rng = self.rng
        expected_keys = customers * (1 + _MULTI_NAME_RATE) * (1 + orders_per_customer)
        self.span_us = int(max(_MIN_ACTIVITY_SPAN_S, expected_keys * _SECONDS_OF_ACTIVITY_PER_KEY) * _MICROS)
        order_number = 0
        for index in range(customers):
            customer_id = f"cust-{index:06d}"
            name_count = 1 if rng.random() >= _MULTI_NAME_RATE else rng.between(2, 3)
            names: list[str] = []
            while len(names) < name_count:
                name = f"{rng.pick(_FIRST_NAMES)} {rng.pick(_LAST_NAMES)}"
                if name not in names:
                    names.append(name)
            for name in names:
                keys = {"id": {"S": customer_id}, "custName": {"S": name}}
                self._item_history(CUSTOMERS, keys, self._new_customer, self._change_customer)
            for _ in range(orders_per_customer):
                order_number += 1
                keys = {"customerId": {"S": customer_id}, "orderId": {"S": f"ord-{order_number:08d}"}}
                self._item_history(ORDERS, keys, self._new_order, self._change_order)

    def build_app(self, tenants: int) -> None:
        """The app table's items: per tenant its TENANT# item, then users, invoices, audit
        entries and API keys, each created after the tenant."""
        rng = self.rng
        items_per_tenant = 1 + sum(sum(bounds) / 2 for bounds in (
            _USERS_PER_TENANT, _INVOICES_PER_TENANT, _AUDIT_ITEMS_PER_TENANT, _API_KEYS_PER_TENANT))
        self.span_us = int(max(_MIN_ACTIVITY_SPAN_S, tenants * items_per_tenant * _SECONDS_OF_ACTIVITY_PER_KEY)
                           * _MICROS)
        for index in range(tenants):
            tenant_id = f"tnt-{index:05d}"
            pk = {"S": f"TENANT#{tenant_id}"}
            created_us = self._item_history(APP_TENANTS, {"pk": pk, "sk": {"S": f"TENANT#{tenant_id}"}},
                                            self._new_tenant, self._change_tenant)
            for number in range(rng.between(*_USERS_PER_TENANT)):
                self._item_history(APP_USERS, {"pk": pk, "sk": {"S": f"USER#usr-{number:04d}"}},
                                   self._new_user, self._change_user, not_before_us=created_us)
            for number in range(rng.between(*_INVOICES_PER_TENANT)):
                self._item_history(APP_INVOICES, {"pk": pk, "sk": {"S": f"INVOICE#inv-{number:05d}"}},
                                   self._new_invoice, self._change_invoice, not_before_us=created_us)
            for number in range(rng.between(*_AUDIT_ITEMS_PER_TENANT)):
                self._item_history(APP_UNROUTED, {"pk": pk, "sk": {"S": f"AUDIT#{number:06d}"}},
                                   self._new_audit_entry, None, not_before_us=created_us,
                                   delete_rate=0.0, ttl_delete_rate=_AUDIT_TTL_DELETE_RATE)
            for number in range(rng.between(*_API_KEYS_PER_TENANT)):
                self._item_history(APP_UNROUTED, {"pk": pk, "sk": {"S": f"APIKEY#key-{number:03d}"}},
                                   self._new_api_key, self._change_api_key, not_before_us=created_us,
                                   delete_rate=_API_KEY_DELETE_RATE, ttl_delete_rate=0.0)

    def final_state(self) -> dict[str, dict[ItemKey, DynamoItem | None]]:
        return {table: {key: events[-1][1] for key, events in items.items()} for table, items in self.history.items()}

    def _item_history(self, table: str, keys: DynamoItem,
                      create: Callable[[DynamoItem, int], DynamoItem],
                      change: Callable[[DynamoItem, int], DynamoItem] | None, *,
                      not_before_us: int | None = None, delete_rate: float | None = None,
                      ttl_delete_rate: float | None = None) -> int:
        """One item's history from its creation, at a random time of the span after
        `not_before_us` (default: the start); `change` None: never modified. Returns
        the time of the item's first INSERT."""
        rng = self.rng
        key = tuple(keys[name]["S"] for name in self.key_attributes[table])
        self.key_items[table][key] = keys
        timeline: list[tuple[int, DynamoItem | None]] = []
        self.history[table][key] = timeline
        deletes = self.delete_rate if delete_rate is None else delete_rate
        ttl_deletes = self.ttl_delete_rate if ttl_delete_rate is None else ttl_delete_rate
        earliest = self.start_us if not_before_us is None else not_before_us + _MIN_SAME_KEY_GAP_US
        created = ts = earliest + int(rng.random() * self.span_us)
        image = self._emit(table, keys, ts, "INSERT", create(keys, ts), None, False, timeline)
        if change is not None:
            modifications = rng.between(0, 2 * self.updates_per_item)
            for _ in range(modifications):
                ts = self._next_time(ts)
                image = self._emit(table, keys, ts, "MODIFY", change(image, ts), image, False, timeline)
        fate = rng.random()
        if fate >= deletes + ttl_deletes:
            return created
        is_ttl = fate >= deletes
        ts = self._next_time(ts)
        self._emit(table, keys, ts, "REMOVE", None, image, is_ttl, timeline)
        if rng.random() < _REINSERT_RATE:
            ts = self._next_time(ts)
            image = self._emit(table, keys, ts, "INSERT", create(keys, ts), None, False, timeline)
            if change is not None and rng.random() < 0.5:
                ts = self._next_time(ts)
                self._emit(table, keys, ts, "MODIFY", change(image, ts), image, False, timeline)
        elif is_ttl:
            self.ttl_deleted[table].add(key)
        return created

    def _emit(self, table: str, keys: DynamoItem, ts: int, name: str, new: DynamoItem | None,
              old: DynamoItem | None, is_ttl: bool, timeline: list[tuple[int, DynamoItem | None]]) -> DynamoItem | None:
        self.events.append((ts, table, keys, name, new, old, is_ttl))
        timeline.append((ts, new))
        return new

    def _next_time(self, ts: int) -> int:
        return ts + _MIN_SAME_KEY_GAP_US + int(self.rng.expovariate(1.0 / _MEAN_EXTRA_GAP_S) * _MICROS)

    # -- customers

    def _new_customer(self, keys: DynamoItem, ts: int) -> DynamoItem:
        registered = _from_epoch_us(ts - int(self.rng.random() * 400 * 86_400) * _MICROS)
        return {
            **keys,
            "email": {"S": self._email(keys["custName"]["S"])},
            "registrationDate": {"S": registered.strftime("%Y-%m-%dT%H:%M:%SZ")},
        }

    def _change_customer(self, item: DynamoItem, ts: int) -> DynamoItem:
        return {**item, "email": {"S": self._email(item["custName"]["S"])}}

    def _email(self, name: str) -> str:
        local = re.sub(r"[^a-z]+", ".", name.lower()).strip(".")
        return f"{local}{self.rng.between(1, 999)}@{self.rng.pick(_MAIL_DOMAINS)}"

    # -- orders

    def _new_order(self, keys: DynamoItem, ts: int) -> DynamoItem:
        rng = self.rng
        is_gift = rng.random() < 0.15
        item: DynamoItem = {
            **keys,
            "createdAt": {"S": _from_epoch_us(ts).strftime("%Y-%m-%dT%H:%M:%S.%fZ")},
            "status": {"S": "PLACED"},
            "amount": {"N": self._amount()},
            "currency": {"S": rng.pick(_CURRENCIES)},
            "isGift": {"BOOL": is_gift},
            "giftMessage": {"S": "Happy birthday!"} if is_gift and rng.random() < 0.6 else {"NULL": True},
            "packageWeightsKg": {"NS": sorted({f"{rng.between(1, 2500) / 100:.2f}" for _ in range(rng.between(1, 3))})},
            "receiptDigest": {"B": _b64(rng.randbytes(32))},
            "lineItems": {"L": [
                {"M": {"sku": {"S": rng.pick(_SKUS)},
                       "quantity": {"N": str(rng.between(1, 5))},
                       "unitPrice": {"N": f"{rng.between(100, 50_000) / 100:.2f}"}}}
                for _ in range(rng.between(1, 4))
            ]},
        }
        if rng.random() < 0.7:
            item["tags"] = {"SS": rng.subset(_TAGS, 3)}
        if rng.random() < 0.4:
            item["attachmentChecksums"] = {"BS": [_b64(rng.randbytes(16)) for _ in range(rng.between(1, 2))]}
        if rng.random() < 0.8:  # digital orders have no shipping address
            city, country = rng.pick(_CITIES)
            item["shippingAddress"] = {"M": {
                "street": {"S": f"{rng.between(1, 300)} Sample Street"},
                "city": {"S": city},
                "postcode": {"S": f"{rng.between(1000, 99999)}"},
                "country": {"S": country},
            }}
        if rng.random() < 0.05:  # an attribute the contract does not name
            item["promoCode"] = {"S": f"PROMO{rng.between(10, 99)}"}
        return item

    def _change_order(self, item: DynamoItem, ts: int) -> DynamoItem:
        rng = self.rng
        changed = dict(item)
        next_statuses = _STATUS_NEXT.get(item["status"]["S"])
        roll = rng.random()
        if next_statuses and roll < 0.6:
            changed["status"] = {"S": rng.pick(next_statuses)}
        elif roll < 0.85:
            changed["amount"] = {"N": self._amount()}
        else:
            changed["tags"] = {"SS": rng.subset(_TAGS, 3)}
        return changed

    def _amount(self) -> str:
        rng = self.rng
        roll = rng.random()
        if roll < 0.05:  # 38 significant digits, the most DynamoDB holds
            whole = str(rng.randint(10**19, 10**20 - 1))
            return f"{whole}.{rng.randint(0, 10**18 - 1):018d}"
        if roll < 0.15:
            return str(rng.between(1, 500))
        return f"{rng.between(100, 250_000) / 100:.2f}"

    # -- app: tenants, users, invoices (entities), audit entries and API keys (undeclared)

    def _new_tenant(self, keys: DynamoItem, ts: int) -> DynamoItem:
        rng = self.rng
        name = f"{rng.pick(_COMPANIES)} {rng.pick(_COMPANY_FORMS)}"
        plan = rng.pick(_PLANS)
        return {
            **keys,
            "gsi1pk": {"S": f"PLAN#{plan}"},
            "gsi1sk": {"S": keys["pk"]["S"]},
            "name": {"S": name},
            "plan": {"S": plan},
            "createdAt": {"S": _iso_seconds(ts)},
        }

    def _change_tenant(self, item: DynamoItem, ts: int) -> DynamoItem:
        rng = self.rng
        if rng.random() < 0.7:
            plan = rng.pick(_PLANS)
            return {**item, "plan": {"S": plan}, "gsi1pk": {"S": f"PLAN#{plan}"}}
        return {**item, "name": {"S": f"{rng.pick(_COMPANIES)} {rng.pick(_COMPANY_FORMS)}"}}

    def _new_user(self, keys: DynamoItem, ts: int) -> DynamoItem:
        rng = self.rng
        role = rng.pick(_ROLES)
        item: DynamoItem = {
            **keys,
            # Never the e-mail: an index attribute is not PII-flagged, so PII must stay out of it.
            "gsi1pk": {"S": f"ROLE#{role}"},
            "gsi1sk": {"S": f"{keys['pk']['S']}#{keys['sk']['S']}"},
            "email": {"S": self._email(f"{rng.pick(_FIRST_NAMES)} {rng.pick(_LAST_NAMES)}")},
            "role": {"S": role},
        }
        if rng.random() < 0.5:  # the others have not signed in yet: the attribute is absent
            item["lastLoginAt"] = {"S": _iso_seconds(ts)}
        return item

    def _change_user(self, item: DynamoItem, ts: int) -> DynamoItem:
        if self.rng.random() < 0.75:
            return {**item, "lastLoginAt": {"S": _iso_seconds(ts)}}
        role = self.rng.pick(_ROLES)
        return {**item, "role": {"S": role}, "gsi1pk": {"S": f"ROLE#{role}"}}

    def _new_invoice(self, keys: DynamoItem, ts: int) -> DynamoItem:
        rng = self.rng
        status = "DRAFT" if rng.random() < 0.3 else "ISSUED"
        item: DynamoItem = {
            **keys,
            "gsi1pk": {"S": f"STATUS#{status}"},
            "gsi1sk": {"S": keys["pk"]["S"]},
            "amount": {"N": self._invoice_amount()},
            "currency": {"S": rng.pick(_CURRENCIES)},
            "status": {"S": status},
            "lines": {"L": [
                {"M": {"sku": {"S": rng.pick(_SKUS)}, "qty": {"N": str(rng.between(1, 20))}}}
                for _ in range(rng.between(1, 4))
            ]},
        }
        if status == "ISSUED":  # a draft has no issue time yet
            item["issuedAt"] = {"S": _iso_seconds(ts)}
        if rng.random() < 0.05:  # an attribute the contract does not name
            item["purchaseOrder"] = {"S": f"PO-{rng.between(1000, 9999)}"}
        return item

    def _change_invoice(self, item: DynamoItem, ts: int) -> DynamoItem:
        rng = self.rng
        next_statuses = _INVOICE_NEXT.get(item["status"]["S"])
        if next_statuses and rng.random() < 0.7:
            status = rng.pick(next_statuses)
            changed = {**item, "status": {"S": status}, "gsi1pk": {"S": f"STATUS#{status}"}}
            if status == "ISSUED":
                changed["issuedAt"] = {"S": _iso_seconds(ts)}
            return changed
        return {**item, "amount": {"N": self._invoice_amount()}}

    def _invoice_amount(self) -> str:
        """At most 16 digits before the point and 2 after: the contract's decimal(18,2)."""
        if self.rng.random() < 0.1:
            return str(self.rng.between(1, 900))
        return f"{self.rng.between(500, 1_500_000) / 100:.2f}"

    def _new_audit_entry(self, keys: DynamoItem, ts: int) -> DynamoItem:
        rng = self.rng
        return {
            **keys,
            "action": {"S": rng.pick(_AUDIT_ACTIONS)},
            "actor": {"S": f"USER#usr-{rng.between(0, _USERS_PER_TENANT[1] - 1):04d}"},
            "at": {"S": _iso_seconds(ts)},
        }

    def _new_api_key(self, keys: DynamoItem, ts: int) -> DynamoItem:
        return {
            **keys,
            "label": {"S": f"integration {self.rng.between(1, 99)}"},
            "scopes": {"SS": self.rng.subset(_API_SCOPES, 3)},
        }

    def _change_api_key(self, item: DynamoItem, ts: int) -> DynamoItem:
        return {**item, "lastUsedAt": {"S": _iso_seconds(ts)}}


# --------------------------------------------------------------------------- delivery


class _Renderer:
    """Turns a true event into one JSON line of either AWS record format.

    Lines are assembled from pre-encoded parts: an item's image is encoded once as the
    NewImage of one event and reused as the OldImage of that key's next event.
    """

    def __init__(self, rng: _Rng, record_format: str, source_tables: dict[str, str]) -> None:
        self.rng = rng
        self._source_tables = source_tables
        self._streams_share = {"streams": 1.0, "kinesis": 0.0, "mixed": 0.5}[record_format]
        self._keys_json: dict[int, str] = {}
        self._last_image: dict[int, tuple[DynamoItem, str]] = {}
        self._arn_prefix = f"arn:aws:dynamodb:{SAMPLE_REGION}:{SAMPLE_ACCOUNT}:table/"

    def render(self, index: int, event: Event) -> str:
        ts_us, raw_table, keys, name, new, old, is_ttl = event
        table = self._source_tables[raw_table]
        rng = self.rng
        key_id = id(keys)
        keys_json = self._keys_json.get(key_id)
        if keys_json is None:
            keys_json = self._keys_json[key_id] = _encode(keys)
        body = f'"Keys":{keys_json}'
        size = len(keys_json)
        old_json = None
        if old is not None:
            cached = self._last_image.get(key_id)
            old_json = cached[1] if cached is not None and cached[0] is old else _encode(old)
        if new is not None:
            new_json = (_patched(old, old_json, new) if old_json is not None else None) or _encode(new)
            body += f',"NewImage":{new_json}'
            size = len(new_json)
        if old_json is not None:
            body += f',"OldImage":{old_json}'
            if new is None:
                size = len(old_json)
        if new is not None:
            self._last_image[key_id] = (new, new_json)
        sequence_number = _SEQUENCE_BASE + index
        if rng.random() < self._streams_share:
            identity = f',"userIdentity":{_TTL_IDENTITY_JSON}' if is_ttl else ""
            return (
                f'{{"eventID":"{rng.getrandbits(128):032x}","eventName":"{name}","eventVersion":"1.1",'
                f'"eventSource":"aws:dynamodb","awsRegion":"{SAMPLE_REGION}","dynamodb":{{'
                f'"ApproximateCreationDateTime":{ts_us // _MICROS},{body},"SequenceNumber":"{sequence_number}",'
                f'"SizeBytes":{size},"StreamViewType":"NEW_AND_OLD_IMAGES"}},'
                f'"eventSourceARN":"{self._arn_prefix}{table}/stream/{STREAM_LABEL}"{identity}}}'
            )
        precision = rng.random()
        if precision < 1 / 3:
            timing = f'"ApproximateCreationDateTime":{ts_us},"ApproximateCreationDateTimePrecision":"MICROSECOND"'
        elif precision < 2 / 3:
            timing = f'"ApproximateCreationDateTime":{ts_us // 1000},"ApproximateCreationDateTimePrecision":"MILLISECOND"'
        else:
            timing = f'"ApproximateCreationDateTime":{ts_us // 1000}'
        sequence = f',"SequenceNumber":"{sequence_number}"' if rng.random() < 0.5 else ""
        return (
            f'{{"awsRegion":"{SAMPLE_REGION}","eventID":"{_uuid(rng.getrandbits(128))}","eventName":"{name}",'
            f'"userIdentity":{_TTL_IDENTITY_JSON if is_ttl else "null"},"recordFormat":"application/json",'
            f'"tableName":"{table}","dynamodb":{{{timing},{body},"SizeBytes":{size}{sequence}}},'
            f'"eventSource":"aws:dynamodb"}}'
        )


def _malformed_records(rng: _Rng, renderer: _Renderer, events: list[Event],
                       key_attributes: dict[str, tuple[str, ...]], count: int) -> list[tuple[str, str, int]]:
    """`count` extra bad records, cycling through every fault kind; (line, reason, source event)."""
    if not events or count == 0:
        return []
    orders_with_image = [i for i, event in enumerate(events) if event[1] == ORDERS and event[4] is not None]
    with_image = [i for i, event in enumerate(events) if event[4] is not None]
    faults = [
        _not_json, _truncated_json, _unknown_event_name, _missing_key, _wrong_number_type,
        _invalid_number, _unknown_table, _missing_new_image, _missing_event_time,
    ]
    needs_orders = {_wrong_number_type, _invalid_number}
    needs_image = {_missing_new_image}
    result = []
    for n in range(count):
        fault = faults[n % len(faults)]
        pool = orders_with_image if fault in needs_orders else with_image if fault in needs_image else None
        if pool is not None and not pool:
            fault, pool = _not_json, None
        source = rng.choice(pool) if pool is not None else rng.randrange(len(events))
        # A fresh render gets a fresh eventID, so the bad copy never shadows the real event.
        record = json.loads(renderer.render(source, events[source]))
        # Exactly one fault per record: without a Kinesis sequence number (files) a
        # record lacking dynamodb.SequenceNumber could be rejected for that first.
        record["dynamodb"].setdefault("SequenceNumber", str(_SEQUENCE_BASE + source))
        line, reason = fault(rng, record, key_attributes[events[source][1]])
        result.append((line, reason, source))
    return result


_ENCODER = json.JSONEncoder(separators=(",", ":"), check_circular=False)
_quoted = json.encoder.encode_basestring_ascii  # the quoting the encoder itself applies


def _encode(value: Any) -> str:
    return _ENCODER.encode(value)


def _patched(old: DynamoItem, old_json: str, new: DynamoItem) -> str | None:
    """`new` encoded by swapping the changed attributes inside `old`'s encoding.

    A MODIFY usually changes one attribute of a large item; re-encoding only that
    attribute is what keeps the generator fast. Returns None when the shortcut does
    not apply (attributes added or removed, or an ambiguous match).
    """
    if len(new) != len(old):
        return None
    patched = old_json
    for name, value in new.items():
        before = old.get(name)
        if before is value:
            continue
        if before is None:
            return None
        old_fragment = _attribute_json(name, before)
        if patched.count(old_fragment) != 1:
            return None
        patched = patched.replace(old_fragment, _attribute_json(name, value))
    return patched


def _attribute_json(name: str, value: dict[str, Any]) -> str:
    """`"name":{"S":"text"}` as the encoder writes it; scalar strings skip the encoder."""
    if len(value) == 1:
        (descriptor, inner), = value.items()
        if type(inner) is str:
            return f'{_quoted(name)}:{{"{descriptor}":{_quoted(inner)}}}'
    return f"{_quoted(name)}:{_encode(value)}"


def _dump(record: dict[str, Any]) -> str:
    return _encode(record)


def _not_json(rng: _Rng, record: dict[str, Any], keys: tuple[str, ...]) -> tuple[str, str]:
    return rng.choice(("<html><body>502 Bad Gateway</body></html>", "eventName=INSERT;table=orders",
                       "\x00\x01garbage")), reasons.INVALID_JSON


def _truncated_json(rng: _Rng, record: dict[str, Any], keys: tuple[str, ...]) -> tuple[str, str]:
    line = _dump(record)
    return line[: rng.randint(10, len(line) // 2)], reasons.INVALID_JSON


def _unknown_event_name(rng: _Rng, record: dict[str, Any], keys: tuple[str, ...]) -> tuple[str, str]:
    record["eventName"] = rng.choice(("UPSERT", "insert", "DELETE"))
    return _dump(record), reasons.UNKNOWN_EVENT_NAME


def _missing_key(rng: _Rng, record: dict[str, Any], keys: tuple[str, ...]) -> tuple[str, str]:
    attribute = rng.choice(keys)
    dynamodb = record["dynamodb"]
    for part in ("Keys", "NewImage", "OldImage"):
        if part in dynamodb:
            dynamodb[part] = {name: value for name, value in dynamodb[part].items() if name != attribute}
    return _dump(record), reasons.missing_key(attribute)


def _wrong_number_type(rng: _Rng, record: dict[str, Any], keys: tuple[str, ...]) -> tuple[str, str]:
    image = dict(record["dynamodb"]["NewImage"])
    image["amount"] = {"S": image["amount"]["N"]}
    record["dynamodb"]["NewImage"] = image
    return _dump(record), reasons.type_mismatch("amount", "N")


def _invalid_number(rng: _Rng, record: dict[str, Any], keys: tuple[str, ...]) -> tuple[str, str]:
    image = dict(record["dynamodb"]["NewImage"])
    image["amount"] = {"N": rng.choice(("12.50.1", "abc", "1,25", "--3"))}
    record["dynamodb"]["NewImage"] = image
    return _dump(record), invalid_number_reason("amount")


def _unknown_table(rng: _Rng, record: dict[str, Any], keys: tuple[str, ...]) -> tuple[str, str]:
    if "tableName" in record:
        record["tableName"] = UNKNOWN_TABLE
    else:
        record["eventSourceARN"] = (
            f"arn:aws:dynamodb:{SAMPLE_REGION}:{SAMPLE_ACCOUNT}:table/{UNKNOWN_TABLE}/stream/{STREAM_LABEL}"
        )
    return _dump(record), reasons.UNKNOWN_TABLE


def _missing_new_image(rng: _Rng, record: dict[str, Any], keys: tuple[str, ...]) -> tuple[str, str]:
    del record["dynamodb"]["NewImage"]
    return _dump(record), reasons.MISSING_NEW_IMAGE


def _missing_event_time(rng: _Rng, record: dict[str, Any], keys: tuple[str, ...]) -> tuple[str, str]:
    del record["dynamodb"]["ApproximateCreationDateTime"]
    record["dynamodb"].pop("ApproximateCreationDateTimePrecision", None)
    return _dump(record), reasons.MISSING_EVENT_TIME


def _displacement(rng: _Rng, out_of_order_rate: float) -> float:
    if rng.random() >= out_of_order_rate:
        return 0.0
    if rng.random() < _LATE_SHARE:
        return rng.uniform(_DISORDER_WINDOW, 20 * _DISORDER_WINDOW)
    return rng.uniform(-_DISORDER_WINDOW, _DISORDER_WINDOW)


# --------------------------------------------------------------------------- helpers


def _image_at(events: list[tuple[int, DynamoItem | None]], cutoff_us: int, *, inclusive: bool) -> DynamoItem | None:
    image = None
    for ts, state in events:
        if ts > cutoff_us or (ts == cutoff_us and not inclusive):
            break
        image = state
    return image


def _iso_seconds(micros: int) -> str:
    return _from_epoch_us(micros).strftime("%Y-%m-%dT%H:%M:%SZ")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _uuid(bits: int) -> str:
    h = f"{bits:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _epoch_us(moment: datetime) -> int:
    if moment.tzinfo is None:
        raise ValueError("timestamps must be timezone-aware (UTC)")
    delta = moment - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * _MICROS + delta.microseconds


def _from_epoch_us(micros: int) -> datetime:
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=micros)


def _last_file_number(landing: Path) -> int:
    numbers = [int(match.group(1)) for path in landing.rglob("cdc-*.jsonl*")
               if (match := re.fullmatch(r"cdc-(\d+)\.jsonl(\.gz)?", path.name))]
    return max(numbers, default=0)
