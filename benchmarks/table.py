"""One benchmark table: each benchmark module's `rows(quick)` gives Rows; `python -m benchmarks`
prints them as one markdown table and writes the same as JSON under benchmarks/results/.

Every row is measured side by side in one run: the naive baseline (a fresh prover process per
file, as public evaluation scripts do) and the kit's ways of checking, on the same corpus.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

KIT_COLUMNS = ("local warm", "docker warm", "docker strict")


@dataclass
class Row:
    prover: str
    corpus: str
    checks: int
    baseline: str  # what the naive baseline is, e.g. "coqc per file"
    baseline_ms: float | None
    kit_ms: dict[str, float | None] = field(default_factory=dict)  # KIT_COLUMNS → median ms
    identical: bool | None = None  # verdicts identical to the baseline's (None: not compared)
    note: str = ""

    def ratio(self) -> str:
        best = self.kit_ms.get("local warm")
        if not best or not self.baseline_ms:
            return "-"
        return f"{self.baseline_ms / best:.1f}x"

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "speedup_local_warm": self.ratio()}


def median_ms(seconds: list[float]) -> float:
    return round(statistics.median(seconds) * 1000, 1)


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def markdown(rows: list[Row]) -> str:
    head = [
        "prover",
        "corpus",
        "n",
        "naive baseline (ms)",
        *(f"{c} (ms)" for c in KIT_COLUMNS),
        "baseline / local warm",
        "identical verdicts",
        "note",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = [
            row.prover,
            row.corpus,
            str(row.checks),
            f"{_cell(row.baseline_ms)} ({row.baseline})" if row.baseline else "-",
            *(_cell(row.kit_ms.get(c)) for c in KIT_COLUMNS),
            row.ratio(),
            {True: "yes", False: "NO", None: "-"}[row.identical],
            row.note,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
