"""The saved queries of docs/analysts.md on Athena's engine. The doc is the list: each
query its table of saved queries names (an analysis under dbt_project/analyses/) and each
SQL it quotes inline runs on the Trino build and on DuckDB's build of the same data, each
compiled for its engine by dbt with the same options, and both give the same rows.

Left out of the comparison, and checked on each engine instead: the columns that hold
or count from the moment of the build (BUILD_TIME_COLUMNS), since the two builds ran
minutes apart. Their hours are checked against the whole hours elapsed between the
times mart_freshness holds on the same engine.
"""
from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path

import duckdb
import pytest
from dbt_builds import REPO, comparable, trino_dbt

from streaming.io.layout import DataLayout
from streaming.runtime.athena_local import CATALOG, query
from streaming.runtime.dbt_runner import run_dbt_command

pytestmark = pytest.mark.athena

ANALYSTS_DOC = REPO / "docs" / "analysts.md"
ANALYSES = REPO / "dbt_project" / "analyses" / "samples"
COMPILED_ANALYSES = Path("compiled") / "dynamodb_lakehouse" / "dbt_project" / "analyses" / "samples"
BUILD_TIME_COLUMNS = {
    "mart_freshness": {"built_at"},
    "freshness_lag": {"built_at", "hours_since_build", "hours_since_ingestion", "hours_since_newest_event"},
}
# freshness_lag's hours counted from built_at, and the mart_freshness time each counts from.
HOURS_UNTIL_BUILT = {"hours_since_ingestion": "newest_ingested_at", "hours_since_newest_event": "newest_event_at"}


def saved_queries(doc: str) -> list[str]:
    """The analyses the table under "Saved queries" names, in its order."""
    section = doc.split("## Saved queries", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `(\w+)` \|", section, re.MULTILINE)


def quoted_queries(doc: str) -> list[str]:
    """The SQL the doc quotes inline (`select ...`)."""
    return re.findall(r"`(select [^`]+)`", doc)


def query_options(port: int) -> dict[str, str]:
    """The documented options (`--vars`) at values inside the landed data: from_date its
    first event day, as_of halfway between its first and last customer change."""
    _, rows = query(port, f'select min(_event_ts), max(_event_ts) from "{CATALOG}"."raw"."customers_changes"')
    first, last = (datetime.fromisoformat(text[:19]) for text in rows[0])
    return {"from_date": f"{first:%Y-%m-%d}", "as_of": f"{first + (last - first) / 2:%Y-%m-%d %H:%M:%S}"}


def on_trino(port: int, sql: str) -> list[dict]:
    columns, rows = query(port, sql)
    return [{column["name"]: comparable(value, column["type"]) for column, value in zip(columns, row)}
            for row in rows]


def on_duckdb(database: Path, sql: str) -> list[dict]:
    with duckdb.connect(str(database), read_only=True) as connection:
        connection.execute("set TimeZone = 'UTC'")  # current_timestamp as the dbt profile reads it
        cursor = connection.execute(sql)
        names = [column[0] for column in cursor.description]
        return [{name: comparable(value) for name, value in zip(names, row)} for row in cursor.fetchall()]


def without(rows: list[dict], left_out: set[str]) -> list[str]:
    return sorted(json.dumps({name: value for name, value in row.items() if name not in left_out}, sort_keys=True)
                  for row in rows)


def whole_hours(start: str, end: str) -> int:
    elapsed = datetime.fromisoformat(end) - datetime.fromisoformat(start)
    hours = int(abs(elapsed).total_seconds() // 3600)
    return hours if elapsed.total_seconds() >= 0 else -hours


@pytest.fixture(scope="module")
def analysts_results(engine, synced, both_built, tmp_path_factory) -> dict[str, dict[str, list[dict]]]:
    """Each query the doc names, on each engine: {query: {"trino": rows, "duckdb": rows}}."""
    _, state = engine
    port = state["trino_port"]
    doc = ANALYSTS_DOC.read_text()
    names = saved_queries(doc)
    options = ["--vars", json.dumps(query_options(port))]
    run_dbt_command(synced.layout.root, ["compile", "--select", *names, *options], report=lambda _: None)
    work = tmp_path_factory.mktemp("analyses-trino")
    compiled = trino_dbt(port, ["compile", "--select", *names, *options], work)
    assert compiled.returncode == 0, compiled.stdout[-3000:]
    database = synced.layout.root / "lakehouse.duckdb"
    results = {}
    for name in names:
        results[name] = {
            "trino": on_trino(port, (work / "target" / COMPILED_ANALYSES / f"{name}.sql").read_text()),
            "duckdb": on_duckdb(database, (DataLayout(synced.layout.root).dbt_target / COMPILED_ANALYSES
                                           / f"{name}.sql").read_text()),
        }
    for sql in quoted_queries(doc):
        name = re.search(r"\bfrom \w+\.(\w+)", sql).group(1)
        results[name] = {"trino": on_trino(port, sql), "duckdb": on_duckdb(database, sql)}
    return results


def test_the_doc_names_its_saved_queries_and_each_is_an_analysis():
    doc = ANALYSTS_DOC.read_text()
    names = saved_queries(doc)
    assert len(names) >= 4
    assert [name for name in names if not (ANALYSES / f"{name}.sql").is_file()] == []
    assert quoted_queries(doc) == ["select * from lakehouse_marts.mart_freshness"]


def test_every_query_of_the_analysts_doc_gives_the_same_rows_on_trino_and_duckdb(analysts_results):
    differences = {}
    for name, by_engine in analysts_results.items():
        left_out = BUILD_TIME_COLUMNS.get(name, set())
        trino_rows, duckdb_rows = without(by_engine["trino"], left_out), without(by_engine["duckdb"], left_out)
        assert trino_rows, f"{name} returned no rows on Trino: the comparison would prove nothing"
        if trino_rows != duckdb_rows:
            differences[name] = (sorted(set(trino_rows) - set(duckdb_rows))[:2],
                                 sorted(set(duckdb_rows) - set(trino_rows))[:2])
    assert differences == {}


@pytest.mark.parametrize("engine_name", ["trino", "duckdb"])
def test_freshness_lag_counts_whole_hours_until_the_build_on_each_engine(analysts_results, engine_name):
    lag = {row["curated_table"]: row for row in analysts_results["freshness_lag"][engine_name]}
    freshness = {row["curated_table"]: row for row in analysts_results["mart_freshness"][engine_name]}
    assert sorted(lag) == sorted(freshness)
    for table, row in lag.items():
        assert row["built_at"] == freshness[table]["built_at"], table
        for hours, since in HOURS_UNTIL_BUILT.items():
            start = freshness[table][since]
            expected = None if start is None else whole_hours(start, row["built_at"])
            assert row[hours] == expected, (table, hours)
