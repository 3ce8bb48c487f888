"""HOL Light: boot cost, per-check latency through the forkserver, and the cold per-file cost.

    python benchmarks/hol_light.py [--backend local|docker] [--rounds 2] [--cold 2] [--json OUT]

Checks 16 small proof files (each `--rounds` times) through one warm worker via the Checker, then
boots HOL Light per file for the first `--cold` of them, as a checker without a forkserver must.
Prints a summary and, with --json, writes the numbers. Nothing here is asserted: these are
measurements for the README, not tests.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

from runner.check.checker import Checker
from runner.core.models import CheckRequest, Verdict
from runner.core.settings import Settings

SMALL_PROOFS = {
    "add_comm.ml": "let X = prove(`!m n. m + n = n + m`, ARITH_TAC);;",
    "arith_rule.ml": "let X = ARITH_RULE `2 + 2 = 4`;;",
    "mult_zero.ml": "let X = prove(`!n. n * 0 = 0`, REWRITE_TAC[MULT_CLAUSES]);;",
    "le_refl.ml": "let X = prove(`!n. n <= n`, REWRITE_TAC[LE_REFL]);;",
    "suc_ne.ml": "let X = prove(`!n. ~(SUC n = 0)`, REWRITE_TAC[NOT_SUC]);;",
    "even_double.ml": "let X = prove(`!n. EVEN(2 * n)`, REWRITE_TAC[EVEN_MULT; ARITH]);;",
    "taut.ml": "let X = TAUT `p /\\ q ==> q /\\ p`;;",
    "meson.ml": "let X = prove(`(!x. P x ==> Q x) /\\ P a ==> Q a`, MESON_TAC[]);;",
    "induction.ml": (
        "let X = prove(`!n. 2 * nsum(0..n) (\\i. i) = n * (n + 1)`,\n"
        "  INDUCT_TAC THEN ASM_REWRITE_TAC[NSUM_CLAUSES_NUMSEG; LE_0] THEN ASM_ARITH_TAC);;"
    ),
    "real_arith.ml": "let X = REAL_ARITH `!x y:real. x + y = y + x`;;",
    "int_arith.ml": "let X = INT_ARITH `!x:int. x - x = &0`;;",
    "sets.ml": "let X = SET_RULE `!s t:A->bool. s INTER t SUBSET s`;;",
    "lists.ml": "let X = prove(`!l:A list. APPEND l [] = l`, REWRITE_TAC[APPEND_NIL]);;",
    "exists.ml": "let X = prove(`?n. n + 1 = 3`, EXISTS_TAC `2` THEN ARITH_TAC);;",
    "definition.ml": (
        "let triple = new_definition `triple n = 3 * n`;;\n"
        "let X = prove(`triple 2 = 6`, REWRITE_TAC[triple] THEN ARITH_TAC);;"
    ),
    "num_reduce.ml": "let X = NUM_REDUCE_CONV `12 * 13 + 7`;;",
}


def request(name: str, timeout: int) -> CheckRequest:
    return CheckRequest(
        prover="hol-light", name=name, content=SMALL_PROOFS[name] + "\n", timeout=timeout
    )


def warm(settings: Settings, rounds: int, timeout: int) -> dict:
    """One worker: its boot, then every proof `rounds` times."""
    latencies, verdicts = [], {}
    with Checker(settings) as checker:
        clock = time.monotonic()
        first = checker.check_one(request("arith_rule.ml", timeout))  # opens the worker: the boot
        boot_wall_ms = int((time.monotonic() - clock) * 1000)
        for _ in range(rounds):
            for name in SMALL_PROOFS:
                result = checker.check_one(request(name, timeout))
                verdicts[name] = result.verdict.value
                latencies.append(result.provenance.wall_ms)
                print(
                    f"  warm {name}: {result.verdict.value} {result.provenance.wall_ms} ms",
                    file=sys.stderr,
                )
    return {
        "boot_ms": first.provenance.extra.get("boot_ms"),
        "first_check_wall_ms": boot_wall_ms,
        "checks": len(latencies),
        "median_ms": statistics.median(latencies),
        "p90_ms": sorted(latencies)[int(0.9 * (len(latencies) - 1))],
        "min_ms": min(latencies),
        "max_ms": max(latencies),
        "verdicts": verdicts,
    }


def cold(settings: Settings, count: int, timeout: int) -> dict:
    """HOL Light started afresh for each file, as checkers without a forkserver do."""
    walls, verdicts = [], {}
    with Checker(settings) as checker:
        for name in list(SMALL_PROOFS)[:count]:
            clock = time.monotonic()
            result = checker.check_one(request(name, timeout), cold=True)  # a fresh server each
            wall = int((time.monotonic() - clock) * 1000)
            walls.append(wall)
            verdicts[name] = result.verdict.value
            print(f"  cold {name}: {result.verdict.value} {wall} ms", file=sys.stderr)
    return {
        "checks": len(walls),
        "median_ms": statistics.median(walls) if walls else None,
        "verdicts": verdicts,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="local", choices=("auto", "docker", "local"))
    parser.add_argument("--rounds", type=int, default=2, help="passes over the 16 proofs (warm)")
    parser.add_argument("--cold", type=int, default=2, help="files to check with a boot each")
    parser.add_argument("--timeout", type=int, default=60)
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    args = parser.parse_args(argv)
    settings = Settings(backend=args.backend, cache=False, retries=0)

    report: dict = {
        "host": platform.node(),
        "python": platform.python_version(),
        "backend": args.backend,
    }
    report["warm"] = warm(settings, args.rounds, args.timeout)
    report["cold"] = cold(settings, args.cold, args.timeout) if args.cold else None
    failed = [n for n, v in report["warm"]["verdicts"].items() if v != Verdict.PASS.value]
    if report["cold"] and report["cold"]["median_ms"]:
        report["cold_over_warm"] = round(
            report["cold"]["median_ms"] / max(report["warm"]["median_ms"], 1)
        )

    warm_part = report["warm"]
    print(f"boot (HOL Light loaded once): {warm_part['boot_ms']} ms")
    print(
        f"forkserver, {warm_part['checks']} checks: median {warm_part['median_ms']} ms, "
        f"p90 {warm_part['p90_ms']} ms (min {warm_part['min_ms']}, max {warm_part['max_ms']})"
    )
    if report["cold"]:
        cold_part = report["cold"]
        print(f"cold, {cold_part['checks']} files: median {cold_part['median_ms']} ms per file")
        print(f"cold / forkserver median: {report.get('cold_over_warm')}x")
    if failed:
        print(f"did not pass: {', '.join(failed)}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
