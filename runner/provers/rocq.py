"""Rocq (Coq) adapter: compile with coqc, then list every constant's assumptions.

Proof mode runs three fresh coqc processes in one empty sandbox: compile the artifact as module
`Artifact`; `Search _ inside Artifact` for every constant it declares; `Print Assumptions` on each.
The last two are separate drivers that only `Require` the compiled module, so nothing the artifact
prints can pose as the assumption report.
"""

from __future__ import annotations

import re

from runner.backends.base import Completed, Sandbox
from runner.models import CheckRequest, Diagnostic, Outcome, Verdict
from runner.provers.base import defaults, fixed_image
from runner.provers.text import axiom_allowed, strip_nested_comments

NAME = "rocq"
VERSION = "2"  # 2: blacklisted names are searched; unsafe universes named
IMAGE = "rocq"
MODES = ("proof", "statement")
SUFFIXES = (".v",)
CLI_OPTIONS = defaults.CLI_OPTIONS
split = defaults.split
summary = defaults.summary
environment_options = defaults.environment_options
open_worker = defaults.open_worker
worker_key = defaults.worker_key
image = fixed_image(IMAGE)

MODULE = "Artifact"
SOURCE = f"{MODULE}.v"
COQC = ("coqc", "-q", "-Q", ".", "")
# Tactics and commands that leave a proof unfinished. `Abort` drops the theorem entirely.
PLACEHOLDER = re.compile(r"\b(Admitted|admit|give_up|Abort|Admit\s+Obligations)\b")
LOCATION = re.compile(r'^File "[^"]*", line (\d+), characters (\d+)-(\d+):$')
UNHIDE_ALL_NAMES = 'Remove Search Blacklist "Private_" "_subproof" "_subterm".'
SECTION_HEADER = re.compile(r"^[A-Z][A-Za-z ]*:$")
MESSAGE = re.compile(r"^(Error|Warning|Anomaly)\b:?\s*(.*)$", re.DOTALL)


def probe(image: str) -> dict[str, list[str]]:
    packages = "dpkg-query -W -f '${Package}=${Version}\\n' coq 'libcoq-*' 2>/dev/null || true"
    return {"coqc": ["coqc", "--version"], "packages": ["sh", "-c", packages]}


def check(request: CheckRequest, sandbox: Sandbox) -> Outcome:
    timeout = float(request.timeout or 60)
    sandbox.write_file(SOURCE, request.content.encode())
    compiled = sandbox.run([*COQC, SOURCE], timeout_s=timeout)
    diagnostics = parse_messages(compiled.text, request.content)
    stopped = _stopped(compiled, diagnostics)
    if stopped is not None:
        return stopped
    if request.mode == "statement":
        return Outcome(verdict=Verdict.PASS, diagnostics=diagnostics, cpu_ms=compiled.cpu_ms)

    # Search hides names matching its blacklist (Private_*, *_subproof, *_subterm by default),
    # which would let `Axiom Private_ax : False.` pass unseen: empty it first.
    constants = _run_driver(sandbox, f"{UNHIDE_ALL_NAMES}\nSearch _ inside {MODULE}.", timeout)
    names = declared_constants(constants.stdout.decode(errors="replace"))
    report = _run_driver(sandbox, "".join(f"Print Assumptions {n}.\n" for n in names), timeout)
    for driver in (constants, report):
        if not driver.ok:
            return _driver_failure(driver, diagnostics)
    assumptions = sorted(parse_assumptions(report.stdout.decode(errors="replace")))
    cpu = sum(c.cpu_ms or 0 for c in (compiled, constants, report))
    uses_placeholder = PLACEHOLDER.search(strip_nested_comments(request.content, "(*", "*)"))
    forbidden = [a for a in assumptions if not axiom_allowed(a, request.allowed_axioms, MODULE)]
    if uses_placeholder:
        verdict = Verdict.PLACEHOLDER
        diagnostics.append(Diagnostic(message=f"proof left unfinished: `{uses_placeholder[0]}`"))
    elif forbidden:
        verdict = Verdict.AXIOM
        diagnostics.append(Diagnostic(message="relies on assumptions not allowed: " + ", ".join(forbidden)))
    else:
        verdict = Verdict.PASS
    return Outcome(verdict=verdict, diagnostics=diagnostics, assumptions=assumptions, cpu_ms=cpu)


def _run_driver(sandbox: Sandbox, body: str, timeout: float) -> Completed:
    sandbox.write_file("Driver.v", f"Require {MODULE}.\n{body}".encode())
    return sandbox.run([*COQC, "Driver.v"], timeout_s=timeout)


def _stopped(done: Completed, diagnostics: list[Diagnostic]) -> Outcome | None:
    """The verdict when compilation did not succeed, else None."""
    if done.timed_out:
        return Outcome(verdict=Verdict.TIMEOUT, diagnostics=diagnostics, cpu_ms=done.cpu_ms)
    if done.out_of_memory:
        return Outcome(verdict=Verdict.MEMORY, diagnostics=diagnostics, cpu_ms=done.cpu_ms)
    if done.exit_code == 0:
        return None
    if done.signal is not None or any(d.message.startswith("Anomaly") for d in diagnostics):
        reason = f"coqc died (signal {done.signal})" if done.signal else "coqc anomaly"
        return Outcome(
            verdict=Verdict.CRASH,
            diagnostics=[*diagnostics, Diagnostic(message=reason)],
            cpu_ms=done.cpu_ms,
        )
    if not any(d.severity == "error" for d in diagnostics):
        diagnostics.append(Diagnostic(message=f"coqc exited {done.exit_code}"))
    return Outcome(verdict=Verdict.FAIL, diagnostics=diagnostics, cpu_ms=done.cpu_ms)


def _driver_failure(done: Completed, diagnostics: list[Diagnostic]) -> Outcome:
    stopped = _stopped(done, parse_messages(done.text, ""))
    assert stopped is not None
    if stopped.verdict is Verdict.FAIL:  # the artifact compiled, so a failing driver is our fault
        stopped = stopped.model_copy(update={"verdict": Verdict.CRASH})
    stopped.diagnostics[:0] = diagnostics
    stopped.diagnostics.append(Diagnostic(message="assumption check did not complete"))
    return stopped


def parse_messages(output: str, source: str) -> list[Diagnostic]:
    """coqc's `File ..., line L, characters A-B:` blocks (and unlocated ones) as diagnostics."""
    diagnostics: list[Diagnostic] = []
    lines = source.splitlines()
    location: tuple[int, int, int] | None = None
    block: list[str] = []

    def flush() -> None:
        text = "\n".join(block).strip()
        match = MESSAGE.match(text)
        if match:
            kind, message = match.groups()
            severity = "warning" if kind == "Warning" else "error"
            message = message if kind != "Anomaly" else f"Anomaly: {message}"
            line = column = context = None
            if location is not None:
                line, column, end = location
                if 0 < line <= len(lines):
                    context = lines[line - 1][column:end] or None
            message = re.sub(r"\./" + re.escape(SOURCE), SOURCE, " ".join(message.split()))
            diagnostics.append(
                Diagnostic(severity=severity, message=message, line=line, column=column, context=context)
            )
        block.clear()

    for raw in output.splitlines():
        located = LOCATION.match(raw)
        if located:
            flush()
            location = tuple(int(g) for g in located.groups())  # type: ignore[assignment]
        elif MESSAGE.match(raw) and block:
            flush()
            location = None
            block.append(raw)
        else:
            block.append(raw)
    flush()
    return diagnostics


def declared_constants(search_output: str) -> list[str]:
    """Names from `Search _ inside Artifact`: entries start at column 0 as `Artifact.x:`."""
    names = []
    for line in search_output.splitlines():
        if line.startswith(f"{MODULE}.") and ":" in line:
            names.append(line.split(":", 1)[0].strip())
    return sorted(set(names))


def parse_assumptions(report: str) -> set[str]:
    """Axiom names from `Print Assumptions` blocks (`name : type`, `X is assumed to be guarded`)."""
    found: set[str] = set()
    for line in report.splitlines():
        if not line or line[0].isspace() or SECTION_HEADER.match(line):
            continue  # continuation line, or a header such as `Axioms:`
        if line.startswith("Closed under the global context"):
            continue
        name, _, rest = line.partition(" ")
        if rest.startswith("hierarchy is collapsed"):  # `Type hierarchy is collapsed (...)`
            found.add("universe checking disabled")
            continue
        guard = re.match(r"is assumed to be (\w+)", rest)
        unsafe = re.match(r"relies on an unsafe (\w+)", rest)
        if guard or unsafe:
            name += f" (assumed {guard[1]})" if guard else f" (unsafe universe {unsafe[1]})"
        found.add(name)
    return found
