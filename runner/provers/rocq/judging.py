"""From what the tools reported to a verdict: one function for the warm and the cold path.

Each path gathers `Evidence`: how the compile ended, what the independent re-check found, how the
target compared. `outcome` alone turns it into an Outcome. So the same evidence gives the same
verdict, diagnostics and assumptions, whichever path gathered it.

What a verdict rests on:
- the compile: coqc's exit status and located messages;
- then coqchk's re-check of the compiled library, in a fresh process that never ran the file (trust
  `replayed`). That gives coqchk's verdict on the library, what the library declared, and what it
  assumes. A check that never reached coqchk (statement mode, a failed compile) rests on coqc's own
  kernel, in the file's process (trust `kernel`).

Everything the file could influence only ever makes the verdict stricter. An unreadable Print
Assumptions counts every axiom coqchk found as used. A rejected or unreadable re-check is a `fail`.
Nothing after the file ran is an infra_error.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from runner.backends.base import Completed
from runner.core.models import Diagnostic, JsonValue, Outcome, Trust, Verdict
from runner.provers.base import ResolvedRequest
from runner.provers.common import verdicts
from runner.provers.common.verdicts import Refusal
from runner.provers.rocq import report, source
from runner.provers.rocq.report import MODULE, Audit, CheckerReport, Inconsistent

ANOMALY_EXIT = 129  # coqc's (and the worker's) exit code for an anomaly: Coq broke, not the file
TARGET_NAME = re.compile(rf"{source.QUALID}\Z")
TARGET_REASONS = {
    "MISSING": "the file has no theorem named `{name}`",
    "DIFFERS": "`{name}` is not stated as the target",
    "ELABORATE": "the target statement does not elaborate after the target's own requires",
    "REQUIRES": "the target's own requires do not load",
    "INVALID": "the target is not a theorem name and a single Coq term",
    "UNSAFE": "the comparison with the target ran without one of the kernel's checks (coqchk)",
}
NO_LIBRARY = "coqc ended without writing the compiled library"
REJECTED = "the independent checker (coqchk) rejected the compiled file"
CHECKER_FAILED = (
    "coqc accepted the file, but the independent checker (coqchk) failed on it, so nothing "
    "re-checked it"
)
READING_CUT = (
    "coqc printed more than the kit keeps, so its reading of every sentence (where the kit "
    "looks for what it refuses) could not be read whole"
)


@dataclass
class Evidence:
    compiled: Completed
    library: bool = True  # the compile wrote Artifact.vo where the kit reads it
    checked: Completed | None = None  # the independent re-check: coqchk, or the worker's
    checker: CheckerReport | None = None
    roots: list[str] | None = None
    used: set[str] | None = None  # axioms the library's constants reach
    unread: str | None = None  # why `used` could not be read (then every coqchk axiom counts)
    # MATCH, MISSING, DIFFERS, ELABORATE, REQUIRES, INVALID, TIMEOUT, UNSAFE (cold.py)
    target: str | None = None
    cpu_ms: int = 0  # beyond the compile
    recheck_processes: int = 1  # the re-check split over processes (the worker's, server.ml)
    # The cold path's second wall (the worker refuses on Coq's parse as the file runs). These are
    # the kit's refusals on each sentence as coqc read it, and whether that reading was cut short.
    refused: list[Refusal] = dataclasses.field(default_factory=list)
    reading_cut: bool = False
    # The re-check's own failure (coqchk's anomaly): it could not judge a file coqc accepted.
    checker_anomaly: str | None = None


def target_valid(request: ResolvedRequest) -> bool:
    """A target the drivers can splice, so it can never add a command of its own.

    It needs a qualified name, one term (no sentence end, no comment delimiter) and qualified
    library names to require.
    """
    target = request.target
    if target is None:
        return False
    code = source.coq_code(target.statement)
    ends = re.search(r"\.(\s|\Z)", code) or "(*" in target.statement or "*)" in target.statement
    requires = all(TARGET_NAME.match(r) for r in target.requires)
    return bool(TARGET_NAME.match(target.name)) and not ends and bool(code.strip()) and requires


def as_exit(done: Completed) -> Completed:
    """Coq's own exit 129 (an anomaly), which the backends cannot tell from a SIGHUP (128 + 1)."""
    if done.exit_code == ANOMALY_EXIT and done.signal == ANOMALY_EXIT - 128:
        return dataclasses.replace(done, signal=None)
    return done


def outcome(request: ResolvedRequest, evidence: Evidence) -> Outcome:
    judged = _judged(request, evidence)
    judged.worker = {**judged.worker, "phases_ms": phases_ms(evidence)}
    return judged


def phases_ms(evidence: Evidence) -> dict[str, JsonValue]:
    """Where the check's time went, for the record's provenance (never hashed).

    It holds the compile's and the re-check's wall and CPU time, as each path measured them.
    """
    phases: dict[str, JsonValue] = {}
    for name, done in (("compile", evidence.compiled), ("recheck", evidence.checked)):
        if done is not None:
            phases[name] = {"wall": done.wall_ms, "cpu": done.cpu_ms}
    if evidence.checked is not None and evidence.recheck_processes > 1:
        phases["recheck"] = {**phases["recheck"], "processes": evidence.recheck_processes}
    return phases


def _judged(request: ResolvedRequest, evidence: Evidence) -> Outcome:
    content = request.content
    compiled = as_exit(evidence.compiled)
    cpu = (compiled.cpu_ms or 0) + evidence.cpu_ms
    diagnostics = report.parse_messages(compiled.stderr.decode("utf-8", "replace"), content)
    stopped = verdicts.stopped(
        compiled, diagnostics, "coqc", crashed=compiled.exit_code == ANOMALY_EXIT
    )
    if stopped is not None:
        return stopped.model_copy(update={"cpu_ms": cpu})
    if evidence.refused:
        return verdicts.refused(evidence.refused).model_copy(update={"cpu_ms": cpu})
    if evidence.reading_cut:
        return Outcome(
            verdict=Verdict.FAIL, diagnostics=[*diagnostics, Diagnostic(message=READING_CUT)]
        )
    if not evidence.library:
        return Outcome(
            verdict=Verdict.FAIL, diagnostics=[*diagnostics, Diagnostic(message=NO_LIBRARY)]
        )
    if evidence.target in ("TIMEOUT", "MEMORY"):
        verdict = Verdict.TIMEOUT if evidence.target == "TIMEOUT" else Verdict.MEMORY
        why = Diagnostic(message="the target comparison ran out of time or memory")
        return Outcome(verdict=verdict, diagnostics=[*diagnostics, why], cpu_ms=cpu)
    statement_problem = _statement_problem(request, evidence)
    if request.mode == "statement":
        verdict, explained = verdicts.judge(
            placeholders=[], forbidden=[], statement_problem=statement_problem
        )
        return Outcome(verdict=verdict, diagnostics=diagnostics + explained, cpu_ms=cpu)

    checked = evidence.checked
    if checked is None:  # never: a compiled library in proof mode is always re-checked
        return _rejected(diagnostics, "the independent re-check did not run", cpu)
    checked = as_exit(checked)
    if checked.timed_out or checked.out_of_memory or checked.signal is not None:
        stopped = verdicts.stopped(checked, [], "coqchk")
        assert stopped is not None
        return stopped.model_copy(
            update={"diagnostics": diagnostics + stopped.diagnostics, "cpu_ms": cpu}
        )
    if not checked.ok and evidence.checker_anomaly is not None:
        return _unverified(diagnostics, evidence.checker_anomaly, cpu)
    if not checked.ok:  # coqchk refused the library, whatever exit code it chose to say so
        return _rejected(diagnostics, REJECTED, cpu)
    checker = evidence.checker
    if checker is None or evidence.roots is None:
        return _rejected(diagnostics, "the independent checker sent no report", cpu)
    try:
        assumptions = report.assumptions(Audit(checker, evidence.roots, _used(evidence)))
    except Inconsistent as exc:
        return _rejected(diagnostics, f"the independent checker's report is unusable: {exc}", cpu)
    own = [a for a in assumptions if a.startswith(MODULE + ".")]
    # An unfinished proof leaves an axiom of the file's own (`Admitted`) or no theorem (`Abort`).
    # The words in the text only name it; the library decides whether there is one.
    placeholders = [
        p for p in source.placeholders(content) if own or p in ("`Abort`", "`Admit Obligations`")
    ]
    forbidden = [a for a in assumptions if not verdicts.allowed(a, request.allowed_axioms, MODULE)]
    verdict, explained = verdicts.judge(
        placeholders=placeholders, forbidden=forbidden, statement_problem=statement_problem
    )
    return Outcome(
        verdict=verdict,
        trust=Trust.REPLAYED,
        diagnostics=diagnostics + explained,
        assumptions=assumptions,
        cpu_ms=cpu,
    )


def _used(evidence: Evidence) -> set[str] | None:
    """The library axioms the file's constants reach (None: unreadable, all of coqchk's count)."""
    return None if evidence.unread is not None else evidence.used


def _statement_problem(request: ResolvedRequest, evidence: Evidence) -> str | None:
    target = request.target
    if target is None or evidence.target == "MATCH":
        return None
    reason = TARGET_REASONS.get(evidence.target or "", "the target could not be compared")
    stated = source.stated(request.content, target.name)
    written = f"`{stated}`" if stated else "no statement of that name"
    wanted = " ".join(target.statement.split())
    return f"{reason.format(name=target.name)}: the target states `{wanted}`, the file {written}"


def _unverified(diagnostics: list[Diagnostic], anomaly: str, cpu: int) -> Outcome:
    """coqc accepted the file and the independent checker broke on it: neither pass nor fail.

    The verdict rests on coqc's kernel alone, in the file's own process.
    """
    return Outcome(
        verdict=Verdict.UNVERIFIED,
        trust=Trust.KERNEL,
        diagnostics=[*diagnostics, Diagnostic(message=f"{CHECKER_FAILED}: {anomaly}")],
        details={"checker": "coqchk", "checker_error": anomaly},
        cpu_ms=cpu,
    )


def _rejected(diagnostics: list[Diagnostic], message: str, cpu: int) -> Outcome:
    """The re-check, in a process the file never ran in, did not accept the library."""
    return Outcome(
        verdict=Verdict.FAIL,
        trust=Trust.REPLAYED,
        diagnostics=[*diagnostics, Diagnostic(message=message)],
        cpu_ms=cpu,
    )
