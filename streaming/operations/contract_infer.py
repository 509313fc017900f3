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

from streaming.atomic_files import write_json_atomically, write_text_atomically
from streaming.contracts.inference.contract import Proposal, infer_contract
from streaming.contracts.inference.render import render_contract, report, summary_lines
from streaming.contracts.inference.sample import InferenceError, ItemSample
from streaming.contracts.loader import load_contract_file
from streaming.io.item_samples import sample_export, sample_file, sample_landing


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
    echo: Callable[[str], None] = print,
) -> Proposal:
    """Infer, check and write the proposal; the summary goes to `echo` (the contract too,
    without `out`)."""
    if out is not None and out.exists() and not force:
        raise InferenceError(f"{out} exists; a proposal never overwrites a contract unless --force")
    items = _read_sample(table, export=export, landing=landing, sample=sample, max_items=max_items)
    proposal = infer_contract(table, items, key=key, min_entity_items=min_entity_items)
    text = render_contract(proposal)
    _check_loads(text, table)
    for line in summary_lines(proposal):
        echo(line)
    if out is None:
        echo(text)
    else:
        write_text_atomically(out, text)
        echo(f"wrote {out}: review it, then `lakehouse scaffold --table {table}`")
    if report_file is not None:
        write_json_atomically(report_file, report(proposal))
        echo(f"wrote {report_file}")
    return proposal


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
    of the inference, reported as such (with the loader's message)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"{table}.yml"
        path.write_text(text, encoding="utf-8")
        load_contract_file(path)
