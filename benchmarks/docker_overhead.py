"""Per-check cost of the docker backend's two isolation modes against the local backend.

Same files, same Checker, cache off, for a Rocq proof check and an Asymptote render check. The
modes are interleaved check by check (local, strict, warm, ...), so a machine whose load drifts
during the run slows them all alike:

    python benchmarks/docker_overhead.py [--rounds N] [--prover rocq asymptote] [--exec-path]

`--exec-path` adds the docker backend without its in-container agent (one `docker exec` per
sandbox operation, as before the agent). `--ops` also times the sandbox traffic of one Rocq check
(three writes, three runs of `true`) with no prover in it: the backend's own cost, nearly free
of prover noise. Needs a daemon and the rocq and asymptote images. A report, not a test.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from runner import Checker, CheckRequest
from runner.backends import docker
from runner.backends.base import Backend, Limits
from runner.backends.local import SANDBOX_SETTING, LocalBackend
from runner.settings import Settings

ARTIFACTS = Path(__file__).resolve().parent.parent / "tests" / "artifacts"
CORPUS = {
    "rocq": ["pass_arith.v", "fail_tactic.v", "admitted.v", "user_axiom.v"],
    "asymptote": ["triangle_labels.asy", "squares_grid.asy"],
}
BASE = Settings(cache=False, retries=0)
LOCAL = "local (default confinement)"
PLAIN = "local, plain processes"
MODES: dict[str, tuple[dict[str, str], bool]] = {  # label: (settings, with the agent)
    LOCAL: ({"backend": "local"}, True),
    PLAIN: ({"backend": "local"}, True),
    "docker strict (container per check)": ({"backend": "docker", "isolation": "strict"}, True),
    "docker warm (reused container)": ({"backend": "docker", "isolation": "warm"}, True),
    "docker strict, exec path": ({"backend": "docker", "isolation": "strict"}, False),
    "docker warm, exec path": ({"backend": "docker", "isolation": "warm"}, False),
}


@contextlib.contextmanager
def mode(label: str) -> Iterator[Settings]:
    """Settings for `label`, with the process-wide switches its backend reads when it is made."""
    update, agent = MODES[label]
    docker.USE_AGENT = agent
    saved = os.environ.get(SANDBOX_SETTING)
    if label == PLAIN:
        os.environ[SANDBOX_SETTING] = "off"  # the local backend as the issue measured it
    try:
        yield BASE.model_copy(update=update)
    finally:
        docker.USE_AGENT = True
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


def report(title: str, times: dict[str, list[float]]) -> None:
    local = statistics.median(times[LOCAL])
    print(title)
    for label, samples in times.items():
        ms = statistics.median(samples)
        print(f"  {label:38s} {ms:8.0f} ms   {ms / local:5.2f}x   (+{ms - local:.0f} ms)")


def checks(prover: str, labels: list[str], rounds: int) -> None:
    requests = requests_for(prover)
    with contextlib.ExitStack() as stack:
        checkers = {}
        for label in labels:
            with mode(label) as settings:  # the first check makes the backend
                checkers[label] = stack.enter_context(Checker(settings))
                checkers[label].check_one(requests[0])  # probe the environment, warm caches
        times: dict[str, list[float]] = {label: [] for label in labels}
        for _ in range(rounds):
            for request in requests:
                for label, checker in checkers.items():
                    times[label].append(timed(functools.partial(checker.check_one, request)))
    report(f"median per {prover} check, {len(requests)} files x {rounds} rounds:", times)


def rocq_traffic(backend: Backend, limits: Limits) -> None:
    """What the Rocq adapter asks of its sandbox, with `true` in place of coqc."""
    with backend.sandbox("rocq", limits) as box:
        for name in ("Artifact.v", "Driver.v", "Driver.v"):
            box.write_file(name, b"Definition x := 0.\n" * 20)
            box.run(["true"], timeout_s=60)


def sandbox_ops(labels: list[str], rounds: int) -> None:
    limits = Limits(timeout_s=60, memory_mb=1024)
    backends: dict[str, Backend] = {}
    for label in labels:
        with mode(label) as settings:
            local = settings.backend == "local"
            backends[label] = LocalBackend(settings) if local else docker.DockerBackend(settings)
        rocq_traffic(backends[label], limits)
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
    parser.add_argument("--exec-path", action="store_true", help="also docker without the agent")
    parser.add_argument("--ops", action="store_true", help="also the sandbox traffic alone")
    args = parser.parse_args()
    labels = list(MODES) if args.exec_path else list(MODES)[:4]
    if args.ops:
        sandbox_ops(labels, args.rounds)
    for prover in args.prover:
        checks(prover, labels, args.rounds)


if __name__ == "__main__":
    main()
