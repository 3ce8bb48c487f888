"""The cold path: Debian's own coqc and coqchk and two small drivers, in two fresh sandboxes.

1. `coqc` compiles the file as library `Artifact`, in the check's sandbox. Only its
   `Artifact.vo` leaves it. Whatever else the file wrote there (`Redirect`, `Extraction "f"`,
   ...) stays.
2. The re-check runs in a second fresh sandbox holding only that `.vo`:
   - with a target, a driver elaborates the target statement after the target's own `requires`
     alone (nothing of the file loaded yet). Then it `Require`s the library and compares the
     theorem's type with it: Ltac `constr_eq`, syntactic, up to alpha-conversion and a
     consistent renaming of universe levels.
   - `coqchk -o -norec Artifact` re-checks the library in a process no artifact code ran in. It
     prints its context summary (axioms, type-in-type, unsafe fixpoints, assumed positivity). It
     also prints the constants it checked: what the file declared, read from the library.
   - a driver that only `Require`s the library asks `Print Assumptions` once for all those
     constants. It does so through one definition whose body names them all. The answer is which
     library axioms they reach.

A `Require` runs the library's `Global` settings in the driver's session (`Global Unset Universe
Checking`, `Global Set Default Proof Mode "Noedit"`, ...). So the drivers use no proof mode: their
tactics run inside `ltac:(...)` terms. They set the kernel's checks back on after the `Require`. The
target driver is compiled, and coqchk re-checks it too. Its comparison counts only if coqchk finds
it checked with every kernel check on, whatever the library set. (Each constant records the flags it
was checked under.)

The warm worker computes the same evidence in-process, never loading the library's settings
(worker.py). Either is read by judging.py.
"""

from __future__ import annotations

from runner.backends.base import Completed, Sandbox
from runner.core.errors import BackendUnavailable
from runner.provers.base import ResolvedRequest, Sandboxes
from runner.provers.rocq import report, source
from runner.provers.rocq.judging import ANOMALY_EXIT, Evidence, as_exit, target_valid
from runner.provers.rocq.report import LIBRARY, MODULE, SOURCE, CheckerReport, Inconsistent

# No -noglob: Coq hands its arguments to the helpers it starts (`par:`'s tactic workers), and they
# refuse that one. The .glob it writes stays in the sandbox.
COQC = ("coqc", "-q", "-Q", ".", "")
# A compile that prints each sentence's byte range as Coq read it: the second wall's input. It runs
# only for a file whose text holds a refused command's word (no file without one can hold the
# command). `-time` wraps every command in `Time`, which some warnings print.
TIMED = (*COQC, "-time")
COQCHK = ("coqchk", "-o", "-Q", ".", "", "-norec", MODULE)
AUDIT_DRIVER = "ProoflockAudit.v"
TARGET_DRIVER = "ProoflockTarget.v"
TARGET_LIBRARY = TARGET_DRIVER.removesuffix(".v")
TARGET_CHECK = ("coqchk", "-o", "-Q", ".", "", "-norec", TARGET_LIBRARY)
# The constant that exists only if the target compared equal (see target_driver).
SAME = "__prooflock_same"
# After `Require`ing the library, undo its `Global` settings where a driver could feel them. These
# are the kernel's checks, which constr_eq's universe test obeys, and printing, which Print
# Assumptions obeys. For the target, coqchk catches what is missed here. For Print Assumptions, a
# miss only makes its report unreadable (every axiom coqchk found then counts).
RESET = (
    "Set Universe Checking.\nSet Guard Checking.\nSet Positivity Checking.\n"
    "Unset Printing All.\nSet Printing Width 1000.\n"
)
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
        if as_exit(checked).exit_code == ANOMALY_EXIT:  # coqchk's own failure, or a type error
            evidence.checker_anomaly = report.checker_anomaly(checked.text)
        if checked.ok:
            evidence.checker = report.read_checker(checked.text)
            evidence.checker.primitives = _primitives(fresh, request.image, evidence.checker)
            _collect_assumptions(fresh, evidence, evidence.checker, timeout)
    return evidence


# Rocq 9's libraries of the kernel's primitives: Corelib's, beside Coq 8's (report.py), in the same
# `theories/` below `coqc -where`. Rocq 9 renames PArray and adds primitive strings.
ROCQ9_PRIMITIVE_LIBRARIES = (
    "Corelib.Numbers.Cyclic.Int63.PrimInt63",
    "Corelib.Floats.PrimFloat",
    "Corelib.Array.PrimArray",
    "Corelib.Strings.PrimString",
)
PRIMITIVE_LIBRARIES = (*report.PRIMITIVE_LIBRARIES, *ROCQ9_PRIMITIVE_LIBRARIES)
_declared: dict[tuple[str, str], set[str]] = {}  # (image, library) → its primitives


def _primitives(sandbox: Sandbox, image: str, checker: CheckerReport) -> set[str]:
    """Which of coqchk's axioms are primitives the standard library binds.

    They are read from Debian's sources of the libraries that declare them, in the image, once per
    process.
    """
    found: set[str] = set()
    for name in sorted(checker.axioms):
        library = name.rpartition(".")[0]
        if library not in PRIMITIVE_LIBRARIES:
            continue
        if (image, library) not in _declared:
            path = library.partition(".")[2].replace(".", "/") + ".v"  # below Coq. or Corelib.
            done = sandbox.run(["sh", "-c", f'cat "$(coqc -where)/theories/{path}"'], timeout_s=60)
            if not done.ok:
                continue  # no sources: those stay axioms
            _declared[(image, library)] = report.declared_primitives(library, done.stdout.decode())
        if name in _declared[(image, library)]:
            found.add(name)
    return found


def _collect_assumptions(
    sandbox: Sandbox, evidence: Evidence, checker: CheckerReport, timeout: float
) -> None:
    """Print Assumptions over every constant coqchk checked that a term can name.

    A name coqchk checked inside a module type or a functor body names nothing a term can use. The
    driver cannot find it, so it is dropped and the driver runs again. Whatever this driver prints,
    coqchk stays the authority. An unreadable or inconsistent report counts every axiom coqchk found
    as used (judging.outcome). So it can only make a verdict stricter.
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
    """One definition whose body names every root, so one Print Assumptions reaches them all.

    Each root is a `let`, kept in the body. It uses no proof mode, which the library may have
    changed.
    """
    lets = "".join(f"let r{i} := @{name} in\n" for i, name in enumerate(roots))
    return (
        f"Require {MODULE}.\n{RESET}"
        f"Definition __prooflock_roots : True :=\n{lets}I.\n"
        "Print Assumptions __prooflock_roots.\n"
    )


def _unknown_root(done: Completed, text: str, roots: list[str]) -> str | None:
    """The root the driver could not find, when that is why it failed."""
    errors = [
        d
        for d in report.parse_messages(done.stderr.decode("utf-8", "replace"), text)
        if d.severity == "error"
    ]
    first_pose = 2 + RESET.count("\n") + 1  # the line of `let r0 := ...` in audit_driver
    if len(errors) == 1 and errors[0].line is not None and NOT_FOUND in errors[0].message:
        index = errors[0].line - first_pose
        if 0 <= index < len(roots):
            return roots[index]
    return None


def target_driver(request: ResolvedRequest) -> tuple[str, dict[int, str]]:
    """The driver, and what a failure on each of its lines means.

    The statement is elaborated after the target's own `requires` and nothing else. None of the
    file's `Require`s is loaded: an exported scope or notation could give the text another meaning.
    The file's library is loaded only once the statement is a closed term.
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
    add(RESET.rstrip("\n"))
    add(f"Check {name}.", "MISSING")
    add(
        f"Definition __prooflock_named : True := ltac:(let c := constr:({name}) in "
        "is_const c; exact I).",
        "MISSING",
    )
    add(
        f"Definition {SAME} : True := ltac:(let c := constr:({name}) in let t := type of c in "
        "let s := eval cbv delta [__prooflock_target] in __prooflock_target in "
        "constr_eq t s; exact I).",
        "DIFFERS",
    )
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
        return _checked_with_every_check_on(sandbox, timeout, evidence)
    if done.timed_out or done.out_of_memory:
        return "TIMEOUT" if done.timed_out else "MEMORY"
    errors = [
        d
        for d in report.parse_messages(done.stderr.decode("utf-8", "replace"), text)
        if d.severity == "error"
    ]
    line = errors[0].line if errors else None
    return meaning.get(line, "DIFFERS") if line is not None else "DIFFERS"


def _checked_with_every_check_on(sandbox: Sandbox, timeout: float, evidence: Evidence) -> str:
    """MATCH when coqchk re-checks the driver's comparison with every kernel check on.

    The comparison ran in a session holding the library's `Global` settings. Each constant records
    the kernel flags it was checked under, and coqchk lists those checked without one. An unset
    universe check would have let constr_eq equate any universes.
    """
    done = sandbox.run(TARGET_CHECK, timeout_s=timeout)
    evidence.cpu_ms += done.cpu_ms or 0
    if done.timed_out or done.out_of_memory:
        return "TIMEOUT" if done.timed_out else "MEMORY"
    checked = report.read_checker(done.text)
    same = f"{TARGET_LIBRARY}.{SAME}"
    unsafe = checked.type_in_type | checked.unguarded | checked.nonpositive
    if not done.ok or not checked.complete or same not in checked.checked or same in unsafe:
        return "UNSAFE"
    return "MATCH"
