"""Layer 1, table contracts: what a DynamoDB table's raw tables look like (model.py, plain
dataclasses), how a YAML contract becomes one and is validated (loader.py), the raw
tables' Spark schemas (spark_schema.py, the only module here that imports pyspark), the
rules its names follow (names.py) and how a contract may change under tables already
written (evolution.py). The YAML contracts themselves sit beside them. Imports nothing
else of `streaming`."""
