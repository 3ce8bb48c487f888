"""The kit side of the Isabelle worker: how sandbox/isabelle_worker.py starts, one check's exchange.

One worker per session: the session (HOL by default, or HOL-Analysis, an AFP session, ...) is
the server's pool key, started once with `session_start`; every check then runs its theories
with `use_theories` and purges them. A cold check starts the same worker for one request.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from importlib.resources import files

from runner.backends.base import Sandbox
from runner.core.errors import BackendUnavailable
from runner.core.models import JsonValue
from runner.provers.common.server import SandboxServer, ServerSpec

WORKER_FILE = "isabelle_worker.py"
LOG_FILE = "isabelle_worker.log"
READY = b"PROOFLOCK-ISABELLE-READY "
REPLY = "PROOFLOCK-ISABELLE-REPLY"
# Starting a session loads its heap; an AFP session without a prebuilt heap is built first.
BOOT_TIMEOUT_S = 1800
CANCEL_GRACE_S = 15
REPLY_SLACK_S = 60
MAX_CHECKS = 200  # theories are purged after each check, but the ML heap still grows


def server_spec(session: str) -> ServerSpec:
    script = files(__package__).joinpath("sandbox", WORKER_FILE).read_bytes()
    return ServerSpec(
        name="Isabelle server",
        argv=[
            "python3",
            "-B",
            WORKER_FILE,
            "--session",
            session,
            "--boot-timeout-s",
            str(BOOT_TIMEOUT_S),
        ],
        ready=READY,
        boot_timeout_s=BOOT_TIMEOUT_S + REPLY_SLACK_S,
        files={WORKER_FILE: script},
        key=f"session:{session}",
        boot_note=f"starting session {session}",
        max_checks=MAX_CHECKS,
        explain_failure=_worker_log,
    )


def _worker_log(sandbox: Sandbox) -> str | None:
    text = sandbox.read_file(LOG_FILE).decode("utf-8", errors="replace").strip()
    return f"the Isabelle worker did not start: {text[-800:]}" if text else None


@dataclass(frozen=True)
class Boot:
    ok: bool
    problem: str
    boot_ms: int
    isabelle: JsonValue


def read_boot(server: SandboxServer) -> Boot:
    try:
        facts = json.loads(server.ready_line)
    except ValueError:
        server.retire()
        raise BackendUnavailable("the Isabelle worker sent a bad ready line") from None
    return Boot(
        ok=bool(facts.get("ok")),
        problem=str(facts.get("problem") or ""),
        boot_ms=int(facts.get("boot_ms") or 0),
        isabelle=facts.get("isabelle"),
    )


def run_on(
    server: SandboxServer,
    theories: list[dict[str, str]],
    timeout_s: int,
    target: dict[str, str] | None,
) -> dict[str, JsonValue]:
    nonce = secrets.token_hex(8)
    request = {"nonce": nonce, "theories": theories, "timeout_s": timeout_s, "target": target}
    marker = f"{REPLY} {nonce} ".encode()
    frame = json.dumps(request, ensure_ascii=False).encode() + b"\n"
    server.exchange(frame, marker, timeout_s + CANCEL_GRACE_S + BOOT_TIMEOUT_S + REPLY_SLACK_S)
    line = server.read_until(b"\n", REPLY_SLACK_S)
    try:
        reply = json.loads(line)
    except ValueError:
        server.retire()
        raise BackendUnavailable("the Isabelle worker sent a reply that is not JSON") from None
    if not isinstance(reply, dict) or reply.get("status") == "server_error":
        server.retire()
        detail = reply.get("detail") if isinstance(reply, dict) else reply
        raise BackendUnavailable(f"the Isabelle worker failed: {detail}")
    return reply
