"""HOL Light's workers seen from the host, to kill one from outside as a crash or the OOM killer
would: the forkserver process of a worker the checker's pool holds, on either backend."""

from __future__ import annotations

import os
from pathlib import Path

from runner.check.checker import Checker
from runner.core.models import CheckResult
from runner.provers.common.server import SandboxServer


def worker_of(result: CheckResult) -> dict:
    """The HOL Light worker's part of a result's provenance (a replayed check also names the
    replayer)."""
    extra = result.provenance.extra
    servers = extra.get("servers", [extra])
    [worker] = [s for s in servers if s.get("server") == "HOL Light worker"]
    return worker


def workers_used(result: CheckResult) -> list[str]:
    """Every HOL Light worker a check used, in order."""
    extra = result.provenance.extra
    servers = extra.get("servers", [extra])
    return [s["worker_id"] for s in servers if s.get("server") == "HOL Light worker"]


def idle_server(checker: Checker, worker_id: str) -> SandboxServer:
    """The pool's idle server `worker_id` (between checks every server is back in the pool)."""
    idle = [server for _, server in checker.pool._idle.values() if server.worker_id == worker_id]
    assert idle, f"{worker_id} is not idle in the pool"
    return idle[0]


def forkserver_pids(server: SandboxServer | None) -> list[int]:
    """Host PIDs of the server's forkserver: the `server.ml` process whose parent is not one
    (its forked children run `server.ml` too), in its container (docker) or below this process
    (local; with no server, every local worker's)."""
    container = getattr(server.sandbox, "container_id", None) if server else None
    parents, commands, cgroups = {}, {}, {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            commands[int(entry.name)] = (entry / "cmdline").read_bytes().split(b"\0")
            cgroups[int(entry.name)] = (entry / "cgroup").read_text()
        except OSError:
            continue
        parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])

    def serves(pid: int) -> bool:
        return b"server.ml" in commands.get(pid, [])

    def ours(pid: int) -> bool:
        if container is not None:
            return container in cgroups.get(pid, "")
        while pid > 1:
            pid = parents.get(pid, 0)
            if pid == os.getpid():
                return True
        return False

    return [pid for pid in parents if serves(pid) and not serves(parents[pid]) and ours(pid)]
