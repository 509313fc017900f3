"""The AWS CDK runs its library in Node.js: synthesis tests skip, saying why, without it."""
from __future__ import annotations

import os
import shutil

import pytest


def require_node() -> None:
    if shutil.which("node") is None:
        pytest.skip("Node.js is not on PATH: the AWS CDK needs it to synthesize (install nodejs, then make test)")
    # Node.js 20 (this machine image's) is past its end of life and jsii says so in a
    # banner on every start; docs/deploy-aws.md states it, the test log need not repeat it.
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
