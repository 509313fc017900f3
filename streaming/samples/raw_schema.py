"""The raw table of a contract as the local sink writes it, in Arrow terms.

The schema comes from streaming.contracts.model (the one definition the streaming job
writes with), so raw fixtures carry exactly the sink's columns. `_batch_id` is not
in the files: it is the hive partition folder `_batch_id=<n>`.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema

from streaming.contracts.model import TableContract, load_contracts
from streaming.contracts.model import raw_schema as spark_raw_schema

PARTITION_FOLDER_COLUMN = "_batch_id"


def load_contract(raw_table: str) -> TableContract:
    """The contract of raw table `raw_table` (a plain table, an entity or an unrouted table)."""
    contracts = load_contracts()
    if raw_table not in contracts:
        raise KeyError(f"no table contract has raw_table {raw_table!r}; known: {sorted(contracts)}")
    return contracts[raw_table]


def raw_schema(raw_table: str) -> pa.Schema:
    """Columns of the raw Parquet files of `raw_table` (timestamps: µs, UTC)."""
    schema = to_arrow_schema(spark_raw_schema(load_contract(raw_table)))
    return schema.remove(schema.get_field_index(PARTITION_FOLDER_COLUMN))
