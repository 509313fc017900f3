"""Key tuples that a plain join of their parts mixes up, and the oracle of
macros/keys/composite_key.sql, shared by the DuckDB build (test_dbt_composite_keys.py)
and the Athena compile (test_dbt_athena.py)."""

from __future__ import annotations

# Pairs of different keys that one text would stand for if the parts were only
# joined: by `#` (the former order_key), by `|`, and by `|` with `|` escaped but not
# the escape character (a backslash next to the separator).
ORDER_KEYS = (
    ("a#b", "c"), ("a", "b#c"),
    ("x|y", "z"), ("x", "y|z"),
    ("\\", "|p"), ("|\\", "p"),
)
CUSTOMER_KEYS = (("a|b", "c"), ("a", "b|c"), ("\\", "|p"), ("|\\", "p"))


def composite_key(*parts: str) -> str:
    """The key text composite_key() builds: each part with `\\` and `|` escaped by a
    backslash, joined by `|`."""
    return "|".join(part.replace("\\", "\\\\").replace("|", "\\|") for part in parts)
