"""What analysts read: every mart and column described, mart_freshness, and the docs
site that `lakehouse docs` serves, loaded in a real headless browser (Debian's
chromium; skipped with the reason where it is not installed)."""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from html.parser import HTMLParser
from pathlib import Path

import pytest
from dbt_scenario import BATCHES, CUSTOMERS, EVENT_WINDOW, INGESTED, write_batch
from dbt_tables import query

from streaming.runtime.dbt_runner import run_dbt

pytestmark = pytest.mark.dbt

REPO = Path(__file__).resolve().parents[2]
# The benchmarks' results folder (benchmarks/run.py --results-dir default).
SCREENSHOT_DIR = REPO / "results" / "docs_site"
MARTS_PATH = "dbt_project/models/marts/samples/"
FRESHNESS = "mart_freshness"
# Glue's limits for what persist_docs writes: Column.Comment at most 255 characters
# (docs.aws.amazon.com/glue/latest/webapi/API_Column.html), TableInput.Description at
# most 2048 (.../webapi/API_TableInput.html); dbt-athena cuts longer text with "..."
# (dbt-athena 1.11, dbt/adapters/athena/utils.py ellipsis_comment).
GLUE_COLUMN_COMMENT_MAX = 255
GLUE_TABLE_DESCRIPTION_MAX = 2048
SITE_START_SECONDS = 300


def _utc_now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


def _freshness(data_dir: Path) -> dict[str, tuple]:
    rows = query(data_dir, f"select curated_table, row_count, newest_ingested_at, newest_event_at, built_at "
                           f"from lakehouse_marts.{FRESHNESS}")
    return {row[0]: row[1:] for row in rows}


@pytest.fixture(scope="module")
def two_builds(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A build over the scenario's batches but the last, then the last batch lands and
    a second build runs; mart_freshness is read after each. The builds build every
    model (and seed), not the data and unit tests: what these tests read is the
    models' tables and the docs; the session's scenario build runs the tests."""
    data_dir = tmp_path_factory.mktemp("docs") / "data"
    *earlier, last = BATCHES
    states: list[dict] = []
    for new_batches in (earlier, [last]):
        for batch_id in new_batches:
            write_batch(data_dir, batch_id)
        landed = [*(states[-1]["batches"] if states else []), *new_batches]
        started = _utc_now()
        result = run_dbt(["build", *EVENT_WINDOW, "--exclude-resource-type", "test", "unit_test"], data_dir)
        assert result.success, result.exception
        states.append({"started": started, "finished": _utc_now(), "freshness": _freshness(data_dir),
                       "batches": landed})
    return {"data_dir": data_dir, "first": states[0], "second": states[1]}


def _mart_names(manifest: dict) -> set[str]:
    return {node["name"] for node in manifest["nodes"].values()
            if node["resource_type"] == "model" and node["original_file_path"].startswith(MARTS_PATH)}


def _newest_customer_event(batches: list[int]) -> datetime:
    return max(row["_event_ts"] for batch in batches for row in CUSTOMERS[batch]).replace(tzinfo=None)


def test_mart_freshness_follows_new_batches_and_each_build(two_builds: dict) -> None:
    data_dir = two_builds["data_dir"]
    first, second = two_builds["first"], two_builds["second"]
    manifest = json.loads((data_dir / "dbt" / "target" / "manifest.json").read_text())
    assert set(second["freshness"]) == _mart_names(manifest) - {FRESHNESS}
    for state in (first, second):
        batches = state["batches"]
        freshness = state["freshness"]
        newest_batch = INGESTED[max(batches)].replace(tzinfo=None)
        # The customer tables hold a change of the newest batch (a new customer in each).
        for table in ("dim_customers", "dim_customers_history"):
            assert freshness[table][1] == newest_batch, table
        assert freshness["dim_customers_history"][2] == _newest_customer_event(batches)
        # The daily aggregates carry no ingestion time; their event time is a day.
        assert freshness["agg_daily_customer_activity"][1] is None
        assert freshness["agg_daily_customer_activity"][2] == _newest_customer_event(batches).replace(hour=0, minute=0)
        built_at = {row[3] for row in freshness.values()}
        assert len(built_at) == 1
        assert state["started"] <= built_at.pop() <= state["finished"]
    # Row counts are those of the tables themselves.
    for table, (row_count, *_) in second["freshness"].items():
        assert query(data_dir, f"select count(*) from lakehouse_marts.{table}")[0][0] == row_count


@pytest.fixture(scope="module")
def docs_site(two_builds: dict) -> Iterator[dict]:
    """`lakehouse docs --port 0` as a real process over the built data directory; yields
    the address it printed. It runs this checkout's code (REPO first on PYTHONPATH)."""
    data_dir = two_builds["data_dir"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "dbt_project"),
                                                        os.environ.get("PYTHONPATH", "")])}
    process = subprocess.Popen(
        [sys.executable, "-m", "streaming.cli", "docs", "--data-dir", str(data_dir), "--port", "0"],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    lines: queue.Queue[str] = queue.Queue()

    def forward_output() -> None:
        for line in process.stdout:
            lines.put(line)

    threading.Thread(target=forward_output, daemon=True).start()
    printed = []
    address = None
    deadline = time.monotonic() + SITE_START_SECONDS
    try:
        while address is None:
            try:
                line = lines.get(timeout=1)
            except queue.Empty:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("lakehouse docs printed no address:\n" + "".join(printed))
                continue
            printed.append(line)
            match = re.search(r"(http://[\d.]+:\d+/) \(Ctrl-C stops the server\)", line)
            address = match.group(1) if match else None
        yield {"address": address, "data_dir": data_dir}
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_lakehouse_docs_serves_the_generated_site_on_loopback(docs_site: dict) -> None:
    assert docs_site["address"].startswith("http://127.0.0.1:")
    with urllib.request.urlopen(docs_site["address"] + "manifest.json", timeout=10) as response:
        served = json.load(response)
    written = json.loads((docs_site["data_dir"] / "dbt" / "target" / "manifest.json").read_text())
    assert served["metadata"]["invocation_id"] == written["metadata"]["invocation_id"]
    assert written["metadata"]["dbt_schema_version"].endswith("manifest/v12.json")


def test_every_mart_and_column_is_described_and_every_described_column_exists(docs_site: dict) -> None:
    """Descriptions from the YAML (manifest) against the columns the built DuckDB
    tables have (catalog.json, which dbt reads from the database)."""
    target = docs_site["data_dir"] / "dbt" / "target"
    manifest = json.loads((target / "manifest.json").read_text())
    catalog = json.loads((target / "catalog.json").read_text())
    marts = {uid: node for uid, node in manifest["nodes"].items()
             if node["resource_type"] == "model" and node["original_file_path"].startswith(MARTS_PATH)}
    assert len(marts) >= 7
    problems = []
    for uid, node in sorted(marts.items()):
        name = node["name"]
        if not node["description"].strip():
            problems.append(f"{name}: no description")
        if len(" ".join(node["description"].split())) > GLUE_TABLE_DESCRIPTION_MAX:
            problems.append(f"{name}: description longer than Glue keeps")
        if uid not in catalog["nodes"]:
            problems.append(f"{name}: not built")
            continue
        built = {column.lower() for column in catalog["nodes"][uid]["columns"]}
        described = {column.lower(): entry["description"] for column, entry in node["columns"].items()}
        problems += [f"{name}.{column}: no description" for column in sorted(built)
                     if not described.get(column, "").strip()]
        problems += [f"{name}.{column}: described but not a column" for column in sorted(set(described) - built)]
        problems += [f"{name}.{column}: description longer than Glue keeps" for column, text in described.items()
                     if len(" ".join(text.split())) > GLUE_COLUMN_COMMENT_MAX]
    assert problems == []


class _RenderedText(HTMLParser):
    """Text, navigation-tree entries and the links under each section heading (<h6>,
    e.g. "Depends On") of a dumped DOM, outside <script>/<style> (the page inlines its
    templates in scripts)."""

    def __init__(self) -> None:
        super().__init__()
        self.skipping = 0
        self.text: list[str] = []
        self.tree_entries: set[str] = set()
        self.section_links: dict[str, set[str]] = {}
        self.section = ""
        self.heading: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style"):
            self.skipping += 1
        attributes = dict(attrs)
        if tag == "h6":
            self.heading = []
        if tag == "a" and attributes.get("href", "").startswith("#!/"):
            self.section_links.setdefault(self.section, set()).add(attributes["href"])
        if attributes.get("data-nav-unique-id"):
            self.tree_entries.add(attributes["data-nav-unique-id"])

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style"):
            self.skipping -= 1
        if tag == "h6" and self.heading is not None:
            self.section = " ".join("".join(self.heading).split())
            self.heading = None

    def handle_data(self, data: str) -> None:
        if not self.skipping:
            self.text.append(data)
            if self.heading is not None:
                self.heading.append(data)

    @property
    def words(self) -> str:
        return " ".join(" ".join(self.text).split())


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("Debian's chromium is not installed (apt-get install chromium; .ci/run installs it)")
    return found


def _browser(*args: str) -> subprocess.CompletedProcess:
    # The page is a single-page app: virtual time lets its scripts fetch the manifest
    # and render before the DOM is dumped or the picture taken.
    return subprocess.run(
        [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         "--window-size=1400,900", "--virtual-time-budget=20000", *args],
        capture_output=True, text=True, timeout=180, check=True,
    )


def _rendered(address: str, route: str, *also: str) -> _RenderedText:
    """The page's DOM after its scripts ran; `also`: further commands of the same browser
    run on the same page (a --screenshot), one browser start fewer."""
    page = _RenderedText()
    page.feed(_browser("--dump-dom", *also, f"{address}#!/{route}").stdout)
    return page


def _one_line(text: str) -> str:
    return " ".join(text.split())


def test_docs_site_shows_marts_descriptions_and_lineage_from_raw_sources(docs_site: dict) -> None:
    address = docs_site["address"]
    manifest = json.loads((docs_site["data_dir"] / "dbt" / "target" / "manifest.json").read_text())
    project = "dynamodb_lakehouse"
    mart = manifest["nodes"][f"model.{project}.dim_customers"]

    # Pictures for people: the mart's page (taken by the browser run that dumps its DOM),
    # and the lineage graph from the raw sources to every mart (tests excluded).
    SCREENSHOT_DIR.mkdir(parents=True, exist_ok=True)
    mart_route = f"model/model.{project}.dim_customers"
    pictures = {
        "mart_page.png": mart_route,
        "lineage.png": f"model/model.{project}.{FRESHNESS}?g_v=1&g_i=%2B{FRESHNESS}&g_e=resource_type:test",
    }
    for file_name in pictures:
        (SCREENSHOT_DIR / file_name).unlink(missing_ok=True)

    mart_page = _rendered(address, mart_route, f"--screenshot={SCREENSHOT_DIR / 'mart_page.png'}")
    # Every mart is listed in the project tree; the mart's own and its columns'
    # descriptions are on its page.
    for name in _mart_names(manifest):
        assert f"model.{project}.{name}" in mart_page.tree_entries, name
    assert _one_line(mart["description"]) in mart_page.words
    for column in ("customer_key", "is_free_mail", "last_changed_at"):
        assert _one_line(mart["columns"][column]["description"]) in mart_page.words, column

    # Lineage, raw to mart, as the pages link it: the raw change log is referenced by
    # the staging model, which depends on it and is referenced by the mart.
    raw_source = f"#!/source/source.{project}.dynamodb.customers_changes"
    staging = f"#!/model/model.{project}.stg_dynamodb__customers"
    source_page = _rendered(address, raw_source.removeprefix("#!/"))
    assert staging in source_page.section_links["Referenced By"]
    staging_page = _rendered(address, staging.removeprefix("#!/"))
    assert raw_source in staging_page.section_links["Depends On"]
    assert f"#!/model/model.{project}.dim_customers" in staging_page.section_links["Referenced By"]

    from PIL import Image

    _browser(f"--screenshot={SCREENSHOT_DIR / 'lineage.png'}", f"{address}#!/{pictures['lineage.png']}")
    for file_name in pictures:
        picture = SCREENSHOT_DIR / file_name
        with Image.open(picture) as image:
            assert image.size == (1400, 900)
            # A rendered page, not a blank one: many distinct colours.
            assert len(image.convert("RGB").getcolors(maxcolors=1 << 20) or []) > 50, file_name


AS_OF = datetime(2024, 3, 1, 9, 45)


def _customers_live_at(moment: datetime) -> dict[str, int]:
    """Oracle from the scenario's events: per live customer id at `moment`, how many
    distinct INSERT/MODIFY events it had by then (its version number)."""
    events: dict[tuple[str, str], set[tuple]] = {}
    for batch in BATCHES:
        for row in CUSTOMERS[batch]:
            at = row["_event_ts"].replace(tzinfo=None)
            if at <= moment:
                events.setdefault((row["id"], row["cust_name"]), set()).add(
                    (at, row["sequence"], row.get("_event_name", "INSERT")))
    live = {}
    for (customer_id, _), key_events in events.items():
        ordered = sorted(key_events)
        if ordered[-1][2] != "REMOVE":
            live[customer_id] = sum(name != "REMOVE" for *_, name in ordered)
    return live


def test_saved_analyses_run_on_the_built_marts(two_builds: dict) -> None:
    """The analyses compile on the local target too and answer what they say."""
    data_dir = two_builds["data_dir"]
    variables = f"{{from_date: '2024-03-01', as_of: '{AS_OF:%Y-%m-%d %H:%M:%S}'}}"
    result = run_dbt(["compile", "--select", "resource_type:analysis", "--vars", variables], data_dir)
    assert result.success, result.exception
    compiled = data_dir / "dbt" / "target" / "compiled" / "dynamodb_lakehouse" / "dbt_project" / "analyses" / "samples"

    def run(name: str) -> list[tuple]:
        return query(data_dir, (compiled / f"{name}.sql").read_text())

    as_of = run("customers_as_of")
    assert {row[1]: row[2] for row in as_of} == _customers_live_at(AS_OF) == {"c1": 3, "c3": 1}

    daily = {row[0]: row for row in run("daily_activity")}
    registrations = {day: registered for day, registered, *_ in query(
        data_dir, "select activity_date, registrations from lakehouse_marts.agg_daily_customer_activity")}
    orders = dict(query(data_dir, "select order_date, count(*) from lakehouse_marts.fct_orders group by order_date"))
    assert set(daily) == set(registrations) | set(orders)
    for day, row in daily.items():
        assert row[1] == registrations.get(day, 0) and row[5] == orders.get(day, 0), day
    # Distinct INSERT events of the scenario: five customers on day 1 (c2's redelivered
    # INSERT counts once), two on day 2.
    assert [daily[day][1] for day in sorted(daily)] == [5, 2]

    freshness = _freshness(data_dir)
    lags = run("freshness_lag")
    assert {row[0] for row in lags if row[5] is None} == {"agg_daily_invoiced_amount_by_tenant"}
    for table, _rows, _built, since_build, since_ingestion, since_event in lags:
        _count, ingested, event, built_at = freshness[table]
        # Whole hours, truncated, as Athena's date_diff counts them; none for an empty
        # table (the scenario has no app invoices).
        assert since_event == (None if event is None else (built_at - event) // timedelta(hours=1)), table
        assert since_ingestion == (None if ingested is None else (built_at - ingested) // timedelta(hours=1)), table
        assert since_build == (_utc_now() - built_at) // timedelta(hours=1)


def test_lakehouse_docs_refuses_a_port_it_cannot_use(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from streaming.cli import main
    from streaming.operations.docs_site import DocsSiteError, docs_server

    assert main(["docs", "--data-dir", str(tmp_path), "--port", "70000"]) == 2
    assert "--port must be between 0 and 65535" in capsys.readouterr().err
    taken = docs_server(tmp_path, 0)
    try:
        with pytest.raises(DocsSiteError, match="choose another --port"):
            docs_server(tmp_path, taken.server_address[1])
    finally:
        taken.server_close()
