"""Each image's self-test: a known-good and a known-bad artifact, checked in the built image.

`images/<name>/selftest/run.sh` runs in a hardened container, exactly as a check would: read-only
root, tmpfs /work, no network, user prover. So an image fails its build when its prover cannot check
anything, or needs to write outside /work and /tmp.
"""

from __future__ import annotations

import base64
import time
from dataclasses import dataclass
from pathlib import Path

from docker import DockerClient

from runner.backends.containers import run_hardened
from runner.images.context import selftest_archive

# The archive travels in an environment variable: the container has no network and a
# read-only root, and the self-tests are a few kilobytes.
UNPACK_AND_RUN = (
    'printf %s "$PROOFLOCK_SELFTEST" | base64 -d | tar -x -C /work && cd /work && exec sh ./run.sh'
)
MAX_ARCHIVE = 96 * 1024


@dataclass(frozen=True)
class SelfTest:
    passed: bool
    output: str
    seconds: int

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.output.rstrip().splitlines()[-lines:])


class SelfTestFailed(RuntimeError):
    def __init__(self, name: str, result: SelfTest):
        super().__init__(
            f"{name}: the image's self-test failed; its output ends with:\n{result.tail()}"
        )
        self.result = result


def run_selftest(
    client: DockerClient, image: str, images_root: Path, name: str, *, timeout_s: int = 1200
) -> SelfTest:
    payload = base64.b64encode(selftest_archive(images_root, name)).decode()
    if len(payload) > MAX_ARCHIVE:
        raise ValueError(f"images/{name}/selftest is too large to pass to the container")
    started = time.monotonic()
    ran = run_hardened(
        client,
        image,
        ["sh", "-c", UNPACK_AND_RUN],
        environment={"PROOFLOCK_SELFTEST": payload},
        timeout_s=timeout_s,
    )
    output = (
        ran.output if ran.exit_code is not None else ran.output + f"\n(killed after {timeout_s} s)"
    )
    passed = ran.ok and "SELFTEST PASSED" in output
    return SelfTest(passed, output, int(time.monotonic() - started))
