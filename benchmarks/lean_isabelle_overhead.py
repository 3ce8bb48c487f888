"""The kit's own per-check cost for Lean and Isabelle, measured with the protocol doubles.

    python benchmarks/lean_isabelle_overhead.py [--checks 50]

The doubles answer at once, so what is timed is everything but the prover: the source policy,
the pool, the sandbox channel (bubblewrap when the machine allows it), the in-sandbox server (REPL framing, the declaration listing and
`#print axioms` round trips for Lean; the TCP protocol, `use_theories`, the report theory and
`purge_theories` for Isabelle) and the verdict. Real Lean and Isabelle add their own time on
top; this says how much the kit adds. Numbers are medians of warm checks (boot excluded).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from runner.check.checker import Checker
from runner.core.models import CheckRequest, Verdict
from runner.core.settings import Settings

DOUBLES = Path(__file__).resolve().parent.parent / "tests" / "doubles"
sys.path.insert(0, str(DOUBLES))
import shims  # noqa: E402

LEAN = "import Mathlib.Tactic\n\ntheorem add_zero' (n : ℕ) : n + 0 = n := by simp\n"
ISABELLE = (
    'theory Scratch imports Main begin\n\nlemma rev_rev: "rev (rev xs) = xs" by simp\n\nend\n'
)


def median_ms(checker: Checker, request: CheckRequest, checks: int) -> tuple[float, str]:
    first = checker.check_one(request)  # boots the server
    assert first.verdict is Verdict.PASS, first.diagnostics
    times = []
    for _ in range(checks):
        started = time.perf_counter()
        result = checker.check_one(request)
        times.append((time.perf_counter() - started) * 1000)
        assert result.verdict is Verdict.PASS, result.diagnostics
    return statistics.median(times), first.provenance.isolation


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checks", type=int, default=50)
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory(prefix="prooflock-overhead-") as tmp,
        shims.sandboxed_shims() as bin_dir,
    ):
        root = Path(tmp)
        os.environ["PATH"] = f"{bin_dir}{os.pathsep}{os.environ['PATH']}"
        settings = Settings(
            backend="local",
            cache=False,
            checkpoint_dir=root / "checkpoints",
            cache_dir=root / "cache",
            retries=0,
        )
        with Checker(settings) as checker:
            lean = CheckRequest(prover="lean", name="Add.lean", content=LEAN, timeout=30)
            isabelle = CheckRequest(
                prover="isabelle", name="Scratch.thy", content=ISABELLE, timeout=30
            )
            for label, request in (("lean", lean), ("isabelle", isabelle)):
                median, isolation = median_ms(checker, request, args.checks)
                print(
                    f"{label:9} median {median:6.1f} ms per warm check "
                    f"({args.checks} checks, the double, isolation {isolation})"
                )


if __name__ == "__main__":
    main()
