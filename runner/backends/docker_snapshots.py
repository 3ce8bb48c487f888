"""Booted servers kept as CRIU snapshots, restored into fresh containers (docker backend).

Making one: a container with CRIU's capabilities boots the server as the check user. The server runs
under the guard (snapshot/guard.c: no new privileges, its own seccomp filter). The kit waits for the
ready line. Then CRIU dumps the server into a staging directory, before any request. The container
is removed and the snapshot committed (snapshot/store.py).

Starting from one: a fresh container of the same image ID gets the server's work and /tmp files
back. `criu restore` brings the process tree back, its stdin and stdout bound to the new exec's
pipes. The kit reads the boot's ready line, kept with the snapshot, and talks to the server as to a
booted one.

What such a container allows:
- CRIU needs CAP_SYS_ADMIN, CAP_SYS_PTRACE and a few file and id capabilities (RESTORE_CAPS,
  each measured). The rest of the kit's hardening stays.
- A restoring container, where checked files run, keeps Docker's default seccomp allow-list.
  Only the dumping one has none. No checked file runs there, and the kernel suspends a tracee's
  filter only for an unfiltered tracer.
- CRIU runs as root with the server's real uid. Running prlimit on another uid's process needs
  CAP_SYS_RESOURCE, which not every host grants. Root's scripts run only the image's own binaries.
- The server, and all a checked file starts, run as the check user without capabilities. They
  run under the guard's allow-list: no namespaces, mounts or ptrace. The dump keeps that filter;
  the restore puts it back.
- Restoring containers get the snapshot read-only, root's only. Only the dumping container may
  write it, and it is removed before any request.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from runner.backends.base import KeptSnapshot, SnapshotFailed
from runner.backends.docker import DAEMON_ERRORS, DockerChannel, DockerSandbox
from runner.backends.policy import CHECK_USER, hardened
from runner.backends.snapshot import criu
from runner.backends.snapshot.store import Snapshot, Store, key_of
from runner.core.messages import Notify
from runner.core.models import Limits

if TYPE_CHECKING:
    from runner.backends.docker import DockerBackend

FORMAT = "1"  # of the scripts below and what a snapshot holds: part of every key
MOUNT = "/snapshot"
ROOT = "0:0"
# Measured one by one (Docker 20.10, kernel 6.18, CRIU 4.1): a restore fails without any of these.
# It does not need CAP_KILL and CAP_NET_ADMIN. CRIU would take CAP_CHECKPOINT_RESTORE for
# CAP_SYS_ADMIN, but Docker 20.10 refuses to grant it ("unknown capability"). A restore works under
# Docker's default seccomp profile.
RESTORE_CAPS = ["SYS_ADMIN", "SYS_PTRACE", "SETUID", "SETGID", "DAC_OVERRIDE", "FOWNER"]
RESTORE_CAPS += ["SETPCAP", "CHOWN"]
RESTORE_SECCOMP: list[str] = []
# A dump must suspend the server's own filter. The kernel allows that only to an unfiltered tracer.
# This container runs no checked file: it is removed before any request.
DUMP_CAPS = RESTORE_CAPS
DUMP_SECCOMP = ["seccomp=unconfined"]
STATE = "/dev/shm/prooflock-server"  # the spawned server's pid and pipes (not in the snapshot)
CRIU_WORK = "/dev/shm/prooflock-criu"
PID_FLOOR = 300  # dumped pids stay above what a restoring container's own processes take
DUMP_TIMEOUT_S = 600
UID, GID = CHECK_USER.split(":")
# What root's scripts run comes from the image's read-only root (by its ID), never a writable dir.
ROOT_PATH = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
AS_SERVER_OWNER = f"setpriv --ruid {UID} --euid 0 --rgid {GID} --egid 0 --clear-groups"

# $1: the guard; the rest, the server's argv. Records its pid and its stdio's pipes first.
SPAWN = f"""
echo $$ > {STATE}.pid
pipes=$(readlink /proc/$$/fd/0 /proc/$$/fd/1)  # dash redirects its own fds for a command
echo $pipes > {STATE}.fds
exec "$@" 2>&1
"""
BURN_PIDS = f"n=0; while [ $n -lt {PID_FLOOR} ]; do (:); n=$((n+1)); done"
DUMP = f"""
set -e
pid=$(cat {STATE}.pid)
mkdir -p {MOUNT}/images {CRIU_WORK}
cp {STATE}.fds {MOUNT}/fds
tar -C / -cpf {MOUNT}/files.tar work tmp
{AS_SERVER_OWNER} "$0" dump --unprivileged -t "$pid" -D {MOUNT}/images -W {CRIU_WORK} \\
    -o dump.log --network-lock skip || {{ grep -h Error {CRIU_WORK}/dump.log | tail -3; exit 1; }}
"""
# $0: CRIU. Restores the server detached, its stdio bound to this exec's pipes. Then prints the
# boot's ready line, and stays until the server exits: the exec's streams are the server's.
RESTORE = f"""
set -e
tar -C / -xpf {MOUNT}/files.tar
mkdir -p {CRIU_WORK}
read -r stdin_pipe stdout_pipe < {MOUNT}/fds_line
if ! {AS_SERVER_OWNER} "$0" restore --unprivileged -d -D {MOUNT}/images -W {CRIU_WORK} \\
    -o restore.log --pidfile {CRIU_WORK}/restored.pid \\
    --inherit-fd "fd[0]:$stdin_pipe" --inherit-fd "fd[1]:$stdout_pipe"; then
  echo "@@PROOFLOCK-RESTORE-FAILED"; grep -h Error {CRIU_WORK}/restore.log | tail -3; exit 1
fi
pid=$(cat {CRIU_WORK}/restored.pid)
cat {MOUNT}/ready
while [ -d "/proc/$pid" ]; do sleep 1; done  # kill -0 would need CAP_KILL: the server is not root's
"""


@dataclass
class _Made:
    staging: Path
    key: str
    family: str


class SnapshotBox(DockerSandbox):
    """A container with CRIU's capabilities (see the module's doc), driven by exec."""

    def __init__(self, backend: DockerBackend, container_id: str, cpus: int, bundle: criu.Bundle):
        super().__init__(backend.api, container_id, "strict", cpus)
        self.bundle = bundle

    def run_as_root(self, script: str, *args: str, deadline_s: float) -> tuple[int | None, str]:
        code, out, err, missed = self._exec(
            ["sh", "-c", script, *args], deadline_s=deadline_s, user=ROOT, env=ROOT_PATH
        )
        text = (out + err).decode("utf-8", errors="replace").strip()
        return (None if missed else code), text


class DumpingBox(SnapshotBox):
    """Boots the server under the guard; `keep` dumps it."""

    def __init__(
        self,
        backend: DockerBackend,
        container_id: str,
        cpus: int,
        bundle: criu.Bundle,
        made: _Made,
        store: Store,
    ):
        super().__init__(backend, container_id, cpus, bundle)
        self._made, self._store = made, store

    def spawn(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> DockerChannel:
        # the bundle is there (a daemon on another host mounts an empty directory instead)
        ready = f"[ -x {self.bundle.guard} ] && {self.bundle.criu} --version >/dev/null"
        code, text = self.run_as_root(f"{ready} && {BURN_PIDS}", deadline_s=120)
        if code != 0:
            raise SnapshotFailed(f"the container cannot run CRIU: {text[-200:] or code}")
        return self._spawn(["sh", "-c", SPAWN, "sh", self.bundle.guard, *argv], env=env)

    def keep(self, transcript: bytes, boot_ms: int) -> Snapshot:
        """Dump the booted server (it stops) and commit the snapshot."""
        made = self._made
        clock = time.monotonic()
        code, text = self.run_as_root(DUMP, self.bundle.criu, deadline_s=DUMP_TIMEOUT_S)
        if code != 0:
            self._store.abandon(made.staging)
            raise SnapshotFailed(f"CRIU could not dump it: {text[-300:] or 'no output'}")
        fds = (made.staging / "fds").read_text().split()
        if len(fds) != 2 or not all(fd.startswith("pipe:[") for fd in fds):
            self._store.abandon(made.staging)
            raise SnapshotFailed(f"the server's stdio is not two pipes: {fds}")
        (made.staging / "fds_line").write_text(" ".join(fds) + "\n")
        (made.staging / "ready").write_bytes(transcript)
        meta = {
            "family": made.family,
            "boot_ms": boot_ms,
            "dump_ms": int((time.monotonic() - clock) * 1000),
            "criu": self.bundle.version,
            "made": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        return self._store.commit(made.staging, made.key, meta)


class RestoringBox(SnapshotBox):
    """Its `spawn` restores the snapshot's server (the argv was the snapshot's own)."""

    def spawn(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> DockerChannel:
        env = {**(env or {}), **ROOT_PATH}
        return self._spawn(["sh", "-c", RESTORE, self.bundle.criu], env=env, user=ROOT)


class DockerSnapshots:
    """The docker backend's snapshots (`Snapshots` in backends/base.py)."""

    def __init__(self, backend: DockerBackend, root: Path, notify: Notify):
        self.backend = backend
        self.store = Store(root)
        self._notify = notify
        self._bundle: criu.Bundle | None = None
        self._unavailable: str | None = None
        self._lock = threading.Lock()

    def _criu(self) -> criu.Bundle | None:
        with self._lock:  # checks at once: one of them makes the bundle
            if self._bundle is None and self._unavailable is None:
                try:
                    self._bundle = criu.bundle(self.store.root, self.backend.settings.apt_mirror)
                except criu.CriuUnavailable as exc:
                    self._unavailable = str(exc)
                    self._notify(f"no CRIU for snapshots here ({exc}): servers boot every time")
            return self._bundle

    def key(self, image: str, server: str) -> str | None:
        bundle = self._criu()
        if bundle is None:
            return None
        image_id = self.backend.usable(image).image_id
        return key_of(FORMAT, image_id, server, bundle.version)

    def family(self, image: str, name: str) -> str:
        return f"{self.backend.usable(image).image_id} {name}"

    def find(self, key: str) -> Snapshot | None:
        return self.store.find(key)

    def discard(self, key: str) -> None:
        self.store.discard(key)

    @contextlib.contextmanager
    def dumping(self, image: str, limits: Limits, key: str, family: str) -> Iterator[DumpingBox]:
        bundle = self._criu()
        assert bundle is not None
        staging = self.store.staging(key)
        made = _Made(staging, key, family)
        try:
            box = self._create(image, limits, bundle, staging, writable=True)
            with self._removed(box):
                yield DumpingBox(self.backend, box, limits.cpus, bundle, made, self.store)
        finally:
            if staging.exists():
                self.store.abandon(staging)

    @contextlib.contextmanager
    def restoring(
        self, image: str, limits: Limits, snapshot: KeptSnapshot
    ) -> Iterator[RestoringBox]:
        bundle = self._criu()
        kept = self.store.find(snapshot.key)
        if bundle is None or kept is None:
            raise SnapshotFailed("the snapshot is gone")
        box = self._create(image, limits, bundle, kept.path, writable=False)
        with self._removed(box):
            yield RestoringBox(self.backend, box, limits.cpus, bundle)

    @contextlib.contextmanager
    def _removed(self, container_id: str) -> Iterator[None]:
        try:
            yield
        finally:
            self.backend._discard(container_id)

    def _create(
        self, image: str, limits: Limits, bundle: criu.Bundle, snapshot: Path, *, writable: bool
    ) -> str:
        config = hardened(
            self.backend.usable(image).image_id,
            limits,
            command=["sleep", "infinity"],
            user=ROOT,  # an exec as root has the capabilities only when the container's user is
            labels=self.backend._labels(),
        )
        config["cap_add"] = DUMP_CAPS if writable else RESTORE_CAPS
        config["security_opt"] += DUMP_SECCOMP if writable else RESTORE_SECCOMP
        config["volumes"] = {
            str(bundle.path): {"bind": criu.MOUNT, "mode": "ro"},
            str(snapshot): {"bind": MOUNT, "mode": "rw" if writable else "ro"},
        }
        container_id = self.backend._create_container(config)
        try:
            self.backend.api.start(container_id)
        except DAEMON_ERRORS as exc:
            self.backend._discard(container_id)
            raise SnapshotFailed(f"cannot start a snapshot container: {_short(exc)}") from exc
        return container_id


def _short(exc: Exception) -> str:
    return " ".join(str(exc).split())[:200]
