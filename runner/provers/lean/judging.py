"""A Lean check's Outcome from the server's reply: errors, then placeholders, axioms, the target.

Messages come from the REPL as `{"severity", "pos": {"line", "column"}, "data"}`. The body was sent
with its header blanked, so those positions are the artifact's own. What a proof rests on comes from
`#print axioms` (the kernel's answer), never from the source text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from runner.core.errors import BackendUnavailable
from runner.core.models import Diagnostic, Outcome, Verdict
from runner.provers.base import ResolvedRequest
from runner.provers.common import verdicts
from runner.provers.common.verdicts import infra_error
from runner.provers.lean.source import Header

# Lean's own axioms: every classical proof in Mathlib uses them.
STANDARD_AXIOMS = ("propext", "Classical.choice", "Quot.sound")
SORRY = "sorryAx"
# Trust in compiled code is an axiom. Before Lean 4.29 every such proof rests on one of these.
# Allowing `Lean.ofReduceBool` still means "trust the compiler", on every line.
LEGACY_NATIVE = ("Lean.ofReduceBool", "Lean.ofReduceNat")
# Since Lean 4.29 each proof gets an axiom of its own, `<proof>._native.<tactic>.ax_<i>_<j>`
# (`t._native.native_decide.ax_1_1`). It is recognised by its `_native` component. The source policy
# refuses that component in a file, so no user axiom can take such a name.
NATIVE_COMPONENT = "_native"
MAX_DIAGNOSTICS = 20
MODULE_IN_ERROR = re.compile(r"of module (\S+) does not exist|unknown module prefix '([^']+)'")

Reply = dict[str, Any]


def diagnostic(message: Reply) -> Diagnostic:
    pos = message.get("pos") or {}
    line = pos.get("line") or None
    return Diagnostic(
        severity=str(message.get("severity", "error")),
        message=str(message.get("data", "")).strip(),
        line=line,
        column=pos.get("column") if line else None,
    )


def header_failure(messages: Sequence[Reply], header: Header) -> Outcome:
    """A header Lean refused: `fail`, naming the import that is not in the image when it can."""
    texts = [str(m.get("data", "")) for m in messages]
    culprit = None
    for text in texts:
        match = MODULE_IN_ERROR.search(text)
        if match:
            named = match.group(1) or match.group(2)
            culprit = next(
                (m for m in header.imports if m == named or m.split(".")[0] == named), named
            )
            break
    if culprit is not None:
        first = f"`import {culprit}`: no module {culprit} in the lean image (Lean and Mathlib as pinned)"
    else:
        first = "the import header was refused: " + (
            texts[0].splitlines()[0] if texts else "no reason given"
        )
    context = texts[0][:500] if texts else None
    return Outcome(
        verdict=Verdict.FAIL,
        diagnostics=[Diagnostic(message=first, line=1, column=0, context=context)],
    )


def died_importing(died: dict[str, str]) -> Outcome:
    """The REPL died while importing the header at boot: out of memory, crashed, or too slow."""
    detail = f"while importing the header: {died.get('detail')}"
    if died.get("verdict") == "memory":
        return Outcome(verdict=Verdict.MEMORY, diagnostics=[Diagnostic(message=detail)])
    if died.get("verdict") == "crash":
        return Outcome(verdict=Verdict.CRASH, diagnostics=[Diagnostic(message=detail)])
    raise BackendUnavailable(
        f"the Lean REPL did not import the header in time: {died.get('detail')}"
    )


def native_tier(axiom: str) -> str | None:
    """The tactic a native-code axiom comes from (`native_decide`, `bv_decide`).

    `native` stands for a pre-4.29 axiom that does not say. None when `axiom` is not a native-code
    axiom.
    """
    if axiom in LEGACY_NATIVE:
        return "native"
    parts = axiom.split(".")
    if NATIVE_COMPONENT not in parts[:-1]:
        return None
    after = parts[parts.index(NATIVE_COMPONENT) + 1 :]
    return after[0] if len(after) > 1 else "native"


def allowed(axiom: str, allowed_axioms: Sequence[str]) -> bool:
    """Whether the request allows `axiom`.

    It may allow it by name. Native code may also be allowed by its tactic (`native_decide`,
    `bv_decide`), or by `Lean.ofReduceBool` (all native code).
    """
    if verdicts.allowed(axiom, allowed_axioms):
        return True
    tier = native_tier(axiom)
    return tier is not None and (tier in allowed_axioms or LEGACY_NATIVE[0] in allowed_axioms)


def native_allowed(tactic: str, allowed_axioms: Sequence[str]) -> bool:
    """Whether the request trusts the compiled code `tactic` runs, before anything runs."""
    return tactic in allowed_axioms or LEGACY_NATIVE[0] in allowed_axioms


def outcome_of(reply: Reply, request: ResolvedRequest, header: Header) -> Outcome:
    status = reply.get("status")
    cpu = reply.get("cpu_ms")
    if status == "header_failed":
        return header_failure(reply.get("messages") or [], header)
    if status in ("timeout", "memory", "crash"):
        verdict = {"timeout": Verdict.TIMEOUT, "memory": Verdict.MEMORY, "crash": Verdict.CRASH}[
            status
        ]
        return Outcome(
            verdict=verdict, diagnostics=[Diagnostic(message=str(reply.get("detail")))], cpu_ms=cpu
        )
    if status == "bad_target":
        errors = [diagnostic(m) for m in reply.get("messages") or []]
        first = errors[0].message if errors else "no reason given"
        message = f"the target statement does not elaborate under this header: {first}"
        return Outcome(
            verdict=Verdict.FAIL, diagnostics=[Diagnostic(message=message, context="target")]
        )
    if status == "repl_error":
        return Outcome(
            verdict=Verdict.FAIL,
            diagnostics=[
                Diagnostic(message=f"the Lean REPL refused the file: {reply.get('detail')}")
            ],
        )
    if status == "query_failed":
        return infra_error(
            f"the kit's {reply.get('query')} query failed after this file: {reply.get('detail')}"
        )
    if status != "ok":
        return infra_error(f"the Lean REPL server answered with status {status!r}")
    return _judged(reply, request, cpu)


def _judged(reply: Reply, request: ResolvedRequest, cpu: int | None) -> Outcome:
    messages = reply.get("messages") or []
    errors = [diagnostic(m) for m in messages if m.get("severity") == "error"]
    declarations = reply.get("declarations") or []
    axioms: dict[str, list[str] | None] = reply.get("axioms") or {}
    names = sorted(d["name"] for d in declarations if not d.get("internal"))
    if errors:
        return Outcome(verdict=Verdict.FAIL, diagnostics=errors[:MAX_DIAGNOSTICS], cpu_ms=cpu)
    unread = sorted(name for name, found in axioms.items() if found is None)
    if unread:
        message = f"could not read what {', '.join(unread[:5])} rests on (`#print axioms` failed)"
        return Outcome(verdict=Verdict.FAIL, diagnostics=[Diagnostic(message=message)], cpu_ms=cpu)

    used: set[str] = set()
    for found in axioms.values():
        used.update(found or [])
    used.update(d["name"] for d in declarations if d.get("kind") == "axiom")
    assumptions = sorted(used - set(STANDARD_AXIOMS))

    placeholders: list[str] = []
    if request.mode == "proof":
        placeholders = sorted(name for name, found in axioms.items() if SORRY in (found or []))
        if not placeholders and (reply.get("sorries") or _sorry_warnings(messages)):
            placeholders = [f"sorry at line {line}" for line in _sorry_lines(reply, messages)]
    forbidden = [
        name for name in assumptions if name != SORRY and not allowed(name, request.allowed_axioms)
    ]  # fmt: skip
    statement_problem = _statement_problem(reply.get("target"), request)
    verdict, diagnostics = verdicts.judge(
        placeholders=placeholders, forbidden=forbidden, statement_problem=statement_problem
    )
    return Outcome(
        verdict=verdict,
        diagnostics=diagnostics,
        assumptions=assumptions,
        details={"declarations": names},
        cpu_ms=cpu,
    )


def _sorry_warnings(messages: Sequence[Reply]) -> list[Reply]:
    return [
        m
        for m in messages
        if m.get("severity") == "warning" and "declaration uses `sorry`" in str(m.get("data"))
    ]


def _sorry_lines(reply: Reply, messages: Sequence[Reply]) -> list[int]:
    entries = list(reply.get("sorries") or []) + _sorry_warnings(messages)
    return sorted({(e.get("pos") or {}).get("line", 0) for e in entries})


def _statement_problem(compared: Reply | None, request: ResolvedRequest) -> str | None:
    target = request.target
    if target is None:
        return None
    if compared is None:
        return f"the target `{target.name}` was not compared"
    status = compared.get("status")
    if status == "same":
        return None
    if status == "missing":
        return f"no theorem named `{target.name}`; the target is: {target.statement}"
    if status == "not_a_theorem":
        return f"`{target.name}` is not a theorem; the target is: {target.statement}"
    return (
        f"theorem `{target.name}` states: {compared.get('theorem')}; "
        f"the target is: {compared.get('target') or target.statement}"
    )
