"""A batch run's summary: problems per outcome and per syntax class, with time per problem.

NL2AGBench reports success, syntax errors by exception class, and logic errors. This table gives
those counts straight from the results' details, plus the kit's `unsolved`, `format_error` and
`timeout`. So nothing needs re-classifying by hand.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field

from rich.table import Table

from runner.core.models import CheckResult


@dataclass
class Tally:
    total: int = 0
    outcomes: dict[str, list[int]] = field(default_factory=dict)  # outcome -> wall ms per problem
    syntax_classes: dict[str, list[int]] = field(default_factory=dict)
    wall_ms: int = 0

    def add(self, result: CheckResult) -> None:
        outcome = str(result.details.get("outcome", result.verdict.value))
        ms = result.provenance.wall_ms
        self.total += 1
        self.wall_ms += ms
        self.outcomes.setdefault(outcome, []).append(ms)
        if outcome == "syntax_error":
            self.syntax_classes.setdefault(str(result.details.get("syntax_class")), []).append(ms)

    def count(self, outcome: str) -> int:
        return len(self.outcomes.get(outcome, []))

    def rows(self) -> list[tuple[str, int, int]]:
        """(category, count, median ms) per outcome.

        Right under `syntax_error` come its classes, indented: a breakdown of that row, not more
        problems.
        """
        rows = []
        for name, ms in sorted(self.outcomes.items()):
            rows.append((name, len(ms), int(statistics.median(ms))))
            if name == "syntax_error":
                rows += [
                    (f"  of which {kind}", len(times), int(statistics.median(times)))
                    for kind, times in sorted(self.syntax_classes.items())
                ]
        return rows


def tally(results: Iterable[CheckResult]) -> Tally:
    found = Tally()
    for result in results:
        found.add(result)
    return found


def table(found: Tally, title: str) -> Table:
    shown = Table(title=f"{title}: {found.total} problems, {found.wall_ms / 1000:.1f} s in checks")
    shown.add_column("outcome")
    shown.add_column("problems", justify="right")
    shown.add_column("median s/problem", justify="right")
    for name, count, median_ms in found.rows():
        shown.add_row(name, str(count), f"{median_ms / 1000:.2f}")
    return shown
