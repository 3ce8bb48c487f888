"""The one Docker connection and the one hardening policy, for checks and image self-tests alike.

Every container gets:
- no network (loopback only) and a read-only root;
- tmpfs `/work` and `/tmp`;
- no capabilities, and no-new-privileges;
- an unprivileged user;
- memory without swap, and pid and CPU limits;
- an init process (docker's tini, or the sandbox agent as PID 1).
Files travel over the container's stdio, never through a host mount.
"""

from __future__ import annotations

import os
from typing import Any

import docker
from docker import DockerClient
from docker.errors import DockerException
from requests.exceptions import RequestException

from runner.core.errors import BackendUnavailable
from runner.core.models import Limits

WORKDIR = "/work"
CHECK_USER = "1000:1000"  # runs the prover
KEEPALIVE_USER = "65534:65534"  # owns a sandbox's idle process, out of CHECK_USER's reach
LABEL = "org.prooflock.sandbox"
START_HINT = (
    "start it (`dockerd > /var/log/dockerd.log 2>&1 &`, or `systemctl start docker`), "
    "point DOCKER_HOST at one, or use --backend local"
)


class DaemonUnavailable(BackendUnavailable):
    """No Docker daemon answers."""


def connect(timeout: int = 300) -> DockerClient:
    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
    except (DockerException, RequestException) as exc:
        host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
        raise DaemonUnavailable(
            f"no Docker daemon answers at {host} ({_short(exc)}): {START_HINT}"
        ) from None
    return client


def _short(exc: Exception) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 120 else text[:117] + "..."


CPU_PERIOD_US = 100_000  # the kernel's default CFS period


def hardened(
    image: str,
    limits: Limits,
    *,
    command: list[str],
    user: str,
    labels: dict[str, str],
    environment: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Keyword arguments for `client.containers.create` under the kit's hardening policy."""
    tmpfs_opts = "rw,exec,nosuid,nodev"
    return {
        "image": image,
        "command": command,
        "user": user,
        "environment": environment or {},
        "working_dir": WORKDIR,
        "network_mode": "none",
        "read_only": True,
        "tmpfs": {
            WORKDIR: f"{tmpfs_opts},size={limits.tmpfs_mb}m,uid=1000,gid=1000,mode=0700",
            "/tmp": f"{tmpfs_opts},size={limits.tmpfs_mb}m,mode=1777",
        },
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "mem_limit": f"{limits.memory_mb}m",
        "memswap_limit": f"{limits.memory_mb}m",
        "pids_limit": limits.pids,
        # A quota per period rather than nano_cpus: the daemon can change it on a running
        # container (DockerSandbox.limit_cpus), and refuses to while nano_cpus is set.
        "cpu_period": CPU_PERIOD_US,
        "cpu_quota": limits.cpus * CPU_PERIOD_US,
        "shm_size": "16m",
        "init": True,
        "labels": labels,
    }
