"""The lakehouse stack's parts, one module per concern: storage, the catalog (Glue
databases, Athena workgroups), the change stream, the streaming job, its keeper,
scheduled dbt, analyst access, Lake Formation grants and alarms. Each is a function
`add_<part>(stack, config, <what it uses>)` that creates its resources and returns what
later parts use (a frozen dataclass when that is several things), so every dependency
between parts is an argument.

Why functions that create their resources directly in the stack, not `Construct`
subclasses that own them: a construct's children get its id in their path, and CDK
derives from that path every logical id (`ChangeStream` would become
`StreamChangeStream...`), the `aws:cdk:path` metadata the CDK CLI adds, and the ids it
derives for resources it adds itself (a Lambda permission of an EventBridge target). A
changed logical id makes CloudFormation replace the resource: a new, empty bucket, key
or stream. Overriding each id back (`override_logical_id`) would keep the ids but not
the metadata or the derived ids, and a `Construct` kept empty, with its resources in the
stack, would read as owning them while `Tags.of(part)` and aspects applied to it reached
nothing. So a part is a function and its resources keep their paths: the template stays
the same (tests/deploy/test_template_unchanged.py).
"""
from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]
