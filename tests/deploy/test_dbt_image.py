"""The dbt image's contents, without Docker: the files the Dockerfile copies must be a
dbt project that parses for the athena target, as the image build itself checks."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def copied_paths(dockerfile: Path) -> list[str]:
    sources = []
    for line in dockerfile.read_text().splitlines():
        if line.startswith("COPY "):
            *paths, _destination = line.split()[1:]
            sources += paths
    return sources


@pytest.mark.dbt
def test_the_files_the_image_copies_parse_as_the_dbt_project(tmp_path):
    project = tmp_path / "lakehouse"
    project.mkdir()
    for source in copied_paths(REPO / "Dockerfile"):
        path = REPO / source
        if path.is_dir():
            shutil.copytree(path, project / source, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            (project / source).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, project / source)
    # Only the image's own files are there: no data directory, no checkout around it.
    env = {**os.environ, "DBT_PROFILES_DIR": str(project), "LAKEHOUSE_DBT_TARGET": "athena"}
    dbt = Path(sys.executable).with_name("dbt")
    completed = subprocess.run(
        [str(dbt), "parse", "--target", "athena", "--no-partial-parse"],
        cwd=project, env=env, capture_output=True, text=True, timeout=300,
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-2000:]
    assert (project / "target" / "manifest.json").is_file()
    # The key publisher the scheduled build runs first imports with the image's packages
    # (dbt-athena brings boto3; there is no DuckDB there).
    probe = "import sys; sys.modules['duckdb'] = None; import lakehouse_dbt.athena_pii_key as m; print(m.__file__)"
    image_env = {**env, "PYTHONPATH": str(project / "dbt_project")}  # the Dockerfile's ENV PYTHONPATH
    imported = subprocess.run([sys.executable, "-c", probe], cwd=project, env=image_env, capture_output=True,
                              text=True, timeout=120)
    assert imported.returncode == 0, imported.stderr[-2000:]
    assert imported.stdout.strip() == str(project / "dbt_project" / "lakehouse_dbt" / "athena_pii_key.py")


def test_the_build_context_holds_exactly_what_the_image_copies():
    # .dockerignore lets through the Dockerfile, the pins and the dbt files, nothing else.
    allowed = {
        line[1:].rstrip("/")
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.startswith("!")
    }
    # Of the dbt helpers under dbt_project/, only the PII key publisher (and the env names it reads) goes in.
    helpers = {path for path in allowed if path.startswith("dbt_project/lakehouse_dbt/")}
    assert helpers == {f"dbt_project/lakehouse_dbt/{name}.py" for name in ("__init__", "env", "pii_key", "athena_pii_key")}
    assert set(copied_paths(REPO / "Dockerfile")) | {"Dockerfile"} == allowed - helpers
