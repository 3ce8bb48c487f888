"""Environment keys: the digest of everything that can change a verdict.

The key covers the prover and adapter version, the prover install, mode and limits.
It also covers the options that select another environment.
The install is the package versions on the local backend, the image ID on docker.
Each checker probes the install once per image.
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
        """What identifies the prover install in `request.image` on this backend.

        It is probed once. A run's first checks start together and wait for that one probe.
        Otherwise each would spend the cores on the same probe.
        """
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
        """The digest of the prover install that `request` runs on.

        It keys what an adapter keeps across runs for that install, whatever the mode or limits.
        """
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
