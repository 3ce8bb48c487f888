"""The worker's wire format (see server.ml): a request framed, a reply parsed.

judging.py says what a reply and the replayer's answer mean, as an Outcome.

A request is a header line, the file, then the target statement, if any.
A reply has a header line, the report, the target, and a closing line.
The header line is:

    \\n@@<nonce> REPLY <status> <code> <cpu_ms> <parent> <oom> <report_length> <target_length>
    <export_length> <swept> <dir>\\n

The closing line is `\\n@@<nonce> DONE\\n`.
The report is the checking child's account: where it stopped and why.
Its frames read `<TAG> <length>\\n<payload>`.
The target is the target statement as HOL Light parsed it.
The pristine worker parsed it before the child started.
It is a proof-export term, or `!` and the reason there is none.
The child's proofs wait in the worker's `proof.export`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from runner.core.models import Target


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
    # The worker's view of memory: oom, peak, none or unknown.
    # oom: the cgroup killed something during the check.
    # peak: the child grew to 3/4 of its address-space limit.
    oom: str
    check_dir: str
    target: bytes = b""  # the target's export, or b"!" and why the statement is none
    export_length: int = 0  # bytes in proof.export; -1: too large to replay
    swept: int = 0  # processes the check left behind, killed after it
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
    line_end = raw.find(b"\n", start + len(head))
    if line_end < 0:
        raise MalformedReply("a reply header without its end")
    fields = raw[start + len(head) : line_end].decode(errors="replace").split(" ", 9)
    numbers = (fields[1], fields[2], fields[5], fields[6], fields[8]) if len(fields) == 10 else ()
    if not numbers or not all(n.isdigit() for n in numbers) or not _integer(fields[7]):
        raise MalformedReply(f"bad reply header {fields!r}")
    status, code, cpu_ms, parent, oom, length, target_length, export, swept, check_dir = fields
    reply = Reply(status, int(code), int(cpu_ms), parent, oom, check_dir)
    report_end = line_end + 1 + int(length)
    target_end = report_end + int(target_length)
    if raw[target_end:] != done_marker(nonce):
        raise MalformedReply("the report is not followed by the end of the reply")
    reply.events = parse_report(raw[line_end + 1 : report_end])
    reply.target = raw[report_end:target_end]
    reply.export_length, reply.swept = int(export), int(swept)
    return reply


def _integer(text: str) -> bool:
    return text.lstrip("-").isdigit()


def parse_report(report: bytes) -> list[tuple[str, str]]:
    events, at = [], 0
    while at < len(report):
        header_end = report.find(b"\n", at)
        if header_end < 0:
            raise MalformedReply("a report frame without a header")
        tag, _, length = report[at:header_end].decode(errors="replace").partition(" ")
        if not length.isdigit():  # the server keeps only well-formed frames
            raise MalformedReply(f"a report frame with a bad header {tag!r} {length!r}")
        end = header_end + 1 + int(length)
        events.append((tag, report[header_end + 1 : end].decode("utf-8", errors="replace")))
        at = end
    return events
