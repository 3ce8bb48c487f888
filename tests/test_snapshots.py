"""Booted servers kept as CRIU snapshots and restored into fresh containers (docker backend), on a
small shell server in the HOL Light image (any image with a shell would do): what a user relies
on is that a restored server is the booted one, in the state it booted to, that nothing a
checked file runs in it gets what CRIU needed, and that a snapshot that cannot be used costs a
boot, never a check.

HOL Light's own servers, restored against booted, are in tests/test_hol_light_snapshots.py.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.backends.docker import DockerBackend
from runner.backends.docker_snapshots import DockerSnapshots
from runner.backends.snapshot.store import Store
from runner.core.models import Limits
from runner.core.settings import Settings
from runner.images.resolver import LockedImages
from runner.provers.common.server import SandboxServer, ServerSpec

IMAGE = "hol-light"
LIMITS = Limits(timeout_s=60, memory_mb=512, pids=128)
# Its token is drawn at boot: a server that answers with the kept token did not boot again.
SERVER = r"""
token=$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
echo "booting"
echo "READY $token"
n=0
while read -r line; do
  n=$((n + 1))
  case "$line" in
    probe)
      userns=$( (unshare -U true 2>&1; echo "rc=$?") | tr '\n' ' ')
      snapshot=$( (ls /snapshot 2>&1; echo "rc=$?") | tr '\n' ' ')
      echo "OUT $n $token userns: $userns; snapshot: $snapshot";;
    syscalls) chmod +x probe; echo "OUT $n $token $(./probe 2>&1 | tr '\n' ' ')";;
    *) echo "OUT $n $token $line";;
  esac
done
"""


# Each call's outcome as the server's children see it: the guard allows only what it names.
PROBE = r"""
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
static void said(const char *name, long rc) { printf("%s=%s\n", name, rc < 0 ? strerrorname_np(errno) : "ok"); }
int main(void) {
  said("getppid", syscall(SYS_getppid));
  said("process_madvise", syscall(SYS_process_madvise, -1, NULL, 0, 0, 0));
  said("unshare", syscall(SYS_unshare, CLONE_NEWUSER));
  said("ptrace", syscall(SYS_ptrace, 0, 0, 0, 0));
  said("clone3", syscall(SYS_clone3, NULL, 0));
  return 0;
}
"""


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A static binary, so that it runs in any image."""
    folder = tmp_path_factory.mktemp("probe")
    (folder / "probe.c").write_text(PROBE)
    subprocess.run(["cc", "-static", "-o", "probe", "probe.c"], cwd=folder, check=True)
    return (folder / "probe").read_bytes()


def spec(keep: bool = True, boot_first: str = "", probe: bytes = b"") -> ServerSpec:
    files = {"server.sh": (boot_first + SERVER).encode()}
    if probe:
        files["probe"] = probe
    return ServerSpec(
        name="test server",
        argv=["sh", "server.sh"],
        ready=b"READY ",
        boot_timeout_s=60,
        files=files,
        snapshot=lambda sandbox, line: keep,
    )


@pytest.fixture(scope="module")
def snapshot_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("snapshots")


@pytest.fixture
def backend(snapshot_dir: Path, tmp_path: Path) -> Iterator[tuple[DockerBackend, list[str]]]:
    notes: list[str] = []
    docker = DockerBackend(
        Settings(backend="docker", cache_dir=tmp_path / "cache"), LockedImages(Settings())
    )
    docker.snapshots = DockerSnapshots(docker, snapshot_dir, notes.append)
    servers.clear()
    yield docker, notes
    for server in servers:
        server.close()
    docker.close()


servers: list[SandboxServer] = []  # closed after each test, passed or not


def started(docker: DockerBackend, server_spec: ServerSpec) -> SandboxServer:
    assert isinstance(docker.snapshots, DockerSnapshots)
    server = SandboxServer(docker, IMAGE, LIMITS, server_spec, docker.snapshots._notify)
    servers.append(server)
    server.start()
    return server


def ask(server: SandboxServer, line: str) -> list[str]:
    return server.exchange(line.encode() + b"\n", b"\n", 30).decode().strip().split(maxsplit=3)


def kept(snapshot_dir: Path) -> list[Path]:
    """The snapshots kept so far (not the CRIU bundle)."""
    return [path for path in snapshot_dir.iterdir() if path.name != "criu"]


def forget(snapshot_dir: Path) -> None:
    for path in kept(snapshot_dir):
        Store(snapshot_dir).discard(path.name)


def booted_and_answering(server: SandboxServer) -> None:
    assert "restored_from" not in server.info()
    assert ask(server, "hi")[:2] == ["OUT", "1"]


@pytest.mark.slow
@pytest.mark.docker
def test_a_boot_is_kept_once_and_later_servers_start_from_it_in_its_state(backend, snapshot_dir):
    docker, _ = backend
    forget(snapshot_dir)
    first = started(docker, spec())
    token = first.ready_line.decode()
    assert first.info()["restored_from"]  # the boot was dumped, then restored
    assert ask(first, "hello") == ["OUT", "1", token, "hello"]
    first.close()

    second = started(docker, spec())
    assert second.ready_line.decode() == token  # the kept boot, not another one
    # the state the boot reached, before any request: its count starts again at 1
    assert ask(second, "again") == ["OUT", "1", token, "again"]
    assert ask(second, "more") == ["OUT", "2", token, "more"]
    restored = second.info()["restored_from"]
    assert isinstance(restored, dict)
    assert restored["criu"].startswith("criu 4.")


@pytest.mark.slow
@pytest.mark.docker
def test_what_a_restored_server_runs_gets_no_namespaces_and_cannot_read_snapshots(backend):
    docker, _ = backend
    server = started(docker, spec())
    answer = ask(server, "probe")[3]
    assert "unshare failed: Operation not permitted rc=1" in answer
    assert "cannot open directory '/snapshot': Permission denied rc=2" in answer


@pytest.mark.slow
@pytest.mark.docker
def test_a_restored_server_may_make_only_the_calls_the_guard_names(backend, probe):
    docker, _ = backend
    started(docker, spec(probe=probe)).close()  # kept
    server = started(docker, spec(probe=probe))
    assert server.info()["restored_from"]
    # A restored server's pipes live as long as its restore script waits for it: still there
    # after the script's first waits (a script that stopped waiting closed them within a second).
    time.sleep(3)
    # Docker's profile lets process_madvise through to the kernel (EBADF: no such pidfd) in a
    # container with CAP_SYS_PTRACE; the guard does not name it, so it never gets there.
    outcomes = dict(word.split("=") for word in ask(server, "syscalls")[3].split())
    assert outcomes == {
        "getppid": "ok",
        "process_madvise": "EPERM",
        "unshare": "EPERM",
        "ptrace": "EPERM",
        "clone3": "ENOSYS",
    }
    # The container a checked file runs in keeps Docker's own allow-list and no spare capability.
    assert server.sandbox is not None
    host = docker.api.inspect_container(server.sandbox.container_id)["HostConfig"]
    assert not any("seccomp" in option for option in host["SecurityOpt"])
    assert not {"CAP_KILL", "CAP_NET_ADMIN", "KILL", "NET_ADMIN"} & set(host["CapAdd"])


@pytest.mark.slow
@pytest.mark.docker
def test_a_snapshot_that_does_not_restore_is_dropped_and_the_server_boots(backend, snapshot_dir):
    docker, notes = backend
    forget(snapshot_dir)
    started(docker, spec()).close()  # kept
    (snapshot,) = kept(snapshot_dir)
    kept_token = (snapshot / "ready").read_text().split()[-1]
    (snapshot / "images" / "inventory.img").write_bytes(b"")  # CRIU cannot read it

    server = started(docker, spec())
    booted_and_answering(server)
    assert server.ready_line.decode() != kept_token
    assert any("snapshot did not restore" in note for note in notes), notes
    assert not snapshot.exists()  # dropped: the next start keeps a new one


@pytest.mark.slow
@pytest.mark.docker
def test_a_boot_the_adapter_rejects_is_never_kept(backend, snapshot_dir):
    docker, notes = backend
    forget(snapshot_dir)
    booted_and_answering(started(docker, spec(keep=False)))
    assert kept(snapshot_dir) == []
    assert any("not one to keep" in note for note in notes), notes


@pytest.mark.slow
@pytest.mark.docker
def test_a_server_that_cannot_boot_under_the_guard_boots_without_a_snapshot(backend, snapshot_dir):
    docker, notes = backend
    forget(snapshot_dir)
    # `personality` is one of the calls the guard refuses, and Docker's own profile allows
    booted_and_answering(started(docker, spec(boot_first="setarch x86_64 true || exit 1\n")))
    assert kept(snapshot_dir) == []
    assert any("was not kept as a snapshot" in note for note in notes), notes


def test_a_dump_cut_short_is_never_found_and_a_newer_snapshot_replaces_its_family(tmp_path):
    store = Store(tmp_path)
    staging = store.staging("k1")
    (staging / "images").mkdir()
    assert store.find("k1") is None  # no meta.json: a crash mid-dump leaves nothing usable
    first = store.commit(staging, "k1", {"family": "image worker"})
    assert store.find("k1") == first and first.meta["family"] == "image worker"
    other = store.commit(store.staging("k2"), "k2", {"family": "image replayer"})
    newer = store.commit(store.staging("k3"), "k3", {"family": "image worker"})
    assert store.find("k1") is None  # replaced by the newer boot of the same server
    assert store.find("k2") == other and store.find("k3") == newer
