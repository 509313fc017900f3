"""The Athena key table, against moto's S3 and Glue: the key lands in one object under
the staging prefix and a Glue text table points at it; nothing else holds the key."""

from __future__ import annotations

import json

import boto3
import pytest

from lakehouse_dbt.athena_pii_key import publish_key
from lakehouse_dbt.pii_key import PiiKeyError

KEY = "it's-an-athena-key-" + "0123456789abcdef" * 2
REGION = "eu-west-1"


@pytest.fixture
def aws(mocked_aws):
    s3 = boto3.client("s3", region_name=REGION)
    glue = boto3.client("glue", region_name=REGION)
    s3.create_bucket(Bucket="curated", CreateBucketConfiguration={"LocationConstraint": REGION})
    glue.create_database(DatabaseInput={"Name": "lakehouse_staging"})
    yield s3, glue


def test_the_key_table_is_one_text_object_under_the_staging_prefix(aws) -> None:
    s3, glue = aws
    location = publish_key(KEY, s3_data_dir="s3://curated/dbt/", database="lakehouse_staging", s3=s3, glue=glue)
    assert location == "s3://curated/dbt/lakehouse_staging/pii_key/"
    objects = s3.list_objects_v2(Bucket="curated")["Contents"]
    assert [o["Key"] for o in objects] == ["dbt/lakehouse_staging/pii_key/pii_key.txt"]
    assert s3.get_object(Bucket="curated", Key=objects[0]["Key"])["Body"].read() == KEY.encode()
    table = glue.get_table(DatabaseName="lakehouse_staging", Name="pii_key")["Table"]
    descriptor = table["StorageDescriptor"]
    assert descriptor["Columns"] == [{"Name": "pii_key", "Type": "string"}]
    assert descriptor["Location"] == location
    assert descriptor["SerdeInfo"]["SerializationLibrary"] == "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe"
    assert KEY not in json.dumps(table, default=str)


def test_publishing_again_repoints_the_table_and_replaces_the_key(aws) -> None:
    s3, glue = aws
    publish_key(KEY, s3_data_dir="s3://curated/dbt/", database="lakehouse_staging", s3=s3, glue=glue)
    new_key = KEY.upper()
    location = publish_key(new_key, s3_data_dir="s3://curated/other/", database="lakehouse_staging", s3=s3, glue=glue)
    table = glue.get_table(DatabaseName="lakehouse_staging", Name="pii_key")["Table"]
    assert table["StorageDescriptor"]["Location"] == location == "s3://curated/other/lakehouse_staging/pii_key/"
    body = s3.get_object(Bucket="curated", Key="other/lakehouse_staging/pii_key/pii_key.txt")["Body"].read()
    assert body == new_key.encode()


@pytest.mark.parametrize(("key", "problem"), [("short'key", "needs at least 32"), ("a" * 40 + "\nb", "control character")])
def test_an_unusable_key_is_refused_before_anything_is_written(aws, key: str, problem: str) -> None:
    s3, glue = aws
    with pytest.raises(PiiKeyError, match=problem):
        publish_key(key, s3_data_dir="s3://curated/dbt/", database="lakehouse_staging", s3=s3, glue=glue)
    assert "Contents" not in s3.list_objects_v2(Bucket="curated")
    assert glue.get_tables(DatabaseName="lakehouse_staging")["TableList"] == []
