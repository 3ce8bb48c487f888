"""The forkserver's wire format (see server.ml), and what a reply means: an Outcome.

A request is a header line, the file, then the target statement (if any). A reply is
`\\n@@<nonce> REPLY <status> <code> <cpu_ms> <parent> <oom> <report_length> <dir>\\n`, the report,
then `\\n@@<nonce> DONE\\n`. The report is the kit's own account of the check, frames
`<TAG> <length>\\n<payload>` that the checking child wrote on a pipe the artifact cannot reach:
where it stopped, why, the axioms, definitions and theorems it left, the target's comparison.
What the artifact printed is not in the reply at all. Memory and time come from how the child
ended (its status, the server's deadline, the cgroup's OOM-kill count, an out-of-memory exception
under the address-space limit), never from text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from runner.core.models import Diagnostic, JsonValue, Outcome, Target, Verdict
from runner.provers.base import ResolvedRequest
from runner.provers.common import verdicts
from runner.provers.hol_light import source
from runner.provers.hol_light.options import HolLightOptions

ARTIFACT_FILE = "artifact.ml"
MESSAGE_LIMIT = 2000
CONTEXT_LIMIT = 300
SIGKILL = 9
LOCATION = re.compile(r'File "([^"]*)", lines? (\d+)(?:-\d+)?, characters (\d+)-\d+:')
MESSAGE_START = re.compile(r"^(Error|Exception|Parse error|Error in included file)\b", re.MULTILINE)


def encode_request(
    nonce: str,
    timeout_s: int,
    placeholders: list[str],
    preload: list[str],
    content: str,
    target: Target | None = None,
) -> bytes:
    body = content.encode("utf-8")
    statement = target.statement.encode("utf-8") if target is not None else b""
    name = target.name if target is not None else "-"
    header = (
        f"CHECK {nonce} {timeout_s * 1000} {','.join(placeholders) or '-'} "
        f"{','.join(preload) or '-'} {len(body)} {name} {len(statement)}\n"
    )
    return header.encode() + body + statement


def done_marker(nonce: str) -> bytes:
    return f"\n@@{nonce} DONE\n".encode()


@dataclass
class Reply:
    status: str  # exited, signaled, timeout
    code: int
    cpu_ms: int
    parent: str  # plain or preloaded
    oom: str  # oom (the cgroup killed something during the check), none, unknown
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
    fields = raw[start + len(head) : line_end].decode().split(" ", 6)
    if len(fields) != 7 or not fields[5].isdigit():
        raise MalformedReply(f"bad reply header {fields!r}")
    status, code, cpu_ms, parent, oom, length, check_dir = fields
    reply = Reply(status, int(code), int(cpu_ms), parent, oom, check_dir)
    report = raw[line_end + 1 : line_end + 1 + int(length)]
    if raw[line_end + 1 + int(length) :] != done_marker(nonce):
        raise MalformedReply("the report is not followed by the end of the reply")
    reply.events = parse_report(report)
    return reply


def parse_report(report: bytes) -> list[tuple[str, str]]:
    events, at = [], 0
    while at < len(report):
        header_end = report.find(b"\n", at)
        if header_end < 0:
            raise MalformedReply("a report frame without a header")
        tag, _, length = report[at:header_end].decode(errors="replace").partition(" ")
        if not length.isdigit():
            raise MalformedReply(f"a report frame with a bad header {tag!r} {length!r}")
        end = header_end + 1 + int(length)
        events.append((tag, report[header_end + 1 : end].decode("utf-8", errors="replace")))
        at = end
    return events


def outcome_from_reply(reply: Reply, request: ResolvedRequest, work_dir: str) -> Outcome:
    """The verdict: pass only when the whole file ran, to its end, and added no axiom."""
    content = request.content
    clean = _Normalizer(reply.check_dir, work_dir)
    phrase = _last_phrase(reply)
    cpu = reply.cpu_ms
    if reply.status == "timeout":
        message = f"timed out after {request.timeout_s} s"
        return Outcome(
            verdict=Verdict.TIMEOUT, diagnostics=[_at_phrase(message, phrase, content)], cpu_ms=cpu
        )
    if reply.has("REFUSED"):
        return _refused(reply.payloads("REFUSED")[-1], content, cpu)
    if reply.has("SYNTAX"):
        return _failed(reply, clean(reply.payloads("SYNTAX")[-1]), None, content)
    if reply.has("MEMORY"):  # Out_of_memory raised with the process at its address-space limit
        message = f"HOL Light ran out of memory (limit {request.limits.memory_mb} MB)"
        return Outcome(
            verdict=Verdict.MEMORY, diagnostics=[_at_phrase(message, phrase, content)], cpu_ms=cpu
        )
    if reply.has("FAILED"):
        return _failed(reply, clean(reply.payloads("FAILED")[-1]), phrase, content)
    if reply.has("OVERFLOW"):
        message = "the file made more theory than the kit can report; it was not judged"
        return Outcome(verdict=Verdict.FAIL, diagnostics=[Diagnostic(message=message)], cpu_ms=cpu)
    if reply.has("RESULT") and not reply.has("UNREPORTABLE"):
        return _finished(reply, request)
    if reply.status == "signaled":
        # Only the kernel kills a check (the server's own kill is the timeout, and a checked file
        # cannot send signals): SIGKILL is the OOM killer unless the cgroup's count says not.
        if reply.code == SIGKILL and reply.oom != "none":
            limit = request.limits.memory_mb
            verdict, reason = Verdict.MEMORY, f"killed for memory (limit {limit} MB)"
        else:
            verdict, reason = Verdict.CRASH, f"died of signal {reply.code}"
        return Outcome(
            verdict=verdict,
            diagnostics=[_at_phrase(f"HOL Light {reason}", phrase, content)],
            cpu_ms=cpu,
        )
    if reply.has("UNREPORTABLE"):
        message = "the file ran, but its theory could not be read back: " + clean(
            reply.payloads("UNREPORTABLE")[-1]
        )
        return Outcome(verdict=Verdict.FAIL, diagnostics=[Diagnostic(message=message)], cpu_ms=cpu)
    if not reply.has("START"):
        raise MalformedReply(f"the check process {reply.status} {reply.code} before starting")
    message = (
        f"the file stopped before its end (exit code {reply.code}); a file must run to its end"
    )
    return Outcome(
        verdict=Verdict.FAIL, diagnostics=[_at_phrase(message, phrase, content)], cpu_ms=cpu
    )


def _finished(reply: Reply, request: ResolvedRequest) -> Outcome:
    unlisted = _unlisted(reply)
    axioms = [_one_line(a) for a in reply.payloads("AXIOM")]
    placeholder_axioms = [_one_line(a) for a in reply.payloads("PLACEHOLDER")]
    placeholder_count = len(placeholder_axioms) + unlisted.get("PLACEHOLDER", 0)
    theorems: list[JsonValue] = [_theorem(t) for t in reply.payloads("THEOREM")]
    details: dict[str, JsonValue] = {
        "definitions": [_one_line(d) for d in reply.payloads("DEFINITION")],
        "constants": [_named(c, "type") for c in reply.payloads("CONSTANT")],
        "types": [
            {"name": n["name"], "arity": int(n["arity"])}
            for n in (_named(t, "arity") for t in reply.payloads("TYPE"))
        ],
        "theorems": theorems,
        "phrases": _phrase_count(reply),
    }
    if unlisted:
        details["unlisted"] = dict(sorted(unlisted.items()))
    assumptions = axioms + [f"placeholder: {a}" for a in placeholder_axioms]
    forbidden = [a for a in axioms if a not in request.allowed_axioms]
    if unlisted.get("AXIOM"):  # too many to list: none of those can be on the allowed list
        forbidden.append(f"{unlisted['AXIOM']} more axioms")
    placeholders: list[str] = []
    if request.mode == "proof":
        written = source.placeholder_uses(
            request.content, list(request.options_as(HolLightOptions).placeholder)
        )
        if placeholder_count or written:
            used = ", ".join(f"`{name}`" for name in written) or "a placeholder"
            placeholders = [f"{used} ({placeholder_count} theorems admitted)"]
    target = request.target
    statement_problem = None
    if target is not None:
        compared = reply.payloads("TARGET")
        if not compared:
            return verdicts.failed(f"the target `{target.name}` was not compared")
        status, message = _compared(target, compared[-1])
        if status == "unusable":  # the target is no statement: nothing to judge the file by
            return Outcome(
                verdict=Verdict.FAIL,
                diagnostics=[Diagnostic(message=message, context="target")],
                assumptions=assumptions,
                details=details,
                cpu_ms=reply.cpu_ms,
            )
        statement_problem = message if status == "differs" else None
    verdict, diagnostics = verdicts.judge(
        placeholders=placeholders, forbidden=forbidden, statement_problem=statement_problem
    )
    return Outcome(
        verdict=verdict,
        diagnostics=diagnostics,
        assumptions=assumptions,
        details=details,
        cpu_ms=reply.cpu_ms,
    )


def _compared(target: Target, payload: str) -> tuple[str, str]:
    """What the server found for the target: (`same`, `differs` or `unusable`, why)."""
    status, _, rest = payload.partition("\n")
    theorem, _, stated = rest.partition("\n")
    name = target.name
    if status == "same":
        return "same", ""
    if status == "unparsable":
        return "unusable", f"the target statement does not parse as a HOL term: {stated}"
    if status == "not_boolean":
        return "unusable", f"the target statement is not a proposition: {stated}"
    if status == "missing":
        return "differs", f"the file binds no theorem `{name}`; the target is: {stated}"
    if status == "not_a_theorem":
        return "differs", f"`{name}` is not a theorem (type {theorem}); the target is: {stated}"
    if status == "hypotheses":
        return "differs", f"theorem `{name}` has hypotheses: {theorem}; the target is: {stated}"
    return "differs", f"theorem `{name}` states: {theorem}; the target is: {stated}"


def _refused(payload: str, content: str, cpu: int) -> Outcome:
    line, column, message = payload.split(" ", 2)
    diagnostic = Diagnostic(
        message=message, line=int(line), column=int(column), context=_line_text(content, int(line))
    )
    return Outcome(verdict=Verdict.FAIL, diagnostics=[diagnostic], cpu_ms=cpu)


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
    """Phrases run (the server keeps only the last PHRASE frame: its index counts them)."""
    phrases = reply.payloads("PHRASE")
    return int(phrases[-1].split()[0]) + 1 if phrases else 0


def _unlisted(reply: Reply) -> dict[str, int]:
    counts = {}
    for payload in reply.payloads("UNLISTED"):
        tag, _, count = payload.partition(" ")
        counts[tag] = int(count)
    return counts


def _theorem(payload: str) -> JsonValue:
    name, _, statement = payload.partition("\n")
    return {"name": name, "statement": _one_line(statement)}


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
