"""Inferring a table contract from items: what `lakehouse contract infer` proposes.

Pure Python (no Spark): the readers in streaming/io/item_samples.py feed an `ItemSample`
with item images (from an export, landing change records or a sample file), and
`contract.infer_contract` decides, in this order:

1. **keys**: the partition and sort key, from the records' `Keys` (or as given); names
   like `pk`/`sk` tell which is which, else the one with fewer distinct values is the
   partition key, since many items share a partition.
2. **entities**: a discriminator attribute on every item named like one (`type`,
   `entityType`, `_et`, `__typename`, ...), else the keys' prefixes and shapes on the
   sort key, the partition key or both (`USER#...`, a whole sort key several items share
   such as `PROFILE`), a kind's items split further by a type-named attribute most of
   them hold, else any other string attribute on every item whose values' items each hold
   an attribute no other value's items hold. Each kind gets a match rule the loader's
   overlap check accepts, and a name from what identifies it (kinds.py); a kind with
   fewer than `min_entity_items` items, or one no rule can tell apart from another
   (`ORDER#1` and `ORDER#1#LINE#2`), stays unrouted, with its count and an example key.
3. **attributes** per entity: the type seen, the share of items holding it, and
   conflicts; an attribute seen with two types, or only as NULL, is left out of the
   proposal (it lands in `_extra_attributes`, where no value is quarantined).
4. **casts**, only when every sampled value fits; **PII** from names and value shapes,
   always marked as a proposal; **columns** safe on DuckDB and Athena by names.py.

render.py writes the result as a contract file with a comment on each decision, and
as the report. One module per step: sample.py, keys.py, kinds.py, attributes.py; the
whole in contract.py.
"""
