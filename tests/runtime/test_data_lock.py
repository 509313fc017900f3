"""One writer per data directory: real second processes, a holder killed with SIGKILL, a
record left by another host. No Spark: every refusal happens before Spark would start."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest
from cli_processes import checkout_env

from streaming.cli import main
from streaming.runtime.data_lock import DataDirLocked, hold_data_dir, lock_path
from streaming.samples.export_writer import write_full_export
from streaming.samples.generator import CUSTOMERS, generate_cdc

# Holds the lock of argv[1] as `lakehouse <argv[2]>` would, until killed.
HOLDER_PROGRAM = """
import sys, time
from streaming.runtime.data_lock import hold_data_dir
with hold_data_dir(sys.argv[1], sys.argv[2]):
    print("held", flush=True)
    time.sleep(600)
"""


@pytest.fixture
def holder(tmp_path, request) -> Iterator[subprocess.Popen[str]]:
    """Another process holding the lock of tmp_path/data, as `lakehouse stream` unless the
    test is parametrized indirectly with another command."""
    command = getattr(request, "param", "stream")
    process = subprocess.Popen([sys.executable, "-c", HOLDER_PROGRAM, str(tmp_path / "data"), command],
                               stdout=subprocess.PIPE, text=True, env=checkout_env(), cwd=tmp_path)
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "held"
        yield process
    finally:
        process.kill()
        process.wait(timeout=30)


def land_sample(data_dir: Path) -> None:
    assert main(["generate", "--data-dir", str(data_dir), "--customers", "2", "--records-per-file", "50"]) == 0


def test_a_second_stream_process_is_refused_at_once_naming_the_holder(tmp_path, holder):
    land_sample(tmp_path / "data")
    started = time.monotonic()

    second = subprocess.run([sys.executable, "-m", "streaming.cli", "stream", "--data-dir", str(tmp_path / "data")],
                            capture_output=True, text=True, env=checkout_env(), cwd=tmp_path, timeout=120)

    assert second.returncode == 2, second.stderr
    assert f"`lakehouse stream` (pid {holder.pid} on host {socket.gethostname()}, since " in second.stderr
    since = second.stderr.split("since ", 1)[1].split(")", 1)[0]
    assert abs(datetime.fromisoformat(since) - datetime.now(timezone.utc)).total_seconds() < 120
    assert f"it is already streaming; to restart it, stop it with `kill {holder.pid}` and start it again" \
        in second.stderr
    assert "starting Spark" not in second.stdout and "Traceback" not in second.stderr
    # Refused before a JVM could start (a Spark start alone takes longer here).
    assert time.monotonic() - started < 60
    assert holder.poll() is None, "the holder is untouched"


def test_every_command_that_writes_the_data_dir_is_refused_while_another_process_writes(tmp_path, holder, capsys):
    data = tmp_path / "data"
    land_sample(data)
    cdc = generate_cdc(seed=5, customers=3)
    live_items = [item for item in cdc.expected_state[CUSTOMERS].values() if item is not None]
    export = write_full_export(tmp_path / "exports", CUSTOMERS, live_items, datetime(2026, 11, 1, tzinfo=timezone.utc))
    capsys.readouterr()
    commands = {
        "stream": ["stream"],
        "backfill": ["backfill", "--export", str(export)],
        "reprocess": ["reprocess", "--to", str(tmp_path / "rebuilt")],
        "switch": ["switch", "--to", str(tmp_path / "rebuilt")],
        "demo": ["demo", "--skip-dbt"],
        "quarantine replay": ["quarantine", "replay"],
    }
    for name, argv in commands.items():
        assert main([*argv, "--data-dir", str(data)]) == 2, name
        printed = capsys.readouterr()
        refusal = printed.err
        # A refused command shows no plan of what it would have written (backfill, reprocess).
        assert "write raw table" not in printed.out, name
        assert f"pid {holder.pid} on host" in refusal, name
        if name != "stream":
            # A stream never finishes by itself: the refusal says how to stop it and what then.
            assert f"stop the stream with `kill {holder.pid}`" in refusal, name
            assert f"run `lakehouse {name}` again, then start the stream again" in refusal, name
    assert not (tmp_path / "rebuilt").exists()
    assert not (data / "raw").exists(), "nothing was written"


@pytest.mark.parametrize("holder", ["backfill"], indirect=True)
def test_a_command_that_finishes_by_itself_is_waited_for_not_stopped(tmp_path, holder, capsys):
    land_sample(tmp_path / "data")
    capsys.readouterr()

    assert main(["stream", "--data-dir", str(tmp_path / "data")]) == 2

    refusal = capsys.readouterr().err
    assert f"`lakehouse backfill` (pid {holder.pid} on host" in refusal
    assert refusal.rstrip().endswith("wait for it to finish, then run `lakehouse stream` again")
    assert "kill" not in refusal


def test_a_lock_left_by_a_killed_holder_is_taken_over_with_a_message(tmp_path, holder):
    data = tmp_path / "data"
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait(timeout=30)
    left = json.loads(lock_path(data).read_text())
    assert left["pid"] == holder.pid and left["command"] == "stream"  # the crash left its record behind
    messages: list[str] = []

    with hold_data_dir(data, "stream", report=messages.append):
        record = json.loads(lock_path(data).read_text())
        assert (record["pid"], record["host"], record["command"]) == (os.getpid(), socket.gethostname(), "stream")

    assert len(messages) == 1
    assert f"pid {holder.pid} on host {socket.gethostname()}" in messages[0]
    assert "is no longer running" in messages[0]
    assert lock_path(data).read_text() == "", "a clean exit leaves no record"


def test_a_record_from_another_host_is_refused_with_how_to_clear_it(tmp_path):
    lock = lock_path(tmp_path)
    lock.write_text(json.dumps({"pid": 4242, "host": "etl-worker-7", "command": "stream",
                                "since": "2026-11-20T08:00:00+00:00"}))

    with pytest.raises(DataDirLocked) as refused:
        with hold_data_dir(tmp_path, "demo"):
            pytest.fail("must not run while another host may write")

    message = str(refused.value)
    assert "pid 4242 on host etl-worker-7, since 2026-11-20T08:00:00+00:00" in message
    assert f"delete {lock}" in message
    assert json.loads(lock.read_text())["host"] == "etl-worker-7", "the record stays for whoever checks"
    lock.unlink()
    with hold_data_dir(tmp_path, "demo", report=pytest.fail):
        pass


def test_nested_holds_in_one_process_share_the_lock(tmp_path):
    with hold_data_dir(tmp_path, "demo"):
        with hold_data_dir(tmp_path, "stream"):
            pass
        assert json.loads(lock_path(tmp_path).read_text())["command"] == "demo", "the outer hold still owns it"
    assert lock_path(tmp_path).read_text() == ""


def test_a_path_that_cannot_hold_the_lock_file_is_a_clear_error(tmp_path):
    not_a_directory = tmp_path / "data"
    not_a_directory.write_text("a file where the data directory should be")

    with pytest.raises(DataDirLocked, match="cannot open the lock file .*data/.lakehouse.lock"):
        with hold_data_dir(not_a_directory, "stream"):
            pytest.fail("must not run without the lock")


def test_a_symbolic_link_in_place_of_the_lock_file_is_refused(tmp_path):
    victim = tmp_path / "precious.txt"
    victim.write_text("not a lock file")
    data = tmp_path / "data"
    data.mkdir()
    lock_path(data).symlink_to(victim)

    with pytest.raises(DataDirLocked, match=r"the lock file .*\.lakehouse\.lock is a symbolic link"):
        with hold_data_dir(data, "stream"):
            pytest.fail("must not run through a link")

    assert victim.read_text() == "not a lock file"


def test_a_command_that_wrote_nothing_leaves_no_directory_behind(tmp_path):
    with hold_data_dir(tmp_path / "new", "switch"):
        assert lock_path(tmp_path / "new").is_file()
    assert not (tmp_path / "new").exists()

    with hold_data_dir(tmp_path / "used", "demo"):
        (tmp_path / "used" / "landing").mkdir()
    assert (tmp_path / "used" / "landing").is_dir() and lock_path(tmp_path / "used").read_text() == ""


def test_a_fifo_in_place_of_the_lock_file_is_refused_in_one_line(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    os.mkfifo(lock_path(data))

    with pytest.raises(DataDirLocked, match=r"the lock file .*\.lakehouse\.lock is not a plain file.*delete it"):
        with hold_data_dir(data, "stream"):
            pytest.fail("must not run without a lock record")
