"""`write_report`: one run, from a log or a bundle and perhaps a replay, as a static page."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.core.errors import UserError
from runner.records.verify import INTEGRITY_ONLY, TrustPolicy
from runner.report.assets import AssetWriter
from runner.report.blobs import sha256_of
from runner.report.diagrams import diagram_views
from runner.report.environment import environment_view
from runner.report.geometry import geometry_view
from runner.report.integrity import integrity_view
from runner.report.load import LoadedRun, load_run
from runner.report.page import render_page, static_files, uncounted_verdicts, verdict_meanings
from runner.report.plots import percentile_seconds, time_distribution
from runner.report.replayed import load_replay
from runner.report.statement import statement_view
from runner.report.tables import ProverTable, prover_tables, summary_rows, verdict_columns
from runner.report.text import visible

MAX_LISTED = 3  # artifacts named in one sentence


@dataclass
class ReportSummary:
    out: Path
    records: int
    provers: dict[str, dict[str, int]]  # prover -> verdict -> records
    files: list[Path]
    not_shown: list[str] = field(default_factory=list)  # sentences on what the page cannot show
    seconds: float = 0.0

    @property
    def index(self) -> Path:
        return self.out / "index.html"

    def as_json(self) -> dict[str, Any]:
        return {
            "out": str(self.out),
            "index": str(self.index),
            "records": self.records,
            "provers": self.provers,
            "files": [str(path) for path in self.files],
            "not_shown": self.not_shown,
            "seconds": round(self.seconds, 3),
        }


def write_report(
    source: Path, out: Path, *, replay: Path | None = None, trust: TrustPolicy = INTEGRITY_ONLY
) -> ReportSummary:
    """Write `out/index.html`, with its plots, renders, CSS and JS, for the run in `source`.

    Its integrity section checks signatures against `trust`.
    """
    started = time.monotonic()
    loaded = load_run(source)
    integrity = integrity_view(loaded, trust)
    problems = loaded.problems
    replay_view = load_replay(replay, loaded.runs, problems) if replay is not None else None
    if out.exists() and not out.is_dir():
        raise UserError(f"report directory {out} is a file")
    assets = AssetWriter(out)
    tables = prover_tables(loaded.runs, replay_view)
    for table in tables:
        table.plot = assets.write(f"plots/{table.anchor}-time.svg", _plot(table))
    if loaded.artifacts is not None:
        _mark_sources(loaded, tables, problems)
    diagrams = diagram_views(loaded.runs, loaded.renders, assets, problems)
    statement = None
    if loaded.statement is not None and loaded.artifacts is not None:
        statement = statement_view(loaded.statement, loaded.source, loaded.artifacts, problems)
    for name, data in static_files().items():
        assets.write(name, data)
    page = render_page(
        source=visible(loaded.source.name or loaded.source),
        kind=loaded.kind,
        header=_header_facts(loaded.header),
        problems=problems,
        records=len(loaded.runs),
        verdicts=verdict_columns(tables),
        uncounted=uncounted_verdicts(),
        meanings=verdict_meanings(),
        summary=summary_rows(tables),
        tables=tables,
        timing={table.anchor: _timing(table) for table in tables},
        replay=replay_view,
        diagrams=diagrams,
        geometry=geometry_view(loaded.runs),
        environment=environment_view(loaded.runs, loaded.lock),
        statement=statement,
        integrity=integrity,
    )
    assets.write("index.html", page)  # last, so the page never links what is not yet written
    return ReportSummary(
        out=out,
        records=len(loaded.runs),
        provers={table.prover: dict(table.counts) for table in tables},
        files=assets.written,
        not_shown=problems,
        seconds=time.monotonic() - started,
    )


def _plot(table: ProverTable) -> bytes:
    by_verdict: dict[str, list[int]] = {}
    for row in table.rows:
        by_verdict.setdefault(row.verdict, []).append(row.wall_ms)
    return time_distribution(by_verdict)


def _timing(table: ProverTable) -> dict[str, str]:
    wall = [row.wall_ms for row in table.rows]
    return {q: percentile_seconds(wall, p) for q, p in (("median", 50), ("p90", 90), ("max", 100))}


def _mark_sources(loaded: LoadedRun, tables: list[ProverTable], problems: list[str]) -> None:
    """Say which artifact sources a bundle lacks; each is a blob named by its sha256."""
    assert loaded.artifacts is not None
    rows = {row.index: row for table in tables for row in table.rows}
    missing = []
    for index, (request, result) in enumerate(loaded.runs):
        present = loaded.artifacts.has(sha256_of(request.content.encode("utf-8")))
        rows[index].source_in_bundle = present
        if not present:
            missing.append(visible(result.artifact))
    if missing:
        more = f" (+{len(missing) - MAX_LISTED} more)" if len(missing) > MAX_LISTED else ""
        problems.append(
            f"the sources of {len(missing)} artifacts are not in the bundle's blobs "
            f"({', '.join(missing[:MAX_LISTED])}{more}); the log's copy is shown"
        )


def _header_facts(header: dict[str, Any] | None) -> list[tuple[str, str]]:
    if not header:
        return []
    labels = (
        ("source", "requests file"),
        ("count", "requests"),
        ("created_at", "started"),
        ("prooflock", "kit version"),
        ("format", "log format"),
        ("requests", "requests digest"),
    )
    return [(label, visible(header[key])) for key, label in labels if key in header]
