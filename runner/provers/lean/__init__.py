"""Lean 4 + Mathlib adapter: files checked on a warm Lean REPL that has their imports loaded.

A request whose target cannot be sent to Lean as one term (it does not lex, leaves a bracket
open, names a word the source policy refuses, or its name is not a Lean name) is a bad request,
refused when it is resolved (`validate`: exit 2). A check is refused before anything runs when
the file uses what could bypass the kernel or run its own code at elaboration time
(source.refusals), or when it asks Lean to trust compiled code (`native_decide`, an axiom:
`Lean.ofReduceBool`) and the request does not allow that axiom.
Otherwise the file's import header picks a warm server (sandbox/lean_server.py, one per header),
the body runs on the header's environment, and the kernel's `#print axioms` for every
declaration the file added says what the proof rests on. Verdicts: an error is `fail` (with its
line and column), a `sorry` is `placeholder` (allowed in statement mode), an axiom beyond
propext, Classical.choice and Quot.sound is `axiom` unless allowed; with a target, the named
theorem's elaborated type must be alpha-equivalent to the target statement elaborated under the
same header (`wrong_statement` otherwise).
"""

from __future__ import annotations

from runner.core.errors import BadRequest
from runner.core.models import Diagnostic, Outcome, Verdict
from runner.provers.base import ProverAdapter, ResolvedRequest, Sandboxes
from runner.provers.common import verdicts
from runner.provers.lean import judging, source, worker

VERSION = "1"
PINS_FILE = "/opt/prooflock/lean-pins.txt"  # written when the image is built


def probe(image: str) -> dict[str, list[str]]:
    pins = f"cat {PINS_FILE} 2>/dev/null || echo 'no pins file'"
    return {"lean": ["lean", "--version"], "pins": ["sh", "-c", pins]}


def refused(request: ResolvedRequest) -> Outcome | None:
    """An outcome given before anything runs, or None."""
    found = source.refusals(request.content)
    if found:
        first = found[0]
        diagnostic = Diagnostic(
            message=first.message, line=first.line, column=first.column, context=first.context
        )
        return Outcome(verdict=Verdict.FAIL, diagnostics=[diagnostic])
    if source.uses_native_code(request.content) and not verdicts.allowed(
        judging.NATIVE, request.allowed_axioms
    ):
        # Compiled code runs inside the REPL, where it could write anything: run it only when
        # the request trusts it anyway.
        message = (
            f"the file trusts compiled code (native_decide), which adds the axiom {judging.NATIVE}; "
            "it was not run because the request does not allow that axiom"
        )
        return Outcome(
            verdict=Verdict.AXIOM,
            diagnostics=[Diagnostic(message=message)],
            assumptions=[judging.NATIVE],
        )
    return None


def validate(request: ResolvedRequest) -> None:
    """Refuse a target Lean could not be sent as one term: BadRequest, before any check."""
    target = request.target
    if target is None:
        return
    problem = _name_problem(target.name) or source.target_problem(target.statement)
    if problem is not None:
        raise BadRequest(problem)


def _name_problem(name: str) -> str | None:
    try:
        found = source.tokens(name)
    except source.LexError:
        found = []
    if len(found) != 1 or found[0].kind != "ident" or found[0].text != name:
        return f"the target name {name!r} is not a Lean name"
    return None


def check(request: ResolvedRequest, sandboxes: Sandboxes) -> Outcome:
    validate(request)  # resolve() ran it already; the statement is pasted into Lean source
    refusal = refused(request)
    if refusal is not None:
        return refusal
    header = source.split_header(request.content, source.tokens(request.content))
    server = sandboxes.server(worker.server_spec(header, request.limits))
    boot = worker.read_boot(server)
    if not boot.header_ok:
        server.retire()  # a header Lean refuses will not load next time either
        if boot.died is not None:
            return judging.died_importing(boot.died)
        return judging.header_failure(boot.messages, header)
    target = request.target
    reply = worker.run_on(
        server,
        source.body_of(request.content, header),
        request.timeout_s,
        {"name": target.name, "statement": target.statement} if target is not None else None,
    )
    outcome = judging.outcome_of(reply, request, header)
    outcome.worker = {
        "worker_id": server.worker_id,
        "lean_server": reply.get("stats") or {},
        "boot_ms": boot.boot_ms,
    }
    return outcome


ADAPTER = ProverAdapter(
    name="lean",
    version=VERSION,
    modes=("proof", "statement"),
    images=("lean",),
    probe=probe,
    check=check,
    validate=validate,
    targets=True,
    description="Lean 4 files with Mathlib, checked on a warm REPL per import header",
)
