"""The warm worker: HOL Light loaded once in a server (server.ml), each check in a forked child.

The kit side is the shared SandboxServer: this module only frames a request, says how the server
starts, and reads its boot line. A cold check is the same server booted for that one request.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from importlib.resources import files

from runner.backends.base import Sandbox
from runner.core.errors import BackendUnavailable
from runner.core.models import Diagnostic, Outcome, Verdict
from runner.provers.base import ResolvedRequest
from runner.provers.common.server import SandboxServer, ServerSpec
from runner.provers.hol_light import protocol, source
from runner.provers.hol_light.options import HolLightOptions

SERVER_FILE = "server.ml"
BOOT_LOG = "boot.log"
BOOT_MARKER = b"\n@@BOOT "
# Loading hol.ml takes about 3 minutes on a quiet machine; a busy one needs more.
BOOT_TIMEOUT_S = 1200
# Beyond the check's own timeout: the reply's way back, and loading a declared library set.
REPLY_SLACK_S = 30
PRELOAD_LIMIT_S = 900
BOOT_ERROR = re.compile(r"^(Error|Exception:).*$", re.MULTILINE)


def server_spec(hol_dir: str) -> ServerSpec:
    return ServerSpec(
        name="HOL Light worker",
        argv=[f"{hol_dir}/ocaml", SERVER_FILE],
        ready=BOOT_MARKER,
        boot_timeout_s=BOOT_TIMEOUT_S,
        files={SERVER_FILE: files(__package__).joinpath(SERVER_FILE).read_bytes()},
        env={"HOLLIGHT_DIR": hol_dir},
        boot_note="loading HOL Light takes about 3 min",
        explain_failure=lambda sandbox: boot_failure(_read_log(sandbox)),
    )


def reply_timeout(request: ResolvedRequest, preload: list[str]) -> float:
    timeout = float(request.timeout_s)
    if preload:  # the sub-server may have to load first, and may fall back to the plain parent
        return timeout + REPLY_SLACK_S + PRELOAD_LIMIT_S + timeout + 60
    return timeout + REPLY_SLACK_S


@dataclass(frozen=True)
class Boot:
    ms: int
    hol_version: str
    work_dir: str


def read_boot(server: SandboxServer) -> Boot:
    """The server's `@@BOOT ok|failed <ms> <version> <dir>` line; raises BackendUnavailable."""
    fields = server.ready_line.decode("utf-8", errors="replace").strip().split(" ", 3)
    log = boot_log(server)
    if len(fields) != 4 or fields[0] != "ok" or BOOT_ERROR.search(log):
        server.retire()
        raise BackendUnavailable(boot_failure(log))
    return Boot(ms=int(fields[1]), hol_version=fields[2], work_dir=fields[3])


def boot_failure(log: str) -> str:
    """Why HOL Light did not load, in a sentence (it prints errors and exits 0 when it fails)."""
    errors = [match[0] for match in BOOT_ERROR.finditer(log)]
    first = errors[0] if errors else (log.strip().splitlines() or ["(no output)"])[-1]
    message = f"HOL Light did not load: {first[:300]}"
    if "nums" in log or any("Num" in error for error in errors):
        message += " (HOL Light needs the OCaml num library: Debian package libnum-ocaml-dev)"
    return message


def boot_log(server: SandboxServer) -> str:
    return _read_log(server.sandbox) if server.sandbox is not None else ""


def _read_log(sandbox: Sandbox) -> str:
    try:
        return sandbox.read_file(BOOT_LOG).decode("utf-8", errors="replace")
    except (OSError, BackendUnavailable):
        return ""


def refused(request: ResolvedRequest) -> Outcome | None:
    """A FAIL for a target the server could not even be asked about, before anything boots.

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


@dataclass(frozen=True)
class Framed:
    """One request as the server reads it, and what its reply is read with."""

    nonce: str
    data: bytes
    timeout_s: float


def frame(request: ResolvedRequest) -> Framed:
    nonce = secrets.token_hex(16)
    placeholders = list(request.options_as(HolLightOptions).placeholder)
    declared = list(request.options_as(HolLightOptions).preload)
    preload = source.effective_preload(declared, request.content)
    data = protocol.encode_request(
        nonce, request.timeout_s, placeholders, preload, request.content, request.target
    )
    return Framed(nonce, data, reply_timeout(request, preload))


def judge_reply(
    server: SandboxServer, boot: Boot, request: ResolvedRequest, raw: bytes, framed: Framed
) -> Outcome:
    try:
        reply = protocol.parse_reply(raw, framed.nonce)
        outcome = protocol.outcome_from_reply(reply, request, boot.work_dir)
    except protocol.MalformedReply as exc:
        server.retire()
        raise BackendUnavailable(f"the HOL Light worker sent a bad reply: {exc}") from None
    outcome.worker = {"parent": reply.parent, "hol_version": boot.hol_version}
    return outcome


def check_on(server: SandboxServer, request: ResolvedRequest) -> Outcome:
    """Check one file on a started server: send the framed request, read and judge the reply."""
    boot = read_boot(server)
    framed = frame(request)
    raw = server.exchange(framed.data, protocol.done_marker(framed.nonce), framed.timeout_s)
    return judge_reply(server, boot, request, raw, framed)


def check_many_on(server: SandboxServer, requests: list[ResolvedRequest]) -> list[Outcome | None]:
    """Several files in one go: every request frame is sent at once (the server reads them in
    turn, each checked in its own fork), then the replies are read in order. A server that dies
    part way leaves the rest undecided (None), for the core to check again in smaller batches."""
    boot = read_boot(server)
    framed = [frame(request) for request in requests]
    for one in framed:
        server.send(one.data)
    outcomes: list[Outcome | None] = [None] * len(requests)
    for index, (request, one) in enumerate(zip(requests, framed, strict=True)):
        try:
            raw = server.read_until(protocol.done_marker(one.nonce), one.timeout_s)
        except BackendUnavailable:
            break
        server.count_checks()
        outcomes[index] = judge_reply(server, boot, request, raw, one)
    return outcomes
