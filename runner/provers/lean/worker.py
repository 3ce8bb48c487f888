"""The kit side of the Lean worker: how sandbox/lean_server.py starts, and one check's exchange.

There is one server per import header. The header is the server's pool key (`Header.key`). It is
shipped as header.lean and elaborated once when the server boots. So every check with the same
imports reuses the loaded environment. A cold check boots the same server for one request. The
server is a JSON-lines worker (runner/provers/common/jsonlines.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from runner.core.models import JsonValue, Limits
from runner.provers.common import jsonlines
from runner.provers.common.server import SandboxServer, ServerSpec
from runner.provers.lean.source import Header

SERVER_FILE = "lean_server.py"
HEADER_FILE = "header.lean"
# Importing Mathlib maps gigabytes of .olean files; on a busy machine that takes minutes.
BOOT_TIMEOUT_S = 900
HEADER_TIMEOUT_S = 600  # a recycled REPL elaborates the header again inside a check
REPLY_SLACK_S = 30
# The REPL keeps every environment it made. So start a fresh one after this many checks, or once its
# resident memory passes this share of the limit.
RECYCLE_AFTER = 50
RECYCLE_RSS_SHARE = 0.6
# The server itself and the kernel's page tables need some of the limit.
SERVER_RESERVE_MB = 128
# Mathlib's .olean files are mapped, not read: they count in the address space, not in RSS.
OLEAN_MAPPING_MB = 24 * 1024


def server_spec(header: Header, limits: Limits) -> ServerSpec:
    repl_mb = max(64, limits.memory_mb - SERVER_RESERVE_MB)
    args = [
        "--header", HEADER_FILE,
        "--memory-mb", str(repl_mb),
        "--address-space-mb", str(repl_mb + OLEAN_MAPPING_MB),
        "--header-timeout-s", str(HEADER_TIMEOUT_S),
        "--recycle-after", str(RECYCLE_AFTER),
        "--recycle-rss-mb", str(int(repl_mb * RECYCLE_RSS_SHARE)),
    ]  # fmt: skip
    return jsonlines.server_spec(
        name="Lean REPL server",
        package=__package__,
        script=SERVER_FILE,
        args=args,
        boot_timeout_s=BOOT_TIMEOUT_S,
        files={HEADER_FILE: header.text().encode()},
        key=f"imports:{header.key}",
        boot_note="importing the header's modules once",
    )


@dataclass(frozen=True)
class Boot:
    header_ok: bool
    messages: list[dict[str, JsonValue]]
    boot_ms: int
    died: dict[str, str] | None  # the REPL died importing the header: {"verdict", "detail"}
    double: str | None  # the REPL announced itself as a protocol double (never the real one)


def read_boot(server: SandboxServer) -> Boot:
    facts = jsonlines.boot_facts(server)
    return Boot(
        header_ok=bool(facts.get("header_ok")),
        messages=list(facts.get("messages") or []),
        boot_ms=int(facts.get("boot_ms") or 0),
        died=facts.get("died") or None,
        double=facts.get("double") or None,
    )


def run_on(
    server: SandboxServer, body: str, timeout_s: int, target: dict[str, str] | None
) -> dict[str, JsonValue]:
    """One check on a started server: the server's reply (see sandbox/lean_server.py)."""
    request: dict[str, JsonValue] = {"body": body, "timeout_s": timeout_s, "target": target}
    return jsonlines.call(server, request, timeout_s + HEADER_TIMEOUT_S + REPLY_SLACK_S)
