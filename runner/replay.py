"""Replay: re-check every recorded request now and compare, record by record."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.canonical import digest
from runner.checker import Checker
from runner.checkpoint import inspect_chain
from runner.errors import UserError
from runner.models import CheckRequest, CheckResult, Outcome, result_digest
from runner.run import recorded_runs

MATCH = "match"


@dataclass
class ReplayRow:
    index: int
    artifact: str
    recorded: str
    replayed: str
    status: str  # "match", or what differs
    changed_inputs: list[str] = field(default_factory=list)

    @property
    def matches(self) -> bool:
        return self.status == MATCH


@dataclass
class ReplayReport:
    log: Path
    rows: list[ReplayRow] = field(default_factory=list)

    @property
    def matched(self) -> int:
        return sum(row.matches for row in self.rows)

    @property
    def ok(self) -> bool:
        return self.matched == len(self.rows)

    def changed_inputs(self) -> list[str]:
        seen: dict[str, None] = {}
        for row in self.rows:
            seen.update(dict.fromkeys(row.changed_inputs))
        return list(seen)


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        flat: dict[str, Any] = {}
        for key, item in value.items():
            flat.update(flatten(item, f"{prefix}.{key}" if prefix else key))
        return flat
    return {prefix: value}


def changed_inputs(recorded: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """Environment inputs that differ, as `path: old → new` lines."""
    old, new = flatten(recorded), flatten(current)
    lines = []
    for path in sorted(old.keys() | new.keys()):
        if old.get(path) != new.get(path):
            lines.append(f"{path}: {_short(old.get(path))} → {_short(new.get(path))}")
    return lines


def _short(value: Any) -> str:
    text = "(absent)" if value is None else " ".join(str(value).split())
    return text if len(text) <= 80 else text[:77] + "..."


def self_consistent(recorded: CheckResult) -> bool:
    """Whether a record's digests match its own content (a hand-edited record does not)."""
    outcome = Outcome(
        verdict=recorded.verdict,
        diagnostics=recorded.diagnostics,
        assumptions=recorded.assumptions,
        details=recorded.details,
    )
    return recorded.result_digest == result_digest(outcome) and recorded.env_key == digest(
        recorded.environment
    )


def compare(index: int, recorded: CheckResult, replayed: CheckResult) -> ReplayRow:
    differences = [] if self_consistent(recorded) else ["record inconsistent"]
    if recorded.verdict != replayed.verdict:
        differences.append("verdict differs")
    elif recorded.result_digest != replayed.result_digest:
        differences.append("result differs")
    changed: list[str] = []
    if recorded.env_key != replayed.env_key or recorded.environment != replayed.environment:
        differences.append("environment changed")
        changed = changed_inputs(recorded.environment, replayed.environment)
    return ReplayRow(
        index=index,
        artifact=recorded.artifact,
        recorded=recorded.verdict.value,
        replayed=replayed.verdict.value,
        status=", ".join(differences) or MATCH,
        changed_inputs=changed,
    )


def load_recorded(log: Path) -> list[tuple[CheckRequest, CheckResult]]:
    """A log's final (request, result) pairs, refusing a tampered or empty log."""
    chain = inspect_chain(log)
    if not chain.ok:
        raise UserError(f"cannot replay a tampered checkpoint: {chain.describe()}")
    runs = list(recorded_runs(chain.records))
    if not runs:
        raise UserError(f"checkpoint {log} holds no results to replay")
    return runs


def recorded_backend(runs: list[tuple[CheckRequest, CheckResult]]) -> str | None:
    """The backend the results were checked on, when all agree (to replay on the same kind)."""
    backends = {result.provenance.backend for _, result in runs}
    return backends.pop() if len(backends) == 1 else None


def replay(
    log: Path, checker: Checker, on_row: Callable[[ReplayRow], None] | None = None,
    *, runs: list[tuple[CheckRequest, CheckResult]] | None = None,
) -> ReplayReport:
    """Re-check `log`'s requests (or the already loaded `runs` of it) and compare each result."""
    report = ReplayReport(log)
    for index, (request, recorded) in enumerate(runs if runs is not None else load_recorded(log)):
        row = compare(index, recorded, checker.check_one(request))
        report.rows.append(row)
        if on_row is not None:
            on_row(row)
    return report
