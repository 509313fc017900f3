"""What a `lakehouse dbt` command selects, worked out from dbt's own graph before dbt
runs it: the nodes of one DynamoDB table (`--table`), and what a selection reads but
neither builds nor finds built.

dbt builds a seed only when the selection names it, while a model that reads it needs
its table to exist, and dbt runs every test of a selected model, also one that reads a
model the selection leaves out: `dbt build --select stg_dynamodb__orders+1` on a data
directory no build has run in fails on seed `order_statuses`, then on the relationships
test of fct_orders to stg_dynamodb__customers. Seeds are files of this repository, not
data of a data directory, so `lakehouse dbt` loads a missing one first; such a test it
leaves out, saying so (dbt_runner.fill_in_unbuilt_inputs)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streaming.io.layout import DBT_MANIFEST_FILE

# The source every raw table is declared under (streaming/operations/scaffold.py writes it).
RAW_SOURCE = "dynamodb"
# dbt's options that choose nodes; `--table` makes its own choice and takes none of them.
CHOOSING_OPTIONS = ("--select", "-s", "--models", "--model", "-m", "--selector")
# The commands whose selection is checked against what the data directory holds: the
# ones that run models.
RUNS_MODELS = ("build", "run")
# dbt ls keeps these of the command's options: everything that changes which nodes it picks.
_SELECTION_PARAMS = ("select", "exclude", "selector", "resource_types", "exclude_resource_types",
                     "indirect_selection", "state")


@dataclass(frozen=True)
class TableNodes:
    """One DynamoDB table's nodes in dbt's graph and the dbt options that select them."""

    table: str
    nodes: frozenset[str]
    select: tuple[str, ...]
    exclude: tuple[str, ...]

    @property
    def arguments(self) -> list[str]:
        return ["--select", *self.select, *(["--exclude", *self.exclude] if self.exclude else [])]

    def counts(self) -> dict[str, int]:
        """How many nodes of each kind a `dbt build` of them runs (analyses it does not)."""
        kinds = {"model": "model", "seed": "seed", "snapshot": "snapshot", "test": "data test",
                 "unit_test": "unit test"}
        counted = {label: sum(uid.split(".", 1)[0] == kind for uid in self.nodes) for kind, label in kinds.items()}
        return {label if count == 1 else f"{label}s": count for label, count in counted.items() if count}


def gives_own_selection(dbt_args: Sequence[str]) -> str | None:
    """The first option of `dbt_args` that chooses nodes itself, if any."""
    for arg in dbt_args:
        name = arg.split("=", 1)[0]
        if name in CHOOSING_OPTIONS:
            return name
    return None


def table_nodes(manifest: Mapping[str, Any], table: str, raw_tables: Iterable[str]) -> TableNodes:
    """The nodes built from `table`'s raw tables alone (and seeds): every node downstream of
    its sources, less those that also read another table's (mart_freshness reads every
    mart; a relationships test can join two tables), plus the seeds they read.

    Selected with dbt's own graph operators, so the command line says what it builds:
    `source:dynamodb.<raw>+` for each of its raw tables and change logs, the seeds by
    name, and `--exclude source:<other>+` for each other source whose nodes meet them."""
    sources = manifest["sources"]
    names = {name for raw in raw_tables for name in (raw, f"{raw}_changes")}
    own = sorted(uid for uid, source in sources.items()
                 if source["source_name"] == RAW_SOURCE and source["name"] in names)
    if not own:
        raise ValueError(f"no dbt source declares a raw table of table {table} ({', '.join(sorted(names))}); "
                         f"write its models with `lakehouse scaffold --table {table}`")
    children = manifest["child_map"]
    reached = _downstream(children, own)
    reaching_others = {uid: _downstream(children, [uid]) & reached for uid in sources if uid not in own}
    nodes = reached.difference(*reaching_others.values())
    if not any(uid.startswith("model.") for uid in nodes):
        raise ValueError(f"no dbt model reads only table {table}'s raw tables; write its models with "
                         f"`lakehouse scaffold --table {table}`")
    seeds = sorted({parent for uid in nodes for parent in manifest["parent_map"].get(uid, ())
                    if parent.startswith("seed.")})
    seed_names = [manifest["nodes"][uid]["name"] for uid in seeds]
    # dbt also runs the tests of a selected seed (indirect selection); counted here are
    # those that read nothing the selection leaves out.
    seed_tests = {child for uid in seeds for child in children.get(uid, ())
                  if set(manifest["parent_map"].get(child, ())) <= nodes | set(seeds)}

    def selector(uid: str) -> str:
        return f"source:{sources[uid]['source_name']}.{sources[uid]['name']}+"

    return TableNodes(
        table=table,
        nodes=frozenset(nodes | set(seeds) | seed_tests),
        select=(*(selector(uid) for uid in own), *seed_names),
        exclude=tuple(selector(uid) for uid in sorted(reaching_others) if reaching_others[uid]),
    )


def _downstream(children: Mapping[str, Sequence[str]], starts: Iterable[str]) -> set[str]:
    found: set[str] = set()
    todo = list(starts)
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


@dataclass(frozen=True)
class Listing:
    """How to ask `dbt ls` for the nodes a command would run."""

    command: str
    arguments: list[str]
    # A named selector ignores --exclude, so nodes cannot be left out of it.
    by_selector: bool


def listing_of(dbt_args: Sequence[str]) -> Listing | None:
    """The `dbt ls` arguments that select what the `build` or `run` in `dbt_args` selects,
    read with dbt's own parser of that command; None for another command, for help, and
    for arguments dbt refuses (it then says why itself)."""
    import click
    from dbt.cli.main import cli

    if {"-h", "--help"} & set(dbt_args) or command_of(dbt_args) not in RUNS_MODELS:
        return None
    at = list(dbt_args).index(command_of(dbt_args))
    try:
        params = cli.commands[dbt_args[at]].make_context(dbt_args[at], list(dbt_args[at + 1:])).params
    except (click.ClickException, click.exceptions.Exit):
        return None
    arguments: list[str] = []
    for name in _SELECTION_PARAMS:
        value = params.get(name)
        if value in (None, (), ""):
            continue
        option = "--" + name.replace("_", "-")
        if isinstance(value, tuple):
            # --resource-type takes one value per option; --select and --exclude several.
            if name.endswith("resource_types"):
                arguments += [item for kind in value for item in (option, kind)]
            else:
                arguments += [option, *value]
        else:
            arguments += [option, str(value)]
    if dbt_args[at] == "build" and not _chooses_nodes(params):
        # Every node, so every seed: nothing a build reads is left unloaded.
        return None
    return Listing(command=dbt_args[at], arguments=arguments, by_selector=bool(params.get("selector")))


def command_of(dbt_args: Sequence[str]) -> str | None:
    """The dbt command `dbt_args` run (its first word that names one)."""
    from dbt.cli.main import cli

    return next((arg for arg in dbt_args if arg in cli.commands), None)


def _chooses_nodes(params: Mapping[str, Any]) -> bool:
    return any(params.get(name) for name in ("select", "exclude", "selector", "resource_types",
                                              "exclude_resource_types"))


@dataclass(frozen=True)
class UnbuiltInputs:
    """What the nodes a command runs read that it neither runs nor finds built."""

    seeds: tuple[str, ...]
    """Seeds to load first: files of this repository, the same in every data directory."""
    tests: Mapping[str, tuple[str, ...]]
    """Data tests that would fail on a relation not built yet, each with those relations."""
    models: Mapping[str, tuple[str, ...]]
    """Models that would fail on a model not built yet, each with those models."""


def unbuilt_inputs(manifest: Mapping[str, Any], selected: Iterable[str], command: str,
                   relations: set[tuple[str, str, str]]) -> UnbuiltInputs:
    """The inputs of the nodes `command` runs of `selected` that it does not build itself
    (`dbt run` runs models only; `dbt build` also seeds, snapshots and tests) and that have
    no relation among `relations` (database, schema, name; lower case)."""
    chosen = set(selected)
    builds = ("model.",) if command == "run" else ("model.", "seed.", "snapshot.")
    runs = ("model.",) if command == "run" else ("model.", "test.")
    seeds: set[str] = set()
    tests: dict[str, tuple[str, ...]] = {}
    models: dict[str, tuple[str, ...]] = {}
    for uid in sorted(chosen):
        if not uid.startswith(runs):
            continue
        unbuilt = [parent for parent in manifest["parent_map"].get(uid, ())
                   if parent.startswith(("model.", "seed.", "snapshot."))
                   and not (parent in chosen and parent.startswith(builds))
                   and not _is_built(manifest["nodes"][parent], relations)]
        seeds.update(parent for parent in unbuilt if parent.startswith("seed."))
        others = tuple(manifest["nodes"][parent]["name"] for parent in unbuilt if not parent.startswith("seed."))
        if others:
            (models if uid.startswith("model.") else tests)[manifest["nodes"][uid]["name"]] = others
    return UnbuiltInputs(seeds=tuple(sorted(manifest["nodes"][uid]["name"] for uid in seeds)), tests=tests,
                         models=models)


def _is_built(node: Mapping[str, Any], relations: set[tuple[str, str, str]]) -> bool:
    if node.get("config", {}).get("materialized") == "ephemeral":
        return True  # compiled into its readers, never a relation
    return (str(node["database"]).lower(), str(node["schema"]).lower(), str(node["alias"]).lower()) in relations


def relations_in(database: Path) -> set[tuple[str, str, str]] | None:
    """Every table and view of the DuckDB file `database` (none when there is no file);
    None when it cannot be read now (a build holding it), which dbt then reports itself."""
    import duckdb

    if not database.is_file():
        return set()
    try:
        with duckdb.connect(str(database), read_only=True) as connection:
            rows = connection.execute(
                "select database_name, schema_name, table_name from duckdb_tables() "
                "union all select database_name, schema_name, view_name from duckdb_views() where not internal"
            ).fetchall()
    except duckdb.Error:
        return None
    return {(str(catalog).lower(), str(schema).lower(), str(name).lower()) for catalog, schema, name in rows}


def read_manifest(target: Path) -> dict[str, Any]:
    with (target / DBT_MANIFEST_FILE).open(encoding="utf-8") as file:
        return json.load(file)


def listed_ids(result: Sequence[str]) -> list[str]:
    """The unique ids of `dbt ls --output json --output-keys unique_id`."""
    return [json.loads(line)["unique_id"] for line in result]
