"""The provers' own test suites as corpora: where each is, which files count, and bare labels.

A corpus file is labelled by the bare tool (`coqc`, `hol-light`), run on the file alone in an
empty directory, and the kit's verdict is compared with that label by `agreement`. The kit
agrees when it passes exactly what the bare tool accepts; a file the kit refuses before any
prover runs (trust `kit`) is a design refusal, listed apart with the kit's reason.
"""

from __future__ import annotations

import hashlib
import lzma
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path

from runner.core.errors import UserError
from runner.core.models import CheckResult, Trust, Verdict
from runner.core.settings import Settings
from runner.images import debian
from runner.images.inputs import host_mirror
from runner.images.lock import load_lock
from runner.images.store import InputStore

# What the kit says when it checked a file and the prover accepted it: a test-suite file may
# declare axioms or admit a lemma, which the kit reports as such, never as a rejection.
ACCEPTED = frozenset({Verdict.PASS, Verdict.AXIOM, Verdict.PLACEHOLDER})
COQ_SUITE_DIRS = ("success", "failure", "bugs")
# Files that need what a single-file check does not give: flags in the header, the
# test-suite's own prerequisite library (also `Require`d by short name: coq_suite_files),
# another file of the suite, or a plugin.
COQ_NEEDS_MORE = ("coq-prog-args", "TestSuite", "Load ", "LoadPath", "Declare ML Module")
# The CI sample: files chosen by hash, less those bare coqc takes minutes on (the bench has them).
COQ_CI_SAMPLE = 40
COQ_TOO_SLOW_FOR_CI = ("success/Nia.v",)
BASE_SUITE = "bookworm"  # the host's apt sources name this suite; its mirror serves the others
SOURCES_INDEX = "main/source/Sources.xz"


class Agreement(StrEnum):
    AGREE = "agree"
    DESIGN_REFUSAL = "design refusal"  # the kit refused it before any prover ran
    DISAGREE = "disagree"
    # The kit accepts what the bare tool could not do here for want of what the kit does not
    # need (Asymptote: a 3D example bare asy renders with OpenGL only, the kit as vectors).
    KIT_MORE = "kit accepts more"
    # The tool itself raised on the file, bare and in the kit: no answer either way.
    BOTH_CRASH = "the tool crashes either way"


@dataclass(frozen=True)
class Bare:
    """The bare tool's label for one file: accepted or not, and how long it took."""

    accepted: bool
    wall_s: float
    said: str  # the last line it printed, to explain a disagreement
    timed_out: bool = False  # no label: the bare tool gave no answer within the timeout
    crashed: bool = False  # no label: the bare tool raised (a traceback), never said whether


def agreement(bare: Bare, result: CheckResult) -> Agreement:
    """Whether the kit's verdict is the bare tool's label."""
    if bare.timed_out:
        return Agreement.AGREE if result.verdict is Verdict.TIMEOUT else Agreement.DISAGREE
    if bare.crashed and result.verdict is Verdict.CRASH:
        return Agreement.BOTH_CRASH
    if bare.accepted and result.trust is Trust.KIT:
        return Agreement.DESIGN_REFUSAL
    kit_accepts = result.verdict in ACCEPTED
    if bare.accepted:
        return Agreement.AGREE if kit_accepts else Agreement.DISAGREE
    return Agreement.AGREE if result.verdict is Verdict.FAIL else Agreement.DISAGREE


def stable_sample(names: Iterable[str], count: int) -> list[str]:
    """`count` names chosen by their sha256: the same ones on every machine and every run."""
    ranked = sorted(names, key=lambda n: hashlib.sha256(n.encode()).hexdigest())
    return sorted(ranked[:count])


def _exit_zero(returncode: int, said: str) -> tuple[bool, str]:
    lines = said.strip().splitlines()
    return returncode == 0, lines[-1] if lines else ""


def run_bare(
    argv: list[str],
    work: Path,
    timeout_s: int,
    stdin: bytes = b"",
    judge: Callable[[int, str], tuple[bool, str]] = _exit_zero,
) -> Bare:
    """One bare tool run in `work`, with its own HOME and nothing of the kit; `judge` reads
    its exit code and output as accepted or not, and the line that says why."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(work), "LC_ALL": "C.UTF-8"}
    started = time.monotonic()
    try:
        done = subprocess.run(
            argv, cwd=work, env=env, input=stdin, capture_output=True, timeout=timeout_s
        )
        accepted, said = judge(
            done.returncode, (done.stdout + done.stderr).decode(errors="replace")
        )
    except subprocess.TimeoutExpired:
        return Bare(False, time.monotonic() - started, f"no answer within {timeout_s} s", True)
    return Bare(accepted, time.monotonic() - started, said)


# --- Coq's test-suite, from Debian's source package of the image's coq -----------------------


def coq_source_tarball(image: str = "rocq") -> Path | None:
    """The coq orig tarball of the image's coq: the one its lock pins, if the kit's store holds
    it; else (a line whose lock pins none, rocq-8.20) Debian's, from the host's mirror."""
    entry = load_lock().entry(image)
    for name, item in entry.downloads.items():
        if name.startswith("coq_") and ".orig.tar." in name:
            store = InputStore(Settings().cache_dir)
            return store.path(item) if store.has(item) else None
    version = entry.inputs.get("COQ_VERSION")
    if version is None:
        return None
    suite = load_lock().base_named(entry.base).suite
    return debian_orig_tarball("coq", re.sub(r"\+b\d+$", "", version), suite)


def debian_orig_tarball(package: str, version: str, suite: str) -> Path | None:
    """`package`'s orig tarball at source `version` from `suite` on this machine's mirror, checked
    against the sha256 in the suite's Sources index (itself checked against the InRelease that
    gpgv verifies), and kept under the kit's cache by that sha256. None when the mirror has no
    such source (or cannot be reached)."""
    folder = Settings().cache_dir / "corpora" / "debian-sources"
    for kept in folder.glob(f"{package}_{version.split('-')[0]}.orig.tar.*"):
        return kept
    try:
        mirror = host_mirror(BASE_SUITE)
        release = debian._release(mirror, suite)  # None: the mirror has no such suite
    except (UserError, debian.MirrorUnreachable):
        return None
    sums = debian._sha256_section(release) if release else {}
    if SOURCES_INDEX not in sums:
        return None
    sha256, size = sums[SOURCES_INDEX]
    index = debian.fetch(f"{mirror}/dists/{suite}/{SOURCES_INDEX}")
    if index is None or hashlib.sha256(index).hexdigest() != sha256 or len(index) != size:
        return None
    for block in lzma.decompress(index).decode().split("\n\n"):
        fields = debian.control_fields(block)
        if fields.get("Package") != package or fields.get("Version") != version:
            continue
        for line in block.split("Checksums-Sha256:", 1)[1].splitlines()[1:]:
            if not line.startswith(" "):
                break
            digest, _, name = line.split()
            if ".orig.tar." not in name:
                continue
            data = debian.fetch(f"{mirror}/{fields['Directory']}/{name}")
            if data is None or hashlib.sha256(data).hexdigest() != digest:
                return None
            folder.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(data)
            return folder / name
    return None


def coq_test_suite(image: str = "rocq") -> Path | None:
    """Coq's test-suite/ (its corpus folders and prerequisite/), unpacked once under the kit's
    cache."""
    tarball = coq_source_tarball(image)
    if tarball is None:
        return None
    root = Settings().cache_dir / "corpora" / f"coq-test-suite-{tarball.name[:16]}"
    if (root / "done").is_file() and (root / "prerequisite").is_dir():
        return root
    root.mkdir(parents=True, exist_ok=True)
    with tarfile.open(tarball) as archive:
        for member in archive.getmembers():
            parts = member.name.split("/")  # coq-VERSION/test-suite/DIR/NAME.v
            wanted = (*COQ_SUITE_DIRS, "prerequisite")
            if not (len(parts) == 4 and parts[1] == "test-suite" and parts[2] in wanted):
                continue
            if not (member.isfile() and member.name.endswith(".v")):
                continue
            target = root / parts[2] / parts[3]
            target.parent.mkdir(parents=True, exist_ok=True)
            extracted = archive.extractfile(member)
            assert extracted is not None
            target.write_bytes(extracted.read())
    (root / "done").write_text("")
    return root


def coq_suite_files(root: Path) -> dict[str, Path]:
    """Every file a single-file check can take, by `dir/name.v`: none that has a word of
    COQ_NEEDS_MORE or `Require`s a prerequisite by its short name (`Require Import make_local.`)."""
    prerequisites = "|".join(sorted(p.stem for p in (root / "prerequisite").glob("*.v")))
    requires_one = re.compile(rf"Require[^.]*\b({prerequisites})\b")
    files = {}
    for folder in COQ_SUITE_DIRS:
        for path in sorted((root / folder).glob("*.v")):
            text = path.read_text(errors="replace")
            if not any(word in text for word in COQ_NEEDS_MORE) and not requires_one.search(text):
                files[f"{folder}/{path.name}"] = path
    return files


def coq_ci_sample(files: Iterable[str]) -> list[str]:
    """The fixed sample CI checks: the same files on every machine."""
    return stable_sample((n for n in files if n not in COQ_TOO_SLOW_FOR_CI), COQ_CI_SAMPLE)


def bare_coqc(path: Path, timeout_s: int) -> Bare:
    """Bare `coqc` on the file alone, under its own name, in an empty directory."""
    with tempfile.TemporaryDirectory(prefix="bare-coqc-") as work:
        (Path(work) / path.name).write_bytes(path.read_bytes())
        return run_bare(["coqc", "-q", path.name], Path(work), timeout_s)


def bare_coqc_coqchk(path: Path, timeout_s: int) -> tuple[Bare, Bare | None]:
    """Bare `coqc`, then (when it accepted) bare `coqchk` on the library it wrote, as the kit
    re-checks it: what the kit does, done by hand, one process each."""
    with tempfile.TemporaryDirectory(prefix="bare-coqchk-") as work:
        (Path(work) / path.name).write_bytes(path.read_bytes())
        compiled = run_bare(["coqc", "-q", path.name], Path(work), timeout_s)
        if not compiled.accepted:
            return compiled, None
        argv = ["coqchk", "-o", "-silent", "-Q", ".", "", "-norec", path.stem]
        return compiled, run_bare(argv, Path(work), timeout_s)


# Each file in a directory of its own, as bare_coqc runs it; `@@` lines give its exit and time.
_BARE_COQC_LOOP = """
while read -r index name; do
  mkdir -p /tmp/w/$index && cp /corpus/$index.v /tmp/w/$index/$name && cd /tmp/w/$index
  start=$(date +%s%N)
  timeout -s KILL "$1" coqc -q "$name" > /out/$index.said 2>&1
  echo "$? $(( ($(date +%s%N) - start) / 1000000 ))" > /out/$index.end
  cd / && rm -rf /tmp/w/$index
done < /corpus/list
"""


def bare_coqc_in_image(paths: dict[str, Path], image: str, timeout_s: int) -> dict[str, Bare]:
    """Bare `coqc -q` in `image` (its locked tag, a line the host has no coqc of), on each file
    alone in an empty directory, one after another in one container with no network."""
    tag = load_lock().entry(image).tag
    labels = {}
    with tempfile.TemporaryDirectory(prefix="bare-coqc-image-") as work:
        corpus, out = Path(work) / "corpus", Path(work) / "out"
        corpus.mkdir()
        out.mkdir(mode=0o777)
        out.chmod(0o777)  # the image's user writes there
        names = list(paths)
        for index, name in enumerate(names):
            (corpus / f"{index}.v").write_bytes(paths[name].read_bytes())
        (corpus / "list").write_text("".join(f"{i} {paths[n].name}\n" for i, n in enumerate(names)))
        argv = [
            "docker",
            "run",
            "--rm",
            "--network",
            "none",
            "-e",
            "HOME=/tmp",
            "-e",
            "LC_ALL=C.UTF-8",
        ]
        argv += ["-v", f"{corpus}:/corpus:ro", "-v", f"{out}:/out", tag]
        subprocess.run([*argv, "sh", "-c", _BARE_COQC_LOOP, "sh", str(timeout_s)], check=True)
        for index, name in enumerate(names):
            code, wall_ms = (out / f"{index}.end").read_text().split()
            said = (out / f"{index}.said").read_text(errors="replace")
            if int(code) == 137:  # timeout's KILL
                labels[name] = Bare(
                    False, int(wall_ms) / 1000, f"no answer within {timeout_s} s", True
                )
            else:
                accepted, last = _exit_zero(int(code), said)
                labels[name] = Bare(accepted, int(wall_ms) / 1000, last)
    return labels


# --- HOL Light's own examples, from Debian's hol-light ----------------------------------------

HOL_LIGHT_DIR = Path("/usr/share/hol-light")
# Examples that need only HOL Light's core or its Library/ (Multivariate takes far longer to
# load than a check's budget; prover9.ml and sos.ml call external provers).
HOL_LIGHT_EXAMPLES = (
    "cong.ml",
    "dickson.ml",
    "dlo.ml",
    "forster.ml",
    "gcdrecurrence.ml",
    "harmonicsum.ml",
    "kb.ml",
    "lagrange_lemma.ml",
    "mccarthy.ml",
    "miller_rabin.ml",
    "multiwf.ml",
    "rectypes.ml",
    "reduct.ml",
    "safetyliveness.ml",
    "ste.ml",
)
# The CI sample: the two smallest (a bare boot takes minutes; the kit's worker boots once).
# One file: each bare label is a whole HOL Light boot, minutes of CI's two cores.
HOL_LIGHT_CI_SAMPLE = ("safetyliveness.ml",)
# What HOL Light's toplevel prints when a loaded file fails (hol.ml's use_file), or a phrase
# raises: the toplevel itself always exits 0 at the end of its input.
HOL_LIGHT_FAILED = ("Error in included file", "Exception:", "Error:")


def hol_light_examples() -> dict[str, Path]:
    """HOL Light's own Examples/ files this corpus takes, by name; empty without hol-light."""
    folder = HOL_LIGHT_DIR / "Examples"
    return {name: folder / name for name in HOL_LIGHT_EXAMPLES if (folder / name).is_file()}


def _hol_light_loaded(returncode: int, said: str) -> tuple[bool, str]:
    failed = [line for line in said.splitlines() if line.startswith(HOL_LIGHT_FAILED)]
    return (returncode == 0 and not failed), (failed[0] if failed else "")


def bare_hol_light(path: Path, timeout_s: int) -> Bare:
    """A fresh bare `hol-light` toplevel that loads the file, as HOL Light's holtest does."""
    with tempfile.TemporaryDirectory(prefix="bare-hol-light-") as work:
        (Path(work) / path.name).write_bytes(path.read_bytes())
        phrase = f'loadt "{Path(work) / path.name}";;\n'.encode()
        return run_bare(["hol-light"], Path(work), timeout_s, phrase, _hol_light_loaded)


# --- AlphaGeometry's JGEX and IMO sets, labelled by bare newclid -------------------------------

AG_SETS = ("jgex_ag_231.txt", "imo_ag_30.txt")


def alphageometry_problems(data: Path) -> dict[str, str]:
    """Each problem of both sets by `set:name`: its name line, then its problem line."""
    problems = {}
    for set_name in AG_SETS:
        lines = (data / set_name).read_text().splitlines()
        for name, problem in zip(lines[0::2], lines[1::2], strict=True):
            problems[f"{set_name.split('_')[0]}:{name}"] = f"{name}\n{problem}\n"
    return problems


def alphageometry_ci_sample(problems: Iterable[str]) -> list[str]:
    """The fixed sample CI checks: four JGEX problems and one IMO problem, chosen by hash."""
    names = list(problems)
    return [
        *stable_sample((n for n in names if n.startswith("jgex:")), 4),
        *stable_sample((n for n in names if n.startswith("imo:")), 1),
    ]


def newclid_skip_reason(backend: str) -> str | None:
    """Why the kit's newclid cannot run on `backend` here (the local backend runs python3)."""
    if backend == "docker":
        from tests.support.docker_daemon import docker_skip_reason

        return docker_skip_reason("newclid")
    found = subprocess.run(["python3", "-c", "import newclid"], capture_output=True, check=False)
    return None if found.returncode == 0 else "python3 on PATH has no newclid (pip install newclid)"


def _newclid_solved(returncode: int, said: str) -> tuple[bool, str]:
    """newclid says whether it solved before it writes the proof. A crash while writing (2.0.2's
    `simtri` proofs: a KeyError in why_predicates, exit 1) does not unsolve the problem."""
    del returncode  # read from newclid's own words instead
    infos = [line for line in said.splitlines() if "Run infos:" in line]
    if not infos and "Traceback (most recent call last)" in said:
        return False, CRASHED + said.strip().splitlines()[-1][-120:]
    return "'success': True" in "".join(infos), (infos or [""])[-1][-120:]


CRASHED = "crashed: "  # how _newclid_solved says newclid raised before it said anything
# How newclid's CLI stops on AlphaGeometry words it cannot read: a constant angle in degrees
# (`s_angle a b c 30`), or a construction its own defs lack (`eq_trapezoid`, a KeyError).
_DEGREES = "Could not interpret constant angle"
_UNKNOWN_CONSTRUCTION = re.compile(r"KeyError: '([\w-]+)'")


def newclid_could_not_read(bare: Bare, constructions: Collection[str]) -> bool:
    """Whether bare newclid crashed reading AlphaGeometry's words, not on the problem itself.

    `constructions` are AlphaGeometry's (defs.txt). The kit's driver reads those words as
    AlphaGeometry does, so what it then solves is more than bare newclid could, not a disagreement.
    """
    if not bare.crashed:
        return False
    unknown = _UNKNOWN_CONSTRUCTION.search(bare.said)
    return _DEGREES in bare.said or (unknown is not None and unknown.group(1) in constructions)


def bare_newclid(problem: str, timeout_s: int) -> Bare:
    """newclid's own command on the problem alone (`newclid --problem FILE:NAME`)."""
    name = problem.split("\n", 1)[0]
    with tempfile.TemporaryDirectory(prefix="bare-newclid-") as work:
        (Path(work) / "problem.txt").write_text(problem)
        argv = [
            str(Path(sys.executable).with_name("newclid")),
            *("--problem", f"problem.txt:{name}", "--timeout", str(timeout_s)),
            *("-o", str(Path(work) / "out")),
        ]
        bare = run_bare(argv, Path(work), timeout_s + 30, judge=_newclid_solved)
    # newclid stops itself at its --timeout and says so: no label, as for any bare timeout
    if "'timeout': True" in bare.said:
        return replace(bare, timed_out=True)
    return replace(bare, crashed=True) if bare.said.startswith(CRASHED) else bare
