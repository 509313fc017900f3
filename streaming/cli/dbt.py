"""`lakehouse dbt <dbt args>`, `lakehouse scaffold` and `lakehouse docs`."""
from __future__ import annotations

import argparse
from datetime import date

from streaming.cli.options import add_project_options
from streaming.io.layout import DataLayout


def add_commands(commands: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    dbt = commands.add_parser(
        "dbt", parents=[common], help="run dbt on this project with the data directory (e.g. `lakehouse dbt build`)",
        epilog="--table T selects the nodes of the DynamoDB table T (`table:` of its contract): the models "
               "built from its raw tables alone, their tests and the seeds they read, e.g. `lakehouse dbt build "
               "--table orders`; --exclude narrows it (docs/dbt.md, \"Building one table\"); a selection that "
               "reads a seed this data directory has not loaded loads it first; "
               "--reprocess-from DAY --reprocess-to DAY (end exclusive) redo those event days in the "
               "current-state staging models and the microbatch marts (docs/operations.md); "
               "--raw-as-of INSTANT reads Hudi raw tables as of that commit (docs/dbt.md)",
    )
    dbt.add_argument("dbt_args", nargs=argparse.REMAINDER, help="dbt command and its options")
    dbt.set_defaults(run=run_dbt, takes_project_options_from_rest=True)
    scaffold = commands.add_parser(
        "scaffold", parents=[common],
        help="write the dbt sources, staging and change-event models of a DynamoDB table from its contract",
        epilog="re-running on an unchanged contract changes no file; a file edited by hand is refused, "
               "not overwritten, unless --force (docs/dbt.md, \"Scaffolding a table\")",
    )
    scaffold.add_argument("--table", required=True, help="the DynamoDB table (`table:` of its contract)")
    scaffold.add_argument("--history", action="store_true", help="also write an SCD2 history mart per raw table")
    scaffold.add_argument("--force", action="store_true", help="overwrite files edited by hand or not written by scaffold")
    scaffold.set_defaults(run=scaffold_table)
    docs = commands.add_parser("docs", parents=[common], help="generate the dbt docs site and serve it on 127.0.0.1")
    docs.add_argument("--port", type=int, default=8080, help="port on 127.0.0.1 (default 8080; 0 picks a free one)")
    docs.set_defaults(run=serve_docs)


def _own_options(default: object) -> argparse.ArgumentParser:
    # Named, so that an error in these options reads `lakehouse dbt: error: ...`.
    own = argparse.ArgumentParser(prog="lakehouse dbt", add_help=False, allow_abbrev=False)
    add_project_options(own, default=default)
    own.add_argument("--reprocess-from", type=date.fromisoformat, default=None)
    own.add_argument("--reprocess-to", type=date.fromisoformat, default=None)
    own.add_argument("--raw-as-of", default=None)
    own.add_argument("--table", default=None)
    return own


def take_project_options(args: argparse.Namespace) -> None:
    """Move our own options found among dbt's arguments (`lakehouse dbt build --data-dir X
    --reprocess-from 2026-11-01 --reprocess-to 2026-11-03`, `--raw-as-of 20261101120000000`,
    `--table orders`) onto `args`; dbt gets the rest in their order."""
    args.reprocess_from = args.reprocess_to = args.raw_as_of = args.table = None
    found, args.dbt_args = _own_options(argparse.SUPPRESS).parse_known_args(args.dbt_args)
    vars(args).update(vars(found))


def run_dbt(args: argparse.Namespace, layout: DataLayout) -> None:
    from streaming.runtime.dbt_runner import DbtFailed, reprocess_args, run_dbt_command

    dbt_args = list(args.dbt_args)
    one_table = {} if args.table is None else {"table": (args.table, _raw_tables_of(args))}
    if (args.reprocess_from is None) != (args.reprocess_to is None):
        raise DbtFailed("give both --reprocess-from and --reprocess-to (the end day is exclusive)")
    if args.reprocess_from is not None:
        try:
            dbt_args += reprocess_args(args.reprocess_from, args.reprocess_to)
        except ValueError as exc:
            raise DbtFailed(str(exc)) from exc
    run_dbt_command(layout.root, dbt_args, raw_as_of=args.raw_as_of, contracts_dir=args.contracts_dir, **one_table)


def _raw_tables_of(args: argparse.Namespace) -> list[str]:
    """The raw tables of the DynamoDB table `--table` names, checked before dbt starts."""
    from streaming.runtime.dbt_runner import DbtFailed
    from streaming.runtime.dbt_selection import gives_own_selection
    from streaming.runtime.startup import load_checked_contracts

    chooser = gives_own_selection(args.dbt_args)
    if chooser is not None:
        raise DbtFailed(f"--table {args.table} chooses the nodes itself, so it takes no {chooser}; "
                        "give one of them, and --exclude to leave nodes out of the table's")
    contracts = load_checked_contracts(args.contracts_dir).values()
    raw_tables = [contract.raw_table for contract in contracts if contract.table == args.table]
    if not raw_tables:
        known = ", ".join(sorted({contract.table for contract in contracts}))
        raise DbtFailed(f"--table {args.table}: no contract declares that table; the contracts declare {known}")
    return raw_tables


def scaffold_table(args: argparse.Namespace, layout: DataLayout) -> None:
    from streaming.operations.scaffold import scaffold
    from streaming.runtime.startup import load_checked_contracts

    scaffold(args.table, contracts=load_checked_contracts(args.contracts_dir), history=args.history, force=args.force,
             out=lambda line: print(line, flush=True))


def serve_docs(args: argparse.Namespace, layout: DataLayout) -> None:
    from streaming.operations.docs_site import serve_docs as serve

    serve(layout.root, args.port, contracts_dir=args.contracts_dir, out=lambda line: print(line, flush=True))
