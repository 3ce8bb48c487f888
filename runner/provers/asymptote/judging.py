"""asy's run judged: its messages as diagnostics, then the verdict (`artifact_outcome`).

Diagnostics read `file: line.col: message`.
Module errors and LaTeX errors are normalized to that form too.
The kit keeps asy's own error places, such as `diagram.asy: 3.1: syntax error` (1-based).
An error inside a library module keeps that module's base name and position.
No install path appears in a message.
LaTeX runs on the labels at shipout.
Its `! ...` errors are summed up in one diagnostic.
That diagnostic's context is the offending label.
It is located in the artifact when it appears there verbatim.
"""

from __future__ import annotations

import hashlib
import re
import signal

from runner.core.models import Diagnostic, JsonValue, Outcome, OutputFile, Verdict
from runner.provers.asymptote import source as asy_source
from runner.provers.asymptote.render import EXTRA_MODULE_DIR, FILE_LIMIT_MB, SOURCE, Render

LOCATED = re.compile(r"^(?P<file>[^\n:]+?): (?P<line>\d+)\.(?P<column>\d+): (?P<message>.*)$")
MODULE_MISSING = re.compile(r"^error: could not load module '(?P<module>[^']*)'")
CANNOT_EXECUTE = re.compile(r"^Cannot execute (?P<tool>\S+)")
TEX_ERROR = re.compile(r"^! (?P<message>.+)$")
TEX_INPUT_LINE = re.compile(r"^l\.\d+ (?P<text>.*)$")
TEX_MISSING_FILE = re.compile(r"File `(?P<file>[^']+)' not found")
TEX_NOISE = ("Emergency stop", "==> Fatal error occurred")
KIT_MESSAGE = re.compile(r"^prooflock: (?P<message>.+)$")  # converters.sh, on stderr
KIT_MODULE = "prooflock.asy"  # its refusals say what was refused; where is the diagram's call
NOT_IN_DEBIAN = {
    "olympiad": (
        "olympiad.asy is not installed in this environment: Debian's asymptote does not ship it; "
        "the asymptote image carries a pinned copy when built with WITH_OLYMPIAD_ASY=yes, "
        "and a local install can put it in "
        f"{EXTRA_MODULE_DIR}/"
    ),
}


def diagnostics_of(run: Render) -> list[Diagnostic]:
    """What asy said in `run`, placed in the diagram it compiled."""
    return parse(run.done.text, run.source, SOURCE)


def artifact_outcome(artifact: Render, fmt: str, timeout: float) -> Outcome:
    """The verdict on one run: `pass` only for a render asy made itself."""
    done, diagnostics = artifact.done, diagnostics_of(artifact)
    details: dict[str, JsonValue] = {}
    if done.timed_out and not artifact.started:
        message = "the check's time ran out before asy started (the kit's work counts against it)"
        diagnostics.append(Diagnostic(message=message))
        return Outcome(verdict=Verdict.TIMEOUT, diagnostics=diagnostics, details=details)
    if done.timed_out:
        diagnostics.append(Diagnostic(message=f"asy did not finish within {timeout:g} s"))
        return Outcome(verdict=Verdict.TIMEOUT, diagnostics=diagnostics, details=details)
    if done.out_of_memory:
        return Outcome(verdict=Verdict.MEMORY, diagnostics=diagnostics, details=details)
    if artifact.data is not None:
        sha = hashlib.sha256(artifact.data).hexdigest()
        return Outcome(
            verdict=Verdict.PASS,
            diagnostics=diagnostics,
            details=details,
            outputs=[OutputFile(role="render", format=fmt, sha256=sha)],
            files={sha: artifact.data},
        )
    if artifact.missing is not None:
        diagnostics.append(Diagnostic(message=artifact.missing))
        return Outcome(verdict=Verdict.FAIL, diagnostics=diagnostics, details=details)
    said_why = any(d.severity == "error" for d in diagnostics)
    if done.signal == signal.SIGXFSZ:
        diagnostics.append(
            Diagnostic(message=f"the render wrote a file larger than {FILE_LIMIT_MB} MiB")
        )
        return Outcome(verdict=Verdict.FAIL, diagnostics=diagnostics, details=details)
    if done.signal is not None and not said_why:
        diagnostics.append(Diagnostic(message=f"asy died (signal {done.signal})"))
        return Outcome(verdict=Verdict.CRASH, diagnostics=diagnostics, details=details)
    if not said_why:
        diagnostics.append(Diagnostic(message=f"asy exited {done.exit_code}"))
    return Outcome(verdict=Verdict.FAIL, diagnostics=diagnostics, details=details)


def parse(output: str, source: str, source_name: str) -> list[Diagnostic]:
    """Diagnostics from asy's combined output, for `source` compiled as `source_name`.

    Lines are matched in order.
    LaTeX's `! message` errors are gathered into one summary.
    The summary is placed where the first of them appeared.
    """
    lines = asy_source.lines(source)
    diagnostics: list[Diagnostic] = []
    tex_errors: list[tuple[str, str | None]] = []
    tex_at: int | None = None
    pending_tex: str | None = None
    for raw in asy_source.lines(output):
        raw = raw.rstrip()
        if pending_tex is not None and (input_line := TEX_INPUT_LINE.match(raw)):
            tex_errors.append((pending_tex, _label_text(input_line["text"])))
            pending_tex = None
        elif (tex := TEX_ERROR.match(raw)) and not any(n in tex["message"] for n in TEX_NOISE):
            if pending_tex is not None:
                tex_errors.append((pending_tex, None))
            pending_tex = " ".join(tex["message"].split())
            tex_at = len(diagnostics) if tex_at is None else tex_at
        elif kit := KIT_MESSAGE.match(raw):
            diagnostics.append(Diagnostic(message=kit["message"]))
        elif located := LOCATED.match(raw):
            diagnostic = _located(located, lines, source_name)
            if diagnostic is not None:
                diagnostics.append(diagnostic)
        elif missing := MODULE_MISSING.match(raw):
            if missing["module"] not in (source_name, source_name.removesuffix(".asy")):
                diagnostics.append(_missing_module(missing["module"], source))
        elif tool := CANNOT_EXECUTE.match(raw):
            diagnostics.append(
                Diagnostic(
                    message=f"cannot execute {tool['tool']}: not installed in this environment"
                )
            )
    if pending_tex is not None:
        tex_errors.append((pending_tex, None))
    if tex_errors:
        diagnostics.insert(tex_at or 0, _latex_summary(tex_errors, source))
    return diagnostics


def _located(match: re.Match[str], lines: list[str], source_name: str) -> Diagnostic | None:
    message = " ".join(match["message"].split())
    severity = "warning" if message.startswith("warning") else "error"
    if message.rstrip(":") in ("runtime", ""):
        return None  # asy's echo of a LaTeX failure; the LaTeX summary says what went wrong
    line, column = int(match["line"]), int(match["column"])
    name = match["file"].rsplit("/", 1)[-1]
    if name == KIT_MODULE:
        return Diagnostic(severity=severity, message=message)
    if name != source_name:  # inside a library module: keep where, without the install path
        return Diagnostic(severity=severity, message=f"{name}: {line}.{column}: {message}")
    context = (lines[line - 1].strip() or None) if 0 < line <= len(lines) else None
    return Diagnostic(severity=severity, message=message, line=line, column=column, context=context)


def _missing_module(module: str, source: str) -> Diagnostic:
    message = f"could not load module '{module}'"
    if module in NOT_IN_DEBIAN:
        message += f": {NOT_IN_DEBIAN[module]}"
    pattern = re.compile(rf"\b(?:import|access|from|include)\s+\"?{re.escape(module)}\b")
    line, column, context = _find(pattern, source)
    return Diagnostic(message=message, line=line, column=column, context=context)


def _label_text(tex_input: str) -> str | None:
    """The label in TeX's echo of an `\\ASYalign(x,y)(a,b){label}` input line, if it is one."""
    if "){" not in tex_input:
        return None
    label = tex_input.rsplit("){", 1)[1].removeprefix("...")
    return (label[:-1] if label.endswith("}") else label) or None


def _latex_summary(errors: list[tuple[str, str | None]], source: str) -> Diagnostic:
    first, label = errors[0]
    more = len(errors) - 1
    message = f"LaTeX error: {first}" + (
        f" (and {more} more LaTeX error{'s' * (more > 1)})" if more else ""
    )
    needle = label
    if needle is None and (missing := TEX_MISSING_FILE.search(first)):
        needle = missing["file"].rsplit(".", 1)[0]
    line = column = None
    if needle:
        line, column, _ = _find(re.compile(re.escape(needle)), source)
    return Diagnostic(message=message, line=line, column=column, context=label or needle)


def _find(pattern: re.Pattern[str], source: str) -> tuple[int | None, int | None, str | None]:
    """The 1-based line and column of `pattern`'s first match in `source`, and that line."""
    for number, text in enumerate(asy_source.lines(source), start=1):
        if found := pattern.search(text):
            return number, found.start() + 1, text.strip()
    return None, None, None
