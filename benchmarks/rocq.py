"""Rocq: a fresh coqc per file against the kit, end to end and steady state (local/docker).

    python -m benchmarks [--quick] rocq        # the bench table's rows (`rows()`)
    python benchmarks/rocq.py [--quick] [--sets small,stdlib] [--backends local,docker]
    python benchmarks/rocq.py --write-small     # regenerate tests/artifacts/rocq-small/

`rows()` measures, on each set, side by side in one run: bare `coqc` per file in a fresh
directory (the naive baseline, sequential as evaluation scripts run it); one `prooflock check`
CLI call over the whole set, with one worker per usable core and with one worker
(boot included: the workers' start and every Require prefix each loads; a worker binary an
earlier call built is reused from the cache dir, as on any machine that checked once): the
first call on an install the kit never checked on, then three later ones (the median kept),
which have the audit memo the first kept (memo.py: the axioms each standard-library object
reaches); the first check alone (one CLI call on one file); the steady state per check (a second
pass through a warm Checker, one check at a time), whose inverse is the checks per second one
core gives. Verdicts are compared with the cold path (`--quick` compares a sample).

Two sets: `small`, 100 files shaped like model output (a header of Requires from Arith, Lia and
Lists, one to three restated standard-library lemmas with 1-20 line proofs, a few failing or
admitted), generated deterministically; `stdlib`, 40 files of Coq's own standard library (Arith,
Bool, Lists, Sorting, Relations). Columns: the naive baseline (`coqc` per file, as public
evaluation scripts run it), the kit on the local backend with its warm worker, the kit in Docker
(warm isolation and strict), and, for reference, the kit's cold path (coqc + coqchk + drivers).
Every kit column checks every file; the table says whether the verdicts agree across columns.
Nothing here is asserted: these are measurements, printed as a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.table import Row
from runner import Checker
from runner.core.models import CheckRequest, CheckResult
from runner.core.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
SMALL_DIR = ROOT / "tests" / "artifacts" / "rocq-small"
STDLIB = Path("/usr/lib/ocaml/coq/theories")
STDLIB_DIRS = ("Arith", "Bool", "Lists", "Sorting", "Relations")
LATER_CALLS = 3  # later calls timed per configuration (the median is reported)

# (header, what it provides)
HEADERS = {
    "arith": "Require Import Arith.\n",
    "lia": "Require Import Arith Lia.\n",
    "list": "Require Import List.\nImport ListNotations.\n",
    "all": "From Coq Require Import Arith Lia List.\nImport ListNotations.\n",
}
# (needs, statement, proof): restated standard-library lemmas, as a model would prove them.
LEMMAS = [
    ("arith", "forall n m : nat, n + m = m + n", "intros n m.\n  apply Nat.add_comm."),
    (
        "arith",
        "forall n m p : nat, n + (m + p) = n + m + p",
        "intros n m p.\n  apply Nat.add_assoc.",
    ),
    ("arith", "forall n : nat, n + 0 = n", "intros n.\n  apply Nat.add_0_r."),
    ("arith", "forall n m : nat, n * m = m * n", "intros n m.\n  apply Nat.mul_comm."),
    ("arith", "forall n : nat, n * 1 = n", "intros n.\n  apply Nat.mul_1_r."),
    ("arith", "forall n m : nat, n <= n + m", "intros n m.\n  apply Nat.le_add_r."),
    (
        "arith",
        "forall n m : nat, S n = S m -> n = m",
        "intros n m H.\n  injection H as H.\n  exact H.",
    ),
    ("arith", "forall n : nat, n - n = 0", "intros n.\n  apply Nat.sub_diag."),
    ("arith", "forall n m : nat, Nat.max n m = Nat.max m n", "intros n m.\n  apply Nat.max_comm."),
    ("arith", "forall n m : nat, Nat.min n m <= n", "intros n m.\n  apply Nat.le_min_l."),
    (
        "arith",
        "forall n : nat, Nat.even (2 * n) = true",
        "intros n.\n  rewrite Nat.even_mul.\n  reflexivity.",
    ),
    (
        "arith",
        "forall n : nat, n + 0 = n",
        "induction n as [| n IH].\n  - reflexivity.\n  - simpl.\n    rewrite IH.\n    reflexivity.",
    ),
    ("arith", "forall n m : nat, n = m -> m = n", "intros n m H.\n  symmetry.\n  exact H."),
    (
        "arith",
        "forall n m : nat, n + S m = S (n + m)",
        "induction n as [| n IH]; intros m.\n  - reflexivity.\n  - simpl.\n    rewrite IH.\n"
        "    reflexivity.",
    ),
    (
        "arith",
        "forall n : nat, 2 * n = n + n",
        "intros n.\n  simpl.\n  rewrite Nat.add_0_r.\n  reflexivity.",
    ),
    ("lia", "forall n : nat, 2 * n = n + n", "intros n.\n  lia."),
    ("lia", "forall n m : nat, n < m -> n + 1 <= m", "intros n m H.\n  lia."),
    ("lia", "forall x y : nat, x + y = y + x", "intros x y.\n  lia."),
    ("lia", "forall n : nat, n * 3 = n + n + n", "intros n.\n  lia."),
    ("lia", "forall a b c : nat, a <= b -> b <= c -> a <= c", "intros a b c H1 H2.\n  lia."),
    ("lia", "forall n : nat, n < n + 1", "intros n.\n  lia."),
    ("lia", "forall n m : nat, n - m <= n", "intros n m.\n  lia."),
    (
        "lia",
        "forall n m : nat, n <= m -> exists k, m = n + k",
        "intros n m H.\n  exists (m - n).\n  lia.",
    ),
    ("list", "forall (A : Type) (l : list A), l ++ [] = l", "intros A l.\n  apply app_nil_r."),
    (
        "list",
        "forall (A : Type) (l m : list A), length (l ++ m) = length l + length m",
        "intros A l m.\n  apply app_length.",
    ),
    (
        "list",
        "forall (A : Type) (l : list A), rev (rev l) = l",
        "intros A l.\n  apply rev_involutive.",
    ),
    (
        "list",
        "forall (A : Type) (l : list A), length (rev l) = length l",
        "intros A l.\n  apply rev_length.",
    ),
    (
        "list",
        "forall (A B : Type) (f : A -> B) (l : list A), length (map f l) = length l",
        "intros A B f l.\n  apply map_length.",
    ),
    (
        "list",
        "forall (A : Type) (x : A) (l : list A), In x (x :: l)",
        "intros A x l.\n  simpl.\n  left.\n  reflexivity.",
    ),
    (
        "list",
        "forall (A : Type) (l : list A), l ++ [] = l",
        "intros A l.\n  induction l as [| x l IH].\n  - reflexivity.\n  - simpl.\n"
        "    rewrite IH.\n    reflexivity.",
    ),
    (
        "list",
        "forall (A : Type) (l1 l2 l3 : list A), l1 ++ l2 ++ l3 = (l1 ++ l2) ++ l3",
        "intros A l1 l2 l3.\n  apply app_assoc.",
    ),
]
# Some answers are wrong or unfinished, as model output is.
WRONG_PROOF = "intros.\n  reflexivity."
UNFINISHED = "intros."


def small_files(count: int = 100, seed: int = 2026) -> dict[str, str]:
    """`count` files like model output, the same for the same seed."""
    rng = random.Random(seed)
    found = {}
    for index in range(count):
        header_name = rng.choice(list(HEADERS))
        usable = [
            lemma
            for lemma in LEMMAS
            if lemma[0] in ("arith", header_name)
            or header_name == "all"
            or (header_name == "lia" and lemma[0] in ("arith", "lia"))
        ]
        body = []
        for number in range(rng.choice((1, 1, 2, 3))):
            _, statement, proof = rng.choice(usable)
            roll = rng.random()
            name = f"lemma_{index}_{number}"
            if roll < 0.06:
                body.append(f"Theorem {name} : {statement}.\nProof.\n  {WRONG_PROOF}\nQed.\n")
            elif roll < 0.10:
                body.append(f"Theorem {name} : {statement}.\nProof.\n  {UNFINISHED}\nAdmitted.\n")
            else:
                body.append(f"Theorem {name} : {statement}.\nProof.\n  {proof}\nQed.\n")
        found[f"small_{index:03d}.v"] = HEADERS[header_name] + "\n" + "\n".join(body)
    return found


def stdlib_files(count: int = 40) -> dict[str, str]:
    """`count` standard-library sources, spread over the five directories, in a fixed order."""
    chosen = round_robin([sorted((STDLIB / d).glob("*.v")) for d in STDLIB_DIRS], count)
    return {f"{p.parent.name}/{p.name}": p.read_text() for p in chosen}


def round_robin(groups: list[list[Path]], count: int) -> list[Path]:
    """Up to `count` paths, one from each group in turn, each group's in its own order."""
    chosen: list[Path] = []
    for position in range(max(map(len, groups), default=0)):
        chosen += [group[position] for group in groups if position < len(group)]
    return chosen[:count]


def naive_coqc(source: str, timeout: float) -> tuple[float, bool]:
    """A fresh coqc on the file, as evaluation scripts run it: (seconds, compiled)."""
    with tempfile.TemporaryDirectory() as work:
        Path(work, "Artifact.v").write_text(source)
        started = time.perf_counter()
        try:
            done = subprocess.run(
                ["coqc", "-q", "-Q", ".", "", "Artifact.v"],
                cwd=work,
                capture_output=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            return time.perf_counter() - started, False
        return time.perf_counter() - started, done.returncode == 0


def kit_column(
    settings: Settings,
    files: dict[str, str],
    timeout: int,
    *,
    cold: bool = False,
    log: Callable[[str], None],
) -> tuple[list[float], dict[str, str]]:
    """Seconds per check (after a warm-up pass that boots the workers) and the verdicts."""
    times, verdicts = [], {}
    with Checker(settings) as checker:
        requests = [
            CheckRequest(prover="rocq", name=n, content=c, timeout=timeout)
            for n, c in files.items()
        ]
        if not cold:
            for request in requests:  # boots the workers this set needs; not measured
                checker.check_one(request)
        for request in requests:
            started = time.perf_counter()
            result: CheckResult = checker.check_one(request, cold=cold)
            times.append(time.perf_counter() - started)
            verdicts[request.name] = result.verdict.value
            log(f"  {request.name}: {result.verdict.value} {times[-1] * 1000:.0f} ms")
    return times, verdicts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10 small files, 5 stdlib files")
    parser.add_argument("--sets", default="small,stdlib")
    parser.add_argument("--backends", default="local,docker")
    parser.add_argument("--cold", action="store_true", help="also time the kit's cold path")
    parser.add_argument("--timeout", type=int, default=600)
    parser.add_argument("--write-small", action="store_true", help="write the small set and exit")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    if args.write_small:
        SMALL_DIR.mkdir(parents=True, exist_ok=True)
        for name, text in small_files().items():
            (SMALL_DIR / name).write_text(text)
        print(f"wrote {len(small_files())} files to {SMALL_DIR}")
        return 0

    def log(line: str) -> None:
        if args.verbose:
            print(line, file=sys.stderr)

    sets = {
        "small": small_files(10 if args.quick else 100),
        "stdlib": stdlib_files(5 if args.quick else 40),
    }
    backends = args.backends.split(",")
    rows = []
    for set_name in args.sets.split(","):
        files = sets[set_name]
        naive, compiled = [], {}
        for name, text in files.items():
            seconds, ok = naive_coqc(text, args.timeout)
            naive.append(seconds)
            compiled[name] = ok
        columns: dict[str, tuple[list[float], dict[str, str]]] = {}
        base = Settings(cache=False, retries=0, timeout=args.timeout)
        if "local" in backends:
            columns["kit local warm"] = kit_column(
                base.model_copy(update={"backend": "local"}), files, args.timeout, log=log
            )
        if "docker" in backends:
            for isolation in ("warm", "strict"):
                settings = base.model_copy(update={"backend": "docker", "isolation": isolation})
                columns[f"kit docker {isolation}"] = kit_column(
                    settings, files, args.timeout, log=log
                )
        if args.cold:
            columns["kit local cold"] = kit_column(
                base.model_copy(update={"backend": "local"}),
                files,
                args.timeout,
                cold=True,
                log=log,
            )
        baseline = statistics.median(naive)
        verdict_sets = [v for _, v in columns.values()]
        agree = all(v == verdict_sets[0] for v in verdict_sets)
        compiles = all(
            (verdicts[name] != "fail") == compiled[name]
            for verdicts in verdict_sets
            for name in files
        )
        rows.append((set_name, "naive coqc per file", baseline, 1.0, len(files), "-"))
        for label, (times, verdicts) in columns.items():
            median = statistics.median(times)
            same = (
                f"{'yes' if agree else 'NO'} ({sum(v == 'pass' for v in verdicts.values())} pass)"
            )
            rows.append((set_name, label, median, baseline / median, len(times), same))
        if not compiles:
            rows.append(
                (set_name, "(a kit `fail` where coqc compiled, or the reverse)", 0, 0, 0, "!")
            )
    print(
        "| set | how | median ms per check | speed-up over naive coqc | checks | verdicts agree |"
    )
    print("|---|---|---:|---:|---:|---|")
    for set_name, label, median, ratio, count, same in rows:
        print(f"| {set_name} | {label} | {median * 1000:.0f} | {ratio:.2f}x | {count} | {same} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())


# -- the bench table ---------------------------------------------------------------------------


def naive_set(files: dict[str, str], timeout: float) -> tuple[float, list[float], dict[str, bool]]:
    """Bare coqc per file, one after the other: (total seconds, per file, compiled)."""
    started = time.perf_counter()
    per_file, compiled = [], {}
    for name, text in files.items():
        seconds, ok = naive_coqc(text, timeout)
        per_file.append(seconds)
        compiled[name] = ok
    return time.perf_counter() - started, per_file, compiled


def cli_call(
    files: dict[str, str], backend: str, cache_dir: Path, timeout: int, workers: int = 0
) -> tuple[float, float, dict[str, str]]:
    """One `prooflock check` over every file: (wall seconds, CPU seconds of it and the processes
    it reaped (a sandbox's killed tree is not among them), verdict by file name)."""
    with tempfile.TemporaryDirectory() as work:
        paths = []
        for name, text in files.items():
            path = Path(work, name.replace("/", "_"))
            path.write_text(text)
            paths.append(str(path))
        argv = [sys.executable, "-m", "runner.cli", "check", "--prover", "rocq"]
        argv += ["--backend", backend, "--no-cache", "--daemon", "off", "--timeout", str(timeout)]
        if backend == "docker":
            argv += ["--isolation", "warm"]
        if workers:
            argv += ["--workers", str(workers)]
        # The runner next to this file, not whichever one an editable install maps (the CLI
        # runs in a temporary directory).
        pythonpath = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
        env = {**os.environ, "PROOFLOCK_CACHE_DIR": str(cache_dir), "PYTHONPATH": pythonpath}
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run(argv + paths, capture_output=True, env=env, cwd=work)
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    verdicts = {}
    for line in done.stdout.decode().splitlines():
        record = json.loads(line)
        verdicts[Path(record["artifact"]).name] = record["verdict"]
    by_name = {name: verdicts.get(name.replace("/", "_"), "missing") for name in files}
    return wall, cpu, by_name


def _worker_cache(cache_dir: Path) -> None:
    """The worker binary an earlier call built (the user's cache dir), so the measured calls
    pay the boot but not the one-time build."""
    from runner.core.settings import Settings

    built = Settings().cache_dir / "rocq-worker"
    if built.is_dir():
        shutil.copytree(built, cache_dir / "rocq-worker", dirs_exist_ok=True)


def _docker_ready() -> bool:
    try:
        import docker

        docker.from_env().ping()
        return True
    except Exception:  # noqa: BLE001 - no daemon here: the docker column says "-"
        return False


def usable_cores() -> int:
    """The cores this process may run on (its affinity, a container's cpuset)."""
    return max(1, len(os.sched_getaffinity(0)))


def rows(quick: bool) -> list[Row]:
    timeout = 300
    sets = {
        "small": small_files(100),  # the headline corpus, --quick too: a minute of bare coqc
        "stdlib": stdlib_files(5 if quick else 40),
    }
    backends = ["local"] + (["docker"] if _docker_ready() else [])
    for backend in backends:  # the one-time build of the worker, in the user's cache dir
        from runner.core.settings import Settings as UserSettings

        cli_call(
            {"build.v": "Lemma t : True.\nProof. exact I. Qed.\n"},
            backend,
            UserSettings().cache_dir,
            timeout,
        )
    found: list[Row] = []
    workers = usable_cores()
    for set_name, files in sets.items():
        naive_total, naive_each, compiled = naive_set(files, timeout)
        totals: dict[str, float] = {}
        spread: dict[str, list[float]] = {}
        firsts: dict[str, float] = {}
        agree_compile = True
        first_name = next(iter(files))
        for backend in backends:
            runs = [(f"{backend}, {workers} workers", workers)] if workers > 1 else []
            runs += [(f"{backend}, 1 worker", 1)]
            with tempfile.TemporaryDirectory() as cache:
                _worker_cache(Path(cache))
                first, _, _ = cli_call(
                    {first_name: files[first_name]}, backend, Path(cache), timeout
                )
                firsts[backend] = first
            for label, count in runs:
                # Each configuration on an install the kit never checked on (only the worker
                # binary kept), then once more: the later call has the audit memo the first kept.
                # A later call is timed LATER_CALLS times, its median kept: one call's time
                # moves by a third from run to run on this machine.
                with tempfile.TemporaryDirectory() as cache:
                    _worker_cache(Path(cache))
                    for key, calls in ((f"{label}, first call", 1), (label, LATER_CALLS)):
                        walls = []
                        for _ in range(calls):
                            wall, _, verdicts = cli_call(
                                files, backend, Path(cache), timeout, count
                            )
                            walls.append(wall)
                            agree_compile &= all(
                                (verdicts[n] != "fail") == compiled[n] for n in files
                            )
                        totals[key] = statistics.median(walls)
                        spread[key] = walls
        steady, warm_verdicts, cold_same = _steady_and_cold(files, timeout, quick)
        headline = f"local, {workers} workers" if workers > 1 else "local, 1 worker"
        others = "; ".join(
            f"{label}: {wall:.1f} s ({naive_total / wall:.1f}x)"
            for label, wall in totals.items()
            if label != headline
        )
        found.append(
            Row(
                prover="rocq",
                corpus=f"{set_name} ({len(files)} files)",
                checks=len(files),
                baseline="coqc per file",
                baseline_ms=median_ms(naive_each),
                kit_ms={"local warm": median_ms(steady)},
                identical=cold_same and agree_compile,
                note=(
                    f"{headline}: later calls "
                    f"{' / '.join(f'{wall:.1f}' for wall in spread[headline])} s (median kept); "
                    f"{others}; first check {' / '.join(f'{b} {t:.1f} s' for b, t in firsts.items())}"
                    f" (bare coqc on that file {naive_each[0]:.2f} s); "
                    f"{sum(v == 'pass' for v in warm_verdicts.values())} pass"
                ),
                baseline_total_s=round(naive_total, 2),
                kit_total_s=round(totals[headline], 2),
                kit_total_how=(
                    f"prooflock check --backend local --workers {workers}, the median of "
                    f"{LATER_CALLS} later calls on the install (its audit memo kept; the first "
                    "call's time is in the note)"
                ),
                first_check_s=round(firsts["local"], 2),
            )
        )
    return found


def median_ms(seconds: list[float]) -> float:
    return round(statistics.median(seconds) * 1000, 1)


def _steady_and_cold(
    files: dict[str, str], timeout: int, quick: bool
) -> tuple[list[float], dict[str, str], bool]:
    """Per-check seconds of a second pass through a warm Checker, its verdicts, and whether the
    cold path gives the same verdicts (on a sample of 5 with --quick)."""
    with tempfile.TemporaryDirectory() as base:
        settings = Settings(
            backend="local",
            cache=False,
            retries=0,
            timeout=timeout,
            cache_dir=Path(base) / "cache",
            checkpoint_dir=Path(base) / "checkpoints",
        )
        _worker_cache(Path(base) / "cache")
        with Checker(settings) as checker:
            requests = [
                CheckRequest(prover="rocq", name=n, content=c, timeout=timeout)
                for n, c in files.items()
            ]
            for request in requests:
                checker.check_one(request)
            times, verdicts = [], {}
            for request in requests:
                started = time.perf_counter()
                verdicts[request.name] = checker.check_one(request).verdict.value
                times.append(time.perf_counter() - started)
            sample = requests[:5] if quick else requests
            same = all(
                checker.check_one(r, cold=True).verdict.value == verdicts[r.name] for r in sample
            )
    return times, verdicts, same
