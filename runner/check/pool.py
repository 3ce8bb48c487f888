"""Warm servers kept between checks, and the `Sandboxes` an adapter gets for one check.

Servers are pooled by image, limits without the timeout, server name and server key.
Workers enforce each request's own timeout, so the timeout does not split the pool.
That matters because a HOL Light worker costs minutes to boot.
A server that failed a check, or is worn out, is closed, never reused.
Each image keeps up to `max_idle` idle servers of its own.
So a run that mixes provers never closes one prover's warm servers to keep another's.

A server may start ahead of the checks that need it, booting while the first check probes.
A check that wants its key waits for it rather than boot another.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from runner.backends.base import Backend, Channel, Completed, Sandbox
from runner.core.models import JsonValue, Limits
from runner.provers.base import ResolvedRequest
from runner.provers.common.server import Notify, SandboxServer, ServerSpec

PoolKey = tuple[str, Limits, str, str]
KIT_GRACE_S = 5  # the kit's own work for one check (transfer, parsing), beyond the timeout
# The sandbox that re-checks the prover's output, in a process the artifact never ran in.
# Opening it gives the check's budget its timeout again.
# So a file the prover finishes in time never runs out of time in the kit's re-check.
RECHECK = "recheck"
WAIT_POLL_S = 0.5  # a capped server retired in another check is seen this soon
WAITED_NOTED_MS = 100  # a wait this long for a capped server is recorded, and not timed


class ServerPool:
    def __init__(self, backend_for: Callable[[str], Backend], notify: Notify, max_idle: int):
        self._backend_for = backend_for
        self.notify = notify
        self._max_idle = max(1, max_idle)
        self._idle: OrderedDict[int, tuple[PoolKey, SandboxServer]] = OrderedDict()
        self._made: dict[PoolKey, list[SandboxServer]] = {}  # for specs with `max_servers`
        self._booting_ahead: dict[int, PoolKey] = {}  # servers started ahead of their checks
        self._closed = False
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)  # a server came back or was closed
        self._thread = threading.local()  # the server this thread last checked in

    @staticmethod
    def key(image: str, limits: Limits, spec: ServerSpec) -> PoolKey:
        return (image, replace(limits, timeout_s=0), spec.name, spec.key)

    def checkout(
        self, image: str, limits: Limits, spec: ServerSpec, *, ahead: bool = False
    ) -> SandboxServer:
        """An idle server for this key, else a new one.

        Sometimes it waits for a server to come back rather than start another.
        That is when the spec caps how many may run, or one boots ahead for this key.
        With `ahead` it is always a new one, started before any check asked.
        Such a server is `booting_ahead` until checked in or discarded.
        """
        wanted = self.key(image, limits, spec)
        with self._changed:
            while not ahead:
                # First the one this thread used last: it holds what its recent checks loaded
                # (runner.check.affinity). Then the most recently used.
                own: int | None = getattr(self._thread, "last", None)
                idents = [own] if own is not None and own in self._idle else []
                for ident in [*idents, *reversed(self._idle)]:
                    key, server = self._idle[ident]
                    if key == wanted:
                        del self._idle[ident]
                        return server
                if wanted in self._booting_ahead.values():
                    self._changed.wait(WAIT_POLL_S)
                    continue
                if spec.max_servers is None:
                    break
                # Closed or retired servers do not count.
                # A check that retired its server may need a fresh one while holding the old.
                alive = [s for s in self._made.get(wanted, []) if not (s.closed or s.retired)]
                self._made[wanted] = alive
                if len(alive) < spec.max_servers:
                    break
                self._changed.wait(WAIT_POLL_S)
            server = SandboxServer(self._backend_for(image), image, wanted[1], spec, self.notify)
            if spec.max_servers is not None:
                self._made.setdefault(wanted, []).append(server)
            if ahead:
                self._booting_ahead[id(server)] = wanted
            return server

    def discarded(self, server: SandboxServer) -> None:
        """A server was closed, not checked in, so a waiting check may start one."""
        with self._changed:
            self._booting_ahead.pop(id(server), None)
            self._changed.notify_all()

    def checkin(self, image: str, server: SandboxServer) -> None:
        if server.worn_out() or not server.started or self._closed:
            server.close()
            self.discarded(server)
            return
        evicted = []
        with self._lock:
            self._booting_ahead.pop(id(server), None)
            self._idle[id(server)] = (self.key(image, server.limits, server.spec), server)
            self._thread.last = id(server)
            same_image = [ident for ident, (key, _) in self._idle.items() if key[0] == image]
            surplus = max(0, len(same_image) - self._max_idle)  # never negative: a negative
            for ident in same_image[:surplus]:  # slice end evicts all but the last; oldest first
                evicted.append(self._idle.pop(ident)[1])
            self._changed.notify_all()
        for old in evicted:
            old.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True  # one still booting ahead is closed when it comes back
            servers = [server for _, server in self._idle.values()]
            self._idle.clear()
        for server in servers:
            with contextlib.suppress(Exception):
                server.close()


class CheckSandboxes:
    """The `Sandboxes` for one check: a cold sandbox opened on demand, and pooled servers."""

    def __init__(
        self,
        request: ResolvedRequest,
        backend_for: Callable[[str], Backend],
        pool: ServerPool,
        cold: bool,
        install_dir: Callable[[], Path],
        cache_dir: Path,
        checks: int = 1,
        ahead: bool = False,
    ):
        self.request = request
        self._ahead = ahead  # servers started before any check asked (ServerPool.checkout)
        self._install_dir = install_dir
        self._cache_dir = cache_dir
        self._backend_for = backend_for
        self._pool = pool
        self._cold = cold
        self._stack = contextlib.ExitStack()
        self._sandboxes: dict[str, Sandbox] = {}
        self._servers: list[SandboxServer] = []
        self.reused_server = False
        self.booted_ms = 0  # servers booted during this check; reported once, not as its time
        self.waited_ms = 0  # waiting for a capped server another check held; not its time
        # Everything done for the artifact shares one budget: transfer, runs, audits.
        # The budget is the timeout (times a batch's requests) plus a little for the kit.
        # A re-check, once it starts, gets the timeout again (RECHECK).
        self._timeout_s = request.limits.timeout_s * max(1, checks)
        self._rechecked = False
        self.deadline = time.monotonic() + self._timeout_s + KIT_GRACE_S

    @property
    def cold(self) -> bool:
        return self._cold

    @property
    def cache_dir(self) -> Path:
        return self._cache_dir

    @property
    def install_dir(self) -> Path:
        return self._install_dir()

    def remaining_s(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    def give_back_s(self, seconds: float) -> None:
        self.deadline += max(0.0, seconds)  # the kit's wasted attempt: not this check's time

    def _recheck(self) -> None:
        """The kit's re-check of the prover's work starts, with its own timeout, once."""
        if not self._rechecked:
            self._rechecked = True
            self.deadline += self._timeout_s

    def sandbox(self, purpose: str = "check") -> Sandbox:
        if purpose == RECHECK:
            self._recheck()
        if purpose not in self._sandboxes:
            box = self._backend_for(self.request.image).sandbox(
                self.request.image, self.request.limits
            )
            self._sandboxes[purpose] = BoundSandbox(self._stack.enter_context(box), self)
        return self._sandboxes[purpose]

    def server(self, spec: ServerSpec) -> SandboxServer:
        if self._cold:
            backend = self._backend_for(self.request.image)
            server = SandboxServer(
                backend, self.request.image, self.request.limits, spec, self._pool.notify
            )
        else:
            waiting = time.monotonic()
            server = self._pool.checkout(
                self.request.image, self.request.limits, spec, ahead=self._ahead
            )
            waited_s = time.monotonic() - waiting
            self.deadline += waited_s  # another check held it: not this one's budget or time
            self.waited_ms += int(waited_s * 1000)
            self.reused_server = self.reused_server or server.started
        self._servers.append(server)
        booting = time.monotonic()
        if not server.started:
            server.start()
            boot_s = time.monotonic() - booting
            self.deadline += boot_s  # a boot serves many checks: not this one's budget or time
            self.booted_ms += int(boot_s * 1000)
        if spec.rechecks:  # its checks run the re-check too: their replies may take that long
            self._recheck()
        server.bound_by(self.deadline)
        return server

    def worker_kind(self) -> str:
        if self._servers:
            return "warm" if self.reused_server else ("fresh-server" if self._cold else "server")
        return "cold"

    def worker_info(self) -> dict[str, JsonValue]:
        info: dict[str, JsonValue] = {}
        if len(self._servers) == 1:
            info = self._servers[0].info()
        elif self._servers:
            info = {"servers": [server.info() for server in self._servers]}
        if self.booted_ms:
            info["booted_in_check_ms"] = self.booted_ms
        if self.waited_ms >= WAITED_NOTED_MS:
            info["waited_for_server_ms"] = self.waited_ms
        return info

    def finish(self, healthy: bool) -> None:
        """Return servers to the pool after a check that did not fail on them; close the rest."""
        for server in self._servers:
            server.bound_by(None)
            if healthy and not self._cold:
                self._pool.checkin(self.request.image, server)
            else:
                server.close()
                self._pool.discarded(server)
        self._servers.clear()
        self._stack.close()


class BoundSandbox:
    """A sandbox whose commands stop at the check's deadline, whatever timeout they ask for."""

    def __init__(self, inner: Sandbox, budget: CheckSandboxes):
        self._inner, self._budget = inner, budget
        self.backend, self.isolation = inner.backend, inner.isolation

    def write_file(self, relpath: str, data: bytes) -> None:
        self._inner.write_file(relpath, data)

    def read_file(self, relpath: str) -> bytes:
        return self._inner.read_file(relpath)

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
    ) -> Completed:
        bounded = min(timeout_s, self._budget.remaining_s())
        return self._inner.run(argv, timeout_s=bounded, env=env, stdin=stdin)

    def spawn(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> Channel:
        return self._inner.spawn(argv, env=env)

    def limit_cpus(self, cpus: int) -> None:
        self._inner.limit_cpus(cpus)
