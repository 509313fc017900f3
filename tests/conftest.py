import pytest


@pytest.fixture(scope="session")
def spark():
    """One local SparkSession for the whole test session (start-up costs ~5 s)."""
    from streaming.spark import local_session

    session = local_session(app_name="lakehouse-tests", master="local[2]", shuffle_partitions=2)
    yield session
    session.stop()
