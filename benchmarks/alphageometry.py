"""AlphaGeometry adapter benchmark (numbers to report, not timed tests).

    python benchmarks/alphageometry.py [--engine newclid] [--workers 2] [--timeout 60] [--no-jgex]

1. Median time per problem for each outcome category on the test corpus (solved, unsolved, each
   syntax class, logic error), through the warm forkserver as a batch run uses it, plus the
   same problems cold (a fresh python3 per problem) and the validator alone.
2. The whole JGEX-231 set: solved count beside AlphaGeometry's published 198/231 (DDAR alone),
   counts per outcome, total wall time, with a progress bar on stderr.
The logic-error line compares with NL2AGBench's 300 s per logic error.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import orjson
from rich.console import Console

from runner.backends.base import Limits
from runner.backends.local import LocalBackend
from runner.checker import Checker
from runner.models import CheckRequest
from runner.progress import ProgressReporter
from runner.provers import alphageometry
from runner.provers.alphageometry import categories, validator
from runner.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "artifacts" / "alphageometry"
CORPUS_FILES = ("samples.txt", "unsolved.txt", "paper_syntax_errors.txt", "logic_error.txt")
PAPER_LOGIC_ERROR_S = 300
PUBLISHED_JGEX_DDAR = 198


def requests_from(path: Path, options: dict[str, str]) -> list[CheckRequest]:
    return [
        CheckRequest(prover="alphageometry", name=title, content=content, options=options)
        for title, content in alphageometry.split(path.name, path.read_text())
    ]


def jgex_file() -> Path | None:
    for candidate in (
        os.environ.get("PROOFLOCK_ALPHAGEOMETRY_DATA"),
        ROOT.parent / "shared" / "data" / "alphageometry",
        "/work/shared/data/alphageometry",
    ):
        if candidate and (Path(candidate) / "jgex_ag_231.txt").exists():
            return Path(candidate) / "jgex_ag_231.txt"
    return None


def run_batch(
    settings: Settings, requests: list[CheckRequest], label: str, out: Path | None = None
) -> categories.Tally:
    with Checker(settings) as checker, ProgressReporter(len(requests), label) as progress:
        found = categories.Tally()
        lines = []
        for result in checker.map(requests):
            found.add(result)
            lines.append(orjson.dumps(result.summary_line()))
            progress.advance(f"{result.artifact[-40:]}: {result.details.get('outcome')}")
    if out is not None:
        out.write_bytes(b"\n".join(lines) + b"\n")
    return found


def cold_medians(requests: list[CheckRequest], timeout: int) -> dict[str, int]:
    """The same problems, each in a fresh sandbox with a fresh python3 (no forkserver)."""
    backend, times = LocalBackend(), {}
    for request in requests:
        request = request.model_copy(update={"timeout": timeout})
        with backend.sandbox(alphageometry.image(request), Limits(timeout, 4096)) as sandbox:
            started = time.monotonic()
            outcome = alphageometry.check(request, sandbox)
            times.setdefault(str(outcome.details.get("outcome")), []).append(
                int((time.monotonic() - started) * 1000)
            )
    return {name: int(statistics.median(ms)) for name, ms in times.items()}


def validator_median_us(requests: list[CheckRequest]) -> int:
    times = []
    for request in requests:
        line = request.content.splitlines()[1]
        started = time.perf_counter()
        validator.validate(line)
        times.append(int((time.perf_counter() - started) * 1_000_000))
    return int(statistics.median(times))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", default="newclid", choices=alphageometry.ENGINES)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=int, default=60, help="seconds per problem")
    parser.add_argument("--no-jgex", action="store_true", help="skip the 231-problem run")
    parser.add_argument("--out", type=Path, help="write the JGEX results here (JSON lines)")
    args = parser.parse_args()
    console = Console()
    options = {"engine": args.engine}
    settings = Settings(
        backend=os.environ.get("PROOFLOCK_BACKEND", "local"),
        cache=False,
        timeout=args.timeout,
        retries=0,
        workers=args.workers,
    )

    corpus = [r for name in CORPUS_FILES for r in requests_from(CORPUS / name, options)]
    warm = run_batch(settings, corpus, "corpus (warm)")
    console.print(categories.table(warm, f"test corpus, {args.engine}, forkserver"))
    cold = cold_medians(corpus, args.timeout)
    console.print(
        "cold (fresh python3 per problem), median s: "
        + ", ".join(f"{name} {ms / 1000:.2f}" for name, ms in sorted(cold.items()))
    )
    syntax = requests_from(CORPUS / "paper_syntax_errors.txt", options)
    console.print(
        f"validator alone on the paper's syntax errors: median {validator_median_us(syntax)} µs"
    )
    logic_ms = warm.outcomes.get("logic_error", [0])
    console.print(
        f"logic error: {statistics.median(logic_ms) / 1000:.1f} s (warm), "
        f"{cold.get('logic_error', 0) / 1000:.1f} s (cold) vs NL2AGBench's {PAPER_LOGIC_ERROR_S} s"
    )

    if args.no_jgex:
        return 0
    jgex = jgex_file()
    if jgex is None:
        console.print("jgex_ag_231.txt not found: set PROOFLOCK_ALPHAGEOMETRY_DATA")
        return 1
    started = time.monotonic()
    found = run_batch(settings, requests_from(jgex, options), "JGEX-231", args.out)
    elapsed = time.monotonic() - started
    solved_s = sorted(ms / 1000 for ms in found.outcomes.get("solved", []))
    if solved_s:
        console.print(
            "JGEX solved, s per problem: "
            f"median {statistics.median(solved_s):.1f}, "
            f"90th percentile {solved_s[int(0.9 * (len(solved_s) - 1))]:.1f}, "
            f"max {solved_s[-1]:.1f}"
        )
    console.print(
        categories.table(found, f"JGEX-231, {args.engine} DD+AR, {args.timeout} s per problem")
    )
    console.print(
        f"JGEX-231: {found.count('solved')}/231 solved ({args.engine}) vs "
        f"{PUBLISHED_JGEX_DDAR}/231 published for AlphaGeometry's DDAR; "
        f"whole run {elapsed:.0f} s wall with {args.workers} workers"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
