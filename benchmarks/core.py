"""Core benchmarks: the kit's per-check overhead over bare coqc, and durable append throughput.

Ratios are measured side by side in one run: `nox -s bench -- core` (or `python benchmarks/core.py`).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from runner import Checker, CheckRequest
from runner.core.settings import Settings
from runner.records.checkpoint import CheckpointLog

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "artifacts" / "rocq"
FILES = [
    "pass_arith.v",
    "pass_induction.v",
    "fail_tactic.v",
    "admitted.v",
    "user_axiom.v",
    "classical.v",
]
ROUNDS = 3


def bare_coqc(source: str) -> float:
    with tempfile.TemporaryDirectory() as work:
        Path(work, "Artifact.v").write_text(source)
        started = time.perf_counter()
        subprocess.run(["coqc", "-q", "-Q", ".", "", "Artifact.v"], cwd=work, capture_output=True)
        return time.perf_counter() - started


def kit_check(checker: Checker, name: str, source: str) -> float:
    started = time.perf_counter()
    checker.check_one(CheckRequest(prover="rocq", name=name, content=source))
    return time.perf_counter() - started


def cli_check(path: Path) -> float:
    started = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "runner.cli",
            "check",
            "--prover",
            "rocq",
            "--backend",
            "local",
            "--no-cache",
            str(path),
        ],
        capture_output=True,
    )
    return time.perf_counter() - started


def overhead() -> None:
    settings = Settings(backend="local", cache=False)
    bare, kit, cli = [], [], []
    with Checker(settings) as checker:
        for _ in range(ROUNDS):
            for name in FILES:
                source = (CORPUS / name).read_text()
                bare.append(bare_coqc(source))
                kit.append(kit_check(checker, name, source))
                cli.append(cli_check(CORPUS / name))
    b, k, c = (statistics.median(x) for x in (bare, kit, cli))
    print(f"per-check median over {len(bare)} checks ({len(FILES)} files x {ROUNDS}):")
    print(f"  bare coqc (compile only)            {b * 1000:8.0f} ms   1.00x")
    print(f"  Checker.check_one (compile+assumptions) {k * 1000:4.0f} ms   {k / b:.2f}x")
    print(f"  prooflock check CLI (+ Python start) {c * 1000:7.0f} ms   {c / b:.2f}x")


def append_rates(records: int = 2000) -> dict[int, float]:
    """Durable appends per second of ~1.7 KB records, fsync every 1, 8 and 64 records."""
    body = {"index": 0, "result": {"verdict": "pass", "diagnostics": ["x" * 1500]}}
    rates = {}
    for every in (1, 8, 64):
        with (
            tempfile.TemporaryDirectory() as work,
            CheckpointLog(Path(work) / "log.jsonl", fsync_every=every) as log,
        ):
            started = time.perf_counter()
            for i in range(records):
                body["index"] = i
                log.append("result", body)
            log.sync()
            rates[every] = records / (time.perf_counter() - started)
    return rates


def notes(quick: bool) -> list[str]:
    rates = append_rates(500 if quick else 2000)
    listed = ", ".join(f"fsync every {every}: {rate:.0f}/s" for every, rate in rates.items())
    return [f"checkpoint appends (durable, ~1.7 KB records; target >= 1000/s): {listed}"]


def append_throughput(records: int = 2000) -> None:
    body = {"index": 0, "result": {"verdict": "pass", "diagnostics": ["x" * 1500]}}
    print(f"durable appends, {records} records of ~1.7 KB:")
    baseline = None
    for every in (1, 8, 64):
        with (
            tempfile.TemporaryDirectory() as work,
            CheckpointLog(Path(work) / "log.jsonl", fsync_every=every) as log,
        ):
            started = time.perf_counter()
            for i in range(records):
                body["index"] = i
                log.append("result", body)
            log.sync()
            rate = records / (time.perf_counter() - started)
        baseline = baseline or rate
        print(
            f"  fsync every {every:3d} record(s)   {rate:10.0f} records/s   {rate / baseline:6.2f}x"
        )


if __name__ == "__main__":
    overhead()
    append_throughput()
