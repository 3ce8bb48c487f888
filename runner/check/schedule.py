"""Longest predicted check first: with several workers, the slowest checks start earliest.

So a run does not end waiting on one long check that started last.
The prediction is the artifact's size times its prover's CPU time per byte.
That rate is learnt from earlier checks on this machine (`timings.json` in the cache directory).
With no history, size alone predicts.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from pathlib import Path
from typing import TypeVar

from runner.provers.base import ResolvedRequest

K = TypeVar("K")
TIMINGS = "timings.json"


class Timings:
    """CPU milliseconds and artifact bytes per prover, summed over the checks seen."""

    def __init__(self, cache_dir: Path):
        self.path = cache_dir / TIMINGS
        self._lock = threading.Lock()
        self.totals: dict[str, list[int]] = {}
        with contextlib.suppress(OSError, ValueError):
            loaded = json.loads(self.path.read_text())
            self.totals = {k: [int(v[0]), int(v[1])] for k, v in loaded.items()}

    def add(self, prover: str, cpu_ms: int | None, size: int) -> None:
        if cpu_ms is None:
            return
        with self._lock:
            total = self.totals.setdefault(prover, [0, 0])
            total[0] += cpu_ms
            total[1] += max(size, 1)

    def predict(self, request: ResolvedRequest) -> float:
        cpu, size = self.totals.get(request.adapter.name, (0, 0))
        per_byte = cpu / size if size else 1.0
        return len(request.content) * per_byte

    def save(self) -> None:
        with self._lock, contextlib.suppress(OSError):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f".{TIMINGS}.{os.getpid()}")
            tmp.write_text(json.dumps(self.totals, sort_keys=True))
            os.replace(tmp, self.path)


def longest_first(
    work: list[tuple[K, ResolvedRequest]], timings: Timings, workers: int
) -> list[tuple[K, ResolvedRequest]]:
    if workers == 1:
        return work  # one at a time: keep the input order, which is the order people read
    return sorted(work, key=lambda item: -timings.predict(item[1]))
