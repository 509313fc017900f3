"""Runs dbt in-process (dbtRunner) against this repository's project and profiles."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from datetime import date
from pathlib import Path
from typing import Any

import yaml
from dbt.cli.main import dbtRunner, dbtRunnerResult

from lakehouse_dbt.pii_key import KEY_ENV, ensure_local_key
from streaming.contracts.loader import SAMPLES_DBT_VAR, ContractSet, choose_contracts
from streaming.errors import OperatorError
from streaming.io.formats.raw_format import RawReadRefused
from streaming.io.formats.registry import format_to_read
from streaming.io.layout import DataLayout, dbt_env, read_pointer, require_data_dir
from streaming.runtime.dbt_selection import (
    TableNodes,
    command_of,
    listed_ids,
    listing_of,
    read_manifest,
    relations_in,
    table_nodes,
    unbuilt_inputs,
)

PROJECT_DIR = Path(__file__).resolve().parents[2]
# dbt's saved parse of the project (partial_parse.msgpack), shared by every data directory:
# a parse depends on the project, not on the data, and a fresh data directory would
# otherwise parse it all again (6 s a command on an idle machine). In dbt's own target
# folder of the project, which `dbt clean` empties.
SHARED_PARSE_DIR = PROJECT_DIR / "target" / "partial_parse"
PARTIAL_PARSE_FILE = "partial_parse.msgpack"
# How dbt_project.yml and profiles.yml read the environment.
_ENV_VAR_CALL = re.compile(r"""env_var\(\s*['"](\w+)['"]""")


def _close_duckdb_environment() -> None:
    """dbt-duckdb keeps one DuckDB instance per process, open after the command
    ends; DuckDB lets a file be attached only once per process, so close it for the
    caller (and the next dbt command) to open the file again."""
    from dbt.adapters.duckdb.connections import DuckDBConnectionManager

    with DuckDBConnectionManager._LOCK:
        environment = DuckDBConnectionManager._ENV
        if environment is not None:
            environment.close()
            DuckDBConnectionManager._ENV = None


def run_dbt(
    args: list[str],
    data_dir: Path | str,
    *,
    target: str = "local",
    extra_env: dict[str, str] | None = None,
    create_local_pii_key: bool = True,
) -> dbtRunnerResult:
    """Runs `dbt <args>` with the local data directory `data_dir`.

    The project and profiles are this repository's; target/ and logs/ go under
    `<data_dir>/dbt` so concurrent runs on different data directories do not clash.
    dbt's parse of the project is read from, and a new one shared to, SHARED_PARSE_DIR
    (shared_parse_path), so that a new data directory does not parse the project again.
    The environment is restored afterwards. The caller checks `result.success`.

    On the local target without env LAKEHOUSE_PII_KEY, the data directory's own PII key
    is created on first use (lakehouse_dbt.pii_key); `create_local_pii_key=False` uses
    only a key that exists already, as a plain `dbt` command does.
    """
    data_path = Path(data_dir).resolve()
    if target == "local":
        check_database_folder(data_path)
    data_path.mkdir(parents=True, exist_ok=True)
    if create_local_pii_key and target == "local" and KEY_ENV not in {**os.environ, **(extra_env or {})}:
        ensure_local_key(data_path)
    env = {
        "LAKEHOUSE_DBT_TARGET": target,
        # As environment variables, not options: a command without one of these options
        # (`dbt deps` and `dbt debug` take no --target-path) ignores the variable, where
        # it would refuse the option. An option given in `args` still wins.
        "DBT_PROJECT_DIR": str(PROJECT_DIR),
        "DBT_PROFILES_DIR": str(PROJECT_DIR),
        "DBT_TARGET_PATH": str(DataLayout(data_path).dbt_target),
        "DBT_LOG_PATH": str(DataLayout(data_path).dbt_logs),
        # The data directory, and its active raw location (it follows `lakehouse switch`).
        **dbt_env(data_path),
        **(extra_env or {}),
    }
    shared_parse = shared_parse_path(args, {**os.environ, **env})
    if shared_parse is not None and shared_parse.is_file():
        # dbt reads its saved parse from here and checks it as its own; it still writes
        # the new one to the data directory's target/, shared below.
        env["DBT_PARTIAL_PARSE_FILE_PATH"] = str(shared_parse)
    own_parse = DataLayout(data_path).dbt_target / PARTIAL_PARSE_FILE
    own_parse_before = _modified(own_parse)
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        return dbtRunner().invoke(list(args))
    finally:
        _close_duckdb_environment()
        # dbt writes a parse only when it parsed something; unchanged, there is nothing to share.
        if shared_parse is not None and _modified(own_parse) not in (None, own_parse_before):
            _share_parse(own_parse, shared_parse)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def shared_parse_path(args: Sequence[str], environment: Mapping[str, str]) -> Path | None:
    """Where the command's parse is shared, or None for a command on another project or
    profiles folder (`--project-dir`, `--profiles-dir`): a parse of a copy of the project
    with other models must not become this project's."""
    if _last_option(args, "--project-dir") is not None or _last_option(args, "--profiles-dir") is not None:
        return None
    return SHARED_PARSE_DIR / f"{parse_state_key(args, environment)}.msgpack"


def parse_state_key(args: Sequence[str], environment: Mapping[str, str]) -> str:
    """Names the shared parse for what, of the state dbt checks a saved parse against
    (dbt/parser/manifest.py, build_manifest_state_check), differs between this project's
    commands: the command's --vars, and the environment variables dbt_project.yml and
    profiles.yml read (among them the target's). dbt refuses a parse saved under other
    values and parses everything; keyed, commands of different kinds (Hudi raw tables
    with raw_format=hudi, Parquet without) do not keep replacing each other's parse."""
    names = sorted({name for file in ("dbt_project.yml", "profiles.yml")
                    for name in _ENV_VAR_CALL.findall((PROJECT_DIR / file).read_text(encoding="utf-8"))})
    state = {"vars": _last_option(args, "--vars"), "env": {name: environment.get(name) for name in names}}
    return hashlib.sha256(json.dumps(state, sort_keys=True).encode()).hexdigest()[:16]


def _last_option(args: Sequence[str], option: str) -> str | None:
    """The value of the command's last `option` (`--option value` or `--option=value`);
    dbt keeps only the last."""
    given = None
    for at, arg in enumerate(args):
        if arg == option and at + 1 < len(args):
            given = args[at + 1]
        elif arg.startswith(f"{option}="):
            given = arg.split("=", 1)[1]
    return given


def _modified(path: Path) -> int | None:
    try:
        return path.stat().st_mtime_ns
    except FileNotFoundError:
        return None


def _share_parse(written: Path, shared: Path) -> None:
    """Copies a parse dbt wrote into the shared place in one rename, so a dbt reading it
    at the same time (another process, another data directory) reads all of the old
    file or all of the new."""
    try:
        shared.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=shared.parent, prefix=f".{shared.name}.", suffix=".tmp")
        os.close(handle)
        try:
            shutil.copyfile(written, temporary)
            os.replace(temporary, shared)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    except OSError:
        # Sharing only saves time: where the project's folder is not writable, each data
        # directory keeps its own parse, as dbt does by itself.
        return


def check_database_folder(data_path: Path) -> None:
    """Refuse a data directory the local target's DuckDB file cannot live in. DuckDB 2.0
    reads what follows a `?` in a database path as options: it resolves the path and
    puts the write-ahead log beside the part before the `?`, in a folder that does not
    exist, so every write fails. dbt-duckdb reads the path as a URL too, and cuts it at
    a `?` or a `#`."""
    if {"?", "#"} & set(str(data_path)):
        raise DbtFailed(
            f"DuckDB cannot keep dbt's database in {data_path}: it reads a `?` or `#` in the path as the start of "
            "options. Rename the data directory without them (the stream and `status` work there as they are)"
        )


def failure_summary(result: dbtRunnerResult, *, most: int = 10) -> str:
    """dbt's own words for a failed invocation: the exception it returned (a usage error
    such as an unknown option, raised before dbt logs anything), else each node that
    errored or failed with the first line of its message."""
    if result.exception is not None:
        return str(result.exception)
    node_results = getattr(result.result, "results", None) or []
    failed = [node for node in node_results if str(node.status) in ("error", "fail", "runtime error")]
    if not failed:
        return "dbt reported failure without a failing node"
    lines = [f"{len(failed)} node(s) failed:"]
    for node in failed[:most]:
        first_lines = [line.strip() for line in str(node.message or "").splitlines() if line.strip()][:2]
        lines.append(f"  {node.node.unique_id} ({node.status}): {' / '.join(first_lines)}")
    if len(failed) > most:
        lines.append(f"  ... and {len(failed) - most} more (dbt's output above lists them all)")
    return "\n".join(lines)


def reprocess_args(start: date, end: date, extra_vars: Mapping[str, Any] | None = None) -> list[str]:
    """Arguments that make `dbt build`/`dbt run` redo the event days [start, end): the
    current-state staging merges through vars reprocess_from/reprocess_to, the
    microbatch marts through --event-time-start/--event-time-end. dbt keeps only the
    last --vars, so other vars of the run go in `extra_vars`."""
    if start >= end:
        raise ValueError(f"reprocess range is empty: {start} .. {end} (end exclusive)")
    dbt_vars = {**(extra_vars or {}), "reprocess_from": start.isoformat(), "reprocess_to": end.isoformat()}
    return [
        "--vars", json.dumps(dbt_vars),
        "--event-time-start", start.isoformat(),
        "--event-time-end", end.isoformat(),
    ]


class DbtFailed(OperatorError):
    """A dbt command failed; the message carries dbt's own words and the log's path."""


def with_dbt_var(dbt_args: Sequence[str], name: str, value: Any) -> list[str]:
    """`dbt_args` with the var `name` set to `value` unless they set it already. dbt keeps
    only the last --vars, so the var joins that one (YAML, as dbt reads it)."""
    args = list(dbt_args)
    found = [i for i, arg in enumerate(args) if arg == "--vars" or arg.startswith("--vars=")]
    if not found:
        return [*args, "--vars", json.dumps({name: value})]
    at = found[-1]
    if args[at] == "--vars":
        if at + 1 == len(args):
            return args  # dbt itself reports the missing value
        text, value_at = args[at + 1], at + 1
    else:
        text, value_at = args[at].split("=", 1)[1], at
    try:
        given = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise DbtFailed(f"--vars {text!r} is not YAML: {exc}") from exc
    if not isinstance(given, dict):
        raise DbtFailed(f"--vars {text!r} is not a mapping of names to values")
    merged = json.dumps({name: value, **given})
    args[value_at] = merged if args[at] == "--vars" else f"--vars={merged}"
    return args


def with_samples_var(dbt_args: Sequence[str], contracts: ContractSet, report: Callable[[str], None]) -> list[str]:
    """`dbt_args` with the var lakehouse_samples (dbt_project.yml enables the sample tables'
    models by it) true when `contracts` are the samples, false when they are the user's own,
    unless the command sets it; said when the samples were fallen back on."""
    notice = contracts.fallback_notice()
    if notice is not None:
        report(notice)
    return with_dbt_var(dbt_args, SAMPLES_DBT_VAR, contracts.is_samples)


def raw_dbt_args(
    data_dir: Path, dbt_args: Sequence[str], raw_as_of: str | None = None,
    report: Callable[[str], None] = lambda line: print(line, flush=True),
) -> tuple[list[str], tuple[str, ...]]:
    """dbt arguments for the data directory's active raw folder, as its raw format reads
    it (RawFormat.dbt_inputs): Hudi raw tables (the local default sink) are loaded with
    hudi-rs into DuckDB, as of `raw_as_of` when given; a Parquet change log is read by dbt
    directly, as it is. A table the format cannot read is reported and left out, so that
    its models fail by name while every other table builds. Returns the arguments and the
    tables left out."""
    raw_dir = read_pointer(data_dir).raw_dir
    try:
        inputs = format_to_read(raw_dir).dbt_inputs(
            data_dir, raw_dir, raw_as_of, lambda: check_database_folder(data_dir.resolve()), report)
    except RawReadRefused as exc:
        raise DbtFailed(str(exc)) from exc
    args = list(dbt_args)
    for name, value in inputs.dbt_vars.items():
        args = with_dbt_var(args, name, value)
    return args, inputs.left_out


def run_dbt_command(
    data_dir: Path,
    dbt_args: Sequence[str],
    *,
    raw_as_of: str | None = None,
    table: tuple[str, Sequence[str]] | None = None,
    contracts_dir: str | Path | None = None,
    report: Callable[[str], None] = lambda line: print(line, flush=True),
) -> None:
    """`lakehouse dbt <args>`: dbt on this repository's project with the local data directory.

    Hudi raw tables are read through hudi-rs (raw_dbt_args), as of `raw_as_of` when
    given. The sample tables' models are built only when the contracts the stream reads
    (`contracts_dir`, else choose_contracts's) are the samples (with_samples_var).
    `table` (a DynamoDB table and its raw tables) selects that table's nodes and the
    seeds they read (table_selection); otherwise a `build` or `run` whose selection
    reads what it does not build is fitted to the data directory (fill_in_unbuilt_inputs).
    dbt writes its own progress; a failure ends with dbt's own error (failure_summary),
    not only a pointer to a log that a usage error never writes.
    """
    if not dbt_args:
        raise DbtFailed("name a dbt command, e.g. `lakehouse dbt build`")
    # dbt would create a missing one empty and build nothing from it.
    require_data_dir(data_dir)
    dbt_args, left_out = raw_dbt_args(data_dir, dbt_args, raw_as_of, report)
    dbt_args = with_samples_var(dbt_args, choose_contracts(contracts_dir), report)
    if table is not None:
        selected = table_selection(data_dir, dbt_args, *table)
        counts = ", ".join(f"{count} {kind}" for kind, count in selected.counts().items())
        report(f"--table {selected.table}: {' '.join(selected.arguments)} ({counts})")
        dbt_args = [*dbt_args, *selected.arguments]
    if table is None or command_of(dbt_args) != "build":
        # A table's build selects the seeds it reads; its `run` loads none.
        dbt_args = fill_in_unbuilt_inputs(data_dir, dbt_args, report)
    try:
        _run_or_fail(data_dir, dbt_args)
    except DbtFailed as exc:
        if not left_out:
            raise
        raise DbtFailed(f"{exc}\nhudi-rs could not read raw table(s) {', '.join(left_out)} (said above): the models "
                        "reading them fail until they are restored or rebuilt") from exc


def _run_or_fail(data_dir: Path, dbt_args: Sequence[str]) -> dbtRunnerResult:
    result = run_dbt(list(dbt_args), data_dir)
    if not result.success:
        log_file = DataLayout(data_dir).dbt_log
        where = f"\nfull log: {log_file}" if log_file.is_file() else ""
        raise DbtFailed(f"dbt {' '.join(dbt_args)} failed: {failure_summary(result)}{where}")
    return result


def _same_vars(dbt_args: Sequence[str]) -> list[str]:
    """The command's --vars as it gave them: a helper command with other vars (or none)
    is another kind of command to the shared parse (parse_state_key), parsed again."""
    given = _last_option(dbt_args, "--vars")
    return [] if given is None else ["--vars", given]


def table_selection(data_dir: Path, dbt_args: Sequence[str], table: str, raw_tables: Sequence[str]) -> TableNodes:
    """The nodes of `table`, from dbt's graph of the project as `dbt_args` parse it."""
    _run_or_fail(data_dir, ["parse", "--quiet", *_same_vars(dbt_args)])
    try:
        return table_nodes(read_manifest(DataLayout(data_dir).dbt_target), table, raw_tables)
    except ValueError as exc:
        raise DbtFailed(str(exc)) from exc


def fill_in_unbuilt_inputs(data_dir: Path, dbt_args: Sequence[str], report: Callable[[str], None]) -> list[str]:
    """`dbt_args` of a `build` with a selection, or of a `run`, made to work on what the data
    directory holds, checked before anything runs. A seed the selected nodes read but the
    database has no table of is loaded first: seeds are files of this repository, so on a
    fresh data directory `build --select stg_dynamodb__orders+1` works instead of failing
    on `order_statuses`. A data test that also reads a model neither selected nor built
    (dbt selects every test of a selected model) is left out, saying so. A selected model
    that reads such a model is refused, saying what to select. A seed loaded before is
    left as it is, as dbt leaves it."""
    listing = listing_of(dbt_args)
    if listing is None:
        return list(dbt_args)
    listed = run_dbt(["ls", *listing.arguments, *_same_vars(dbt_args), "--output", "json",
                      "--output-keys", "unique_id", "--log-level", "none"], data_dir)
    relations = relations_in(DataLayout(data_dir).dbt_database)
    if not listed.success or relations is None:
        # The command itself fails on the same arguments or database, in dbt's words.
        return list(dbt_args)
    manifest = read_manifest(DataLayout(data_dir).dbt_target)
    unbuilt = unbuilt_inputs(manifest, listed_ids(listed.result), listing.command, relations)
    if unbuilt.models:
        model, reads = next(iter(unbuilt.models.items()))
        raise DbtFailed(
            f"{model} reads {', '.join(reads)}, which this data directory has not built and the selection leaves "
            f"out: select it too (`--select +{model}` selects everything {model} reads), or first build the models "
            "of the DynamoDB table it comes from (`lakehouse dbt build --table <table>`)"
        )
    if unbuilt.seeds:
        report(f"loading {'seeds' if len(unbuilt.seeds) > 1 else 'seed'} {', '.join(unbuilt.seeds)} first: the "
               "selected nodes read it, and this data directory's database has no table of it yet")
        _run_or_fail(data_dir, ["seed", "--select", *unbuilt.seeds, *_same_vars(dbt_args)])
    if unbuilt.tests and not listing.by_selector:
        reads = sorted({name for names in unbuilt.tests.values() for name in names})
        report(f"leaving out {len(unbuilt.tests)} data test(s) that also read {', '.join(reads)}, which this data "
               f"directory has not built: {', '.join(unbuilt.tests)}")
        return [*dbt_args, "--exclude", *unbuilt.tests]
    return list(dbt_args)
