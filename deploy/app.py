"""The CDK app: `python -m deploy.app` synthesizes into cdk.out (or CDK_OUTDIR) and
prints each stack with its resource counts.

The deployment config comes from the CDK context key `config` (`cdk -c config=...`),
else the environment variable LAKEHOUSE_DEPLOY_CONFIG, else deploy/config.example.yml.
Account and region come from the CDK CLI's environment (CDK_DEFAULT_ACCOUNT/REGION);
without them the templates stay environment-agnostic, which is how the tests synthesize.
"""
from __future__ import annotations

import json
import os
import sys
from collections import Counter
from pathlib import Path

import aws_cdk as cdk

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # `cdk` runs this file as a script from deploy/
    sys.path.insert(0, str(REPO_ROOT))

from deploy.config import DeployConfig, deployed_contracts, load_config  # noqa: E402
from deploy.stacks.lakehouse import LakehouseStack  # noqa: E402

DEFAULT_CONFIG = REPO_ROOT / "deploy" / "config.example.yml"
# CDK feature flags this app relies on (https://docs.aws.amazon.com/cdk/v2/guide/featureflags.html):
# server access logs delivered under a bucket policy instead of the legacy ACL, and
# custom resources that use the SDK of their Lambda runtime instead of downloading one.
FEATURE_FLAGS = {
    "@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy": True,
    "@aws-cdk/customresources:installLatestAwsSdkDefault": False,
}


def build_app(config: DeployConfig, outdir: str | None = None) -> tuple[cdk.App, LakehouseStack]:
    contracts = deployed_contracts(config, lambda line: print(line, file=sys.stderr))
    # The CDK CLI sets CDK_OUTDIR; run directly, the app writes cdk.out/ in the repository.
    outdir = outdir or os.environ.get("CDK_OUTDIR") or str(REPO_ROOT / "cdk.out")
    app = cdk.App(context=FEATURE_FLAGS, outdir=outdir)
    account, region = os.environ.get("CDK_DEFAULT_ACCOUNT"), os.environ.get("CDK_DEFAULT_REGION")
    env = cdk.Environment(account=account, region=region) if account and region else None
    stack = LakehouseStack(
        app,
        config.prefix,
        config=config,
        contracts=contracts,
        build_dir=Path(app.outdir) / "build",
        env=env,
        description="DynamoDB CDC lakehouse: Kinesis, Glue streaming into raw Hudi, dbt on Athena, alarms",
    )
    return app, stack


def resource_counts(template: dict) -> Counter[str]:
    return Counter(resource["Type"] for resource in template.get("Resources", {}).values())


def summary(assembly: cdk.cx_api.CloudAssembly) -> str:
    lines = []
    for stack in assembly.stacks:
        counts = resource_counts(json.loads(Path(stack.template_full_path).read_text()))
        lines.append(f"{stack.stack_name}: {sum(counts.values())} resources ({stack.template_full_path})")
        lines += [f"  {count:3d}  {kind}" for kind, count in sorted(counts.items())]
    return "\n".join(lines)


def main() -> None:
    probe = cdk.App()
    config_path = probe.node.try_get_context("config") or os.environ.get("LAKEHOUSE_DEPLOY_CONFIG") or DEFAULT_CONFIG
    app, _ = build_app(load_config(config_path))
    assembly = app.synth()
    print(summary(assembly), file=sys.stderr)


if __name__ == "__main__":
    main()
