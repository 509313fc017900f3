"""A short text summary of the marts in the local DuckDB file, for demo output."""

from __future__ import annotations

from pathlib import Path

import duckdb

MARTS_SCHEMA = "lakehouse_marts"
MARTS = (
    "dim_customers",
    "fct_orders",
    "fct_order_lines",
    "agg_daily_customer_activity",
    "agg_daily_revenue_by_status",
)


def _table(headers: list[str], rows: list[tuple]) -> str:
    cells = [[str(value) for value in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in cells]
    return "\n".join(lines)


def summarize_marts(data_dir: Path | str) -> str:
    """Row counts of every mart plus revenue per status and customer activity totals."""
    database = Path(data_dir) / "lakehouse.duckdb"
    with duckdb.connect(str(database), read_only=True) as con:
        counts = [
            (mart, con.sql(f"select count(*) from {MARTS_SCHEMA}.{mart}").fetchall()[0][0])
            for mart in MARTS
        ]
        revenue = con.sql(
            f"""
            select status, currency, sum(order_count), sum(total_amount)
            from {MARTS_SCHEMA}.agg_daily_revenue_by_status
            group by status, currency
            order by status, currency
            """
        ).fetchall()
        activity = con.sql(
            f"""
            select sum(registrations), sum(profile_updates), sum(deletes), sum(ttl_deletes)
            from {MARTS_SCHEMA}.agg_daily_customer_activity
            """
        ).fetchall()
    return "\n\n".join(
        [
            _table(["mart", "rows"], counts),
            _table(["status", "currency", "orders", "amount"], revenue),
            _table(["registrations", "updates", "deletes", "ttl_deletes"], activity),
        ]
    )
