"""Layer 1, table contracts: what a DynamoDB table's raw tables look like (model.py: the
contract, its loading and validation, the raw schemas), the rules its names follow
(names.py) and how a contract may change under tables already written (evolution.py). The YAML contracts themselves sit beside them.
Imports nothing else of `streaming`."""
