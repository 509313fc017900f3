"""A data directory's path is a literal everywhere: glob characters and a quote in its
name neither break a reader nor make one read another directory's files."""
from __future__ import annotations

import shutil
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import duckdb
import pytest

from streaming.cli import main
from streaming.contracts.loader import SAMPLE_CONTRACTS_DIR
from streaming.io.layout import DataLayout
from streaming.operations.demo import run_demo
from streaming.operations.marts_summary import MARTS_SCHEMA
from streaming.runtime.dbt_runner import run_dbt
from streaming.samples.generator import generate_cdc, write_landing_files
from streaming.samples.raw_fixtures import write_raw_batch

SEED, CUSTOMER_COUNT = 9, 5


def land_strangers(sibling: Path) -> None:
    """Landing files and a raw batch in a folder the data directory's name matches as a glob."""
    write_landing_files(DataLayout(sibling).landing, seed=31, customers=12, records_per_file=40)
    ingested = datetime(2026, 11, 1, 1, tzinfo=timezone.utc)
    stranger = {"id": "stranger", "cust_name": "Not Ours", "email": "stranger@example.com", "_event_ts": ingested,
                "sequence": 1}
    write_raw_batch(sibling, "customers", 0, [stranger], ingested)


def assert_counts_are_its_own(result) -> None:
    truth = generate_cdc(seed=SEED, customers=CUSTOMER_COUNT, tenants=0, record_format="streams")
    assert result.status.change_rows == {table: sum(names.values()) for table, names in truth.event_counts.items()}
    assert result.status.current_rows == {table: len(keys) for table, keys in truth.expected_state.items()}


@pytest.mark.spark
def test_a_data_dir_named_with_every_glob_character_streams_and_counts_only_its_own_files(spark, tmp_path, capsys):
    # As globs, the name matches `dataZZx'q` for Hadoop (which expands {x} to x) and
    # `dataZZ{x}'q` for DuckDB (braces are literal to it).
    for sibling in ("dataZZx'q", "dataZZ{x}'q"):
        land_strangers(tmp_path / sibling)
    layout = DataLayout(tmp_path / "da[t]a*?{x}'q")
    # The two plain tables only (no app tenants): the name is the data directory's, the same
    # for every raw table, and Spark plans two tables instead of six.
    contracts = tmp_path / "contracts"
    contracts.mkdir()
    for table in ("customers", "orders"):
        shutil.copy(SAMPLE_CONTRACTS_DIR / f"{table}.yml", contracts)

    result = run_demo(layout, seed=SEED, customers=CUSTOMER_COUNT, tenants=0, record_format="streams",
                      sink="parquet", contracts_dir=str(contracts), spark=spark, build_marts=False,
                      out=lambda _: None)

    assert_counts_are_its_own(result)
    assert main(["status", "--data-dir", str(layout.root)]) == 0
    assert not (tmp_path / "dataZZx'q" / "raw" / "orders_changes").exists(), "nothing was written beside it"
    # DuckDB itself cannot keep a database file there: dbt is refused in one line.
    capsys.readouterr()
    assert main(["dbt", "build", "--data-dir", str(layout.root)]) == 2
    err = capsys.readouterr().err
    assert "DuckDB cannot keep dbt's database in" in err and err.count("\n") == 1
    assert not layout.dbt_database.exists()


@pytest.mark.dbt
def test_dbt_builds_the_marts_of_a_data_dir_named_with_glob_characters_and_a_quote(tmp_path):
    # The raw batches are written directly: the stream's side of such a name is the test
    # above; here dbt must read this directory's change logs, and only them.
    land_strangers(tmp_path / "dataZZ{x}'q")  # what `da[t]a*{x}'q` matches as a DuckDB glob
    layout = DataLayout(tmp_path / "da[t]a*{x}'q")
    ingested = datetime(2026, 11, 1, 2, tzinfo=timezone.utc)
    ours = [{"id": f"c{number}", "cust_name": f"Name {number}", "email": f"c{number}@example.com",
             "_event_ts": ingested, "sequence": number} for number in range(3)]
    write_raw_batch(layout.root, "customers", 0, ours, ingested)

    result = run_dbt(["build", "--select", "+dim_customers", "--exclude", "test_type:data"], layout.root)

    assert result.success, result.exception
    with duckdb.connect(str(layout.dbt_database), read_only=True) as con:
        dim_ids = Counter(customer_id for (customer_id,) in con.execute(
            f"select customer_id from {MARTS_SCHEMA}.dim_customers").fetchall())
    assert dim_ids == Counter(row["id"] for row in ours), "dbt read this directory's raw tables, and only them"


# A backslash and a colon cannot be taken literally: DuckDB reads `\` as `/` (dbt once read
# and wrote `<tmp>/b/s/data` for `<tmp>/b\s/data`), and Hadoop reads `a:b` as a URI (the
# stream died on its first write, after registering the contracts). Every command refuses
# such a folder, in one line, before writing anything anywhere.
UNUSABLE_NAMES = [("b\\s", "b/s", "a backslash"), ("a:b", "a/b", "a colon")]
COMMANDS = [
    ["status"],
    ["dbt", "run", "--select", "stg_dynamodb__customers"],
    ["stream", "--sink", "parquet"],
    ["demo", "--sink", "parquet"],
    ["generate", "--customers", "2"],
    ["quarantine", "summary"],
]


def files_under(root: Path) -> dict[str, float]:
    return {str(path): path.stat().st_mtime for path in root.rglob("*")}


def refusal(argv: list[str], capsys) -> tuple[int, str]:
    """The exit code and stderr of `lakehouse <argv>`; argparse exits where main returns."""
    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as exit_info:
        code = exit_info.code
    return code, capsys.readouterr().err


def two_data_dirs(tmp_path: Path, name: str, read_as: str) -> Path:
    """`<tmp>/<name>/data` with a raw batch, and the folder a reader would take it for, with another."""
    ingested = datetime(2026, 11, 1, 2, tzinfo=timezone.utc)
    for root, prefix in ((tmp_path / name / "data", "ours"), (tmp_path / read_as / "data", "theirs")):
        rows = [{"id": f"{prefix}{number}", "cust_name": "N", "email": "n@example.com", "_event_ts": ingested,
                 "sequence": number} for number in range(3)]
        write_raw_batch(root, "customers", 0, rows, ingested)
    return tmp_path / name / "data"


@pytest.mark.parametrize(("name", "read_as", "said"), UNUSABLE_NAMES)
@pytest.mark.parametrize("command", COMMANDS, ids=lambda command: command[0])
def test_a_data_dir_whose_path_holds_a_backslash_or_a_colon_is_refused_before_anything_is_written(
        tmp_path, capsys, name, read_as, said, command):
    data_dir = two_data_dirs(tmp_path, name, read_as)
    before = files_under(tmp_path)

    code, err = refusal([*command, "--data-dir", str(data_dir)], capsys)

    assert code == 2
    assert f"data directory {data_dir} holds {said}" in err
    assert err.splitlines()[-1].startswith("lakehouse") and err.count(str(data_dir)) == 1
    assert files_under(tmp_path) == before, "nothing was written, in the data directory or beside it"


@pytest.mark.parametrize(("name", "read_as", "said"), UNUSABLE_NAMES)
def test_the_same_path_is_refused_from_the_environment_a_relative_path_and_a_symbolic_link(
        tmp_path, capsys, monkeypatch, name, read_as, said):
    data_dir = two_data_dirs(tmp_path, name, read_as)
    (tmp_path / "link").symlink_to(data_dir)
    before = files_under(tmp_path)

    monkeypatch.setenv("LAKEHOUSE_DATA_DIR", str(data_dir))
    code, err = refusal(["status"], capsys)
    assert code == 2 and err.startswith(f"lakehouse status: data directory {data_dir} holds {said}")
    assert err.count("\n") == 1
    monkeypatch.delenv("LAKEHOUSE_DATA_DIR")
    monkeypatch.chdir(data_dir.parent)
    assert refusal(["status", "--data-dir", "data"], capsys)[0] == 2
    # dbt resolves the link, and would reach the folder behind it.
    monkeypatch.chdir(tmp_path)
    code, err = refusal(["dbt", "run", "--data-dir", "link"], capsys)
    assert code == 2 and f"data directory {data_dir} holds {said}" in err
    assert files_under(tmp_path) == before
