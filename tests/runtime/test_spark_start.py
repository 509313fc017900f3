"""Spark's start fails on the operator's Java: one line and exit code 2, no py4j traceback.
Real `lakehouse stream` processes, which end before any JVM runs."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from cli_processes import checkout_env

from streaming.cli import main


def stream_with_java_home(tmp_path: Path, java_home: Path) -> subprocess.CompletedProcess[str]:
    data = tmp_path / "data"
    assert main(["generate", "--data-dir", str(data), "--customers", "2", "--records-per-file", "50"]) == 0
    return subprocess.run([sys.executable, "-m", "streaming.cli", "stream", "--data-dir", str(data), "--sink", "parquet"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env={**checkout_env(), "JAVA_HOME": str(java_home)})


def test_a_java_home_without_java_is_one_line(tmp_path):
    done = stream_with_java_home(tmp_path, tmp_path / "nonexistent")

    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "starting Spark" not in done.stdout
    assert done.stderr.splitlines()[-1] == (
        f"lakehouse stream: JAVA_HOME is {tmp_path / 'nonexistent'}, which holds no bin/java: point it at a "
        "Java 17 installation, or unset it to use the java on PATH"
    )


def test_a_java_that_exits_at_once_is_one_line_after_its_own_message(tmp_path):
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("#!/bin/sh\necho 'Error: this Java cannot start' >&2\nexit 1\n")
    java.chmod(0o755)

    done = stream_with_java_home(tmp_path, tmp_path / "jdk")

    assert done.returncode == 2, done.stderr
    assert "Error: this Java cannot start" in done.stderr and "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1] == (
        f"lakehouse stream: Java (JAVA_HOME={tmp_path / 'jdk'}) exited before Spark started; its own message is "
        "above. Spark needs Java 17"
    )
