"""The Athena target, offline: `dbt compile --target athena` against a moto Glue
Catalog, then every compiled model and data test is syntax-checked as
Trino SQL (trino-sql-validator) and as Athena SQL (sqlglot), with no DuckDB-only
syntax. moto accepts Athena queries without running them, so `dbt run --target
athena --full-refresh` runs the materializations' control flow: the statements they
submit and their Glue/S3 calls are checked, not query results."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
import sqlglot
import yaml
from composite_key_cases import ORDER_KEYS, composite_key
from exact_number_cases import EDGE_TEXTS, casts_select, compile_inline, evaluate, mismatches, random_number_texts
from trino_sql_validator import validate

from streaming.contracts.loader import load_contracts
from streaming.runtime.dbt_runner import run_dbt
from streaming.samples.raw_schema import arrow_raw_schema

pytestmark = pytest.mark.dbt

REGION = "eu-west-1"
RAW_DATABASE = "dynamodb_raw"
# The raw tables whose models `lakehouse scaffold` wrote (the app contract's entities).
SCAFFOLDED = ("app_tenants", "app_users", "app_invoices")
DBT_DATABASES = ["lakehouse", "lakehouse_staging", "lakehouse_intermediate", "lakehouse_marts",
                 "lakehouse_seeds", "lakehouse_snapshots"]

# Constructs DuckDB accepts and Athena rejects (or reads differently).
DUCKDB_ONLY = {
    "cast shorthand ::": re.compile(r"::"),
    "QUALIFY": re.compile(r"\bqualify\b", re.I),
    "SELECT * EXCLUDE/REPLACE": re.compile(r"\*\s*(exclude|replace)\s*\(", re.I),
    "trailing comma before FROM": re.compile(r",\s*from\b", re.I),
    "DuckDB-only function": re.compile(r"\b(regexp_matches|list_\w+|struct_pack|strftime|epoch_ms)\s*\(", re.I),
    "timestamptz type": re.compile(r"\btimestamptz\b", re.I),
    "DuckDB lateral unnest": re.compile(r"\bwith ordinality as element\b", re.I),
    "bare timestamp type (Iceberg needs timestamp(6))": re.compile(r"as timestamp\)", re.I),
}


def _hive_type(arrow_type: pa.DataType) -> str:
    if pa.types.is_string(arrow_type):
        return "string"
    if pa.types.is_binary(arrow_type):
        return "binary"
    if pa.types.is_boolean(arrow_type):
        return "boolean"
    if pa.types.is_int64(arrow_type):
        return "bigint"
    if pa.types.is_timestamp(arrow_type):
        return "timestamp"
    if pa.types.is_list(arrow_type):
        return f"array<{_hive_type(arrow_type.value_type)}>"
    if pa.types.is_struct(arrow_type):
        fields = ",".join(f"{field.name}:{_hive_type(field.type)}" for field in arrow_type)
        return f"struct<{fields}>"
    raise ValueError(f"no Hive type for {arrow_type}")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def moto_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    moto_server = Path(sys.executable).parent / "moto_server"
    if not moto_server.exists():
        pytest.skip("moto_server is not installed (pip install 'moto[server]')")
    port = _free_port()
    log = (tmp_path_factory.mktemp("moto") / "moto.log").open("w")
    process = subprocess.Popen([str(moto_server), "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    pytest.fail(f"moto_server did not start on port {port}")
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)
        log.close()


@pytest.fixture(scope="module")
def fake_aws_env(moto_endpoint: str) -> Iterator[dict[str, str]]:
    """Dummy credentials and the moto endpoint, for this module only."""
    env = {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_REGION": REGION,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_ENDPOINT_URL": moto_endpoint,
        "LAKEHOUSE_RAW_DATABASE": RAW_DATABASE,
    }
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    yield env
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def _create_external_table(glue, database: str, name: str, columns: list[tuple[str, str]], location: str,
                           parameters: dict[str, str]) -> None:
    glue.create_table(
        DatabaseName=database,
        TableInput={
            "Name": name,
            "TableType": "EXTERNAL_TABLE",
            "Parameters": parameters,
            "StorageDescriptor": {"Columns": [{"Name": n, "Type": t} for n, t in columns], "Location": location},
        },
    )


@pytest.fixture(scope="module")
def compiled_sql(fake_aws_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    import boto3

    glue = boto3.client("glue", region_name=REGION, endpoint_url=fake_aws_env["AWS_ENDPOINT_URL"])
    for database in [RAW_DATABASE, *DBT_DATABASES]:
        glue.create_database(DatabaseInput={"Name": database})
    # Both raw tables of each DynamoDB table, as the Hudi sync registers them: the change
    # log (with its _ingest_hour partition column) and the current state.
    for table, contract in load_contracts().items():
        schema = arrow_raw_schema(contract)
        columns = [(field.name, _hive_type(field.type)) for field in schema] + [("_batch_id", "bigint")]
        for name, extra in ((f"{table}_changes", [("_ingest_hour", "string")]), (table, [])):
            _create_external_table(glue, RAW_DATABASE, name, columns + extra, f"s3://raw-bucket/{name}/",
                                   {"classification": "hudi"})
    # Existing tables make is_incremental() true, so the merge branch is compiled (the
    # staging models and the order line models, whose deletions differ by engine).
    for database, model in (("lakehouse_staging", "stg_dynamodb__customers"), ("lakehouse_staging", "stg_dynamodb__orders"),
                            ("lakehouse_staging", "stg_dynamodb__customers_changes"),
                            ("lakehouse_intermediate", "int_orders__lines_unnested"),
                            ("lakehouse_marts", "fct_order_lines"), ("lakehouse_marts", "dim_customers_history"),
                            *(("lakehouse_staging", f"stg_dynamodb__{entity}{suffix}")
                              for entity in SCAFFOLDED for suffix in ("", "_changes"))):
        _create_external_table(glue, database, model, [("_ordering_value", "string"), ("_ingested_at", "timestamp")],
                               f"s3://curated-bucket/{model}/", {"table_type": "ICEBERG"})
    data_dir = tmp_path_factory.mktemp("athena")
    result = run_dbt(["compile", "--exclude", "resource_type:unit_test"], data_dir, target="athena")
    assert result.success, result.exception
    compiled_dir = data_dir / "dbt" / "target" / "compiled"
    files = {str(path.relative_to(compiled_dir)): path.read_text() for path in compiled_dir.rglob("*.sql")}
    return files


def test_every_model_and_data_test_compiles_for_athena(compiled_sql: dict[str, str]) -> None:
    names = " ".join(compiled_sql)
    for model in ("stg_dynamodb__customers", "stg_dynamodb__orders", "stg_dynamodb__customers_changes",
                  "int_customers__change_events", "int_orders__lines_unnested",
                  "dim_customers", "dim_customers_history", "fct_orders", "fct_order_lines", "agg_daily_customer_activity",
                  "agg_daily_revenue_by_status", "stg_dynamodb__app_invoices", "stg_dynamodb__app_users_changes",
                  "agg_daily_invoiced_amount_by_tenant"):
        assert f"{model}.sql" in names
    data_tests = [name for name in compiled_sql if ".yml/" in name]
    assert len(data_tests) >= 60
    # Compiled as an incremental build runs them (macros/tests/changed_rows_only.sql),
    # so the checks below cover the narrowed form of the tests too.
    narrowed = [name for name in data_tests if "data_test_watermarks" in compiled_sql[name]]
    assert len(narrowed) >= 40
    assert f'"{RAW_DATABASE}"."customers_changes"' in compiled_sql[
        "dynamodb_lakehouse/dbt_project/models/staging/samples/stg_dynamodb__customers.sql"]


def test_incremental_athena_sql_reads_raw_only_from_the_cutoff_partition_on(compiled_sql: dict[str, str]) -> None:
    """Every model and test that reads the raw change log on an incremental build
    filters its `_ingest_hour` partitions; the history and activity models read the
    stored change events instead of raw."""
    base = "dynamodb_lakehouse/dbt_project/models/"
    # Models and their data tests (analyses are ad-hoc queries, not part of a build).
    change_logs = [f'"{RAW_DATABASE}"."{table}_changes"' for table in ("customers", "orders", *SCAFFOLDED)]
    readers = {name: sql for name, sql in compiled_sql.items()
               if name.startswith(base) and any(change_log in sql for change_log in change_logs)}
    assert {base + "staging/samples/stg_dynamodb__customers.sql", base + "staging/samples/stg_dynamodb__orders.sql",
            base + "staging/samples/stg_dynamodb__customers_changes.sql",
            *(base + f"staging/samples/stg_dynamodb__{entity}{suffix}.sql"
              for entity in SCAFFOLDED for suffix in ("", "_changes"))} <= set(readers)
    assert sum("holds_latest_raw_change" in name for name in readers) == 2 + len(SCAFFOLDED)
    assert [name for name, sql in readers.items() if "_ingest_hour >= date_format(" not in sql] == []
    for model in ("marts/samples/dim_customers_history.sql", "intermediate/samples/int_customers__change_events.sql"):
        assert "stg_dynamodb__customers_changes" in compiled_sql[base + model]


def test_compiled_sql_is_valid_trino_and_athena(compiled_sql: dict[str, str]) -> None:
    problems = []
    for name, sql in compiled_sql.items():
        result = validate(sql, dialect="trino")
        if not result.valid:
            problems.append(f"{name}: trino: {result.error}")
        elif result.unknown_functions or result.unknown_types:
            problems.append(f"{name}: trino: unknown {result.unknown_functions} {result.unknown_types}")
        try:
            sqlglot.parse(sql, read="athena", error_level=sqlglot.ErrorLevel.RAISE)
        except sqlglot.errors.ParseError as error:
            problems.append(f"{name}: sqlglot: {error}")
    assert problems == []


def test_no_duckdb_only_syntax_leaks_into_athena_sql(compiled_sql: dict[str, str]) -> None:
    leaks = [
        f"{name}: {what}"
        for name, sql in compiled_sql.items()
        for what, pattern in DUCKDB_ONLY.items()
        if pattern.search(sql)
    ]
    assert leaks == []


def test_athena_sql_uses_trino_forms_of_dispatched_macros(compiled_sql: dict[str, str]) -> None:
    base = "dynamodb_lakehouse/dbt_project/models/"
    lines = compiled_sql[base + "intermediate/samples/int_orders__lines_unnested.sql"]
    assert re.search(r"cross join unnest\(orders\.line_items\) with ordinality as line \(sku, quantity, unit_price, line_number\)", lines)
    customers = compiled_sql[base + "staging/samples/stg_dynamodb__customers.sql"]
    assert "from_iso8601_timestamp(registration_date)" in customers
    assert "regexp_like(" in customers
    # The incremental branch: the cutoff is a literal looked up before the query (moto's
    # tables are empty: the epoch), and the change log's partitions before its hour are
    # pruned; then the guard against late older events.
    assert "where _ingested_at > timestamp '1970-01-01 00:00:00'" in customers
    assert "and _ingest_hour >= date_format(timestamp '1970-01-01 00:00:00', '%Y-%m-%d-%H')" in customers
    assert "cleaned._ordering_value > existing._ordering_value" in customers
    # Keyed pseudonyms: Trino's hmac_sha256 with the key read from its table, never inlined.
    dim_customers = compiled_sql[base + "marts/samples/dim_customers.sql"]
    assert "lower(to_hex(hmac_sha256(" in dim_customers
    assert "(select to_utf8(trim(pii_key)) from lakehouse_staging.pii_key)" in dim_customers
    # The Iceberg MERGE matches on order_line_key: each stored line a changed order lost
    # is emitted to be deleted (DuckDB deletes by order_key instead, without this scan).
    for model in ("intermediate/samples/int_orders__lines_unnested.sql", "marts/samples/fct_order_lines.sql"):
        assert re.search(r'from "\w+"\."lakehouse_\w+"\."\w+" as stored\s+inner join changed_orders', compiled_sql[base + model])
    # fct_order_lines reads only the recent rows of the upstream marts.
    assert "and _ingested_at >" in compiled_sql[base + "marts/samples/fct_order_lines.sql"]
    # The business rules flag rows with Trino's regexp_like and concat_ws, which skips
    # nulls as DuckDB's does (https://trino.io/docs/current/functions/string.html).
    orders = compiled_sql[base + "staging/samples/stg_dynamodb__orders.sql"]
    assert "nullif(concat_ws(','," in orders
    assert "case when not regexp_like(cleaned.currency, '^[A-Z]{3}$') then 'currency_invalid' end" in orders


SWAPPED_MODELS = {"stg_dynamodb__customers": "lakehouse_staging", "dim_customers": "lakehouse_marts"}
CURATED_BUCKET = "lakehouse-curated"


@pytest.fixture(scope="module")
def full_refresh_statements(
    compiled_sql: dict[str, str], fake_aws_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> list[str]:
    """`dbt run --full-refresh` of an incremental and a table model whose Iceberg tables
    exist, each with a data file; returns the Athena statements in submission order."""
    import boto3

    endpoint = fake_aws_env["AWS_ENDPOINT_URL"]
    s3 = boto3.client("s3", region_name=REGION, endpoint_url=endpoint)
    glue = boto3.client("glue", region_name=REGION, endpoint_url=endpoint)
    athena = boto3.client("athena", region_name=REGION, endpoint_url=endpoint)
    for bucket in (CURATED_BUCKET, "lakehouse-athena-results"):
        s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": REGION})
    for model, database in SWAPPED_MODELS.items():
        location = f"s3://{CURATED_BUCKET}/dbt/{database}/{model}/live-version/"
        data_file = f"dbt/{database}/{model}/live-version/data/part-0.parquet"
        s3.put_object(Bucket=CURATED_BUCKET, Key=data_file, Body=b"rows")
        if model == "dim_customers":
            _create_external_table(glue, database, model, [("customer_id", "string")], location, {"table_type": "ICEBERG"})
        else:
            table = glue.get_table(DatabaseName=database, Name=model)["Table"]
            glue.update_table(
                DatabaseName=database,
                TableInput={
                    "Name": model,
                    "TableType": "EXTERNAL_TABLE",
                    "Parameters": table["Parameters"],
                    "StorageDescriptor": {**table["StorageDescriptor"], "Location": location},
                },
            )
    earlier = set(athena.list_query_executions()["QueryExecutionIds"])
    data_dir = tmp_path_factory.mktemp("athena_full_refresh")
    result = run_dbt(["run", "--full-refresh", "--select", *SWAPPED_MODELS], data_dir, target="athena")
    assert result.success, result.exception
    executions = [
        athena.get_query_execution(QueryExecutionId=query_id)["QueryExecution"]
        for query_id in athena.list_query_executions()["QueryExecutionIds"]
        if query_id not in earlier
    ]
    executions.sort(key=lambda execution: execution["Status"]["SubmissionDateTime"])
    return [" ".join(execution["Query"].split()) for execution in executions]


@pytest.mark.parametrize("model", SWAPPED_MODELS)
def test_athena_full_refresh_builds_before_it_swaps_and_never_drops_the_live_table(
    full_refresh_statements: list[str], fake_aws_env: dict[str, str], model: str
) -> None:
    import boto3

    database = SWAPPED_MODELS[model]
    quote = r'["`]?'
    # The live table, not one of its __rebuild/__ha/__bkp siblings.
    live = re.compile(rf"{quote}{database}{quote}\.{quote}{model}{quote}(?!_)", re.I)
    sibling = rf"(\S+\.)?{quote}{database}{quote}\.{quote}{model}__\w+{quote}"
    builds = [i for i, sql in enumerate(full_refresh_statements) if re.search(rf"create table {sibling} with \(", sql, re.I)]
    swaps = [i for i, sql in enumerate(full_refresh_statements)
             if re.search(rf"alter table {live.pattern} rename to", sql, re.I)]
    assert builds and swaps, [sql[:300] for sql in full_refresh_statements]
    assert max(builds) < min(swaps), "the live table was renamed away before its replacement was built"
    drops = [sql for sql in full_refresh_statements if re.search(r"\bdrop table\b", sql, re.I) and live.search(sql)]
    assert drops == []
    # Neither dropped through the Glue API nor its data deleted: the rebuild wrote to a
    # fresh location, not over the live table's files.
    endpoint = fake_aws_env["AWS_ENDPOINT_URL"]
    glue = boto3.client("glue", region_name=REGION, endpoint_url=endpoint)
    s3 = boto3.client("s3", region_name=REGION, endpoint_url=endpoint)
    assert glue.get_table(DatabaseName=database, Name=model)["Table"]["Name"] == model
    live_files = s3.list_objects_v2(Bucket=CURATED_BUCKET, Prefix=f"dbt/{database}/{model}/live-version/")
    assert live_files["KeyCount"] == 1


def test_a_table_built_under_a_models_old_name_is_renamed_by_athenas_iceberg_rename(
    fake_aws_env: dict[str, str], tmp_path: Path
) -> None:
    """Issue 48 item 5: stg_dynamodb__customers_changes was stg_dynamodb__customer_changes.
    The on-run-start macro renames an Iceberg table built under the old name with ALTER
    TABLE ... RENAME TO, which Athena supports for Iceberg tables
    (https://docs.aws.amazon.com/athena/latest/ug/querying-iceberg-alter-table-rename.html),
    so the table and its snapshots stay. moto accepts the statement without running it.
    A schema of its own: the module's other tables stay as they are."""
    import boto3

    endpoint = fake_aws_env["AWS_ENDPOINT_URL"]
    glue = boto3.client("glue", region_name=REGION, endpoint_url=endpoint)
    athena = boto3.client("athena", region_name=REGION, endpoint_url=endpoint)
    glue.create_database(DatabaseInput={"Name": "renamed_staging"})
    _create_external_table(glue, "renamed_staging", "stg_dynamodb__customer_changes", [("_event_id", "string")],
                           "s3://curated-bucket/stg_dynamodb__customer_changes/", {"table_type": "ICEBERG"})
    earlier = set(athena.list_query_executions()["QueryExecutionIds"])

    result = run_dbt(["run-operation", "rename_tables_of_renamed_models"], tmp_path, target="athena",
                     extra_env={"LAKEHOUSE_ATHENA_SCHEMA": "renamed"})

    assert result.success, result.exception
    statements = [" ".join(athena.get_query_execution(QueryExecutionId=query_id)["QueryExecution"]["Query"].split())
                  for query_id in athena.list_query_executions()["QueryExecutionIds"] if query_id not in earlier]
    assert [sql for sql in statements if re.search(
        r"alter table \S*`renamed_staging`\.`stg_dynamodb__customer_changes` "
        r"rename to `renamed_staging`\.`stg_dynamodb__customers_changes`", sql, re.I)], statements


def test_exact_number_casts_for_athena_validate_and_mean_what_the_oracle_says(
    compiled_sql: dict[str, str], tmp_path: Path
) -> None:
    """No Trino runs here. The Athena form of the exact casts (and of the microsecond
    timestamp parse) passes both validators; then sqlglot translates the number casts
    from Trino to DuckDB (it knows Trino's regexp_replace replaces every match, which
    DuckDB's does only with 'g') and DuckDB runs them: the results equal the Python
    decimal oracle of exact_number_cases.py. That checks the logic as sqlglot reads
    Trino's functions, not Trino itself; Trino's text-to-decimal cast of the plain
    digits the macro builds is BigDecimal(text).setScale(scale, HALF_UP), exact for
    them (trinodb/trino core/trino-main/src/main/java/io/trino/type/DecimalCasts.java)."""
    # The casts the models use; all six decimal types at once exceed the validator's
    # statement complexity limit (each model holds at most two of these expressions).
    athena_sql = compile_inline(
        "select {{ exact_decimal('v', 18, 2) }} as amount, {{ exact_bigint('v') }} as quantity,"
        " {{ parse_iso_timestamp('v') }} as ts, {{ parse_iso_date('v') }} as day from number_texts",
        tmp_path, target="athena",
    )

    result = validate(athena_sql, dialect="trino")
    assert result.valid, result.error
    assert not result.unknown_functions and not result.unknown_types
    sqlglot.parse(athena_sql, read="athena", error_level=sqlglot.ErrorLevel.RAISE)
    assert "from_iso8601_timestamp_nanos(" in athena_sql and "as timestamp(6)" in athena_sql
    assert "regexp_like(" in athena_sql and "'g'" not in athena_sql

    number_sql = compile_inline(casts_select(), tmp_path, target="athena")
    as_duckdb = sqlglot.transpile(number_sql, read="trino", write="duckdb")[0]
    rows = evaluate(as_duckdb, [*EDGE_TEXTS, *random_number_texts(1000, seed=5)])
    assert mismatches(rows) == []


def _escaped_part(expr: str) -> str:
    """One part of composite_key()'s SQL (macros/keys/composite_key.sql)."""
    return f"replace(replace({expr}, '\\', '\\\\'), '|', '\\|')"


def test_composite_keys_are_the_same_text_on_athena_and_duckdb(compiled_sql: dict[str, str], tmp_path: Path) -> None:
    """The Athena SQL builds order_key and order_line_key with composite_key(), as the
    local SQL does; that SQL, translated from Trino to DuckDB by sqlglot and run there,
    gives for keys that a plain join mixes up the same texts as the local target's SQL
    and the Python oracle. No Trino runs here: Trino's replace(string, search, replace)
    replaces every instance (https://trino.io/docs/current/functions/string.html), and
    a backslash is no escape in a Trino string literal, as in DuckDB's."""
    base = "dynamodb_lakehouse/dbt_project/models/"
    order_key = f"{_escaped_part('customer_id')} || '|' || {_escaped_part('order_id')}"
    assert f"{order_key} as order_key" in compiled_sql[base + "staging/samples/stg_dynamodb__orders.sql"]
    line_key = f"{order_key} || '|' || {_escaped_part('cast(line_number as varchar)')} as order_line_key"
    assert line_key in compiled_sql[base + "intermediate/samples/int_orders__lines_unnested.sql"]

    select = "select a, b, {{ composite_key(['a', 'b']) }} as k from key_pairs"
    athena_sql = compile_inline(select, tmp_path / "athena", target="athena")
    result = validate(athena_sql, dialect="trino")
    assert result.valid, result.error
    local_sql = compile_inline(select, tmp_path / "local")
    results = {}
    for target, sql in (("athena", sqlglot.transpile(athena_sql, read="trino", write="duckdb")[0]), ("local", local_sql)):
        with duckdb.connect() as connection:
            connection.execute("create table key_pairs (a varchar, b varchar)")
            connection.executemany("insert into key_pairs values (?, ?)", list(ORDER_KEYS))
            results[target] = sorted(connection.execute(sql).fetchall())
    expected = sorted((a, b, composite_key(a, b)) for a, b in ORDER_KEYS)
    assert results == {"athena": expected, "local": expected}
    assert len({key for _, _, key in expected}) == len(ORDER_KEYS)


DOCUMENTED_MARTS = ("agg_daily_revenue_by_status", "mart_freshness")
MARTS_YAML = Path(__file__).resolve().parents[2] / "dbt_project" / "models" / "marts" / "samples" / "_marts__models.yml"


def _one_line(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def persisted_docs_tables(compiled_sql: dict[str, str], fake_aws_env: dict[str, str],
                          tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """`dbt run --target athena` of two table marts; returns their Glue tables afterwards.

    moto runs no SQL, so the CTAS that would create each table in Glue does nothing:
    the tables are registered first with the columns their compiled SELECT produces
    (read by sqlglot; types are placeholders, persist_docs reads names only). The run
    then goes through the table materialization to its last step, persist_docs, which
    is dbt-athena's own code talking to moto's Glue."""
    import boto3

    endpoint = fake_aws_env["AWS_ENDPOINT_URL"]
    glue = boto3.client("glue", region_name=REGION, endpoint_url=endpoint)
    s3 = boto3.client("s3", region_name=REGION, endpoint_url=endpoint)
    existing_buckets = {bucket["Name"] for bucket in s3.list_buckets()["Buckets"]}
    for bucket in {CURATED_BUCKET, "lakehouse-athena-results"} - existing_buckets:
        s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": REGION})
    for model in DOCUMENTED_MARTS:
        select = sqlglot.parse_one(compiled_sql[f"dynamodb_lakehouse/dbt_project/models/marts/samples/{model}.sql"], read="athena")
        columns = [(name, "string") for name in select.named_selects]
        assert columns, model
        _create_external_table(glue, "lakehouse_marts", model, columns, f"s3://{CURATED_BUCKET}/dbt/lakehouse_marts/{model}/",
                               {"table_type": "ICEBERG"})
    result = run_dbt(["run", "--select", *DOCUMENTED_MARTS], tmp_path_factory.mktemp("athena_docs"), target="athena")
    assert result.success, result.exception
    return {model: glue.get_table(DatabaseName="lakehouse_marts", Name=model)["Table"] for model in DOCUMENTED_MARTS}


@pytest.mark.parametrize("model", DOCUMENTED_MARTS)
def test_athena_run_persists_mart_and_column_descriptions_to_glue(
    persisted_docs_tables: dict[str, dict], model: str
) -> None:
    """persist_docs on the athena target (dbt_project.yml) writes the YAML descriptions
    where the Athena console reads them: the Glue table's Description and `comment`
    parameter, each column's Comment (dbt-athena 1.11: dbt/include/athena/macros/
    adapters/persist_docs.sql calls persist_docs_to_glue in dbt/adapters/athena/impl.py).
    The lengths Glue keeps are checked in test_dbt_docs.py."""
    documented = next(entry for entry in yaml.safe_load(MARTS_YAML.read_text())["models"] if entry["name"] == model)
    table = persisted_docs_tables[model]
    assert table["Description"] == _one_line(documented["description"])
    assert table["Parameters"]["comment"] == _one_line(documented["description"])
    assert table["Parameters"]["unique_id"] == f"model.dynamodb_lakehouse.{model}"
    assert table["Parameters"]["materialized"] == "table"
    comments = {column["Name"]: column.get("Comment") for column in table["StorageDescriptor"]["Columns"]}
    assert comments == {column["name"]: _one_line(column["description"]) for column in documented["columns"]}


ANALYSES_DIR = Path(__file__).resolve().parents[2] / "dbt_project" / "analyses" / "samples"


def test_saved_analyses_compile_to_valid_athena_sql(compiled_sql: dict[str, str]) -> None:
    """The saved queries docs/analysts.md points to: every file in analyses/
    compiles on the athena target and passes both validators (as the models do above)."""
    saved = sorted(path.name for path in ANALYSES_DIR.glob("*.sql"))
    compiled = {Path(name).name: sql for name, sql in compiled_sql.items() if "/analyses/" in name}
    assert sorted(compiled) == saved
    assert {"daily_activity.sql", "customers_as_of.sql", "freshness_lag.sql", "late_changes_by_batch.sql"} <= set(saved)
    for name, sql in compiled.items():
        result = validate(sql, dialect="trino")
        assert result.valid, f"{name}: {result.error}"
        assert not result.unknown_functions and not result.unknown_types, name
        sqlglot.parse(sql, read="athena", error_level=sqlglot.ErrorLevel.RAISE)
    # Marts only (analysts have no access to the raw database), except the operators'
    # late-changes query, which reads the raw change log.
    for name in ("daily_activity.sql", "customers_as_of.sql", "freshness_lag.sql"):
        assert RAW_DATABASE not in compiled[name] and "lakehouse_marts" in compiled[name], name
    assert "date_diff('hour', newest_ingested_at, built_at)" in compiled["freshness_lag.sql"]
