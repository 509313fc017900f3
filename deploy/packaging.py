"""The `streaming` package as the zip Glue puts on the job's Python path (--extra-py-files).

The zip is built at synthesis and is byte-for-byte the same for the same sources (fixed
timestamps and order), so CDK's content hash changes, and the asset is uploaded again,
only when the code or a contract changed.
"""
from __future__ import annotations

import zipfile
from pathlib import Path

# 1980-01-01, the earliest time a zip entry can carry.
_FIXED_ZIP_TIME = (1980, 1, 1, 0, 0, 0)
_SHIPPED_SUFFIXES = (".py", ".yml", ".yaml")


def build_package_zip(package_dir: Path, zip_path: Path) -> Path:
    """Zip `package_dir` (sources and contracts, no caches) under its own name."""
    package_dir = package_dir.resolve()
    files = sorted(
        path
        for path in package_dir.rglob("*")
        if path.is_file() and path.suffix in _SHIPPED_SUFFIXES and "__pycache__" not in path.parts
    )
    if not (package_dir / "__init__.py").is_file():
        raise FileNotFoundError(f"{package_dir} is not a Python package (no __init__.py)")
    zip_path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(zip_path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in files:
            entry = zipfile.ZipInfo(f"{package_dir.name}/{path.relative_to(package_dir).as_posix()}", _FIXED_ZIP_TIME)
            entry.compress_type = zipfile.ZIP_DEFLATED
            entry.external_attr = 0o644 << 16
            archive.writestr(entry, path.read_bytes())
    return zip_path
