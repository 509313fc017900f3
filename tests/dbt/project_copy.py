"""A copy of the dbt project and of the packaged contracts, for tests that scaffold a new
table's models into the project: the repository's own project is never written to."""
from __future__ import annotations

import shutil
from pathlib import Path

from streaming.contracts.loader import SAMPLE_CONTRACTS_DIR
from streaming.runtime.dbt_runner import PROJECT_DIR

# What dbt reads of the project: its settings, the models, macros and seeds.
PROJECT_PARTS = ("dbt_project.yml", "profiles.yml", "dbt_project", "macros", "seeds")


def copy_project(project: Path) -> Path:
    project.mkdir(parents=True)
    for part in PROJECT_PARTS:
        source = PROJECT_DIR / part
        if source.is_dir():
            shutil.copytree(source, project / part, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(source, project / part)
    return project


def copy_contracts(contracts_dir: Path, added: dict[str, str]) -> Path:
    """The packaged contracts, plus `added` (file name -> YAML text)."""
    shutil.copytree(SAMPLE_CONTRACTS_DIR, contracts_dir, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    for name, text in added.items():
        (contracts_dir / name).write_text(text, encoding="utf-8")
    return contracts_dir
