"""Resumable runs: a requests file checked into a checkpoint log, skipping what is already recorded."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import orjson
from pydantic import ValidationError

from runner.check.checker import Checker
from runner.check.schedule import longest_first
from runner.core.canonical import digest
from runner.core.errors import UserError, explain
from runner.core.models import CheckRequest, CheckResult, Verdict
from runner.core.provenance import kit_version
from runner.provers.base import ResolvedRequest
from runner.records.checkpoint import (
    FORMAT,
    CheckpointError,
    CheckpointLog,
    latest_results,
    recorded_runs,
)


@dataclass
class RunSummary:
    total: int
    resumed: int = 0  # requests already recorded before this invocation
    checked: int = 0
    verdicts: Counter[str] = field(default_factory=Counter)
    results: list[CheckResult] = field(default_factory=list)  # the final one per request
    repaired_bytes: int = 0

    @property
    def infra_errors(self) -> int:
        return self.verdicts.get(Verdict.INFRA_ERROR.value, 0)


def load_requests(path: Path) -> list[CheckRequest]:
    """Parse a JSON-lines requests file; any bad line is a UserError naming its line number."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"requests file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read requests file {path}: {exc}") from None
    requests = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            requests.append(CheckRequest.model_validate(orjson.loads(line)))
        except orjson.JSONDecodeError as exc:
            raise UserError(f"{path} line {number}: not valid JSON ({exc})") from None
        except ValidationError as exc:
            raise UserError(f"{path} line {number}: {explain(exc)}") from None
    if not requests:
        raise UserError(f"requests file {path} holds no requests")
    return requests


class Executor(Protocol):
    """Where a run's checks execute: this process's checker, or a cluster (runner.runs.executors)."""

    def map_unordered(
        self, work: Iterable[tuple[int, ResolvedRequest]]
    ) -> Iterator[tuple[int, CheckResult]]: ...


def run_requests(
    requests: list[CheckRequest],
    checkpoint: Path,
    checker: Checker,
    *,
    source: str,
    on_result: Callable[[CheckResult], None] | None = None,
    on_resume: Callable[[int], None] | None = None,
    executor: Executor | None = None,
    mixed_backends: bool = False,
) -> RunSummary:
    """Check `requests` into `checkpoint`, resuming from what it already holds.

    The checkpoint has one writer, this function: results are appended in the order they finish
    (each record keeps its request's index), longest predicted checks first. A log keeps the
    backend and isolation it was started with, and each image the backend it was checked on:
    resuming otherwise is refused unless `mixed_backends`. `on_resume(n)`: n already recorded.
    """
    resolved = []
    for number, request in enumerate(requests, start=1):
        try:
            resolved.append(checker.resolve(request))
        except UserError as exc:
            raise UserError(f"{source} request {number}: {exc}") from None
    run_digest = digest([r.digest for r in resolved])
    summary = RunSummary(total=len(resolved))
    with CheckpointLog(checkpoint, fsync_every=checker.settings.fsync_every) as log:
        summary.repaired_bytes = log.repaired_bytes
        headers = list(log.of_kind("header"))
        started_with = _started_with(checker)
        if not headers:
            log.append("header", {**_header(run_digest, source, len(resolved)), **started_with})
        elif headers[0]["requests"] != run_digest:
            raise CheckpointError(
                f"checkpoint {checkpoint} was made from other requests (or other limits) than "
                f"{source}; use a new checkpoint path"
            )
        elif not mixed_backends:
            _same_start(checkpoint, headers[0], started_with)
        done = {
            index: body
            for index, body in latest_results(log.of_kind("result")).items()
            if body["result"]["verdict"] != Verdict.INFRA_ERROR.value
        }
        routes = {
            resolved[index].image: body["result"]["provenance"]["backend"]
            for index, body in done.items()
        }
        summary.resumed = len(done)
        if on_resume is not None:
            on_resume(summary.resumed)
        todo = longest_first(
            [(i, r) for i, r in enumerate(resolved) if i not in done],
            checker.timings,
            checker.settings.workers,
        )
        for index, result in (executor or checker).map_unordered(todo):
            if not mixed_backends and result.verdict is not Verdict.INFRA_ERROR:
                _same_route(checkpoint, routes, resolved[index].image, result)
            log.append("result", _result_body(index, resolved[index], result))
            if executor is not None:  # a cluster's checks teach this machine's predictions too
                checker.timings.add(
                    result.prover, result.provenance.cpu_ms, len(resolved[index].content)
                )
            summary.checked += 1
            if on_result is not None:
                on_result(result)
        summary.results = [result for _, result in recorded_runs(log.records)]
    summary.verdicts.update(result.verdict.value for result in summary.results)
    return summary


def _started_with(checker: Checker) -> dict[str, str]:
    return {"backend": checker.settings.backend, "isolation": checker.settings.isolation}


def _same_start(checkpoint: Path, header: dict[str, Any], now: dict[str, str]) -> None:
    """A resumed log keeps the backend and isolation it was started with (older logs say none)."""
    before = {key: header[key] for key in now if key in header}
    if before and before != {key: now[key] for key in before}:
        was = " ".join(f"--{key} {value}" for key, value in before.items())
        raise CheckpointError(
            f"checkpoint {checkpoint} was started with {was}; resume it with the same "
            "(or pass --mixed-backends to record results of another backend in the same log)"
        )


def _same_route(checkpoint: Path, routes: dict[str, str], image: str, result: CheckResult) -> None:
    """Each image's checks stay on the backend its first recorded check used (`auto` may choose
    differently on another day: a log must not mix environments silently)."""
    backend = result.provenance.backend
    first = routes.setdefault(image, backend)
    if first != backend:
        raise CheckpointError(
            f"checkpoint {checkpoint} checked {image} on the {first} backend; this run checked it "
            f"on {backend} ({result.artifact}). Resume where {first} can run {image} (e.g. "
            f"--backend {first}), or pass --mixed-backends to record both in one log"
        )


def _header(run_digest: str, source: str, count: int) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "requests": run_digest,
        "source": source,
        "count": count,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "prooflock": kit_version(),
    }


def _result_body(index: int, request: ResolvedRequest, result: CheckResult) -> dict[str, Any]:
    return {
        "index": index,
        "request": request.request.record(),
        "result": result.model_dump(mode="json"),
    }
