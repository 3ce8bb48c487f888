"""Isabelle/HOL + AFP adapter: theories checked on a warm Isabelle server, one per session.

A request is refused when it is resolved (`validate`: a bad request, exit 2) if:
- the file name is not a theory name, or its `theory` header names another theory;
- its target cannot be read as one proposition (brackets or cartouches that do not pair up, a
  broken symbol).

A theory fails before it runs when it does not lex or has no theory header. It also fails when it
uses ML in any form, an oracle, quick_and_dirty, code reflection or external provers
(source.DENIED). Otherwise the worker (sandbox/isabelle_worker.py) runs it with `use_theories`. The
session is the one `--session` chooses: HOL by default; HOL-Analysis or an AFP session also work.
Next to it runs a report theory whose ML lists each theorem's oracles and the theory's axioms.

Verdicts:
- an error is `fail`, with its position;
- `sorry`, `oops` or a skip_proof oracle is `placeholder` (allowed in statement mode);
- `axiomatization` or another oracle is `axiom` unless allowed. Definitions and the typedef
  package's `type_definition_T` axioms are not assumptions.
- with a target, the named theorem's proposition must be alpha-equivalent to the target. The
  target is read under the theory's imports.

Verdicts rest on Isabelle's kernel (`kernel`), or on a protocol double that said so (`double`).
"""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from runner.core.errors import BadRequest
from runner.core.models import Diagnostic, JsonValue, Outcome, Verdict
from runner.provers.base import (
    AdapterOptions,
    BadOption,
    ProverAdapter,
    ResolvedRequest,
    Sandboxes,
)
from runner.provers.common import verdicts
from runner.provers.isabelle import judging, source, worker

# 2: typedef axioms (`type_definition_T`, from typedef, datatype, record, ...) are not
# assumptions when the typedef package registered them; an axiomatization's own fact names are
# never taken for definitions; a double's results carry trust `double`; the JSON-lines worker.
VERSION = "2"
SESSION_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_+-]*$")


def parse_session(value: JsonValue) -> JsonValue:
    if not isinstance(value, str) or not SESSION_NAME.match(value):
        raise BadOption(
            f"isabelle option 'session' must be a session name such as HOL or HOL-Analysis, not {value!r}"
        )
    return value


class IsabelleOptions(AdapterOptions):
    session: str = Field(
        "HOL",
        description="the logic session theories are checked in (HOL, HOL-Analysis, an AFP "
        "session, ...)",
        json_schema_extra={"metavar": "NAME"},
    )

    _session = field_validator("session", mode="before")(parse_session)

    def environment(self) -> dict[str, JsonValue]:
        return {"session": self.session}  # another session is another logic: another heap


def probe(image: str) -> dict[str, list[str]]:
    components = "cat /opt/prooflock/isabelle-pins.txt 2>/dev/null || echo 'no pins file'"
    return {"isabelle": ["isabelle", "version"], "pins": ["sh", "-c", components]}


def validate(request: ResolvedRequest) -> None:
    """Refuse a file named for another theory, or a target the report cannot hold: BadRequest."""
    problem = source.theory_name_problem(request.name, request.content)
    if problem is None and request.target is not None:
        problem = source.target_problem(request.target.statement)
    if problem is not None:
        raise BadRequest(problem)


def check(request: ResolvedRequest, sandboxes: Sandboxes) -> Outcome:
    """The theory's policy, then the warm server of its session.

    resolve() has validated the name and the target.
    """
    reading = source.read(request.content)
    if reading.refusals:
        return verdicts.refused(reading.refusals)
    assert reading.header is not None  # a theory without one is refused
    session = request.options_as(IsabelleOptions).session
    server = sandboxes.server(worker.server_spec(session))
    boot = worker.read_boot(server)
    if not boot.ok:
        server.retire()
        return verdicts.as_told_by(_session_failure(boot.problem, session), boot.double)
    target = request.target
    reply = worker.run_on(
        server,
        [{"name": reading.header.name, "text": request.content}],
        request.timeout_s,
        {"name": target.name, "statement": target.statement} if target is not None else None,
    )
    outcome = verdicts.as_told_by(judging.outcome_of(reply, request, reading), boot.double)
    outcome.worker = {
        "worker_id": server.worker_id,
        "isabelle_worker": reply.get("stats") or {},
        "boot_ms": boot.boot_ms,
    }
    return outcome


def _session_failure(problem: str, session: str) -> Outcome:
    if "Bad session" in problem or "Undefined session" in problem or "Unknown session" in problem:
        message = f"session {session} is not in the isabelle image: {problem}"
        return Outcome(verdict=Verdict.FAIL, diagnostics=[Diagnostic(message=message)])
    return verdicts.infra_error(f"the Isabelle session {session} did not start: {problem}")


ADAPTER = ProverAdapter(
    name="isabelle",
    version=VERSION,
    modes=("proof", "statement"),
    images=("isabelle",),
    probe=probe,
    check=check,
    validate=validate,
    options=IsabelleOptions,
    targets=True,
    description="Isabelle/HOL theories (with the AFP), checked on a warm Isabelle server",
)
