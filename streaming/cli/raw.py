"""Commands that load, rebuild, move or check the raw tables: backfill, reprocess, switch, reconcile."""
from __future__ import annotations

import argparse
from pathlib import Path

from streaming.cli.options import add_batch_size_options, add_sink_option, data_dir_argument
from streaming.io.layout import DataLayout


def add_commands(commands: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    fill = commands.add_parser("backfill", parents=[common], help="load a DynamoDB export into its raw tables")
    fill.add_argument("--export", type=Path, required=True, help="export folder .../AWSDynamoDB/<export-id>")
    fill.add_argument("--table", default=None, help="DynamoDB table the export must be of")
    fill.add_argument("--dry-run", action="store_true", help="validate and describe, write nothing")
    add_sink_option(fill)
    fill.set_defaults(run=backfill)

    again = commands.add_parser("reprocess", parents=[common],
                                help="rebuild the raw tables in a new location (live tables untouched)")
    again.add_argument("--to", type=data_dir_argument, required=True,
                       help="new data root, a local folder (gets raw/, quarantine/, checkpoints/)")
    again.add_argument("--from-landing", type=Path, default=None, help="landing folder (default <data dir>/landing)")
    again.add_argument("--dry-run", action="store_true", help="describe, write nothing")
    add_sink_option(again)
    add_batch_size_options(again)
    again.set_defaults(run=reprocess)

    move = commands.add_parser("switch", parents=[common], help="point raw readers at another location, or back")
    target = move.add_mutually_exclusive_group(required=True)
    target.add_argument("--to", default=None, help="data root (local) or S3 prefix of the raw tables (--glue-database)")
    target.add_argument("--rollback", action="store_true", help="return to the location before the last switch")
    move.add_argument("--glue-database", default=None, help="switch these Glue Catalog tables instead of the local pointer")
    move.add_argument("--table", default=None,
                      help="only this raw table, or every raw table of this DynamoDB table (default: all)")
    move.set_defaults(run=switch)

    check = commands.add_parser("reconcile", parents=[common], help="compare a source of truth with the raw result")
    check.add_argument("--source", required=True, help="export folder or raw folder")
    check.add_argument("--target", required=True, help="raw folder or <file>.duckdb:<schema>.<table>")
    check.add_argument("--table", default=None,
                       help="only this raw table, or every raw table of this DynamoDB table")
    check.add_argument("--json", dest="json_path", type=Path, default=None, help="also write the report as JSON")
    check.set_defaults(run=reconcile)


def backfill(args: argparse.Namespace, layout: DataLayout) -> None:
    from streaming.operations.batches.backfill import backfill as load_export

    load_export(layout, args.export, table=args.table, dry_run=args.dry_run, sink=args.sink,
                contracts_dir=args.contracts_dir)


def reprocess(args: argparse.Namespace, layout: DataLayout) -> None:
    from streaming.operations.batches.reprocess import reprocess as rebuild

    rebuild(layout, args.to, from_landing=args.from_landing, dry_run=args.dry_run, sink=args.sink,
            max_files_per_trigger=args.max_files_per_trigger, max_bytes_per_trigger=args.max_bytes_per_trigger,
            contracts_dir=args.contracts_dir)


def switch(args: argparse.Namespace, layout: DataLayout) -> None:
    from streaming.operations.batches.switch import switch as move_readers

    move_readers(layout, args.to, rollback=args.rollback, glue_database=args.glue_database, table=args.table,
                 contracts_dir=args.contracts_dir)


def reconcile(args: argparse.Namespace, layout: DataLayout) -> None:
    from streaming.operations.reconcile import reconcile_and_report

    reconcile_and_report(args.source, args.target, table=args.table, json_path=args.json_path,
                         contracts_dir=args.contracts_dir, data_dir=layout.root)
