"""AlphaGeometry records: the error taxonomy, and each failing problem's clause at fault.

The taxonomy counts outcomes, and syntax errors by class.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from runner.report.load import Run
from runner.report.text import visible, visible_block

# NL2AGBench's categories first, then the kit's additions, then the rest by name.
OUTCOME_ORDER = (
    "solved",
    "unsolved",
    "syntax_error",
    "logic_error",
    "format_error",
    "option_error",
    "timeout",
    "memory",
    "engine_error",
)


@dataclass
class FailingProblem:
    index: int
    artifact: str
    outcome: str
    syntax_class: str
    clause_index: str
    clause_text: str
    reason: str


@dataclass
class GeometryView:
    total: int = 0
    outcomes: list[tuple[str, int]] = field(default_factory=list)
    syntax_classes: list[tuple[str, int]] = field(default_factory=list)
    failing: list[FailingProblem] = field(default_factory=list)


def geometry_view(runs: list[Run]) -> GeometryView | None:
    """The taxonomy of every record whose details carry an AlphaGeometry `outcome`."""
    outcomes: Counter[str] = Counter()
    classes: Counter[str] = Counter()
    view = GeometryView()
    for index, (_, result) in enumerate(runs):
        outcome = result.details.get("outcome")
        if not isinstance(outcome, str):
            continue
        view.total += 1
        outcomes[outcome] += 1
        if outcome == "syntax_error":
            classes[str(result.details.get("syntax_class"))] += 1
        if outcome != "solved":
            view.failing.append(_failing(index, result.artifact, outcome, result.details))
    if not view.total:
        return None
    ordered = sorted(outcomes.items(), key=lambda item: _order(item[0]))
    view.outcomes = [(visible(name), n) for name, n in ordered]
    view.syntax_classes = [(visible(name), n) for name, n in sorted(classes.items())]
    return view


def _order(outcome: str) -> tuple[int, str]:
    known = outcome in OUTCOME_ORDER
    return (OUTCOME_ORDER.index(outcome) if known else len(OUTCOME_ORDER), outcome)


def _failing(index: int, artifact: str, outcome: str, details: dict[str, object]) -> FailingProblem:
    clause = details.get("clause")
    clause_index = clause_text = ""
    if isinstance(clause, dict):
        clause_index = visible(clause.get("index", ""))
        clause_text = visible(clause.get("text", ""))
    syntax_class = details.get("syntax_class")
    return FailingProblem(
        index=index,
        artifact=visible(artifact),
        outcome=visible(outcome),
        syntax_class=visible(syntax_class) if syntax_class is not None else "",
        clause_index=clause_index,
        clause_text=clause_text,
        reason=visible_block(details.get("reason") or ""),
    )
