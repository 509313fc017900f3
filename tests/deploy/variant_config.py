"""The deployment settings of the stack's second synthesis, which takes every branch the
example config does not: a provisioned stream, an existing PII secret, named analysts,
an alarm e-mail, an optional job parameter and Lake Formation grants."""
from __future__ import annotations

SECRET = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:lakehouse/pii-AbCdEf"
ANALYST = "arn:aws:iam::123456789012:role/data-analysts"
VARIANT_SETTINGS = {
    "dynamodb_tables": ["orders"],
    "prefix": "shop",
    "stream_on_demand": False,
    "stream_shard_count": 3,
    "pii_secret_arn": SECRET,
    "analyst_principal_arns": [ANALYST],
    "alarm_email": "data-oncall@example.com",
    "job_arguments": {"starting_position": "latest", "sync_mode": "glue"},
    "lake_formation_grants": True,
}
