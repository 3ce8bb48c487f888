"""The check API: request → adapter → backend → result, with environment keys, cache and retries."""

from __future__ import annotations

import contextlib
import platform
import queue
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version

from runner import provers
from runner.backends import open_backend
from runner.backends.base import Backend, BackendUnavailable, Limits
from runner.cache import ResultCache
from runner.canonical import digest
from runner.errors import UserError
from runner.models import (
    CheckRequest,
    CheckResult,
    Diagnostic,
    JsonValue,
    Outcome,
    Provenance,
    Verdict,
    result_digest,
)
from runner.provers.base import ProverAdapter, Worker
from runner.settings import Settings


class BadRequest(UserError):
    """A request the kit refuses before checking (unknown prover or mode). A user error."""


def kit_version() -> str:
    try:
        return version("prooflock")
    except PackageNotFoundError:
        return "0+unknown"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def validate(request: CheckRequest) -> ProverAdapter:
    try:
        adapter = provers.get(request.prover)
    except provers.UnknownProver as exc:
        raise BadRequest(str(exc)) from None
    if request.mode is not None and request.mode not in adapter.MODES:
        raise BadRequest(
            f"prover {adapter.NAME!r} has no mode {request.mode!r} (modes: {', '.join(adapter.MODES)})"
        )
    for spec in adapter.CLI_OPTIONS:
        value = request.options.get(spec.key)
        if value is not None and spec.choices and value not in spec.choices:
            raise BadRequest(
                f"option {spec.key!r} of {adapter.NAME} must be one of {', '.join(spec.choices)}, "
                f"not {value!r}"
            )
    return adapter


class Checker:
    """Checks requests on one backend. Thread-safe; `map` runs `settings.workers` checks at once."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        backend: Backend | None = None,
        use_cache: bool | None = None,
    ):
        self.settings = settings or Settings()
        self._backend = backend
        self._backend_error: str | None = None
        use_cache = self.settings.cache if use_cache is None else use_cache
        self.cache = ResultCache(self.settings.cache_dir) if use_cache else None
        self._installs: dict[str, dict[str, JsonValue]] = {}
        self._idle_workers: dict[tuple[str, str, Limits, str], queue.SimpleQueue[Worker]] = {}
        self._lock = threading.Lock()
        self.host = socket.gethostname()

    # -- environment -------------------------------------------------------------------------

    @property
    def backend(self) -> Backend:
        with self._lock:
            if self._backend is None:
                self._backend = open_backend(self.settings)
            return self._backend

    def limits(self, request: CheckRequest) -> Limits:
        return Limits(
            timeout_s=request.timeout or self.settings.timeout,
            memory_mb=request.memory_mb or self.settings.memory_mb,
            pids=self.settings.pids,
            cpus=self.settings.cpus,
        )

    def resolve(self, request: CheckRequest) -> CheckRequest:
        """The request with defaults filled in, so its digest says exactly what was checked."""
        adapter = validate(request)
        limits = self.limits(request)
        return request.model_copy(
            update={
                "mode": request.mode or adapter.MODES[0],
                "timeout": limits.timeout_s,
                "memory_mb": limits.memory_mb,
            }
        )

    def install(self, adapter: ProverAdapter, image: str) -> dict[str, JsonValue]:
        """What identifies the prover install (image) on this backend; probed once per checker."""
        with self._lock:
            known = self._installs.get(image)
        if known is None:
            known = self.backend.environment(image, adapter.probe(image))
            with self._lock:
                self._installs[image] = known
        return known

    def environment(self, adapter: ProverAdapter, request: CheckRequest) -> dict[str, JsonValue]:
        limits = self.limits(request)
        return {
            "prover": adapter.NAME,
            "adapter_version": adapter.VERSION,
            "install": self.install(adapter, adapter.image(request)),
            "mode": request.mode,
            "limits": {"timeout_s": limits.timeout_s, "memory_mb": limits.memory_mb, "pids": limits.pids},
            "options": adapter.environment_options(request),
        }

    # -- checking ----------------------------------------------------------------------------

    def check_one(self, request: CheckRequest) -> CheckResult:
        """Check one request (resolved or not). Never raises for artifact or machine trouble.

        An infra error (backend unreachable, worker died) is retried `settings.retries` times
        with a short backoff; the environment is probed again on each attempt.
        """
        adapter = validate(request)
        request = self.resolve(request)
        request_digest = request.digest()
        started, clock = _now(), time.monotonic()
        attempts, worker_kind = 0, "none"
        environment: dict[str, JsonValue] = {"prover": adapter.NAME}
        while True:
            attempts += 1
            try:
                environment = self.environment(adapter, request)
            except BackendUnavailable as exc:
                environment = {"prover": adapter.NAME, "unavailable": str(exc)}
                outcome = _infra_error(str(exc))
            else:
                if attempts == 1 and self.cache is not None:
                    hit = self.cache.get(digest(environment), request_digest)
                    if hit is not None:
                        return self._from_cache(hit, request)
                outcome, worker_kind = self._attempt(adapter, request)
            if outcome.verdict is not Verdict.INFRA_ERROR or attempts > self.settings.retries:
                break
            time.sleep(min(0.5 * 2**attempts, 5.0))
        result = self._result(
            adapter, request, request_digest, environment, outcome, started, clock, attempts, worker_kind
        )
        if self.cache is not None:
            self.cache.put(result)
        return result

    def _attempt(self, adapter: ProverAdapter, request: CheckRequest) -> tuple[Outcome, str]:
        limits = self.limits(request)
        image = adapter.image(request)
        # Workers enforce each request's own timeout, so the timeout does not split the pool
        # (a HOL Light worker costs minutes to boot).
        pool = (adapter.NAME, image, replace(limits, timeout_s=0), adapter.worker_key(request))
        try:
            worker = self._checkout_worker(adapter, pool, request)
            if worker is None:
                with self.backend.sandbox(image, limits) as sandbox:
                    return adapter.check(request, sandbox), "cold"
            try:
                outcome = worker.check(request)
            except BaseException:
                worker.close()
                raise
            if outcome.verdict is Verdict.INFRA_ERROR:
                worker.close()  # a worker that failed us is not trusted with the next check
            else:
                self._idle_workers[pool].put(worker)
            return outcome.model_copy(update={"worker": {**worker.info(), **outcome.worker}}), worker.kind
        except BackendUnavailable as exc:
            return _infra_error(str(exc)), "none"
        except Exception as exc:  # an adapter or backend bug must not kill a whole run
            return _infra_error(f"{type(exc).__name__}: {exc}"), "none"

    def _checkout_worker(
        self, adapter: ProverAdapter, pool: tuple[str, str, Limits, str], request: CheckRequest
    ) -> Worker | None:
        with self._lock:
            idle = self._idle_workers.setdefault(pool, queue.SimpleQueue())
        try:
            return idle.get_nowait()
        except queue.Empty:
            return adapter.open_worker(self.backend, pool[2], request)

    def _result(
        self,
        adapter: ProverAdapter,
        request: CheckRequest,
        request_digest: str,
        environment: dict[str, JsonValue],
        outcome: Outcome,
        started: str,
        clock: float,
        attempts: int,
        worker_kind: str,
    ) -> CheckResult:
        info = self._backend.info if self._backend is not None else None
        tools = {"prooflock": kit_version(), "python": platform.python_version()}
        if info is not None:
            tools.update(info.tools)
        provenance = Provenance(
            host=self.host,
            backend=info.name if info else "none",
            isolation=info.isolation if info else "none",
            worker=worker_kind,
            tools=tools,
            started_at=started,
            finished_at=_now(),
            wall_ms=int((time.monotonic() - clock) * 1000),
            cpu_ms=outcome.cpu_ms,
            attempts=attempts,
            extra=outcome.worker,
        )
        return CheckResult(
            artifact=request.name,
            prover=adapter.NAME,
            mode=request.mode,
            verdict=outcome.verdict,
            diagnostics=outcome.diagnostics,
            assumptions=outcome.assumptions,
            details=outcome.details,
            env_key=digest(environment),
            environment=environment,
            request_digest=request_digest,
            result_digest=result_digest(outcome),
            provenance=provenance,
        )

    def _from_cache(self, hit: CheckResult, request: CheckRequest) -> CheckResult:
        now = _now()
        provenance = hit.provenance.model_copy(
            update={
                "cached": True,
                "started_at": now,
                "finished_at": now,
                "wall_ms": 0,
                "extra": {**hit.provenance.extra, "cached_from": hit.provenance.started_at},
            }
        )
        return hit.model_copy(update={"artifact": request.name, "provenance": provenance})

    def map(self, requests: Iterable[CheckRequest]) -> Iterator[CheckResult]:
        """Check many requests, `settings.workers` at a time, yielding results in input order."""
        workers = self.settings.workers
        if workers == 1:
            for request in requests:
                yield self.check_one(request)
            return
        with ThreadPoolExecutor(workers) as pool:
            window: queue.Queue = queue.Queue()
            for request in requests:
                window.put(pool.submit(self.check_one, request))
                while window.qsize() > 2 * workers:
                    yield window.get().result()
            while not window.empty():
                yield window.get().result()

    def close(self) -> None:
        for idle in self._idle_workers.values():
            while True:
                try:
                    worker = idle.get_nowait()
                except queue.Empty:
                    break
                with contextlib.suppress(Exception):
                    worker.close()
        if self._backend is not None:
            self._backend.close()

    def __enter__(self) -> Checker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _infra_error(message: str) -> Outcome:
    return Outcome(verdict=Verdict.INFRA_ERROR, diagnostics=[Diagnostic(message=message)])


def check(requests: Iterable[CheckRequest], settings: Settings | None = None) -> Iterator[CheckResult]:
    """Stream results for many requests (in input order)."""
    with Checker(settings) as checker:
        yield from checker.map(requests)


def run_itp(
    prover: str,
    content: str,
    *,
    name: str = "artifact",
    mode: str | None = None,
    timeout: int | None = None,
    allowed_axioms: Iterable[str] = (),
    options: dict[str, JsonValue] | None = None,
    settings: Settings | None = None,
) -> CheckResult:
    """Check one artifact: `run_itp("rocq", "Lemma x : True. exact I. Qed.")`."""
    request = CheckRequest(
        prover=prover,
        mode=mode,
        name=name,
        content=content,
        timeout=timeout,
        allowed_axioms=tuple(allowed_axioms),
        options=options or {},
    )
    with Checker(settings) as checker:
        return checker.check_one(request)
