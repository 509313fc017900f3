"""cfn-lint and checkov on the synthesized template (and checkov on the dbt Dockerfile). Accepted checkov findings live in
deploy/checkov-skips.yml, each with its reason; nothing is skipped on a command line."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from deploy.static_checks import accepted_findings, cfn_lint, checkov_findings, stale, unaccepted

REPO = Path(__file__).resolve().parents[2]
CHECKOV = REPO / ".venv-checkov" / "bin" / "checkov"


def test_cfn_lint_finds_nothing(synthesized):
    completed = cfn_lint(Path(sys.executable).with_name("cfn-lint"), [synthesized.template_path])
    assert completed.returncode == 0, completed.stdout + completed.stderr


def test_every_accepted_checkov_finding_has_a_reason():
    accepted = accepted_findings()
    assert accepted
    for skip in accepted:
        assert skip.check.startswith("CKV_") and len(skip.reason.split()) >= 8, skip


def test_checkov_finds_nothing_that_is_not_accepted_and_no_skip_is_stale(synthesized):
    if not CHECKOV.is_file():
        pytest.skip(f"checkov is not installed at {CHECKOV}: `make test` creates .venv-checkov (its pins clash with .venv's)")
    findings = [
        *checkov_findings(CHECKOV, synthesized.template_path),
        *checkov_findings(CHECKOV, REPO / "Dockerfile", framework="dockerfile"),
    ]
    accepted = accepted_findings()
    assert unaccepted(findings, accepted) == []
    assert stale(findings, accepted) == []
