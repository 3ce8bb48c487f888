"""An Isabelle check's Outcome from the worker's reply: errors, then placeholders, axioms, target.

Positions come from Isabelle as `{"line", "offset", "end_offset", "file"}`, offsets counted in
Isabelle symbols (`\\<forall>` is one); the column is recomputed from the theory text. What a
theorem rests on comes from the report theory's ML (oracles per fact, the theory's axioms); the
source's own `sorry`/`oops` and `axiomatization` are counted too, since `oops` leaves no theorem.
"""

from __future__ import annotations

import re
from typing import Any

from runner.core.models import Diagnostic, Outcome, Verdict
from runner.provers.base import ResolvedRequest
from runner.provers.common import verdicts
from runner.provers.common.verdicts import infra_error
from runner.provers.isabelle import source

SKIP_PROOF = "skip_proof"  # the oracle `sorry` and quick_and_dirty leave behind
DEFINITIONAL = re.compile(r"_(def|def_raw|raw)$")
SYMBOL = re.compile(r"\\<[^>]*>|.", re.DOTALL)
MAX_DIAGNOSTICS = 20

Reply = dict[str, Any]


def column_of(text: str, line: int, offset: int | None) -> int | None:
    """0-based column of a 1-based symbol offset, counting `\\<...>` as one symbol."""
    if offset is None:
        return None
    symbols = SYMBOL.findall(text)
    index = offset - 1
    if not 0 <= index <= len(symbols):
        return None
    start = index
    while start > 0 and symbols[start - 1] != "\n":
        start -= 1
    return index - start


def diagnostic(message: Reply, text: str) -> Diagnostic:
    pos = message.get("pos") or {}
    line = pos.get("line")
    return Diagnostic(
        severity=str(message.get("kind", "error")),
        message=str(message.get("message", "")).strip(),
        line=line,
        column=column_of(text, line, pos.get("offset")) if line else None,
    )


def outcome_of(reply: Reply, request: ResolvedRequest, theory: str) -> Outcome:
    status = reply.get("status")
    detail = str(reply.get("detail") or "")
    if status == "timeout":
        return Outcome(verdict=Verdict.TIMEOUT, diagnostics=[Diagnostic(message=detail)])
    if status == "crash":
        return Outcome(
            verdict=Verdict.CRASH,
            diagnostics=[Diagnostic(message=f"the Isabelle server died: {detail}")],
        )
    if status == "failed":
        return Outcome(
            verdict=Verdict.FAIL,
            diagnostics=[Diagnostic(message=f"Isabelle refused the theory: {detail}")],
        )
    if status != "ok":
        return infra_error(f"the Isabelle worker answered with status {status!r}")
    text = request.content
    errors = [diagnostic(m, text) for m in reply.get("errors") or []]
    if errors:
        return Outcome(verdict=Verdict.FAIL, diagnostics=errors[:MAX_DIAGNOSTICS])
    report = reply.get("report")
    if not isinstance(report, dict):
        return infra_error("the report theory gave no report (its ML did not run)")

    oracles = {t["name"]: t.get("oracles") or [] for t in report.get("theorems") or []}
    assumptions = {a for a in report.get("axioms") or [] if not DEFINITIONAL.search(a)}
    for found in oracles.values():
        assumptions.update(f"oracle:{o}" for o in found if not o.endswith(SKIP_PROOF))
    declared = [line for word, line in _axiomatizations(text)]
    if declared and not assumptions:
        assumptions.update(f"axiomatization at line {line}" for line in declared)

    placeholders: list[str] = []
    if request.mode == "proof":
        placeholders = sorted(
            n for n, found in oracles.items() if any(o.endswith(SKIP_PROOF) for o in found)
        )
        placeholders += [
            f"{word} at line {line}"
            for word, line in source.placeholders(text)
            if word == "oops" or not placeholders
        ]
    forbidden = [
        a for a in sorted(assumptions) if not verdicts.allowed(a, request.allowed_axioms, theory)
    ]
    verdict, diagnostics = verdicts.judge(
        placeholders=placeholders,
        forbidden=forbidden,
        statement_problem=_statement_problem(report.get("target"), request),
    )
    if (
        verdict is Verdict.WRONG_STATEMENT
        and isinstance(report.get("target"), dict)
        and report["target"].get("status") == "bad_target"
    ):
        verdict = Verdict.FAIL
    return Outcome(
        verdict=verdict,
        diagnostics=diagnostics,
        assumptions=sorted(assumptions),
        details={"theorems": sorted(oracles)},
    )


def _axiomatizations(text: str) -> list[tuple[str, int]]:
    from runner.provers.common.lexing import position

    return [
        (t.text, position(text, t.offset)[0])
        for t in source.tokens(text)
        if t.text in ("axiomatization", "axioms")
    ]


def _statement_problem(compared: Reply | None, request: ResolvedRequest) -> str | None:
    target = request.target
    if target is None:
        return None
    if not isinstance(compared, dict):
        return f"the target `{target.name}` was not compared"
    status = compared.get("status")
    if status == "same":
        return None
    if status == "missing":
        return f"no theorem named `{target.name}`; the target is: {target.statement}"
    if status == "bad_target":
        return f"the target statement does not parse under the theory's imports: {compared.get('message')}"
    return f"theorem `{target.name}` states: {compared.get('theorem')}; the target is: {compared.get('target')}"
