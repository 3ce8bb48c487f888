"""Replay: re-check every recorded request now and compare, record by record.

Each row says one of: `match` (same verdict, same result digest, same environment key),
`environment differs` (the verdict and the result reproduce, but on another environment: the
changed inputs are listed), `verdict differs`, `result differs` (same verdict, other
diagnostics or details), `not re-checked` (an infra error now: the machine, not the record) or
`record inconsistent` (its digests do not match its own content: edited by hand).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.check.checker import Checker
from runner.core.errors import UserError
from runner.core.models import CheckRequest, CheckResult, Verdict
from runner.records.checkpoint import ChainReport, inspect_chain, recorded_runs
from runner.records.verify import statement_problems
from runner.runs.resumable import Executor

MATCH = "match"
ENVIRONMENT_DIFFERS = "environment differs"
VERDICT_DIFFERS = "verdict differs"
RESULT_DIFFERS = "result differs"
NOT_RECHECKED = "not re-checked (infra error)"
INCONSISTENT = "record inconsistent"
SCHEMA = "prooflock.replay/1"
EXIT_OK, EXIT_DIFFERS, EXIT_INFRA = 0, 1, 3


@dataclass
class ReplayRow:
    index: int
    artifact: str
    recorded: str
    replayed: str
    status: list[str]  # empty: a match
    changed_inputs: list[str] = field(default_factory=list)
    message: str = ""  # the infra error, when the record could not be re-checked

    @property
    def matches(self) -> bool:
        return not self.status

    @property
    def label(self) -> str:
        return ", ".join(self.status) or MATCH


@dataclass
class ReplayReport:
    log: Path
    chain: ChainReport
    rows: list[ReplayRow] = field(default_factory=list)
    unanchored: list[str] = field(default_factory=list)  # why a bundle's statement does not hold

    def count(self, status: str) -> int:
        return sum(status in row.status for row in self.rows)

    @property
    def matched(self) -> int:
        return sum(row.matches for row in self.rows)

    @property
    def incomplete(self) -> str | None:
        """Why the log does not hold every request's result, if it does not."""
        expected = self.chain.expected
        if expected is None:
            return "the log has no header saying how many requests the run had"
        if len(self.rows) != expected:
            return f"the log holds results for {len(self.rows)} of its {expected} requests"
        return None

    def exit_code(self) -> int:
        if self.count(NOT_RECHECKED):
            return EXIT_INFRA
        if self.matched == len(self.rows) and self.incomplete is None and not self.unanchored:
            return EXIT_OK
        return EXIT_DIFFERS

    def verdict_line(self) -> str:
        total = len(self.rows)
        parts = [f"{self.matched}/{total} records match"]
        same_verdicts = total - self.count(VERDICT_DIFFERS) - self.count(NOT_RECHECKED)
        if self.count(ENVIRONMENT_DIFFERS) and same_verdicts == total:
            parts.append("every verdict reproduces, but the environment differs")
        for status in (VERDICT_DIFFERS, RESULT_DIFFERS, NOT_RECHECKED, INCONSISTENT):
            if self.count(status):
                parts.append(f"{self.count(status)} {status}")
        if self.incomplete:
            parts.append(f"incomplete: {self.incomplete}")
        parts.extend(f"statement: {problem}" for problem in self.unanchored)
        return "; ".join(parts)

    def changed_inputs(self) -> list[str]:
        seen: dict[str, None] = {}
        for row in self.rows:
            seen.update(dict.fromkeys(row.changed_inputs))
        return list(seen)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "log": str(self.log),
            "head": self.chain.head,
            "total": len(self.rows),
            "matched": self.matched,
            "incomplete": self.incomplete,
            "statement_problems": self.unanchored,
            "exit_code": self.exit_code(),
            "summary": self.verdict_line(),
            "changed_inputs": self.changed_inputs(),
            "rows": [
                {
                    "index": row.index,
                    "artifact": row.artifact,
                    "recorded": row.recorded,
                    "replayed": row.replayed,
                    "status": row.label,
                    "changed_inputs": row.changed_inputs,
                    **({"message": row.message} if row.message else {}),
                }
                for row in self.rows
            ],
        }


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


def compare(index: int, recorded: CheckResult, replayed: CheckResult) -> ReplayRow:
    row = ReplayRow(index, recorded.artifact, recorded.verdict.value, replayed.verdict.value, [])
    if not recorded.self_consistent():
        row.status.append(INCONSISTENT)
    if replayed.verdict is Verdict.INFRA_ERROR:
        row.status.append(NOT_RECHECKED)
        row.message = replayed.diagnostics[0].message if replayed.diagnostics else ""
        return row
    if recorded.verdict != replayed.verdict:
        row.status.append(VERDICT_DIFFERS)
    elif recorded.result_digest != replayed.result_digest:
        row.status.append(RESULT_DIFFERS)
    if recorded.env_key != replayed.env_key or recorded.environment != replayed.environment:
        row.status.append(ENVIRONMENT_DIFFERS)
        row.changed_inputs = changed_inputs(recorded.environment, replayed.environment)
    return row


def load_recorded(log: Path) -> tuple[ChainReport, list[tuple[CheckRequest, CheckResult]]]:
    """A log's chain and final (request, result) pairs, refusing a tampered or empty log."""
    chain = inspect_chain(log)
    if not chain.ok:
        raise UserError(f"cannot replay a tampered checkpoint: {chain.describe()}")
    runs = list(recorded_runs(chain.records))
    if not runs:
        raise UserError(f"checkpoint {log} holds no results to replay")
    return chain, runs


def recorded_backend(runs: list[tuple[CheckRequest, CheckResult]]) -> str | None:
    """The backend the results were checked on, when all agree (to replay on the same kind)."""
    backends = {result.provenance.backend for _, result in runs}
    return backends.pop() if len(backends) == 1 else None


def replay(
    log: Path,
    checker: Checker,
    on_row: Callable[[ReplayRow], None] | None = None,
    *,
    bundle: Path | None = None,
    executor: Executor | None = None,
) -> ReplayReport:
    """Re-check `log`'s requests (`checker.settings.workers` at once) and compare each result.

    For a bundle, its statement must still name this log (count and head digest) and artifacts.
    """

    chain, runs = load_recorded(log)
    report = ReplayReport(log, chain)
    if bundle is not None:
        report.unanchored = statement_problems(bundle, log, chain, runs)
    work = [(index, checker.resolve(request)) for index, (request, _) in enumerate(runs)]
    rows: dict[int, ReplayRow] = {}
    for index, again in (executor or checker).map_unordered(work):
        rows[index] = compare(index, runs[index][1], again)
        if on_row is not None:
            on_row(rows[index])
    report.rows = [rows[index] for index in sorted(rows)]
    return report
