"""A second opinion: a `pass` resting on a known bug, checked again where the bug is fixed.

A record may carry an advisory that another pinned line of the same prover fixes.
Then it is checked again on that line.
A fail there for a reason in the proof makes the record `disputed`, with both results.
A `disputed` record never counts as a pass.
A fail from version drift proves nothing, such as a renamed lemma or changed syntax.
Then the record keeps its `pass` and its advisory, and its provenance says so.
A pass on the fixed line changes nothing either.
Nor does a line that cannot run here, such as an image not built.
Then the record says the second opinion was not asked.

`auto`, the default of `prooflock run`, asks each prover's declared line.
That line is `ProverAdapter.second_opinion`.
`none` asks nobody; anything else is a comma-separated list of lines.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Protocol

from runner import provers
from runner.check.advisories import applicable
from runner.check.environment import Environment
from runner.core.errors import BackendUnavailable, InfraFailure, UserError
from runner.core.models import (
    CheckRequest,
    CheckResult,
    Diagnostic,
    JsonValue,
    Outcome,
    Verdict,
    result_digest,
)
from runner.provers.base import ResolvedRequest

# What a newer line says about a file written for an older one: moved names, syntax, options.
# Such a failure is drift, never evidence against the proof.
DRIFT = re.compile(
    r"was not found in the current environment|The reference \S+ was not found|"
    r"Syntax error|Unknown (?:tactic|interpretation|notation|option|flag)|"
    r"Cannot find (?:a physical path|library)|Unable to locate library|"
    r"is not a (?:module|known|defined)|has been removed|Unbound",
    re.IGNORECASE,
)
# Verdicts of the fixed line that speak against the proof. A timeout or crash says nothing.
AGAINST = (Verdict.FAIL, Verdict.WRONG_STATEMENT, Verdict.AXIOM, Verdict.PLACEHOLDER)


class RunsChecks(Protocol):
    """A run's executor: checks (index, request) pairs and yields (index, result) pairs."""

    def map_unordered(
        self, work: Iterable[tuple[int, ResolvedRequest]]
    ) -> Iterator[tuple[int, CheckResult]]: ...


class Checks(RunsChecks, Protocol):
    """What a second opinion needs of a checker: resolving, environments, one check."""

    def resolve(self, request: CheckRequest) -> ResolvedRequest: ...

    def environment(self, request: ResolvedRequest) -> Environment: ...

    def check_one(self, request: ResolvedRequest) -> CheckResult: ...


AUTO, NONE = "auto", "none"


def chosen_lines(choice: str | None) -> str | None:
    """The comma-separated lines `--second-opinion` asks, or None for nobody."""
    if choice is None or choice == NONE:
        return None
    if choice == AUTO:
        declared = [provers.get(name).second_opinion for name in provers.names()]
        return ",".join(line for line in declared if line) or None
    for line in choice.split(","):
        line_owner(line)
    return choice


def line_owner(line: str) -> str:
    """The prover that pins `line`; a line no prover pins is bad input."""
    for name in provers.names():
        if line in provers.get(name).all_lines():
            return name
    raise UserError(f"--second-opinion {line}: no prover pins a line of that name")


def fixed_on(result: CheckResult, line_environment: dict[str, JsonValue]) -> list[str]:
    """The advisories the record carries that the line's version fixes."""
    still = {advisory.id for advisory in applicable(line_environment)}
    return [id_ for id_ in result.advisories if id_ not in still]


def is_drift(result: CheckResult) -> bool:
    """Whether a failure reads as version drift: a name or syntax the line does not know.

    Only the line's errors say why it failed. A warning is never the reason.
    Rocq 9 warns on every `From Coq`, and a file could provoke a warning worded like drift.
    """
    return any(
        DRIFT.search(diagnostic.message)
        for diagnostic in result.diagnostics
        if diagnostic.severity == "error"
    )


def second_opinion(
    checker: Checks, request: ResolvedRequest, result: CheckResult, line: str
) -> CheckResult:
    """`result`, or `disputed` when the fixed line rejects what the pinned line passed."""
    if result.verdict is not Verdict.PASS or not result.advisories:
        return result
    if line not in provers.get(result.prover).all_lines() or request.request.line == line:
        return result
    try:
        again_request = checker.resolve(request.request.model_copy(update={"line": line}))
        fixed = fixed_on(result, checker.environment(again_request).data)
        if not fixed:  # the line has the same bugs, so there is nothing to ask
            return result
        again = checker.check_one(again_request)
    except (UserError, InfraFailure, BackendUnavailable) as exc:  # the line cannot run here
        return result.with_extra(second_opinion={"line": line, "outcome": f"not asked: {exc}"})
    opinion: dict[str, JsonValue] = {
        "line": line,
        "fixes": fixed,
        "verdict": again.verdict.value,
        "diagnostics": [d.model_dump(exclude_none=True) for d in again.diagnostics],
        "env_key": again.env_key,
        "result_digest": again.result_digest,
        "wall_ms": again.provenance.wall_ms,
    }
    if again.verdict not in AGAINST or is_drift(again):
        why = "agrees" if again.verdict is Verdict.PASS else "says nothing (drift or no verdict)"
        return result.with_extra(second_opinion={**opinion, "outcome": why})
    return _disputed(result, opinion)


def _disputed(result: CheckResult, opinion: dict[str, JsonValue]) -> CheckResult:
    """The record as `disputed`, holding both results, its digest recomputed over them."""
    note = Diagnostic(
        severity="error",
        message=(
            f"passes here but is rejected on {opinion['line']}, where "
            f"{', '.join(map(str, opinion['fixes']))} is fixed: see details.second_opinion"
        ),
    )
    details = {**result.details, "pinned_verdict": result.verdict.value, "second_opinion": opinion}
    assert result.trust is not None
    outcome = Outcome(
        verdict=Verdict.DISPUTED,
        trust=result.trust,
        diagnostics=[*result.diagnostics, note],
        assumptions=result.assumptions,
        details=details,
        outputs=result.outputs,
    )
    return result.model_copy(
        update={
            "verdict": Verdict.DISPUTED,
            "diagnostics": outcome.diagnostics,
            "details": details,
            "result_digest": result_digest(outcome),
        }
    )


def with_second_opinion(
    executor: RunsChecks | None, checker: Checks, line: str | None
) -> RunsChecks | None:
    """The run's executor, asking `line` (comma-separated lines) about flagged passes."""
    if line is None:
        return executor
    return SecondOpinion(executor or checker, checker, line)


class SecondOpinion:
    """An executor: runs the checks, then asks each prover's line about its flagged passes."""

    def __init__(self, inner: RunsChecks, checker: Checks, lines: str):
        self.lines = {line_owner(line): line for line in lines.split(",")}
        self.inner, self.checker = inner, checker

    def map_unordered(
        self, work: Iterable[tuple[int, ResolvedRequest]]
    ) -> Iterator[tuple[int, CheckResult]]:
        requests: dict[int, ResolvedRequest] = {}

        def remembered() -> Iterator[tuple[int, ResolvedRequest]]:
            for key, request in work:
                requests[key] = request
                yield key, request

        for key, result in self.inner.map_unordered(remembered()):
            request = requests.pop(key)
            line = self.lines.get(result.prover)
            if line is not None:
                result = second_opinion(self.checker, request, result, line)
            yield key, result
