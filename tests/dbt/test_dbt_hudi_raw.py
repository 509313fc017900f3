"""Raw-from-Hudi mode: real Hudi tables (written by Spark + Hudi, from the hudi-rs
test data) are read with hudi-rs into DuckDB, and the dbt raw views sit on them."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from dbt_scenario import CUSTOMERS, INGESTED, ORDERS
from hudi_samples import SAMPLES, sample_table

from lakehouse_dbt.hudi_raw import load_hudi_tables
from streaming.runtime.dbt_runner import run_dbt
from streaming.samples.raw_fixtures import write_raw_batch

# Snapshot row counts documented with the samples (hudi-samples/README.md).
SNAPSHOT_ROWS = {
    "cow_v6_complexkeygen_hivestyle": 4,
    "cow_v6_nonpartitioned": 4,
    "cow_v6_empty": 0,
    "cow_v8_complexkeygen_hivestyle": 4,
    "mor_avro_v6_trips_8i1u": 8,
    "mor_avro_v6_trips_8i3d": 5,
}


@pytest.fixture(scope="module")
def hudi_tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    if not SAMPLES.is_dir():
        pytest.skip(f"Hudi sample tables not found at {SAMPLES}")
    root = tmp_path_factory.mktemp("hudi_samples")
    return {name: str(sample_table(name, root / name)) for name in SNAPSHOT_ROWS}


def test_hudi_snapshots_load_with_deletes_and_updates_applied(hudi_tables, tmp_path: Path) -> None:
    loaded = load_hudi_tables(tmp_path, hudi_tables)
    assert loaded.rows == SNAPSHOT_ROWS
    with duckdb.connect(str(tmp_path / "lakehouse.duckdb"), read_only=True) as con:
        keys = con.sql('select count(distinct uuid) from raw_hudi."mor_avro_v6_trips_8i1u"').fetchall()
        # 8 inserts and 1 update of one of them: the update replaced a row, not added one.
        assert keys == [(8,)]
        meta = con.sql(
            "select column_name from information_schema.columns "
            "where table_schema = 'raw_hudi' and table_name = 'cow_v6_nonpartitioned'"
        ).fetchall()
    assert ("_hoodie_record_key",) in meta


def test_raw_views_read_from_hudi_tables_in_hudi_mode(tmp_path: Path) -> None:
    """Runs the raw views over raw_hudi tables holding raw-table columns (what the
    Hudi sink writes, here loaded from a Parquet change log as hudi-rs cannot write)."""
    parquet_dir = tmp_path / "parquet"
    write_raw_batch(parquet_dir, "customers", 0, CUSTOMERS[0], INGESTED[0])
    write_raw_batch(parquet_dir, "orders", 0, ORDERS[0], INGESTED[0])
    with duckdb.connect(str(tmp_path / "lakehouse.duckdb")) as con:
        con.sql("create schema raw_hudi")
        for table in ("customers_changes", "orders_changes"):
            con.sql(
                f"create table raw_hudi.{table} as select * from read_parquet("
                f"'{parquet_dir}/raw/{table}/*/*/*.parquet', hive_partitioning = true)"
            )
    result = run_dbt(
        ["run", "--select", "stg_dynamodb__customers", "--vars", "{raw_format: hudi}"], tmp_path
    )
    assert result.success, result.exception
    with duckdb.connect(str(tmp_path / "lakehouse.duckdb"), read_only=True) as con:
        ids = con.sql("select id from lakehouse_staging.stg_dynamodb__customers order by id").fetchall()
    assert ids == [("c1",), ("c2",), ("c3",), ("c4",)]


def _rows_loaded(data_dir: Path) -> dict[str, int]:
    with duckdb.connect(str(data_dir / "lakehouse.duckdb"), read_only=True) as con:
        names = [name for (name,) in con.sql("select table_name from information_schema.tables "
                                             "where table_schema = 'raw_hudi' and table_name not like '\\_%' "
                                             "escape '\\'").fetchall()]
        return {name: con.sql(f'select count(*) from raw_hudi."{name}"').fetchall()[0][0] for name in names}


def test_a_load_that_fails_part_way_keeps_the_previous_load(hudi_tables, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from lakehouse_dbt import hudi_raw

    assert load_hudi_tables(tmp_path, hudi_tables).rows == SNAPSHOT_ROWS
    read = hudi_raw.read_hudi_snapshot

    def disk_fails_on_the_last(base_uri: str, as_of: str | None = None):
        if base_uri == hudi_tables["mor_avro_v6_trips_8i3d"]:
            raise OSError(28, "No space left on device", base_uri)
        return read(base_uri, as_of)

    monkeypatch.setattr(hudi_raw, "read_hudi_snapshot", disk_fails_on_the_last)
    with pytest.raises(OSError):
        load_hudi_tables(tmp_path, hudi_tables)
    assert _rows_loaded(tmp_path) == SNAPSHOT_ROWS
    # An instant that is no moment is refused before anything is dropped.
    with pytest.raises(ValueError, match="not a Hudi instant"):
        load_hudi_tables(tmp_path, {"only": hudi_tables["cow_v6_empty"]}, as_of="20261399999999999")
    assert _rows_loaded(tmp_path) == SNAPSHOT_ROWS


def test_a_table_hudi_rs_cannot_read_is_listed_and_the_others_load(hudi_tables, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    from lakehouse_dbt import hudi_raw

    monkeypatch.setattr(hudi_raw, "COMMIT_BEING_WRITTEN_WAIT_S", 0.01)
    damaged = tmp_path / "damaged"
    shutil.copytree(hudi_tables["cow_v6_nonpartitioned"], damaged)
    # Its newest commit cut in half, as a copy or a disk that failed part way leaves it.
    newest = max((damaged / ".hoodie").glob("*.commit"))
    newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2])
    tables = {**hudi_tables, "cow_v6_nonpartitioned": str(damaged)}

    loaded = load_hudi_tables(tmp_path, tables)

    assert list(loaded.unreadable) == ["cow_v6_nonpartitioned"]
    assert str(damaged) in loaded.unreadable["cow_v6_nonpartitioned"]
    assert loaded.rows == {name: rows for name, rows in SNAPSHOT_ROWS.items() if name != "cow_v6_nonpartitioned"}
    with duckdb.connect(str(tmp_path / "lakehouse.duckdb"), read_only=True) as con:
        assert con.sql("select table_name from raw_hudi._unreadable").fetchall() == [("cow_v6_nonpartitioned",)]
