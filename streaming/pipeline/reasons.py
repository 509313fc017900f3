"""The quarantine's reason vocabulary: every reason a record can be quarantined with.

One place for the landing reader (what the bytes of a landing object hold), the decoder
(what a record says), the sample generator and the fuzz drill (which expect them), and
`lakehouse quarantine` (which selects by them). A reason with detail is `<kind>:<detail>`;
`lakehouse quarantine show --reason missing_key` matches every `missing_key:...`.
docs/architecture.md ("Quarantine rows") explains each.
"""
from __future__ import annotations

# Found by the landing reader while splitting an object into records.
INVALID_JSON = "invalid_json"
TRAILING_GARBAGE = "trailing_garbage"
DUPLICATE_KEY = "duplicate_key"
RECORD_TOO_LARGE = "record_too_large"
UNREADABLE_FILE = "unreadable_file"
UNSUPPORTED_COMPRESSION = "unsupported_compression"
# Found by the decoder, in this order of precedence (the first that applies is kept).
INVALID_UTF8 = "invalid_utf8"
LONE_SURROGATE = "lone_surrogate"
NO_TABLE_NAME = "no_table_name"
UNKNOWN_TABLE = "unknown_table"
UNKNOWN_EVENT_NAME = "unknown_event_name"
MISSING_EVENT_TIME = "missing_event_time"
INVALID_SEQUENCE_NUMBER = "invalid_sequence_number"
MISSING_NEW_IMAGE = "missing_new_image"
MISSING_KEY = "missing_key"
AMBIGUOUS_KEY = "ambiguous_key"
TYPE_MISMATCH = "type_mismatch"
INVALID_NUMBER = "invalid_number"


# What to do about a reason that neither a contract change nor a replay resolves; `lakehouse
# quarantine summary` and `show` print it under the rows.
WHAT_TO_DO = {
    AMBIGUOUS_KEY: "a key value holds `,<key column>:`, the separator of Hudi's record key for a key of several "
                   "attributes (`<column>:<value>,<column>:<value>`), so two different items could share one "
                   "record key and overwrite each other; such a key needs a raw table keyed otherwise",
    LONE_SURROGATE: "a string in the record holds a JSON escape of a lone UTF-16 surrogate (`\\ud800` without its "
                    "pair), which no UTF-8 text can hold and DynamoDB never stores, so whatever wrote the record "
                    "altered the item's text; land a corrected record from its source",
    NO_TABLE_NAME: "the record names no table: it has no tableName and no table ARN in eventSourceARN, as "
                   "DynamoDB Streams GetRecords output; land such records with the eventSourceARN of the stream "
                   "they were read from (docs/architecture.md, \"Accepted change records\")",
}


def missing_key(attribute: str) -> str:
    return f"{MISSING_KEY}:{attribute}"


def ambiguous_key(attribute: str) -> str:
    return f"{AMBIGUOUS_KEY}:{attribute}"


def type_mismatch(path: str, expected_type: str) -> str:
    return f"{TYPE_MISMATCH}:{path}:{expected_type}"


def invalid_number(path: str) -> str:
    return f"{INVALID_NUMBER}:{path}"
