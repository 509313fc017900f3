"""PII in the marts, tried as an attacker would: the generator's own sample customers
and orders (its name list, e-mail pattern and addresses) are built with a key that
contains a quote, then every mart cell is searched for clear PII and for unkeyed
hashes of ids, names and e-mails; the pseudonyms are checked against Python's hmac;
every file dbt wrote (and its console output) is searched for the key."""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import hashlib
import hmac
import io
import json
import os
import re
import shutil
import stat
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import duckdb
import pytest
from dbt_scenario import DAY_1, EVENT_WINDOW

from lakehouse_dbt.pii_key import KEY_ENV, ensure_local_key, hmac_pads, key_file, resolve_key
from streaming.contracts.loader import load_contracts
from streaming.operations.contract_pii import MACRO_FILE, contract_columns, render_macro
from streaming.runtime.dbt_runner import run_dbt
from streaming.samples.generator import generate_cdc
from streaming.samples.raw_fixtures import write_raw_batch

pytestmark = pytest.mark.dbt

# A quote must never break the SQL: the key is bound as a parameter, not written into it.
KEY = "it's-a-test-key-" + "0123456789abcdef" * 2
MARTS_SCHEMA = "lakehouse_marts"
INGESTED_AT = DAY_1 + timedelta(hours=1)
# The builds after the sample's (a new key, a first key, a lost key record): dim_customers,
# the mart the tests read back, what it reads, and the tests of those models alone
# (cautious: not customer_history_matches_current_state, which also reads the history
# mart). The key checks (macros/pii) run at the start of every build, whatever it
# selects; every mart is built by the sample's build.
CUSTOMER_MART = ["--select", "+dim_customers", "--indirect-selection", "cautious"]


@dataclass
class BuiltSample:
    data_dir: Path
    customers: list[dict]
    orders: list[dict]
    console: str


def _text(item: dict, name: str) -> str | None:
    value = item.get(name)
    return None if value is None or "NULL" in value else value["S"]


def _sample_rows() -> tuple[list[dict], list[dict]]:
    """The generator's final items (deletes dropped) as raw change rows."""
    state = generate_cdc(seed=11, customers=40, orders_per_customer=1).expected_state
    customers = [
        {
            "id": item["id"]["S"],
            "cust_name": item["custName"]["S"],
            "email": item["email"]["S"],
            "registration_date": item["registrationDate"]["S"],
            "_event_ts": DAY_1,
        }
        for item in state["customers"].values()
        if item is not None
    ]
    orders = []
    for item in (i for i in state["orders"].values() if i is not None):
        address = item.get("shippingAddress")
        orders.append({
            "customer_id": item["customerId"]["S"],
            "order_id": item["orderId"]["S"],
            "created_at": item["createdAt"]["S"],
            "status": item["status"]["S"],
            "amount": item["amount"]["N"],
            "currency": item["currency"]["S"],
            "is_gift": item["isGift"]["BOOL"],
            "gift_message": _text(item, "giftMessage"),
            "line_items": [
                {"sku": line["M"]["sku"]["S"], "quantity": line["M"]["quantity"]["N"], "unit_price": line["M"]["unitPrice"]["N"]}
                for line in item["lineItems"]["L"]
            ],
            "shipping_address": None if address is None else {k: v["S"] for k, v in address["M"].items()},
            "_event_ts": DAY_1,
        })
    return customers, orders


def _build(data_dir: Path, *args: str, **kwargs: object) -> tuple[object, str]:
    console = io.StringIO()
    with contextlib.redirect_stdout(console):
        result = run_dbt(list(args), data_dir, **kwargs)
    return result, console.getvalue()


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> BuiltSample:
    data_dir = tmp_path_factory.mktemp("pii_sample")
    customers, orders = _sample_rows()
    write_raw_batch(data_dir, "customers", 0, customers, INGESTED_AT)
    write_raw_batch(data_dir, "orders", 0, orders, INGESTED_AT)
    result, console = _build(data_dir, "build", *EVENT_WINDOW, extra_env={KEY_ENV: KEY})
    assert result.success, console[-3000:]
    return BuiltSample(data_dir, customers, orders, console)


def _query(data_dir: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(data_dir / "lakehouse.duckdb"), read_only=True) as con:
        return con.sql(sql).fetchall()


def _mart_cells(data_dir: Path) -> set[str]:
    """Every value of every column of every table analysts may read, as text (one
    connection for all the queries: opening the database file is most of a query's cost)."""
    with duckdb.connect(str(data_dir / "lakehouse.duckdb"), read_only=True) as con:
        def rows(sql: str) -> list[tuple]:
            return con.sql(sql).fetchall()

        tables = rows(f"select table_name from information_schema.tables where table_schema = '{MARTS_SCHEMA}'")
        assert {"dim_customers", "fct_orders", "fct_order_lines"} <= {t for (t,) in tables}
        cells: set[str] = set()
        for (table,) in tables:
            columns = [c for (c,) in rows(f"select column_name from information_schema.columns where table_schema = '{MARTS_SCHEMA}' and table_name = '{table}'")]
            for column in columns:
                cells |= {v for (v,) in rows(f'select distinct cast("{column}" as varchar) from {MARTS_SCHEMA}."{table}"') if v is not None}
    return cells


def _oracle(label: str, text: str) -> str:
    return hmac.new(KEY.encode(), f"{label}:{text}".encode(), hashlib.sha256).hexdigest()


def _escaped(part: str) -> str:
    return part.replace("\\", "\\\\").replace("|", "\\|")


def test_pseudonyms_are_hmac_sha256_under_the_key(sample: BuiltSample) -> None:
    expected = sorted(
        (
            _oracle("customer_key", f"{_escaped(c['id'])}|{_escaped(c['cust_name'])}"),
            c["id"],
            _oracle("cust_name", c["cust_name"].strip()),
            _oracle("email", c["email"].strip().lower()),
            _oracle("email", c["email"].strip().lower().split("@")[1]),
        )
        for c in sample.customers
    )
    built = _query(sample.data_dir, f"select customer_key, customer_id, customer_name, email, email_domain from {MARTS_SCHEMA}.dim_customers")
    assert sorted(built) == expected
    assert any("'" in c["cust_name"] for c in sample.customers)  # O'Brien: a quote in the data too


def test_the_key_is_in_no_log_artifact_database_file_or_console_output(sample: BuiltSample) -> None:
    secrets_dir = key_file(sample.data_dir).parent
    forms = {KEY.encode(), KEY.encode().hex().encode(), base64.b64encode(KEY.encode())}
    forms |= {pad.hex().encode() for pad in hmac_pads(KEY.encode())}
    searched = [path for path in sample.data_dir.rglob("*") if path.is_file() and secrets_dir not in path.parents]
    assert any(path.name == "manifest.json" for path in searched)
    assert any(path.name == "run_results.json" for path in searched)
    assert any(path.name == "dbt.log" for path in searched)
    assert any("compiled" in path.parts for path in searched)
    leaks = [str(path) for path in searched for form in forms if form in path.read_bytes()]
    assert leaks == []
    assert not any(form.decode() in sample.console for form in forms)
    # The build really ran in this output: not an empty capture.
    assert "dim_customers" in sample.console


def _hash_forms(text: str) -> set[str]:
    forms = set()
    for algorithm in ("md5", "sha1", "sha256"):
        digest = hashlib.new(algorithm, text.encode()).digest()
        forms |= {digest.hex(), digest.hex().upper(), base64.b64encode(digest).decode(),
                  base64.urlsafe_b64encode(digest).decode(), base64.urlsafe_b64encode(digest).decode().rstrip("=")}
    return forms


def _variants(text: str) -> set[str]:
    return {text, text.strip(), text.lower(), text.strip().lower(), text.upper(), text.strip().upper()}


def _unkeyed_hashes(sample: BuiltSample) -> set[str]:
    """What an attacker with the sample's ids, names and e-mails would try."""
    texts: set[str] = set()
    for customer in sample.customers:
        ident, name, email = customer["id"], customer["cust_name"], customer["email"]
        texts |= _variants(ident) | _variants(name) | _variants(email) | _variants(email.split("@")[1])
        for sep in ("|", "", "#", ":", ",", " ", "-", "_", ";"):
            for first, second in ((ident, name), (name, ident), (ident, email), (email, ident), (name, email)):
                texts |= {f"{a}{sep}{b}" for a in _variants(first) for b in _variants(second)}
    for order in sample.orders:
        texts |= {order["customer_id"], order["order_id"], f"{order['customer_id']}#{order['order_id']}"}
    return {form for text in texts for form in _hash_forms(text)}


def test_no_unkeyed_hash_of_ids_names_or_emails_in_any_mart(sample: BuiltSample) -> None:
    candidates = _unkeyed_hashes(sample)
    cells = _mart_cells(sample.data_dir)
    # The attacker's list matches DuckDB's own hash output: the search can find one.
    (id_hash,) = _query(sample.data_dir, f"select sha256(min(customer_id)) from {MARTS_SCHEMA}.dim_customers")[0]
    assert id_hash in candidates
    assert cells & candidates == set()


def _clear_pii(sample: BuiltSample) -> set[str]:
    values: set[str] = set()
    for customer in sample.customers:
        for text in (customer["cust_name"], customer["email"], customer["email"].split("@")[1]):
            values |= _variants(text)
    for order in sample.orders:
        if order["gift_message"]:
            values |= _variants(order["gift_message"])
        values |= set((order["shipping_address"] or {}).values())
    return values


def test_no_clear_value_of_a_contract_pii_attribute_reaches_a_mart(sample: BuiltSample) -> None:
    clear = _clear_pii(sample)
    assert any("Sample Street" in value for value in clear) and any("@" in value for value in clear)
    cells = _mart_cells(sample.data_dir)
    assert cells & clear == set()
    # Inside another text (e.g. an address in a free-text column): values of 4+ characters,
    # except those made of hex digits only (postcodes), which hex pseudonyms hold by chance.
    long_values = [value for value in clear if len(value) >= 4 and not re.fullmatch(r"[0-9a-fA-F]+", value)]
    assert [cell for cell in cells for value in long_values if value in cell] == []


def test_contract_macro_is_generated_from_the_contracts() -> None:
    contracts = load_contracts()
    assert MACRO_FILE.read_text(encoding="utf-8") == render_macro(contracts), (
        "macros/pii/contract_columns.sql is stale: run `python -m streaming.operations.contract_pii`"
    )
    customers = contracts["customers"]
    flagged = dataclasses.replace(
        customers,
        attributes=tuple(dataclasses.replace(a, pii=True) if a.column == "registration_date" else a for a in customers.attributes),
    )
    assert contract_columns({"customers": flagged})["customers"]["pii"] == ["cust_name", "email", "registration_date"]


def test_a_column_flagged_pii_is_protected_in_the_marts_without_sql_edits(sample: BuiltSample, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    shutil.copytree(sample.data_dir, data_dir)
    flag = json.dumps({"extra_pii_columns": {"orders": ["status", "currency"]}})
    result, console = _build(data_dir, "run", "--select", "fct_orders", "--full-refresh", "--vars", flag, extra_env={KEY_ENV: KEY})
    assert result.success, console[-3000:]
    built = sorted(_query(data_dir, f"select order_key, status, currency from {MARTS_SCHEMA}.fct_orders"))
    expected = sorted(
        (f"{_escaped(o['customer_id'])}|{_escaped(o['order_id'])}", _oracle("status", o["status"].strip().upper()), _oracle("currency", o["currency"].strip().upper()))
        for o in sample.orders
    )
    assert built == expected


def test_a_build_without_a_key_fails_with_a_clear_message(sample: BuiltSample, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    data_dir = tmp_path / "data"
    write_raw_batch(data_dir, "customers", 0, sample.customers[:3], INGESTED_AT)
    result, console = _build(data_dir, "build", *EVENT_WINDOW, create_local_pii_key=False)
    assert not result.success
    assert "No PII key: set env LAKEHOUSE_PII_KEY" in console
    assert not key_file(data_dir).exists()
    tables = _query(data_dir, f"select table_name from information_schema.tables where table_schema = '{MARTS_SCHEMA}'")
    assert tables == []

    # The way `lakehouse dbt` runs it: the data directory's own key, made on first use.
    result, console = _build(data_dir, "build", *CUSTOMER_MART, *EVENT_WINDOW)
    assert result.success, console[-3000:]
    assert stat.S_IMODE(key_file(data_dir).stat().st_mode) == 0o600


def test_a_short_key_is_refused_before_any_model(sample: BuiltSample, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    write_raw_batch(data_dir, "customers", 0, sample.customers[:3], INGESTED_AT)
    result, console = _build(data_dir, "build", *EVENT_WINDOW, extra_env={KEY_ENV: "s'alt"})
    assert not result.success
    assert "needs at least 32" in console + str(result.exception)
    assert "s'alt" not in console + str(result.exception)


def test_the_local_key_is_created_once_private_and_the_environment_wins(tmp_path: Path) -> None:
    path = ensure_local_key(tmp_path)
    first = path.read_text()
    assert re.fullmatch(r"[0-9a-f]{64}", first)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert ensure_local_key(tmp_path).read_text() == first  # never replaced: pseudonyms stay stable
    assert resolve_key({"LAKEHOUSE_DATA_DIR": str(tmp_path)}) == first.encode()
    assert resolve_key({"LAKEHOUSE_DATA_DIR": str(tmp_path), KEY_ENV: KEY}) == KEY.encode()
    assert resolve_key({"LAKEHOUSE_DATA_DIR": str(tmp_path / "elsewhere")}) is None


@pytest.mark.parametrize("length", [32, 64, 65, 200])
def test_hmac_pads_give_rfc_2104_hmac_sha256(length: int) -> None:
    key = bytes(range(256))[:length]
    inner, outer = hmac_pads(key)
    message = b"email:ana.silva1@example.com"
    two_hashes = hashlib.sha256(outer + hashlib.sha256(inner + message).digest()).hexdigest()
    assert two_hashes == hmac.new(key, message, hashlib.sha256).hexdigest()


def test_a_changed_key_stops_an_incremental_build_until_a_full_refresh(sample: BuiltSample, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    shutil.copytree(sample.data_dir, data_dir)
    other_key = "another-key-" + "fedcba9876543210" * 2
    before = _query(data_dir, f"select customer_key from {MARTS_SCHEMA}.dim_customers order by 1")

    result, console = _build(data_dir, "build", *EVENT_WINDOW, extra_env={KEY_ENV: other_key})
    assert not result.success
    assert "The PII key differs from the one the marts were built with" in console
    assert _query(data_dir, f"select customer_key from {MARTS_SCHEMA}.dim_customers order by 1") == before

    result, console = _build(data_dir, "build", "--full-refresh", *CUSTOMER_MART, *EVENT_WINDOW,
                             extra_env={KEY_ENV: other_key})
    assert result.success, console[-3000:]
    rebuilt = _query(data_dir, f"select customer_id, customer_name from {MARTS_SCHEMA}.dim_customers")
    assert sorted(rebuilt) == sorted(
        (c["id"], hmac.new(other_key.encode(), f"cust_name:{c['cust_name'].strip()}".encode(), hashlib.sha256).hexdigest())
        for c in sample.customers
    )
    result, console = _build(data_dir, "build", *CUSTOMER_MART, *EVENT_WINDOW, extra_env={KEY_ENV: other_key})
    assert result.success, console[-3000:]


def test_marts_with_no_record_of_their_key_need_a_full_refresh(sample: BuiltSample, tmp_path: Path) -> None:
    """Marts built before keyed pseudonyms hold unkeyed hashes an incremental run would keep."""
    data_dir = tmp_path / "data"
    shutil.copytree(sample.data_dir, data_dir)
    with duckdb.connect(str(data_dir / "lakehouse.duckdb")) as con:
        con.sql(f"drop table {MARTS_SCHEMA}.pii_key_fingerprint")

    result, console = _build(data_dir, "build", *EVENT_WINDOW, extra_env={KEY_ENV: KEY})
    assert not result.success
    assert "The marts hold no record of the PII key they were built with" in console

    result, console = _build(data_dir, "build", "--full-refresh", *CUSTOMER_MART, *EVENT_WINDOW,
                             extra_env={KEY_ENV: KEY})
    assert result.success, console[-3000:]
    assert _query(data_dir, f"select count(*) from {MARTS_SCHEMA}.pii_key_fingerprint") == [(1,)]
