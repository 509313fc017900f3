"""How the `lakehouse` command hands work on: errors to exit codes in one place, and
`lakehouse dbt`'s own options taken out of dbt's arguments."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from lakehouse_dbt.pii_key import PiiKeyError
from streaming.cli import main
from streaming.cli.exit_codes import MISMATCH, REFUSED, exit_code_of
from streaming.contracts.model import ContractError
from streaming.errors import OperatorError
from streaming.operations.reconcile import ReconcileMismatch
from streaming.runtime.data_lock import DataDirLocked


@pytest.mark.parametrize("error, code", [
    (ReconcileMismatch("2 table(s) differ"), MISMATCH),
    (ContractError("bad field"), REFUSED),
    (DataDirLocked("held by pid 1"), REFUSED),
    (OperatorError("refused"), REFUSED),
    (PiiKeyError("too short"), REFUSED),
])
def test_operator_errors_get_an_exit_code(error: Exception, code: int) -> None:
    assert exit_code_of(error) == code


def test_a_bug_keeps_its_traceback() -> None:
    assert exit_code_of(KeyError("x")) is None
    with pytest.raises(ZeroDivisionError):
        main_with_failing_handler(ZeroDivisionError("a bug"))


def main_with_failing_handler(error: Exception) -> int:
    import streaming.cli.data as data

    original = data.status

    def failing(args: object, layout: object) -> None:
        raise error

    data.status = failing  # the parser binds handlers when it is built, so patch first
    try:
        return main(["status"])
    finally:
        data.status = original


def test_an_operator_error_prints_one_line_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main_with_failing_handler(OperatorError("the folder is not empty")) == 2
    assert capsys.readouterr().err == "lakehouse status: the folder is not empty\n"


@pytest.fixture
def dbt_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Path, list[str]]]:
    """What `lakehouse dbt` would run: dbt itself is replaced, the wiring is not."""
    calls: list[tuple[Path, list[str]]] = []
    monkeypatch.setattr("streaming.runtime.dbt_runner.run_dbt_command",
                        lambda data_dir, args, **options: calls.append((data_dir, list(args))))
    return calls


def test_dbt_gets_its_arguments_in_order_without_ours(tmp_path: Path, dbt_calls) -> None:
    assert main(["dbt", "build", "--select", "staging", "--data-dir", str(tmp_path), "--full-refresh"]) == 0
    assert dbt_calls == [(tmp_path, ["build", "--select", "staging", "--full-refresh"])]


def test_dbt_reprocess_days_become_both_mechanisms_arguments(tmp_path: Path, dbt_calls) -> None:
    assert main(["--data-dir", str(tmp_path), "dbt", "build", "--reprocess-from", "2026-11-01",
                 "--reprocess-to", "2026-11-03"]) == 0
    (data_dir, args), = dbt_calls
    assert args[0] == "build"
    assert json.loads(args[args.index("--vars") + 1]) == {"reprocess_from": "2026-11-01", "reprocess_to": "2026-11-03"}
    assert args[args.index("--event-time-start") + 1] == "2026-11-01"
    assert args[args.index("--event-time-end") + 1] == "2026-11-03"


@pytest.mark.parametrize("days, message", [
    (["--reprocess-from", "2026-11-01"], "give both --reprocess-from and --reprocess-to"),
    (["--reprocess-from", "2026-11-03", "--reprocess-to", "2026-11-01"], "reprocess range is empty"),
])
def test_dbt_reprocess_days_are_checked(tmp_path: Path, dbt_calls, capsys, days: list[str], message: str) -> None:
    assert main(["dbt", "build", "--data-dir", str(tmp_path), *days]) == 2
    assert message in capsys.readouterr().err
    assert dbt_calls == []
