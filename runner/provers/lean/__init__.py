"""Lean 4 + Mathlib adapter: files checked on a warm Lean REPL that has their imports loaded.

A request whose target cannot be sent to Lean as one term (it does not lex, leaves a bracket
open, names a word the source policy refuses, or its name is not a Lean name) is a bad request,
refused when it is resolved (`validate`: exit 2). A check is refused before anything runs when
the file uses what could bypass the kernel or run its own code at elaboration time
(source.read), or when it runs its own compiled code (`native_decide`, which adds an axiom:
`<proof>._native.native_decide.ax_*` since Lean 4.29, `Lean.ofReduceBool` before) and the
request does not allow `native_decide`; `bv_decide` runs, and its axiom is judged like any other.
Otherwise the file's import header picks a warm server (sandbox/lean_server.py, one per header),
the body runs on the header's environment, and the kernel's `#print axioms` for every
declaration the file added says what the proof rests on. Verdicts: an error is `fail` (with its
line and column), a `sorry` is `placeholder` (allowed in statement mode), an axiom beyond
propext, Classical.choice and Quot.sound is `axiom` unless allowed (a native-code axiom also by
its tactic's name, or by `Lean.ofReduceBool`); with a target, the named theorem's elaborated type
must be alpha-equivalent to the target statement elaborated under the same header
(`wrong_statement` otherwise). Verdicts rest on Lean's kernel (`kernel`), or on a protocol double
that said so at boot (`double`: tests/doubles/).
"""

from __future__ import annotations

from runner.core.errors import BadRequest
from runner.core.models import Diagnostic, Outcome, Verdict
from runner.provers.base import ProverAdapter, ResolvedRequest, Sandboxes
from runner.provers.common import verdicts
from runner.provers.lean import judging, source, worker

# 2: native-code axioms recognised by their Lean >= 4.29 names (`<proof>._native.<tactic>.ax_*`),
# allowed per tactic (`native_decide`, `bv_decide`) or all by `Lean.ofReduceBool`; `_native`
# refused in files; a double's results carry trust `double`; the JSON-lines worker.
VERSION = "2"
PINS_FILE = "/opt/prooflock/lean-pins.txt"  # written when the image is built


def probe(image: str) -> dict[str, list[str]]:
    pins = f"cat {PINS_FILE} 2>/dev/null || echo 'no pins file'"
    return {"lean": ["lean", "--version"], "pins": ["sh", "-c", pins]}


def native_refusal(reading: source.Reading, request: ResolvedRequest) -> Outcome | None:
    """`axiom` before anything runs when the file runs its own compiled code (`native_decide`)
    and the request does not trust it. Compiled code runs inside the REPL, outside the kernel's
    view: it runs only when the request trusts it anyway. `bv_decide` (Lean's own compiled LRAT
    checker) runs, and the kernel's answer names its axiom."""
    refused = [
        use
        for use in reading.native
        if use.tactic == "native_decide"
        and not judging.native_allowed(use.tactic, request.allowed_axioms)
    ]
    if not refused:
        return None
    first = refused[0]
    message = (
        f"the file trusts compiled code (`native_decide` at line {first.line}): each proof that "
        "uses it rests on an axiom of its own (`<proof>._native.native_decide.ax_<i>_<j>` since "
        f"Lean 4.29, `{judging.LEGACY_NATIVE[0]}` before); it was not run because the request "
        "does not allow `native_decide`"
    )
    diagnostic = Diagnostic(message=message, line=first.line, column=first.column)
    return Outcome(verdict=Verdict.AXIOM, diagnostics=[diagnostic], assumptions=["native_decide"])


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
    """The file's policy, then the warm server of its header (resolve() validated the target)."""
    reading = source.read(request.content)
    if reading.refusals:
        return verdicts.refused(reading.refusals)
    native = native_refusal(reading, request)
    if native is not None:
        return native
    header = reading.header
    server = sandboxes.server(worker.server_spec(header, request.limits))
    boot = worker.read_boot(server)
    if not boot.header_ok:
        server.retire()  # a header Lean refuses will not load next time either
        if boot.died is not None:
            return verdicts.as_told_by(judging.died_importing(boot.died), boot.double)
        return verdicts.as_told_by(judging.header_failure(boot.messages, header), boot.double)
    target = request.target
    reply = worker.run_on(
        server,
        source.body_of(request.content, header),
        request.timeout_s,
        {"name": target.name, "statement": target.statement} if target is not None else None,
    )
    outcome = verdicts.as_told_by(
        judging.outcome_of(reply, request, header), boot.double or reply.get("double")
    )
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
