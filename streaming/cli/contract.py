"""`lakehouse contract infer`."""
from __future__ import annotations

import argparse
from pathlib import Path

from streaming.cli.options import positive_int
from streaming.contracts.inference.kinds import DEFAULT_MIN_ENTITY_ITEMS
from streaming.contracts.inference.sample import DEFAULT_MAX_ITEMS
from streaming.io.layout import DataLayout


def add_commands(commands: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    contract = commands.add_parser("contract", parents=[common], help="table contracts: infer one from the data")
    actions = contract.add_subparsers(dest="action", required=True)
    infer = actions.add_parser(
        "infer", parents=[common],
        help="propose the contract of a DynamoDB table from an export, landing change records or a sample file",
        epilog="the proposal explains each decision in a comment and marks with REVIEW what a person decides; "
               "it loads as it is, so scaffold and stream can take it unedited (docs/contracts.md)")
    infer.add_argument("--table", required=True, help="the DynamoDB table name")
    source = infer.add_mutually_exclusive_group(required=True)
    source.add_argument("--export", type=Path, help="a DynamoDB export folder (AWSDynamoDB/<export id>), as backfill reads")
    source.add_argument("--landing", type=Path, help="a landing folder of change records (both AWS record shapes)")
    source.add_argument("--sample", type=Path,
                        help="a file of change records, export lines or items, or a NoSQL Workbench model")
    infer.add_argument("--out", type=Path, default=None,
                       help="write the proposal here, e.g. streaming/contracts/T.yml (default: print it)")
    infer.add_argument("--force", action="store_true", help="overwrite --out and --report when they exist")
    infer.add_argument("--report", type=Path, default=None,
                       help="also write the report as JSON to this file, e.g. T.inference.json")
    infer.add_argument("--max-items", type=positive_int, default=DEFAULT_MAX_ITEMS,
                       help=f"read until this many distinct items (default {DEFAULT_MAX_ITEMS}); the output says "
                            "whether it stopped there")
    infer.add_argument("--min-entity-items", type=positive_int, default=DEFAULT_MIN_ENTITY_ITEMS,
                       help=f"a kind with fewer sampled items stays unrouted (default {DEFAULT_MIN_ENTITY_ITEMS})")
    infer.add_argument("--key", type=lambda text: text.split(","), default=None, metavar="PARTITION[,SORT]",
                       help="the key attributes, when the records carry no Keys (a full export, plain items)")
    infer.set_defaults(run=infer_contract)


def infer_contract(args: argparse.Namespace, layout: DataLayout) -> None:
    from streaming.operations.contract_infer import infer_table_contract

    infer_table_contract(args.table, export=args.export, landing=args.landing, sample=args.sample, out=args.out,
                         report_file=args.report, max_items=args.max_items, min_entity_items=args.min_entity_items,
                         key=args.key, force=args.force, data_dir=layout.root,
                         echo=lambda line: print(line, flush=True))
