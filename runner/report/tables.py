"""The summary by prover and verdict, and one row per record for each prover's table."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from runner.core import verdicts
from runner.core.models import CheckRequest, CheckResult, Diagnostic
from runner.records.replay_file import ReplayFileRow
from runner.report.load import Run
from runner.report.replayed import ReplayView
from runner.report.text import visible, visible_block

MAX_DIAGNOSTICS = 5  # per row; the rest are counted
MAX_SOURCE = 4000  # characters of an artifact's source shown in its row


@dataclass
class DiagnosticView:
    severity: str
    where: str  # "line:column", "line", or ""
    message: str
    context: str

    @classmethod
    def of(cls, diagnostic: Diagnostic) -> DiagnosticView:
        where = ""
        if diagnostic.line is not None:
            where = str(diagnostic.line)
            if diagnostic.column is not None:
                where += f":{diagnostic.column}"
        return cls(
            severity=visible(diagnostic.severity),
            where=where,
            message=visible_block(diagnostic.message),
            context=visible(diagnostic.context or ""),
        )


@dataclass
class Row:
    index: int
    artifact: str
    mode: str
    verdict: str
    diagnostics: list[DiagnosticView]
    hidden_diagnostics: int
    assumptions: list[str]
    wall_ms: int
    cpu_ms: int | None
    cached: bool
    source: str
    replay: ReplayFileRow | None = None
    source_in_bundle: bool | None = None  # None: not a bundle

    @property
    def seconds(self) -> str:
        return f"{self.wall_ms / 1000:.2f}"


@dataclass
class ProverTable:
    prover: str
    anchor: str  # an HTML id that no prover name can break
    rows: list[Row] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    plot: str | None = None  # href of the time distribution, once drawn


@dataclass
class SummaryRow:
    prover: str
    counts: Counter[str]
    is_total: bool = False

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def pass_rate(self) -> str:
        """Passes over the records that count for or against their artifact.

        The verdict table says which count; infra errors do not.
        """
        passed, judged = verdicts.pass_rate(self.counts)
        return f"{100 * passed / judged:.1f} %" if judged else "–"


def row_of(index: int, result: CheckResult, content: str, replay: ReplayView | None) -> Row:
    return Row(
        index=index,
        artifact=visible(result.artifact),
        mode=visible(result.mode),
        verdict=result.verdict.value,
        diagnostics=[DiagnosticView.of(d) for d in result.diagnostics[:MAX_DIAGNOSTICS]],
        hidden_diagnostics=max(0, len(result.diagnostics) - MAX_DIAGNOSTICS),
        assumptions=[visible(a) for a in result.assumptions],
        wall_ms=result.provenance.wall_ms,
        cpu_ms=result.provenance.cpu_ms,
        cached=result.provenance.cached,
        source=visible_block(content, MAX_SOURCE),
        replay=replay.by_index.get(index) if replay else None,
    )


def prover_tables(runs: list[Run], replay: ReplayView | None) -> list[ProverTable]:
    tables: dict[str, ProverTable] = {}
    for index, (request, result) in enumerate(runs):
        table = tables.get(result.prover)
        if table is None:
            table = tables[result.prover] = ProverTable(
                prover=visible(result.prover), anchor=f"prover-{len(tables) + 1}"
            )
        table.rows.append(row_of(index, result, _source(request), replay))
        table.counts[result.verdict.value] += 1
    return list(tables.values())


def _source(request: CheckRequest) -> str:
    """The artifact's text, or what the log says of content it did not keep."""
    if request.withheld is None:
        return request.content
    kept = request.withheld
    return f"(not kept in the log: {kept.size} bytes, sha256 {kept.sha256}; {kept.reason})"


def summary_rows(tables: list[ProverTable]) -> list[SummaryRow]:
    rows = [SummaryRow(table.prover, table.counts) for table in tables]
    if len(rows) > 1:
        total: Counter[str] = Counter()
        for row in rows:
            total.update(row.counts)
        rows.append(SummaryRow("all provers", total, is_total=True))
    return rows


def verdict_columns(tables: list[ProverTable]) -> list[str]:
    """Verdicts that occur, in the verdict table's order."""
    return verdicts.ordered(verdict for table in tables for verdict in table.counts)
