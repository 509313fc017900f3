"""`lakehouse <command> --help` explains every option it lists."""
from __future__ import annotations

import argparse
from collections.abc import Iterator

from streaming.cli import build_parser


def options_of(parser: argparse.ArgumentParser, command: str = "lakehouse") -> Iterator[tuple[str, argparse.Action]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from options_of(sub, f"{command} {name}")
        elif action.option_strings:
            yield command, action


def test_every_option_of_every_command_has_help_text():
    # Issue 30, item 17: `generate --help` listed --seed, --customers, ... without a word.
    missing = [f"{command} {'/'.join(action.option_strings)}" for command, action in options_of(build_parser())
               if not action.help]
    assert missing == []
