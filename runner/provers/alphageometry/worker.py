"""The engine worker: a server in the sandbox imports the engine once and forks a child per job.

newclid takes seconds to import and often less to check a problem. So a batch pays the import once
per worker, not once per problem. Each job still runs in a fresh child process, in a fresh empty
directory, with the seeds set again. The server is sandbox/sandbox_server.py, a JSON-lines worker
(runner/provers/common/jsonlines.py). A cold check is the same server started for one problem.
"""

from __future__ import annotations

from runner.backends.base import Completed
from runner.provers.alphageometry import engines
from runner.provers.alphageometry.engines import Policy, Run
from runner.provers.alphageometry.source import Problem
from runner.provers.common import jsonlines
from runner.provers.common.server import SandboxServer, ServerSpec

STARTUP_S = 180  # importing newclid on a loaded machine
# Beyond a job's own limit: the server kills the child at the limit, then reports.
REPLY_MARGIN_S = 30


def server_spec(engine: str) -> ServerSpec:
    return jsonlines.server_spec(
        name=f"{engine} worker",
        package=__package__,
        script=engines.SERVER,
        args=[engine],
        boot_timeout_s=STARTUP_S,
        files=engines.sandbox_files(engine),
        env=engines.ENV,
        key=engine,
        boot_note="importing the engine takes a few seconds",
    )


def run_on(server: SandboxServer, problem: Problem, policy: Policy, timeout_s: float) -> Run:
    """One job on a started worker: its report, and how the child process ended."""
    facts = jsonlines.call(
        server, engines.job(problem, policy, timeout_s), timeout_s + REPLY_MARGIN_S
    )
    body = str(facts.get("output") or "").encode()
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
