"""A long-lived server process in its own sandbox: the shared half of every warm worker.

The kit side only moves bytes. It installs the server's files, spawns it, and waits for its ready
marker. Then it sends request frames and reads replies up to a marker. What the frames mean is the
adapter's business: each server keeps its own wire format. A server starts on first use, so a
request refused before it runs never pays for a boot.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from runner.backends.base import (
    Backend,
    Channel,
    KeptSnapshot,
    Sandbox,
    SnapshotFailed,
    Snapshots,
)
from runner.core.errors import BackendUnavailable
from runner.core.messages import Notify
from runner.core.models import JsonValue, Limits

HEARTBEAT_S = 30  # how often a long boot says it is still going
RESTORE_TIMEOUT_S = 120  # a restore reads a snapshot of a GB or more from disk


class ServerFailed(BackendUnavailable):
    """The server did not start, died, or stopped answering: an infra error, never a verdict."""


class ServerTimeout(ServerFailed, TimeoutError):
    """No reply within the deadline.

    Some servers cannot enforce the check's own timeout. Their adapters catch this to give a
    `timeout` verdict, and the core then discards the server.
    """


@dataclass(frozen=True)
class ServerSpec:
    name: str  # for messages: "HOL Light forkserver"
    argv: Sequence[str]
    ready: bytes  # printed once the server can take requests; the rest of that line is kept
    boot_timeout_s: float
    files: Mapping[str, bytes] = field(default_factory=dict)  # written to the work dir first
    env: Mapping[str, str] = field(default_factory=dict)
    key: str = ""  # what else a server is specific to (a preloaded prefix): part of its pool key
    boot_note: str = ""  # shown while it boots, e.g. "about 3 min"
    max_checks: int | None = None  # recycled after this many checks (None: never)
    # At most this many at once in a pool (None: one per check running at once). A server that
    # costs minutes to boot says 1: a second check waits for it instead of booting another.
    max_servers: int | None = None
    # Why it did not start, read from its sandbox before that is closed (e.g. from a boot log).
    explain_failure: Callable[[Sandbox], str | None] | None = None
    # CPUs its boot may use when the checks' limit is fewer. This suits a boot that works in
    # parallel and runs no artifact code. It is held to the checks' limit once it is ready.
    boot_cpus: int | None = None
    # Whether its boot may be kept as a snapshot that later sandboxes start from, where the backend
    # keeps them. Given the booted sandbox and the ready line, it says True when the boot is one to
    # keep (a failed boot never is). None: it always boots.
    snapshot: Callable[[Sandbox, bytes], bool] | None = None
    # Whether each check also re-checks what the prover produced, in a process the artifact never
    # ran in (Rocq's worker: coqchk's code). That re-check gets its own timeout: the check's budget
    # then holds the timeout again for it (CheckSandboxes.RECHECK).
    rechecks: bool = False


def _oom_kills(channel: Channel | None) -> int | None:
    """The channel's OOM-kill count; None when there is no channel or it cannot be read."""
    try:
        return channel.oom_kills() if channel is not None else None
    except Exception:  # noqa: BLE001 - an unreadable count says nothing, and hides no failure
        return None


class SandboxServer:
    """One server in one sandbox. Not thread-safe: the pool hands it to one check at a time."""

    _ids = itertools.count(1)

    def __init__(
        self, backend: Backend, image: str, limits: Limits, spec: ServerSpec, notify: Notify
    ):
        self.backend, self.image, self.limits, self.spec = backend, image, limits, spec
        self._notify = notify
        self.worker_id = f"{spec.name.split()[0].lower()}-{next(self._ids)}-{secrets.token_hex(2)}"
        self._stack = contextlib.ExitStack()
        self._channel: Channel | None = None
        self._oom_kills_seen = 0  # what new_oom_kills last read
        self.sandbox: Sandbox | None = None
        self.ready_line = b""
        self.boot_ms: int | None = None
        self._served = 0
        self._closed = False
        self._deadline: float | None = None  # monotonic: the current check's whole budget
        self._retired = False  # the pool must not reuse it (it failed, or an adapter said so)
        self.snapshot: dict[str, object] | None = None  # what it was restored from, if it was

    @property
    def started(self) -> bool:
        return self._channel is not None

    @property
    def served(self) -> int:
        """Checks this server has answered."""
        return self._served

    @property
    def retired(self) -> bool:
        return self._retired

    def retire(self) -> None:
        """Never hand this server out again (its state is suspect); the pool closes it."""
        self._retired = True

    def bound_by(self, deadline: float | None) -> None:
        """Reads wait at most until `deadline` (the check's whole budget); None lifts it."""
        self._deadline = deadline

    def count_checks(self, checks: int = 1) -> None:
        """`checks` more answered by a protocol that does not go through `exchange`."""
        self._served += checks

    def start(self) -> bytes:
        """Boot the server (once); return the bytes after its ready marker, up to the end of that line.

        A server whose spec allows it starts from a snapshot of its boot, where the backend keeps
        them. The first boot makes the snapshot.
        """
        if self._channel is not None:
            return self.ready_line
        clock = time.monotonic()
        boot_limits = self.limits
        if self.spec.boot_cpus is not None and self.spec.boot_cpus > self.limits.cpus:
            boot_limits = replace(self.limits, cpus=self.spec.boot_cpus)
        # What the sandbox allows, for a server that sizes what it does to it.
        env = {**self.spec.env, "PROOFLOCK_MEMORY_MB": str(self.limits.memory_mb)}
        if self.backend.info.private_scratch:  # else /tmp and IPC are the host's: never emptied
            env["PROOFLOCK_PRIVATE_SCRATCH"] = "1"
        channel = None
        try:
            channel = self._from_snapshot(env, boot_limits)
            if channel is None:
                clock = time.monotonic()  # a boot's own time, after any restore that failed
                self._notify(f"starting {self.spec.name}{self._boot_note()}")
                sandbox = self._stack.enter_context(self.backend.sandbox(self.image, boot_limits))
                self.sandbox = sandbox
                channel = self._spawn_booting(sandbox, env)
                self._stack.callback(channel.close)
                self._wait_until_ready(channel, clock)
            self.ready_line = channel.read_until(b"\n", 30).rstrip(b"\n")
            assert self.sandbox is not None
            self.sandbox.limit_cpus(self.limits.cpus)
        except TimeoutError:
            why = self._killed_for_memory(channel) or self._explain_failure()
            self.close()
            raise ServerFailed(
                why or f"the {self.spec.name} did not start within {self.spec.boot_timeout_s:.0f} s"
            ) from None
        except EOFError as exc:
            why = self._killed_for_memory(channel) or self._explain_failure()
            self.close()
            raise ServerFailed(
                why or f"the {self.spec.name} exited while starting: {exc}"
            ) from None
        except BaseException:
            self.close()
            raise
        self._channel = channel
        self._oom_kills_seen = 0
        self.boot_ms = int((time.monotonic() - clock) * 1000)
        how = "restored from its snapshot" if self.snapshot else "ready"
        self._notify(f"{self.spec.name} {how} in {self.boot_ms / 1000:.1f} s")
        return self.ready_line

    def _boot_note(self) -> str:
        return f" ({self.spec.boot_note})" if self.spec.boot_note else ""

    def _spawn_booting(self, sandbox: Sandbox, env: Mapping[str, str]) -> Channel:
        for relpath, data in sorted(self.spec.files.items()):
            sandbox.write_file(relpath, data)
        return sandbox.spawn(self.spec.argv, env=env)

    # -- snapshots ------------------------------------------------------------------------------

    def _from_snapshot(self, env: Mapping[str, str], limits: Limits) -> Channel | None:
        """The server restored from its snapshot, its sandbox entered.

        With no snapshot yet, one is made first by booting once. Returns None, saying why, when the
        server must boot instead.
        """
        snapshots = getattr(self.backend, "snapshots", None) if self.spec.snapshot else None
        if snapshots is None:
            return None
        try:
            key = snapshots.key(self.image, self._digest(env))
        except BackendUnavailable:
            return None
        if key is None:
            return None
        kept = snapshots.find(key)
        if kept is None:
            try:
                kept = self._keep_snapshot(snapshots, key, env, limits)
            except (SnapshotFailed, ServerFailed) as exc:  # a boot that fails there boots again
                self._notify(f"the {self.spec.name} was not kept as a snapshot ({exc}): booting")
                return None
        try:
            sandbox = self._stack.enter_context(snapshots.restoring(self.image, limits, kept))
            self.sandbox = sandbox
            channel = sandbox.spawn(self.spec.argv, env=env)
            self._stack.callback(channel.close)
            channel.read_until(self.spec.ready, RESTORE_TIMEOUT_S)
        except (TimeoutError, EOFError, BackendUnavailable) as exc:
            self._stack.close()
            self._stack, self.sandbox = contextlib.ExitStack(), None
            if not isinstance(exc, BackendUnavailable):  # CRIU's failure, not the daemon's
                snapshots.discard(key)
            why = _restore_failure(exc)
            self._notify(f"the {self.spec.name}'s snapshot did not restore ({why}): booting")
            return None
        self.snapshot = {"key": kept.key, **kept.meta}
        return channel

    def _keep_snapshot(
        self, snapshots: Snapshots, key: str, env: Mapping[str, str], limits: Limits
    ) -> KeptSnapshot:
        """Boot the server once in a sandbox that can dump it, and dump it before any request."""
        assert self.spec.snapshot is not None
        self._notify(
            f"starting {self.spec.name}{self._boot_note()}, to keep a snapshot of its boot"
        )
        clock = time.monotonic()
        family = snapshots.family(self.image, self.spec.name)
        with contextlib.ExitStack() as stack:
            sandbox = stack.enter_context(snapshots.dumping(self.image, limits, key, family))
            channel = self._spawn_booting(sandbox, env)
            stack.callback(channel.close)
            try:
                self._wait_until_ready(channel, clock)
                line = channel.read_until(b"\n", 30)
            except (TimeoutError, EOFError) as exc:
                why = self._killed_for_memory(channel) or self._explain_failure(sandbox)
                raise ServerFailed(why or f"the {self.spec.name} did not start: {exc}") from None
            if not self.spec.snapshot(sandbox, line.rstrip(b"\n")):
                raise SnapshotFailed("its boot is not one to keep")
            boot_ms = int((time.monotonic() - clock) * 1000)
            kept = sandbox.keep(self.spec.ready + line, boot_ms)
        self._notify(f"the {self.spec.name}'s boot is kept as a snapshot ({boot_ms / 1000:.0f} s)")
        return kept

    def _digest(self, env: Mapping[str, str]) -> str:
        """Everything a booted server's state follows from, besides its image."""
        spec = self.spec
        digest = hashlib.sha256()
        for part in [spec.name, spec.key, *spec.argv, *sorted(f"{k}={v}" for k, v in env.items())]:
            digest.update(part.encode() + b"\0")
        for relpath, data in sorted(spec.files.items()):
            digest.update(relpath.encode() + b"\0" + hashlib.sha256(data).digest())
        digest.update(spec.ready)
        return digest.hexdigest()

    def _wait_until_ready(self, channel: Channel, clock: float) -> None:
        """Wait for the ready marker, saying every half minute that the boot goes on."""
        while True:
            left = self.spec.boot_timeout_s - (time.monotonic() - clock)
            try:
                channel.read_until(self.spec.ready, max(0.0, min(HEARTBEAT_S, left)))
                return
            except TimeoutError:
                if time.monotonic() - clock >= self.spec.boot_timeout_s:
                    raise
                self._notify(
                    f"still starting the {self.spec.name} ({time.monotonic() - clock:.0f} s)"
                )

    def new_oom_kills(self) -> int | None:
        """How many of its processes the kernel killed for memory since the last call (or since it
        started), read by the kit; None where the backend cannot say.

        Read only when asked: on docker it costs an exec.
        """
        kills = _oom_kills(self._channel)
        if kills is None:
            return None
        new, self._oom_kills_seen = kills - self._oom_kills_seen, kills
        return new

    def _killed_for_memory(self, channel: Channel | None) -> str | None:
        """Why a boot ended, when the kernel killed one of its processes for memory.

        That comes first: what a killed boot left in its log (a half-printed line) is a symptom.
        """
        if not _oom_kills(channel):
            return None
        return (
            f"the {self.spec.name} was killed for memory while starting "
            f"(limit {self.limits.memory_mb} MB): give it more with --memory"
        )

    def _explain_failure(self, sandbox: Sandbox | None = None) -> str | None:
        sandbox = sandbox or self.sandbox
        if self.spec.explain_failure is None or sandbox is None:
            return None
        try:
            return self.spec.explain_failure(sandbox)
        except Exception:  # noqa: BLE001 - a failing explanation must not hide the failure
            return None

    def send(self, data: bytes) -> None:
        channel = self._ready_channel()
        try:
            channel.send(data)
        except (EOFError, OSError) as exc:
            self._retired = True
            raise ServerFailed(f"the {self.spec.name} has exited: {exc}") from None

    def read_until(self, marker: bytes, timeout_s: float) -> bytes:
        channel = self._ready_channel()
        if self._deadline is not None:
            timeout_s = max(0.0, min(timeout_s, self._deadline - time.monotonic()))
        try:
            return channel.read_until(marker, timeout_s)
        except TimeoutError:
            self._retired = True
            raise ServerTimeout(
                f"the {self.spec.name} sent no reply within {timeout_s:.0f} s"
            ) from None
        except EOFError as exc:
            self._retired = True
            raise ServerFailed(f"the {self.spec.name} exited during the check: {exc}") from None

    def exchange(self, data: bytes, until: bytes, timeout_s: float) -> bytes:
        """Send one request frame and read its reply through `until` (inclusive)."""
        self.send(data)
        reply = self.read_until(until, timeout_s)
        self._served += 1
        return reply

    def _ready_channel(self) -> Channel:
        self.start()
        assert self._channel is not None
        return self._channel

    def worn_out(self) -> bool:
        limit = self.spec.max_checks
        return self._retired or (limit is not None and self._served >= limit)

    def info(self) -> dict[str, JsonValue]:
        return {
            "kind": "server",
            "server": self.spec.name,
            "worker_id": self.worker_id,
            "boot_ms": self.boot_ms,
            "checks_served": self._served,
            **({"restored_from": self.snapshot} if self.snapshot else {}),
        }

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        self._closed = True
        self._channel = None
        self._stack.close()


def _restore_failure(exc: BaseException) -> str:
    if isinstance(exc, EOFError):  # its output: CRIU's errors, after the restore script's marker
        text = " ".join(str(exc).split()).replace("@@PROOFLOCK-RESTORE-FAILED", "").strip()
        return f"it exited: {text[-300:]}" if text else "it exited"
    return " ".join(str(exc).split())[:300] or type(exc).__name__
