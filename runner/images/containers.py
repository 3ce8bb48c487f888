"""The Docker daemon connection and one-off hardened containers (self-tests, package lists).

Containers run the way checks do: read-only root, tmpfs at /work and /tmp, no network, all
capabilities dropped, no new privileges, the image's non-root user, an init process.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import docker
from docker import DockerClient
from docker.errors import DockerException
from requests.exceptions import ConnectionError as RequestsConnectionError
from requests.exceptions import ReadTimeout


class DaemonUnavailable(RuntimeError):
    """No Docker daemon answers: an infra problem, not a user mistake."""


START_HINT = (
    "start one (`sudo systemctl start docker`, or `sudo dockerd &` where there is no systemd) "
    "or point DOCKER_HOST at one"
)


def connect(timeout: int = 600) -> DockerClient:
    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
    except (DockerException, RequestsConnectionError) as exc:
        raise DaemonUnavailable(f"cannot reach the Docker daemon ({exc}): {START_HINT}") from None
    return client


@dataclass(frozen=True)
class Ran:
    exit_code: int | None  # None: killed at the timeout
    output: str

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


def run_hardened(
    client: DockerClient,
    image: str,
    argv: list[str],
    *,
    environment: dict[str, str] | None = None,
    timeout_s: int = 600,
    memory_mb: int = 4096,
) -> Ran:
    """Run `argv` in a throwaway hardened container; stdout and stderr together."""
    container = client.containers.create(
        image,
        argv,
        environment=environment or {},
        working_dir="/work",
        read_only=True,
        tmpfs={"/work": "size=512m,uid=1000,gid=1000,mode=0700", "/tmp": "size=512m,mode=1777"},
        network_mode="none",
        cap_drop=["ALL"],
        security_opt=["no-new-privileges"],
        init=True,
        mem_limit=f"{memory_mb}m",
        memswap_limit=f"{memory_mb}m",
        pids_limit=512,
        labels={"org.prooflock.role": "image-check"},
    )
    try:
        container.start()
        try:
            status = container.wait(timeout=timeout_s)
            code: int | None = status.get("StatusCode")
        except (ReadTimeout, RequestsConnectionError):
            container.kill()
            code = None
        output = container.logs(stdout=True, stderr=True).decode("utf-8", errors="replace")
        return Ran(code, output)
    finally:
        with contextlib.suppress(DockerException):
            container.remove(force=True)
