"""Per-check cost of the docker backend's two isolation modes against the local backend.

Same Rocq files, same Checker, cache off, measured side by side in one run:
`nox -s bench -- docker_overhead` (needs a daemon and the rocq image).
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from runner import Checker, CheckRequest
from runner.settings import Settings

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "artifacts" / "rocq"
FILES = ["pass_arith.v", "fail_tactic.v", "admitted.v", "user_axiom.v"]
ROUNDS = 3
MODES = {
    "local (process)": {"backend": "local"},
    "docker strict (container per check)": {"backend": "docker", "isolation": "strict"},
    "docker warm (reused container)": {"backend": "docker", "isolation": "warm"},
}


def median_check_ms(settings: Settings) -> float:
    requests = [CheckRequest(prover="rocq", name=n, content=(CORPUS / n).read_text()) for n in FILES]
    times = []
    with Checker(settings) as checker:
        checker.check_one(requests[0])  # probe the environment and warm caches first
        for _ in range(ROUNDS):
            for request in requests:
                started = time.perf_counter()
                checker.check_one(request)
                times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main() -> None:
    results = {label: median_check_ms(Settings(cache=False, **mode)) for label, mode in MODES.items()}
    local = results["local (process)"]
    print(f"median per Rocq check over {len(FILES)} files x {ROUNDS} rounds:")
    for label, ms in results.items():
        print(f"  {label:38s} {ms:8.0f} ms   {ms / local:5.2f}x   (+{ms - local:.0f} ms)")


if __name__ == "__main__":
    main()
