"""The two servers: the worker and the replayer.

The worker (server.ml) loads HOL Light once, with a proof-recording kernel.
It runs each check in a forked child.
The replayer (replay.ml) is HOL Light's unmodified kernel and nothing else.
It runs in a sandbox of its own and re-derives what a check exported.
A verdict on a file that ran to its end is what the replayer derived.

The kit side is the shared SandboxServer.
This module frames requests and says how each server starts.
It reads their boot lines and hands each reply to judging.py.
It also decides what a worker that died during a check means.
A control check on a fresh worker decides: if the control passes, the artifact broke it.
A cold check boots the same servers for that one request.
On docker both servers are kept as snapshots of their boots (`snapshot=`).
A fresh server is then restored in about a second instead of booted.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, replace
from importlib.resources import files

from runner.backends.base import Sandbox
from runner.core.errors import BackendUnavailable
from runner.core.models import CheckRequest, Diagnostic, Outcome, Verdict
from runner.provers.base import ResolvedRequest
from runner.provers.common.server import SandboxServer, ServerFailed, ServerSpec, ServerTimeout
from runner.provers.hol_light import judging, protocol, source
from runner.provers.hol_light.options import HolLightOptions

SERVER_FILE = "server.ml"
WORKER_FILES = (SERVER_FILE, "recording_fusion.ml", "export.ml")
REPLAYER_FILES = ("replay.ml", "replay_server.ml", "build_replay.sh")
LIBRARY_FILE = "library.export"
EXPORT_FILE = "proof.export"
BOOT_LOG = "boot.log"
BUILD_LOG = "build.log"
BOOT_MARKER = b"\n@@BOOT "
REPLAYER_READY = b"READY "
REPLAYER_BOOT_TIMEOUT_S = 900
# HOL Light's axioms: ETA_AX, SELECT_AX, INFINITY_AX. A library with any other is not HOL Light's.
LIBRARY_AXIOMS = 3
# A file that checks on any working worker: when a worker dies during a check, this decides whose
# fault it was.
CONTROL = "let prooflock_control = ARITH_RULE `1 + 1 = 2`;;\n"
# Loading hol.ml takes about 3 minutes on a quiet machine; a busy one needs more.
BOOT_TIMEOUT_S = 1200
# Beyond the check's own timeout: the reply's way back, and loading a declared library set.
REPLY_SLACK_S = 30
# A replay always gets this long, however little of the check's timeout the file left.
REPLAY_MIN_MS = 1000
PRELOAD_LIMIT_S = 900
BOOT_ERROR = re.compile(r"^(Error|Exception:).*$", re.MULTILINE)


def sandbox_files(names: tuple[str, ...]) -> dict[str, bytes]:
    """The named files of sandbox/, keyed by their names in the server's work dir."""
    return {name: files(__package__).joinpath("sandbox", name).read_bytes() for name in names}


def server_spec(hol_dir: str, toplevel: list[str]) -> ServerSpec:
    """The worker: `toplevel`, HOL Light's OCaml toplevel with its arguments, runs server.ml."""
    return ServerSpec(
        name="HOL Light worker",
        argv=[*toplevel, SERVER_FILE],
        ready=BOOT_MARKER,
        boot_timeout_s=BOOT_TIMEOUT_S,
        files=sandbox_files(WORKER_FILES),
        env={"HOLLIGHT_DIR": hol_dir},
        boot_note="loading HOL Light takes about 3 min",
        max_servers=1,  # minutes and GBs per boot: checks running at once share one
        explain_failure=lambda sandbox: boot_failure(_read_log(sandbox)),
        boot_cpus=2,  # HOL Light loads on while a child writes its library export (export.ml)
        snapshot=_worker_booted,
    )


def _worker_booted(sandbox: Sandbox, ready_line: bytes) -> bool:
    """A boot to keep as a snapshot: the one `read_boot` accepts."""
    fields = ready_line.decode("utf-8", errors="replace").strip().split(" ", 5)
    booted = len(fields) == 6 and fields[0] == "ok" and fields[3].isdigit()
    return booted and not BOOT_ERROR.search(_read_log(sandbox))


def _replayer_booted(sandbox: Sandbox, ready_line: bytes) -> bool:
    """A boot to keep as a snapshot: the one `read_replayer` accepts."""
    fields = ready_line.decode("utf-8", errors="replace").split()
    return (
        len(fields) == 4 and all(f.isdigit() for f in fields) and int(fields[2]) == LIBRARY_AXIOMS
    )


# The replayer each worker's library needs: one per worker, shared by digest.
# It is read before any file ran on the worker, since a check could rewrite the file.
_specs_by_worker: weakref.WeakKeyDictionary[SandboxServer, ServerSpec] = weakref.WeakKeyDictionary()
_specs_by_digest: dict[tuple[str, str], ServerSpec] = {}


def replayer_spec(hol_dir: str, boot: Boot, worker: SandboxServer) -> ServerSpec:
    """The replayer for the library this worker exported at boot."""
    if worker in _specs_by_worker:
        return _specs_by_worker[worker]
    if worker.served:  # a file ran on it already: its library file is no longer evidence
        worker.retire()
        raise BackendUnavailable("the HOL Light worker's library was not read before its checks")
    key = (hol_dir, boot.library_digest)
    if key not in _specs_by_digest:
        assert worker.sandbox is not None
        library = worker.sandbox.read_file(LIBRARY_FILE)
        if hashlib.md5(library).hexdigest() != boot.library_digest:  # noqa: S324 - OCaml's Digest
            worker.retire()
            raise BackendUnavailable("the HOL Light worker's library export is not the one it made")
        _specs_by_digest.clear()  # one library at a time: each holds the whole library's proofs
        command = f"sh build_replay.sh > {BUILD_LOG} 2>&1 && exec ./replay {LIBRARY_FILE}"
        _specs_by_digest[key] = ServerSpec(
            name="HOL Light replayer",
            argv=["sh", "-c", command],
            ready=REPLAYER_READY,
            boot_timeout_s=REPLAYER_BOOT_TIMEOUT_S,
            files={**sandbox_files(REPLAYER_FILES), LIBRARY_FILE: library},
            env={"HOLLIGHT_DIR": hol_dir},
            key=boot.library_digest,
            boot_note="building HOL Light's kernel alone and re-deriving its library",
            max_servers=1,
            explain_failure=_replayer_failure,
            snapshot=_replayer_booted,
        )
    _specs_by_worker[worker] = _specs_by_digest[key]
    return _specs_by_digest[key]


def _replayer_failure(sandbox: Sandbox) -> str:
    try:
        log = sandbox.read_file(BUILD_LOG).decode("utf-8", errors="replace").strip()
    except (OSError, BackendUnavailable):
        log = ""
    tail = " ".join(log.splitlines()[-3:])[:300]
    return f"the HOL Light replayer did not start: {tail or 'no output'}"


def read_replayer(server: SandboxServer) -> None:
    """Read the replayer's `READY <records> <theorems> <axioms> <ms>` line.

    Its library must rest on HOL Light's three axioms and no other.
    """
    fields = server.ready_line.decode("utf-8", errors="replace").split()
    if len(fields) != 4 or not all(f.isdigit() for f in fields) or int(fields[2]) != LIBRARY_AXIOMS:
        server.retire()
        raise BackendUnavailable(f"the HOL Light replayer's library is not HOL Light's: {fields}")


def reply_timeout(request: ResolvedRequest, preload: list[str]) -> float:
    timeout = float(request.timeout_s)
    if preload:  # the sub-server may have to load first, and may fall back to the plain parent
        return timeout + REPLY_SLACK_S + PRELOAD_LIMIT_S + timeout + 60
    return timeout + REPLY_SLACK_S


@dataclass(frozen=True)
class Boot:
    ms: int
    hol_version: str
    library_length: int
    library_digest: str
    work_dir: str


# Each worker's boot, read once, before any file ran on it.
# A check can write boot.log, and the first check makes the worker remove its boot files.
# So the boot is never read again.
_boots: weakref.WeakKeyDictionary[SandboxServer, Boot] = weakref.WeakKeyDictionary()


def read_boot(server: SandboxServer) -> Boot:
    """Read the worker's boot line and its boot log, once; raise BackendUnavailable.

    The line is `@@BOOT ok|failed <ms> <version> <library_length> <library_digest> <dir>`.
    """
    if server in _boots:
        return _boots[server]
    if server.served:  # a file ran on it already: its boot log is no longer evidence
        server.retire()
        raise BackendUnavailable("the HOL Light worker's boot was not read before its checks")
    fields = server.ready_line.decode("utf-8", errors="replace").strip().split(" ", 5)
    log = boot_log(server)
    if len(fields) != 6 or fields[0] != "ok" or not fields[3].isdigit() or BOOT_ERROR.search(log):
        server.retire()
        raise BackendUnavailable(boot_failure(log))
    _boots[server] = Boot(
        ms=int(fields[1]),
        hol_version=fields[2],
        library_length=int(fields[3]),
        library_digest=fields[4],
        work_dir=fields[5],
    )
    return _boots[server]


def boot_failure(log: str) -> str:
    """Why HOL Light did not load, in a sentence.

    HOL Light prints its errors and still exits 0 when loading fails.
    """
    errors = [match[0] for match in BOOT_ERROR.finditer(log)]
    if not errors:  # killed, or it stopped without a word: say where, and guess no cause
        last = (log.strip().splitlines() or ["(no output)"])[-1]
        return f"HOL Light stopped while loading, with no error; its last output: {last[-300:]}"
    message = f"HOL Light did not load: {errors[0][:300]}"
    # Every boot loads nums.cma: only an error that names it points at the missing package.
    if any("Num" in error or "nums" in error for error in errors):
        message += " (HOL Light needs the OCaml num library: Debian package libnum-ocaml-dev)"
    return message


def boot_log(server: SandboxServer) -> str:
    return _read_log(server.sandbox) if server.sandbox is not None else ""


def _read_log(sandbox: Sandbox) -> str:
    try:
        return sandbox.read_file(BOOT_LOG).decode("utf-8", errors="replace")
    except (OSError, BackendUnavailable):
        return ""


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


Replayer = Callable[[], SandboxServer]


def judge_reply(
    server: SandboxServer,
    boot: Boot,
    request: ResolvedRequest,
    raw: bytes,
    framed: Framed,
    replayer: Replayer,
    spent_s: float = 0.0,
) -> Outcome:
    """The outcome of one reply.

    `spent_s` is the check's time so far; the replay gets the rest.
    """
    try:
        reply = protocol.parse_reply(raw, framed.nonce)
    except protocol.MalformedReply as exc:
        server.retire()
        raise ServerFailed(f"the HOL Light worker sent a bad reply: {exc}") from None
    outcome = judging.stopped_outcome(reply, request, boot.work_dir)
    replay_ms: int | None = None
    if outcome is None:
        assert server.sandbox is not None
        export = server.sandbox.read_file(EXPORT_FILE)
        clock = time.monotonic()
        replayed = replay(replayer(), export, reply, request, spent_s)
        replay_ms = int((time.monotonic() - clock) * 1000)
        outcome = judging.replayed_outcome(reply, replayed, request)
    outcome.worker = {"parent": reply.parent, "hol_version": boot.hol_version}
    if replay_ms is not None:
        outcome.worker["replay_ms"] = replay_ms
        outcome.worker["export_bytes"] = len(export)
        records = replayed.get("records")
        outcome.worker["replayed_records"] = records if isinstance(records, int) else None
    if reply.swept:
        outcome.worker["swept_processes"] = reply.swept
    return outcome


def replay(
    server: SandboxServer,
    export: bytes,
    reply: protocol.Reply,
    request: ResolvedRequest,
    spent_s: float = 0.0,
) -> dict[str, object]:
    """The replayer's account of one export, a JSON object (see replay.ml).

    The replay gets what is left of the check's timeout.
    A replay that outlives it is the file's timeout.
    """
    read_replayer(server)
    target = b"" if reply.target.startswith(b"!") else reply.target
    timeout_ms = max(REPLAY_MIN_MS, int((request.timeout_s - spent_s) * 1000))
    header = f"CHECK {len(export)} {len(target)} {timeout_ms}\n".encode()
    try:
        raw = server.exchange(header + export + target, b"\n", timeout_ms / 1000 + REPLY_SLACK_S)
    except ServerTimeout:  # the check's budget ran out during the replay: its time, not ours
        server.retire()
        return {"ok": False, "timeout": True, "error": "the replay outlived the check's budget"}
    try:
        answer = json.loads(raw.decode("utf-8", errors="replace"))
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        server.retire()
        raise ServerFailed("the HOL Light replayer sent a bad reply")
    # A replay child killed by a signal: memory when the kernel killed something in the
    # replayer's sandbox meanwhile (the kit's count; the replay runs no artifact code).
    if answer.get("signal") is not None and (server.new_oom_kills() or 0) > 0:
        answer["memory"] = True
    return answer


def check_on(server: SandboxServer, request: ResolvedRequest, replayer: Replayer) -> Outcome:
    """Check one file on a started worker: send the request, read the reply, replay."""
    boot = read_boot(server)
    framed = frame(request)
    clock = time.monotonic()
    raw = server.exchange(framed.data, protocol.done_marker(framed.nonce), framed.timeout_s)
    spent_s = time.monotonic() - clock
    return judge_reply(server, boot, request, raw, framed, replayer, spent_s)


def control_request(request: ResolvedRequest) -> ResolvedRequest:
    control = CheckRequest(prover="hol-light", mode="proof", name="control.ml", content=CONTROL)
    return replace(request, request=control)


def after_failure(
    failure: ServerFailed, control: Callable[[], Outcome], again: Callable[[], Outcome]
) -> Outcome:
    """Judge a check during which a server died or hung.

    A known-good control check on fresh servers decides whose fault that was.
    If the control does not pass, the machine is at fault (infra).
    If it passes, the artifact is checked once more on those fresh servers.
    If it breaks them too, the verdict is the artifact's own.
    That is timeout when the worker stopped answering, else crash.
    """
    try:
        verdict = control().verdict
    except BackendUnavailable as exc:
        raise BackendUnavailable(f"{failure}; and a control check failed too: {exc}") from None
    if verdict != Verdict.PASS:
        raise BackendUnavailable(f"{failure}; and a control check did not pass ({verdict.value})")
    try:
        return again()
    except ServerFailed as second:
        if isinstance(second, ServerTimeout):
            message = f"the check stopped its HOL Light worker from answering ({second})"
            return Outcome(verdict=Verdict.TIMEOUT, diagnostics=[Diagnostic(message=message)])
        message = f"the check broke its HOL Light worker twice ({second}); a control check passed"
        return Outcome(verdict=Verdict.CRASH, diagnostics=[Diagnostic(message=message)])
