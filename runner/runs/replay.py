"""Replay: re-check every recorded request here and compare, record by record.

A replay ends in one of three outcomes, each with an exit code:
- reproduced bit-for-bit (0): same verdicts, result digests and environment keys;
- reproduced on a drifted environment (4): verdicts and results match, and the drift is listed;
- differs (1).

It exits 3 when the machine could not re-check everything.

Each row has a status from runner.records.replay_file.
`match` means nothing differs.
`environment differs` lists the changed inputs.
`verdict differs` and `result differs` speak against the record.
`not re-checked` is the machine's failure, not the record's.
`record inconsistent` means its digests do not match its content: it was edited by hand.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner.check.checker import CheckService
from runner.check.resolve import Refusal
from runner.check.second_opinion import with_second_opinion
from runner.core.errors import InfraFailure, UserError
from runner.core.exit_codes import EXIT_DRIFTED, EXIT_FAILED, EXIT_INFRA, EXIT_OK
from runner.core.models import CheckRequest, CheckResult, Verdict
from runner.records.bundles import load_missing_images
from runner.records.checkpoint import ChainReport, inspect_log, recorded_runs
from runner.records.replay_file import (
    ENVIRONMENT_DIFFERS,
    ERROR,
    INCONSISTENT,
    MATCH,
    NOT_RECHECKED,
    OTHER_VERDICT,
    RESULT_DIFFERS,
    SAME_VERDICT,
    SCHEMA,
    VERDICT_DIFFERS,
    ReplayFile,
    ReplayFileRow,
)
from runner.records.verify import statement_problems
from runner.runs.resumable import Executor

if TYPE_CHECKING:
    from runner.storage.s3_settings import S3Settings

EXIT_DIFFERS = EXIT_FAILED
REPRODUCED = "reproduced bit-for-bit"
DRIFTED = "reproduced on a drifted environment"
DIFFERS = "differs"
STOPPED = "stopped"


@dataclass
class ReplayRow:
    index: int
    artifact: str
    recorded: str
    replayed: str
    status: list[str]  # empty: a match
    changed_inputs: list[str] = field(default_factory=list)
    message: str = ""  # the infra error, when the record could not be re-checked
    prover: str = ""
    line: str | None = None  # the other line it was re-checked on (`replay --on`), if any

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
    unanchored: list[str] = field(default_factory=list)  # why the bundle's statement fails
    stopped: str | None = None  # why the replay stopped before re-checking every record
    recorded: int = 0  # results the log holds
    on: dict[str, str] = field(default_factory=dict)  # prover → the line it was re-checked on

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
        if self.recorded != expected:
            return f"the log holds results for {self.recorded} of its {expected} requests"
        return None

    @property
    def cross_version(self) -> list[ReplayRow]:
        return [row for row in self.rows if row.line is not None]

    def drift_by_prover(self) -> dict[str, dict[str, int]]:
        """For each prover re-checked on another line: how many records kept their verdict."""
        table: dict[str, dict[str, int]] = {}
        for row in self.cross_version:
            counts = table.setdefault(
                f"{row.prover} on {row.line}", {SAME_VERDICT: 0, OTHER_VERDICT: 0, ERROR: 0}
            )
            counts[row.label] += 1
        return table

    @property
    def outcome(self) -> str:
        if self.stopped is not None or self.count(NOT_RECHECKED) or self.count(ERROR):
            return STOPPED
        whole = self.incomplete is None and not self.unanchored
        if whole and self.matched == len(self.rows):
            return REPRODUCED
        same: tuple[list[str], ...] = ([], [ENVIRONMENT_DIFFERS], [SAME_VERDICT])
        only_environment = all(row.status in same for row in self.rows)
        return DRIFTED if whole and only_environment else DIFFERS

    def exit_code(self) -> int:
        return {REPRODUCED: EXIT_OK, DRIFTED: EXIT_DRIFTED, DIFFERS: EXIT_DIFFERS}.get(
            self.outcome, EXIT_INFRA
        )

    def verdict_line(self) -> str:
        total = len(self.rows)
        if self.on:
            drift = "; ".join(
                f"{where}: " + ", ".join(f"{n} {what}" for what, n in counts.items())
                for where, counts in self.drift_by_prover().items()
            )
            return f"across versions: {drift}" + (
                f"; stopped: {self.stopped}" if self.stopped else ""
            )
        if self.outcome == REPRODUCED:
            return f"{REPRODUCED}: {total}/{total} records match, with the same environment keys"
        if self.outcome == DRIFTED:
            drifted = self.count(ENVIRONMENT_DIFFERS)
            return (
                f"{DRIFTED}: {total}/{total} verdicts and result digests identical; the "
                f"environment differs for {drifted} (see what changed below)"
            )
        parts = [f"{self.matched}/{total} records match"]
        if self.stopped is not None:
            parts.append(f"stopped: {self.stopped}")
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
        return ReplayFile(
            schema=SCHEMA,
            log=str(self.log),
            head=self.chain.head,
            total=len(self.rows),
            matched=self.matched,
            incomplete=self.incomplete,
            statement_problems=self.unanchored,
            exit_code=self.exit_code(),
            outcome=self.outcome,
            stopped=self.stopped,
            summary=self.verdict_line(),
            changed_inputs=self.changed_inputs(),
            on=self.on,
            drift_by_prover=self.drift_by_prover(),
            rows=[
                ReplayFileRow(
                    index=row.index,
                    artifact=row.artifact,
                    prover=row.prover,
                    line=row.line or "",
                    recorded=row.recorded,
                    replayed=row.replayed,
                    status=row.label,
                    changed_inputs=row.changed_inputs,
                    message=row.message,
                )
                for row in self.rows
            ],
        ).to_json()


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


def compare_across(index: int, recorded: CheckResult, other: CheckResult, line: str) -> ReplayRow:
    """A record re-checked on another line: only the verdict can be compared."""
    row = ReplayRow(index, recorded.artifact, recorded.verdict.value, other.verdict.value, [])
    row.prover, row.line = recorded.prover, line
    if other.verdict is Verdict.INFRA_ERROR:
        row.status.append(ERROR)
        row.message = other.diagnostics[0].message if other.diagnostics else ""
    else:
        row.status.append(SAME_VERDICT if other.verdict == recorded.verdict else OTHER_VERDICT)
    return row


def load_recorded(log: Path) -> tuple[ChainReport, list[tuple[CheckRequest, CheckResult]]]:
    """A log's chain and final (request, result) pairs; a tampered or empty log is refused."""
    chain = inspect_log(log)
    if not chain.ok:
        raise UserError(f"cannot replay a tampered checkpoint: {chain.describe()}")
    runs = list(recorded_runs(chain.records))
    if not runs:
        raise UserError(f"checkpoint {log} holds no results to replay")
    return chain, runs


def recorded_backend(runs: list[tuple[CheckRequest, CheckResult]]) -> str | None:
    """The backend all results were checked on, so the replay uses the same kind.

    A refused artifact ran on none, so it has no say.
    """
    backends = {result.provenance.backend for _, result in runs} - {"none"}
    return backends.pop() if len(backends) == 1 else None


def replay(
    log: Path,
    checker: CheckService,
    on_row: Callable[[ReplayRow], None] | None = None,
    *,
    bundle: Path | None = None,
    executor: Executor | None = None,
    on: dict[str, str] | None = None,
    stores: list[str] | None = None,
    s3: S3Settings | None = None,
) -> ReplayReport:
    """Re-check `log`'s requests and compare each result.

    `checker.settings.workers` checks run at once.
    A bundle's statement must still name this log (count and head digest) and its artifacts.
    An image the bundle used that this machine lacks loads from its archive in `stores`.
    `stores` defaults to the bundle's directory; loading comes before any rebuild.
    `s3` reaches the stores in S3.
    `on` maps a prover to another pinned line, where its records are re-checked.
    That shows which verdicts drift across versions.
    """

    chain, runs = load_recorded(log)
    on = on or {}
    report = ReplayReport(log, chain, recorded=len(runs), on=dict(on))
    if bundle is not None:
        report.unanchored = statement_problems(bundle, log, chain, runs)
    if checker.settings.backend != "local":
        same_line = [result for _, result in runs if result.prover not in on]
        default = [str(bundle)] if bundle is not None else []
        load_missing_images(same_line, default if stores is None else stores, checker.notify, s3)
    rows: dict[int, ReplayRow] = {}

    def compared(index: int, again: CheckResult) -> None:
        recorded = runs[index][1]
        line = on.get(recorded.prover)
        rows[index] = (
            compare(index, recorded, again)
            if line is None
            else compare_across(index, recorded, again, line)
        )
        rows[index].prover = recorded.prover
        if on_row is not None:
            on_row(rows[index])

    work = []
    for index, (request, _) in enumerate(runs):
        prepared = checker.prepare(_on_line(request, on))
        if isinstance(prepared, Refusal):  # refused again; the comparison says if it was before
            compared(index, prepared.result)
        else:
            work.append((index, prepared))
    # A run that asked a second opinion replays with it, or its disputed records would differ.
    checks = with_second_opinion(executor, checker, _second_opinion(chain)) or checker
    try:
        for index, again in checks.map_unordered(work):
            compared(index, again)
    except InfraFailure as exc:  # what was replayed so far is still reported
        report.stopped = str(exc)
    report.rows = [rows[index] for index in sorted(rows)]
    return report


def _second_opinion(chain: ChainReport) -> str | None:
    """The line the run's header says every flagged pass was re-checked on, if any."""
    for record in chain.records:
        if record.get("kind") == "header":
            line = record["body"].get("second_opinion")
            return line if isinstance(line, str) else None
    return None


def _on_line(request: CheckRequest, on: dict[str, str]) -> CheckRequest:
    line = on.get(request.prover)
    return request if line is None else request.model_copy(update={"line": line})
