"""DynamoDB change records as AWS emits them, and the test contracts they are decoded with.

`change_record` writes one record in either shape a stream delivers (DynamoDB Streams or
Kinesis Data Streams for DynamoDB), created at T0_SECONDS unless told otherwise. CONTRACTS
are contract documents (YAML's content as dicts) for the tables those records belong to.
"""
from __future__ import annotations

from typing import Any

REGION = "eu-west-1"
T0_SECONDS = 1_700_000_000  # 2023-11-14T22:13:20Z

# Test contracts, independent of the packaged ones: customers as in the reference
# article, orders with every DynamoDB type.
CONTRACTS: dict[str, dict[str, Any]] = {
    "customers": {
        "table": "customers",
        "raw_table": "customers",
        "key": {"partition_key": "id", "sort_key": "custName"},
        "attributes": {
            "id": {"type": "S"},
            "custName": {"type": "S", "pii": True},
            "email": {"type": "S", "pii": True},
            "registrationDate": {"type": "S", "cast": "timestamp"},
        },
        "partitioning": {"column": "id_suffix", "expression": "substring(id, -1, 1)"},
    },
    "orders": {
        "table": "orders",
        "raw_table": "orders",
        "key": {"partition_key": "customerId", "sort_key": "orderId"},
        "attributes": {
            "customerId": {"type": "S"},
            "orderId": {"type": "S"},
            "amount": {"type": "N", "cast": "decimal(38,2)"},
            "isGift": {"type": "BOOL"},
            "giftMessage": {"type": "S"},
            "tags": {"type": "SS"},
            "packageWeightsKg": {"type": "NS"},
            "receiptDigest": {"type": "B"},
            "attachmentChecksums": {"type": "BS"},
            "lineItems": {
                "type": "L",
                "items": {
                    "type": "M",
                    "fields": {"sku": {"type": "S"}, "quantity": {"type": "N"}, "unitPrice": {"type": "N"}},
                },
            },
            "shippingAddress": {"type": "M", "fields": {"city": {"type": "S"}, "postcode": {"type": "S"}}},
        },
        "partitioning": {"column": "customer_suffix", "expression": "substring(customer_id, -1, 1)"},
    },
}


def change_record(
    table: str,
    event_name: str,
    keys: dict[str, Any],
    new_image: dict[str, Any] | None = None,
    old_image: dict[str, Any] | None = None,
    *,
    fmt: str = "kinesis",
    event_id: str = "event-1",
    created: float | int | None = None,
    precision: str | None = None,
    sequence_number: str | None = None,
    ttl: bool = False,
) -> dict[str, Any]:
    """A DynamoDB change record as AWS emits it.

    fmt="streams": DynamoDB Streams (epoch seconds, SequenceNumber, table in the ARN).
    fmt="kinesis": Kinesis Data Streams for DynamoDB (epoch ms unless `precision`
    says MICROSECOND, tableName, no SequenceNumber unless given).
    """
    stream: dict[str, Any] = {"Keys": keys, "SizeBytes": 100}
    if new_image is not None:
        stream["NewImage"] = new_image
    if old_image is not None:
        stream["OldImage"] = old_image
    identity = {"type": "Service", "principalId": "dynamodb.amazonaws.com"} if ttl else None
    if fmt == "streams":
        stream["ApproximateCreationDateTime"] = T0_SECONDS if created is None else created
        stream["SequenceNumber"] = sequence_number or "100000000000000000001"
        stream["StreamViewType"] = "NEW_AND_OLD_IMAGES"
        record: dict[str, Any] = {
            "eventID": event_id,
            "eventName": event_name,
            "eventVersion": "1.1",
            "eventSource": "aws:dynamodb",
            "awsRegion": REGION,
            "dynamodb": stream,
            "eventSourceARN": f"arn:aws:dynamodb:{REGION}:123456789012:table/{table}/stream/2023-11-01T00:00:00.000",
        }
        if identity:
            record["userIdentity"] = identity
        return record
    stream["ApproximateCreationDateTime"] = T0_SECONDS * 1000 if created is None else created
    if precision is not None:
        stream["ApproximateCreationDateTimePrecision"] = precision
    if sequence_number is not None:
        stream["SequenceNumber"] = sequence_number
    return {
        "awsRegion": REGION,
        "eventID": event_id,
        "eventName": event_name,
        "userIdentity": identity,
        "recordFormat": "application/json",
        "tableName": table,
        "dynamodb": stream,
        "eventSource": "aws:dynamodb",
    }
