"""The scenario built once per session; tests that change raw data or tables work on
a copy of it, so each starts from the same built state without another full build."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from dbt_scenario import BATCHES, EVENT_WINDOW, ScenarioBuild, write_batch

from lakehouse_dbt.pii_key import KEY_ENV
from streaming.runtime.dbt_runner import run_dbt


# The environment of the scenario's deployment.
DEPLOYMENT_ENV = {
    # The scenario's events start on 2024-03-01: its deployment's go-live day.
    "LAKEHOUSE_ACTIVITY_BEGIN": EVENT_WINDOW[1],
    # One PII key for every data directory, as a deployment has one: tests compare builds
    # of different directories cell by cell, pseudonyms included (without it each
    # directory would get its own key, dbt_project/lakehouse_dbt/pii_key.py).
    KEY_ENV: "tests-deployment-pii-key-" + "0123456789" * 4,
}


@pytest.fixture(scope="module", autouse=True)
def deployment_environment() -> Iterator[None]:
    """DEPLOYMENT_ENV for each test module here, undone at its end: not for the session,
    where it outlived these modules into the tests of other folders that run after them
    in the same pytest-xdist worker."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in DEPLOYMENT_ENV.items():
            patch.setenv(name, value)
        yield


@pytest.fixture(scope="session")
def scenario_build(tmp_path_factory: pytest.TempPathFactory) -> ScenarioBuild:
    """All raw batches of the scenario and one successful `dbt build --full-refresh` of
    every node over them, with dbt's result. On a fresh data directory --full-refresh
    builds what a plain first build builds; with it, the build is also the full refresh
    that test_dbt_local.py compares its incremental builds with (one build fewer)."""
    data_dir = tmp_path_factory.mktemp("built_scenario")
    for batch_id in BATCHES:
        write_batch(data_dir, batch_id)
    # Given to the command: pytest sets up a session fixture before any module's.
    result = run_dbt(["build", "--full-refresh", *EVENT_WINDOW], data_dir, extra_env=DEPLOYMENT_ENV)
    assert result.success, result.exception
    return ScenarioBuild(data_dir, result)


@pytest.fixture(scope="session")
def built_scenario(scenario_build: ScenarioBuild) -> Path:
    """The data directory of scenario_build: tests that change it work on a copy."""
    return scenario_build.data_dir


@pytest.fixture(scope="module")
def scenario_copy(built_scenario: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private copy of the built scenario (raw files, DuckDB file, dbt target/)."""
    copy = tmp_path_factory.mktemp("scenario_copy") / "data"
    shutil.copytree(built_scenario, copy)
    return copy
