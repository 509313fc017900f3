"""The dbt documentation site of the local target: generate it, then serve it on loopback.

`dbt docs generate` writes a single-page app (index.html) with manifest.json and
catalog.json into the target folder; the page fetches both, so it needs an HTTP
server rather than file:// URLs. The server binds 127.0.0.1 only: the site shows
compiled SQL and column lists, which stay on the machine that built them.
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from streaming.errors import OperatorError
from streaming.io.layout import DataLayout, require_data_dir
from streaming.contracts.loader import choose_contracts
from streaming.runtime.dbt_runner import run_dbt, with_samples_var

LOOPBACK = "127.0.0.1"
DEFAULT_PORT = 8080
# The files the page loads; without any of them it renders empty.
SITE_FILES = ("index.html", "manifest.json", "catalog.json")


class DocsSiteError(OperatorError):
    """The site could not be generated or served; the message says what to do."""


def docs_target_dir(data_dir: Path) -> Path:
    """Where run_dbt puts dbt's target folder for this data directory."""
    return DataLayout(Path(data_dir).resolve()).dbt_target


def generate_docs(data_dir: Path, contracts_dir: str | Path | None = None,
                  out: Callable[[str], None] = print) -> Path:
    """Runs `dbt docs generate` on the local target, the sample tables' models included only
    when the contracts are the samples (as `lakehouse dbt` builds them); returns the folder to serve."""
    result = run_dbt(with_samples_var(["docs", "generate"], choose_contracts(contracts_dir), out), data_dir)
    target = docs_target_dir(data_dir)
    if not result.success:
        raise DocsSiteError(f"dbt docs generate failed; details in {DataLayout(Path(data_dir)).dbt_log}")
    missing = [name for name in SITE_FILES if not (target / name).is_file()]
    if missing:
        raise DocsSiteError(f"dbt docs generate left no {', '.join(missing)} in {target}")
    return target


def docs_server(site_dir: Path, port: int = DEFAULT_PORT) -> ThreadingHTTPServer:
    """An HTTP server for `site_dir` on 127.0.0.1:`port` (0 picks a free port), not yet serving."""
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(site_dir))
    try:
        return ThreadingHTTPServer((LOOPBACK, port), handler)
    except OSError as exc:
        raise DocsSiteError(f"cannot listen on {LOOPBACK}:{port} ({exc.strerror}); choose another --port") from exc


def site_address(server: ThreadingHTTPServer) -> str:
    host, port = server.server_address[:2]
    return f"http://{host}:{port}/"


def serve_docs(data_dir: Path, port: int = DEFAULT_PORT, *, contracts_dir: str | Path | None = None,
               out: Callable[[str], None] = print) -> None:
    """`lakehouse docs`: generates the site, prints its address and serves it until
    interrupted (Ctrl-C)."""
    if not 0 <= port <= 65535:
        raise DocsSiteError(f"--port must be between 0 and 65535, not {port}")
    require_data_dir(data_dir)
    if not DataLayout(Path(data_dir)).dbt_database.exists():
        # The catalog (column types, row counts) comes from the built tables.
        out(f"no built tables in {data_dir}: the site will list models without their columns' types; "
            "run `lakehouse demo` or `lakehouse dbt build` first for the full catalog")
    site_dir = generate_docs(data_dir, contracts_dir, out)
    server = docs_server(site_dir, port)
    out(f"dbt docs for {Path(data_dir).resolve()}: {site_address(server)} (Ctrl-C stops the server)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
