"""Number texts and a Python `decimal` oracle for the exact casts of
macros/cross_db/exact_numbers.sql, shared by the DuckDB run (test_dbt_exact_numbers.py)
and the Athena compile (test_dbt_athena.py).

The oracle: a number text fits decimal(p, s) when Python's exact Decimal of it has no
digit beyond the s-th decimal and fewer than p - s integer digits; bigint when it is a
whole number in [-2^63, 2^63). Inputs: the edges the issue names (38 significant
digits, more than 10 decimals, exponent forms, tiny negative values), DynamoDB's own
limits (AWS docs, "Supported data types and naming rules in Amazon DynamoDB":
https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/HowItWorks.NamingRulesDataTypes.html
-- 38 digits of precision, magnitudes 1E-130 to 9.99...E+125), and seeded random texts
of the number grammar streaming/pipeline/attributes.py admits.
"""

from __future__ import annotations

import random
import re
from decimal import Decimal, localcontext
from pathlib import Path

import duckdb

from streaming.pipeline.attributes import NUMBER_PATTERN
from streaming.runtime.dbt_runner import run_dbt

# (precision, scale) pairs compiled as columns d_<p>_<s>.
DECIMAL_TYPES = ((18, 2), (38, 10), (38, 0), (38, 38), (5, 5), (1, 0))

EDGE_TEXTS = (
    "0.10", "12.345", "1.005", "9999999999999999.99", "10000000000000000", "-9999999999999999.99",
    # Beyond the 10th decimal: a decimal(38,10) comparison rounded these away.
    "1.00000000001", "1.000000000001", "-0.00000000001",
    # Tiny values, negative and positive, in exponent form and spelled out.
    "-1E-130", "1E-130", "-0.000000000000000000000000000000000000001", "1e-38", "-1e-38",
    # DynamoDB's largest magnitudes.
    "9.9999999999999999999999999999999999999E+125", "-9.9999999999999999999999999999999999999E+125",
    # Exponent forms that fit and that do not.
    "1.2E+3", "5e-1", "1.2e3", "12E-2", "1E+16", "1E+15", "125E-3", "0.5E1", "50E-2",
    # 38 significant digits.
    "12345678901234567890123456789012345678", "-1234567890123456789012345678.9012345678",
    "0.12345678901234567890123456789012345678", "1234567890123456.7800000000000000000000",
    "99999999999999999999999999999999999999", "123456789012345678901234567890123456.78",
    # Signs, zeros, points at either end.
    "+1.50", "-0.0", "0", "000.000", "0E+999", ".5", "5.", "-.25", "+.01",
    # Whole numbers for bigint, at and past its range.
    "9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
    "1.5", "2.0", "1E+2", "100.00", "-3",
    # Not numbers.
    "abc", "", " 1", "1 ", "1..2", "1e", "e5", "--1", "1,5", "0x10", "NaN", "Infinity", "1E+99999999999",
)


def random_number_texts(count: int, seed: int = 11) -> list[str]:
    """Texts of the DynamoDB number grammar: signs, leading and trailing zeros, exponents."""
    rng = random.Random(seed)
    texts = []
    for _ in range(count):
        sign = rng.choice(["", "", "-", "+"])
        integer = "".join(rng.choice("0123456789") for _ in range(rng.randint(0, 20)))
        fraction = "".join(rng.choice("0123456789") for _ in range(rng.randint(0, 20)))
        if not integer and not fraction:
            integer = "0"
        # "12", "12.", "12.5" or ".5": the grammar needs a digit on one side of the point.
        mantissa = integer + ("." + fraction if fraction or rng.random() < 0.1 else "")
        exponent = ""
        if rng.random() < 0.4:
            exponent = rng.choice("eE") + rng.choice(["", "+", "-"]) + str(rng.randint(0, 45))
        texts.append(sign + mantissa + exponent)
    return texts


def expected_decimal(text: str, precision: int, scale: int) -> Decimal | None:
    if not re.match(NUMBER_PATTERN, text):
        return None
    value = Decimal(text)
    with localcontext() as context:
        context.prec = 400
        context.Emax = 10**12
        context.Emin = -(10**12)
        scaled = value.scaleb(scale)
        if scaled != scaled.to_integral_value() or abs(scaled) >= Decimal(10) ** precision:
            return None
        # SQL decimals have no negative zero.
        return (abs(value) if value.is_zero() else value).quantize(Decimal(1).scaleb(-scale))


def expected_bigint(text: str) -> int | None:
    whole = expected_decimal(text, 38, 0)
    if whole is None or not -(2**63) <= whole < 2**63:
        return None
    return int(whole)


def compile_inline(sql: str, data_dir: Path, target: str = "local") -> str:
    result = run_dbt(["compile", "--inline", sql], data_dir, target=target)
    assert result.success, result.exception
    return result.result.results[0].node.compiled_code


def casts_select() -> str:
    """One column per cast under test, over a table number_texts(v)."""
    columns = [f"{{{{ exact_decimal('v', {p}, {s}) }}}} as d_{p}_{s}" for p, s in DECIMAL_TYPES]
    return "select v, " + ", ".join(columns) + ", {{ exact_bigint('v') }} as whole from number_texts"


def evaluate(compiled_sql: str, texts: list[str]) -> list[tuple]:
    connection = duckdb.connect()
    connection.execute("create table number_texts (v varchar)")
    connection.executemany("insert into number_texts values (?)", [(text,) for text in [*texts, None]])
    return connection.execute(compiled_sql).fetchall()


def mismatches(rows: list[tuple]) -> list[str]:
    problems = []
    for text, *decimals, whole in rows:
        if text is None:
            if any(value is not None for value in (*decimals, whole)):
                problems.append(f"null text gave {decimals} {whole}")
            continue
        for (precision, scale), actual in zip(DECIMAL_TYPES, decimals, strict=True):
            expected = expected_decimal(text, precision, scale)
            # Equal value and, when there is one, the declared scale's digits.
            if (actual is None) != (expected is None) or (actual is not None and str(actual) != str(expected)):
                problems.append(f"{text!r} as decimal({precision},{scale}): {actual} != {expected}")
        if whole != expected_bigint(text):
            problems.append(f"{text!r} as bigint: {whole} != {expected_bigint(text)}")
    return problems
