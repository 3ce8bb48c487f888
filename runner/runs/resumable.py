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
    executor: Executor | None = None,
) -> RunSummary:
    """Check `requests` into `checkpoint`, resuming from what it already holds.

    The checkpoint has one writer, this function: results are appended in the order they finish
    (each record keeps its request's index), longest predicted checks first.
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
        if not headers:
            log.append("header", _header(run_digest, source, len(resolved)))
        elif headers[0]["requests"] != run_digest:
            raise CheckpointError(
                f"checkpoint {checkpoint} was made from other requests (or other limits) than "
                f"{source}; use a new checkpoint path"
            )
        done = {
            index: body
            for index, body in latest_results(log.of_kind("result")).items()
            if body["result"]["verdict"] != Verdict.INFRA_ERROR.value
        }
        summary.resumed = len(done)
        todo = longest_first(
            [(i, r) for i, r in enumerate(resolved) if i not in done],
            checker.timings,
            checker.settings.workers,
        )
        for index, result in (executor or checker).map_unordered(todo):
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
