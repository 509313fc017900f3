"""`lakehouse unrouted replay`."""
from __future__ import annotations

import argparse

from streaming.cli.options import add_sink_option
from streaming.io.layout import DataLayout


def add_commands(commands: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    unrouted = commands.add_parser("unrouted", parents=[common],
                                   help="items of single-table designs that matched no entity: route them again")
    actions = unrouted.add_subparsers(dest="action", required=True)
    replay_parser = actions.add_parser(
        "replay", parents=[common],
        help="after the contract learned their entity: route the unrouted changes again, exactly once")
    replay_parser.add_argument("--table", default=None,
                               help="only this DynamoDB table's unrouted items (default: every table with entities)")
    add_sink_option(replay_parser)
    replay_parser.set_defaults(run=replay)


def replay(args: argparse.Namespace, layout: DataLayout) -> None:
    from streaming.operations.batches.unrouted_replay import unrouted_replay

    unrouted_replay(layout, table=args.table, sink=args.sink, contracts_dir=args.contracts_dir)
