"""Batches with adaptive bisection: many requests in one worker call where the prover allows it.

Consecutive requests for an adapter with `check_batch`, in the same image and limits, form a
unit of up to `settings.batch`. A unit's requests whose result is cached are answered from the
cache; the rest go to the adapter in one call. Any request the batch could not decide (the
worker died part way, an infra error) is checked again in halves, and so on down to one request
checked on its own, with the usual retries. Verdicts and result digests are the same as checking
one at a time; `provenance.extra["batch"]` says the batch size and how many splits it took.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, TypeVar

from runner.backends.base import BackendUnavailable
from runner.environment import Environment
from runner.errors import InfraFailure
from runner.models import CheckResult, JsonValue, Outcome, Verdict
from runner.pool import CheckRun
from runner.provenance import now
from runner.resolve import ResolvedRequest

if TYPE_CHECKING:
    from runner.checker import Checker

K = TypeVar("K")
Unit = list[tuple[K, ResolvedRequest]]


def _group(request: ResolvedRequest) -> tuple[str, str, object] | None:
    if request.adapter.check_batch is None:
        return None
    return (request.adapter.name, request.image, replace(request.limits, timeout_s=0))


def units(work: Iterable[tuple[K, ResolvedRequest]], size: int) -> Iterator[Unit[K]]:
    """Consecutive requests that can share a worker call, up to `size` of them, as one unit."""
    unit: Unit[K] = []
    for item in work:
        group = _group(item[1])
        if unit and (group is None or group != _group(unit[0][1]) or len(unit) >= size):
            yield unit
            unit = []
        unit.append(item)
        if group is None or size == 1:
            yield unit
            unit = []
    if unit:
        yield unit


def check_unit(checker: Checker, unit: Unit[K]) -> list[tuple[K, CheckResult]]:
    if len(unit) == 1:
        key, request = unit[0]
        return [(key, checker.check_one(request))]
    results: dict[int, CheckResult] = {}
    waiting: list[tuple[int, Environment]] = []
    for index, (_, request) in enumerate(unit):
        try:
            environment, hit = checker.cached(request)
        except BackendUnavailable:
            results[index] = checker.check_one(request)  # its own retries say what is wrong
            continue
        if hit is not None:
            results[index] = hit
        else:
            waiting.append((index, environment))
    _bisect(checker, [request for _, request in unit], waiting, results, splits=0)
    return [(key, results[index]) for index, (key, _) in enumerate(unit)]


def _bisect(
    checker: Checker,
    requests: list[ResolvedRequest],
    waiting: list[tuple[int, Environment]],
    results: dict[int, CheckResult],
    splits: int,
) -> None:
    if not waiting:
        return
    if len(waiting) == 1 and splits > 0:
        index, _ = waiting[0]
        results[index] = _annotated(checker.check_one(requests[index]), 1, splits)
        return
    batch = [requests[index] for index, _ in waiting]
    started, clock = now(), time.monotonic()
    outcomes, kind, info = _attempt(checker, batch)
    undecided = []
    for (index, environment), outcome in zip(waiting, outcomes, strict=True):
        if outcome is None or outcome.verdict is Verdict.INFRA_ERROR:
            undecided.append((index, environment))
            continue
        worker = {**info, **outcome.worker, "batch": {"size": len(batch), "splits": splits}}
        result = checker.result(
            requests[index], environment, outcome, started, clock, 1, kind, worker
        )
        results[index] = checker.finish(requests[index], result, outcome, cold=False)
    if len(undecided) == 1:
        index, _ = undecided[0]
        results[index] = _annotated(checker.check_one(requests[index]), 1, splits + 1)
    elif undecided:
        half = len(undecided) // 2
        _bisect(checker, requests, undecided[:half], results, splits + 1)
        _bisect(checker, requests, undecided[half:], results, splits + 1)


def _attempt(
    checker: Checker, batch: list[ResolvedRequest]
) -> tuple[list[Outcome | None], str, dict[str, JsonValue]]:
    adapter = batch[0].adapter
    assert adapter.check_batch is not None
    run = CheckRun(batch[0], checker.backend_for, checker.pool, cold=False)
    healthy = False
    outcomes: list[Outcome | None] = [None] * len(batch)
    kind: str = "none"
    info: dict[str, JsonValue] = {}
    try:
        try:
            outcomes = adapter.check_batch(batch, run)
        except InfraFailure:
            raise
        except Exception:  # noqa: BLE001 - a failed worker (or an adapter bug): bisect
            pass
        healthy = all(o is not None and o.verdict is not Verdict.INFRA_ERROR for o in outcomes)
        kind, info = run.worker_kind(), run.worker_info()
    finally:
        run.finish(healthy=healthy)
    return outcomes, kind, info


def _annotated(result: CheckResult, size: int, splits: int) -> CheckResult:
    extra = {**result.provenance.extra, "batch": {"size": size, "splits": splits}}
    return result.model_copy(
        update={"provenance": result.provenance.model_copy(update={"extra": extra})}
    )
