"""Docker backend: every command runs in a hardened container from the prover's pinned image.

Hardening: no network (loopback only), read-only root, tmpfs work dir and /tmp, all capabilities
dropped, no-new-privileges, an unprivileged user, memory (no swap), pid and CPU limits, and an
init process. Files travel over the exec's stdin, never through a host mount.

Isolation `strict` makes a fresh container per sandbox (per check); `warm` reuses containers
through exec, killing every process the check left and wiping its writable dirs in between.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

import docker
from docker.errors import DockerException, ImageNotFound, NotFound
from docker.utils.socket import frames_iter_no_tty

from runner.backends.base import BackendInfo, BackendUnavailable, Completed, Limits, checked_relpath
from runner.backends.local import OUT_OF_MEMORY_SIGNS
from runner.backends.stream import StreamBuffer
from runner.errors import UserError
from runner.settings import Settings

WORKDIR = "/work"
CHECK_USER = "1000:1000"  # runs the prover
KEEPALIVE_USER = "65534:65534"  # owns the container's idle process, out of CHECK_USER's reach
LABEL = "org.prooflock.sandbox"
BASE_ENV = {"HOME": WORKDIR, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TZ": "UTC"}
# Runs a command under coreutils `timeout` (which kills its whole process group), then reports
# the children's CPU time with `times` on stderr's last line.
TIMED = 'timeout -k 2 "$0" "$@"; s=$?; times >&2; exit $s'
TIMES_LINES = re.compile(rb"\n?\d+m[\d.]+s \d+m[\d.]+s\n(\d+)m([\d.]+)s (\d+)m([\d.]+)s\n?$")
# Slack for the host-side deadline beyond the in-container timeout (exec start-up, `times`).
HOST_SLACK_S = 30
START_HINT = (
    "start it (`dockerd > /var/log/dockerd.log 2>&1 &`, or `systemctl start docker`), "
    "or use --backend local"
)


def _demux(sock: Any, out: StreamBuffer, err: StreamBuffer | None) -> threading.Thread:
    """Copy a non-tty exec stream into buffers (stderr into `out` too when `err` is None)."""

    def loop() -> None:
        try:
            for stream, chunk in frames_iter_no_tty(sock):
                (err if stream == 2 and err is not None else out).feed(chunk)
        except (OSError, ValueError):
            pass
        finally:
            out.finish()
            if err is not None:
                err.finish()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    return thread


def _raw(sock: Any) -> socket.socket:
    return getattr(sock, "_sock", sock)


class DockerChannel:
    """A long-lived process in a container, spoken to over the exec's stdin and stdout."""

    def __init__(self, api: docker.APIClient, exec_id: str, sock: Any):
        self._api, self._exec_id, self._sock = api, exec_id, sock
        self._buffer = StreamBuffer()
        _demux(_raw(sock), self._buffer, None)

    def send(self, data: bytes) -> None:
        try:
            _raw(self._sock).sendall(data)
        except OSError as exc:
            raise EOFError("worker process has exited") from exc

    def read_until(self, marker: bytes, timeout_s: float) -> bytes:
        return self._buffer.read_until(marker, timeout_s)

    def alive(self) -> bool:
        try:
            return bool(self._api.exec_inspect(self._exec_id)["Running"])
        except DockerException:
            return False

    def close(self) -> None:
        with contextlib.suppress(OSError):
            _raw(self._sock).shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self._sock.close()


class DockerSandbox:
    backend = "docker"

    def __init__(self, api: docker.APIClient, container_id: str, isolation: str):
        self.api = api
        self.container_id = container_id
        self.isolation = isolation
        self.broken = False  # a sandbox that missed a deadline is never reused
        self._oom_kills = 0  # a fresh container has none; reset() re-reads it for reuse

    def _exec(
        self,
        cmd: Sequence[str],
        *,
        stdin: bytes | None = None,
        env: Mapping[str, str] | None = None,
        deadline_s: float,
    ) -> tuple[int | None, bytes, bytes, bool]:
        """(exit code, stdout, stderr, missed deadline) of one exec as the check user."""
        try:
            exec_id = self.api.exec_create(
                self.container_id,
                list(cmd),
                stdin=stdin is not None,
                user=CHECK_USER,
                workdir=WORKDIR,
                environment={**BASE_ENV, **(env or {})},
            )["Id"]
            sock = self.api.exec_start(exec_id, socket=True)
        except DockerException as exc:
            raise BackendUnavailable(f"docker exec failed: {exc}") from exc
        out, err = StreamBuffer(), StreamBuffer()
        reader = _demux(_raw(sock), out, err)
        if stdin is not None:
            with contextlib.suppress(OSError):
                _raw(sock).sendall(stdin)
                _raw(sock).shutdown(socket.SHUT_WR)
        reader.join(deadline_s)
        missed = reader.is_alive()
        with contextlib.suppress(OSError):
            sock.close()
        if missed:
            self.broken = True
            return None, out.take(), err.take(), True
        try:
            exit_code = self.api.exec_inspect(exec_id)["ExitCode"]
        except DockerException as exc:
            raise BackendUnavailable(f"docker exec inspect failed: {exc}") from exc
        return exit_code, out.take(), err.take(), False

    def _read_oom_kills(self) -> int:
        """The container's OOM-kill count (cgroup v1 memory.oom_control, or v2 memory.events)."""
        probe = "cat /sys/fs/cgroup/memory/memory.oom_control /sys/fs/cgroup/memory.events 2>/dev/null"
        _, out, _, _ = self._exec(["sh", "-c", probe + "; true"], deadline_s=30)
        match = re.search(rb"^oom_kill (\d+)$", out, re.MULTILINE)
        return int(match[1]) if match else 0

    def write_file(self, relpath: str, data: bytes) -> None:
        path = f"{WORKDIR}/{checked_relpath(relpath)}"
        script = 'mkdir -p "$(dirname "$0")" && cat > "$0"'
        code, _, err, _ = self._exec(["sh", "-c", script, path], stdin=data, deadline_s=120)
        if code != 0:
            raise BackendUnavailable(f"cannot write {relpath} in the container: {err.decode(errors='replace')}")

    def read_file(self, relpath: str) -> bytes:
        path = f"{WORKDIR}/{checked_relpath(relpath)}"
        code, out, _, _ = self._exec(["cat", path], deadline_s=120)
        if code != 0:
            raise FileNotFoundError(relpath)
        return out

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
    ) -> Completed:
        started = time.monotonic()
        code, out, err, missed = self._exec(
            ["sh", "-c", TIMED, f"{timeout_s:g}", *argv],
            stdin=stdin,
            env=env,
            deadline_s=timeout_s + HOST_SLACK_S,
        )
        wall_s = time.monotonic() - started
        cpu_ms = None
        if (times := TIMES_LINES.search(err)) is not None:
            user_m, user_s, sys_m, sys_s = (float(g) for g in times.groups())
            cpu_ms = int((user_m * 60 + user_s + sys_m * 60 + sys_s) * 1000)
            err = err[: times.start()]
        timed_out = missed or code == 124 or (code == 137 and wall_s >= timeout_s)
        out_of_memory = False
        if not timed_out and code is not None and code >= 128:
            kills = self._read_oom_kills()
            out_of_memory, self._oom_kills = kills > self._oom_kills, kills
        tail = (out[-4096:] + err[-4096:]).lower()
        out_of_memory = out_of_memory or (
            not timed_out and code != 0 and any(s in tail for s in OUT_OF_MEMORY_SIGNS)
        )
        return Completed(
            argv=list(argv),
            exit_code=None if timed_out else code,
            stdout=out,
            stderr=err,
            timed_out=timed_out,
            out_of_memory=out_of_memory,
            signal=code - 128 if code is not None and code > 128 and not timed_out else None,
            wall_ms=int(wall_s * 1000),
            cpu_ms=cpu_ms,
        )

    def spawn(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> DockerChannel:
        try:
            exec_id = self.api.exec_create(
                self.container_id,
                ["sh", "-c", 'exec "$@" 2>&1', "sh", *argv],
                stdin=True,
                user=CHECK_USER,
                workdir=WORKDIR,
                environment={**BASE_ENV, **(env or {})},
            )["Id"]
            return DockerChannel(self.api, exec_id, self.api.exec_start(exec_id, socket=True))
        except DockerException as exc:
            raise BackendUnavailable(f"docker exec failed: {exc}") from exc

    def reset(self) -> bool:
        """Kill whatever the check left running and wipe the writable dirs; False if that failed."""
        wipe = (
            "kill -9 -1 2>/dev/null; "
            f"find {WORKDIR} /tmp /dev/shm -mindepth 1 -delete 2>/dev/null; "
            f'test -z "$(find {WORKDIR} /tmp /dev/shm -mindepth 1 -print -quit)"'
        )
        try:
            code, _, _, missed = self._exec(["sh", "-c", wipe], deadline_s=60)
            self._oom_kills = self._read_oom_kills()
        except BackendUnavailable:
            return False
        return code == 0 and not missed and not self.broken


class DockerBackend:
    def __init__(self, settings: Settings):
        self.settings = settings
        try:
            self.client = docker.from_env(timeout=300)
            server = self.client.version()
        except DockerException as exc:
            host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
            raise BackendUnavailable(f"Docker daemon not reachable at {host}: {START_HINT}") from exc
        self.api = self.client.api
        self.info = BackendInfo(
            name="docker",
            isolation=settings.isolation,
            tools={"docker_server": server.get("Version", "?"), "docker_api": server.get("ApiVersion", "?")},
        )
        self._warm: dict[tuple[str, Limits], list[DockerSandbox]] = {}
        self._lock = threading.Lock()
        self._owner = f"{socket.gethostname()}:{os.getpid()}"
        self._remove_orphans()

    def tag(self, image: str) -> str:
        from runner.images.lock import load_lock  # the lock is only needed once docker is used

        try:
            return load_lock(self.settings.images_lock).tag(image)
        except UserError as exc:
            raise BackendUnavailable(str(exc)) from None

    def environment(self, image: str, probe: Mapping[str, Sequence[str]]) -> dict[str, object]:
        tag = self.tag(image)
        try:
            image_id = self.client.images.get(tag).id
        except ImageNotFound:
            raise BackendUnavailable(
                f"image {tag} is not built here: run `prooflock images build {image}`"
            ) from None
        except DockerException as exc:
            raise BackendUnavailable(f"Docker daemon failed: {exc}; {START_HINT}") from exc
        return {"kind": "docker", "image": tag, "image_id": image_id}

    def _create(self, image: str, limits: Limits) -> DockerSandbox:
        isolation = self.settings.isolation
        try:
            container = self.client.containers.create(
                self.tag(image),
                command=["sleep", "infinity"],
                user=KEEPALIVE_USER,
                working_dir=WORKDIR,
                network_mode="none",
                read_only=True,
                tmpfs={
                    WORKDIR: f"rw,exec,nosuid,nodev,size={limits.tmpfs_mb}m,uid=1000,gid=1000,mode=0700",
                    "/tmp": "rw,exec,nosuid,nodev,size=64m,mode=1777",
                },
                cap_drop=["ALL"],
                security_opt=["no-new-privileges"],
                mem_limit=f"{limits.memory_mb}m",
                memswap_limit=f"{limits.memory_mb}m",
                pids_limit=limits.pids,
                nano_cpus=limits.cpus * 1_000_000_000,
                shm_size="16m",
                init=True,
                labels={LABEL: isolation, f"{LABEL}.owner": self._owner},
            )
            container.start()
        except ImageNotFound:
            raise BackendUnavailable(f"image {self.tag(image)} is not built here: run `prooflock images build {image}`") from None
        except DockerException as exc:
            raise BackendUnavailable(f"cannot start a container: {exc}") from exc
        return DockerSandbox(self.api, container.id, isolation)

    def _remove(self, box: DockerSandbox) -> None:
        with contextlib.suppress(DockerException):
            self.api.remove_container(box.container_id, force=True)

    @contextlib.contextmanager
    def sandbox(self, image: str, limits: Limits) -> Iterator[DockerSandbox]:
        pool = (image, replace(limits, timeout_s=0))  # commands carry their own timeouts
        box = self._take_warm(pool) if self.settings.isolation == "warm" else None
        box = box or self._create(image, limits)
        try:
            yield box
        finally:
            if self.settings.isolation == "warm" and box.reset():
                with self._lock:
                    self._warm.setdefault(pool, []).append(box)
            else:
                self._remove(box)

    def _take_warm(self, pool: tuple[str, Limits]) -> DockerSandbox | None:
        with self._lock:
            idle = self._warm.get(pool, [])
            return idle.pop() if idle else None

    def _remove_orphans(self) -> None:
        """Remove sandboxes left by a prooflock process on this host that no longer runs."""
        host = socket.gethostname()
        try:
            containers = self.api.containers(all=True, filters={"label": LABEL})
        except DockerException:
            return
        for container in containers:
            owner = container.get("Labels", {}).get(f"{LABEL}.owner", "")
            owner_host, _, pid = owner.partition(":")
            if owner_host == host and pid.isdigit() and not _pid_alive(int(pid)):
                with contextlib.suppress(NotFound, DockerException):
                    self.api.remove_container(container["Id"], force=True)

    def close(self) -> None:
        with self._lock:
            boxes = [box for idle in self._warm.values() for box in idle]
            self._warm.clear()
        for box in boxes:
            self._remove(box)
        with contextlib.suppress(Exception):
            self.client.close()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True

