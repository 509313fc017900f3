"""The naming rules of table contracts (streaming/contracts/names.py): a name that would
break SQL on DuckDB or Athena, bind to a column the dbt models add, collide with another
in Spark, run as Jinja or lead scaffold out of the project is refused when the contract
loads, naming the file, the line, the field and the name; and the way out (`column:`)
is not refused as a rename while the raw table holds no rows."""
from __future__ import annotations

import copy
import re
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml

from contract_files import EVENTS, checked_and_registered, load_contract, write_contract
from streaming.contracts.evolution import ContractEvolutionError, ContractRegistry, contract_version
from streaming.contracts.loader import SAMPLE_CONTRACTS_DIR, load_contract_file, load_contracts
from streaming.contracts.model import ContractError
from streaming.contracts.names import (
    ATHENA_DDL_RESERVED,
    ATHENA_SELECT_RESERVED,
    CAST_TEXT_SUFFIX,
    DUCKDB_RESERVED,
    MODEL_COLUMNS,
    TRINO_RESERVED,
)
from streaming.operations.scaffold import ScaffoldRefused, scaffold, scaffold_files
from streaming.runtime.dbt_runner import PROJECT_DIR

REPO = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 11, 23, 18, 0, tzinfo=timezone.utc)

# The runbook's example entity (docs/operations.md, "Adding an entity"; tests/operations/batches/test_unrouted.py).
AUDITS_ENTITY: dict[str, Any] = {
    "raw_table": "app_audits",
    "description": "What a tenant's users did, sort key AUDIT#<audit id>.",
    "match": {"sort_key_prefix": "AUDIT#"},
    "attributes": {"action": {"type": "S"}, "actor": {"type": "S"}},
}


def events(**changes: Any) -> dict[str, Any]:
    document = copy.deepcopy(EVENTS)
    document.update(changes)
    return document


def with_attribute(name: str, spec: dict[str, Any], document: dict[str, Any] | None = None) -> dict[str, Any]:
    document = copy.deepcopy(document or EVENTS)
    document["attributes"][name] = spec
    return document


def app_with(entity: str, spec: dict[str, Any]) -> dict[str, Any]:
    document = yaml.safe_load((SAMPLE_CONTRACTS_DIR / "app.yml").read_text(encoding="utf-8"))
    document["entities"][entity] = spec
    return document


def refusal(tmp_path: Path, document: dict[str, Any]) -> str:
    path = write_contract(tmp_path, document)
    with pytest.raises(ContractError) as error:
        load_contract_file(path)
    message = str(error.value)
    assert message.startswith(f"{path}: line "), message
    return message


# --------------------------------------------------------------------------- item 1: reserved words


@pytest.mark.parametrize("word", ["end", "order", "group", "default", "limit", "select", "at"])
def test_an_attribute_named_by_a_reserved_word_is_refused_with_the_column_to_use(tmp_path: Path, word: str) -> None:
    message = refusal(tmp_path, with_attribute(word, {"type": "S"}))

    assert f"attributes.{word}.column '{word}' is a reserved word in DuckDB" in message
    assert f"derived from the attribute name '{word}'" in message
    assert f"`column: {word}_value`" in message


@pytest.mark.parametrize("word", ["end", "order", "group", "default", "limit", "select", "at"])
def test_the_reserved_attribute_loads_once_column_names_it_apart(tmp_path: Path, word: str) -> None:
    contract = load_contract(write_contract(tmp_path, with_attribute(word, {"type": "S", "column": f"{word}_value"})))

    assert contract.attribute(word).column == f"{word}_value"


@pytest.mark.parametrize(
    ("document", "field"),
    [
        (with_attribute("sortOrder", {"type": "S", "column": "order"}), "attributes.sortOrder.column 'order'"),
        (with_attribute("span", {"type": "M", "fields": {"end": {"type": "S"}}}), "attributes.span.fields.end.column 'end'"),
        (events(partitioning={"column": "group", "expression": "substring(event_id, -1, 1)"}),
         "partitioning.column 'group'"),
        (events(raw_table="order"), "raw_table 'order'"),
        # Athena only: DuckDB takes `date` and `user` as column names, Athena's DDL does not.
        (with_attribute("date", {"type": "S"}), "attributes.date.column 'date' is a reserved word in Athena DDL"),
        (with_attribute("user", {"type": "S"}), "attributes.user.column 'user' is a reserved word in Athena DDL"),
        (with_attribute("first", {"type": "S"}), "'first' is a reserved word in Athena SELECT"),
        (with_attribute("listagg", {"type": "S"}), "'listagg' is a reserved word in Trino (Athena engine 3)"),
    ],
)
def test_every_name_that_reaches_sql_is_checked(tmp_path: Path, document: dict[str, Any], field: str) -> None:
    assert field in refusal(tmp_path, document)


def test_the_runbooks_audit_entity_loads_and_its_at_attribute_needs_a_column(tmp_path: Path) -> None:
    load_contract_file(write_contract(tmp_path, app_with("audits", AUDITS_ENTITY)))
    with_at = copy.deepcopy(AUDITS_ENTITY)
    with_at["attributes"]["at"] = {"type": "S", "cast": "timestamp"}

    message = refusal(tmp_path, app_with("audits", with_at))

    assert "entities.audits.attributes.at.column 'at' is a reserved word in DuckDB" in message
    with_at["attributes"]["at"]["column"] = "audited_at"
    load_contract_file(write_contract(tmp_path, app_with("audits", with_at)))


def test_duckdb_reserved_is_what_duckdbs_parser_refuses_as_a_column_name() -> None:
    """The oracle is DuckDB itself (the venv's duckdb): its keyword list, and its parser on
    the shapes the models give a column (a table column, a select item, a cast, an alias,
    a qualified name, a struct field)."""
    connection = duckdb.connect()
    keywords = connection.sql("select keyword_name, keyword_category from duckdb_keywords()").fetchall()
    categories: dict[str, set[str]] = {}
    for name, category in keywords:
        categories.setdefault(name, set()).add(category)
    assert DUCKDB_RESERVED == {
        name for name, found in categories.items()
        if "reserved" in found or ("type_function" in found and "column_name" not in found)
    }

    def usable(word: str) -> bool:
        try:
            connection.execute(f"create or replace temp table probe ({word} varchar)")
            connection.execute(f"select {word}, cast({word} as varchar) as {word}, probe.{word} from probe "
                               f"where {word} is null order by {word}")
            connection.execute(f"select cast(null as struct({word} integer))")
        except duckdb.Error:
            return False
        return True

    assert {word for word in categories if not usable(word)} == DUCKDB_RESERVED


def test_athena_reserved_words_are_the_documented_lists() -> None:
    """Pinned from the Athena user guide, "Reserved keywords"
    (https://docs.aws.amazon.com/athena/latest/ug/reserved-words.html): the list for DDL
    statements and the list for SQL SELECT statements, as published (the page's own
    spelling kept: CASHE, UNESCAPE). And Trino's list
    (https://trino.io/docs/current/language/reserved.html), the grammar of Athena engine 3."""
    ddl = """ALL, ALTER, AND, ARRAY, AS, AUTHORIZATION, BETWEEN, BIGINT, BINARY, BOOLEAN, BOTH, BY, CASE, CASHE,
    CAST, CHAR, COLUMN, CONF, CONSTRAINT, COMMIT, CREATE, CROSS, CUBE, CURRENT, CURRENT_DATE, CURRENT_TIMESTAMP,
    CURSOR, DATABASE, DATE, DAYOFWEEK, DECIMAL, DELETE, DESCRIBE, DISTINCT, DIV, DOUBLE, DROP, ELSE, END, EXCHANGE,
    EXISTS, EXTENDED, EXTERNAL, EXTRACT, FALSE, FETCH, FLOAT, FLOOR, FOLLOWING, FOR, FOREIGN, FROM, FULL, FUNCTION,
    GRANT, GROUP, GROUPING, HAVING, IF, IMPORT, IN, INNER, INSERT, INT, INTEGER, INTERSECT, INTERVAL, INTO, IS,
    JOIN, LATERAL, LEFT, LESS, LIKE, LOCAL, MACRO, MAP, MORE, NONE, NOT, NULL, NUMERIC, OF, ON, ONLY, OR, ORDER,
    OUT, OUTER, OVER, PARTIALSCAN, PARTITION, PERCENT, PRECEDING, PRECISION, PRESERVE, PRIMARY, PROCEDURE, RANGE,
    READS, REDUCE, REGEXP, REFERENCES, REVOKE, RIGHT, RLIKE, ROLLBACK, ROLLUP, ROW, ROWS, SELECT, SET, SMALLINT,
    START,TABLE, TABLESAMPLE, THEN, TIME, TIMESTAMP, TO, TRANSFORM, TRIGGER, TRUE, TRUNCATE, UNBOUNDED,UNION,
    UNIQUEJOIN, UPDATE, USER, USING, UTC_TIMESTAMP, VALUES, VARCHAR, VIEWS, WHEN, WHERE, WINDOW, WITH"""
    select = """ALTER, AND, AS, BETWEEN, BY, CASE, CAST, CONSTRAINT, CREATE, CROSS, CUBE, CURRENT_DATE, CURRENT_PATH,
    CURRENT_TIME, CURRENT_TIMESTAMP, CURRENT_USER, DEALLOCATE, DELETE, DESCRIBE, DISTINCT, DROP, ELSE, END, ESCAPE,
    EXCEPT, EXECUTE, EXISTS, EXTRACT, FALSE, FIRST, FOR, FROM, FULL, GROUP, GROUPING, HAVING, IN, INNER, INSERT,
    INTERSECT, INTO, IS, JOIN, LAST, LEFT, LIKE, LOCALTIME, LOCALTIMESTAMP, NATURAL, NORMALIZE, NOT, NULL, ON, OR,
    ORDER, OUTER, PREPARE, RECURSIVE, RIGHT, ROLLUP, SELECT, TABLE, THEN, TRUE, UNESCAPE, UNION, UNNEST, USING,
    VALUES, WHEN, WHERE, WITH"""
    trino = """ALTER AND AS BETWEEN BY CASE CAST CONSTRAINT CREATE CROSS CUBE CURRENT_CATALOG CURRENT_DATE
    CURRENT_PATH CURRENT_ROLE CURRENT_SCHEMA CURRENT_TIME CURRENT_TIMESTAMP CURRENT_USER DEALLOCATE DELETE DESCRIBE
    DISTINCT DROP ELSE END ESCAPE EXCEPT EXECUTE EXISTS EXTRACT FALSE FOR FROM FULL GROUP GROUPING HAVING IN INNER
    INSERT INTERSECT INTO IS JOIN JSON_ARRAY JSON_EXISTS JSON_OBJECT JSON_QUERY JSON_TABLE JSON_VALUE LEFT LIKE
    LISTAGG LOCALTIME LOCALTIMESTAMP NATURAL NORMALIZE NOT NULL ON OR ORDER OUTER PREPARE RECURSIVE RIGHT ROLLUP
    SELECT SKIP TABLE THEN TRIM TRUE UESCAPE UNION UNNEST USING VALUES WHEN WHERE WITH"""

    def words(text: str) -> set[str]:
        return {word.lower() for word in re.split(r"[\s,]+", text) if word}

    assert ATHENA_DDL_RESERVED == words(ddl)
    assert ATHENA_SELECT_RESERVED == words(select)
    assert TRINO_RESERVED == words(trino)


def test_the_packaged_contracts_use_no_refused_name() -> None:
    contracts = load_contracts(SAMPLE_CONTRACTS_DIR)

    assert {"customers", "orders", "app_tenants", "app_users", "app_invoices", "app_unrouted"} == set(contracts)


# --------------------------------------------------------------------------- item 1: the way out


def _registered_with_column(tmp_path: Path, column: str) -> ContractRegistry:
    """A registry holding the events contract with attribute `end` in `column`, as a start
    before these rules registered it (the loader now refuses `end` itself)."""
    contract = load_contract(write_contract(tmp_path / "old", with_attribute("end", {"type": "S", "column": "end_value"})))
    attributes = tuple(replace(spec, column=column) if spec.name == "end" else spec for spec in contract.attributes)
    registry = ContractRegistry(tmp_path / "raw")
    checked_and_registered(registry, {"events": replace(contract, attributes=attributes)}, NOW)
    return registry


def test_a_column_rename_replaces_a_version_no_row_was_written_under(tmp_path: Path) -> None:
    registry = _registered_with_column(tmp_path, "end")
    renamed = load_contracts(write_contract(tmp_path / "new", with_attribute("end", {"type": "S", "column": "end_at"})).parent)
    reported: list[str] = []

    versions = checked_and_registered(registry, renamed, NOW, report=reported.append)

    assert versions == {"events": contract_version(renamed["events"])}
    assert registry.latest("events")["attributes"]["end"]["column"] == "end_at"  # type: ignore[index]
    assert len(reported) == 1 and "was never written to" in reported[0]


def test_a_column_rename_is_still_refused_once_the_raw_table_holds_rows(tmp_path: Path) -> None:
    registry = _registered_with_column(tmp_path, "end_value")
    batch = tmp_path / "raw" / "events_changes" / "_ingest_hour=2026-11-23-18" / "_batch_id=0"
    batch.mkdir(parents=True)
    (batch / "part-0.parquet").write_bytes(b"PAR1")
    renamed = load_contracts(write_contract(tmp_path / "new", with_attribute("end", {"type": "S", "column": "end_at"})).parent)

    with pytest.raises(ContractEvolutionError, match="column 'end_value' -> 'end_at'"):
        checked_and_registered(registry, renamed, NOW)


def test_a_hudi_table_folder_counts_as_rows_written(tmp_path: Path) -> None:
    registry = _registered_with_column(tmp_path, "end_value")
    (tmp_path / "raw" / "events" / ".hoodie").mkdir(parents=True)

    assert registry.holds_rows("events")
    assert not registry.holds_rows("other")


# --------------------------------------------------------------------------- item 8: the models' own columns


@pytest.mark.parametrize(
    ("attribute", "column"),
    [("changeRank", "change_rank"), ("isDeleted", "is_deleted"), ("itemKey", "item_key"),
     ("lastEventName", "last_event_name"), ("validFrom", "valid_from"), ("validTo", "valid_to"),
     ("isCurrent", "is_current"), ("isTtlDelete", "is_ttl_delete"), ("qualityIssues", "quality_issues"),
     ("amountText", "amount_text")],
)
def test_a_column_the_models_add_is_refused(tmp_path: Path, attribute: str, column: str) -> None:
    message = refusal(tmp_path, with_attribute(attribute, {"type": "S"}))

    assert f"attributes.{attribute}: column '{column}' is " in message
    assert "`column:`" in message


def test_text_beside_a_column_without_cast_is_an_ordinary_column(tmp_path: Path) -> None:
    document = with_attribute("noteText", {"type": "S"}, with_attribute("note", {"type": "S"}))

    assert load_contract(write_contract(tmp_path, document)).attribute("noteText").column == "note_text"


def test_a_partition_column_the_models_add_is_refused(tmp_path: Path) -> None:
    document = events(partitioning={"column": "item_key", "expression": "substring(event_id, -1, 1)"})

    assert "partitioning.column: column 'item_key' is" in refusal(tmp_path, document)


def _aliases(sql: str) -> set[str]:
    """The column names a query gives with `as`, without comments, relation aliases
    (`from x as y`) and cast types (`cast(a as varchar)`)."""
    sql = re.sub(r"\{#.*?#\}|--[^\n]*", " ", sql, flags=re.DOTALL)
    relations = set(re.findall(r"\b(?:from|join)\s+(?:\{\{[^}]*\}\}|\w+)\s+as\s+(\w+)", sql))
    named = set(re.findall(r"\bas\s+([a-z_][a-z0-9_]*)\b(?!\s*\))", sql))
    return named - relations


def test_model_columns_are_the_columns_the_models_add() -> None:
    """MODEL_COLUMNS against the models themselves, both ways: every column the scaffolded
    models (with history) add beside a contract's columns, the change metadata of the
    current-state macros, and the columns the hand-written staging models add next to
    `changes.*`; and nothing else."""
    contracts = load_contracts(SAMPLE_CONTRACTS_DIR)
    contract_columns = {column for contract in contracts.values()
                        for column in (*contract.business_columns, contract.partition_column)}
    cast_texts = {spec.column + CAST_TEXT_SUFFIX for contract in contracts.values()
                  for spec in contract.attributes if spec.cast is not None}
    scaffolded = "\n".join(generated.text for generated in scaffold_files(contracts, "app", history=True)
                           if generated.path.suffix == ".sql")
    metadata = (REPO / "macros" / "staging" / "change_metadata_columns.sql").read_text(encoding="utf-8")
    staging = [path.read_text(encoding="utf-8") for path in sorted((PROJECT_DIR / "dbt_project" / "models"
                                                                    / "staging").rglob("*.sql"))]
    beside_star = {alias for sql in staging
                   for block in re.findall(r"select\s+(?:\w+\.)?\*,(.*?)\bfrom\b", sql, flags=re.DOTALL)
                   for alias in _aliases(block)}
    added = _aliases(scaffolded) | set(re.findall(r"\('(\w+)', '", metadata)) | beside_star

    assert "change_rank" in beside_star and cast_texts & _aliases(scaffolded)
    assert {name for name in added - contract_columns - cast_texts if not name.startswith("_")} == MODEL_COLUMNS


# --------------------------------------------------------------------------- item 10: case


def test_attribute_names_differing_only_in_case_are_refused(tmp_path: Path) -> None:
    document = with_attribute("status", {"type": "S"}, with_attribute("Status", {"type": "S", "column": "status_old"}))

    message = refusal(tmp_path, document)

    assert "attributes.status: 'status' differs from 'Status'" in message and "only in case" in message


def test_map_fields_differing_only_in_case_are_refused(tmp_path: Path) -> None:
    document = with_attribute("address", {"type": "M", "fields": {"Zip": {"type": "S", "column": "zip_old"},
                                                                  "zip": {"type": "S"}}})

    assert "attributes.address.fields.zip: 'zip' differs from 'Zip'" in refusal(tmp_path, document)


def test_an_entity_attribute_differing_from_a_shared_one_only_in_case_is_refused(tmp_path: Path) -> None:
    audits = copy.deepcopy(AUDITS_ENTITY)
    audits["attributes"]["GSI1PK"] = {"type": "S", "column": "audit_gsi"}

    assert "entities.audits.attributes.GSI1PK: 'GSI1PK' differs from 'gsi1pk'" in refusal(
        tmp_path, app_with("audits", audits))


def test_one_attribute_name_in_several_entities_is_no_collision(tmp_path: Path) -> None:
    audits = copy.deepcopy(AUDITS_ENTITY)
    audits["attributes"]["status"] = {"type": "S"}  # as app_invoices has

    assert "app_audits" in {contract.raw_table for contract in load_contract_file(write_contract(tmp_path, app_with("audits", audits)))}


# --------------------------------------------------------------------------- item 13: names, Jinja and paths


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        (events(table="x#}{{ log(env_var('HOME')) }}"), "is not a DynamoDB table name"),
        (events(table="../../../tmp/x"), "is not a DynamoDB table name"),
        (events(table="events\n"), "is not a DynamoDB table name"),
        (events(table="ab"), "is not a DynamoDB table name"),
        (events(table="e" * 256), "is not a DynamoDB table name"),
        (events(raw_table="events\n"), "raw_table 'events\\n' must be lower snake_case"),
        (events(raw_table="shop-events"), "raw_table 'shop-events' must be lower snake_case"),
        (events(raw_table="shop.events"), "raw_table 'shop.events' must be lower snake_case"),
        (with_attribute("sortKey", {"type": "S", "column": "sort_key\n"}), "attributes.sortKey.column 'sort_key\\n'"),
        (app_with("audit-log", AUDITS_ENTITY), "entity name 'audit-log' must be lower snake_case"),
        (app_with("audit.log", AUDITS_ENTITY), "entity name 'audit.log' must be lower snake_case"),
        (app_with("audits", {**AUDITS_ENTITY, "raw_table": "app.audits"}), "entities.audits.raw_table 'app.audits'"),
    ],
)
def test_table_entity_and_raw_table_names_follow_dynamodbs_and_sqls_rules(
    tmp_path: Path, document: dict[str, Any], expected: str
) -> None:
    assert expected in refusal(tmp_path, document)


def test_a_derived_unrouted_table_that_is_no_sql_name_asks_for_unrouted_table(tmp_path: Path) -> None:
    document = app_with("audits", AUDITS_ENTITY)
    document.pop("unrouted_table")
    document["table"] = "2024-app"

    with pytest.raises(ContractError, match=re.escape("unrouted_table '2024_app_unrouted' must be lower snake_case")) as error:
        load_contract_file(write_contract(tmp_path, document))
    assert "(derived from table '2024-app'; set unrouted_table:)" in str(error.value)


def test_a_table_name_may_take_dynamodbs_255_characters(tmp_path: Path) -> None:
    assert load_contract(write_contract(tmp_path, events(table="x" * 255))).table == "x" * 255


@pytest.mark.parametrize("name", ["my-shop.events", "a.b", "my_shop-2024.events"])
def test_a_table_name_with_a_dash_or_a_dot_loads_and_scaffolds_inside_the_project(tmp_path: Path, name: str) -> None:
    write_contract(tmp_path / "contracts", events(table=name))
    contracts = load_contracts(tmp_path / "contracts")
    project = tmp_path / "project"

    result = scaffold(name, project_dir=project, contracts=contracts)

    assert Path(f"dbt_project/models/staging/_dynamodb__{name}__sources.yml") in result.written
    assert all((project / path).is_file() for path in result.written)


@pytest.mark.parametrize("opener", ["{{", "{%", "{#"])
@pytest.mark.parametrize(
    ("place", "field"),
    [("table", "description"), ("attribute", "attributes.amount.description"),
     ("field", "attributes.span.fields.opened.description"), ("entity", "entities.audits.description")],
)
def test_a_description_holding_jinja_is_refused(tmp_path: Path, opener: str, place: str, field: str) -> None:
    text = f"Amount {opener} log(env_var('HOME')) }}}}"
    if place == "table":
        document = events(description=text)
    elif place == "attribute":
        document = with_attribute("amount", {"type": "N", "description": text})
    elif place == "field":
        document = with_attribute("span", {"type": "M", "fields": {"opened": {"type": "S", "description": text}}})
    else:
        document = app_with("audits", {**AUDITS_ENTITY, "description": text})

    message = refusal(tmp_path, document)

    assert f"{field}: holds '{opener}', which dbt would run as Jinja" in message


def test_scaffold_never_writes_outside_the_project(tmp_path: Path) -> None:
    """A table name the loader did not check (here set past it) cannot lead scaffold out."""
    contract = load_contract(write_contract(tmp_path / "contracts", events()))
    # `_dynamodb__..` is a folder name, the next seven `..` climb from staging to tmp_path.
    table = "../" * 8 + "escaped"
    escaping = replace(contract, table=table)
    project = tmp_path / "a" / "b" / "c" / "project"

    with pytest.raises(ScaffoldRefused, match="outside the project"):
        scaffold(table, project_dir=project, contracts={"events": escaping})

    assert [path for path in tmp_path.rglob("*") if path.is_file() and "contracts" not in path.parts] == []


def test_the_naming_rules_are_documented() -> None:
    text = (REPO / "docs" / "contracts.md").read_text(encoding="utf-8")

    assert "## Naming rules" in text
    assert all(f"`{column}`" in text for column in MODEL_COLUMNS)
