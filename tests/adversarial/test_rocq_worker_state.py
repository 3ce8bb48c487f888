"""Every check on a warm Rocq worker starts from the state a fresh worker has.

One worker serves many checks in one sandbox. A check can write where its sandbox lets it: the
work dir (also inside directories the worker keeps there, such as `srv/`), `/tmp`, `/dev/shm`,
and (with native code, which a Rocq file cannot load from this install, so the kit's own
process stands in for it on docker) System V IPC objects. Whatever one check leaves is gone
before the next; a check that changes what the worker itself keeps retires the worker.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runner.core.models import CheckRequest
from runner.provers.rocq import source, worker
from tests.support.pool_servers import PoolServers
from tests.support.rocq_cheats import BACKENDS, rocq_checker

PLANTS = (
    'Redirect "planted" Print nat.\nRedirect "srv/planted" Print nat.\n'
    'Redirect "/tmp/planted" Print nat.\nRedirect "/dev/shm/planted" Print nat.\n'
    "Lemma t : True.\nProof. exact I. Qed.\n"
)
PLANTED = ("planted.out", "srv/planted.out", "/tmp/planted.out", "/dev/shm/planted.out")
# boot.out is the worker's own, written once at its start.
CHANGES_THE_WORKERS_OWN = 'Redirect "boot" Print nat.\nLemma t : True.\nProof. exact I. Qed.\n'
HONEST = "Lemma t : True.\nProof. exact I. Qed.\n"


@pytest.fixture(scope="module", params=BACKENDS)
def checker(request, tmp_path_factory):
    with rocq_checker(request.param, tmp_path_factory.mktemp("kit")) as checker:
        yield checker


@pytest.fixture
def server(checker):
    server = worker.start(PoolServers(checker), source.prefix(""), key="state-test")
    yield server
    server.close()


def _check(checker, server, text: str) -> worker.Reply:
    request = checker.resolve(CheckRequest(prover="rocq", name="s.v", content=text))
    reply = worker.exchange(server, request, source.prefix(text))
    assert reply.text("COMPILE").startswith("exited 0 "), reply.text("COMPILE_ERR")
    return reply


def _worker_root(server) -> Path:
    """The worker's own view of its sandbox (its /tmp is a tmpfs of its own, locally)."""
    if server.sandbox.backend != "local":
        raise AssertionError("docker sandboxes are read through the container")
    work = os.stat(server.sandbox.root)
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cwd = os.stat(f"/proc/{pid}/cwd")
            exe = os.readlink(f"/proc/{pid}/exe")
        except OSError:
            continue
        if exe.endswith("prooflock-rocq-server") and (cwd.st_dev, cwd.st_ino) == (
            work.st_dev,
            work.st_ino,
        ):
            return Path(f"/proc/{pid}/root")
    raise AssertionError("the worker's process was not found")


def _left(server, paths: tuple[str, ...]) -> list[str]:
    """Which of `paths` (relative: in the work dir) the worker's sandbox still holds."""
    if server.sandbox.backend == "local":
        root = _worker_root(server)
        return [
            p
            for p in paths
            if (root / p.lstrip("/") if p.startswith("/") else root / "work" / p).exists()
        ]
    listed = server.sandbox.run(["ls", "-d", *paths], timeout_s=30)
    return [p for p in paths if p in listed.stdout.decode().split()]


def _ipc_objects(server) -> str:
    done = server.sandbox.run(["sh", "-c", "tail -n +2 -q /proc/sysvipc/*"], timeout_s=30)
    return done.stdout.decode().strip()


def test_what_a_check_writes_is_gone_before_the_next(checker, server):
    _check(checker, server, PLANTS)
    assert _left(server, PLANTED) == []
    reply = _check(checker, server, HONEST)
    assert worker.RETIRE not in reply.fields and not server.retired


def test_a_check_that_changes_the_workers_own_files_retires_it(checker, server):
    reply = _check(checker, server, CHANGES_THE_WORKERS_OWN)
    assert worker.RETIRE in reply.fields and server.retired


@pytest.mark.docker
def test_ipc_objects_a_check_left_are_gone_before_the_next(checker, server):
    if server.sandbox.backend != "docker":
        pytest.skip("locally each sandboxed process tree has an IPC namespace of its own")
    _check(checker, server, HONEST)
    # The kit's process in the worker's container stands in for a check's native code.
    planted = server.sandbox.run(
        ["sh", "-c", "ipcmk -M 4096 && ipcmk -S 1 && ipcmk -Q"], timeout_s=30
    )
    assert planted.ok and _ipc_objects(server)
    _check(checker, server, HONEST)
    assert _ipc_objects(server) == ""
