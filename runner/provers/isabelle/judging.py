"""An Isabelle check's Outcome from the worker's reply: errors, then placeholders, axioms, target.

Isabelle gives positions as `{"line", "offset", "end_offset", "file"}`. Offsets count Isabelle
symbols (`\\<forall>` is one); the column is recomputed from the theory text. What a theorem rests
on comes from the report theory's ML: oracles per fact, and the theory's axioms. The source's own
`sorry`/`oops` and `axiomatization` are counted too, since `oops` leaves no theorem.

Not every axiom of a theory is an assumption. A definition adds one (`c_def`, `c_def_raw`, `c_raw`).
Isabelle's typedef package adds `type_definition_T` for every `typedef`, and so for `datatype`,
`record`, ... A typedef axiom is left out only when the report says the typedef package registered
it (`Typedef.get_info_global`). Neither kind is left out when the theory's own `axiomatization`
declares a fact of that name.
"""

from __future__ import annotations

import re
from typing import Any

from runner.core.models import Diagnostic, Outcome, Verdict
from runner.provers.base import ResolvedRequest
from runner.provers.common import verdicts
from runner.provers.common.verdicts import infra_error
from runner.provers.isabelle.source import Reading

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


def outcome_of(reply: Reply, request: ResolvedRequest, reading: Reading) -> Outcome:
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
    typedefs = set(report.get("typedefs") or [])
    assumptions = {a for a in report.get("axioms") or [] if not _definitional(a, typedefs, reading)}
    for found in oracles.values():
        assumptions.update(f"oracle:{o}" for o in found if not o.endswith(SKIP_PROOF))
    if reading.axiomatizations and not assumptions:
        assumptions.update(f"axiomatization at line {line}" for line in reading.axiomatizations)

    placeholders: list[str] = []
    if request.mode == "proof":
        placeholders = sorted(
            n for n, found in oracles.items() if any(o.endswith(SKIP_PROOF) for o in found)
        )
        placeholders += [
            f"{word} at line {line}"
            for word, line in reading.placeholders
            if word == "oops" or not placeholders
        ]
    theory = reading.header.name if reading.header is not None else None
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


def _definitional(axiom: str, typedefs: set[str], reading: Reading) -> bool:
    """Whether an axiom the theory added is a definition or a typedef's, not an assumption."""
    if axiom.rsplit(".", 1)[-1] in reading.axiom_names:
        return False  # the theory's own axiomatization named it so
    return bool(DEFINITIONAL.search(axiom)) or axiom in typedefs


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
