"""The cold path: Debian's own coqc and coqchk and two small drivers, in two fresh sandboxes.

1. `coqc` compiles the file as library `Artifact`, in the check's sandbox. Its `Artifact.vo` is
   all that leaves it: what else the file wrote there (`Redirect`, `Extraction "f"`, ...) stays.
2. The re-check runs in a second fresh sandbox holding only that `.vo`:
   - with a target, a driver elaborates the target statement after the target's own `requires`
     alone (nothing of the file loaded yet), then `Require`s the library and compares the
     theorem's type with it (Ltac `constr_eq`: syntactic, up to alpha-conversion and a
     consistent renaming of universe levels);
   - `coqchk -o -norec Artifact` re-checks the library in a process no artifact code ran in and
     prints its context summary (axioms, type-in-type, unsafe fixpoints, assumed positivity) and
     the constants it checked: what the file declared, read from the library;
   - a driver that only `Require`s the library asks `Print Assumptions` once for all those
     constants, through one lemma whose proof names them all (which library axioms they reach).
The warm worker computes the same evidence in-process (worker.py); verdict.py reads either.
"""

from __future__ import annotations

from runner.backends.base import Completed, Sandbox
from runner.core.errors import BackendUnavailable
from runner.provers.base import ResolvedRequest, Sandboxes
from runner.provers.rocq import report, source
from runner.provers.rocq.report import LIBRARY, MODULE, SOURCE, CheckerReport, Inconsistent
from runner.provers.rocq.verdict import Evidence, target_valid

COQC = ("coqc", "-q", "-noglob", "-Q", ".", "")
# A compile that prints each sentence's byte range as Coq read it: the second wall's input.
# Only for a file whose text holds a refused command's word (no file without one can hold the
# command): `-time` wraps every command in `Time`, which some warnings print.
TIMED = (*COQC, "-time")
COQCHK = ("coqchk", "-o", "-Q", ".", "", "-norec", MODULE)
AUDIT_DRIVER = "ProoflockAudit.v"
TARGET_DRIVER = "ProoflockTarget.v"
NOT_FOUND = "was not found in the current environment"


def run(request: ResolvedRequest, sandboxes: Sandboxes) -> Evidence:
    timeout = float(request.timeout_s)
    sandbox = sandboxes.sandbox()
    sandbox.write_file(SOURCE, request.content.encode())
    timed = source.may_hold_a_refused_command(request.content)
    compiled = sandbox.run([*(TIMED if timed else COQC), SOURCE], timeout_s=timeout)
    evidence = Evidence(compiled)
    if not compiled.ok:
        return evidence
    if timed:
        evidence.refused = source.refusals_as_coq_read(request.content, compiled.stdout)
        evidence.reading_cut = compiled.truncated
        if evidence.refused or evidence.reading_cut:
            return evidence
    try:
        library = sandbox.read_file(LIBRARY)
    except (OSError, BackendUnavailable):
        evidence.library = False  # coqc ended well but wrote no library where it was asked to
        return evidence
    fresh = sandboxes.sandbox("recheck")
    fresh.write_file(LIBRARY, library)
    if request.target is not None:
        evidence.target = _compare_target(fresh, request, evidence, timeout)
    if request.mode == "proof":
        checked = fresh.run(COQCHK, timeout_s=timeout)
        evidence.checked = checked
        evidence.cpu_ms += checked.cpu_ms or 0
        if checked.ok:
            evidence.checker = report.read_checker(checked.text)
            evidence.checker.primitives = _primitives(fresh, request.image, evidence.checker)
            _collect_assumptions(fresh, evidence, evidence.checker, timeout)
    return evidence


_declared: dict[tuple[str, str], set[str]] = {}  # (image, library) → its primitives


def _primitives(sandbox: Sandbox, image: str, checker: CheckerReport) -> set[str]:
    """Which of coqchk's axioms are primitives the standard library binds, from Debian's sources
    of the libraries that declare them (read in the image, once per process)."""
    found: set[str] = set()
    for library, names in report.primitive_candidates(checker.axioms).items():
        if (image, library) not in _declared:
            path = library.removeprefix("Coq.").replace(".", "/") + ".v"
            done = sandbox.run(["sh", "-c", f'cat "$(coqc -where)/theories/{path}"'], timeout_s=60)
            if not done.ok:
                continue  # no sources: those stay axioms
            _declared[(image, library)] = report.declared_primitives(library, done.stdout.decode())
        found |= {f"{library}.{n}" for n in names} & _declared[(image, library)]
    return found


def _collect_assumptions(
    sandbox: Sandbox, evidence: Evidence, checker: CheckerReport, timeout: float
) -> None:
    """Print Assumptions over every constant coqchk checked that a term can name.

    A name coqchk checked inside a module type or a functor body names nothing a term can use:
    the driver cannot find it, so it is dropped and the driver runs again. Whatever this driver
    prints, coqchk stays the authority: an unreadable or inconsistent report counts every axiom
    coqchk found as used (verdict.outcome), so it can only make a verdict stricter.
    """
    roots = checker.roots()
    while roots:
        text = audit_driver(roots)
        sandbox.write_file(AUDIT_DRIVER, text.encode())
        done = sandbox.run([*COQC, AUDIT_DRIVER], timeout_s=timeout)
        evidence.cpu_ms += done.cpu_ms or 0
        if done.ok:
            try:
                evidence.used = report.read_assumptions(
                    done.stdout.decode("utf-8", "replace"), checker
                )
            except Inconsistent as exc:
                evidence.unread = str(exc)
            evidence.roots = roots
            return
        if done.timed_out or done.out_of_memory:
            evidence.checked = done  # the audit ran out of time or memory: never a pass
            return
        unknown = _unknown_root(done, text, roots)
        if unknown is None:
            errors = report.parse_messages(done.stderr.decode("utf-8", "replace"), text)
            first = errors[0].message if errors else f"exit {done.exit_code}"
            evidence.roots = roots
            evidence.unread = f"the Print Assumptions driver failed: {first}"
            return
        roots = [r for r in roots if r != unknown]
    evidence.roots, evidence.used = [], set()


def audit_driver(roots: list[str]) -> str:
    poses = "".join(f"pose (r{i} := @{name}).\n" for i, name in enumerate(roots))
    return (
        f"Require {MODULE}.\nUnset Printing All.\nSet Printing Width 1000.\n"
        f"Lemma __prooflock_roots : True.\nProof.\n{poses}exact I.\nDefined.\n"
        "Print Assumptions __prooflock_roots.\n"
    )


def _unknown_root(done: Completed, text: str, roots: list[str]) -> str | None:
    """The root the driver could not find, when that is why it failed."""
    errors = [
        d
        for d in report.parse_messages(done.stderr.decode("utf-8", "replace"), text)
        if d.severity == "error"
    ]
    first_pose = 6  # the line of `pose (r0 := ...)` in audit_driver
    if len(errors) == 1 and errors[0].line is not None and NOT_FOUND in errors[0].message:
        index = errors[0].line - first_pose
        if 0 <= index < len(roots):
            return roots[index]
    return None


def target_driver(request: ResolvedRequest) -> tuple[str, dict[int, str]]:
    """The driver, and what a failure on each of its lines means.

    The statement is elaborated after the target's own `requires` and nothing else: none of
    the file's `Require`s (an exported scope or notation could give the text another meaning),
    and the file's library only once the statement is a closed term.
    """
    assert request.target is not None
    name = f"@{MODULE}.{request.target.name}"
    text = ""
    meaning: dict[int, str] = {}

    def add(sentence: str, failure: str | None = None) -> None:
        nonlocal text
        first = text.count("\n") + 1
        text += sentence + "\n"
        if failure is not None:
            for line in range(first, text.count("\n") + 1):
                meaning[line] = failure

    for required in request.target.requires:
        add(f"Require Import {required}.", "REQUIRES")
    add(f"Definition __prooflock_target : Prop := {request.target.statement}.", "ELABORATE")
    add(f"Require {MODULE}.")
    add(f"Check {name}.", "MISSING")
    add("Goal True.")
    add(f"let c := constr:({name}) in is_const c.", "MISSING")
    add(
        f"let c := constr:({name}) in let t := type of c in "
        "let s := eval cbv delta [__prooflock_target] in __prooflock_target in constr_eq t s.",
        "DIFFERS",
    )
    add("exact I.\nQed.")
    return text, meaning


def _compare_target(
    sandbox: Sandbox, request: ResolvedRequest, evidence: Evidence, timeout: float
) -> str | None:
    if not target_valid(request):
        return "INVALID"
    text, meaning = target_driver(request)
    sandbox.write_file(TARGET_DRIVER, text.encode())
    done = sandbox.run([*COQC, TARGET_DRIVER], timeout_s=timeout)
    evidence.cpu_ms += done.cpu_ms or 0
    if done.ok:
        return "MATCH"
    if done.timed_out or done.out_of_memory:
        return "TIMEOUT" if done.timed_out else "MEMORY"
    errors = [
        d
        for d in report.parse_messages(done.stderr.decode("utf-8", "replace"), text)
        if d.severity == "error"
    ]
    line = errors[0].line if errors else None
    return meaning.get(line, "DIFFERS") if line is not None else "DIFFERS"
