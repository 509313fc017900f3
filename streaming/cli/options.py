"""Options and argument types shared by the command groups."""
from __future__ import annotations

import argparse
import re
from pathlib import Path

from streaming.contracts.loader import CONTRACTS_DIR_ENV
from streaming.io.layout import DATA_DIR_ENV, DataDirUnusable, local_data_dir
from streaming.io.sinks import DEFAULT_SINK, SINK_NAMES
from streaming.runtime.trigger import checked_interval

_SIZE = re.compile(r"(\d+)\s*([kmg]?)(?:i?b)?", re.IGNORECASE)


def add_project_options(parser: argparse.ArgumentParser, default: object) -> None:
    parser.add_argument(
        "--data-dir", type=data_dir_argument, default=default,
        help=f"data directory, a local folder (default ${DATA_DIR_ENV} or ./data)"
    )
    parser.add_argument("--contracts-dir", default=default,
                        help=f"table contracts folder (default ${CONTRACTS_DIR_ENV}, else yours in streaming/contracts/, "
                             "else the demo's sample tables)")


def add_sink_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sink", choices=SINK_NAMES, default=None,
                        help=f"raw tables: hudi (as on AWS) or a plain Parquet change log (faster); default: the "
                             f"format of the data directory's raw tables, {DEFAULT_SINK} for a new one")


def add_batch_size_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--max-bytes-per-trigger", type=size_argument, default=None,
                        help="landing bytes per micro-batch, e.g. 256m or 1g (default 512m; turned into a file "
                             "count from the mean landing file size when the stream starts)")
    parser.add_argument("--max-files-per-trigger", type=positive_int, default=None,
                        help="landing files per micro-batch (caps the count the byte budget gives)")


def data_dir_argument(text: str) -> Path:
    try:
        return local_data_dir(text)
    except DataDirUnusable as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def byte_size(text: str) -> int:
    """Bytes of a size written as Spark writes them: `536870912`, `512m`, `512MiB`, `1g`
    (k/m/g are powers of 1024, as in Spark's byte-size settings)."""
    match = _SIZE.fullmatch(text.strip())
    if match is None or int(match.group(1)) < 1:
        raise ValueError(f"not a size: {text!r}; write e.g. 512m or 1g (powers of 1024)")
    return int(match.group(1)) * 1024 ** " kmg".index(match.group(2).lower() or " ")


def size_argument(text: str) -> int:
    try:
        return byte_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def positive_int(text: str) -> int:
    return _whole_number_from(text, 1)


def non_negative_int(text: str) -> int:
    return _whole_number_from(text, 0)


def _whole_number_from(text: str, least: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"must be at least {least}, not {value}")
    return value


def interval_argument(text: str) -> str:
    try:
        return checked_interval(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc
