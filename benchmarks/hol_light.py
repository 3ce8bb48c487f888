"""HOL Light: the first check on a machine (HOL Light's boot included), the steady state per
check, and the replay of HOL Light's own 100-theorems files, next to naive `hol-light < file`.

    python -m benchmarks [--quick] hol_light

The naive baseline is what an evaluation script does without the kit: a fresh HOL Light toplevel
per file, `#use "hol.ml"` then the file. The kit's first check is a fresh Checker's first check:
it boots the worker (HOL Light with the recording kernel, the library export) and the replayer
(built, then the library re-derived by HOL Light's kernel alone). Steady state is the median of
small proofs on that warm pair. Nothing here is asserted: these are measurements.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Literal

from benchmarks.table import Row, median_ms
from runner.check.checker import Checker
from runner.core.models import CheckRequest, CheckResult, Verdict
from runner.core.settings import Settings

HOL_DIR = Path("/usr/share/hol-light")
HUNDRED = HOL_DIR / "100"
CORE_ONLY = [
    "arithmetic.ml",
    "birthday.ml",
    "cantor.ml",
    "euler.ml",
    "konigsberg.ml",
    "lagrange.ml",
    "quartic.ml",
    "ramsey.ml",
    "subsequence.ml",
]
QUICK_HUNDRED = ["cantor.ml", "birthday.ml"]
SMALL_PROOFS = {
    "add_comm.ml": "let X = prove(`!m n. m + n = n + m`, ARITH_TAC);;",
    "arith_rule.ml": "let X = ARITH_RULE `2 + 2 = 4`;;",
    "mult_zero.ml": "let X = prove(`!n. n * 0 = 0`, REWRITE_TAC[MULT_CLAUSES]);;",
    "taut.ml": "let X = TAUT `p /\\ q ==> q /\\ p`;;",
    "meson.ml": "let X = prove(`(!x. P x ==> Q x) /\\ P a ==> Q a`, MESON_TAC[]);;",
    "real_arith.ml": "let X = REAL_ARITH `!x y:real. x + y = y + x`;;",
    "sets.ml": "let X = SET_RULE `!s t:A->bool. s INTER t SUBSET s`;;",
    "definition.ml": (
        "let triple = new_definition `triple n = 3 * n`;;\n"
        "let X = prove(`triple 2 = 6`, REWRITE_TAC[triple] THEN ARITH_TAC);;"
    ),
}
TIMEOUT = 600
# column -> backend: both boot their servers (snapshots off); the first check from snapshots is
# measured on its own (`from_snapshots`)
BACKENDS: dict[str, Literal["local", "docker"]] = {"local warm": "local", "docker warm": "docker"}


def request(name: str, content: str) -> CheckRequest:
    return CheckRequest(prover="hol-light", name=name, content=content + "\n", timeout=TIMEOUT)


def naive(name: str, content: str) -> tuple[float, bool]:
    """`hol-light < file`: a fresh toplevel loads HOL Light, then the file. Seconds, and whether
    the file went through (a failed phrase prints an error and the toplevel carries on)."""
    with tempfile.TemporaryDirectory() as work:
        Path(work, name).write_text(content + "\n")
        script = f'#use "{HOL_DIR}/hol.ml";;\n#use "{name}";;\n'
        clock = time.monotonic()
        done = subprocess.run(
            [str(HOL_DIR / "ocaml")],
            input=script,
            cwd=work,
            capture_output=True,
            text=True,
            timeout=3600,
            env={**os.environ, "HOLLIGHT_DIR": str(HOL_DIR)},
        )
        seconds = time.monotonic() - clock
    ok = done.returncode == 0 and "Exception" not in done.stdout and "Error" not in done.stdout
    return seconds, ok


def kit(
    backend: Literal["local", "docker"], snapshots: Literal["auto", "off"], files: dict[str, str]
) -> tuple[float, list[float], list[CheckResult]]:
    """A fresh Checker: its first check (both boots, or both restores, included), then the rest,
    warm."""
    settings = Settings(backend=backend, snapshots=snapshots, cache=False, retries=0, daemon="off")
    if snapshots == "auto":  # the snapshots a machine keeps from `prooflock images build`
        with Checker(settings) as checker:
            checker.check_one(request(*next(iter(files.items()))))
        drop_page_cache()  # read from disk, as on a machine that has not just written them
    with Checker(settings) as checker:
        results, walls = [], []
        for name, content in files.items():
            clock = time.monotonic()
            results.append(checker.check_one(request(name, content)))
            walls.append(time.monotonic() - clock)
    return walls[0], walls[1:], results


def rows(quick: bool) -> list[Row]:
    if not (HOL_DIR / "hol.ml").exists():
        return [Row("hol-light", "-", 0, "", None, note="Debian's hol-light is not installed")]
    small = dict(list(SMALL_PROOFS.items())[: 4 if quick else None])
    hundred = {
        name: (HUNDRED / name).read_text() for name in (QUICK_HUNDRED if quick else CORE_ONLY)
    }
    baseline_name, baseline_content = next(iter(small.items()))
    baseline_s, _ = naive(baseline_name, baseline_content)
    first = Row(
        "hol-light",
        "first check on a machine (boot included)",
        1,
        "hol-light < file",
        round(baseline_s * 1000, 1),
    )
    steady = Row(
        "hol-light",
        f"small proofs, warm ({len(small) - 1})",
        len(small) - 1,
        "hol-light < file",
        round(baseline_s * 1000, 1),
    )
    replayed = Row("hol-light", f"100-theorems, core-only ({len(hundred)})", len(hundred), "", None)
    notes: dict[str, list[str]] = {"first": [], "steady": [], "hundred": []}
    for column, backend in BACKENDS.items():
        try:
            first_s, rest, results = kit(backend, "off", {**small, **hundred})
        except Exception as exc:  # noqa: BLE001 - a missing daemon or image is a note, not a crash
            notes["first"].append(f"{column}: {exc}")
            continue
        small_results = results[: len(small)]
        hundred_results = results[len(small) :]
        first.kit_ms[column] = round(first_s * 1000, 1)
        steady.kit_ms[column] = median_ms(rest[: len(small) - 1])
        replayed.kit_ms[column] = median_ms(rest[len(small) - 1 :])
        steady.identical = all(r.verdict is Verdict.PASS for r in small_results)
        replay_ms = [r.provenance.extra.get("replay_ms") for r in hundred_results]
        known = [int(ms) for ms in replay_ms if isinstance(ms, int)]
        passed = sum(r.verdict is Verdict.PASS for r in hundred_results)
        notes["hundred"].append(
            f"{column}: {passed}/{len(hundred)} pass; replay median "
            f"{statistics.median(known) if known else '-'} ms, worst {max(known, default='-')} ms"
        )
    from_snapshots(first, small, notes["first"])
    first.note = "; ".join(
        notes["first"] or ["a fresh Checker: worker and replayer boot (snapshots off)"]
    )
    steady.note = "median per check once both servers are warm"
    replayed.note = "; ".join(notes["hundred"])
    return [first, steady, replayed]


def from_snapshots(row: Row, small: dict[str, str], notes: list[str]) -> None:
    """The first check on a machine that has the image and the snapshots `prooflock images
    build` keeps, but has never booted HOL Light (docker): a fresh Checker restores the worker
    and the replayer, page cache dropped first."""
    try:
        first_s, _, results = kit("docker", "auto", dict(list(small.items())[:1]))
    except Exception as exc:  # noqa: BLE001 - a missing daemon or image is a note, not a crash
        notes.append(f"from snapshots: {exc}")
        return
    restored = results[0].provenance.restored()
    row.first_check_s = row.kit_total_s = round(first_s, 2)
    row.baseline_total_s = round((row.baseline_ms or 0) / 1000, 1) or None
    row.kit_total_how = "docker, worker and replayer restored from their snapshots"
    notes.append(
        f"from snapshots: {results[0].verdict.value}, "
        + ("both servers restored" if restored else "NOT RESTORED (booted)")
        + "; local and docker warm: both servers boot (snapshots off)"
    )


def drop_page_cache() -> None:
    """As root; elsewhere the snapshot is read from the page cache, and the note says nothing."""
    try:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    except OSError:
        pass


if __name__ == "__main__":
    from benchmarks.table import markdown

    print(markdown(rows(quick=True)))
