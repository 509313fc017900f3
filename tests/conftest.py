import pytest


@pytest.fixture(scope="session")
def spark():
    """One local SparkSession for the whole test session (start-up costs ~5 s)."""
    from streaming.runtime.spark_session import local_session

    session = local_session(app_name="lakehouse-tests", master="local[2]", shuffle_partitions=2)
    yield session
    session.stop()


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
