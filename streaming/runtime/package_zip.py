"""The project's Python packages as one zip, for a Python path elsewhere: Glue's
--extra-py-files (deploy app) and a cluster's executors (spark_session).

It holds `streaming` and `lakehouse_dbt` (which defines the environment names the layout
uses), sources and contracts only. The zip is byte-for-byte the same for the same
sources (fixed timestamps and order), so CDK's content hash changes, and the asset is
uploaded again, only when the code or a contract changed.

The Glue job's zip holds one set of contracts, the one the deploy chose and checked
(choose_contracts), as the job's own in streaming/contracts/, where it reads them by
default; the other contract files of the tree stay out, so that a user's job never
carries the sample tables, nor the samples' job a user's half-written contract.
"""
from __future__ import annotations

import zipfile
from pathlib import Path

from streaming.contracts.loader import (
    CONTRACT_SUFFIXES,
    OWN_CONTRACTS_DIR,
    SAMPLE_CONTRACTS_DIR,
    ContractSet,
    contract_files,
)

STREAMING_DIR = Path(__file__).resolve().parents[1]
LAKEHOUSE_DBT_DIR = STREAMING_DIR.parent / "dbt_project" / "lakehouse_dbt"
PACKAGE_DIRS = (STREAMING_DIR, LAKEHOUSE_DBT_DIR)
# 1980-01-01, the earliest time a zip entry can carry.
_FIXED_ZIP_TIME = (1980, 1, 1, 0, 0, 0)
_SHIPPED_SUFFIXES = (".py", ".yml", ".yaml")


def package_files(package_dir: Path) -> list[Path]:
    return sorted(
        path
        for path in package_dir.rglob("*")
        if path.is_file() and path.suffix in _SHIPPED_SUFFIXES and "__pycache__" not in path.parts
    )


def build_package_zip(zip_path: Path, package_dirs: tuple[Path, ...] = PACKAGE_DIRS,
                      contracts: ContractSet | None = None) -> Path:
    """Zip each package of `package_dirs` under its own name into `zip_path`; with
    `contracts`, their files alone are the contracts in it, in streaming/contracts/."""
    entries: list[tuple[str, bytes]] = []
    for package_dir in package_dirs:
        if not (package_dir / "__init__.py").is_file():
            raise FileNotFoundError(f"{package_dir} is not a Python package (no __init__.py)")
        entries += [(f"{package_dir.name}/{path.relative_to(package_dir).as_posix()}", path.read_bytes())
                    for path in package_files(package_dir)
                    if contracts is None or not _is_contract_file(path)]
    if contracts is not None:
        entries += [(f"{STREAMING_DIR.name}/{OWN_CONTRACTS_DIR.name}/{entry.name}", entry.read_bytes())
                    for entry in contract_files(contracts.folder)]
    zip_path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(zip_path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, content in entries:
            entry = zipfile.ZipInfo(name, _FIXED_ZIP_TIME)
            entry.compress_type = zipfile.ZIP_DEFLATED
            entry.external_attr = 0o644 << 16
            archive.writestr(entry, content)
    return zip_path


def _is_contract_file(path: Path) -> bool:
    return path.suffix in CONTRACT_SUFFIXES and path.parent.resolve() in (
        OWN_CONTRACTS_DIR.resolve(), SAMPLE_CONTRACTS_DIR.resolve())
