"""A warm worker: one sandbox whose forkserver imported the engine once, a forked child per check.

newclid takes seconds to import and often less to check a problem, so a batch pays the import
once per worker instead of once per problem. Each check still runs in a fresh child process, in
a fresh empty directory, with the seeds set again: the same report as a cold run.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import time
from collections.abc import Callable

from runner.backends.base import Backend, BackendUnavailable, Channel, Completed, Limits
from runner.models import CheckRequest, Diagnostic, JsonValue, Outcome, Verdict
from runner.provers.alphageometry import engines
from runner.provers.alphageometry.engines import Policy, Run
from runner.provers.alphageometry.problems import Problem

READY = b"PROOFLOCK-AG-READY\n"
DONE = b"PROOFLOCK-AG-DONE "
STARTUP_S = 180  # importing newclid on a loaded machine
# Beyond a job's own limit: the server kills the child at the limit, then reports.
REPLY_MARGIN_S = 30
RunEngine = Callable[[Problem, Policy, float], Run]
CheckWith = Callable[[CheckRequest, RunEngine], Outcome]


class EngineWorker:
    """Started on the first problem that needs the engine: format and validator-only outcomes
    never pay for the import."""

    kind = "forkserver"

    def __init__(self, backend: Backend, limits: Limits, engine: str, image: str, check: CheckWith):
        self.engine = engine
        self._backend, self._limits, self._image, self._check = backend, limits, image, check
        self._ids = itertools.count(1)
        self._stack = contextlib.ExitStack()
        self._channel: Channel | None = None
        self._startup_ms: int | None = None
        self._served = 0

    def check(self, request: CheckRequest) -> Outcome:
        try:
            return self._check(request, self.run)
        except BackendUnavailable as exc:
            return broken(str(exc))
        except (TimeoutError, EOFError) as exc:  # the server hung or died: not the problem's fault
            return broken(f"the {self.engine} forkserver stopped answering: {exc}")

    def _start(self) -> Channel:
        started = time.monotonic()
        try:
            sandbox = self._stack.enter_context(self._backend.sandbox(self._image, self._limits))
            engines.install(sandbox, self.engine, server=True)
            argv = ["python3", "-B", engines.SERVER, self.engine]
            channel = sandbox.spawn(argv, env=engines.ENV)
            self._stack.callback(channel.close)
            channel.read_until(READY, timeout_s=STARTUP_S)
        except (TimeoutError, EOFError) as exc:
            self.close()
            raise BackendUnavailable(f"the {self.engine} forkserver did not start: {exc}") from None
        except BaseException:
            self.close()
            raise
        self._startup_ms = int((time.monotonic() - started) * 1000)
        return channel

    def run(self, problem: Problem, policy: Policy, timeout_s: float) -> Run:
        if self._channel is None:
            self._channel = self._start()
        job_id = next(self._ids)
        job = {**engines.job(problem, policy, timeout_s), "id": job_id}
        self._channel.send(json.dumps(job).encode() + b"\n")
        marker = DONE + str(job_id).encode() + b" "
        output = self._channel.read_until(marker, timeout_s=timeout_s + REPLY_MARGIN_S)
        facts = json.loads(self._channel.read_until(b"\n", timeout_s=REPLY_MARGIN_S))
        self._served += 1
        body = output[: -len(marker)]
        report = engines.report_in(body)
        done = Completed(
            argv=[engines.SERVER, self.engine],
            exit_code=None if facts["timed_out"] else facts["exit_code"],
            stdout=body,
            stderr=body,
            timed_out=facts["timed_out"],
            out_of_memory=report is None and b"memoryerror" in body.lower(),
            wall_ms=facts["wall_ms"],
            cpu_ms=facts["cpu_ms"],
        )
        return Run(
            report=report, completed=done, wall_ms=done.wall_ms, stderr_tail=engines.tail(body)
        )

    def info(self) -> dict[str, JsonValue]:
        return {"worker": self.kind, "engine_startup_ms": self._startup_ms, "served": self._served}

    def close(self) -> None:
        self._stack.close()
        self._channel = None


def broken(message: str) -> Outcome:
    return Outcome(verdict=Verdict.INFRA_ERROR, diagnostics=[Diagnostic(message=message)])
