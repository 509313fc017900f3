"""A short text summary of the marts in the local DuckDB file, for demo output."""

from __future__ import annotations

from pathlib import Path

import duckdb

from streaming.io.layout import DataLayout

MARTS_SCHEMA = "lakehouse_marts"
# Customers whose versions the summary shows: those with the most versions, so a demo
# shows changes, a delete and its end.
HISTORY_CUSTOMERS_SHOWN = 2
MARTS = (
    "dim_customers",
    "dim_customers_history",
    "fct_orders",
    "fct_order_lines",
    "agg_daily_customer_activity",
    "agg_daily_revenue_by_status",
)
# The mart over the single-table sample `app`; summarized when the dbt project builds it.
INVOICED_MART = "agg_daily_invoiced_amount_by_tenant"


def _table(headers: list[str], rows: list[tuple]) -> str:
    cells = [[str(value) for value in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in cells]
    return "\n".join(lines)


def summarize_marts(data_dir: Path | str) -> str:
    """Row counts of every mart, revenue per status, customer activity per day, the
    versions of a few customers, the app's invoiced amounts (when that mart is built) and
    how current each mart is."""
    database = DataLayout(Path(data_dir)).dbt_database
    with duckdb.connect(str(database), read_only=True) as con:
        built = {name for (name,) in con.execute(
            "select table_name from information_schema.tables where table_schema = ?", [MARTS_SCHEMA]).fetchall()}
        marts = [*MARTS, *([INVOICED_MART] if INVOICED_MART in built else [])]
        counts = [
            (mart, con.sql(f"select count(*) from {MARTS_SCHEMA}.{mart}").fetchall()[0][0])
            for mart in marts
        ]
        invoiced = con.sql(
            f"""
            select
                currency, count(distinct tenant_id), count(distinct invoice_date), sum(invoice_count),
                sum(invoiced_amount)
            from {MARTS_SCHEMA}.{INVOICED_MART}
            group by currency
            order by currency
            """
        ).fetchall() if INVOICED_MART in built else None
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
            select activity_date, registrations, profile_updates, deletes, ttl_deletes, net_customer_change
            from {MARTS_SCHEMA}.agg_daily_customer_activity
            order by activity_date
            """
        ).fetchall()
        history = con.sql(
            f"""
            with shown as (
                select customer_key
                from {MARTS_SCHEMA}.dim_customers_history
                group by customer_key
                order by count(*) desc, bool_or(is_deleted) desc, customer_key
                limit {HISTORY_CUSTOMERS_SHOWN}
            )
            select
                customer_id, version_number, version_event_name,
                strftime(valid_from, '%Y-%m-%d %H:%M:%S'), strftime(valid_to, '%Y-%m-%d %H:%M:%S'),
                is_current, is_deleted
            from {MARTS_SCHEMA}.dim_customers_history
            where customer_key in (select customer_key from shown)
            order by customer_key, version_number
            """
        ).fetchall()
        freshness = con.sql(
            f"""
            select
                curated_table,
                coalesce(strftime(newest_ingested_at, '%Y-%m-%d %H:%M:%S'), '-'),
                strftime(newest_event_at, '%Y-%m-%d %H:%M:%S'),
                strftime(built_at, '%Y-%m-%d %H:%M:%S')
            from {MARTS_SCHEMA}.mart_freshness
            order by curated_table
            """
        ).fetchall()
    return "\n\n".join(
        [
            _table(["mart", "rows"], counts),
            _table(["status", "currency", "orders", "amount"], revenue),
            "agg_daily_customer_activity\n"
            + _table(["day", "registrations", "updates", "deletes", "ttl_deletes", "net"], activity),
            f"dim_customers_history (the {HISTORY_CUSTOMERS_SHOWN} customers with the most versions)\n"
            + _table(["customer_id", "version", "event", "valid_from", "valid_to", "current", "deleted"], history),
            *([f"{INVOICED_MART} (the app table's invoices, all days, per currency)\n"
               + _table(["currency", "tenants", "days", "invoices", "amount"], invoiced)] if invoiced is not None else []),
            "mart_freshness (the first query when numbers look stale)\n"
            + _table(["table", "newest ingested", "newest event", "built at"], freshness),
        ]
    )
