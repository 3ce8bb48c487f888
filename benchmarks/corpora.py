"""The provers' own test suites through the kit, beside the bare tool: agreement and time.

`rows(quick)` (for `python -m benchmarks`): Coq's test-suite of each Rocq line (success/,
failure/, bugs/ of the Debian source package of the line's coq, filtered as
tests/support/corpora.py says; 8.20's on docker only, labelled by the coqc in its image), HOL
Light's own example files, AlphaGeometry's JGEX and IMO sets and Asymptote's gallery. Each file
is labelled by the bare tool, one process per file, one after another; the kit checks the same
files in one `Checker` with its default workers. A row says how many agree, how many the kit
refuses by design, and names each disagreement. `quick` takes the CI samples. `notes(quick)`:
the speed comparison below, in the full bench only.

    python -m benchmarks.corpora [--quick] [--backend local|docker] [--json OUT]
                                 [--progress LOG [--resume]] [--only PREFIX] [--interleave]
                                 [--bare-boot-each] [CORPUS ...]
        the same, with one line per disagreement and design refusal, and every file's label and
        verdict in OUT (LOG: a line per label and verdict as it comes); HOL Light's bare labels
        come from one boot with a child forked per file, or a boot per file (--bare-boot-each)
    python -m benchmarks.corpora --speed [--backend local|docker]
        the kit end to end (`prooflock run`) against bare coqc, and coqc + coqchk, per file on
        a fixed fifth of Coq 8.16.1's suite, and where the kit's time went (its records' phases)

A report, not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.asymptote import bare_where
from benchmarks.hol_light_fork_labels import bare_hol_light_forked
from benchmarks.table import Row, markdown, median_ms
from runner.check.checker import Checker
from runner.core.models import CheckRequest, CheckResult
from runner.core.settings import Settings
from runner.provers.alphageometry import definitions
from tests.completeness.test_asymptote_gallery import MISSING, docker_skip_reason, gallery
from tests.completeness.test_asymptote_gallery import TIMEOUT_S as ASY_TIMEOUT_S
from tests.completeness.test_asymptote_gallery import request as gallery_request
from tests.support.alphageometry import shared_data
from tests.support.corpora import (
    ACCEPTED,
    HOL_LIGHT_CI_SAMPLE,
    Agreement,
    Bare,
    agreement,
    alphageometry_ci_sample,
    alphageometry_problems,
    bare_coqc,
    bare_coqc_coqchk,
    bare_coqc_in_image,
    bare_hol_light,
    bare_newclid,
    coq_ci_sample,
    coq_suite_files,
    coq_test_suite,
    hol_light_examples,
    newclid_could_not_read,
    newclid_skip_reason,
    stable_sample,
)

COQ_TIMEOUT_S = 120
HOL_LIGHT_TIMEOUT_S = 300
HOL_LIGHT_BARE_TIMEOUT_S = 1200  # a bare toplevel loads all of hol.ml first
AG_TIMEOUT_S = 60


@dataclass
class Compared:
    """One corpus: each file's bare label, the kit's result, and the totals of both."""

    corpus: str
    bare: dict[str, Bare] = field(default_factory=dict)
    kit: dict[str, CheckResult] = field(default_factory=dict)
    bare_total_s: float = 0.0
    kit_total_s: float = 0.0
    # Which bare failures may be the bare tool's want, not the file's: Asymptote's 3D without
    # OpenGL, newclid's CLI that cannot read AlphaGeometry's dialect, which the kit's driver reads.
    kit_may_accept_more: Callable[[Bare], bool] = lambda bare: False

    def outcome(self, name: str) -> Agreement:
        found = agreement(self.bare[name], self.kit[name])
        if found is Agreement.DISAGREE and self.kit_may_accept_more(self.bare[name]):
            return Agreement.KIT_MORE if self.kit[name].verdict in ACCEPTED else found
        return found

    def named(self, kind: Agreement) -> list[str]:
        return [name for name in self.kit if self.outcome(name) is kind]

    def explain(self, name: str) -> str:
        result = self.kit[name]
        said = result.diagnostics[0].message.splitlines()[0] if result.diagnostics else ""
        bare = self.bare[name]
        label = (
            "times out"
            if bare.timed_out
            else "crashes"
            if bare.crashed
            else "accepts"
            if bare.accepted
            else "rejects"
        )
        return f"{name}: bare {label}, kit {result.verdict.value} ({said[:160]})"

    def row(self, prover: str, baseline: str, backend: str) -> Row:
        agree = self.named(Agreement.AGREE)
        refused = self.named(Agreement.DESIGN_REFUSAL)
        differ = self.named(Agreement.DISAGREE)
        more = self.named(Agreement.KIT_MORE)
        crashed = self.named(Agreement.BOTH_CRASH)
        column = "local warm" if backend == "local" else "docker warm"
        walls = [r.provenance.wall_ms / 1000 for r in self.kit.values()]
        note = (
            f"{len(agree)}/{len(self.kit)} agree with {baseline.split()[0]}, "
            f"{len(refused)} refused by design, {len(differ)} differ"
            + (
                f", the kit also accepts {len(more)} the bare tool could not do here"
                if more
                else ""
            )
            + (f", the tool crashes on {len(crashed)} bare and in the kit" if crashed else "")
            + "".join(f"; {self.explain(name)}" for name in differ)
        )
        return Row(
            prover=prover,
            corpus=self.corpus,
            checks=len(self.kit),
            baseline=baseline,
            baseline_ms=median_ms([b.wall_s for b in self.bare.values()]) if self.bare else None,
            kit_ms={column: median_ms(walls)} if walls else {},
            identical=not differ,
            note=note,
            baseline_total_s=round(self.bare_total_s, 1),
            kit_total_s=round(self.kit_total_s, 1),
            kit_total_how=f"one Checker, {backend}, default workers",
        )

    def as_json(self) -> dict[str, object]:
        return {
            name: {
                "bare_accepted": self.bare[name].accepted,
                "bare_s": round(self.bare[name].wall_s, 2),
                "bare_said": self.bare[name].said,
                "kit": result.verdict.value,
                "trust": result.trust.value if result.trust else None,
                "kit_s": result.provenance.wall_ms / 1000,
                "agreement": self.outcome(name).value,
                "diagnostics": [d.message[:300] for d in result.diagnostics[:3]],
            }
            for name, result in self.kit.items()
        }


@dataclass
class RunOptions:
    """How main runs the corpora: which files, and what it writes as it goes."""

    only: tuple[str, ...] = ()  # the files whose names start so (`jgex:`, `success/`)
    progress: Path | None = None  # a line per label and per verdict as each comes
    # File by file, the bare label then the kit's check, never both at once: a run cut short
    # still pairs every file it reached (in an order by hash, so those are a fair sample).
    interleave: bool = False
    resume: bool = False  # skip the files `progress` already pairs (a run cut short, again)

    def wants(self, name: str) -> bool:
        return not self.only or name.startswith(self.only)

    def paired(self) -> set[str]:
        """The files `progress` holds both a bare label and a verdict of, when resuming."""
        if not (self.resume and self.progress and self.progress.is_file()):
            return set()
        lines = [json.loads(line) for line in self.progress.read_text().splitlines()]
        sides: dict[str, set[str]] = {}
        for line in lines:
            sides.setdefault(line["name"], set()).add(line["side"])
        return {name for name, seen in sides.items() if seen == {"bare", "kit"}}

    def journal(self, side: str, name: str, **said: object) -> None:
        if self.progress is not None:
            line = {"side": side, "name": name, "at": time.strftime("%H:%M:%S"), **said}
            with self.progress.open("a") as journal:
                journal.write(json.dumps(line) + "\n")


RUN = RunOptions()


def compare(
    corpus: str,
    names: list[str],
    label: Callable[[str], Bare],
    request: Callable[[str], CheckRequest],
    backend: str,
    timeout_s: int,
) -> Compared:
    """Label each file by the bare tool, then check them all in one kit Checker."""
    compared = Compared(corpus)
    paired = RUN.paired()
    names = [n for n in names if RUN.wants(n) and n not in paired]
    settings = Settings(backend=backend, cache=False, retries=0, timeout=timeout_s)

    def labelled(name: str) -> None:
        started = time.monotonic()
        compared.bare[name] = bare = label(name)
        compared.bare_total_s += time.monotonic() - started
        RUN.journal(
            "bare",
            name,
            accepted=bare.accepted,
            timed_out=bare.timed_out,
            crashed=bare.crashed,
            s=bare.wall_s,
        )

    def checked(name: str, result: CheckResult) -> None:
        compared.kit[name] = result
        RUN.journal("kit", name, verdict=result.verdict.value, s=result.provenance.wall_ms / 1000)

    if RUN.interleave:
        with Checker(settings) as checker:
            for name in sorted(names, key=lambda n: hashlib.sha256(n.encode()).hexdigest()):
                labelled(name)
                started = time.monotonic()
                checked(name, next(checker.map([request(name)])))
                compared.kit_total_s += time.monotonic() - started
        return compared
    for name in names:
        labelled(name)
    started = time.monotonic()
    with Checker(settings) as checker:
        for name, result in zip(names, checker.map(request(n) for n in names), strict=True):
            checked(name, result)
    compared.kit_total_s = time.monotonic() - started
    return compared


def coq_suite(quick: bool, backend: str = "local", line: str = "rocq") -> Compared | str:
    """Coq's test-suite of `line`'s coq (or its CI sample) beside bare coqc of the same line:
    the host's for the default line, the image's for another (which runs on docker only); a
    string says why it cannot run."""
    root = coq_test_suite(line)
    if root is None:
        return (
            f"Coq's source package of {line} is not in the kit's store nor on this machine's "
            "mirror: `prooflock images build rocq` (or images/rocq/checker-sources) puts 8.16's there"
        )
    if line != "rocq" and backend != "docker":
        return f"{line} runs on docker only (--backend docker)"
    files = coq_suite_files(root)
    names = coq_ci_sample(files) if quick else sorted(files)

    def request(name: str) -> CheckRequest:
        return _coq_request(files[name], None if line == "rocq" else line)

    version = root.name.split("_")[-1].split("+")[0] if line != "rocq" else "8.16.1"
    corpus = f"Coq {version} test-suite ({'CI sample' if quick else 'success, failure, bugs'})"
    if line == "rocq":
        label = functools.partial(bare_coqc, timeout_s=COQ_TIMEOUT_S)
        return compare(corpus, names, lambda n: label(files[n]), request, backend, COQ_TIMEOUT_S)
    labels = bare_coqc_in_image({n: files[n] for n in names}, line, COQ_TIMEOUT_S)
    return compare(corpus, names, labels.__getitem__, request, backend, COQ_TIMEOUT_S)


def hol_light_examples_corpus(
    quick: bool, backend: str = "local", boot_each: bool = False
) -> Compared | str:
    """HOL Light's own examples (or the CI sample) beside bare hol-light: one boot, each file in
    a child forked from it (bare_hol_light_forked), or with `boot_each` a fresh boot per file."""
    files = hol_light_examples()
    if not files:
        return "HOL Light's Examples/ are not here: apt-get install hol-light"
    names = list(HOL_LIGHT_CI_SAMPLE) if quick else sorted(files)

    def request(name: str) -> CheckRequest:
        text = files[name].read_text()
        return CheckRequest(
            prover="hol-light", name=name, content=text, timeout=HOL_LIGHT_TIMEOUT_S
        )

    corpus = f"HOL Light Examples/ ({'CI sample' if quick else 'core and Library only'})"
    if boot_each:
        label = functools.partial(bare_hol_light, timeout_s=HOL_LIGHT_BARE_TIMEOUT_S)
        return compare(
            corpus, names, lambda n: label(files[n]), request, backend, HOL_LIGHT_TIMEOUT_S
        )
    names = [n for n in names if RUN.wants(n)]  # one boot labels them all, before compare
    started = time.monotonic()
    labels, boot_s = bare_hol_light_forked({n: files[n] for n in names}, HOL_LIGHT_BARE_TIMEOUT_S)
    bare_total_s = time.monotonic() - started
    print(f"hol-light: bare boot {boot_s:.1f} s, then a forked child per file", file=sys.stderr)
    compared = compare(corpus, names, labels.__getitem__, request, backend, HOL_LIGHT_TIMEOUT_S)
    compared.bare_total_s = bare_total_s
    return compared


def alphageometry_sets(quick: bool, backend: str = "local") -> Compared | str:
    """AlphaGeometry's JGEX and IMO sets (or the CI sample) beside bare newclid."""
    data = shared_data()
    if data is None:
        return "AlphaGeometry's sets are not here: set PROOFLOCK_ALPHAGEOMETRY_DATA"
    if reason := newclid_skip_reason(backend):
        return f"{reason} (or --backend docker)"
    problems = alphageometry_problems(data)
    names = alphageometry_ci_sample(problems) if quick else sorted(problems)

    def request(name: str) -> CheckRequest:
        return CheckRequest(
            prover="alphageometry", name=name, content=problems[name], timeout=AG_TIMEOUT_S
        )

    corpus = f"AlphaGeometry JGEX-231 and IMO-30 ({'CI sample' if quick else 'whole'})"
    label = functools.partial(bare_newclid, timeout_s=AG_TIMEOUT_S)
    compared = compare(corpus, names, lambda n: label(problems[n]), request, backend, AG_TIMEOUT_S)
    # newclid's CLI stops on AlphaGeometry's words (`s_angle a b c 60`, `eq_trapezoid`) that the
    # kit's driver bridges (see AlphaGeometry).
    constructions = set(definitions.load())
    compared.kit_may_accept_more = lambda bare: newclid_could_not_read(bare, constructions)
    return compared


SPEED_SHARE = 5  # the speed comparison takes a fixed fifth of the 8.16 suite, chosen by hash
WORKERS = (1, 2)  # the kit's runs in the speed comparison: checks at once


def coq_speed(backend: str = "local") -> dict[str, object] | str:
    """The kit end to end (`prooflock run`, with one worker and with two) against bare coqc per
    file, and against coqc + coqchk per file (what the kit does), on a fixed fifth of Coq
    8.16.1's test-suite, one after another for the bare tools; where the one-worker run's time
    went, from its records' phases (compile, re-check: their wall time summed over files, and
    the run's total less both, its own work and boots)."""
    root = coq_test_suite()
    if root is None:
        return "Coq's source package is not in the kit's store: `prooflock images build rocq`"
    files = coq_suite_files(root)
    names = stable_sample(files, len(files) // SPEED_SHARE)
    started = time.monotonic()
    for name in names:
        bare_coqc(files[name], COQ_TIMEOUT_S)
    bare_s = time.monotonic() - started
    started, recheck_s = time.monotonic(), 0.0
    for name in names:
        _, checked = bare_coqc_coqchk(files[name], COQ_TIMEOUT_S)
        recheck_s += checked.wall_s if checked else 0.0
    both_s = time.monotonic() - started
    kit: dict[int, tuple[float, list[CheckResult]]] = {}
    for workers in WORKERS:  # the CLI's default (one check at a time), then one per core
        kit[workers] = _prooflock_run([_coq_request(files[n]) for n in names], workers, backend)
    results = kit[1][1]
    phases: dict[str, float] = {"compile": 0.0, "recheck": 0.0}
    for result in results:
        found = result.provenance.extra.get("phases_ms")
        for phase, spent in found.items() if isinstance(found, dict) else ():
            if isinstance(spent, dict) and isinstance(spent.get("wall"), int):
                phases[phase] = phases.get(phase, 0.0) + spent["wall"] / 1000
    checks_s = sum(r.provenance.wall_ms for r in results) / 1000
    return {
        "files": len(names),
        "backend": backend,
        "bare_coqc_s": round(bare_s, 1),
        "bare_coqc_coqchk_s": round(both_s, 1),
        "bare_coqchk_alone_s": round(recheck_s, 1),
        **{f"kit_{w}_workers_s": round(spent, 1) for w, (spent, _) in kit.items()},
        **{f"kit_{w}_workers_vs_coqc": round(bare_s / spent, 2) for w, (spent, _) in kit.items()},
        **{
            f"kit_{w}_workers_vs_coqc_coqchk": round(both_s / spent, 2)
            for w, (spent, _) in kit.items()
        },
        "kit_1_worker_where": {
            **{f"{k}_wall_s": round(v, 1) for k, v in phases.items()},
            "checks_wall_s": round(checks_s, 1),
            "kit_own_and_boots_s": round(kit[1][0] - sum(phases.values()), 1),
        },
        "verdicts": dict(Counter(r.verdict.value for r in results)),
        "same_verdicts": all(
            a.verdict is b.verdict for a, b in zip(results, kit[WORKERS[-1]][1], strict=True)
        ),
        # Where the runs differ (a timeout under load, say): each run's verdict and wall time.
        "differing": {
            a.artifact: [f"{r.verdict.value} {r.provenance.wall_ms / 1000:.1f}s" for r in (a, b)]
            for a, b in zip(results, kit[WORKERS[-1]][1], strict=True)
            if a.verdict is not b.verdict
        },
    }


def _prooflock_run(
    requests: list[CheckRequest], workers: int, backend: str
) -> tuple[float, list[CheckResult]]:
    """`prooflock run` as a user runs it, in a process of its own (its start, its order: longest
    predicted first), cache off: its wall time, and its records in the requests' order."""
    with tempfile.TemporaryDirectory(prefix="prooflock-speed-") as scratch:
        given, log = Path(scratch, "requests.jsonl"), Path(scratch, "log.jsonl")
        given.write_text("".join(r.model_dump_json() + "\n" for r in requests))
        argv = [sys.executable, "-m", "runner", "run", str(given), "--checkpoint", str(log)]
        argv += ["--backend", backend, "--workers", str(workers), "--no-cache"]
        argv += ["--daemon", "off", "--second-opinion", "none"]
        started = time.monotonic()
        ran = subprocess.run(argv, capture_output=True, text=True, check=False)
        spent = time.monotonic() - started
        if not log.is_file():
            raise RuntimeError(f"prooflock run wrote no log: {ran.stderr.strip()[-600:]}")
        found: dict[int, CheckResult] = {}
        for line in log.read_text().splitlines():
            entry = json.loads(line)
            if entry.get("kind") == "result":
                found[entry["body"]["index"]] = CheckResult.model_validate(entry["body"]["result"])
    if len(found) != len(requests):
        raise RuntimeError(f"prooflock run recorded {len(found)} of {len(requests)} requests")
    return spent, [found[i] for i in range(len(requests))]


def _coq_request(path: Path, line: str | None = None) -> CheckRequest:
    return CheckRequest(
        prover="rocq", name=path.name, content=path.read_text(), timeout=COQ_TIMEOUT_S, line=line
    )


def asymptote_gallery(quick: bool, backend: str = "local") -> Compared | str:
    """Asymptote's example gallery (asymptote-doc; or the CI subset) beside bare asy where the
    kit's asy runs: this host for the local backend, a sandbox of the image for docker."""
    names = gallery(full=not quick)
    if not names:
        return MISSING
    if backend == "docker" and (reason := docker_skip_reason("asymptote")):
        return reason
    settings = Settings(backend=backend, cache=False, retries=0, timeout=ASY_TIMEOUT_S)
    with Checker(settings) as checker:
        bare_here = bare_where(checker)
        started = time.monotonic()
        labels = {}
        for name in names:
            said = bare_here(name)
            labels[name] = Bare(said.rendered, said.wall_ms / 1000, said.said)
        bare_total_s = time.monotonic() - started
    corpus = f"Asymptote gallery, asymptote-doc ({'CI subset' if quick else 'whole'})"
    compared = compare(corpus, names, labels.__getitem__, gallery_request, backend, ASY_TIMEOUT_S)
    compared.bare_total_s = bare_total_s
    compared.kit_may_accept_more = lambda bare: True
    return compared


CORPORA: dict[str, tuple[str, str, Callable[[bool, str], Compared | str]]] = {
    "coq": ("rocq", "coqc per file", coq_suite),
    "coq-8.20": ("rocq", "coqc 8.20.1 per file", functools.partial(coq_suite, line="rocq-8.20")),
    "hol-light": (
        "hol-light",
        "hol-light, one boot, a forked child per file",
        hol_light_examples_corpus,
    ),
    "alphageometry": ("alphageometry", "newclid per problem", alphageometry_sets),
    "asymptote": ("asymptote", "asy -f png per file", asymptote_gallery),
}


def rows(quick: bool, names: list[str] | None = None, backend: str = "local") -> list[Row]:
    made = []
    for name in names or list(CORPORA):
        prover, baseline, run = CORPORA[name]
        compared = run(quick, backend)
        if isinstance(compared, str):
            made.append(Row(prover, name, 0, baseline, None, note=compared))
        else:
            made.append(compared.row(prover, baseline, backend))
    return made


def notes(quick: bool) -> list[str]:
    """The speed comparison on Coq's suite, side by side with the bare tools (the full bench
    only: it takes minutes)."""
    if quick:
        return []
    speed = coq_speed()
    if isinstance(speed, str):
        return [f"Coq suite speed: {speed}"]
    where = speed["kit_1_worker_where"]
    assert isinstance(where, dict)
    kit = "; ".join(
        f"prooflock run --workers {w}: {speed[f'kit_{w}_workers_s']} s "
        f"({speed[f'kit_{w}_workers_vs_coqc']}x bare coqc, "
        f"{speed[f'kit_{w}_workers_vs_coqc_coqchk']}x coqc + coqchk)"
        for w in WORKERS
    )
    return [
        f"Coq 8.16.1 suite, a fixed fifth ({speed['files']} files), end to end, local: bare coqc "
        f"per file {speed['bare_coqc_s']} s, coqc + coqchk per file {speed['bare_coqc_coqchk_s']}"
        f" s; {kit}. The 1-worker run's time: compiles {where['compile_wall_s']} s, re-checks "
        f"{where['recheck_wall_s']} s, the kit's own work and boots "
        f"{where['kit_own_and_boots_s']} s. Same verdicts in both runs: {speed['same_verdicts']}"
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpora", nargs="*", help=f"which (default: all of {list(CORPORA)})")
    parser.add_argument("--quick", action="store_true", help="the CI samples only")
    parser.add_argument("--backend", default="local", choices=("local", "docker"))
    parser.add_argument("--json", type=Path, help="every file's label and verdict, as JSON")
    parser.add_argument(
        "--speed",
        action="store_true",
        help="the kit against bare coqc, and coqc + coqchk, on a fixed fifth of Coq's suite",
    )
    parser.add_argument(
        "--progress", type=Path, help="append each label and verdict to this file as it comes"
    )
    parser.add_argument(
        "--only", action="append", default=[], help="only files whose names start so (repeatable)"
    )
    parser.add_argument(
        "--interleave",
        action="store_true",
        help="file by file (in an order by hash), the bare label and then the kit's check",
    )
    parser.add_argument(
        "--resume", action="store_true", help="skip the files --progress already pairs"
    )
    parser.add_argument(
        "--bare-boot-each",
        action="store_true",
        help="label each HOL Light file by a fresh boot of its own, not a child forked from one",
    )
    args = parser.parse_args()
    RUN.only, RUN.progress, RUN.interleave = tuple(args.only), args.progress, args.interleave
    RUN.resume = args.resume
    if args.bare_boot_each:
        CORPORA["hol-light"] = (
            "hol-light",
            "hol-light, a fresh boot per file",
            functools.partial(hol_light_examples_corpus, boot_each=True),
        )
    if args.speed:
        print(json.dumps(coq_speed(args.backend), indent=1))
        return 0
    if unknown := sorted(set(args.corpora) - set(CORPORA)):
        parser.error(f"no corpus named {', '.join(unknown)} (there are: {', '.join(CORPORA)})")
    report: dict[str, object] = {}
    table = []
    for name in args.corpora or list(CORPORA):
        prover, baseline, run = CORPORA[name]
        compared = run(args.quick, args.backend)
        if isinstance(compared, str):
            print(f"{name}: {compared}", file=sys.stderr)
            continue
        for kind in (Agreement.DESIGN_REFUSAL, Agreement.BOTH_CRASH, Agreement.DISAGREE):
            for item in compared.named(kind):
                print(f"{kind.value}: {compared.explain(item)}")
        table.append(compared.row(prover, baseline, args.backend))
        report[name] = compared.as_json()
    print(markdown(table))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
