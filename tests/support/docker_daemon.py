"""The Docker daemon the image tests exist to run against: a failure, not a skip, when absent.

Import the fixture into a test module: `from tests.support.docker_daemon import client`.
"""

from __future__ import annotations

import pytest
from docker import DockerClient

from runner.backends.policy import DaemonUnavailable, connect


@pytest.fixture(scope="session")
def client() -> DockerClient:
    try:
        return connect()
    except DaemonUnavailable as exc:
        pytest.fail(str(exc))


def docker_skip_reason(name: str = "asymptote") -> str | None:
    """Why the docker backend cannot check `name` here, or None: it runs on the locked image, or
    on a drifted rebuild this machine recorded (the backend says so), never on a stale tag."""
    from runner.core.settings import Settings
    from runner.images.api import list_images
    from runner.images.lock import Kit
    from runner.images.machine import state_path
    from runner.images.state import ImageState

    try:
        states = {
            status.name: status.state
            for status in list_images(Kit.open(), state_path(Settings().cache_dir))
        }
    except Exception as exc:  # noqa: BLE001 - no daemon, no lock: all the same to this test
        return f"no Docker daemon answered to list the images ({exc})"
    state = states.get(name)
    if state not in (ImageState.PRESENT, ImageState.DRIFTED):
        return (
            f"the {name} image is neither locked nor a recorded rebuild here (state: {state}): "
            f"`prooflock images build {name}` (with --allow-drift if its closure is gone)"
        )
    return None
