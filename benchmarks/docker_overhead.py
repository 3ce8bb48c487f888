"""Per-check cost of the docker backend's two isolation modes against the local backend.

Same files, same Checker, cache off, for a Rocq proof check (its cold path: coqc, coqchk and the
drivers in one sandbox) and an Asymptote render check. The modes are interleaved check by check,
so a machine whose load drifts during the run slows them all alike:

    python benchmarks/docker_overhead.py [--rounds N] [--prover rocq asymptote] [--ops] [--compare]

`--ops` also times the sandbox traffic of one Rocq check (three writes, three runs of `true`)
with no prover in it: the backend's own cost, free of prover noise (and of the CPU share a busy
host leaves to containers). `--compare` adds strict without its spare container (each check
waits for create and start) and the docker backend without its agent (one `docker exec` per
operation, as before the agent). "+ms" is over local plain processes, as the issue measured.

"outside" is a check's time minus the wall time of the commands it ran (as each sandbox reports
it): what the backend itself costs. On a busy host a container's commands also run slower than
local ones (all containers share one CPU weight with each host process), which the per-check
median includes and "outside" does not. For the exec path a command's wall time includes its
`docker exec`, so its "outside" understates it. Needs a daemon and the rocq and asymptote
images. A report, not a test.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import statistics
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from runner import Checker, CheckRequest
from runner.backends import docker
from runner.backends.base import Backend, Completed, Sandbox
from runner.backends.local import SANDBOX_SETTING, LocalBackend
from runner.core.errors import InfraFailure
from runner.core.models import Limits
from runner.core.settings import Settings
from runner.images.resolver import LockedImages

ARTIFACTS = Path(__file__).resolve().parent.parent / "tests" / "artifacts"
CORPUS = {
    "rocq": ["pass_arith.v", "fail_tactic.v", "admitted.v", "user_axiom.v"],
    "asymptote": ["triangle_labels.asy", "squares_grid.asy"],
}
BASE = Settings(cache=False, retries=0)
LOCAL = "local (default confinement)"
PLAIN = "local, plain processes"
STRICT, WARM = (
    {"backend": "docker", "isolation": "strict"},
    {"backend": "docker", "isolation": "warm"},
)
# label: (settings, docker switches: the agent, strict's spare container)
MODES: dict[str, tuple[dict[str, str], tuple[bool, bool]]] = {
    LOCAL: ({"backend": "local"}, (True, True)),
    PLAIN: ({"backend": "local"}, (True, True)),
    "docker strict (container per check)": (STRICT, (True, True)),
    "docker warm (reused container)": (WARM, (True, True)),
    "docker strict, no spare container": (STRICT, (True, False)),
    "docker strict, exec path": (STRICT, (False, False)),
    "docker warm, exec path": (WARM, (False, False)),
}


@contextlib.contextmanager
def mode(label: str) -> Iterator[Settings]:
    """Settings for `label`, with the process-wide switches its backend reads when it is made."""
    update, (docker.USE_AGENT, docker.SPARE_CONTAINERS) = MODES[label]
    saved = os.environ.get(SANDBOX_SETTING)
    if label == PLAIN:
        os.environ[SANDBOX_SETTING] = "off"  # the local backend as the issue measured it
    try:
        yield BASE.model_copy(update=update)
    finally:
        docker.USE_AGENT = docker.SPARE_CONTAINERS = True
        if saved is None:
            os.environ.pop(SANDBOX_SETTING, None)
        else:
            os.environ[SANDBOX_SETTING] = saved


def requests_for(prover: str) -> list[CheckRequest]:
    mode = "render" if prover == "asymptote" else "proof"
    return [
        CheckRequest(prover=prover, mode=mode, name=n, content=(ARTIFACTS / prover / n).read_text())
        for n in CORPUS[prover]
    ]


def timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return (time.perf_counter() - started) * 1000


def report(
    title: str, times: dict[str, list[float]], outside: dict[str, list[float]] | None = None
) -> None:
    local = statistics.median(times[PLAIN])
    print(title)
    for label, samples in times.items():
        ms = statistics.median(samples)
        line = f"  {label:38s} {ms:8.0f} ms   {ms / local:5.2f}x   (+{ms - local:.0f} ms)"
        if outside is not None:
            line += f"   outside {statistics.median(outside[label]):6.0f} ms"
        print(line)


class TimedSandbox:
    """A sandbox that adds the wall time of each command it runs to its backend's clock."""

    def __init__(self, box: Sandbox, clock: CommandClock):
        self.box, self.clock = box, clock
        self.backend, self.isolation = box.backend, box.isolation
        self.write_file, self.read_file, self.spawn = box.write_file, box.read_file, box.spawn

    def run(self, argv: Sequence[str], **kwargs: Any) -> Completed:
        done = self.box.run(argv, **kwargs)
        self.clock.command_ms += done.wall_ms
        return done


class CommandClock:
    """A backend whose sandboxes add up the wall time of the commands they run."""

    def __init__(self, inner: Backend):
        self.inner, self.info, self.command_ms = inner, inner.info, 0.0

    def environment(self, image: str, probe: Mapping[str, Sequence[str]]) -> dict[str, object]:
        return self.inner.environment(image, probe)

    @contextlib.contextmanager
    def sandbox(self, image: str, limits: Limits) -> Iterator[TimedSandbox]:
        with self.inner.sandbox(image, limits) as box:
            yield TimedSandbox(box, self)

    def close(self) -> None:
        self.inner.close()


def make_backend(label: str) -> CommandClock:
    with mode(label) as settings:
        local = settings.backend == "local"
        return CommandClock(
            LocalBackend(settings)
            if local
            else docker.DockerBackend(settings, LockedImages(settings))
        )


def checks(prover: str, labels: list[str], rounds: int) -> None:
    requests = requests_for(prover)
    with contextlib.ExitStack() as stack:
        checkers = {}
        for label in labels:
            clock = make_backend(label)
            settings = BASE.model_copy(update=MODES[label][0])
            checkers[label] = clock, stack.enter_context(Checker(settings, backend=clock))
            checkers[label][1].check_one(requests[0], cold=True)  # probe, warm the caches
        times: dict[str, list[float]] = {label: [] for label in labels}
        outside: dict[str, list[float]] = {label: [] for label in labels}
        results: dict[str, list[tuple[str, str]]] = {label: [] for label in labels}
        for _ in range(rounds):
            for request in requests:
                for label, (clock, checker) in checkers.items():
                    clock.command_ms = 0.0
                    started = time.perf_counter()
                    result = checker.check_one(request, cold=True)
                    times[label].append((time.perf_counter() - started) * 1000)
                    outside[label].append(times[label][-1] - clock.command_ms)
                    results[label].append((result.verdict.value, result.result_digest))
    report(f"median per {prover} check, {len(requests)} files x {rounds} rounds:", times, outside)
    differ = [label for label in labels if results[label] != results[PLAIN]]
    print(f"  results differ from local: {', '.join(differ)}" if differ else "  same results")


def rocq_traffic(backend: Backend, limits: Limits) -> None:
    """What the Rocq adapter asks of its sandbox, with `true` in place of coqc."""
    with backend.sandbox("rocq", limits) as box:
        for name in ("Artifact.v", "Driver.v", "Driver.v"):
            box.write_file(name, b"Definition x := 0.\n" * 20)
            box.run(["true"], timeout_s=60)


def sandbox_ops(labels: list[str], rounds: int) -> None:
    limits = Limits(timeout_s=60, memory_mb=1024)
    backends = {label: make_backend(label).inner for label in labels}
    for backend in backends.values():
        rocq_traffic(backend, limits)
    times: dict[str, list[float]] = {label: [] for label in labels}
    try:
        for _ in range(rounds * 4):
            for label, backend in backends.items():
                times[label].append(timed(functools.partial(rocq_traffic, backend, limits)))
    finally:
        for backend in backends.values():
            backend.close()
    report(
        f"median per Rocq-shaped sandbox (3 writes, 3 runs of true), {rounds * 4} rounds:", times
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--prover", nargs="*", default=list(CORPUS), choices=list(CORPUS))
    parser.add_argument("--ops", action="store_true", help="also the sandbox traffic alone")
    parser.add_argument("--compare", action="store_true", help="also no spare, and no agent")
    args = parser.parse_args()
    labels = list(MODES) if args.compare else list(MODES)[:4]
    if args.ops:
        sandbox_ops(labels, args.rounds)
    for prover in args.prover:
        try:
            checks(prover, labels, args.rounds)
        except InfraFailure as exc:  # an image not built here, or one that predates its adapter
            print(f"{prover}: skipped: {exc}")


if __name__ == "__main__":
    main()
