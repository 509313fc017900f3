"""The `lakehouse` console script: parses the command line and calls the operation.

Each command group declares its options and handlers in its own module (data.py:
generate, stream, status, demo; raw.py: backfill, reprocess, switch, reconcile;
quarantine.py; unrouted.py; dbt.py: dbt, docs; contract.py: contract infer). A handler only turns arguments into one call of an
application function (streaming.operations); exit_codes.py turns what it raises into
a message and an exit code, in one place.

Everything lives under one data directory (default `./data`, or `$LAKEHOUSE_DATA_DIR`),
laid out as streaming/io/layout.py describes.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

from streaming.cli import contract, data, dbt, quarantine, raw, unrouted
from streaming.cli.exit_codes import exit_code_of, message_of
from streaming.cli.options import add_project_options
from streaming.io.layout import DataLayout, default_data_dir
from streaming.runtime.data_lock import PRIVATE_UMASK

COMMAND_GROUPS = (data, raw, quarantine, unrouted, dbt, contract)
DESCRIPTION = ("DynamoDB change data into a local or AWS lakehouse: generate sample CDC, stream it to raw, "
               "inspect, demo, backfill from DynamoDB exports, reprocess, switch, reconcile, replay quarantined or "
               "unrouted records, run dbt, and infer a table's contract from its data.")


def build_parser() -> argparse.ArgumentParser:
    # The project's own options go before or after the subcommand: the main parser sets
    # their defaults, a subcommand sets them only when given there (SUPPRESS).
    common = argparse.ArgumentParser(add_help=False)
    add_project_options(common, default=argparse.SUPPRESS)
    parser = argparse.ArgumentParser(prog="lakehouse", description=DESCRIPTION)
    add_project_options(parser, default=None)
    commands = parser.add_subparsers(dest="command", required=True)
    for group in COMMAND_GROUPS:
        group.add_commands(commands, common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    # Everything a command creates (data directory, landing files, dbt's DuckDB file and
    # logs) may hold clear PII: private to the owner, whatever the shell's umask.
    os.umask(PRIVATE_UMASK)
    args = build_parser().parse_args(argv)
    if getattr(args, "takes_project_options_from_rest", False):
        dbt.take_project_options(args)
    # Our batch lines at INFO; py4j's callback chatter stays below WARNING.
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    logging.getLogger("streaming").setLevel(logging.INFO)
    try:
        args.run(args, DataLayout(args.data_dir or default_data_dir()))
    except Exception as exc:
        code = exit_code_of(exc)
        if code is None:
            raise
        print(f"lakehouse {args.command}: {message_of(exc)}", file=sys.stderr)
        return code
    return 0
