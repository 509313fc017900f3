"""cfn-lint and checkov over the synthesized templates, with the accepted findings listed
in the repository (deploy/checkov-skips.yml) instead of silenced on the command line.

Used by the infrastructure tests and `make synth`-adjacent targets; both tools run as
subprocesses: checkov lives in its own virtualenv (.venv-checkov) because its pins
clash with the project's (boto3).
"""
from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

SKIPS_FILE = Path(__file__).with_name("checkov-skips.yml")

# cfn-lint rules not applied, with the reason:
# W3005: CDK writes DependsOn on a Lambda function's role next to the GetAtt of that
#        role; the duplicate dependency is harmless and not in this app's code.
CFN_LINT_IGNORED = ("W3005",)


@dataclass(frozen=True)
class Finding:
    check: str
    resource: str  # a template logical id, or a file name
    name: str


@dataclass(frozen=True)
class AcceptedFinding:
    check: str
    resources: tuple[str, ...]
    reason: str

    def covers(self, finding: Finding) -> bool:
        return finding.check == self.check and any(
            re.fullmatch(re.escape(prefix) + r"([0-9A-F]{8})?", finding.resource) for prefix in self.resources
        )


def accepted_findings(path: Path = SKIPS_FILE) -> list[AcceptedFinding]:
    entries = yaml.safe_load(path.read_text()) or []
    accepted = []
    for entry in entries:
        reason = str(entry.get("reason") or "").strip()
        if not reason or not entry.get("check") or not entry.get("resources"):
            raise ValueError(f"{path}: every skip needs a check, resources and a reason: {entry}")
        accepted.append(AcceptedFinding(entry["check"], tuple(entry["resources"]), reason))
    return accepted


def checkov_findings(checkov: Path, path: Path, framework: str = "cloudformation") -> list[Finding]:
    """Every failed checkov check on one file (nothing skipped); `--skip-download` keeps
    checkov offline."""
    completed = subprocess.run(
        [str(checkov), "--file", str(path), "--framework", framework, "--output", "json",
         "--quiet", "--compact", "--skip-download"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    # checkov exits 1 when a check failed; anything else, or no JSON, is a failed run.
    if completed.returncode not in (0, 1):
        raise RuntimeError(f"checkov failed ({completed.returncode}): {completed.stderr[-2000:]}")
    return findings_in_report(json.loads(completed.stdout), path)


def findings_in_report(report: dict | list, path: Path) -> list[Finding]:
    """The failed checks of checkov's JSON report on `path`."""
    reports = report if isinstance(report, list) else [report]
    findings = []
    for part in reports:
        if part.get("summary", {}).get("parsing_errors"):
            raise RuntimeError(f"checkov could not parse {path}")
        for failed in part.get("results", {}).get("failed_checks", []):
            findings.append(Finding(failed["check_id"], _resource(failed), failed["check_name"]))
    return findings


def _resource(failed: dict) -> str:
    """What a finding is about, independent of where the repository is checked out.

    A template finding's id is "AWS::S3::Bucket.LakeBucket1A2B3C4D": the logical id
    names it. A Dockerfile finding's id is the checked file's path, a dot and the
    instruction it is about (nothing when it is about the whole file); that path
    holds the checkout folder, which may contain dots itself, so the file's name
    stands for it: "Dockerfile", or "Dockerfile.FROM".
    """
    resource, file_path = failed["resource"], failed.get("file_path") or ""
    if file_path and resource.startswith(file_path + "."):
        instruction = resource[len(file_path) + 1:]
        return Path(file_path).name + (f".{instruction}" if instruction else "")
    kind, _, name = resource.partition(".")
    return name or Path(kind).name


def unaccepted(findings: list[Finding], accepted: list[AcceptedFinding]) -> list[Finding]:
    return [finding for finding in findings if not any(skip.covers(finding) for skip in accepted)]


def stale(findings: list[Finding], accepted: list[AcceptedFinding]) -> list[AcceptedFinding]:
    return [skip for skip in accepted if not any(skip.covers(finding) for finding in findings)]


def cfn_lint(cfn_lint_bin: Path, templates: list[Path]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(cfn_lint_bin), "--ignore-checks", *CFN_LINT_IGNORED, "--", *map(str, templates)],
        capture_output=True,
        text=True,
        timeout=600,
    )
