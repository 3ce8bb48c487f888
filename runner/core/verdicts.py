"""Every verdict's facts in one table: order, pass-ness, exit code, cache, colour, meaning.

The CLI, the cache, run summaries, the report's CSS and plots all read this table.
A verdict added to `Verdict` without its row here stops the kit at import.
So no consumer guesses.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from runner.core.exit_codes import EXIT_FAILED, EXIT_INFRA, EXIT_OK
from runner.core.models import Verdict


@dataclass(frozen=True)
class VerdictFacts:
    """What one verdict means to every part of the kit."""

    verdict: Verdict
    colour: str  # the report's badge and plot colour
    meaning: str  # one sentence for readers
    passes: bool = False  # counts as a pass
    judged: bool = True  # counts for or against the artifact, in a pass rate's denominator
    cacheable: bool = False  # rests on the artifact and the environment key alone
    exit_code: int = EXIT_FAILED  # what the verdict adds to a command's exit code

    @property
    def name(self) -> str:
        return self.verdict.value


# In the order reports and summaries list them: the artifact's verdicts, then the machine's.
ROWS = (
    VerdictFacts(
        Verdict.PASS,
        "#2e7d32",
        "checked; no placeholder; only allowed assumptions; the target theorem, if any, "
        "proved as stated",
        passes=True,
        cacheable=True,
        exit_code=EXIT_OK,
    ),
    VerdictFacts(
        Verdict.FAIL,
        "#c62828",
        "the prover rejected it, or the kit's reading refused a command in it",
        cacheable=True,
    ),
    VerdictFacts(
        Verdict.PLACEHOLDER,
        "#ef6c00",
        "an unfinished proof (Admitted, admit, sorry, CHEAT_TAC, oops, ...) in proof mode",
        cacheable=True,
    ),
    VerdictFacts(
        Verdict.AXIOM,
        "#6a1b9a",
        "relies on an assumption not in allowed_axioms",
        cacheable=True,
    ),
    VerdictFacts(
        Verdict.WRONG_STATEMENT,
        "#1565c0",
        "it checks, but the target theorem is missing or its statement differs from the target's",
        cacheable=True,
    ),
    # No pass, no fail. Not cached: a checker's failure may be the machine's (killed, starved).
    # A later re-check may judge the artifact after all.
    VerdictFacts(
        Verdict.UNVERIFIED,
        "#00838f",
        "the prover accepted it, but the independent checker failed on it: neither pass nor fail",
    ),
    # Never a pass. Not cached: it rests on a second line and the advisories data.
    # Both change apart from the environment key.
    VerdictFacts(
        Verdict.DISPUTED,
        "#212121",
        "passes on the pinned line, fails on a line where a known soundness bug is fixed",
    ),
    # Nothing ran. Not cached: refusing again costs less than a look-up.
    # It also rests on the limits.
    VerdictFacts(
        Verdict.REFUSED,
        "#757575",
        "the kit would not take the artifact (over the size limit, not UTF-8 text): nothing ran",
    ),
    # The machine's load decides these as much as the artifact: checked again, never cached.
    VerdictFacts(
        Verdict.TIMEOUT,
        "#6d4c41",
        "the time limit was hit (from the process's exit status, never from its output)",
    ),
    VerdictFacts(
        Verdict.MEMORY,
        "#ad1457",
        "the memory limit was hit (from the cgroup or rlimit events, never from its output)",
    ),
    VerdictFacts(Verdict.CRASH, "#546e7a", "the prover itself died (an anomaly, a signal)"),
    VerdictFacts(
        Verdict.INFRA_ERROR,
        "#9e9d24",
        "the kit or machine failed: retried, reported apart, never counted against the artifact",
        judged=False,
        exit_code=EXIT_INFRA,
    ),
)

FACTS: dict[Verdict, VerdictFacts] = {row.verdict: row for row in ROWS}
ORDER: tuple[Verdict, ...] = tuple(row.verdict for row in ROWS)
_unlisted = [verdict.value for verdict in Verdict if verdict not in FACTS]
if _unlisted or len(FACTS) != len(ROWS):
    raise RuntimeError(f"runner.core.verdicts: no single row for verdict(s) {_unlisted}")


def facts(verdict: Verdict | str) -> VerdictFacts:
    return FACTS[Verdict(verdict)]


def exit_code(verdicts: Iterable[Verdict]) -> int:
    """A command's exit code for these verdicts: the highest any of them adds."""
    return max((FACTS[verdict].exit_code for verdict in verdicts), default=EXIT_OK)


def pass_rate(counts: Mapping[str, int]) -> tuple[int, int]:
    """(passed, judged) for verdict counts by name; infra errors count neither way."""
    passed = sum(n for name, n in counts.items() if facts(name).passes)
    judged = sum(n for name, n in counts.items() if facts(name).judged)
    return passed, judged


def ordered(names: Iterable[str]) -> list[str]:
    """Verdict names in the table's order."""
    present = set(names)
    return [verdict.value for verdict in ORDER if verdict.value in present]
