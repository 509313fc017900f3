"""cfn-lint and checkov on the synthesized template (and checkov on the dbt Dockerfile). Accepted checkov findings live in
deploy/checkov-skips.yml, each with its reason; nothing is skipped on a command line."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from deploy.static_checks import (
    Finding,
    accepted_findings,
    cfn_lint,
    checkov_findings,
    findings_in_report,
    stale,
    unaccepted,
)

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


def _failed(check_id: str, resource: str, file_path: str) -> dict:
    return {"check_id": check_id, "check_name": "a check", "resource": resource, "file_path": file_path}


def test_a_dockerfile_finding_is_named_by_the_file_not_the_checkout_path():
    # checkov's id for a Dockerfile finding is "<path>.<instruction>"; a checkout in
    # /tmp/co.with.dot/main once turned it into "with.dot/main/Dockerfile.".
    path = "/tmp/co.with.dot/main/Dockerfile"
    report = {"results": {"failed_checks": [
        _failed("CKV_DOCKER_2", f"{path}.", path),
        _failed("CKV_DOCKER_7", f"{path}.FROM", path),
        _failed("CKV_AWS_18", "AWS::S3::Bucket.AccessLogsBucket1A2B3C4D", "/tmp/cdk.out.x/Stack.template.json"),
    ]}}
    assert [f.resource for f in findings_in_report(report, Path(path))] == [
        "Dockerfile", "Dockerfile.FROM", "AccessLogsBucket1A2B3C4D",
    ]
    accepted = accepted_findings()
    assert unaccepted([Finding("CKV_DOCKER_2", "Dockerfile", "a check")], accepted) == []


def test_checkov_accepts_the_dockerfile_from_a_checkout_path_with_dots(tmp_path):
    if not CHECKOV.is_file():
        pytest.skip(f"checkov is not installed at {CHECKOV}: `make test` creates .venv-checkov (its pins clash with .venv's)")
    checkout = tmp_path / "co.with.dot" / "main"
    checkout.mkdir(parents=True)
    shutil.copy(REPO / "Dockerfile", checkout / "Dockerfile")
    findings = checkov_findings(CHECKOV, checkout / "Dockerfile", framework="dockerfile")
    assert findings and unaccepted(findings, accepted_findings()) == []
