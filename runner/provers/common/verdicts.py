"""The verdict ladder every adapter climbs, so each verdict means the same for every prover.

1. How the process ended (`stopped`): timeout, memory, crash, fail. Memory comes from the exit
   status and the cgroup or rlimit, never from text. A crash is a signal, or the prover's own
   anomaly. Fail is a non-zero exit.
2. What the kernel reported for a finished check (`judge`): placeholder, then axiom, then wrong
   statement, then pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from runner.backends.base import Completed
from runner.core.models import Diagnostic, Outcome, Trust, Verdict
from runner.provers.common.lexing import position


def infra_error(message: str) -> Outcome:
    """The kit or the machine failed: retried by the core, never counted against the artifact."""
    return Outcome(
        verdict=Verdict.INFRA_ERROR, trust=Trust.NONE, diagnostics=[Diagnostic(message=message)]
    )


def failed(
    message: str, *, line: int | None = None, column: int | None = None, context: str | None = None
) -> Outcome:
    where = Diagnostic(message=message, line=line, column=column, context=context)
    return Outcome(verdict=Verdict.FAIL, diagnostics=[where])


@dataclass(frozen=True)
class Refusal:
    """What the kit refuses before an artifact runs, and where: one kind for every prover."""

    message: str
    line: int
    column: int
    context: str

    @classmethod
    def at(cls, text: str, offset: int, message: str) -> Refusal:
        """A refusal at `offset` in `text`, its context the line there with spaces collapsed."""
        line, column = position(text, offset)
        lines = text.splitlines()
        context = " ".join(lines[line - 1].split()) if line <= len(lines) else ""
        return cls(message=message, line=line, column=column, context=context)

    def diagnostic(self) -> Diagnostic:
        return Diagnostic(
            message=self.message, line=self.line, column=self.column, context=self.context
        )


def refused(refusals: Sequence[Refusal]) -> Outcome:
    """The one way refusals become a verdict: `fail`, each refusal a diagnostic, in order.

    It rests on the kit's own reading; no prover spoke.
    """
    return Outcome(
        verdict=Verdict.FAIL, trust=Trust.KIT, diagnostics=[r.diagnostic() for r in refusals]
    )


def as_told_by(outcome: Outcome, double: str | None) -> Outcome:
    """A verdict a prover process gave: it rests on that prover's kernel.

    If the process announced itself as a protocol double, it rests on that double's word. `double`
    says what the double is.
    """
    if double and outcome.trust is Trust.KERNEL:
        outcome.trust = Trust.DOUBLE
    return outcome


def stopped(
    done: Completed,
    diagnostics: list[Diagnostic],
    tool: str,
    *,
    crashed: bool = False,
) -> Outcome | None:
    """The outcome of a process that did not succeed, or None when it exited 0.

    `crashed`: the prover said it broke itself (an anomaly), which is not a verdict on the artifact.
    """
    cpu = done.cpu_ms
    if done.timed_out:
        return Outcome(verdict=Verdict.TIMEOUT, diagnostics=diagnostics, cpu_ms=cpu)
    if done.out_of_memory:
        message = f"{tool} exceeded the memory limit"
        return Outcome(
            verdict=Verdict.MEMORY,
            diagnostics=[*diagnostics, Diagnostic(message=message)],
            cpu_ms=cpu,
        )
    if done.exit_code == 0 and not crashed:
        return None
    if done.signal is not None or crashed:
        reason = f"{tool} died (signal {done.signal})" if done.signal else f"{tool} crashed"
        return Outcome(
            verdict=Verdict.CRASH,
            diagnostics=[*diagnostics, Diagnostic(message=reason)],
            cpu_ms=cpu,
        )
    if not any(d.severity == "error" for d in diagnostics):
        diagnostics = [*diagnostics, Diagnostic(message=f"{tool} exited {done.exit_code}")]
    return Outcome(verdict=Verdict.FAIL, diagnostics=diagnostics, cpu_ms=cpu)


def judge(
    *,
    placeholders: Sequence[str],
    forbidden: Sequence[str],
    statement_problem: str | None = None,
) -> tuple[Verdict, list[Diagnostic]]:
    """The verdict of a check that ran to its end, and the diagnostic that explains it.

    - `placeholders`: unfinished proofs the mode does not allow (already filtered by mode).
    - `forbidden`: assumptions not on the request's allowed list.
    - `statement_problem`: why the target theorem is missing or differs.
    """
    if placeholders:
        listed = ", ".join(placeholders)
        return Verdict.PLACEHOLDER, [Diagnostic(message=f"proof left unfinished: {listed}")]
    if forbidden:
        listed = ", ".join(forbidden)
        return Verdict.AXIOM, [Diagnostic(message=f"relies on assumptions not allowed: {listed}")]
    if statement_problem is not None:
        return Verdict.WRONG_STATEMENT, [Diagnostic(message=statement_problem)]
    return Verdict.PASS, []


def allowed(name: str, allowed_names: Sequence[str], own_prefix: str | None = None) -> bool:
    """Whether an assumption the prover reported is on the request's allowed list.

    Reported names are qualified only as far as needed (`Classical_Prop.classic`). So an entry
    matches by dotted suffix either way. One exception: a short entry never covers an assumption the
    artifact declares itself (`<own_prefix>.classic`). Only its full name does.
    """
    for entry in allowed_names:
        if name == entry or entry.endswith("." + name):
            return True
        own = own_prefix is not None and name.startswith(own_prefix + ".")
        if name.endswith("." + entry) and not own:
            return True
    return False
