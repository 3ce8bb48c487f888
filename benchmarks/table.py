"""One benchmark table: each benchmark module's `rows(quick)` gives Rows; `python -m benchmarks`
prints them as one markdown table and writes the same as JSON under benchmarks/results/.

Every row is measured side by side in one run, on one corpus: the naive method (a fresh prover
process per file, as public evaluation scripts do) against the kit. Two kinds of numbers:

- end to end: the whole corpus through ONE kit command (a fresh process: boot, Require prefixes,
  every check), against the naive method's total for the same files; and the first check's
  latency on a machine where nothing is warm;
- steady state: the median per check once workers are warm, for each way the kit checks.

The ratio columns are naive time / kit time (higher is better). Nothing here is asserted: speed
targets are read off this table, never timed in a test.
"""

from __future__ import annotations

import os
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

KIT_COLUMNS = ("local warm", "docker warm", "docker strict")


@dataclass
class Row:
    prover: str
    corpus: str
    checks: int
    baseline: str  # what the naive method is, e.g. "coqc per file"
    baseline_ms: float | None  # naive median per check
    kit_ms: dict[str, float | None] = field(default_factory=dict)  # KIT_COLUMNS → median ms
    identical: bool | None = None  # verdicts identical to the baseline's (None: not compared)
    note: str = ""
    # End to end, boot included: the naive total for the corpus, and the kit's one command.
    baseline_total_s: float | None = None
    kit_total_s: float | None = None
    kit_total_how: str = ""  # which command, e.g. "prooflock check --backend local (100 files)"
    first_check_s: float | None = None  # one file, nothing warm: boot included

    def ratio(self) -> str:
        best = self.kit_ms.get("local warm")
        if not best or not self.baseline_ms:
            return "-"
        return f"{self.baseline_ms / best:.1f}x"

    def end_to_end_ratio(self) -> str:
        if not self.kit_total_s or not self.baseline_total_s:
            return "-"
        return f"{self.baseline_total_s / self.kit_total_s:.1f}x"

    def checks_per_core_s(self) -> str:
        """Steady-state checks per second per core, from the local warm median."""
        best = self.kit_ms.get("local warm")
        return f"{1000 / best:.1f}" if best else "-"

    def as_json(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "speedup_local_warm": self.ratio(),
            "speedup_end_to_end": self.end_to_end_ratio(),
            "checks_per_core_s": self.checks_per_core_s(),
            "cores": os.cpu_count(),
        }


def median_ms(seconds: list[float]) -> float:
    return round(statistics.median(seconds) * 1000, 1)


def _cell(value: float | None, unit: float = 1.0) -> str:
    return "-" if value is None else f"{value * unit:.0f}"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def markdown(rows: list[Row]) -> str:
    head = [
        "prover",
        "corpus",
        "n",
        "naive total (s)",
        "kit, one command (s)",
        "end to end",
        "first check (s)",
        "naive per check (ms)",
        *(f"{c} (ms)" for c in KIT_COLUMNS),
        "steady state",
        "checks/s/core",
        "identical verdicts",
        "note",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = [
            row.prover,
            row.corpus,
            str(row.checks),
            _seconds(row.baseline_total_s),
            _seconds(row.kit_total_s) + (f" ({row.kit_total_how})" if row.kit_total_how else ""),
            row.end_to_end_ratio(),
            _seconds(row.first_check_s),
            f"{_cell(row.baseline_ms)} ({row.baseline})" if row.baseline else "-",
            *(_cell(row.kit_ms.get(c)) for c in KIT_COLUMNS),
            row.ratio(),
            row.checks_per_core_s(),
            {True: "yes", False: "NO", None: "-"}[row.identical],
            row.note,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
