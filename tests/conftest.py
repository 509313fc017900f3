import os
from pathlib import Path

import pytest
from jvm_options import TEST_JVM_OPTIONS

# Every JVM the suite starts (the session below, and each `lakehouse` subprocess, which
# inherits the environment) gets these options (jvm_options.py says why).
os.environ.setdefault("PYSPARK_SUBMIT_ARGS", f"--driver-java-options '{TEST_JVM_OPTIONS}' pyspark-shell")


@pytest.fixture(scope="session")
def spark():
    """One local SparkSession for the whole test session (start-up costs ~5 s)."""
    from streaming.runtime.spark_session import local_session

    session = local_session(app_name="lakehouse-tests", master="local[2]", shuffle_partitions=2)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def hudi_spark(spark):
    """The session, with the Hudi bundle `make venv` fetched. A missing bundle fails the
    test instead of skipping it: these machines reach Maven Central, so a Hudi test that
    cannot run means the set-up is broken, not that Hudi is out of reach."""
    from streaming.io.formats.hudi.sink import hudi_bundle_available
    from streaming.io.formats.hudi.format import HUDI_SPARK_BUNDLE
    from streaming.runtime.jars import jars_dir

    if not hudi_bundle_available(spark):
        pytest.fail(f"the Hudi bundle {HUDI_SPARK_BUNDLE.file_name} is not on the session's classpath "
                    f"(looked in {jars_dir()}): run `make venv` to fetch it")
    return spark


@pytest.fixture(scope="session")
def two_table_contracts():
    """The packaged contracts of the article's two tables, customers and orders, for tests
    that land generated changes: routing the single-table sample has its own tests
    (test_routing.py), and every further contract only adds planning time to each batch."""
    from streaming.contracts.loader import load_contracts

    packaged = load_contracts()
    return {table: packaged[table] for table in ("customers", "orders")}


@pytest.fixture
def mocked_aws(monkeypatch):
    """moto's in-process AWS (every service), with moto's documented dummy credentials, in
    eu-west-1: a test's AWS clients reach nothing outside this process."""
    from moto import mock_aws

    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    with mock_aws():
        yield


# Test tiers (docs/development.md). A test is marked by what it needs, so that
# `make test-fast` (-m "not spark and not dbt and not deploy") starts no JVM, runs no
# dbt and synthesizes no stack: `spark` for a test using the session's SparkSession
# (explicit marks stay for tests that start Spark in a subprocess), `dbt` for everything
# under tests/dbt/, `deploy` for everything under tests/deploy/.
_FOLDER_MARKS = {"dbt": "dbt", "deploy": "deploy"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    tests_dir = Path(__file__).parent
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)
        if "hudi_spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.hudi)
        folder = Path(str(item.path)).relative_to(tests_dir).parts[0]
        if folder in _FOLDER_MARKS:
            item.add_marker(getattr(pytest.mark, _FOLDER_MARKS[folder]))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The fast tier promises no JVM: a test that started one in this process without
    the `spark` marker fails the run, naming the rule, instead of slowing it silently."""
    if "not spark" not in (session.config.option.markexpr or ""):
        return
    from pyspark import SparkContext

    if SparkContext._gateway is not None:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        print("\nthe fast tier started a JVM: mark the test that starts Spark with @pytest.mark.spark")
