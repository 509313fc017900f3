"""`lakehouse quarantine summary | show | replay`."""
from __future__ import annotations

import argparse

from streaming.cli.options import add_sink_option, positive_int
from streaming.io.layout import DataLayout


def add_commands(commands: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    held = commands.add_parser("quarantine", parents=[common],
                               help="quarantine counts, PII-masked payloads, and replay after a fix")
    actions = held.add_subparsers(dest="action", required=True)
    actions.add_parser("summary", parents=[common], help="open quarantined rows by table, reason and day") \
        .set_defaults(run=summary)
    show_parser = actions.add_parser("show", parents=[common], help="a few payloads of one reason, PII hidden")
    replay_parser = actions.add_parser("replay", parents=[common],
                                       help="run open quarantined records through the pipeline again, exactly once")
    for action in (show_parser, replay_parser):
        action.add_argument("--reason", required=action is show_parser, default=None,
                            help="a reason, or its prefix before ':' (e.g. missing_key)")
        action.add_argument("--table", default=None, help="only records of this DynamoDB table")
        action.add_argument("--batch", dest="batches", type=int, action="append", default=[],
                            help="only records quarantined by this batch id (repeatable)")
    show_parser.add_argument("--limit", type=positive_int, default=5, help="records to show at most (default: 5)")
    show_parser.set_defaults(run=show)
    add_sink_option(replay_parser)
    replay_parser.set_defaults(run=replay)


def summary(args: argparse.Namespace, layout: DataLayout) -> None:
    from streaming.operations.quarantine import quarantine_summary

    quarantine_summary(layout)


def show(args: argparse.Namespace, layout: DataLayout) -> None:
    from streaming.operations.quarantine import quarantine_show

    quarantine_show(layout, reason=args.reason, table=args.table, batches=args.batches, limit=args.limit,
                    contracts_dir=args.contracts_dir)


def replay(args: argparse.Namespace, layout: DataLayout) -> None:
    from streaming.operations.batches.quarantine_replay import quarantine_replay

    quarantine_replay(layout, reason=args.reason, table=args.table, batches=args.batches, sink=args.sink,
                      contracts_dir=args.contracts_dir)
