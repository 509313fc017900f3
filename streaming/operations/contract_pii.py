"""Generates macros/pii/contract_columns.sql from the table contracts
(streaming/contracts/*.yml): per raw table, its attribute columns and the ones marked
`pii: true`. dbt cannot read the contracts itself; the marts ask the generated macro,
so flagging an attribute PII protects it in every mart without editing SQL.
tests/dbt/test_dbt_pii.py fails when the file and the contracts disagree.

Regenerated after editing a contract by `lakehouse scaffold --table <table>` (with the
table's models), or on its own by `python -m streaming.operations.contract_pii`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from streaming.contracts.loader import load_contracts, with_sample_contracts
from streaming.contracts.model import AttributeSpec, TableContract

MACRO_FILE = Path(__file__).resolve().parents[2] / "macros" / "pii" / "contract_columns.sql"


def _holds_pii(spec: AttributeSpec) -> bool:
    """An attribute is PII when it or anything nested in it is flagged: its raw column
    carries the nested value."""
    nested = ([spec.items] if spec.items is not None else []) + list(spec.fields)
    return spec.pii or any(_holds_pii(child) for child in nested)


def contract_columns(contracts: Mapping[str, TableContract]) -> dict[str, dict[str, list[str]]]:
    """raw table -> {"columns": attribute columns, "pii": the PII ones}, in contract order."""
    return {
        contract.raw_table: {
            "columns": [spec.column for spec in contract.attributes],
            "pii": [spec.column for spec in contract.attributes if _holds_pii(spec)],
        }
        for contract in sorted(contracts.values(), key=lambda c: c.raw_table)
    }


def render_macro(contracts: Mapping[str, TableContract]) -> str:
    # JSON is also a valid Jinja literal: lists, dicts and double-quoted strings.
    tables = json.dumps(contract_columns(contracts), indent=2)
    return (
        "{# Generated from streaming/contracts/*.yml by `lakehouse scaffold` (or\n"
        "   `python -m streaming.operations.contract_pii`);\n"
        "   do not edit (tests/dbt/test_dbt_pii.py checks it matches the contracts). #}\n"
        "{% macro contract_columns() %}\n"
        f"  {{{{ return({tables}) }}}}\n"
        "{% endmacro %}\n"
    )


def main() -> None:
    MACRO_FILE.write_text(render_macro(with_sample_contracts(load_contracts())), encoding="utf-8")
    print(f"wrote {MACRO_FILE}")


if __name__ == "__main__":
    main()
