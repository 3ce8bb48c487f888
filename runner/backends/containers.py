"""One-off hardened containers for image self-tests and package lists.

They run under the same policy as checks (runner.backends.policy). So an image's self-test proves
that it can check artifacts exactly as the checks will run them.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from docker import DockerClient
from docker.errors import DockerException
from requests.exceptions import ConnectionError as RequestsConnectionError
from requests.exceptions import ReadTimeout

from runner.backends.policy import CHECK_USER, hardened
from runner.core.models import Limits


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
    limits = Limits(timeout_s=timeout_s, memory_mb=memory_mb)
    config = hardened(
        image,
        limits,
        command=argv,
        user=CHECK_USER,
        labels={"org.prooflock.role": "image-check"},
        environment=environment,
    )
    container = client.containers.create(**config)
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
