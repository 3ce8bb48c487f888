"""From what the tools reported to a verdict: one function for the warm and the cold path.

Each path gathers `Evidence` (how the compile ended, what the kernel-side audit found, how the
target compared); `outcome` alone turns it into an Outcome, so the same evidence gives the same
verdict, diagnostics and assumptions whichever path gathered it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from runner.backends.base import Completed
from runner.core.models import Diagnostic, Outcome, Verdict
from runner.provers.base import ResolvedRequest
from runner.provers.common import verdicts
from runner.provers.rocq import report, source
from runner.provers.rocq.report import MODULE, Audit, CheckerReport, Inconsistent

ANOMALY_EXIT = 129  # coqc's (and the worker's) exit code for an anomaly: Coq broke, not the file
TARGET_NAME = re.compile(rf"{source.QUALID}\Z")
TARGET_REASONS = {
    "MISSING": "the file has no theorem named `{name}`",
    "DIFFERS": "`{name}` is not stated as the target",
    "ELABORATE": "the target statement does not elaborate after the file's Requires",
    "INVALID": "the target is not a theorem name and a single Coq term",
}


@dataclass
class Evidence:
    compiled: Completed
    checked: Completed | None = None  # the kernel-side audit: coqchk, or the worker's
    checker: CheckerReport | None = None
    roots: list[str] | None = None
    used: set[str] | None = None  # axioms the library's constants reach
    problem: str | None = None  # why the audit's reports cannot be trusted: an infra error
    target: str | None = None  # MATCH, MISSING, DIFFERS, ELABORATE, INVALID
    cpu_ms: int = 0  # beyond the compile


def target_valid(request: ResolvedRequest) -> bool:
    """A target the drivers can splice: a qualified name and one term (no sentence end, no
    comment delimiter), so it can never add a command of its own."""
    target = request.target
    if target is None:
        return False
    code = source.coq_code(target.statement)
    ends = re.search(r"\.(\s|\Z)", code) or "(*" in target.statement or "*)" in target.statement
    return bool(TARGET_NAME.match(target.name)) and not ends and bool(code.strip())


def outcome(request: ResolvedRequest, evidence: Evidence) -> Outcome:
    content = request.content
    compiled = evidence.compiled
    cpu = (compiled.cpu_ms or 0) + evidence.cpu_ms
    diagnostics = report.parse_messages(compiled.stderr.decode("utf-8", "replace"), content)
    stopped = verdicts.stopped(
        compiled, diagnostics, "coqc", crashed=compiled.exit_code == ANOMALY_EXIT
    )
    if stopped is not None:
        return stopped.model_copy(update={"cpu_ms": cpu})
    unread_target = request.target is not None and evidence.target is None
    statement_problem = _statement_problem(request, evidence)
    if request.mode == "statement":
        if unread_target:
            return _infra(diagnostics, "the target comparison did not run", cpu)
        verdict, explained = verdicts.judge(
            placeholders=[], forbidden=[], statement_problem=statement_problem
        )
        return Outcome(verdict=verdict, diagnostics=diagnostics + explained, cpu_ms=cpu)

    checked = evidence.checked
    if checked is None:
        return _infra(diagnostics, "the kernel-side audit did not run", cpu)
    stopped = verdicts.stopped(checked, [], "coqchk", crashed=checked.exit_code == ANOMALY_EXIT)
    if stopped is not None:
        if stopped.verdict is Verdict.FAIL:
            message = "the independent checker (coqchk) rejected the compiled file"
            return Outcome(
                verdict=Verdict.FAIL,
                diagnostics=[*diagnostics, Diagnostic(message=message)],
                cpu_ms=cpu,
            )
        return stopped.model_copy(
            update={"diagnostics": diagnostics + stopped.diagnostics, "cpu_ms": cpu}
        )
    if evidence.problem is not None:
        return _infra(diagnostics, evidence.problem, cpu)
    if unread_target:
        return _infra(diagnostics, "the target comparison did not run", cpu)
    if evidence.checker is None or evidence.roots is None or evidence.used is None:
        return _infra(diagnostics, "the kernel-side audit sent no report", cpu)
    placeholders = source.placeholders(content)
    try:
        assumptions = report.assumptions(
            Audit(evidence.checker, evidence.roots, evidence.used), source.declares(content)
        )
    except Inconsistent as exc:
        if not placeholders:  # an unfinished proof (`Abort`) may leave nothing to audit
            return _infra(diagnostics, f"the audit's reports disagree: {exc}", cpu)
        assumptions = []
    forbidden = [a for a in assumptions if not verdicts.allowed(a, request.allowed_axioms, MODULE)]
    verdict, explained = verdicts.judge(
        placeholders=placeholders, forbidden=forbidden, statement_problem=statement_problem
    )
    return Outcome(
        verdict=verdict, diagnostics=diagnostics + explained, assumptions=assumptions, cpu_ms=cpu
    )


def _statement_problem(request: ResolvedRequest, evidence: Evidence) -> str | None:
    target = request.target
    if target is None or evidence.target == "MATCH":
        return None
    reason = TARGET_REASONS.get(evidence.target or "", "the target could not be compared")
    stated = source.stated(request.content, target.name)
    written = f"`{stated}`" if stated else "no statement of that name"
    wanted = " ".join(target.statement.split())
    return f"{reason.format(name=target.name)}: the target states `{wanted}`, the file {written}"


def _infra(diagnostics: list[Diagnostic], message: str, cpu: int) -> Outcome:
    return Outcome(
        verdict=Verdict.INFRA_ERROR,
        diagnostics=[*diagnostics, Diagnostic(message=message)],
        cpu_ms=cpu,
    )
