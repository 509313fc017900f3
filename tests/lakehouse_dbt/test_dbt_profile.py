"""The local dbt target's constant profile: the plugin that opens the data directory's
database (dbt_project/lakehouse_dbt/duckdb_database.py), and the key under which dbt's
parse of the project is shared between data directories (streaming.runtime.dbt_runner).
No dbt command runs here; tests/dbt/test_dbt_shared_parse.py runs them."""
from __future__ import annotations

from types import SimpleNamespace

import duckdb
import pytest

from lakehouse_dbt.duckdb_database import Plugin
from lakehouse_dbt.env import DATA_DIR_ENV, RAW_DIR_ENV
from streaming.runtime.dbt_runner import SHARED_PARSE_DIR, parse_state_key, shared_parse_path


def test_the_plugin_opens_the_data_dirs_database_by_its_literal_path(tmp_path, monkeypatch):
    data_dir = tmp_path / "da[t]a *{x}'q"
    data_dir.mkdir()
    monkeypatch.setenv(DATA_DIR_ENV, str(data_dir))
    credentials = SimpleNamespace(path=":memory:")
    Plugin(name="duckdb_database", plugin_config={}).update_connection_config(credentials, {})
    with duckdb.connect(credentials.path) as database:
        database.execute("create schema raw")
        database.execute("create table raw.customers as select 'c1' as id")
    with duckdb.connect(str(data_dir / "lakehouse.duckdb"), read_only=True) as database:
        # The catalog dbt names in every relation (profiles.yml `database`).
        assert database.execute("select id from lakehouse.raw.customers").fetchall() == [("c1",)]


LOCAL = {"LAKEHOUSE_DBT_TARGET": "local", DATA_DIR_ENV: "/data/a", RAW_DIR_ENV: "/data/a/raw"}


def test_every_data_dir_shares_one_parse_of_a_kind_of_command():
    other_dir = {**LOCAL, DATA_DIR_ENV: "/elsewhere/b", RAW_DIR_ENV: "/elsewhere/b/raw_v2"}
    assert parse_state_key(["build"], LOCAL) == parse_state_key(["run", "--select", "fct_orders"], other_dir)
    hudi = '{"raw_format": "hudi"}'
    assert parse_state_key(["build", "--vars", hudi], LOCAL) == parse_state_key([f"--vars={hudi}", "build"], other_dir)
    # dbt keeps only the last --vars, and so does the key.
    assert parse_state_key(["build", "--vars", hudi, "--vars", "{}"], LOCAL) == parse_state_key(["build", "--vars", "{}"], LOCAL)


@pytest.mark.parametrize("other_args, other_env", [
    (["build", "--vars", '{"raw_format": "hudi"}'], LOCAL),
    (["build"], {**LOCAL, "LAKEHOUSE_ACTIVITY_BEGIN": "2024-03-01"}),  # read by dbt_project.yml
    (["build"], {**LOCAL, "LAKEHOUSE_DBT_TARGET": "athena"}),  # read by profiles.yml
])
def test_what_dbt_checks_a_saved_parse_against_gives_another_shared_parse(other_args, other_env):
    assert parse_state_key(other_args, other_env) != parse_state_key(["build"], LOCAL)


def test_a_command_on_another_project_or_profiles_folder_shares_no_parse(tmp_path):
    assert shared_parse_path(["build"], LOCAL).parent == SHARED_PARSE_DIR
    for option in ("--project-dir", "--profiles-dir"):
        assert shared_parse_path(["build", option, str(tmp_path)], LOCAL) is None
        assert shared_parse_path(["build", f"{option}={tmp_path}"], LOCAL) is None
