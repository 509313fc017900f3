"""The raw table of a contract as the local sink writes it, in Arrow terms.

The schema comes from streaming.contracts.spark_schema (the one definition the streaming
job writes with), so raw fixtures carry exactly the sink's columns. `_batch_id` is not
in the files: it is the hive partition folder `_batch_id=<n>`.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema

from streaming.contracts.model import TableContract
from streaming.contracts.spark_schema import raw_schema

PARTITION_FOLDER_COLUMN = "_batch_id"


def arrow_raw_schema(contract: TableContract) -> pa.Schema:
    """Columns of the raw Parquet files of the contract's raw table (timestamps: µs, UTC)."""
    schema = to_arrow_schema(raw_schema(contract))
    return schema.remove(schema.get_field_index(PARTITION_FOLDER_COLUMN))
