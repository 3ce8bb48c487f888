"""The JSON-lines worker: a script in the sandbox answering one JSON request with one JSON reply.

This is the kit half of `sandbox/jsonlines_worker.py` (read its docstring for the frames). An
adapter:
1. ships a script in its own `sandbox/` folder that calls `jsonlines_worker.serve(boot, handle)`;
2. describes it with `server_spec(...)`. The loop module is shipped beside the script. A worker
   that does not start is explained from the tail of its worker.log.
3. reads the boot handshake with `boot_facts(server)`, then sends each check with
   `call(server, request, deadline_s)`.

The channel is the worker's own: nothing the prover or the artifact prints can reach it. Frames are
ASCII-only JSON lines, and each reply names its request. A worker that breaks the protocol is
retired, and the check is an infra error. Breaking it means a frame that is not JSON, another
request's reply, or an `error`. No reply within the deadline is `ServerTimeout`, and the server is
retired too.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any

from runner.backends.base import Sandbox
from runner.core.errors import BackendUnavailable
from runner.core.models import JsonValue
from runner.provers.common.server import SandboxServer, ServerSpec

READY = b"PROOFLOCK-WORKER-READY "
LOOP_MODULE = "jsonlines_worker.py"
LOG = "worker.log"

Frame = dict[str, Any]


def server_spec(
    *,
    name: str,
    package: str,
    script: str,
    args: Sequence[str] = (),
    boot_timeout_s: float,
    key: str,
    boot_note: str = "",
    files: Mapping[str, bytes] | None = None,
    env: Mapping[str, str] | None = None,
    max_checks: int | None = None,
) -> ServerSpec:
    """A worker running `package`'s `sandbox/<script>` with `python3 -B script *args`.

    `files`: more files for the work directory (written before the script starts).
    """
    shipped = {
        **(files or {}),
        script: resources.files(package).joinpath("sandbox", script).read_bytes(),
        LOOP_MODULE: resources.files(__package__).joinpath("sandbox", LOOP_MODULE).read_bytes(),
    }
    return ServerSpec(
        name=name,
        argv=["python3", "-B", script, *args],
        ready=READY,
        boot_timeout_s=boot_timeout_s,
        files=shipped,
        env=dict(env or {}),
        key=key,
        boot_note=boot_note,
        max_checks=max_checks,
        explain_failure=lambda sandbox: _log_tail(sandbox, name),
    )


def _log_tail(sandbox: Sandbox, name: str) -> str | None:
    """What the worker wrote to its log (it never writes to the channel but frames)."""
    text = sandbox.read_file(LOG).decode("utf-8", errors="replace").strip()
    return f"the {name} did not start: {text[-800:]}" if text else None


def boot_facts(server: SandboxServer) -> Frame:
    """Start the worker (once) and return the JSON object its boot handshake carried."""
    return _object(server, server.start(), "a bad boot handshake")


def call(server: SandboxServer, request: Mapping[str, JsonValue], deadline_s: float) -> Frame:
    """Send one request and return its reply; past `deadline_s`, `ServerTimeout`."""
    request_id = secrets.token_hex(8)
    frame = json.dumps({"id": request_id, "request": request}, ensure_ascii=True)
    line = server.exchange(frame.encode("ascii") + b"\n", b"\n", deadline_s)
    answer = _object(server, line, "a reply that is not JSON")
    if answer.get("id") != request_id:
        server.retire()
        raise BackendUnavailable(f"the {server.spec.name} answered another request")
    if "error" in answer:
        server.retire()
        raise BackendUnavailable(f"the {server.spec.name} failed: {answer['error']}")
    reply = answer.get("reply")
    if not isinstance(reply, dict):
        server.retire()
        raise BackendUnavailable(f"the {server.spec.name} sent a reply without a reply object")
    return reply


def _object(server: SandboxServer, line: bytes, what: str) -> Frame:
    try:
        value = json.loads(line)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        server.retire()
        raise BackendUnavailable(f"the {server.spec.name} sent {what}")
    return value
