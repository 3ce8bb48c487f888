"""One table per verdict (runner.core.verdicts): every consumer reads it, no verdict lacks a row.

The stories: a log holding every verdict, reported in a real browser, shows each in its own
colour; each verdict gives the exit code and cache behaviour its row says; only `pass` counts
as a pass; a verdict added without its row stops the kit at import; a row changed in the table
changes what the CLI, the cache, the CSS and the plots do.
"""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from runner.check.cache import ResultCache
from runner.check.resolve import Refused, resolve
from runner.cli.checking import exit_code, tally_line
from runner.core import verdicts
from runner.core.models import CheckRequest, CheckResult, Outcome, Verdict, result_digest
from runner.core.settings import Settings
from runner.records.checkpoint import CheckpointLog
from runner.report import write_report
from runner.report.page import verdict_css
from runner.report.plots import time_distribution
from runner.report.tables import SummaryRow
from tests.support.browser import chromium, require_browser

NEW = (Verdict.UNVERIFIED, Verdict.DISPUTED, Verdict.REFUSED)


def result_with(verdict: Verdict, name: str = "a.v") -> CheckResult:
    """A self-consistent record with `verdict`: a real refusal of an over-size artifact, its
    verdict then set (the report and the cache read records, not how they came to be)."""
    settings = Settings(backend="local", max_artifact_mb=0.000001)
    with pytest.raises(Refused) as refused:
        resolve(CheckRequest(prover="rocq", name=name, content="x" * 100), settings)
    result = refused.value.refusal.result
    outcome = Outcome(verdict=verdict, trust=result.trust, diagnostics=result.diagnostics)
    return result.model_copy(update={"verdict": verdict, "result_digest": result_digest(outcome)})


def log_of_every_verdict(path: Path) -> Path:
    with CheckpointLog(path) as log:
        log.append("header", {"requests": "0" * 64, "count": len(Verdict), "source": "test"})
        for index, verdict in enumerate(Verdict):
            result = result_with(verdict, f"{verdict.value}.v")
            request = {
                "prover": "rocq",
                "name": f"{verdict.value}.v",
                "content": "",
                "mode": "proof",
            }
            log.append(
                "result", {"index": index, "request": request, "result": result.model_dump()}
            )
    return path


def test_every_verdict_has_exactly_one_row():
    assert sorted(verdicts.ORDER) == sorted(Verdict)
    assert len(verdicts.ROWS) == len(Verdict) == len(set(verdicts.ORDER))
    assert len({row.colour for row in verdicts.ROWS}) == len(Verdict), "one colour each"
    assert all(row.meaning for row in verdicts.ROWS)


def test_a_verdict_added_without_its_row_stops_the_kit_at_import():
    script = """
import enum, importlib
import runner.core.models as models
import runner.core.verdicts as verdicts
members = {v.name: v.value for v in models.Verdict} | {"SURPRISE": "surprise"}
models.Verdict = enum.StrEnum("Verdict", members)
try:
    importlib.reload(verdicts)  # the module as it loads with the new member
except RuntimeError as exc:
    print(exc)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert "no single row for verdict(s) ['surprise']" in done.stdout, done.stderr


def test_only_pass_counts_as_a_pass_and_infra_errors_count_neither_way():
    counts = Counter({verdict.value: 1 for verdict in Verdict})
    assert verdicts.pass_rate(counts) == (1, len(Verdict) - 1)
    assert SummaryRow("rocq", counts).pass_rate == f"{100 / (len(Verdict) - 1):.1f} %"
    for verdict in NEW:  # never a pass, whatever else they are
        assert not verdicts.facts(verdict).passes
        assert SummaryRow("rocq", Counter({verdict.value: 3})).pass_rate == "0.0 %"


@pytest.mark.parametrize("verdict", list(Verdict))
def test_each_verdict_gives_the_exit_code_its_row_says(verdict):
    expected = {Verdict.PASS: 0, Verdict.INFRA_ERROR: 3}.get(verdict, 1)
    assert verdicts.facts(verdict).exit_code == expected
    assert exit_code([result_with(verdict)]) == expected
    assert exit_code([result_with(Verdict.PASS), result_with(verdict)]) == expected


def test_the_cache_keeps_the_verdicts_its_rows_call_cacheable(tmp_path):
    cache = ResultCache(tmp_path)
    kept = set()
    for verdict in Verdict:
        result = result_with(verdict, f"{verdict.value}.v")  # a request digest of its own
        cache.put(result)
        if cache.get(result.env_key, result.request_digest) is not None:
            kept.add(verdict)
    assert kept == {
        Verdict.PASS,
        Verdict.FAIL,
        Verdict.PLACEHOLDER,
        Verdict.AXIOM,
        Verdict.WRONG_STATEMENT,
    }


def test_the_reports_stylesheet_and_plots_colour_every_verdict():
    css = verdict_css().decode()
    for row in verdicts.ROWS:
        assert f"--verdict-{row.name}: {row.colour};" in css
        assert f".verdict.{row.name} {{ background: var(--verdict-{row.name}); }}" in css
    svg = time_distribution({verdict.value: [1000] for verdict in Verdict}).decode()
    fills = set(re.findall(r"fill: ?(#[0-9a-f]{6})", svg))
    assert {row.colour for row in verdicts.ROWS} <= fills


def test_a_changed_row_changes_every_consumer(monkeypatch, tmp_path):
    changed = dataclasses.replace(
        verdicts.FACTS[Verdict.CRASH], colour="#123456", cacheable=True, exit_code=0, passes=True
    )
    rows = tuple(changed if row.verdict is Verdict.CRASH else row for row in verdicts.ROWS)
    monkeypatch.setattr(verdicts, "ROWS", rows)
    monkeypatch.setitem(verdicts.FACTS, Verdict.CRASH, changed)
    crash = result_with(Verdict.CRASH)
    assert exit_code([crash]) == 0
    cache = ResultCache(tmp_path)
    cache.put(crash)
    assert cache.get(crash.env_key, crash.request_digest) is not None
    assert "--verdict-crash: #123456;" in verdict_css().decode()
    assert "#123456" in time_distribution({"crash": [1000]}).decode()
    assert SummaryRow("rocq", Counter({"crash": 1})).pass_rate == "100.0 %"


def test_summaries_list_verdicts_in_the_tables_order():
    results = [result_with(v) for v in reversed(list(Verdict))]
    listed = tally_line(results).removeprefix(f"{len(results)} checked: ").split(", ")
    assert [item.split(" ", 1)[1] for item in listed] == [v.value for v in verdicts.ORDER]


@pytest.mark.slow
@pytest.mark.browser
def test_every_verdict_has_its_colour_in_the_rendered_report(tmp_path):
    require_browser()
    log = log_of_every_verdict(tmp_path / "run.jsonl")
    write_report(log, tmp_path / "report")
    with chromium() as browser:
        page = browser.open(tmp_path / "report" / "index.html")
        assert page.errors == []
        shown = page.page.eval_on_selector_all(
            "thead span.verdict",
            "badges => badges.map(b => [b.textContent, getComputedStyle(b).backgroundColor, b.title])",
        )
    expected = {row.name: (_rgb(row.colour), row.meaning) for row in verdicts.ROWS}
    assert {name: (colour, title) for name, colour, title in shown} == expected


def _rgb(colour: str) -> str:
    red, green, blue = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgb({red}, {green}, {blue})"
