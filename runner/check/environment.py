"""Environment keys: the digest of everything that can change a verdict.

Prover and adapter version, the prover install (package versions on the local backend, the image
ID on the docker backend), mode, limits and the options that select another environment. The
install is probed once per image per checker.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from runner.backends.base import Backend
from runner.core.canonical import digest
from runner.core.models import JsonValue
from runner.provers.base import ResolvedRequest


@dataclass(frozen=True)
class Environment:
    data: dict[str, JsonValue]
    key: str


class Environments:
    def __init__(self, backend_for: Callable[[str], Backend]):
        self._backend_for = backend_for
        self._installs: dict[tuple[str, str], dict[str, JsonValue]] = {}
        self._probing: dict[tuple[str, str], threading.Lock] = {}
        self._lock = threading.Lock()

    def install(self, request: ResolvedRequest) -> dict[str, JsonValue]:
        """What identifies the prover install in `request.image` on this backend (probed once:
        the first checks of a run, started at once, wait for one probe rather than each
        spending the cores on the same one)."""
        cache_key = (request.adapter.name, request.image)
        with self._lock:
            probing = self._probing.setdefault(cache_key, threading.Lock())
        with probing:
            known = self._installs.get(cache_key)
            if known is None:
                probe = request.adapter.probe(request.image)
                known = dict(self._backend_for(request.image).environment(request.image, probe))
                self._installs[cache_key] = known
        return known

    def install_key(self, request: ResolvedRequest) -> str:
        """The digest of the prover install `request` runs on: what an adapter keeps across runs
        for that install (not per mode or limits) is keyed by it."""
        return digest({"prover": request.adapter.name, "install": self.install(request)})

    def of(self, request: ResolvedRequest) -> Environment:
        limits = request.limits
        data: dict[str, JsonValue] = {
            "prover": request.adapter.name,
            "adapter_version": request.adapter.version,
            "install": self.install(request),
            "mode": request.mode,
            "limits": {
                "timeout_s": limits.timeout_s,
                "memory_mb": limits.memory_mb,
                "pids": limits.pids,
            },
            "options": request.options.environment(),
        }
        return Environment(data, digest(data))
