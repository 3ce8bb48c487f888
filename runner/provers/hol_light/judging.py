"""The verdict on one HOL Light check, from the worker's reply and the replayer's answer.

A file that ran to its end is judged on the replay.
HOL Light's unmodified kernel re-derives the export, in a process that never ran the file.
It sends back one JSON line.
The line lists the theorems, the axioms and definitions under each, and the target's status.
What the child said can only make a check fail.
Memory and time come from the worker's own view of the child, never from a frame.
That view is the worker's clock, the child's exit and the cgroup's kill count.
It also holds the child's peak address space, read from /proc.

Some claims rest on the child's word alone; nothing outside its process can check them.
They are: the export itself, that the file ran every phrase, and which theorems it bound.
Which of its axioms a placeholder made is another.
A record lists these claims in `details.self_reported`.
With a target, the verdict rests only on the replay of the target's statement.
"""

from __future__ import annotations

import re
from typing import Any

from runner.core.models import Diagnostic, JsonValue, Outcome, Target, Trust, Verdict
from runner.provers.base import ResolvedRequest
from runner.provers.common import verdicts
from runner.provers.hol_light import source
from runner.provers.hol_light.options import HolLightOptions
from runner.provers.hol_light.protocol import Reply

ARTIFACT_FILE = "artifact.ml"
MESSAGE_LIMIT = 2000
CONTEXT_LIMIT = 300
SIGKILL = 9
LOCATION = re.compile(r'File "([^"]*)", lines? (\d+)(?:-\d+)?, characters (\d+)-\d+:')
MESSAGE_START = re.compile(r"^(Error|Exception|Parse error|Error in included file)\b", re.MULTILINE)


def refused(request: ResolvedRequest) -> Outcome | None:
    """A FAIL for a target the server cannot be asked about, before anything boots.

    Everything about the file itself is decided on HOL Light's own parse, in the server.
    """
    target = request.target
    if target is None:
        return None
    problem = source.target_problem(target.name, target.statement)
    if problem is None:
        return None
    return Outcome(
        verdict=Verdict.FAIL, diagnostics=[Diagnostic(message=problem, context="target")]
    )


def stopped_outcome(reply: Reply, request: ResolvedRequest, work_dir: str) -> Outcome | None:
    """The verdict of a file that stopped early or left nothing to replay.

    None when the file ran to its end: its proofs then wait in the export.
    """
    content = request.content
    clean = _Normalizer(reply.check_dir, work_dir)
    phrase = _last_phrase(reply)
    cpu = reply.cpu_ms
    if reply.status == "timeout":
        message = f"timed out after {request.timeout_s} s"
        return Outcome(
            verdict=Verdict.TIMEOUT, diagnostics=[_at_phrase(message, phrase, content)], cpu_ms=cpu
        )
    if reply.has("SYNTAX"):
        return _failed(reply, clean(reply.payloads("SYNTAX")[-1]), None, content)
    # Out_of_memory raised, said the child; memory only if the worker saw it near its limit.
    if reply.has("MEMORY") and reply.oom in ("peak", "oom"):
        message = f"HOL Light ran out of memory (limit {request.limits.memory_mb} MB)"
        return Outcome(
            verdict=Verdict.MEMORY, diagnostics=[_at_phrase(message, phrase, content)], cpu_ms=cpu
        )
    if reply.has("FAILED"):
        return _failed(reply, clean(reply.payloads("FAILED")[-1]), phrase, content)
    if reply.has("OVERFLOW"):
        message = "the check's report was not readable (too long or malformed); it was not judged"
        return Outcome(verdict=Verdict.FAIL, diagnostics=[Diagnostic(message=message)], cpu_ms=cpu)
    if reply.status == "signaled":
        # A SIGKILL is the OOM killer only when the cgroup's count says so; unknown is a crash.
        if reply.code == SIGKILL and reply.oom == "oom":
            limit = request.limits.memory_mb
            verdict, reason = Verdict.MEMORY, f"killed for memory (limit {limit} MB)"
        else:
            verdict, reason = Verdict.CRASH, f"died of signal {reply.code}"
        return Outcome(
            verdict=verdict,
            diagnostics=[_at_phrase(f"HOL Light {reason}", phrase, content)],
            cpu_ms=cpu,
        )
    if reply.has("FOREIGN"):
        names = ", ".join(f"`{n}`" for n in reply.payloads("FOREIGN"))
        message = (
            f"{names}: a theorem of another kernel than the one HOL Light loaded "
            "(the file loaded a kernel of its own), which the kit cannot replay"
        )
        return Outcome(verdict=Verdict.FAIL, diagnostics=[Diagnostic(message=message)], cpu_ms=cpu)
    if reply.has("UNREPORTABLE"):
        message = "the file ran, but its proofs could not be exported: " + clean(
            reply.payloads("UNREPORTABLE")[-1]
        )
        return Outcome(verdict=Verdict.FAIL, diagnostics=[Diagnostic(message=message)], cpu_ms=cpu)
    if reply.has("RESULT"):
        if reply.export_length < 0:
            message = "the file's proofs are too large to replay"
            return Outcome(
                verdict=Verdict.FAIL, diagnostics=[Diagnostic(message=message)], cpu_ms=cpu
            )
        if reply.export_length == 0:
            message = "the file ran, but left no proofs to replay"
            return Outcome(
                verdict=Verdict.FAIL, diagnostics=[Diagnostic(message=message)], cpu_ms=cpu
            )
        return None
    if not reply.has("START"):
        message = f"the check process ended ({reply.status} {reply.code}) before it started"
        return Outcome(verdict=Verdict.CRASH, diagnostics=[Diagnostic(message=message)], cpu_ms=cpu)
    message = (
        f"the file stopped before its end (exit code {reply.code}); a file must run to its end"
    )
    return Outcome(
        verdict=Verdict.FAIL, diagnostics=[_at_phrase(message, phrase, content)], cpu_ms=cpu
    )


def replayed_outcome(reply: Reply, replay: dict[str, Any], request: ResolvedRequest) -> Outcome:
    """The verdict of a file that ran to its end: what the replay derived, and only that."""
    cpu = reply.cpu_ms
    if not replay.get("ok"):
        error = str(replay.get("error", "no reason given"))[:MESSAGE_LIMIT]
        if replay.get("timeout"):
            message = f"the replay of the file's proofs timed out after {request.timeout_s} s"
            return Outcome(
                verdict=Verdict.TIMEOUT, diagnostics=[Diagnostic(message=message)], cpu_ms=cpu
            )
        if replay.get("memory"):  # said by the replayer, or its OOM count (worker.replay)
            message = (
                f"the replay of the file's proofs ran out of memory "
                f"(limit {request.limits.memory_mb} MB)"
            )
            return Outcome(
                verdict=Verdict.MEMORY, diagnostics=[Diagnostic(message=message)], cpu_ms=cpu
            )
        message = f"HOL Light's kernel could not re-derive the file's theorems: {error}"
        if replay.get("too_large"):  # derived, but its report is more than the kit reads
            message = f"the replay's report on the file is refused: {error}"
        return Outcome(verdict=Verdict.FAIL, diagnostics=[Diagnostic(message=message)], cpu_ms=cpu)
    theorems = [t for t in replay.get("theorems", []) if isinstance(t, dict)]
    made = [a for a in replay.get("axioms", []) if isinstance(a, dict)]
    axioms = [_one_line(str(a.get("statement", ""))) for a in made if not a.get("placeholder")]
    placeholder_axioms = [
        _one_line(str(a.get("statement", ""))) for a in made if a.get("placeholder")
    ]
    details: dict[str, JsonValue] = {
        "definitions": [_one_line(str(d)) for d in replay.get("definitions", [])],
        "constants": [
            {"name": str(c.get("name")), "type": str(c.get("type"))}
            for c in replay.get("constants", [])
            if isinstance(c, dict)
        ],
        "types": [
            {"name": str(t.get("name")), "arity": int(t.get("arity", 0))}
            for t in replay.get("types", [])
            if isinstance(t, dict)
        ],
        "definition_keys": [str(d) for d in replay.get("definition_keys", [])],
        "theorems": [
            {
                "name": str(t.get("name")),
                "statement": _cut(_one_line(str(t.get("statement"))), 1000),
                "typed": str(t.get("typed", "")),
            }
            for t in theorems
        ],
        "phrases": _phrase_count(reply),
        "self_reported": _self_reported(request),
    }
    assumptions = axioms + [f"placeholder: {a}" for a in placeholder_axioms]
    # An axiom is allowed by its typed key only, since its printing hides types and names.
    # `|- ?x y. ~(x = y)` prints the same at :bool, where it holds, and at :A, where it proves F.
    keys = [str(a.get("typed", "")) for a in made if not a.get("placeholder")]
    forbidden = [a for a, key in zip(axioms, keys, strict=True) if not _allowed(key, request)]
    if request.allowed_axioms:  # the keys to name them by (a request allowing none shows none)
        details["axiom_keys"] = list(keys)
    placeholders: list[str] = []
    if request.mode == "proof":
        written = source.placeholder_uses(
            request.content, list(request.options_as(HolLightOptions).placeholder)
        )
        if placeholder_axioms or written:
            used = ", ".join(f"`{name}`" for name in written) or "a placeholder"
            placeholders = [f"{used} ({len(placeholder_axioms)} theorems admitted)"]
    statement_problem = None
    target = request.target
    if target is not None:
        if reply.target.startswith(b"!"):  # the statement is no proposition: nothing to judge by
            return Outcome(
                verdict=Verdict.FAIL,
                diagnostics=[Diagnostic(message=_unusable(reply.target), context="target")],
                assumptions=assumptions,
                details=details,
                cpu_ms=cpu,
            )
        statement_problem = _target_problem(target, theorems, str(replay.get("target", "")))
    verdict, diagnostics = verdicts.judge(
        placeholders=placeholders, forbidden=forbidden, statement_problem=statement_problem
    )
    return Outcome(
        verdict=verdict,
        diagnostics=diagnostics,
        assumptions=assumptions,
        details=details,
        cpu_ms=cpu,
        # Without a target, the kernel re-derived what the file chose to export.
        trust=Trust.REPLAYED if target is not None else Trust.SELF_REPORTED,
    )


def _self_reported(request: ResolvedRequest) -> list[JsonValue]:
    """The claims of a replayed record that rest on the checking child's word alone."""
    claims: list[JsonValue] = ["ran_to_end"]  # that every phrase ran: the child's END frame
    if request.target is None:
        claims.append("theorems")  # which theorems the file bound: the child's export
    if request.mode == "statement":
        claims.append("placeholders")  # which axioms a placeholder made: the child's marks
    return claims


def _allowed(key: str, request: ResolvedRequest) -> bool:
    """An axiom is allowed by its whole typed key; a term too large to key never is."""
    return key.startswith("|- ") and key in request.allowed_axioms


def _unusable(target: bytes) -> str:
    kind, _, why = target[1:].decode("utf-8", errors="replace").partition(" ")
    if kind == "not_boolean":
        return f"the target statement is not a proposition (it has type {why})"
    return f"the target statement does not parse as a HOL term: {_cut(why, MESSAGE_LIMIT)}"


def _target_problem(target: Target, theorems: list[dict[str, Any]], stated: str) -> str | None:
    """Why the replayed theorem named like the target does not state it, or None."""
    name = target.name
    named = [t for t in theorems if t.get("name") == name]
    if not named:
        return f"the file binds no theorem `{name}`; the target is: {stated}"
    theorem = named[-1]
    statement = _one_line(str(theorem.get("statement")))
    if theorem.get("hypotheses"):
        return f"theorem `{name}` has hypotheses: {statement}; the target is: {stated}"
    if theorem.get("target") == "same":
        return None
    return f"theorem `{name}` states: {statement}; the target is: {stated}"


def _failed(
    reply: Reply,
    text: str,
    phrase: tuple[int, int, int, int] | None,
    content: str,
) -> Outcome:
    message, located = _message(text)
    if located is not None:
        line, column = located
        context = _phrase_text(content, phrase) if phrase else _line_text(content, line)
        diagnostic = Diagnostic(message=message, line=line, column=column, context=context)
    else:
        diagnostic = _at_phrase(message, phrase, content)
    return Outcome(verdict=Verdict.FAIL, diagnostics=[diagnostic], cpu_ms=reply.cpu_ms)


def _message(text: str) -> tuple[str, tuple[int, int] | None]:
    """HOL Light's message (the last error block) and its location in the artifact, if any."""
    starts = [m.start() for m in MESSAGE_START.finditer(text)]
    block = text[starts[-1] :] if starts else text
    if "Error in included file" in block and len(starts) > 1:
        inner = text[starts[-2] : starts[-1]]  # what went wrong inside the included file
        block = f"{_one_line(block)}: {_one_line(LOCATION.sub('', inner))}"
    location = None
    for match in LOCATION.finditer(text[: starts[-1]] if starts else text):
        if match[1] == ARTIFACT_FILE:
            location = (int(match[2]), int(match[3]))
    message = _one_line(block) or "HOL Light rejected the phrase (no message)"
    return _cut(message, MESSAGE_LIMIT), location


def _at_phrase(message: str, phrase: tuple[int, int, int, int] | None, content: str) -> Diagnostic:
    if phrase is None:
        return Diagnostic(message=message)
    line, column, _, _ = phrase
    return Diagnostic(
        message=message, line=line, column=column, context=_phrase_text(content, phrase)
    )


def _last_phrase(reply: Reply) -> tuple[int, int, int, int] | None:
    phrases = reply.payloads("PHRASE")
    if not phrases:
        return None
    _, *span = (int(x) for x in phrases[-1].split())
    return tuple(span)  # type: ignore[return-value]


def _phrase_count(reply: Reply) -> int:
    """Phrases run: the server keeps only the last PHRASE frame, whose index counts them."""
    phrases = reply.payloads("PHRASE")
    return int(phrases[-1].split()[0]) + 1 if phrases else 0


def _phrase_text(content: str, phrase: tuple[int, int, int, int]) -> str:
    """The phrase's source; OCaml counts columns in bytes."""
    first, first_col, last, last_col = phrase
    lines = content.encode("utf-8").split(b"\n")
    if not 0 < first <= last <= len(lines):
        return ""
    if first == last:
        text = lines[first - 1][first_col:last_col]
    else:
        text = b"\n".join(
            [lines[first - 1][first_col:], *lines[first : last - 1], lines[last - 1][:last_col]]
        )
    return _cut(_one_line(text.decode("utf-8", errors="replace")), CONTEXT_LIMIT)


def _line_text(content: str, line: int) -> str | None:
    lines = content.splitlines()
    return _cut(_one_line(lines[line - 1]), CONTEXT_LIMIT) if 0 < line <= len(lines) else None


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _Normalizer:
    """Removes the run's temp paths from messages, so a replay reads the same."""

    def __init__(self, check_dir: str, work_dir: str):
        self.pairs = [
            (check_dir + "/", ""),
            (check_dir, "."),
            (work_dir + "/", ""),
            (work_dir, "."),
        ]

    def __call__(self, text: str) -> str:
        for old, new in self.pairs:
            if old not in ("/", "", "."):
                text = text.replace(old, new)
        return text
