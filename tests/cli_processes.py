"""`lakehouse` run as an operator runs it: a process of its own, from this checkout.

Not a test module: the tests that start real `lakehouse` processes import it.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def checkout_env() -> dict[str, str]:
    """This checkout first on PYTHONPATH: the shared venv's editable install is another one.
    Unbuffered, so that a test reads each line when the process prints it."""
    paths = [str(REPO), str(REPO / "dbt_project"), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p), "PYTHONUNBUFFERED": "1"}


def fresh_python(code: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`code` run by a new interpreter of this venv from the checkout's root: what a test
    session has long since imported (pyspark, say) is not loaded there."""
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=timeout,
                          check=False)


class LakehouseProcess:
    """`lakehouse <args>` started in `cwd`, in a session of its own (so that a signal to
    its group is what a terminal's Ctrl-C or `kill -- -<pgid>` sends); its output is
    collected line by line while it runs."""

    def __init__(self, args: list[str], cwd: Path, env: dict[str, str] | None = None) -> None:
        self.args = args
        self.process = subprocess.Popen(
            [sys.executable, "-m", "streaming.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, env=env or checkout_env(), cwd=cwd, start_new_session=True,
        )
        self._stdout: list[str] = []
        self._stderr: list[str] = []
        self._readers = [threading.Thread(target=lambda pipe=pipe, into=into: into.extend(pipe), daemon=True)
                         for pipe, into in ((self.process.stdout, self._stdout), (self.process.stderr, self._stderr))]
        for reader in self._readers:
            reader.start()

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def out(self) -> str:
        return "".join(self._stdout)

    @property
    def err(self) -> str:
        return "".join(self._stderr)

    def wait_until(self, condition: Callable[[], bool], what: str, timeout: float = 400) -> None:
        """Poll `condition` while the process runs; fail, with its output, if it ends first."""
        deadline = time.monotonic() + timeout
        while not condition():
            assert self.process.poll() is None, f"`lakehouse {' '.join(self.args)}` ended before {what}:\n{self.err}"
            assert time.monotonic() < deadline, f"no {what} within {timeout} s:\n{self.err}"
            time.sleep(0.05)

    def wait(self, timeout: float = 400) -> int:
        """The exit code, once the process has ended and its output is read."""
        code = self.process.wait(timeout=timeout)
        for reader in self._readers:
            reader.join(timeout=10)
        return code

    def signal_group(self, number: int) -> None:
        os.killpg(self.process.pid, number)

    def stop(self) -> None:
        """Kill what is left of the process group (a test that failed midway)."""
        if self.process.poll() is None:
            self.signal_group(signal.SIGKILL)
        self.wait(timeout=60)
