"""Where checks execute: a backend hands out sandboxes, and a sandbox runs commands in a work dir.

The work dir is private. Adapters only see `Sandbox` and `Channel`, so the same adapter code runs as
a local process or inside a hardened container.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Protocol

from runner.core.errors import BackendUnavailable
from runner.core.models import Limits

# Output beyond this is dropped (and flagged): a hostile artifact must not exhaust the kit's memory.
OUTPUT_CAP_BYTES = 4 * 1024 * 1024


def checked_relpath(relpath: str) -> PurePosixPath:
    """`relpath` as a path inside the work dir; absolute paths and `..` are refused."""
    candidate = PurePosixPath(relpath)
    if candidate.is_absolute() or ".." in candidate.parts or not candidate.parts:
        raise ValueError(f"unsafe file name {relpath!r}")
    return candidate


@dataclass
class Completed:
    """A finished (or killed) command."""

    argv: Sequence[str]
    exit_code: int | None  # None when it was killed for the timeout
    stdout: bytes
    stderr: bytes
    timed_out: bool = False
    out_of_memory: bool = False
    signal: int | None = None
    wall_ms: int = 0
    cpu_ms: int | None = None
    truncated: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and not self.out_of_memory

    @property
    def text(self) -> str:
        """stdout then stderr, decoded leniently: prover messages land in either."""
        return (self.stdout + self.stderr).decode("utf-8", errors="replace")


class Channel(Protocol):
    """A long-lived process with a byte pipe each way (for warm workers such as forkservers)."""

    def send(self, data: bytes) -> None: ...

    def read_until(self, marker: bytes, timeout_s: float) -> bytes:
        """Bytes up to and including `marker`; raises TimeoutError or EOFError."""
        ...

    def alive(self) -> bool: ...

    def oom_kills(self) -> int | None:
        """How many of the server's processes the kernel killed for memory.

        The kit reads this itself: locally from the host's cgroup, on docker by an exec of its
        own that reads the container's cgroup files (read-only there). None where it cannot.
        """
        ...

    def close(self) -> None: ...


class Sandbox(Protocol):
    """A private, empty work directory and a way to run commands in it."""

    backend: str
    isolation: str

    def write_file(self, relpath: str, data: bytes) -> None: ...

    def read_file(self, relpath: str) -> bytes: ...

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
    ) -> Completed: ...

    def spawn(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> Channel: ...

    def limit_cpus(self, cpus: int) -> None:
        """At most `cpus` CPUs from now on, for everything in the sandbox.

        A server booted with more (`ServerSpec.boot_cpus`) is held to the checks' limit before it
        serves one.
        """


class SnapshotFailed(BackendUnavailable):
    """A snapshot could not be made or restored: the server boots instead, said so."""


class KeptSnapshot(Protocol):
    @property
    def key(self) -> str: ...

    @property
    def meta(self) -> dict[str, object]: ...


class DumpingSandbox(Sandbox, Protocol):
    """Boots a server as `spawn` asks, in a sandbox that can dump it."""

    def keep(self, transcript: bytes, boot_ms: int) -> KeptSnapshot:
        """Dump the booted server (it stops); raises SnapshotFailed."""
        ...


class Snapshots(Protocol):
    """A backend's way to keep a booted server and start later ones from it (docker: CRIU).

    `spawn` in a restoring sandbox brings back the snapshot's server, whatever argv it gets.
    """

    def key(self, image: str, server: str) -> str | None:
        """The key of `server` (a digest of its spec) booted in `image`; None: no snapshots."""
        ...

    def family(self, image: str, name: str) -> str: ...

    def find(self, key: str) -> KeptSnapshot | None: ...

    def discard(self, key: str) -> None: ...

    def dumping(
        self, image: str, limits: Limits, key: str, family: str
    ) -> AbstractContextManager[DumpingSandbox]: ...

    def restoring(
        self, image: str, limits: Limits, snapshot: KeptSnapshot
    ) -> AbstractContextManager[Sandbox]: ...


@dataclass
class BackendInfo:
    name: str
    isolation: str
    tools: dict[str, str] = field(default_factory=dict)
    # Whether a sandbox's /tmp, /dev/shm, /dev/mqueue and IPC namespace are its own, so a warm
    # server may empty them between checks. Unsandboxed they are the host's: never emptied.
    private_scratch: bool = False


class Backend(Protocol):
    info: BackendInfo

    def environment(self, image: str, probe: Mapping[str, Sequence[str]]) -> dict[str, object]:
        """What identifies the prover install for the environment key (versions, or an image ID)."""
        ...

    def sandbox(self, image: str, limits: Limits) -> AbstractContextManager[Sandbox]: ...

    def close(self) -> None: ...
