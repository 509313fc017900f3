"""The PII key for the Athena target: Trino has no session variables, so
athena__pseudonymize (macros/pii/pseudonymize.sql) reads the key from a one-row
table, `<schema>_staging.pii_key` (column `pii_key`). This module writes that table
from env LAKEHOUSE_PII_KEY (which CodeBuild takes from Secrets Manager). It writes the
S3 object and the Glue table through their APIs, so no SQL text and no Athena query
history ever holds the key.

The object lies under the curated bucket's staging prefix: only the dbt role may read
it, as only it may read the staging schema's clear PII (deploy/stacks/lakehouse.py).
The bucket encrypts it with the stack's KMS key.

Run before the scheduled build: `python -m lakehouse_dbt.athena_pii_key && dbt build`.
"""

from __future__ import annotations

import os
from typing import Any

from lakehouse_dbt.pii_key import KEY_ENV, validated_key

TABLE = "pii_key"
OBJECT_NAME = "pii_key.txt"
# A text file of one line is one row of one string column.
_TEXT_TABLE = {
    "InputFormat": "org.apache.hadoop.mapred.TextInputFormat",
    "OutputFormat": "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
    "SerdeInfo": {"SerializationLibrary": "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe"},
}


def _split_s3_uri(uri: str) -> tuple[str, str]:
    if not uri.startswith("s3://"):
        raise ValueError(f"not an s3:// location: {uri}")
    bucket, _, prefix = uri[len("s3://"):].partition("/")
    return bucket, prefix.strip("/")


def publish_key(key_text: str, *, s3_data_dir: str, database: str, s3: Any, glue: Any) -> str:
    """Writes the key to `<s3_data_dir>/<database>/pii_key/pii_key.txt` and creates or
    repoints the Glue table `<database>.pii_key` at it; returns the table's location."""
    key = validated_key(key_text, f"env {KEY_ENV}")
    bucket, prefix = _split_s3_uri(s3_data_dir)
    folder = "/".join(part for part in (prefix, database, TABLE) if part)
    s3.put_object(Bucket=bucket, Key=f"{folder}/{OBJECT_NAME}", Body=key)
    location = f"s3://{bucket}/{folder}/"
    table_input = {
        "Name": TABLE,
        "TableType": "EXTERNAL_TABLE",
        "Description": "Key of the marts' PII pseudonyms (lakehouse_dbt/athena_pii_key.py); dbt role only",
        "StorageDescriptor": {"Columns": [{"Name": "pii_key", "Type": "string"}], "Location": location, **_TEXT_TABLE},
    }
    try:
        glue.create_table(DatabaseName=database, TableInput=table_input)
    except glue.exceptions.AlreadyExistsException:
        glue.update_table(DatabaseName=database, TableInput=table_input)
    return location


def main() -> None:
    import boto3

    if KEY_ENV not in os.environ:
        raise SystemExit(f"env {KEY_ENV} is not set: the scheduled build takes it from Secrets Manager")
    schema = os.environ.get("LAKEHOUSE_ATHENA_SCHEMA", "lakehouse")
    region = os.environ.get("AWS_REGION")
    location = publish_key(
        os.environ[KEY_ENV],
        s3_data_dir=os.environ.get("LAKEHOUSE_ATHENA_S3_DATA_DIR", "s3://lakehouse-curated/dbt/"),
        database=f"{schema}_staging",
        s3=boto3.client("s3", region_name=region),
        glue=boto3.client("glue", region_name=region),
    )
    print(f"PII key table {schema}_staging.{TABLE} at {location}")


if __name__ == "__main__":
    main()
