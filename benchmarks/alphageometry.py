"""AlphaGeometry adapter benchmark (numbers to report, not timed tests).

`rows(quick)` (for `python -m benchmarks`): per engine, the median ms per JGEX problem (`quick`:
the first 20 of the 231) checked four ways, one problem at a time, against the naive baseline of
a fresh python3 per problem (the kit's cold check: a fresh engine server for each problem), with
whether every outcome is the baseline's. newclid's baseline runs on the local backend; ag4masses
exists only in its image, so its baseline and warm rows run on docker.

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

from benchmarks.table import KIT_COLUMNS, Row, median_ms
from runner.check.checker import Checker
from runner.core.errors import InfraFailure, UserError
from runner.core.models import CheckRequest, Verdict
from runner.core.settings import Settings
from runner.provers import alphageometry
from runner.provers.alphageometry import categories, validator
from runner.runs.progress import ProgressReporter

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "artifacts" / "alphageometry"
CORPUS_FILES = ("samples.txt", "unsolved.txt", "paper_syntax_errors.txt", "logic_error.txt")
PAPER_LOGIC_ERROR_S = 300
PUBLISHED_JGEX_DDAR = 198
QUICK_PROBLEMS = 20
ROW_TIMEOUT_S = 60
# Column → settings; the engine server stays up across checks except in docker strict.
MODES = {
    "local warm": {"backend": "local"},
    "docker warm": {"backend": "docker", "isolation": "warm"},
    "docker strict": {"backend": "docker", "isolation": "strict"},
}
BASELINE_BACKEND = {"newclid": "local", "ag4masses": "docker"}


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
    """The same problems, each cold: a fresh sandbox with a fresh python3 (no forkserver)."""
    measured = timed_checks({"backend": "local"}, requests, cold=True, timeout=timeout)
    if isinstance(measured, str):
        raise SystemExit(f"cold checks cannot run here: {measured}")
    times: dict[str, list[float]] = {}
    for seconds, outcome in zip(*measured, strict=True):
        times.setdefault(outcome, []).append(seconds * 1000)
    return {name: int(statistics.median(ms)) for name, ms in times.items()}


def validator_median_us(requests: list[CheckRequest]) -> int:
    times = []
    for request in requests:
        line = request.content.splitlines()[1]
        started = time.perf_counter()
        validator.validate(line)
        times.append(int((time.perf_counter() - started) * 1_000_000))
    return int(statistics.median(times))


def rows(quick: bool) -> list[Row]:
    """One row per engine: baseline and kit columns on JGEX-231 (`quick`: its first 20)."""
    jgex = jgex_file()
    corpus = "JGEX-231" if not quick else f"JGEX-231, first {QUICK_PROBLEMS}"
    if jgex is None:
        return [
            Row(
                "alphageometry",
                corpus,
                0,
                "",
                None,
                note="jgex_ag_231.txt not found: set PROOFLOCK_ALPHAGEOMETRY_DATA",
            )
        ]
    found = []
    for engine in alphageometry.IMAGES:
        problems = requests_from(jgex, {"engine": engine})[: QUICK_PROBLEMS if quick else None]
        found.append(engine_row(engine, problems, corpus))
    return found


def engine_row(engine: str, problems: list[CheckRequest], corpus: str) -> Row:
    notes = []
    baseline_backend = BASELINE_BACKEND[engine]
    baseline = timed_checks({"backend": baseline_backend}, problems, cold=True)
    if isinstance(baseline, str):
        return Row(f"alphageometry ({engine})", corpus, len(problems), "", None, note=baseline)
    row = Row(
        prover=f"alphageometry ({engine})",
        corpus=corpus,
        checks=len(problems),
        baseline=f"fresh python3 per problem, {baseline_backend}",
        baseline_ms=median_ms(baseline[0]),
    )
    identical = True
    for column in KIT_COLUMNS:
        if MODES[column]["backend"] == "local" and baseline_backend != "local":
            row.kit_ms[column] = None
            notes.append(f"{column}: {engine} runs only in its image")
            continue
        measured = timed_checks(MODES[column], problems, cold=False)
        if isinstance(measured, str):
            row.kit_ms[column] = None
            notes.append(f"{column}: {measured}")
            continue
        row.kit_ms[column] = median_ms(measured[0])
        identical = identical and measured[1] == baseline[1]
    row.identical = identical
    solved = sum(1 for outcome in baseline[1] if outcome == "solved")
    row.note = "; ".join([f"{solved}/{len(problems)} solved", *notes])
    return row


def timed_checks(
    mode: dict[str, str], problems: list[CheckRequest], *, cold: bool, timeout: int = ROW_TIMEOUT_S
) -> tuple[list[float], list[str]] | str:
    """Seconds per check and each outcome, one problem at a time; a reason when the mode cannot
    run here (no engine, no daemon, no image)."""
    settings = Settings(cache=False, retries=0, timeout=timeout, workers=1, **mode)
    seconds, outcomes = [], []
    try:
        with Checker(settings) as checker:
            for request in problems:
                started = time.perf_counter()
                result = checker.check_one(request, cold=cold)
                seconds.append(time.perf_counter() - started)
                if result.verdict is Verdict.INFRA_ERROR:
                    return result.diagnostics[0].message.splitlines()[0][:160]
                outcomes.append(str(result.details.get("outcome", result.verdict.value)))
    except (InfraFailure, UserError) as exc:
        return str(exc).splitlines()[0][:160]
    return seconds, outcomes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", default="newclid", choices=sorted(alphageometry.IMAGES))
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
