"""Resumable runs: check a requests file into a checkpoint log, skipping what it holds."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import orjson
from pydantic import ValidationError

from runner.check.checker import CheckService
from runner.check.resolve import Refusal
from runner.check.schedule import longest_first
from runner.check.second_opinion import AUTO, chosen_lines, with_second_opinion
from runner.core.canonical import digest
from runner.core.errors import UserError, explain
from runner.core.models import CheckRequest, CheckResult, Verdict, Withheld
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
    """Parse a JSON-lines requests file; a line that is no request raises a UserError.

    An artifact that is not UTF-8 text is that artifact's trouble, not the file's.
    Its request comes back withheld, to be refused.
    Bad UTF-8 bytes and lone surrogate escapes are both such trouble.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise UserError(f"requests file {path} does not exist") from None
    except OSError as exc:
        raise UserError(f"cannot read requests file {path}: {exc.strerror}") from None
    requests = []
    for number, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            requests.append(CheckRequest.model_validate(_request_fields(line)))
        except ValueError as exc:  # orjson's and pydantic's errors are ValueErrors
            problem = (
                explain(exc) if isinstance(exc, ValidationError) else f"not valid JSON ({exc})"
            )
            raise UserError(f"{path} line {number}: {problem}") from None
    if not requests:
        raise UserError(f"requests file {path} holds no requests")
    return requests


def _request_fields(line: bytes) -> Any:
    """A line's JSON; a name or content that is not UTF-8 text is withheld, with the reason."""
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError as refused:
        try:  # the standard library keeps what orjson refuses: bad bytes, lone surrogates
            fields = json.loads(line.decode("utf-8", "surrogateescape"))
        except (ValueError, RecursionError):
            raise refused from None  # not JSON at all; orjson's error is the one to show
    if not isinstance(fields, dict):
        return fields  # pydantic says what is wrong with it
    name, content = fields.get("name"), fields.get("content")
    if not isinstance(name, str) or not isinstance(content, str):
        return fields
    if (at := _not_text_at(content)) is not None:
        where = f"its content is not UTF-8 text (character {at})"
    elif (at := _not_text_at(name)) is not None:
        where = f"its name is not UTF-8 text (character {at})"
    else:
        return fields
    shown = name.encode("utf-8", "backslashreplace").decode("utf-8")
    try:
        raw = content.encode("utf-8", "surrogateescape")  # the bytes the file held
    except UnicodeEncodeError:
        raw = content.encode("utf-8", "surrogatepass")  # a lone surrogate escape
    reason = f"artifact {shown}: {where}: a byte that is no UTF-8, or a lone surrogate"
    return {**fields, "name": shown, "content": "", "withheld": Withheld.of(raw, reason)}


def _not_text_at(text: str) -> int | None:
    """Where the first lone surrogate is, if any; such a str is not Unicode text."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return None


class Executor(Protocol):
    """Where a run's checks execute: this process's checker, or a cluster."""

    def map_unordered(
        self, work: Iterable[tuple[int, ResolvedRequest]]
    ) -> Iterator[tuple[int, CheckResult]]: ...


def run_requests(
    requests: list[CheckRequest],
    checkpoint: Path,
    checker: CheckService,
    *,
    source: str,
    on_result: Callable[[CheckResult], None] | None = None,
    on_resume: Callable[[int], None] | None = None,
    executor: Executor | None = None,
    mixed_backends: bool = False,
    second_opinion: str | None = None,
) -> RunSummary:
    """Check `requests` into `checkpoint`, resuming from what it already holds.

    This function is the checkpoint's one writer.
    The longest predicted checks start first.
    Results are appended as they finish; each record keeps its request's index.
    A log keeps the backend and isolation it was started with.
    Each image keeps the backend it was first checked on.
    Resuming otherwise is refused, unless `mixed_backends`.
    `on_resume(n)` hears that n requests are already recorded.
    `second_opinion` names lines that re-check each pass resting on a bug they fix.
    `auto` means the provers' declared lines; `none` or None means none.
    A resumed log keeps its header's choice.
    """
    resolved: list[ResolvedRequest | Refusal] = []
    for number, request in enumerate(requests, start=1):
        try:
            resolved.append(checker.prepare(request))
        except UserError as exc:  # bad input: before anything is checked or written
            raise UserError(f"{source} request {number}: {exc}") from None
    chosen = chosen_lines(second_opinion)  # a line no prover pins: exit 2, nothing written
    run_digest = digest([r.digest for r in resolved])
    summary = RunSummary(total=len(resolved))
    with CheckpointLog(checkpoint, fsync_every=checker.settings.fsync_every) as log:
        summary.repaired_bytes = log.repaired_bytes
        headers = list(log.of_kind("header"))
        if headers and second_opinion in (None, AUTO):  # resumed: as the log was started
            chosen = headers[0].get("second_opinion")
        started_with = _started_with(checker, chosen)
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
            checked.image: body["result"]["provenance"]["backend"]
            for index, body in done.items()
            if isinstance(checked := resolved[index], ResolvedRequest)
        }
        summary.resumed = len(done)
        if on_resume is not None:
            on_resume(summary.resumed)
        todo = []
        for index, prepared in enumerate(resolved):
            if index in done:
                continue
            if isinstance(prepared, Refusal):  # nothing to run: its record goes in at once
                log.append("result", _result_body(index, prepared.request, prepared.result))
                _counted(summary, prepared.result, on_result)
            else:
                todo.append((index, prepared))
        ordered = longest_first(todo, checker.timings, checker.settings.workers)
        checks = with_second_opinion(executor, checker, chosen) or checker
        for index, result in checks.map_unordered(ordered):
            checked = resolved[index]
            assert isinstance(checked, ResolvedRequest)
            if not mixed_backends and result.verdict is not Verdict.INFRA_ERROR:
                _same_route(checkpoint, routes, checked.image, result)
            log.append("result", _result_body(index, checked.request, result))
            if executor is not None:  # a cluster's checks also teach this machine's predictions
                checker.timings.add(result.prover, result.provenance.cpu_ms, len(checked.content))
            _counted(summary, result, on_result)
        summary.results = [result for _, result in recorded_runs(log.records)]
    summary.verdicts.update(result.verdict.value for result in summary.results)
    return summary


def _counted(
    summary: RunSummary, result: CheckResult, on_result: Callable[[CheckResult], None] | None
) -> None:
    summary.checked += 1
    if on_result is not None:
        on_result(result)


def _started_with(checker: CheckService, second_opinion: str | None) -> dict[str, str]:
    started: dict[str, str] = {
        "backend": checker.settings.backend,
        "isolation": checker.settings.isolation,
    }
    if second_opinion is not None:  # None writes nothing, as in logs that predate the option
        started["second_opinion"] = second_opinion
    return started


def _same_start(checkpoint: Path, header: dict[str, Any], now: dict[str, str]) -> None:
    """A resumed log keeps the backend and isolation it was started with, if it names them."""
    before = {key: header[key] for key in now if key in header}
    if "second_opinion" in header:  # resuming without the option would drop it silently
        before["second_opinion"] = header["second_opinion"]
    if before and before != {key: now.get(key) for key in before}:
        was = " ".join(f"--{key.replace('_', '-')} {value}" for key, value in before.items())
        raise CheckpointError(
            f"checkpoint {checkpoint} was started with {was}; resume it with the same "
            "(or pass --mixed-backends to record results of another backend in the same log)"
        )


def _same_route(checkpoint: Path, routes: dict[str, str], image: str, result: CheckResult) -> None:
    """Each image's checks stay on the backend its first recorded check used.

    `auto` may choose differently another day, and a log must not mix environments silently.
    """
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


def _result_body(index: int, request: CheckRequest, result: CheckResult) -> dict[str, Any]:
    return {
        "index": index,
        "request": request.record(),
        "result": result.model_dump(mode="json"),
    }
