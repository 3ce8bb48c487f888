"""The forkserver's wire format (see server.ml), and what a reply means: an Outcome.

A reply is `\\n@@<nonce> REPLY <status> <code> <cpu_ms> <parent> <dir>\\n`, the child's output
with control lines `\\n@@<nonce> <TAG> <length>\\n<payload>` in it, then `\\n@@<nonce> DONE\\n`.
The nonce is fresh per check and never visible to the artifact, so its output cannot pose as a
control line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from runner.models import CheckRequest, Diagnostic, Outcome, Verdict
from runner.provers.hol_light import source

ARTIFACT_FILE = "artifact.ml"
MESSAGE_LIMIT = 2000
CONTEXT_LIMIT = 300
SIGKILL = 9
LOCATION = re.compile(r'File "([^"]*)", lines? (\d+)(?:-\d+)?, characters (\d+)-\d+:')
MESSAGE_START = re.compile(r"^(Error|Exception|Parse error|Error in included file)\b", re.MULTILINE)


def encode_request(
    nonce: str, timeout_s: int, placeholders: list[str], preload: list[str], content: str
) -> bytes:
    body = content.encode("utf-8")
    header = (
        f"CHECK {nonce} {timeout_s * 1000} {','.join(placeholders) or '-'} "
        f"{','.join(preload) or '-'} {len(body)}\n"
    )
    return header.encode() + body


def done_marker(nonce: str) -> bytes:
    return f"\n@@{nonce} DONE\n".encode()


@dataclass
class Reply:
    status: str  # exited, signaled, timeout
    code: int
    cpu_ms: int
    parent: str  # plain or preloaded
    check_dir: str
    events: list[tuple[str, str]] = field(default_factory=list)

    def payloads(self, tag: str) -> list[str]:
        return [payload for t, payload in self.events if t == tag]

    def has(self, tag: str) -> bool:
        return any(t == tag for t, _ in self.events)


class MalformedReply(ValueError):
    pass


def parse_reply(raw: bytes, nonce: str) -> Reply:
    head = f"\n@@{nonce} REPLY ".encode()
    start = raw.find(head)
    if start < 0:
        raise MalformedReply("no reply header")
    line_end = raw.index(b"\n", start + len(head))
    fields = raw[start + len(head) : line_end].decode().split(" ", 4)
    if len(fields) != 5:
        raise MalformedReply(f"bad reply header {fields!r}")
    status, code, cpu_ms, parent, check_dir = fields
    reply = Reply(status, int(code), int(cpu_ms), parent, check_dir)
    body = raw[line_end + 1 :]
    marker = f"\n@@{nonce} ".encode()
    at = body.find(marker)
    while at >= 0:
        header_end = body.find(b"\n", at + len(marker))
        if header_end < 0:
            break
        tag, _, length = body[at + len(marker) : header_end].decode(errors="replace").partition(" ")
        if tag == "DONE":
            break
        size = int(length) if length.isdigit() else 0
        payload = body[header_end + 1 : header_end + 1 + size]
        reply.events.append((tag, payload.decode("utf-8", errors="replace")))
        at = body.find(marker, header_end + 1 + size)
    return reply


def outcome_from_reply(reply: Reply, request: CheckRequest, work_dir: str) -> Outcome:
    """The verdict: pass only when the whole file ran, to its end, and added no axiom."""
    content = request.content
    clean = _Normalizer(reply.check_dir, work_dir)
    phrase = _last_phrase(reply)
    if reply.status == "timeout":
        return Outcome(
            verdict=Verdict.TIMEOUT,
            diagnostics=[_at_phrase(f"timed out after {request.timeout} s", phrase, content)],
            cpu_ms=reply.cpu_ms,
        )
    if reply.has("SYNTAX"):
        return _failed(reply, clean(reply.payloads("SYNTAX")[-1]), None, content)
    if reply.has("FAILED"):
        text = clean(reply.payloads("FAILED")[-1])
        verdict = Verdict.MEMORY if "Out_of_memory" in text else Verdict.FAIL
        return _failed(reply, text, phrase, content, verdict)
    if reply.has("RESULT") and not reply.has("UNREPORTABLE"):
        return _finished(reply, request)
    if reply.status == "signaled":
        verdict = Verdict.MEMORY if reply.code == SIGKILL else Verdict.CRASH
        reason = (
            "killed (out of memory?)" if reply.code == SIGKILL else f"died of signal {reply.code}"
        )
        return Outcome(
            verdict=verdict,
            diagnostics=[_at_phrase(f"HOL Light {reason}", phrase, content)],
            cpu_ms=reply.cpu_ms,
        )
    if reply.has("UNREPORTABLE"):
        message = "the file ran, but its theory could not be read back: " + clean(
            reply.payloads("UNREPORTABLE")[-1]
        )
        return Outcome(
            verdict=Verdict.FAIL, diagnostics=[Diagnostic(message=message)], cpu_ms=reply.cpu_ms
        )
    if not reply.has("START"):
        raise MalformedReply(f"the check process {reply.status} {reply.code} before starting")
    message = (
        f"the file stopped before its end (exit code {reply.code}); a file must run to its end"
    )
    return Outcome(
        verdict=Verdict.FAIL,
        diagnostics=[_at_phrase(message, phrase, content)],
        cpu_ms=reply.cpu_ms,
    )


def _finished(reply: Reply, request: CheckRequest) -> Outcome:
    axioms = [_one_line(a) for a in reply.payloads("AXIOM")]
    placeholder_axioms = [_one_line(a) for a in reply.payloads("PLACEHOLDER")]
    details = {
        "definitions": [_one_line(d) for d in reply.payloads("DEFINITION")],
        "constants": [_named(c, "type") for c in reply.payloads("CONSTANT")],
        "types": [
            {"name": n["name"], "arity": int(n["arity"])}
            for n in (_named(t, "arity") for t in reply.payloads("TYPE"))
        ],
        "phrases": len(reply.payloads("PHRASE")),
    }
    assumptions = axioms + [f"placeholder: {a}" for a in placeholder_axioms]
    forbidden = [a for a in axioms if a not in request.allowed_axioms]
    written = source.placeholder_uses(request.content, source.placeholders(request))
    diagnostics = []
    if request.mode == "proof" and (placeholder_axioms or written):
        verdict = Verdict.PLACEHOLDER
        used = ", ".join(f"`{name}`" for name in written) or "a placeholder"
        admitted = f"{len(placeholder_axioms)} theorems admitted"
        diagnostics.append(Diagnostic(message=f"proof left unfinished: {used} ({admitted})"))
    elif forbidden:
        verdict = Verdict.AXIOM
        diagnostics.append(Diagnostic(message="adds axioms not allowed: " + "; ".join(forbidden)))
    else:
        verdict = Verdict.PASS
    return Outcome(
        verdict=verdict,
        diagnostics=diagnostics,
        assumptions=assumptions,
        details=details,
        cpu_ms=reply.cpu_ms,
    )


def _failed(
    reply: Reply,
    text: str,
    phrase: tuple[int, int, int, int] | None,
    content: str,
    verdict: Verdict = Verdict.FAIL,
) -> Outcome:
    message, located = _message(text)
    if located is not None:
        line, column = located
        context = _phrase_text(content, phrase) if phrase else _line_text(content, line)
        diagnostic = Diagnostic(message=message, line=line, column=column, context=context)
    else:
        diagnostic = _at_phrase(message, phrase, content)
    return Outcome(verdict=verdict, diagnostics=[diagnostic], cpu_ms=reply.cpu_ms)


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


def _named(payload: str, second: str) -> dict[str, str]:
    name, _, rest = payload.partition(" ")
    return {"name": name, second: _one_line(rest)}


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
