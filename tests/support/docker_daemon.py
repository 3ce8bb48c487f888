"""The Docker daemon the image tests exist to run against: a failure, not a skip, when absent.

Import the fixture into a test module: `from tests.support.docker_daemon import client`.
"""

from __future__ import annotations

import pytest
from docker import DockerClient

from runner.images.policy import DaemonUnavailable, connect


@pytest.fixture(scope="session")
def client() -> DockerClient:
    try:
        return connect()
    except DaemonUnavailable as exc:
        pytest.fail(str(exc))
