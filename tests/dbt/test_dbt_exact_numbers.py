"""Exact number casts (macros/cross_db/exact_numbers.sql) and the ISO timestamp parse,
evaluated on DuckDB for real and checked against Python's `decimal` module
(oracle and inputs: exact_number_cases.py)."""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path

import pytest
from exact_number_cases import (
    EDGE_TEXTS,
    casts_select,
    compile_inline,
    evaluate,
    expected_bigint,
    expected_decimal,
    mismatches,
    random_number_texts,
)

from streaming.pipeline.attributes import NUMBER_PATTERN

pytestmark = pytest.mark.dbt


@pytest.fixture(scope="module")
def local_casts_sql(tmp_path_factory: pytest.TempPathFactory) -> str:
    return compile_inline(casts_select(), tmp_path_factory.mktemp("exact_numbers"))


def test_the_oracle_reads_the_issue_cases_as_the_issue_says() -> None:
    assert expected_decimal("1.00000000001", 18, 2) is None
    assert expected_decimal("-1E-130", 18, 2) is None
    assert expected_decimal("1.2E+3", 18, 2) == Decimal("1200.00")
    assert expected_bigint("1.5") is None
    assert expected_bigint("1E+2") == 100


def test_exact_decimal_and_bigint_match_python_decimal_on_the_edges(local_casts_sql: str) -> None:
    rows = evaluate(local_casts_sql, list(EDGE_TEXTS))

    assert len(rows) == len(EDGE_TEXTS) + 1
    assert mismatches(rows) == []
    by_text = {row[0]: row for row in rows}
    # The issue's two cases: null, hence flagged invalid and seen by not_negative's caller.
    assert by_text["1.00000000001"][1] is None
    assert by_text["-1E-130"][1] is None
    assert by_text["1.5"][-1] is None


def test_exact_decimal_and_bigint_match_python_decimal_on_random_numbers(local_casts_sql: str) -> None:
    texts = random_number_texts(3000)
    assert all(re.match(NUMBER_PATTERN, text) for text in texts)

    rows = evaluate(local_casts_sql, texts)

    assert mismatches(rows) == []
    # The sample covers both outcomes for the money type, so the comparison means something.
    money = [row[1] for row in rows if row[0] is not None]
    assert sum(value is None for value in money) > 300
    assert sum(value is not None for value in money) > 200


def test_timestamps_keep_microseconds_and_unparseable_text_is_null(tmp_path: Path) -> None:
    compiled = compile_inline("select v, {{ parse_iso_timestamp('v') }} as ts from number_texts", tmp_path)

    rows = dict(evaluate(compiled, [
        "2024-03-01T10:00:00.123456Z", "2024-03-01T12:00:00.654321+02:00", "2024-03-01T10:00:00.1234567Z",
        "2024-03-01", "yesterday",
    ]))

    assert str(rows["2024-03-01T10:00:00.123456Z"]) == "2024-03-01 10:00:00.123456"
    assert str(rows["2024-03-01T12:00:00.654321+02:00"]) == "2024-03-01 10:00:00.654321"
    # Digits past the microsecond are cut, not rounded up.
    assert str(rows["2024-03-01T10:00:00.1234567Z"]) == "2024-03-01 10:00:00.123456"
    assert str(rows["2024-03-01"]) == "2024-03-01 00:00:00"
    assert rows["yesterday"] is None


def test_dates_are_calendar_dates_only(tmp_path: Path) -> None:
    compiled = compile_inline("select v, {{ parse_iso_date('v') }} as day from number_texts", tmp_path)

    rows = dict(evaluate(compiled, ["2024-03-01", "2024-02-29", "2023-02-29", "2024-03-01T10:00:00Z", "01.03.2024"]))

    assert str(rows["2024-03-01"]) == "2024-03-01"
    assert str(rows["2024-02-29"]) == "2024-02-29"
    # Not a day of the calendar, or more than a day: null, never a guess.
    assert rows["2023-02-29"] is None
    assert rows["2024-03-01T10:00:00Z"] is None
    assert rows["01.03.2024"] is None
