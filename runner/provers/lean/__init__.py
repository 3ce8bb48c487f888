"""Lean 4 + Mathlib adapter: files checked on a warm Lean REPL that has their imports loaded.

A target that cannot be sent to Lean as one term is a bad request. It is refused when it is resolved
(`validate`: exit 2). Such a target does not lex or leaves a bracket open. Or it names a word the
source policy refuses, or its name is not a Lean name.

A check is refused before anything runs in two cases:
- the file uses what could bypass the kernel or run its own code at elaboration time
  (source.read);
- it runs its own compiled code (`native_decide`) and the request does not allow
  `native_decide`. That code adds an axiom: `<proof>._native.native_decide.ax_*` since Lean 4.29,
  `Lean.ofReduceBool` before. `bv_decide` runs, and its axiom is judged like any other.

Otherwise the file's import header picks a warm server (sandbox/lean_server.py, one per header). The
body runs on the header's environment. The kernel's `#print axioms` for every declaration the file
added says what the proof rests on.

Verdicts:
- an error is `fail`, with its line and column;
- a `sorry` is `placeholder` (allowed in statement mode);
- an axiom beyond propext, Classical.choice and Quot.sound is `axiom` unless allowed. A
  native-code axiom may also be allowed by its tactic's name, or by `Lean.ofReduceBool`.
- with a target, the named theorem's elaborated type must be alpha-equivalent to the target
  statement elaborated under the same header (`wrong_statement` otherwise).

A file the REPL passed is checked again, independently (recheck.py). Comparator builds it in a fresh
sandbox and replays its export into fresh kernels. It compares the theorems with a challenge
elaborated apart. That is a comparator challenge in `options.challenge`, the target on its own
`requires`, or the file's own theorems. That verdict is recorded, `replayed`. Other verdicts rest on
Lean's kernel in the REPL (`kernel`). A protocol double that says so (`double`: tests/doubles/)
makes every verdict it took part in the double's. The module comparator.py reads a comparator
project (challenge and solution) as one request, and back.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from runner.core.errors import BadRequest
from runner.core.models import Diagnostic, Outcome, Trust, Verdict
from runner.provers.base import (
    AdapterOptions,
    FileOption,
    ProverAdapter,
    ResolvedRequest,
    Sandboxes,
)
from runner.provers.common import verdicts
from runner.provers.lean import judging, recheck, source, worker

# 3: a file the REPL passed is re-checked by comparator in a fresh sandbox (`replayed`);
# comparator challenges as the target mode (options challenge, theorems, definitions).
# 2: native-code axioms by their Lean >= 4.29 names; a double's results carry trust `double`.
VERSION = "3"
PINS_FILE = "/opt/prooflock/lean-pins.txt"  # written when the image is built


def _split_names(value: Any) -> Any:
    """`a,b` on the command line is the list [a, b]; a list stays as it is."""
    if isinstance(value, str):
        return tuple(name.strip() for name in value.split(",") if name.strip())
    return value


class LeanOptions(AdapterOptions):
    challenge: FileOption | None = Field(
        None,
        description="a comparator challenge (.lean): the file must prove its --theorems exactly "
        "as it states them, elaborated apart from the file",
        json_schema_extra={"metavar": "FILE"},
    )
    theorems: tuple[str, ...] = Field(
        (),
        description="with --challenge: the theorems to prove (comparator's theorem_names, "
        "comma-separated)",
        json_schema_extra={"metavar": "NAMES"},
    )
    definitions: tuple[str, ...] = Field(
        (),
        description="with --challenge: the definition holes the file fills (comparator's "
        "definition_names, comma-separated)",
        json_schema_extra={"metavar": "NAMES"},
    )

    _names = field_validator("theorems", "definitions", mode="before")(_split_names)


def probe(image: str) -> dict[str, list[str]]:
    pins = f"cat {PINS_FILE} 2>/dev/null || echo 'no pins file'"
    return {"lean": ["lean", "--version"], "pins": ["sh", "-c", pins]}


def native_refusal(reading: source.Reading, request: ResolvedRequest) -> Outcome | None:
    """`axiom` before anything runs, for compiled code (`native_decide`) the request does not trust.

    Compiled code runs inside the REPL, outside the kernel's view. So it runs only when the request
    trusts it anyway. `bv_decide` (Lean's own compiled LRAT checker) runs, and the kernel's answer
    names its axiom.
    """
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
    """Refuse a bad target or challenge with BadRequest, before any check.

    A target is bad when Lean could not be sent it as one term. A comparator challenge is bad when
    it names nothing to compare.
    """
    options = request.options_as(LeanOptions)
    problem = _challenge_problem(options, request)
    target = request.target
    if problem is None and target is not None:
        problem = _name_problem(target.name) or source.target_problem(target.statement)
    if problem is not None:
        raise BadRequest(problem)


def _challenge_problem(options: LeanOptions, request: ResolvedRequest) -> str | None:
    if options.challenge is None:
        if options.theorems or options.definitions:
            return "--theorems and --definitions name what a --challenge states: give one"
        return None
    if request.target is not None:
        return "a request has a target or a comparator challenge, not both"
    if not options.theorems:
        return "a comparator challenge needs the theorems to compare (--theorems)"
    for name in (*options.theorems, *options.definitions):
        problem = _name_problem(name)
        if problem is not None:
            return problem
    try:
        source.tokens(options.challenge.content)
    except source.LexError as exc:
        return f"the challenge does not lex as Lean: {exc}"
    return None


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
    double = boot.double or reply.get("double")
    outcome = verdicts.as_told_by(judging.outcome_of(reply, request, header), double)
    project = _project(request, reply, outcome, header)
    if project is not None and outcome.verdict is Verdict.PASS:
        outcome = _rechecked(project, outcome, sandboxes)
        if double and outcome.trust is Trust.REPLAYED:
            outcome.trust = Trust.DOUBLE  # the REPL that passed it first was a double
    elif project is not None and request.options_as(LeanOptions).challenge is not None:
        objection = recheck.Reading(False, _first_message(outcome), None)
        outcome.details = {**outcome.details, "comparator": recheck.result(project, objection)}
    outcome.worker = {
        "worker_id": server.worker_id,
        "lean_server": reply.get("stats") or {},
        "boot_ms": boot.boot_ms,
    }
    return outcome


def _project(
    request: ResolvedRequest, reply: dict, passed: Outcome, header: source.Header
) -> recheck.Project | None:
    """The comparator project that re-checks this file, or None when there is nothing to name."""
    options = request.options_as(LeanOptions)
    permitted = recheck.permitted_axioms(
        request.allowed_axioms,
        passed.assumptions,
        request.mode,
        exact=options.challenge is not None,
    )
    if options.challenge is not None:
        challenge, theorems = options.challenge.content, options.theorems
    elif request.target is not None:
        target = request.target
        # A target without `requires` is elaborated on the file's header, as the REPL did.
        imports = target.requires or header.imports
        challenge = recheck.target_challenge(imports, target.name, target.statement)
        theorems = (target.name,)
    else:
        challenge = request.content
        listed = reply.get("declarations") or []
        theorems = tuple(
            d["name"] for d in listed if d.get("kind") == "theorem" and not d.get("internal")
        )
    if not theorems:
        return None  # nothing the re-check could name: the REPL's kernel is what there is
    return recheck.Project(challenge, request.content, theorems, options.definitions, permitted)


def _rechecked(project: recheck.Project, passed: Outcome, sandboxes: Sandboxes) -> Outcome:
    fresh = sandboxes.sandbox("recheck")
    for name, data in project.files().items():
        fresh.write_file(name, data)
    done = fresh.run(list(recheck.COMMAND), timeout_s=sandboxes.remaining_s())
    return recheck.outcome_of(done, project, passed)


def _first_message(outcome: Outcome) -> str:
    return outcome.diagnostics[0].message if outcome.diagnostics else outcome.verdict.value


ADAPTER = ProverAdapter(
    name="lean",
    version=VERSION,
    modes=("proof", "statement"),
    images=("lean",),
    probe=probe,
    check=check,
    validate=validate,
    options=LeanOptions,
    targets=True,
    description="Lean 4 files with Mathlib, checked on a warm REPL per import header",
)
