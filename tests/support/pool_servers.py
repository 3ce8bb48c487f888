"""Servers straight from a checker's pool, so a test can talk to one directly."""

from __future__ import annotations

from runner import Checker
from runner.check.pool import CheckSandboxes
from runner.core.models import CheckRequest


class PoolServers:
    """Servers straight from the checker's pool, so a test can talk to one directly."""

    cold = False

    def __init__(self, checker: Checker):
        self._checker = checker

    @property
    def cache_dir(self):
        return self._checker.settings.cache_dir

    def sandbox(self):
        raise AssertionError("no cold sandbox here")

    def server(self, spec):
        request = self._checker.resolve(CheckRequest(prover="rocq", name="x.v", content=""))
        run = CheckSandboxes(
            request,
            self._checker.backend_for,
            self._checker.pool,
            cold=True,
            install_dir=lambda: self._checker.settings.cache_dir,
            cache_dir=self.cache_dir,
        )
        return run.server(spec)
