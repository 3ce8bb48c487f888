"""The engine worker: a server in the sandbox imports the engine once and forks a child per job.

newclid takes seconds to import and often less to check a problem, so a batch pays the import
once per worker instead of once per problem. Each job still runs in a fresh child process, in a
fresh empty directory, with the seeds set again (sandbox/sandbox_server.py). A cold check is the
same server started for that one problem.
"""

from __future__ import annotations

import json
import secrets

from runner.backends.base import Completed
from runner.core.errors import BackendUnavailable
from runner.provers.alphageometry import engines
from runner.provers.alphageometry.engines import Policy, Run
from runner.provers.alphageometry.problems import Problem
from runner.provers.common.server import SandboxServer, ServerSpec

READY = b"PROOFLOCK-AG-READY"
DONE = b"PROOFLOCK-AG-DONE "
STARTUP_S = 180  # importing newclid on a loaded machine
# Beyond a job's own limit: the server kills the child at the limit, then reports.
REPLY_MARGIN_S = 30


def server_spec(engine: str) -> ServerSpec:
    return ServerSpec(
        name=f"{engine} worker",
        argv=["python3", "-B", engines.SERVER, engine],
        ready=READY,
        boot_timeout_s=STARTUP_S,
        files=engines.sandbox_files(engine),
        env=engines.ENV,
        key=engine,
        boot_note="importing the engine takes a few seconds",
    )


def run_on(server: SandboxServer, problem: Problem, policy: Policy, timeout_s: float) -> Run:
    """One job on a started worker: its report, and how the child process ended."""
    job_id = secrets.token_hex(8)
    job = {**engines.job(problem, policy, timeout_s), "id": job_id}
    marker = DONE + job_id.encode() + b" "
    output = server.exchange(json.dumps(job).encode() + b"\n", marker, timeout_s + REPLY_MARGIN_S)
    try:
        facts = json.loads(server.read_until(b"\n", REPLY_MARGIN_S))
    except json.JSONDecodeError as exc:
        server.retire()
        raise BackendUnavailable(f"the {server.spec.name} sent a bad reply: {exc}") from None
    body = output[: -len(marker)]
    done = Completed(
        argv=[engines.SERVER],
        exit_code=None if facts["timed_out"] else facts["exit_code"],
        stdout=body,
        stderr=body,
        timed_out=facts["timed_out"],
        wall_ms=facts["wall_ms"],
        cpu_ms=facts["cpu_ms"],
    )
    return Run(
        report=engines.report_in(body),
        completed=done,
        wall_ms=done.wall_ms,
        stderr_tail=engines.tail(body),
    )
