"""One synthesis of the CDK app per config per test session, shared by every
infrastructure test: the example config, and the variant of variant_config.py.

The CDK runs its library in Node.js. Without `node` on PATH these tests skip and say
why; the machine image and CI have Node.js 20, so `make test` runs them there.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from node_required import require_node
from variant_config import VARIANT_SETTINGS

from deploy.config import DeployConfig, load_config, parse_config

EXAMPLE_CONFIG = Path(__file__).resolve().parents[2] / "deploy" / "config.example.yml"


@dataclass(frozen=True)
class Synthesized:
    config: DeployConfig
    template: dict
    template_path: Path
    assertions: object  # aws_cdk.assertions.Template
    summary: str  # what `make synth` prints

    def resources(self, kind: str) -> dict[str, dict]:
        return {lid: res for lid, res in self.template["Resources"].items() if res["Type"] == kind}


def synthesize(config: DeployConfig, outdir: Path) -> Synthesized:
    require_node()
    from aws_cdk import assertions

    from deploy.app import build_app, summary

    app, stack = build_app(config, outdir=str(outdir))
    assembly = app.synth()
    artifact = assembly.get_stack_by_name(stack.stack_name)
    template_path = Path(artifact.template_full_path)
    return Synthesized(
        config=config,
        template=json.loads(template_path.read_text()),
        template_path=template_path,
        assertions=assertions.Template.from_json(json.loads(template_path.read_text())),
        summary=summary(assembly),
    )


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory) -> Synthesized:
    return synthesize(load_config(EXAMPLE_CONFIG), tmp_path_factory.mktemp("cdk.out"))


@pytest.fixture(scope="session")
def variant_synthesized(tmp_path_factory) -> Synthesized:
    return synthesize(parse_config(VARIANT_SETTINGS), tmp_path_factory.mktemp("cdk.out"))
