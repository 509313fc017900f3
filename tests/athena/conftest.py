"""The `athena` tier (`make test-athena`): the local Trino 476 and Hive metastore of
streaming.runtime.athena_local, started once for the tier on free ports in a temporary
data directory, and stopped at its end. `make test` deselects these tests."""
from __future__ import annotations

import pytest
from engine_ports import free_port

from streaming.runtime.athena_local import EnginePaths, start, stop, tools_dir


@pytest.fixture(scope="session")
def engine(tmp_path_factory):
    """(paths, state) of the running engine; `state["trino_port"]` is where to query it."""
    paths = EnginePaths(tmp_path_factory.mktemp("athena-data"))
    state = start(paths, metastore_port=free_port(), trino_port=free_port(), tools=tools_dir())
    yield paths, state
    stop(paths)
