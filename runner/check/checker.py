"""The check API: resolve → environment → cache → attempts → result.

Resolution, environment keys and warm servers live in their own modules.
This one ties them together, retries infra errors and writes provenance.
Nothing here names a prover.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sized
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, Self, TypeVar

from runner import provers
from runner.backends import BackendChoice
from runner.backends.base import Backend, BackendInfo
from runner.check import affinity, batching
from runner.check.advisories import flagged
from runner.check.batching import Unit
from runner.check.cache import ResultCache
from runner.check.environment import Environment, Environments
from runner.check.pool import KIT_GRACE_S, CheckSandboxes, ServerPool
from runner.check.resolve import Refusal, Refused, resolve, result_of
from runner.check.schedule import Timings
from runner.core import deadline
from runner.core.errors import BackendUnavailable, InfraFailure
from runner.core.messages import Notify
from runner.core.models import (
    CheckRequest,
    CheckResult,
    Diagnostic,
    JsonValue,
    Outcome,
    Provenance,
    Verdict,
)
from runner.core.provenance import base_tools, host, now
from runner.core.settings import Settings
from runner.provers.base import ResolvedRequest
from runner.provers.common.server import ServerTimeout
from runner.provers.common.verdicts import infra_error

K = TypeVar("K")
DEADLINE_SLACK_S = 0.5  # a read cut by the deadline wakes up about then
WARM_KINDS = {"warm", "server"}  # workers whose results a canary re-checks


@dataclass(frozen=True)
class Disagreement:
    artifact: str
    warm_verdict: str
    cold_verdict: str
    warm_digest: str
    cold_digest: str


def canary_selects(request_digest: str, percent: float) -> bool:
    """Whether the canary re-checks a request; by digest, so the choice is stable."""
    return percent > 0 and int(request_digest[:8], 16) % 10_000 < percent * 100


class CheckService(Protocol):
    """What a command checks with: a local Checker, or the daemon's (runner.runs.serve)."""

    settings: Settings
    notify: Notify
    timings: Timings
    canary_disagreements: list[Disagreement]

    def resolve(self, request: CheckRequest) -> ResolvedRequest: ...

    def prepare(self, request: CheckRequest) -> ResolvedRequest | Refusal: ...

    def environment(self, request: CheckRequest | ResolvedRequest) -> Environment: ...

    def check_one(
        self,
        request: CheckRequest | ResolvedRequest,
        *,
        cold: bool = False,
        keep_outputs: Path | None = None,
    ) -> CheckResult: ...

    def map(
        self, requests: Iterable[CheckRequest | ResolvedRequest | Refusal]
    ) -> Iterator[CheckResult]: ...

    def map_unordered(
        self, work: Iterable[tuple[K, CheckRequest | ResolvedRequest]]
    ) -> Iterator[tuple[K, CheckResult]]: ...

    def close(self) -> None: ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: object) -> None: ...


class Preparing:
    """Resolves requests and probes their environments on this machine.

    A Checker and the daemon's client (runner.runs.serve) both do this before a check.
    """

    settings: Settings
    environments: Environments

    def resolve(self, request: CheckRequest) -> ResolvedRequest:
        """The resolved request; raises BadRequest or Refused."""
        return resolve(request, self.settings)

    def prepare(self, request: CheckRequest) -> ResolvedRequest | Refusal:
        """The resolved request, or a refused artifact's record; bad input still raises."""
        try:
            return self.resolve(request)
        except Refused as refused:
            return refused.refusal

    def environment(self, request: CheckRequest | ResolvedRequest) -> Environment:
        return self.environments.of(self._resolved(request))

    def _prepared(
        self, request: CheckRequest | ResolvedRequest | Refusal
    ) -> ResolvedRequest | Refusal:
        return request if isinstance(request, ResolvedRequest | Refusal) else self.prepare(request)

    def _resolved(self, request: CheckRequest | ResolvedRequest) -> ResolvedRequest:
        return request if isinstance(request, ResolvedRequest) else self.resolve(request)


class Checker(Preparing):
    """Checks requests on one backend; thread-safe.

    `map` runs `settings.workers` checks at once.
    `keep_outputs` is a directory for output files an adapter returns, such as renders.
    Each is stored under its sha256, and the record names it by digest.
    So a report or a reviewer can see them.
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        backend: Backend | None = None,
        use_cache: bool | None = None,
        notify: Notify | None = None,
        keep_outputs: Path | None = None,
    ):
        # The library's entry point: it may read the environment; nothing below it does.
        self.settings = settings or Settings()
        self._lock = threading.Lock()
        use_cache = self.settings.cache if use_cache is None else use_cache
        self.cache = ResultCache(self.settings.cache_dir) if use_cache else None
        self.notify = notify or (lambda _message: None)
        self._warn = notify  # None: backends print what matters (an unsandboxed run) to stderr
        self.keep_outputs = keep_outputs
        self.timings = Timings(self.settings.cache_dir)
        self.canary_disagreements: list[Disagreement] = []
        # `backend`: tests and embedders may hand one in
        self.backends = Backends(self.settings, self._warn, self.notify, fixed=backend)
        self.environments = Environments(self.backend_for)
        self.pool = ServerPool(self.backend_for, self.notify, max_idle=self.settings.workers + 1)
        self._started_ahead = False

    def backend_for(self, image: str) -> Backend:
        return self.backends.for_image(image)

    # -- checking ----------------------------------------------------------------------------

    def check_one(
        self,
        request: CheckRequest | ResolvedRequest,
        *,
        cold: bool = False,
        keep_outputs: Path | None = None,
    ) -> CheckResult:
        """Check one request.

        It never raises for artifact trouble or a transient machine failure.
        Transient infra errors are retried `settings.retries` times, with a short backoff.
        A worker that died or a daemon hiccup is transient.
        A permanent one raises `InfraFailure`, such as no lock or an image not built.
        So a command stops at once, not failing every artifact the same way.
        `cold` uses no warm state, only fresh servers, as a canary re-check does.
        A refused artifact (too large, not text) gives its `refused` record.
        Bad input raises BadRequest.
        `keep_outputs` is this request's directory for output files, if not the checker's.
        """
        resolved = self._prepared(request)
        if isinstance(resolved, Refusal):
            return resolved.result
        started, clock = now(), time.monotonic()
        attempts, worker_kind = 0, "none"
        environment = Environment({"prover": resolved.adapter.name}, "")
        worker_info: dict[str, JsonValue] = {}
        while True:
            attempts += 1
            try:
                environment = self.environments.of(resolved)
            except BackendUnavailable as exc:
                environment = Environment(
                    {"prover": resolved.adapter.name, "unavailable": str(exc)}, ""
                )
                outcome = infra_error(str(exc))
            else:
                if attempts == 1 and self.cache is not None and not cold:
                    hit = self.cache.get(environment.key, resolved.digest, resolved.adapter.rules)
                    if hit is not None:
                        return _from_cache(hit, resolved)
                outcome, worker_kind, worker_info = self._attempt(resolved, cold)
            if outcome.verdict is not Verdict.INFRA_ERROR or attempts > self.settings.retries:
                break
            time.sleep(min(0.5 * 2**attempts, 5.0))
        result = self.result(
            resolved, environment, outcome, started, clock, attempts, worker_kind, worker_info
        )
        return self.finish(resolved, result, outcome, cold=cold, keep_outputs=keep_outputs)

    def finish(
        self,
        request: ResolvedRequest,
        result: CheckResult,
        outcome: Outcome,
        *,
        cold: bool,
        keep_outputs: Path | None = None,
    ) -> CheckResult:
        """Pass a fresh result through the canary, the cache, timings and kept files."""
        warm = result.provenance.worker in WARM_KINDS
        if warm and not cold and canary_selects(request.digest, self.settings.canary):
            result = self._canary(request, result)
        if self.cache is not None and not cold:
            self.cache.put(result, request.adapter.rules)
        self.timings.add(request.adapter.name, outcome.cpu_ms, len(request.content))
        self._keep(outcome, keep_outputs or self.keep_outputs)
        return result

    def cached(self, request: ResolvedRequest) -> tuple[Environment, CheckResult | None]:
        """The request's environment and its cached result, if any.

        Raises BackendUnavailable.
        """
        environment = self.environments.of(request)
        hit = (
            self.cache.get(environment.key, request.digest, request.adapter.rules)
            if self.cache is not None
            else None
        )
        return environment, _from_cache(hit, request) if hit is not None else None

    def _install_dir(self, request: ResolvedRequest) -> Path:
        return self.settings.cache_dir / "installs" / self.environments.install_key(request)[:24]

    def _canary(self, request: ResolvedRequest, warm: CheckResult) -> CheckResult:
        """Re-check cold, on fresh servers with no warm state.

        On disagreement the cold result is recorded.
        The disagreement is listed in `canary_disagreements`.
        """
        cold = self.check_one(request, cold=True)
        agrees = cold.result_digest == warm.result_digest
        extra = {
            "agrees": agrees,
            "warm_verdict": warm.verdict.value,
            "cold_verdict": cold.verdict.value,
        }
        chosen = warm if agrees else cold
        if not agrees:
            with self._lock:
                self.canary_disagreements.append(
                    Disagreement(
                        request.name,
                        warm.verdict.value,
                        cold.verdict.value,
                        warm.result_digest,
                        cold.result_digest,
                    )
                )
            self.notify(
                f"CANARY: {request.name}: the warm worker said {warm.verdict.value}, a fresh one "
                f"{cold.verdict.value}; recording the fresh result"
            )
        return chosen.with_extra(canary=extra)

    def _attempt(
        self, request: ResolvedRequest, cold: bool
    ) -> tuple[Outcome, str, dict[str, JsonValue]]:
        outcomes, kind, info = self._call_worker([request], cold)
        outcome = outcomes[0]
        assert outcome is not None  # a single check always gives an outcome
        return outcome, kind, {**info, **outcome.worker}

    def _call_worker(
        self, batch: list[ResolvedRequest], cold: bool
    ) -> tuple[list[Outcome | None], str, dict[str, JsonValue]]:
        """One adapter call, for one request (`check`) or many (`check_batch`).

        Returns the outcomes, the worker kind and what the worker reported.
        An outcome is None where a batch could not decide.
        """
        adapter = batch[0].adapter
        run = CheckSandboxes(
            batch[0],
            self.backend_for,
            self.pool,
            cold,
            checks=len(batch),
            install_dir=lambda: self._install_dir(batch[0]),
            cache_dir=self.settings.cache_dir,
        )
        healthy = False
        outcomes: list[Outcome | None] = [None] * len(batch)
        kind: str = "none"
        info: dict[str, JsonValue] = {}
        try:
            try:
                with deadline.bounded_by(lambda: run.deadline):
                    if len(batch) == 1:
                        outcomes = [adapter.check(batch[0], run)]
                    else:
                        assert adapter.check_batch is not None
                        outcomes = list(adapter.check_batch(batch, run))
            except deadline.OutOfTime as exc:  # the kit's reading used up the artifact's time
                outcomes = [_read_too_long(batch[0], exc)] if len(batch) == 1 else outcomes
            except ServerTimeout as exc:  # before BackendUnavailable, which it is
                if len(batch) == 1 and time.monotonic() >= run.deadline - DEADLINE_SLACK_S:
                    outcomes = [_unanswered(batch[0])]  # the artifact used up its own time
                else:
                    outcomes = [infra_error(str(exc))] * len(batch)
            except BackendUnavailable as exc:
                outcomes = [infra_error(str(exc))] * len(batch)
            except InfraFailure:
                raise
            except Exception as exc:  # an adapter or backend bug must not kill the run
                message = (
                    f"internal error in the {adapter.name} adapter: {type(exc).__name__}: {exc}"
                )
                outcomes = [infra_error(message)] * len(batch)
            if len(batch) == 1 and time.monotonic() > run.deadline:
                outcomes = [_over_budget(batch[0], outcomes[0])]
            healthy = all(o is not None and o.verdict is not Verdict.INFRA_ERROR for o in outcomes)
            kind, info = run.worker_kind(), run.worker_info()  # read before the servers go back
        finally:
            run.finish(healthy=healthy)
        return outcomes, kind, info

    # -- batches (runner.check.batching groups them) ---------------------------------------------

    def check_unit(self, unit: Unit[K]) -> list[tuple[K, CheckResult]]:
        """Check a unit of requests that may share a worker call.

        The cache answers what it holds; the rest go in one call.
        What that call cannot decide is checked again in halves, down to one request.
        Verdicts equal those of one-at-a-time checks.
        """
        if len(unit) == 1:
            key, request = unit[0]
            return [(key, self.check_one(request))]
        results: dict[int, CheckResult] = {}
        waiting: list[tuple[int, Environment]] = []
        for index, (_, request) in enumerate(unit):
            try:
                environment, hit = self.cached(request)
            except BackendUnavailable:
                results[index] = self.check_one(request)  # its own retries say what is wrong
                continue
            if hit is not None:
                results[index] = hit
            else:
                waiting.append((index, environment))
        self._bisect([request for _, request in unit], waiting, results, splits=0)
        return [(key, results[index]) for index, (key, _) in enumerate(unit)]

    def _bisect(
        self,
        requests: list[ResolvedRequest],
        waiting: list[tuple[int, Environment]],
        results: dict[int, CheckResult],
        splits: int,
    ) -> None:
        if not waiting:
            return
        if len(waiting) == 1 and splits > 0:
            index, _ = waiting[0]
            results[index] = _batched(self.check_one(requests[index]), 1, splits)
            return
        batch = [requests[index] for index, _ in waiting]
        started, clock = now(), time.monotonic()
        outcomes, kind, info = self._call_worker(batch, cold=False)
        undecided = []
        for (index, environment), outcome in zip(waiting, outcomes, strict=True):
            if outcome is None or outcome.verdict is Verdict.INFRA_ERROR:
                undecided.append((index, environment))
                continue
            worker = {**info, **outcome.worker, "batch": {"size": len(batch), "splits": splits}}
            result = self.result(
                requests[index], environment, outcome, started, clock, 1, kind, worker
            )
            results[index] = self.finish(requests[index], result, outcome, cold=False)
        if len(undecided) == 1:
            index, _ = undecided[0]
            results[index] = _batched(self.check_one(requests[index]), 1, splits + 1)
        elif undecided:
            half = len(undecided) // 2
            self._bisect(requests, undecided[:half], results, splits + 1)
            self._bisect(requests, undecided[half:], results, splits + 1)

    def result(
        self,
        request: ResolvedRequest,
        environment: Environment,
        outcome: Outcome,
        started: str,
        clock: float,
        attempts: int,
        worker_kind: str,
        worker_info: dict[str, JsonValue],
    ) -> CheckResult:
        info = self._backend_info(request.image)
        tools = base_tools()
        if info is not None:
            tools.update(info.tools)
        provenance = Provenance(
            host=host(),
            backend=info.name if info else "none",
            isolation=info.isolation if info else "none",
            worker=worker_kind,
            tools=tools,
            started_at=started,
            finished_at=now(),
            # A worker's boot serves many checks. It shows once, as `booted_in_check_ms`,
            # not as this check's time.
            wall_ms=max(0, int((time.monotonic() - clock) * 1000) - _booted_ms(worker_info)),
            cpu_ms=outcome.cpu_ms,
            attempts=attempts,
            extra=worker_info,
        )
        advisories = flagged(request, environment.data)
        return result_of(
            request, outcome, environment.data, environment.key, provenance, advisories
        )

    def _backend_info(self, image: str) -> BackendInfo | None:
        try:
            return self.backend_for(image).info
        except (BackendUnavailable, InfraFailure):
            return None

    def _keep(self, outcome: Outcome, directory: Path | None) -> None:
        if directory is None or not outcome.files:
            return
        directory.mkdir(parents=True, exist_ok=True)
        for sha, data in outcome.files.items():
            if hashlib.sha256(data).hexdigest() != sha:
                continue  # an adapter bug; never store bytes under a wrong name
            path = directory / sha
            if not path.exists():
                tmp = path.with_name(f".{sha}.{os.getpid()}.tmp")
                tmp.write_bytes(data)
                os.replace(tmp, path)

    def map(
        self, requests: Iterable[CheckRequest | ResolvedRequest | Refusal]
    ) -> Iterator[CheckResult]:
        """Check many requests, `settings.workers` at a time; yield results in input order.

        A refused artifact yields its `refused` record in its place; nothing runs for it.
        """
        workers = self.settings.workers
        count = len(requests) if isinstance(requests, Sized) else workers

        def check(work: Iterator[tuple[int, ResolvedRequest]]) -> Iterator[tuple[int, CheckResult]]:
            ahead = self._starting_ahead(work, min(workers, count))
            return run_units(([pair] for pair in ahead), self.check_unit, workers)

        return in_order(requests, self._prepared, check)

    def map_unordered(
        self, work: Iterable[tuple[K, CheckRequest | ResolvedRequest]]
    ) -> Iterator[tuple[K, CheckResult]]:
        """Check (key, request) pairs; yield (key, result) pairs as they finish.

        `settings.workers` checks run at once.
        Submission is bounded, so a long input is never all in flight.
        Requests an adapter can batch go to a worker `settings.batch` at a time.
        See runner.check.batching.
        """
        units = batching.units(
            self._starting_ahead(
                ((key, self._resolved(request)) for key, request in work), self.settings.workers
            ),
            self.settings.batch,
        )
        return run_units(units, self.check_unit, self.settings.workers)

    # -- servers started ahead -------------------------------------------------------------------

    def _starting_ahead(
        self, work: Iterator[tuple[K, ResolvedRequest]], servers: int
    ) -> Iterator[tuple[K, ResolvedRequest]]:
        """`work` as it comes, starting servers on its first request.

        It starts `servers` of what the first checks will take (`ProverAdapter.start_ahead`).
        They boot while the first check probes the install.
        """
        for index, (key, request) in enumerate(work):
            if index == 0:
                self.start_ahead(request, servers)
            yield key, request

    def start_ahead(self, request: ResolvedRequest, servers: int) -> None:
        """Start up to `servers` of what `request`'s checks will ask the pool for.

        This happens once per Checker, each server in its own thread.
        The checks themselves meet and report any trouble there.
        """
        if request.adapter.start_ahead is None or self._started_ahead:
            return
        self._started_ahead = True
        for _ in range(max(1, servers)):
            threading.Thread(
                target=self._start_one_ahead, args=(request,), name="prooflock-ahead", daemon=True
            ).start()

    def _start_one_ahead(self, request: ResolvedRequest) -> None:
        start = request.adapter.start_ahead
        assert start is not None
        run = CheckSandboxes(
            request,
            self.backend_for,
            self.pool,
            cold=False,
            install_dir=lambda: self._install_dir(request),
            cache_dir=self.settings.cache_dir,
            ahead=True,
        )
        started = False
        try:
            start(request, run)
            started = True
        except Exception:  # noqa: BLE001, S110 - the checks that need it meet it and report it
            pass
        finally:
            run.finish(healthy=started)

    def close(self) -> None:
        self.timings.save()
        self.pool.close()
        self.backends.close()

    def __enter__(self) -> Checker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Backends:
    """Which backend runs each image, chosen on first use.

    The images lock resolves docker's images.
    `notify` hears about `--build-missing` builds.
    `fixed` is one backend for all images.
    """

    def __init__(
        self, settings: Settings, warn: Notify | None, notify: Notify, fixed: Backend | None = None
    ):
        self._settings, self._warn, self._notify = settings, warn, notify
        self._fixed = fixed
        self._choice: BackendChoice | None = None
        self._lock = threading.Lock()

    def for_image(self, image: str) -> Backend:
        if self._fixed is not None:
            return self._fixed
        with self._lock:
            if self._choice is None:
                from runner.images.resolver import LockedImages  # noqa: PLC0415 - docker-py
                from runner.storage.s3_settings import s3_settings_for  # noqa: PLC0415

                s3 = s3_settings_for(self._settings.store, self._settings.deb_store)
                images = LockedImages(self._settings, self._notify, s3)
                self._choice = BackendChoice(
                    self._settings, self._warn, images, image_only=_image_only()
                )
            return self._choice.for_image(image)

    def close(self) -> None:
        for backend in (self._fixed, self._choice):
            if backend is not None:
                with contextlib.suppress(Exception):
                    backend.close()


def run_units(
    units: Iterator[Unit[K]],
    check_unit: Callable[[Unit[K]], list[tuple[K, CheckResult]]],
    workers: int,
) -> Iterator[tuple[K, CheckResult]]:
    """Check units `workers` at a time; yield results as they finish.

    Each thread prefers work like its last.
    """
    if workers == 1:
        for unit in units:
            yield from check_unit(unit)
        return
    yield from affinity.run_sticky(units, check_unit, workers, _unit_affinity)


def in_order(
    requests: Iterable[CheckRequest | ResolvedRequest | Refusal],
    prepared: Callable[[CheckRequest | ResolvedRequest | Refusal], ResolvedRequest | Refusal],
    check: Callable[[Iterator[tuple[int, ResolvedRequest]]], Iterator[tuple[int, CheckResult]]],
) -> Iterator[CheckResult]:
    """`check`'s results in the order of `requests`; a refusal's record takes its place."""
    finished: dict[int, CheckResult] = {}  # ahead of their turn; the lookahead bounds it

    def to_check() -> Iterator[tuple[int, ResolvedRequest]]:
        for index, request in enumerate(requests):
            ready = prepared(request)
            if isinstance(ready, Refusal):
                finished[index] = ready.result
            else:
                yield index, ready

    turn = 0
    for index, result in check(to_check()):
        finished[index] = result
        while turn in finished:
            yield finished.pop(turn)
            turn += 1
    while turn in finished:  # refusals after the last check
        yield finished.pop(turn)
        turn += 1


def _unit_affinity(unit: Unit[K]) -> tuple[str, str, str] | None:
    """Units with equal keys run best on one worker (see ProverAdapter.affinity)."""
    request = unit[0][1]
    same = request.adapter.affinity
    try:
        key = same(request) if same is not None else None
    except Exception:  # noqa: BLE001 - only a hint: the artifact is checked anyway
        key = None
    return None if key is None else (request.adapter.name, request.image, key)


def _image_only() -> frozenset[str]:
    """Images of prover versions other than the host's: never checked locally."""
    return frozenset(line for adapter in provers.registry().values() for line in adapter.lines)


def _booted_ms(worker_info: dict[str, JsonValue]) -> int:
    """Time spent on a boot, or waiting for a server another check held."""
    spent = [worker_info.get(key) for key in ("booted_in_check_ms", "waited_for_server_ms")]
    return sum(ms for ms in spent if isinstance(ms, int))


def _over_budget(request: ResolvedRequest, outcome: Outcome | None) -> Outcome | None:
    """A check that ran past its whole budget is a timeout, whatever it concluded.

    The limit covers everything done for the artifact, not only the prover's run.
    """
    if outcome is None or outcome.verdict in (Verdict.TIMEOUT, Verdict.INFRA_ERROR):
        return outcome
    limit = request.limits.timeout_s
    message = (
        f"the check went past its {limit} s limit (the limit covers everything done for the "
        f"artifact: transfer, the prover, audits and re-checks, plus {KIT_GRACE_S} s for the kit)"
    )
    return outcome.model_copy(
        update={"verdict": Verdict.TIMEOUT, "diagnostics": [Diagnostic(message=message)]}
    )


def _read_too_long(request: ResolvedRequest, exc: deadline.OutOfTime) -> Outcome:
    """A timeout: the kit's own reading of the artifact used up the budget.

    A lexer running before the prover is work done for the artifact, like any other.
    """
    limit = request.limits.timeout_s
    message = (
        f"the check's {limit} s limit (plus {KIT_GRACE_S} s for the kit) ran out while the kit "
        f"read the artifact ({exc}): the limit covers the kit's own work"
    )
    return Outcome(verdict=Verdict.TIMEOUT, diagnostics=[Diagnostic(message=message)])


def _unanswered(request: ResolvedRequest) -> Outcome:
    """A timeout: the worker stayed silent until the whole budget ran out.

    An artifact that makes its worker hang must not escape as an infra error.
    """
    limit = request.limits.timeout_s
    message = (
        f"no answer within the check's {limit} s limit (plus {KIT_GRACE_S} s for the kit): "
        "its worker was stopped and is restarted for the next check"
    )
    return Outcome(verdict=Verdict.TIMEOUT, diagnostics=[Diagnostic(message=message)])


def _batched(result: CheckResult, size: int, splits: int) -> CheckResult:
    return result.with_extra(batch={"size": size, "splits": splits})


def _from_cache(hit: CheckResult, request: ResolvedRequest) -> CheckResult:
    stamp = now()
    provenance = hit.provenance.model_copy(
        update={
            "cached": True,
            "started_at": stamp,
            "finished_at": stamp,
            "wall_ms": 0,
            "extra": {**hit.provenance.extra, "cached_from": hit.provenance.started_at},
        }
    )
    # Advisories are read again: the data may differ from when the result was cached.
    advisories = flagged(request, hit.environment)
    return hit.model_copy(
        update={"artifact": request.name, "provenance": provenance, "advisories": advisories}
    )


def check(
    requests: Iterable[CheckRequest], settings: Settings | None = None
) -> Iterator[CheckResult]:
    """Stream results for many requests, in input order."""
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
    target: dict[str, str] | None = None,
    settings: Settings | None = None,
) -> CheckResult:
    """Check one artifact: `run_itp("rocq", "Lemma x : True. exact I. Qed.")`."""
    request = CheckRequest.model_validate(
        {
            "prover": prover,
            "mode": mode,
            "name": name,
            "content": content,
            "timeout": timeout,
            "allowed_axioms": tuple(allowed_axioms),
            "options": options or {},
            "target": target,
        }
    )
    with Checker(settings) as checker:
        return checker.check_one(request)
