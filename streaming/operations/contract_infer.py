"""`lakehouse contract infer`: propose a table's contract from its items (docs/contracts.md).

Reads a bounded sample (streaming/io/item_samples.py), infers the contract
(streaming/contracts/inference/), loads the proposal with the contract loader to prove it
is a contract today's loader accepts, then writes it (`--out`, or the terminal) with the
report (`--report`). It writes nothing else: scaffold and stream read the file once a
person has reviewed it.
"""
from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lakehouse_dbt.pii_key import key_of_data_dir
from streaming.atomic_files import write_json_atomically, write_text_atomically
from streaming.contracts.inference.contract import Proposal, infer_contract
from streaming.contracts.inference.render import render_contract, report, summary_lines
from streaming.contracts.inference.sample import InferenceError, ItemSample
from streaming.contracts.loader import load_contract_file
from streaming.contracts.model import ContractError
from streaming.contracts.names import DYNAMODB_TABLE_NAME, DYNAMODB_TABLE_RULE
from streaming.io.item_samples import sample_export, sample_file, sample_landing
from streaming.operations.quarantine import PiiMasker

# The contract loader reads these files of a contracts folder; the report is JSON, so
# that a report written beside the contracts is never read as one.
CONTRACT_SUFFIXES = (".yml", ".yaml")
REPORT_SUFFIX = ".json"
# The name the proposal is checked under in a private temporary folder: fixed, so that
# no table name reaches a path.
_CHECKED_FILE = "proposal.yml"


def infer_table_contract(
    table: str,
    *,
    export: Path | None = None,
    landing: Path | None = None,
    sample: Path | None = None,
    out: Path | None = None,
    report_file: Path | None = None,
    max_items: int,
    min_entity_items: int,
    key: Sequence[str] | None = None,
    force: bool = False,
    data_dir: Path | None = None,
    echo: Callable[[str], None] = print,
) -> Proposal:
    """Infer, check and write the proposal; the summary goes to `echo` (the contract too,
    without `out`). Every argument is checked before anything is read or written.

    An example key of a PII-flagged attribute is shown as `quarantine show` shows PII:
    the marts' pseudonym under the PII key of `data_dir` (or env LAKEHOUSE_PII_KEY),
    masked without one."""
    _check_arguments(table, key, out=out, report_file=report_file, sample=sample, force=force)
    items = _read_sample(table, export=export, landing=landing, sample=sample, max_items=max_items)
    pii_key = key_of_data_dir(data_dir)

    def hide_pii(name: str, column: str, value: Any) -> Any:
        return PiiMasker({name: column}, pii_key).mask_value(name, value)

    proposal = infer_contract(table, items, key=key, min_entity_items=min_entity_items, hide_pii=hide_pii)
    text = render_contract(proposal)
    _check_loads(text, table)
    for line in summary_lines(proposal):
        echo(line)
    if out is None:
        echo(text)
    else:
        _write(out, lambda: write_text_atomically(out, text))
        echo(f"wrote {out}: review it, then `lakehouse scaffold --table {table}`")
    if report_file is not None:
        _write(report_file, lambda: write_json_atomically(report_file, report(proposal)))
        echo(f"wrote {report_file}")
    return proposal


def _check_arguments(table: str, key: Sequence[str] | None, *, out: Path | None, report_file: Path | None,
                     sample: Path | None, force: bool) -> None:
    if not DYNAMODB_TABLE_NAME.fullmatch(table):
        raise InferenceError(f"--table {table!r} is not a DynamoDB table name: {DYNAMODB_TABLE_RULE}")
    if key is not None and (not 1 <= len(key) <= 2 or not all(key) or len(set(key)) != len(key)):
        raise InferenceError(f"--key {','.join(key)!r}: give the partition key, or the partition and sort key, "
                             "as two different attribute names separated by a comma")
    outputs = [("--out", out, CONTRACT_SUFFIXES, "the contract loader reads only these"),
               ("--report", report_file, (REPORT_SUFFIX,), "the report is JSON; a contracts folder reads *.yml")]
    for option, path, suffixes, why in outputs:
        if path is None:
            continue
        if path.suffix not in suffixes:
            raise InferenceError(f"{option} {path}: the file name must end in {' or '.join(suffixes)} ({why})")
        if path.is_dir():
            raise InferenceError(f"{option} {path} is a folder; give a file name")
        if not path.parent.is_dir():
            raise InferenceError(f"{option} {path}: folder {path.parent} does not exist; create it first")
        if path.exists() and not force:
            raise InferenceError(f"{option} {path} exists; infer never overwrites a file unless --force")
    given = [(option, path) for option, path in (("--out", out), ("--report", report_file), ("--sample", sample))
             if path is not None]
    for index, (option, path) in enumerate(given):
        for other_option, other in given[index + 1:]:
            if _same_file(path, other):
                raise InferenceError(f"{option} {path} and {other_option} {other} are the same file; "
                                     "give each its own")


def _same_file(path: Path, other: Path) -> bool:
    """Whether two paths name one file: the same after resolving `..` and symbolic links,
    or one file reached twice (a hard link)."""
    if path.resolve() == other.resolve():
        return True
    try:
        return path.samefile(other)
    except OSError:  # one of them does not exist yet
        return False


def _write(target: Path, write: Callable[[], None]) -> None:
    """An OS error names the file the user gave, not the temporary file beside it."""
    try:
        write()
    except OSError as exc:
        raise InferenceError(f"{target}: cannot write it: {exc.strerror or exc}") from exc


def _read_sample(table: str, *, export: Path | None, landing: Path | None, sample: Path | None,
                 max_items: int) -> ItemSample:
    given = [source for source in (export, landing, sample) if source is not None]
    if len(given) != 1:
        raise InferenceError("give exactly one of --export DIR, --landing DIR, --sample FILE")
    if export is not None:
        return sample_export(export, table, max_items)
    if landing is not None:
        return sample_landing(landing, table, max_items)
    assert sample is not None
    return sample_file(sample, table, max_items)


def _check_loads(text: str, table: str) -> None:
    """The proposal must be a contract the loader accepts as it is; one it refuses is a bug
    of the inference, reported as such, with the loader's message about the proposal (the
    temporary file it was checked in is no name the user knows)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / _CHECKED_FILE
        path.write_text(text, encoding="utf-8")
        try:
            load_contract_file(path)
        except ContractError as exc:
            message = str(exc).replace(str(path), f"the proposal for table {table!r}")
            raise InferenceError(f"{message} (the contract loader refuses the proposal as inferred: please "
                                 "report it, with the options given)") from exc
