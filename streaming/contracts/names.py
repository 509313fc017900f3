"""The naming rules of a table contract: which names may reach SQL, Jinja and paths.

A contract's names travel far. The DynamoDB table name becomes part of file names and of
the headers `lakehouse scaffold` writes; a raw table's name is a Glue table, a folder, a
DuckDB view and a dbt source; a column name appears unquoted in every staging model, in
Athena's DDL (Hive) and queries (Trino) and in DuckDB; a description lands in the dbt
YAML, which dbt renders with Jinja. loader.py checks each name against these rules when a
contract loads, so a name that would break a build, bind to a column the models add or
run as Jinja is refused with the file and the field, before anything is written. Refusing
is the rule, not quoting: a name quoted in the models scaffold writes would still break
every query a person writes against the table.
"""
from __future__ import annotations

import re
import unicodedata

# DynamoDB's rule for table names ("Naming rules" in the DynamoDB developer guide,
# https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/HowItWorks.NamingRulesDataTypes.html):
# 3 to 255 characters of a-z, A-Z, 0-9, `_`, `-` and `.`. fullmatch, so that no
# trailing newline slips through as it would past `$`.
DYNAMODB_TABLE_NAME = re.compile(r"[A-Za-z0-9_.-]{3,255}")
DYNAMODB_TABLE_RULE = "3 to 255 characters, each a letter, a digit, '_', '-' or '.' (DynamoDB's rule)"

# A raw table, entity or column name: lower snake_case starting with a letter. It is an
# unquoted identifier on both engines, a folder and a Glue name (which Glue lowercases);
# starting with a letter keeps business columns apart from the `_` metadata columns.
SQL_NAME = re.compile(r"[a-z][a-z0-9_]*")
SQL_NAME_RULE = "lower snake_case: a lowercase letter, then lowercase letters, digits or '_'"

# How long a name may be: the longest name derived from it must still be a Glue table or
# column name (at most 255 characters: `TableInput.Name` and `Column.Name` in the Glue API
# reference, https://docs.aws.amazon.com/glue/latest/webapi/API_TableInput.html and
# API_Column.html) and a file name (255 bytes on Linux's and macOS's file systems).
# A raw table's longest derived name is its scaffolded change model's file,
# `stg_dynamodb__<raw_table>_changes.sql` (`changes_model` in operations/scaffold.py);
# a column's is a cast's `<column>_text`. tests/contracts/test_contract_names.py scaffolds both limits.
NAME_LIMIT = 255
MAX_RAW_TABLE_LENGTH = NAME_LIMIT - len("stg_dynamodb__") - len("_changes.sql")
MAX_COLUMN_LENGTH = NAME_LIMIT - len("_text")

# DuckDB refuses these as unquoted column names: its `reserved` keywords and the
# `type_function` ones that are not also `column_name` keywords (`at`, `left`, `join`,
# ...), as its PostgreSQL-derived grammar does. tests/contracts/test_contract_names.py checks the
# list against duckdb_keywords() and against DuckDB's parser.
DUCKDB_RESERVED = frozenset({
    "all", "analyse", "analyze", "and", "any", "array", "as", "asc", "asymmetric", "both", "case", "cast",
    "check", "collate", "column", "constraint", "create", "default", "deferrable", "desc", "describe",
    "distinct", "do", "else", "end", "except", "false", "fetch", "for", "foreign", "from", "group", "having",
    "in", "initially", "intersect", "into", "lambda", "lateral", "leading", "limit", "not", "null", "offset",
    "on", "only", "or", "order", "pivot", "pivot_longer", "pivot_wider", "placing", "primary", "qualify",
    "references", "returning", "select", "show", "some", "summarize", "symmetric", "table", "then", "to",
    "trailing", "true", "union", "unique", "unpivot", "using", "variadic", "when", "where", "window", "with",
    # type_function keywords
    "anti", "asof", "at", "authorization", "binary", "by", "collation", "concurrently", "cross", "freeze",
    "full", "glob", "ilike", "inner", "is", "isnull", "join", "left", "like", "natural", "notnull", "outer",
    "overlaps", "positional", "right", "semi", "similar", "tablesample", "unpack", "verbose",
})

# Athena's two lists, from the Athena user guide's "Reserved keywords" page
# (https://docs.aws.amazon.com/athena/latest/ug/reserved-words.html): DDL statements
# (Hive; the Glue tables of raw and the dbt-athena models' CREATE TABLE) and SELECT
# statements (Trino). tests/contracts/test_contract_names.py pins both against that page.
ATHENA_DDL_RESERVED = frozenset({
    "all", "alter", "and", "array", "as", "authorization", "between", "bigint", "binary", "boolean", "both",
    "by", "case", "cashe", "cast", "char", "column", "conf", "constraint", "commit", "create", "cross", "cube",
    "current", "current_date", "current_timestamp", "cursor", "database", "date", "dayofweek", "decimal",
    "delete", "describe", "distinct", "div", "double", "drop", "else", "end", "exchange", "exists", "extended",
    "external", "extract", "false", "fetch", "float", "floor", "following", "for", "foreign", "from", "full",
    "function", "grant", "group", "grouping", "having", "if", "import", "in", "inner", "insert", "int",
    "integer", "intersect", "interval", "into", "is", "join", "lateral", "left", "less", "like", "local",
    "macro", "map", "more", "none", "not", "null", "numeric", "of", "on", "only", "or", "order", "out",
    "outer", "over", "partialscan", "partition", "percent", "preceding", "precision", "preserve", "primary",
    "procedure", "range", "reads", "reduce", "regexp", "references", "revoke", "right", "rlike", "rollback",
    "rollup", "row", "rows", "select", "set", "smallint", "start", "table", "tablesample", "then", "time",
    "timestamp", "to", "transform", "trigger", "true", "truncate", "unbounded", "union", "uniquejoin",
    "update", "user", "using", "utc_timestamp", "values", "varchar", "views", "when", "where", "window", "with",
})
ATHENA_SELECT_RESERVED = frozenset({
    "alter", "and", "as", "between", "by", "case", "cast", "constraint", "create", "cross", "cube",
    "current_date", "current_path", "current_time", "current_timestamp", "current_user", "deallocate",
    "delete", "describe", "distinct", "drop", "else", "end", "escape", "except", "execute", "exists",
    "extract", "false", "first", "for", "from", "full", "group", "grouping", "having", "in", "inner", "insert",
    "intersect", "into", "is", "join", "last", "left", "like", "localtime", "localtimestamp", "natural",
    "normalize", "not", "null", "on", "or", "order", "outer", "prepare", "recursive", "right", "rollup",
    "select", "table", "then", "true", "unescape", "union", "unnest", "using", "values", "when", "where", "with",
})
# Athena engine version 3 parses queries with Trino's grammar, whose list has grown past
# Athena's page (https://trino.io/docs/current/language/reserved.html).
TRINO_RESERVED = frozenset({
    "alter", "and", "as", "between", "by", "case", "cast", "constraint", "create", "cross", "cube",
    "current_catalog", "current_date", "current_path", "current_role", "current_schema", "current_time",
    "current_timestamp", "current_user", "deallocate", "delete", "describe", "distinct", "drop", "else", "end",
    "escape", "except", "execute", "exists", "extract", "false", "for", "from", "full", "group", "grouping",
    "having", "in", "inner", "insert", "intersect", "into", "is", "join", "json_array", "json_exists",
    "json_object", "json_query", "json_table", "json_value", "left", "like", "listagg", "localtime",
    "localtimestamp", "natural", "normalize", "not", "null", "on", "or", "order", "outer", "prepare",
    "recursive", "right", "rollup", "select", "skip", "table", "then", "trim", "true", "uescape", "union",
    "unnest", "using", "values", "when", "where", "with",
})
RESERVED_WORDS = {
    "DuckDB": DUCKDB_RESERVED,
    "Athena DDL": ATHENA_DDL_RESERVED,
    "Athena SELECT": ATHENA_SELECT_RESERVED,
    "Trino (Athena engine 3)": TRINO_RESERVED,
}

# Columns the dbt models add beside a raw table's own columns, or read by a name that a
# business column of that name would take over (`where change_rank = 1` after
# `select changes.*, ... as change_rank`). From the models scaffold writes
# (streaming/operations/scaffold.py), the current-state macros they share
# (macros/staging/change_metadata_columns.sql) and the hand-written staging models
# that select `changes.*`. tests/contracts/test_contract_names.py checks this list against them
# both ways. The `_` metadata columns need no entry: a column must start with a letter.
MODEL_COLUMNS = frozenset({
    # current state: the ranking, the key and the winning change's metadata
    "change_rank", "item_key", "last_event_name", "is_deleted", "is_ttl_delete", "quality_issues",
    # change events: the first delivery of each event
    "delivery_rank",
    # SCD2 history
    "event_position", "key_ingested_at", "next_event_name", "next_is_ttl_delete", "next_event_ts",
    "version_number", "version_event_id", "valid_from", "valid_to", "is_current",
})
# A column with a `cast:` keeps its text as received beside it, as `<column>_text`.
CAST_TEXT_SUFFIX = "_text"

# dbt renders descriptions with Jinja; text holding one of these would run as a template.
JINJA_OPENERS = ("{{", "{%", "{#")


def reserved_in(name: str) -> list[str]:
    """The engines, or Athena's lists, that reserve `name` (compared in lower case)."""
    return [engine for engine, words in RESERVED_WORDS.items() if name.lower() in words]


def jinja_opener(text: str) -> str | None:
    """The first Jinja delimiter `text` holds, if any."""
    found = [(text.index(opener), opener) for opener in JINJA_OPENERS if opener in text]
    return min(found)[1] if found else None


def without_accents(name: str) -> str:
    """`ünïcödé` -> `unicode`: each letter without its accents (Unicode's compatibility
    decomposition, NFKD, then the combining marks dropped), so that a name written with
    accented letters keeps them as letters in a derived column name, where snake_case
    would drop each accented letter. Letters with no decomposition (`ß`, `ø`) stay as
    they are. The loader's own derivation (`column` left out) does not use it, so the
    columns of existing contracts never change; `contract infer` writes every column."""
    return "".join(char for char in unicodedata.normalize("NFKD", name) if not unicodedata.combining(char))
