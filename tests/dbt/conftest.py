"""The scenario built once per session; tests that change raw data or tables work on
a copy of it, so each starts from the same built state without another full build."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from dbt_scenario import BATCHES, EVENT_WINDOW, write_batch

from lakehouse_dbt.pii_key import KEY_ENV
from streaming.runtime.dbt_runner import run_dbt


@pytest.fixture(scope="session", autouse=True)
def scenario_go_live_day() -> Iterator[None]:
    """The scenario's events start on 2024-03-01: its deployment's go-live day."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LAKEHOUSE_ACTIVITY_BEGIN", EVENT_WINDOW[1])
        yield


@pytest.fixture(scope="session", autouse=True)
def deployment_pii_key() -> Iterator[None]:
    """One PII key for every data directory of the session, as a deployment has one:
    tests compare builds of different directories cell by cell, pseudonyms included
    (without it each directory would get its own key, dbt_project/lakehouse_dbt/pii_key.py)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(KEY_ENV, "tests-deployment-pii-key-" + "0123456789" * 4)
        yield


@pytest.fixture(scope="session")
def built_scenario(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """All raw batches of the scenario and one successful `dbt build` over them."""
    data_dir = tmp_path_factory.mktemp("built_scenario")
    for batch_id in BATCHES:
        write_batch(data_dir, batch_id)
    result = run_dbt(["build", *EVENT_WINDOW], data_dir)
    assert result.success, result.exception
    return data_dir


@pytest.fixture(scope="module")
def scenario_copy(built_scenario: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private copy of the built scenario (raw files, DuckDB file, dbt target/)."""
    copy = tmp_path_factory.mktemp("scenario_copy") / "data"
    shutil.copytree(built_scenario, copy)
    return copy
