"""Where a run's checks execute, when not in this process: `ray`, a Ray cluster.

`run_requests(..., executor=None)` checks with the run's own `Checker`.
`executor_for("ray", ...)` returns an executor that sends the same work to a cluster.
It needs `prooflock[ray]`.
Ray is imported only when a Ray executor is made, so the kit works without it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from runner.core.errors import UserError
from runner.core.settings import Settings
from runner.runs.executors.ray_cluster import RayExecutor

EXECUTORS = ("local", "ray")


def executor_for(
    kind: str,
    settings: Settings,
    *,
    address: str | None = None,
    runtime_env: Mapping[str, Any] | None = None,
    notify: Callable[[str], None] | None = None,
) -> RayExecutor | None:
    """None for `local` (the run checks in this process); a `RayExecutor` for `ray`."""
    if kind == "local":
        if address is not None:
            raise UserError("--address names a Ray cluster: use it with --executor ray")
        return None
    if kind == "ray":
        return RayExecutor(address or "auto", settings, runtime_env=runtime_env, notify=notify)
    raise UserError(f"unknown executor {kind!r} (executors: {', '.join(EXECUTORS)})")


__all__ = ["EXECUTORS", "RayExecutor", "executor_for"]
