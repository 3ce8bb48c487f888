"""Docker backend: every command runs in a hardened container from the prover's pinned image.

The hardening is runner.backends.policy's. Which image a check runs in is the ImageResolver's answer
(the Checker builds it from the images lock).

Where the image has python3, the sandbox agent (`sandbox_agent.py`) is the container's PID 1.
Writes, reads, runs and resets are then frames over the attach stream, about a millisecond each.
Elsewhere (HOL Light's image) the container idles under `sleep infinity`, and each operation is one
`docker exec`. `spawn` is always its own exec, so a server's stdin and stdout are its own stream,
untouched by the agent.

Isolation `strict` makes a fresh container per sandbox (per check). In a batch it starts the next
one while the current check runs. `warm` reuses containers. Between checks it kills every process
the check left and wipes its writable dirs. Containers are removed in the background.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import queue
import re
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import docker
from docker.errors import APIError, DockerException, NotFound
from docker.models.containers import _create_container_args
from docker.types import LogConfig
from docker.utils.socket import frames_iter_no_tty
from requests.exceptions import RequestException

from runner.backends import sandbox_agent
from runner.backends.agent_link import AgentLink, AgentLost
from runner.backends.base import (
    OUTPUT_CAP_BYTES,
    BackendInfo,
    Completed,
    Snapshots,
    checked_relpath,
)
from runner.backends.image_resolver import ImageResolver, RunnableImage
from runner.backends.policy import (
    CHECK_USER,
    CPU_PERIOD_US,
    KEEPALIVE_USER,
    LABEL,
    START_HINT,
    WORKDIR,
    connect,
    hardened,
)
from runner.backends.stream import StreamBuffer
from runner.core.errors import BackendUnavailable, InfraFailure
from runner.core.models import Limits
from runner.core.settings import Settings

_DRIFT_SAID: set[str] = set()  # images whose drifted rebuild this process has named on stderr
BASE_ENV = {"HOME": WORKDIR, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TZ": "UTC"}
# Runs a command under coreutils `timeout` (which kills its whole process group), then reports
# the children's CPU time with `times` on stderr's last line.
TIMED = 'timeout -k 2 "$0" "$@"; s=$?; times >&2; exit $s'
TIMES_LINES = re.compile(rb"\n?\d+m[\d.]+s \d+m[\d.]+s\n(\d+)m([\d.]+)s (\d+)m([\d.]+)s\n?$")
# Slack for the host-side deadline beyond the in-container timeout (exec start-up, `times`).
HOST_SLACK_S = 30
# A file read back from the work dir (the tmpfs bounds it long before this).
READ_CAP_BYTES = 1 << 30
AGENT_SOURCE = Path(sandbox_agent.__file__).read_text(encoding="utf-8")
AGENT_DIGEST = hashlib.sha256(AGENT_SOURCE.encode()).hexdigest()
AGENT_COMMAND = ["python3", "-I", "-S", "-c", AGENT_SOURCE]
AGENT_BOOT_S = 60  # python3's start-up, on a loaded machine
# What a warm container's reset empties, the same on the agent and the exec path.
WIPED = " ".join(sandbox_agent.WIPED)
SYSV_TABLES = " ".join(f"/proc/sysvipc/{kind}" for kind in sandbox_agent.SYSV_KINDS)
REMOVE_WAIT_S = 120
Pool = tuple[str, Limits]  # (image, limits without the timeout)
DAEMON_ERRORS = (DockerException, RequestException)
# Read when a backend is made; benchmarks turn them off to time the exec path, or strict
# containers made on demand only.
USE_AGENT = True
SPARE_CONTAINERS = True


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

    def __init__(
        self,
        api: docker.APIClient,
        exec_id: str,
        sock: Any,
        oom_kills: Callable[[], int | None] | None = None,
    ):
        self._api, self._exec_id, self._sock = api, exec_id, sock
        self._oom_kills = oom_kills
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
        except DAEMON_ERRORS:
            return False

    def oom_kills(self) -> int | None:
        """The container's OOM kills since this process started, or None where not counted.

        Read from the container's cgroup files (read-only there) by an exec of the kit's own.
        """
        return self._oom_kills() if self._oom_kills is not None else None

    def close(self) -> None:
        with contextlib.suppress(OSError):
            _raw(self._sock).shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self._sock.close()


class DockerSandbox:
    """A container whose every operation is one `docker exec` (images without python3)."""

    backend = "docker"
    agent: AgentLink | None = None

    def __init__(self, api: docker.APIClient, container_id: str, isolation: str, cpus: int):
        self.api = api
        self.container_id = container_id
        self.isolation = isolation
        self.broken = False  # a sandbox that missed a deadline is never reused
        self._oom_kills = 0  # a fresh container has none; reset() re-reads it for reuse
        self.created_cpus = self.cpus = cpus  # a reused container gets its pool's CPUs back

    def _exec(
        self,
        cmd: Sequence[str],
        *,
        stdin: bytes | None = None,
        env: Mapping[str, str] | None = None,
        deadline_s: float,
        cap: int = OUTPUT_CAP_BYTES,
        user: str = CHECK_USER,
    ) -> tuple[int | None, bytes, bytes, bool]:
        """(exit code, stdout, stderr, missed deadline) of one exec as `user`.

        Stdout past `cap` is dropped (a prover's chatter), unless the caller asks for more.
        """
        try:
            exec_id = self.api.exec_create(
                self.container_id,
                list(cmd),
                stdin=stdin is not None,
                user=user,
                workdir=WORKDIR,
                environment={**BASE_ENV, **(env or {})},
            )["Id"]
            sock = self.api.exec_start(exec_id, socket=True)
        except DAEMON_ERRORS as exc:
            raise BackendUnavailable(f"docker exec failed: {exc}") from exc
        out, err = StreamBuffer(cap), StreamBuffer()
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
        except DAEMON_ERRORS as exc:
            raise BackendUnavailable(f"docker exec inspect failed: {exc}") from exc
        return exit_code, out.take(), err.take(), False

    def _read_oom_kills(self) -> int:
        """The container's OOM-kill count (cgroup v1 memory.oom_control, or v2 memory.events)."""
        probe = (
            "cat /sys/fs/cgroup/memory/memory.oom_control /sys/fs/cgroup/memory.events 2>/dev/null"
        )
        _, out, _, _ = self._exec(["sh", "-c", probe + "; true"], deadline_s=30)
        match = re.search(rb"^oom_kill (\d+)$", out, re.MULTILINE)
        return int(match[1]) if match else 0

    def write_file(self, relpath: str, data: bytes) -> None:
        path = f"{WORKDIR}/{checked_relpath(relpath)}"
        script = 'mkdir -p "$(dirname "$0")" && cat > "$0"'
        code, _, err, _ = self._exec(["sh", "-c", script, path], stdin=data, deadline_s=120)
        if code != 0:
            raise BackendUnavailable(
                f"cannot write {relpath} in the container: {err.decode(errors='replace')}"
            )

    def read_file(self, relpath: str) -> bytes:
        path = f"{WORKDIR}/{checked_relpath(relpath)}"
        # A file is read whole (a HOL Light library export is tens of MB). It is never cut at the
        # cap that bounds a prover's output. A file larger than the work dir's tmpfs cannot exist.
        code, out, _, _ = self._exec(["cat", path], deadline_s=120, cap=READ_CAP_BYTES)
        if code != 0:
            raise FileNotFoundError(relpath)
        if len(out) >= READ_CAP_BYTES:
            raise BackendUnavailable(
                f"{relpath} in the container is larger than {READ_CAP_BYTES} bytes"
            )
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
        return self._spawn(["sh", "-c", 'exec "$@" 2>&1', "sh", *argv], env=env)

    def _spawn(
        self, cmd: Sequence[str], *, env: Mapping[str, str] | None = None, user: str = CHECK_USER
    ) -> DockerChannel:
        try:
            exec_id = self.api.exec_create(
                self.container_id,
                list(cmd),
                stdin=True,
                user=user,
                workdir=WORKDIR,
                environment={**BASE_ENV, **(env or {})},
            )["Id"]
            before = self._oom_kills
            return DockerChannel(
                self.api,
                exec_id,
                self.api.exec_start(exec_id, socket=True),
                lambda: self._read_oom_kills() - before,
            )
        except DAEMON_ERRORS as exc:
            raise BackendUnavailable(f"docker exec failed: {exc}") from exc

    def limit_cpus(self, cpus: int) -> None:
        if cpus == self.cpus:
            return
        try:
            self.api.update_container(self.container_id, cpu_quota=cpus * CPU_PERIOD_US)
        except DAEMON_ERRORS as exc:
            self.broken = True
            raise BackendUnavailable(f"cannot change a container's CPU limit: {exc}") from exc
        self.cpus = cpus

    def _restore_cpus(self) -> bool:
        """Back to the CPUs it was made with, as its pool expects; False if that failed."""
        try:
            self.limit_cpus(self.created_cpus)
        except BackendUnavailable:
            return False
        return True

    def reset(self) -> bool:
        """Kill whatever the check left running and wipe the writable dirs; False if that failed."""
        # SysV objects outlive every process and stay charged to the container's memory, and
        # POSIX queues live in /dev/mqueue: the next check must find neither.
        wipe = (
            "kill -9 -1 2>/dev/null; ipcrm --all 2>/dev/null; "
            f"chmod -R u+rwx {WORKDIR} 2>/dev/null; "  # a check may have made a dir unreadable
            f"find {WIPED} -mindepth 1 -delete 2>/dev/null; "
            f'test -z "$(find {WIPED} -mindepth 1 -print -quit)" && '
            f'test -z "$(tail -q -n +2 {SYSV_TABLES})"'
        )
        try:
            code, _, _, missed = self._exec(["sh", "-c", wipe], deadline_s=60)
            self._oom_kills = self._read_oom_kills()
        except BackendUnavailable:
            return False
        # CPUs restored only once nothing of the last user runs
        return code == 0 and not missed and not self.broken and self._restore_cpus()


class AgentSandbox(DockerSandbox):
    """A container whose PID 1 is the sandbox agent: each operation is one frame, not an exec.

    `spawn` stays a dedicated exec, so a server's stdin and stdout are its own stream.
    """

    def __init__(
        self,
        api: docker.APIClient,
        container_id: str,
        isolation: str,
        cpus: int,
        agent: AgentLink,
    ):
        super().__init__(api, container_id, isolation, cpus)
        self.agent: AgentLink = agent

    def _ask(
        self, header: dict[str, Any], *blobs: bytes, timeout_s: float
    ) -> tuple[dict[str, Any], list[bytes]]:
        """One request to the agent; a lost agent is an infra error and ends this sandbox."""
        try:
            return self.agent.request(header, *blobs, timeout_s=timeout_s)
        except AgentLost:
            self.broken = True
            raise

    def write_file(self, relpath: str, data: bytes) -> None:
        checked_relpath(relpath)
        reply, _ = self._ask({"op": "write", "path": relpath}, data, timeout_s=120)
        if "error" in reply:
            raise BackendUnavailable(f"cannot write {relpath} in the container: {reply['error']}")

    def read_file(self, relpath: str) -> bytes:
        checked_relpath(relpath)
        reply, blobs = self._ask({"op": "read", "path": relpath}, timeout_s=120)
        if "error" in reply:  # missing, or not a regular file (a planted link, a fifo)
            raise FileNotFoundError(relpath)
        return blobs[0]

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
    ) -> Completed:
        request = {
            "op": "run",
            "argv": list(argv),
            "env": {**BASE_ENV, **(env or {})},
            "timeout_s": timeout_s,
            "cap": OUTPUT_CAP_BYTES,
            "stdin": stdin is not None,
        }
        blobs = [stdin] if stdin is not None else []
        reply, out = self._ask(request, *blobs, timeout_s=timeout_s + HOST_SLACK_S)
        if "error" in reply:  # it could not start the command (no pids left, no memory)
            self.broken = True
            raise BackendUnavailable(f"the sandbox agent could not run {argv[0]}: {reply['error']}")
        return Completed(
            argv=list(argv),
            exit_code=reply["exit_code"],
            stdout=out[0],
            stderr=out[1],
            timed_out=bool(reply["timed_out"]),
            out_of_memory=bool(reply["oom"]),
            signal=reply["signal"],
            wall_ms=int(reply["wall_ms"]),
            cpu_ms=reply["cpu_ms"],
            truncated=bool(reply["truncated"]),
        )

    def reset(self) -> bool:
        try:
            reply, _ = self._ask({"op": "reset"}, timeout_s=60)
        except AgentLost:
            return False
        return bool(reply.get("ok")) and not self.broken and self._restore_cpus()


class DockerBackend:
    """Sandboxes in containers made from the prover images `images` resolves (by image ID)."""

    snapshots: Snapshots | None = None  # booted servers kept (attached by BackendChoice)

    def __init__(self, settings: Settings, images: ImageResolver):
        self.settings = settings
        self.images = images
        self.client = connect()
        self.api = self.client.api
        server = self.client.version()
        tools = {
            "docker_server": server.get("Version", "?"),
            "docker_api": server.get("ApiVersion", "?"),
        }
        self.use_agent = USE_AGENT
        if self.use_agent:
            tools["sandbox_agent"] = (
                f"sha256:{AGENT_DIGEST[:16]} (images with python3; else docker exec)"
            )
        self.info = BackendInfo(
            name="docker", isolation=settings.isolation, tools=tools, private_scratch=True
        )
        self._warm: dict[Pool, list[DockerSandbox]] = {}
        self._spares: dict[Pool, Future[DockerSandbox]] = {}  # strict: made ahead, never used
        self._opened: set[Pool] = set()
        self.spares = SPARE_CONTAINERS
        self._starter = ThreadPoolExecutor(1, thread_name_prefix="prooflock-spare")
        self._lock = threading.Lock()
        self._agentless: set[str] = set()  # image IDs whose python3 cannot run the agent
        self._discarded: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._remover: threading.Thread | None = None
        self._owner = f"{socket.gethostname()}:{os.getpid()}"
        self._usable: dict[str, RunnableImage] = {}
        self._remove_orphans()

    def locked(self, image: str) -> tuple[str, str | None]:
        """(tag, locked image ID or None when never built) of `image` in the images lock."""
        return self.images.locked(image)

    def usable(self, image: str) -> RunnableImage:
        """The image `image`'s checks run in, as the resolver says.

        It is the locked one, or a drifted rebuild of it recorded on this machine. A drifted one is
        said once per process.
        """
        found = self._usable.get(image)
        if found is not None:
            return found
        try:
            found = self.images.usable(image, self.client)
        except DAEMON_ERRORS as exc:
            raise BackendUnavailable(f"Docker daemon failed: {exc}; {START_HINT}") from exc
        if found.drifted and image not in _DRIFT_SAID:
            _DRIFT_SAID.add(image)
            print(
                f"prooflock: {found.tag}: using {found.image_id[:19]}, a drifted rebuild (the "
                f"locked {str(found.locked_id)[:19]} is not here): {found.summary()}",
                file=sys.stderr,
                flush=True,
            )
        self._usable[image] = found
        return found

    def has_image(self, image: str) -> bool:
        """Whether this daemon holds an image `image`'s checks may run in (see `usable`)."""
        try:
            self.usable(image)
        except InfraFailure:
            return False
        return True

    def _image_id(self, image: str) -> str:
        return self.usable(image).image_id

    def environment(self, image: str, probe: Mapping[str, Sequence[str]]) -> dict[str, object]:
        found = self.usable(image)
        return {"kind": "docker", "image": found.tag, "image_id": found.image_id}

    def _create(self, image: str, limits: Limits) -> DockerSandbox:
        image_id = self._image_id(image)
        if self.use_agent and image_id not in self._agentless:
            box = self._create_with_agent(image_id, limits)
            if box is not None:
                return box
            self._agentless.add(image_id)
        config = hardened(
            image_id,
            limits,
            command=["sleep", "infinity"],
            user=KEEPALIVE_USER,
            labels=self._labels(),
        )
        container_id = self._create_container(config)
        try:
            self.api.start(container_id)
        except DAEMON_ERRORS as exc:
            self._discard(container_id)
            raise BackendUnavailable(f"cannot start a container: {exc}") from exc
        return DockerSandbox(self.api, container_id, self.settings.isolation, limits.cpus)

    def _create_with_agent(self, image_id: str, limits: Limits) -> AgentSandbox | None:
        """A container whose PID 1 is the agent, attached before it starts.

        None when the image cannot run the agent (no python3, or one too old). The caller then falls
        back to exec.
        """
        config = hardened(
            image_id,
            limits,
            command=AGENT_COMMAND,
            user=CHECK_USER,
            labels=self._labels(),
            environment=BASE_ENV,
        )
        # The agent is the init (it reaps orphans); nothing else may hold its stdio. Its frames
        # carry file contents, so they must not also land in a log file.
        config.update(init=False, stdin_open=True, log_config=LogConfig(type="none"))
        container_id = self._create_container(config)
        try:
            sock = self.api.attach_socket(
                container_id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
            )
        except DAEMON_ERRORS as exc:
            self._discard(container_id)
            raise BackendUnavailable(f"cannot attach to a container: {exc}") from exc
        link = AgentLink(sock, max_frame=(limits.tmpfs_mb << 20) + 2 * OUTPUT_CAP_BYTES + (1 << 20))
        try:
            self.api.start(container_id)
            link.hello(AGENT_BOOT_S)
        except APIError as exc:
            link.close()
            self._discard(container_id)
            if "executable file not found" in str(exc) or "no such file" in str(exc).lower():
                return None
            raise BackendUnavailable(f"cannot start a container: {exc}") from exc
        except DAEMON_ERRORS as exc:
            link.close()
            self._discard(container_id)
            raise BackendUnavailable(f"cannot start a container: {exc}") from exc
        except AgentLost:
            link.close()
            exited = self._exited(container_id)
            self._discard(container_id)
            if exited:  # python3 is there but cannot run the agent
                return None
            raise
        return AgentSandbox(self.api, container_id, self.settings.isolation, limits.cpus, link)

    def _create_container(self, config: dict[str, Any]) -> str:
        # docker-py is pinned: its own argument split, without the inspect `containers.create`
        # adds (one daemon round trip per strict check).
        try:
            arguments = _create_container_args({**config, "version": self.api._version})
            return str(self.api.create_container(**arguments)["Id"])
        except DAEMON_ERRORS as exc:
            raise BackendUnavailable(f"cannot start a container: {exc}") from exc

    def _exited(self, container_id: str) -> bool:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                if not self.api.inspect_container(container_id)["State"]["Running"]:
                    return True
            except DAEMON_ERRORS:
                return False
            time.sleep(0.05)
        return False

    def _labels(self) -> dict[str, str]:
        return {LABEL: self.settings.isolation, f"{LABEL}.owner": self._owner}

    def _remove(self, box: DockerSandbox) -> None:
        if box.agent is not None:
            box.agent.close()  # the agent exits, and with PID 1 every process in the container
        self._discard(box.container_id)

    def _discard(self, container_id: str) -> None:
        """Remove a container in the background: removal is off every check's critical path."""
        with self._lock:
            if self._remover is None or not self._remover.is_alive():
                self._remover = threading.Thread(target=self._remove_discarded, daemon=True)
                self._remover.start()
        self._discarded.put(container_id)

    def _remove_discarded(self) -> None:
        while (container_id := self._discarded.get()) is not None:
            # Best effort, whatever the client raises: gone already, the daemon slow to kill a fork
            # bomb, the client closed meanwhile. _remove_orphans removes what is left.
            with contextlib.suppress(Exception):
                self.api.remove_container(container_id, force=True)

    @contextlib.contextmanager
    def sandbox(self, image: str, limits: Limits) -> Iterator[DockerSandbox]:
        pool = (image, replace(limits, timeout_s=0))  # commands carry their own timeouts
        if self.settings.isolation == "warm":
            box = self._take_warm(pool) or self._create(image, limits)
        else:
            box = self._take_spare(pool) or self._create(image, limits)
            self._make_spare(pool, image, limits)
        try:
            yield box
        finally:
            warm = self.settings.isolation == "warm"
            if warm and box.reset():
                with self._lock:
                    self._warm.setdefault(pool, []).append(box)
            else:
                self._remove(box)
                # A failed reset is mostly a dead container. What killed it (the OOM killer, a
                # restarted daemon) hits its idle peers too, and new ones cost only a start.
                if warm:
                    self._drop_idle(pool)

    def _drop_idle(self, pool: Pool) -> None:
        with self._lock:
            idle = self._warm.pop(pool, [])
        for box in idle:
            self._remove(box)

    def _take_warm(self, pool: Pool) -> DockerSandbox | None:
        with self._lock:
            idle = self._warm.get(pool, [])
            return idle.pop() if idle else None

    def _make_spare(self, pool: Pool, image: str, limits: Limits) -> None:
        """Strict isolation: start the next container while this one is in use.

        This starts from a pool's second sandbox (a batch, not one check). A check then does not
        wait for create and start. The spare is as fresh as one made on demand: no check touched it.
        """
        with self._lock:
            if pool not in self._opened:
                self._opened.add(pool)
            elif self.spares and pool not in self._spares:
                self._spares[pool] = self._starter.submit(self._create, image, limits)

    def _take_spare(self, pool: Pool) -> DockerSandbox | None:
        with self._lock:
            spare = self._spares.pop(pool, None)
        try:  # one half made is still sooner than a new one
            return spare.result() if spare is not None else None
        except Exception:  # noqa: BLE001 - made on demand instead, which reports a lasting failure
            return None

    def _remove_orphans(self) -> None:
        """Remove sandboxes left by a prooflock process on this host whose process is gone."""
        host = socket.gethostname()
        try:
            containers = self.api.containers(all=True, filters={"label": LABEL})
        except DAEMON_ERRORS:
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
            spares = list(self._spares.values())
            self._spares.clear()
        for spare in spares:
            if not spare.cancel():
                with contextlib.suppress(Exception):
                    boxes.append(spare.result())
        self._starter.shutdown(wait=True)
        for box in boxes:
            self._remove(box)
        with self._lock:
            remover, self._remover = self._remover, None
        if remover is not None:  # wait until every container this backend made is gone
            self._discarded.put(None)
            remover.join(REMOVE_WAIT_S)
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
