"""Batches: which consecutive requests may share one worker call.

This module only groups; the Checker checks a unit and bisects what a batch cannot decide.
Consecutive requests for an adapter with `check_batch` may form a unit.
They must share image and limits, up to `settings.batch` of them.
The cache answers a unit's cached requests; the rest go to the adapter in one call.
A request the batch cannot decide is checked again in halves, down to one request alone.
That happens when the worker dies part way, or on an infra error.
A request alone gets the usual retries.
Verdicts and result digests equal those of checking one at a time.
`provenance.extra["batch"]` records the batch size and how many splits it took.
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
    """Group consecutive requests that can share a worker call into units of up to `size`."""
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
