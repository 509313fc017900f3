"""The launcher of the local Athena stand-in: one catalog named like Athena's over three
connectors, a refused second instance, a taken port named, logs under the data dir, a
stop that ends both processes, and a fetched archive checked against its pin."""
from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from engine_ports import free_port

from streaming.runtime import athena_local
from streaming.runtime.athena_local import (
    CATALOG,
    EngineError,
    EnginePaths,
    catalog_properties,
    fetch_trino,
    query,
    running_processes,
    start,
    tools_dir,
)

pytestmark = pytest.mark.athena


def test_athenas_catalog_name_fronts_the_iceberg_hive_and_hudi_connectors(engine):
    _, state = engine
    _, rows = query(state["trino_port"], "show catalogs")
    assert {CATALOG, "hive", "hudi"} <= {row[0] for row in rows}
    _, connectors = query(state["trino_port"], "select catalog_name, connector_name from system.metadata.catalogs")
    assert dict(connectors)[CATALOG] == "iceberg"
    # The redirections that let a query name every table through awsdatacatalog.
    properties = catalog_properties(state["metastore_port"])
    assert properties[CATALOG]["iceberg.hive-catalog-name"] == "hive"
    assert properties["hive"]["hive.hudi-catalog-name"] == "hudi"


def test_timestamps_come_back_with_microseconds(engine):
    _, state = engine
    _, rows = query(state["trino_port"], "select timestamp '2026-04-04 08:00:00.123456'")
    assert rows == [["2026-04-04 08:00:00.123456"]]


def test_a_second_start_of_the_same_data_dir_is_refused(engine):
    paths, state = engine
    before = running_processes(paths)
    with pytest.raises(EngineError, match="already runs"):
        start(paths, metastore_port=free_port(), trino_port=free_port(), tools=tools_dir())
    assert running_processes(paths) == before == state["pids"]


@pytest.mark.parametrize("taken", ["trino_port", "metastore_port"])
def test_a_taken_port_is_named_with_the_option_that_moves_it(engine, tmp_path, taken):
    _, state = engine
    ports = {"trino_port": free_port(), "metastore_port": free_port(), taken: state[taken]}
    option = taken.replace("_", "-")
    with pytest.raises(EngineError, match=f"port {state[taken]} .* taken .* --{option}"):
        start(EnginePaths(tmp_path), tools=tools_dir(), **ports)
    assert not (tmp_path / athena_local.ENGINE_FOLDER / athena_local.STATE_FILE).exists()


def test_logs_and_the_catalog_live_under_the_data_dir(engine):
    paths, _ = engine
    assert "SERVER STARTED" in (paths.logs / "trino.log").read_text()
    assert (paths.metastore / "metastore_db").is_dir()


def test_start_status_and_stop_from_the_command_line(tmp_path, capsys):
    data = ["--data-dir", str(tmp_path), "--trino-port", str(free_port()), "--metastore-port", str(free_port())]
    assert athena_local.main(["start", *data]) == 0
    started = capsys.readouterr().out
    # The commands it suggests name this data dir, not the default one.
    assert f"athena_local sql --data-dir {tmp_path}\n" in started and f"athena_local stop --data-dir {tmp_path}" in started
    paths = EnginePaths(tmp_path)
    pids = running_processes(paths)
    try:
        assert sorted(pids) == ["metastore", "trino"]
        assert athena_local.main(["start", *data]) == 1
        assert "already runs" in capsys.readouterr().err
        assert athena_local.main(["status", *data]) == 0
        assert "http://127.0.0.1" in capsys.readouterr().out
    finally:
        assert athena_local.main(["stop", *data]) == 0
    assert running_processes(paths) == {}
    for pid in pids.values():
        assert not Path(f"/proc/{pid}").exists() or "java" not in Path(f"/proc/{pid}/cmdline").read_text(errors="replace")
    assert athena_local.main(["status", *data]) == 0
    assert capsys.readouterr().out.count("not running") == 2


def test_an_archive_that_is_not_the_pinned_one_is_refused(tmp_path, monkeypatch):
    """A stand-in `mvn` on PATH that 'downloads' other bytes: the launcher refuses them."""
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    mvn = fake_bin / "mvn"
    mvn.write_text('#!/bin/sh\nfor a in "$@"; do case "$a" in -DoutputDirectory=*) d="${a#*=}";; esac; done\n'
                   'echo not trino > "$d/trino-server-476.tar.gz"\n')
    mvn.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake_bin}{os.pathsep}{os.environ['PATH']}")
    tools = tmp_path / "tools"
    with pytest.raises(EngineError, match="is not the pinned"):
        fetch_trino(tools)
    assert not (tools / "trino-server-476").exists()


def test_the_sql_prompt_runs_each_statement_and_gives_trinos_error_in_one_line(engine, monkeypatch, capsys):
    paths, _ = engine
    script = "select 1 as one, 'a' as letter;\nselect\n  null as nothing,\n  array[1, 2] as pair;\nselect nonsense;\n"
    monkeypatch.setattr("sys.stdin", io.StringIO(script))
    assert athena_local.main(["sql", "--data-dir", str(paths.data_dir)]) == 1  # the third statement failed
    printed = capsys.readouterr().out.splitlines()
    assert printed[:4] == ["one | letter", "----+-------", "1   | a", "(1 row)"]
    assert printed[4:8] == ["nothing | pair", "--------+-------", "NULL    | [1, 2]", "(1 row)"]
    assert printed[8].startswith("error: COLUMN_NOT_FOUND: ") and len(printed) == 9


def test_the_sql_prompt_of_a_data_dir_without_a_running_engine_says_how_to_start_one(tmp_path, capsys):
    assert athena_local.main(["sql", "--data-dir", str(tmp_path)]) == 1
    assert "is not running: start it with `make athena-local`" in capsys.readouterr().err
