"""Batches: which consecutive requests may share one worker call (pure grouping; the Checker
checks a unit, bisecting what a batch could not decide).

Consecutive requests for an adapter with `check_batch`, in the same image and limits, form a
unit of up to `settings.batch`. A unit's requests whose result is cached are answered from the
cache; the rest go to the adapter in one call. Any request the batch could not decide (the
worker died part way, an infra error) is checked again in halves, and so on down to one request
checked on its own, with the usual retries. Verdicts and result digests are the same as checking
one at a time; `provenance.extra["batch"]` says the batch size and how many splits it took.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import TypeVar

from runner.provers.base import ResolvedRequest

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
