"""A check on a reused sandbox starts from the state a fresh sandbox has.

Given a check that leaves every kind of state a sandbox can hold (SysV shared memory, a
semaphore set and a message queue, which outlive every process; a POSIX message queue; files in
/tmp, /dev/shm and the work dir, some unreadable), the next check on the same warm container,
or in the local backend's next sandbox or command, finds none of it. Docker runs both paths: the
in-container agent (rocq's image) and the exec fallback the kit uses for images without python3.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.backends.docker import DockerBackend
from runner.backends.local import LocalBackend
from runner.core.models import Limits
from runner.core.settings import Settings
from runner.images.resolver import LockedImages

LIMITS = Limits(timeout_s=30, memory_mb=512, pids=64)

# util-linux's ipcmk makes the SysV objects (no compiler or python3 needed, so the exec path's
# images can plant them too); a file created in the mqueue fs is a POSIX queue.
PLANT = """
ipcmk -M 16777216 && ipcmk -S 4 && ipcmk -Q || exit 9
: > /dev/mqueue/left || exit 9
echo x > /tmp/left; echo x > /dev/shm/left; echo x > ./left; echo x > ./.hidden
mkdir -p ./locked/in && echo x > ./locked/in/f && chmod 000 ./locked/in ./locked
"""
LOOK = """
echo "== files"; ls -A . /tmp /dev/shm /dev/mqueue
echo "== sysv"; tail -q -n +2 /proc/sysvipc/shm /proc/sysvipc/sem /proc/sysvipc/msg
"""
EMPTY_DIRS = [".:", "/dev/mqueue:", "/dev/shm:", "/tmp:"]


def sh(box, script: str):
    return box.run(["sh", "-c", script], timeout_s=20)


def planted(box) -> None:
    done = sh(box, PLANT + LOOK)
    assert done.exit_code == 0, done.stderr
    files, sysv = done.stdout.decode().split("== files\n")[1].split("== sysv\n")
    assert len(sysv.splitlines()) == 3 and "left" in files  # the state is really there


def looked(box) -> tuple[list[str], str]:
    done = sh(box, LOOK)
    files, sysv = done.stdout.decode().split("== files\n")[1].split("== sysv\n")
    return sorted(files.split()), sysv


@pytest.fixture(scope="module", params=["agent", "exec"])
def warm_docker(request):
    backend = DockerBackend(Settings(backend="docker", isolation="warm"), LockedImages(Settings()))
    backend.use_agent = request.param == "agent"
    yield backend
    backend.close()


@pytest.mark.docker
def test_a_warm_container_keeps_nothing_a_check_left(warm_docker):
    with warm_docker.sandbox("rocq", LIMITS) as first:
        assert (first.agent is not None) == warm_docker.use_agent
        planted(first)
    with warm_docker.sandbox("rocq", LIMITS) as second:
        assert second.container_id == first.container_id  # reused, not made afresh
        files, sysv = looked(second)
    assert files == EMPTY_DIRS
    assert sysv == ""


@pytest.fixture
def local(tmp_path: Path) -> LocalBackend:
    """The local backend, where bubblewrap confines it (the only case with state to keep)."""
    backend = LocalBackend(Settings(cache_dir=tmp_path / "cache"), notify=lambda line: None)
    if backend.info.isolation == "bubblewrap":
        return backend
    pytest.skip("no bubblewrap on this machine")


def test_the_next_local_sandbox_keeps_nothing_a_check_left(local):
    with local.sandbox("test", LIMITS) as first:
        planted(first)
    with local.sandbox("test", LIMITS) as second:
        files, sysv = looked(second)
    assert files == EMPTY_DIRS
    assert sysv == ""


def test_the_next_local_command_keeps_only_the_work_dir(local):
    """Commands of one check share its work dir, and nothing else."""
    with local.sandbox("test", LIMITS) as box:
        planted(box)
        files, sysv = looked(box)
    assert files == [".:", ".hidden", "/dev/mqueue:", "/dev/shm:", "/tmp:", "left", "locked"]
    assert sysv == ""
