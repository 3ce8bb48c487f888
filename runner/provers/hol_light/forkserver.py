"""The warm worker: one sandbox, HOL Light loaded once, each check in a forked child (server.ml)."""

from __future__ import annotations

import contextlib
import re
import secrets
import time
from dataclasses import dataclass
from importlib.resources import files

from runner.backends.base import Backend, BackendUnavailable, Channel, Limits, Sandbox
from runner.models import CheckRequest, Diagnostic, JsonValue, Outcome, Verdict
from runner.provers.hol_light import protocol, source

SERVER_FILE = "server.ml"
BOOT_LOG = "boot.log"
BOOT_MARKER = b"\n@@BOOT "
# Loading hol.ml takes about 3 minutes on a quiet machine; a busy one needs more.
BOOT_TIMEOUT_S = 1200
# Beyond the check's own timeout: the reply's way back, and loading a declared library set.
REPLY_SLACK_S = 30
PRELOAD_LIMIT_S = 900
BOOT_ERROR = re.compile(r"^(Error|Exception:).*$", re.MULTILINE)


def server_source() -> bytes:
    return files(__package__).joinpath(SERVER_FILE).read_bytes()


def server_argv(hol_dir: str) -> list[str]:
    return [f"{hol_dir}/ocaml", SERVER_FILE]


def server_env(hol_dir: str) -> dict[str, str]:
    return {"HOLLIGHT_DIR": hol_dir}


def reply_timeout(request: CheckRequest, preload: list[str]) -> float:
    timeout = float(request.timeout or 60)
    if preload:  # the sub-server may have to load first, and may fall back to the plain parent
        return timeout + REPLY_SLACK_S + PRELOAD_LIMIT_S + timeout + 60
    return timeout + REPLY_SLACK_S


@dataclass(frozen=True)
class Boot:
    ms: int
    hol_version: str
    work_dir: str


def read_boot(line: bytes, sandbox: Sandbox) -> Boot:
    """The server's `@@BOOT ok|failed <ms> <version> <dir>` line; raises BackendUnavailable."""
    fields = line.decode("utf-8", errors="replace").strip().split(" ", 3)
    log = boot_log(sandbox)
    if len(fields) != 4 or fields[0] != "ok" or BOOT_ERROR.search(log):
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


def boot_log(sandbox: Sandbox) -> str:
    try:
        return sandbox.read_file(BOOT_LOG).decode("utf-8", errors="replace")
    except OSError:
        return ""


def infra_error(message: str) -> Outcome:
    return Outcome(verdict=Verdict.INFRA_ERROR, diagnostics=[Diagnostic(message=message)])


def bad_option(exc: source.BadOption) -> Outcome:
    return Outcome(
        verdict=Verdict.FAIL, diagnostics=[Diagnostic(message=f"bad request option: {exc}")]
    )


def refused(request: CheckRequest) -> Outcome | None:
    """A FAIL for a file that uses an OCaml escape hatch (source.FORBIDDEN), before it runs."""
    uses = source.forbidden_uses(request.content)
    if not uses:
        return None
    line, column, word = uses[0]
    lines = request.content.splitlines()
    message = (
        f"`{word}` is not allowed in a checked file: it can forge theorems or escape the check"
    )
    context = " ".join(lines[line - 1].split()) if line <= len(lines) else None
    diagnostic = Diagnostic(message=message, line=line, column=column, context=context)
    return Outcome(verdict=Verdict.FAIL, diagnostics=[diagnostic])


def frame(request: CheckRequest) -> Outcome | tuple[str, bytes, list[str]]:
    """A fresh nonce, the request's bytes for the server and the preload set it may be served
    from; or the FAIL outcome for a file refused before it runs or a bad option."""
    if (refusal := refused(request)) is not None:
        return refusal
    nonce = secrets.token_hex(16)
    try:
        placeholders = source.placeholders(request)
        preload = source.effective_preload(source.preload(request), request.content)
    except source.BadOption as exc:
        return bad_option(exc)
    data = protocol.encode_request(nonce, request.timeout or 60, placeholders, preload, request.content)
    return nonce, data, preload


class ForkServer:
    """A HOL Light forkserver in one long-lived sandbox. Built by `open_worker`."""

    kind = "forkserver"

    def __init__(self, backend: Backend, limits: Limits, image: str, hol_dir: str):
        self._stack = contextlib.ExitStack()
        self.checks = 0
        self.worker_id = secrets.token_hex(4)  # tells workers apart in provenance
        try:
            sandbox = self._stack.enter_context(backend.sandbox(image, limits))
            sandbox.write_file(SERVER_FILE, server_source())
            self._channel: Channel = sandbox.spawn(server_argv(hol_dir), env=server_env(hol_dir))
            self._stack.callback(self._channel.close)
            self.boot = self._wait_for_boot(sandbox)
            self.backend = backend.info.name
        except BaseException:
            self._stack.close()
            raise

    def _wait_for_boot(self, sandbox: Sandbox) -> Boot:
        try:
            self._channel.read_until(BOOT_MARKER, BOOT_TIMEOUT_S)
            line = self._channel.read_until(b"\n", 10)
        except TimeoutError:
            raise BackendUnavailable(
                f"HOL Light did not finish loading within {BOOT_TIMEOUT_S} s"
            ) from None
        except EOFError:
            raise BackendUnavailable(boot_failure(boot_log(sandbox))) from None
        return read_boot(line, sandbox)

    def check(self, request: CheckRequest) -> Outcome:
        framed = frame(request)
        if isinstance(framed, Outcome):
            return framed
        nonce, data, preload = framed
        clock = time.monotonic()
        try:
            self._channel.send(data)
            raw = self._channel.read_until(
                protocol.done_marker(nonce), reply_timeout(request, preload)
            )
            reply = protocol.parse_reply(raw, nonce)
            outcome = protocol.outcome_from_reply(reply, request, self.boot.work_dir)
        except (EOFError, OSError):
            return infra_error("the HOL Light forkserver exited during the check")
        except TimeoutError:
            return infra_error("the HOL Light forkserver stopped answering")
        except protocol.MalformedReply as exc:
            return infra_error(f"the HOL Light forkserver sent a bad reply: {exc}")
        self.checks += 1
        outcome.worker = {
            "check_ms": int((time.monotonic() - clock) * 1000),
            "parent": reply.parent,
        }
        return outcome

    def info(self) -> dict[str, JsonValue]:
        return {
            "kind": self.kind,
            "worker_id": self.worker_id,
            "backend": self.backend,
            "boot_ms": self.boot.ms,
            "hol_version": self.boot.hol_version,
            "checks_served": self.checks,
        }

    def close(self) -> None:
        self._stack.close()


def check_cold(request: CheckRequest, sandbox: Sandbox, hol_dir: str) -> Outcome:
    """The same server for one request on stdin: HOL Light boots for this one file."""
    framed = frame(request)
    if isinstance(framed, Outcome):
        return framed
    nonce, data, preload = framed
    sandbox.write_file(SERVER_FILE, server_source())
    done = sandbox.run(
        server_argv(hol_dir),
        timeout_s=BOOT_TIMEOUT_S + reply_timeout(request, preload),
        env=server_env(hol_dir),
        stdin=data,
    )
    at = done.stdout.find(BOOT_MARKER)
    if at < 0:
        if done.timed_out:
            return infra_error(f"HOL Light did not finish loading within {BOOT_TIMEOUT_S} s")
        return infra_error(boot_failure(boot_log(sandbox)))
    line, _, answer = done.stdout[at + len(BOOT_MARKER) :].partition(b"\n")
    try:
        boot = read_boot(line, sandbox)
        if protocol.done_marker(nonce) not in answer:
            raise protocol.MalformedReply(f"HOL Light exited {done.exit_code} without answering")
        outcome = protocol.outcome_from_reply(
            protocol.parse_reply(answer, nonce), request, boot.work_dir
        )
    except BackendUnavailable as exc:
        return infra_error(str(exc))
    except protocol.MalformedReply as exc:
        return infra_error(f"the cold HOL Light check failed: {exc}")
    outcome.worker = {"kind": "cold", "boot_ms": boot.ms, "hol_version": boot.hol_version}
    return outcome
