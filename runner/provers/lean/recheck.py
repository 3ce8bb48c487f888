"""The independent re-check of a Lean file: comparator, in a fresh sandbox the REPL never ran in.

After the warm REPL passes a file, the adapter writes a comparator project into a fresh sandbox. The
project follows leanprover/comparator's layout: `Challenge.lean`, `Solution.lean`, `config.json`.
Then it runs `lean-mathlib recheck config.json` there. The image's `recheck` builds both modules
with lake, exports them with lean4export and runs comparator. Comparator:
- replays the solution's export into a fresh kernel, and into the external kernels the image
  lists (all must accept);
- checks that each listed theorem states exactly what the challenge states (every constant the
  statement uses is the same in both);
- checks that it rests only on the permitted axioms. Comparator's exit code and its one error line
  decide. The verdict then rests on that re-check (`replayed`).

The challenge, by request:
- comparator mode (`options.challenge`): the challenge as given, with its theorem and definition
  names;
- a target: the target's `requires` as imports (else the file's own imports), and
  `theorem NAME : STATEMENT := sorry`. So the statement is elaborated apart from the file.
- neither: the file itself, naming every theorem the REPL listed (kernel acceptance and axioms).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from runner.backends.base import Completed
from runner.core.models import Diagnostic, JsonValue, Outcome, Trust, Verdict
from runner.provers.common import verdicts
from runner.provers.lean import judging

CHALLENGE_MODULE, SOLUTION_MODULE = "Challenge", "Solution"
CONFIG = "config.json"
COMMAND = ("lean-mathlib", "recheck", CONFIG)
ACCEPTED = "Your solution is okay!"  # comparator's last line when every check passed
BUILDING = "Building "  # comparator's first line, before its sandboxed `lake build`
DOUBLE_MARK = "double: "  # a protocol double's first line (tests/doubles/): the real one has none
# Lean's runtime reports an uncaught `IO.userError` this way, and comparator throws one per
# problem, naming the constant in quotes.
UNCAUGHT = re.compile(r"uncaught exception: (.*)")
QUOTED = re.compile(r"'([^']+)'\s*$")
ILLEGAL_AXIOM = re.compile(r"Illegal axiom detected: '([^']+)'")
STATEMENT_PROBLEMS = (
    "statement do not match",
    "kind don't match",
    "Const not found in solution",
    "Const does not match",
    "Solution constant is not a",
)
CHALLENGE_PROBLEMS = ("Const not found in challenge", "Challenge constant is not a")


@dataclass(frozen=True)
class Project:
    """One comparator project: the challenge, the file as its solution, and what to compare."""

    challenge: str
    solution: str
    theorems: tuple[str, ...]
    definitions: tuple[str, ...]
    permitted: tuple[str, ...]

    def files(self) -> dict[str, bytes]:
        config = {
            "challenge_module": CHALLENGE_MODULE,
            "solution_module": SOLUTION_MODULE,
            "theorem_names": list(self.theorems),
            "definition_names": list(self.definitions),
            "permitted_axioms": list(self.permitted),
        }
        return {
            f"{CHALLENGE_MODULE}.lean": self.challenge.encode(),
            f"{SOLUTION_MODULE}.lean": self.solution.encode(),
            CONFIG: json.dumps(config, indent=2).encode(),
        }


def target_challenge(requires: Sequence[str], name: str, statement: str) -> str:
    """A challenge stating the target alone, on the target's own imports."""
    imports = "".join(f"import {module}\n" for module in requires)
    return f"{imports}\ntheorem {name} :\n(\n{statement}\n) := sorry\n"


def permitted_axioms(
    allowed_axioms: Sequence[str], assumptions: Sequence[str], mode: str, *, exact: bool = False
) -> tuple[str, ...]:
    """Comparator's exact names for the permitted axioms.

    They are what the request allows by name. Add what the REPL reported that the request allows: a
    native proof's own axiom, allowed by its tactic. Lean's own three are added unless `exact`. In
    comparator mode its `permitted_axioms` are all there is.
    """
    names = set(allowed_axioms) | {a for a in assumptions if judging.allowed(a, allowed_axioms)}
    if not exact:
        names |= set(judging.STANDARD_AXIOMS)
    if mode == "statement":
        names.add(judging.SORRY)
    return tuple(sorted(names))


@dataclass(frozen=True)
class Reading:
    """What comparator said: accepted, or its error; and whether a double said it."""

    accepted: bool
    message: str
    double: str | None
    comparator_spoke: bool = True  # it printed what comparator prints (its build, its error)


def read(done: Completed) -> Reading:
    lines = done.text.splitlines()
    # Only the first line may announce a double: later lines carry the file's build messages.
    first = lines[0] if lines else ""
    double = first[len(DOUBLE_MARK) :] if first.startswith(DOUBLE_MARK) else None
    if done.exit_code == 0 and ACCEPTED in lines:
        return Reading(True, ACCEPTED, double)
    errors = [m.group(1).strip() for m in map(UNCAUGHT.match, lines) if m]
    tail = [ln for ln in lines if ln.strip()][-1:] or [f"exit status {done.exit_code}"]
    spoke = bool(errors) or any(ln.startswith(BUILDING) for ln in lines)
    return Reading(False, errors[-1] if errors else tail[0], double, spoke)


def outcome_of(done: Completed, project: Project, passed: Outcome) -> Outcome:
    """The verdict after the re-check: the REPL's pass confirmed, or comparator's objection."""
    stopped = verdicts.stopped(done, [], "the re-check (comparator)")
    if stopped is not None and (done.timed_out or done.out_of_memory or done.signal):
        return stopped
    reading = read(done)
    if not reading.accepted and not reading.comparator_spoke:
        return verdicts.infra_error(
            f"the image's re-check (`{' '.join(COMMAND)}`) did not run comparator: "
            f"{reading.message}"
        )
    trust = Trust.DOUBLE if reading.double else Trust.REPLAYED
    details = {**passed.details, "comparator": result(project, reading)}
    if reading.accepted:
        return Outcome(
            verdict=Verdict.PASS,
            trust=trust,
            assumptions=passed.assumptions,
            details=details,
            cpu_ms=passed.cpu_ms,
        )
    verdict, message = objection(reading.message)
    return Outcome(
        verdict=verdict,
        trust=trust,
        diagnostics=[Diagnostic(message=message, context="re-check")],
        assumptions=passed.assumptions,
        details=details,
        cpu_ms=passed.cpu_ms,
    )


def objection(message: str) -> tuple[Verdict, str]:
    """Comparator's error as the kit's verdict, with a sentence saying what it means."""
    axiom = ILLEGAL_AXIOM.search(message)
    if axiom is not None and axiom.group(1) == judging.SORRY:
        return Verdict.PLACEHOLDER, f"the re-check found a sorry: {message}"
    if axiom is not None:
        return Verdict.AXIOM, f"the re-check found an axiom not allowed: {message}"
    if any(problem in message for problem in STATEMENT_PROBLEMS):
        return Verdict.WRONG_STATEMENT, f"the re-check found another statement: {message}"
    if any(problem in message for problem in CHALLENGE_PROBLEMS):
        return Verdict.FAIL, f"the challenge does not declare what the request names: {message}"
    return Verdict.FAIL, f"the re-check rejected the file: {message}"


def result(project: Project, reading: Reading) -> dict[str, JsonValue]:
    """Comparator's result per theorem.

    When it accepted, `ok` for all. Otherwise its error goes under the constant it names, and null
    under the others: comparator stops at its first objection.
    """
    named = QUOTED.search(reading.message)
    culprit = named.group(1) if named and not reading.accepted else None
    per_name: dict[str, JsonValue] = {
        name: "ok" if reading.accepted else (reading.message if name == culprit else None)
        for name in (*project.theorems, *project.definitions)
    }
    return {
        "exit_code": 0 if reading.accepted else 1,
        "message": reading.message,
        "theorems": per_name,
    }
