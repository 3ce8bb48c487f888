"""The kit side of the Isabelle worker: how sandbox/isabelle_worker.py starts, one check's exchange.

There is one worker per session: HOL by default, or HOL-Analysis, an AFP session, ... The session is
the server's pool key, started once with `session_start`. Every check then runs its theories with
`use_theories` and purges them. A cold check starts the same worker for one request. The worker is a
JSON-lines worker (runner/provers/common/jsonlines.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from runner.core.models import JsonValue
from runner.provers.common import jsonlines
from runner.provers.common.server import SandboxServer, ServerSpec

WORKER_FILE = "isabelle_worker.py"
# Starting a session loads its heap; an AFP session without a prebuilt heap is built first.
BOOT_TIMEOUT_S = 1800
CANCEL_GRACE_S = 15
REPLY_SLACK_S = 60
MAX_CHECKS = 200  # theories are purged after each check, but the ML heap still grows


def server_spec(session: str) -> ServerSpec:
    return jsonlines.server_spec(
        name="Isabelle server",
        package=__package__,
        script=WORKER_FILE,
        args=["--session", session, "--boot-timeout-s", str(BOOT_TIMEOUT_S)],
        boot_timeout_s=BOOT_TIMEOUT_S + REPLY_SLACK_S,
        key=f"session:{session}",
        boot_note=f"starting session {session}",
        max_checks=MAX_CHECKS,
    )


@dataclass(frozen=True)
class Boot:
    ok: bool
    problem: str
    boot_ms: int
    isabelle: JsonValue
    double: str | None  # the server announced itself as a protocol double (never the real one)


def read_boot(server: SandboxServer) -> Boot:
    facts = jsonlines.boot_facts(server)
    identity = facts.get("isabelle")
    # The server's identity comes from its password handshake (`OK {...}`); Isabelle's has no
    # `double` field, a double's always has one.
    double = identity.get("double") if isinstance(identity, dict) else None
    return Boot(
        ok=bool(facts.get("ok")),
        problem=str(facts.get("problem") or ""),
        boot_ms=int(facts.get("boot_ms") or 0),
        isabelle=identity,
        double=str(double) if double else None,
    )


def run_on(
    server: SandboxServer,
    theories: list[dict[str, str]],
    timeout_s: int,
    target: dict[str, str] | None,
) -> dict[str, JsonValue]:
    request: dict[str, JsonValue] = {"theories": theories, "timeout_s": timeout_s, "target": target}
    return jsonlines.call(
        server, request, timeout_s + CANCEL_GRACE_S + BOOT_TIMEOUT_S + REPLY_SLACK_S
    )
