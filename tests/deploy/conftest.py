"""One synthesis of the CDK app per test session, shared by every infrastructure test.

The CDK runs its library in Node.js. Without `node` on PATH these tests skip and say
why; the machine image and CI have Node.js 20, so `make test` runs them there.
"""
from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from deploy.config import DeployConfig, load_config

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


def require_node() -> None:
    if shutil.which("node") is None:
        pytest.skip("Node.js is not on PATH: the AWS CDK needs it to synthesize (install nodejs, then make test)")
    # Node.js 20 (this machine image's) is past its end of life and jsii says so in a
    # banner on every start; the README states it, the test log need not repeat it.
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory) -> Synthesized:
    require_node()
    from aws_cdk import assertions

    from deploy.app import build_app, summary

    config = load_config(EXAMPLE_CONFIG)
    app, stack = build_app(config, outdir=str(tmp_path_factory.mktemp("cdk.out")))
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
