"""newclid (the default engine) classifies malformed problems exactly as AlphaGeometry does.

The cases are JGEX problems broken the ways hand-written and LLM-written problems break:
whitespace, separators, arities, unknown names, redefined points, a point twice in one clause,
goals naming undefined points, empty clauses, stray `;` and `?`, case, unicode. AlphaGeometry's
answer (ag4masses in the `alphageometry` image) is the reference. Where that image is present
both engines run; where it is not (CI cannot build it: it needs GitHub or a vendored bundle),
newclid is compared with ag4masses' answers recorded in
tests/artifacts/alphageometry/parity_expected.jsonl by a real ag4masses run (see the README
there). Either way there is a reference: without the table and without the image, the test fails.

    PROOFLOCK_PARITY_RECORD=1 pytest tests/test_alphageometry_parity.py   # rewrite the table
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from runner.checker import Checker
from runner.models import CheckRequest, CheckResult
from runner.provers import alphageometry
from runner.settings import Settings
from tests.helpers import ARTIFACTS
from tests.test_alphageometry import shared_data

TABLE = ARTIFACTS / "alphageometry" / "parity_expected.jsonl"
RECORD = os.environ.get("PROOFLOCK_PARITY_RECORD") == "1"
# JGEX problems both engines solve in seconds; every mutation is applied to each of them.
BASES = (
    "examples/complete2/000/complete_007_7_Book_LLL_L194-2.gex",
    "examples/complete2/008/complete_013_7_Book_00EE_07_E057-44.gex",
    "examples/complete2/008/complete_008_ex-gao_ex160_205.gex",
)
TIMEOUT_S = 60


# -- the generated cases ---------------------------------------------------------------------------

Mutation = Callable[[list[str], str], str | None]


def _problem(clauses: list[str], goal: str) -> str:
    return "; ".join(clauses) + " ? " + goal


def _last(clauses: list[str], edit: Callable[[str], str]) -> list[str]:
    return [*clauses[:-1], edit(clauses[-1])]


def _with_comma(clauses: list[str]) -> int | None:
    return next((i for i, c in enumerate(clauses) if ", " in c), None)


def _replace_at(clauses: list[str], index: int | None, old: str, new: str) -> list[str] | None:
    if index is None or old not in clauses[index]:
        return None
    edited = list(clauses)
    edited[index] = clauses[index].replace(old, new, 1)
    return edited


def _points(clauses: list[str]) -> list[str]:
    """The points the clauses define, in order."""
    return [p for c in clauses for p in c.split(" = ")[0].split(" ")]


def _rename_points(clauses: list[str], goal: str, name: Callable[[str], str]) -> str:
    """The problem with every point renamed consistently (constructions and numbers kept)."""
    points = set(_points(clauses))

    def words(text: str) -> str:
        return " ".join(name(w) if w in points else w for w in text.split(" "))

    renamed = []
    for clause in clauses:
        head, body = clause.split(" = ")
        renamed.append(
            words(head) + " = " + ", ".join(words(c) for c in body.split(", "))
        )
    return _problem(renamed, words(goal))


def _first_use(clauses: list[str], goal: str, edit: Callable[[str], str]) -> str | None:
    """The problem with the first point argument of the last clause's construction edited."""
    head, body = clauses[-1].split(" = ")
    name, *args = body.split(", ")[0].split(" ")
    defined = set(_points(clauses[:-1]))
    for i, arg in enumerate(args):
        if arg in defined:
            args[i] = edit(arg)
            rest = body.split(", ")[1:]
            return _problem([*clauses[:-1], f"{head} = " + ", ".join([" ".join([name, *args]), *rest])], goal)
    return None


GREEK = "αβγδεζηθικλμνξοπρστυφχψω"

MUTATIONS: dict[str, Mutation] = {
    # whitespace
    "ws_double_space": lambda c, g: _problem(
        _last(c, lambda t: t.replace(" ", "  ", 3).replace("  ", " ", 2)), g
    ),
    "ws_tab_after_equals": lambda c, g: _problem(_last(c, lambda t: t.replace(" = ", " =\t", 1)), g),
    "ws_nbsp_after_equals": lambda c, g: _problem(_last(c, lambda t: t.replace(" = ", " =\u00a0", 1)), g),
    "ws_space_before_semicolon": lambda c, g: " ; ".join(c) + " ? " + g,
    "ws_no_space_after_semicolon": lambda c, g: ";".join(c) + " ? " + g,
    "ws_space_before_comma": lambda c, g: (
        None if (e := _replace_at(c, _with_comma(c), ", ", " , ")) is None else _problem(e, g)
    ),
    "ws_double_space_in_goal": lambda c, g: _problem(c, g.replace(" ", "  ", 1)),
    "ws_trailing_space": lambda c, g: _problem(c, g) + " ",
    # separators
    "sep_comma_without_space": lambda c, g: (
        None if (e := _replace_at(c, _with_comma(c), ", ", ",")) is None else _problem(e, g)
    ),
    "sep_semicolon_for_comma": lambda c, g: (
        None if (e := _replace_at(c, _with_comma(c), ", ", "; ")) is None else _problem(e, g)
    ),
    "sep_comma_for_semicolon": lambda c, g: ", ".join(c[:2]) + "; " + _problem(c[2:], g)
    if len(c) > 2
    else None,
    "sep_equals_without_spaces": lambda c, g: _problem(_last(c, lambda t: t.replace(" = ", "=", 1)), g),
    "sep_colon_for_equals": lambda c, g: _problem(_last(c, lambda t: t.replace(" = ", " : ", 1)), g),
    "sep_period_at_end": lambda c, g: _problem(c, g + "."),
    # stray ; and ?
    "stray_semicolon_before_goal": lambda c, g: _problem(_last(c, lambda t: t + ";"), g),
    "stray_semicolon_after_goal": lambda c, g: _problem(c, g + ";"),
    "stray_question_twice": lambda c, g: _problem(c, g) + " ? " + g,
    "stray_question_after_goal": lambda c, g: _problem(c, g + " ?"),
    "stray_question_glued": lambda c, g: "; ".join(c) + "? " + g,
    "stray_question_in_clause": lambda c, g: _problem([c[0] + "?", *c[1:]], g),
    # arities
    "arity_construction_missing_point": lambda c, g: _problem(_last(c, lambda t: t.rsplit(" ", 1)[0]), g),
    "arity_construction_extra_point": lambda c, g: _problem(_last(c, lambda t: t + " " + _points(c)[0]), g),
    "arity_new_point_omitted": lambda c, g: _problem(
        _last(c, lambda t: t.split(" = ")[0] + " = " + ", ".join(
            " ".join([x.split(" ")[0], *x.split(" ")[2:]]) for x in t.split(" = ")[1].split(", ")
        )), g,
    ),
    "arity_clause_names_two_points": lambda c, g: _problem(_last(c, lambda t: t.replace(" = ", " zz = ", 1)), g),
    "arity_goal_missing_point": lambda c, g: _problem(c, g.rsplit(" ", 1)[0]),
    "arity_goal_extra_point": lambda c, g: _problem(c, g + " " + _points(c)[0]),
    "arity_goal_without_points": lambda c, g: _problem(c, g.split(" ")[0]),
    # unknown names
    "unknown_construction": lambda c, g: _problem(_last(c, lambda t: t.replace(" = ", " = x", 1)), g),
    "unknown_point": lambda c, g: _problem(_last(c, lambda t: t.rsplit(" ", 1)[0] + " zz"), g),
    "unknown_goal_predicate": lambda c, g: _problem(c, "perpendicular " + g.split(" ", 1)[1]),
    "unknown_goal_predicate_coll": lambda c, g: _problem(c, "collinear " + g.split(" ", 1)[1]),
    "goal_undefined_point": lambda c, g: _problem(c, g.rsplit(" ", 1)[0] + " zz"),
    "goal_number_for_point": lambda c, g: _problem(c, g.rsplit(" ", 1)[0] + " 1"),
    # redefinitions
    "redefine_last_clause": lambda c, g: _problem([*c, c[-1]], g),
    "redefine_first_clause": lambda c, g: _problem([*c, c[0]], g),
    "redefine_point_as_free": lambda c, g: _problem([*c, f"{_points(c)[-1]} = free {_points(c)[-1]}"], g),
    "redefine_point_as_midpoint": lambda c, g: _problem(
        [*c, "{0} = midpoint {0} {1} {2}".format(_points(c)[-1], *_points(c)[:2])], g
    ),
    "redefine_point_then_use": lambda c, g: _problem(
        [*c[:-1], "{0} = midpoint {0} {1} {2}".format(_points(c)[0], *_points(c)[1:3]), c[-1]], g
    ),
    "redefine_inside_clause": lambda c, g: _problem(
        _last(c, lambda t: " ".join([_points(c)[0], *t.split(" = ")[0].split(" ")]) + " = " + t.split(" = ")[1]), g
    ),
    # a point twice in one clause
    "duplicate_point_in_first_clause": lambda c, g: _problem(
        [c[0].replace(" " + _points(c)[1] + " ", " " + _points(c)[0] + " ", 1), *c[1:]], g
    ),
    "duplicate_new_point": lambda c, g: _problem(
        _last(c, lambda t: t.split(" = ")[0] + " " + t.split(" = ")[0] + " = " + t.split(" = ")[1]), g
    ),
    "duplicate_argument": lambda c, g: _first_use(c, g, lambda a: a + " " + a),
    # empty clauses
    "empty_clause": lambda c, g: _problem([c[0], "", *c[1:]], g),
    "bare_equals_clause": lambda c, g: _problem([c[0], " =", *c[1:]], g),
    "clause_without_construction": lambda c, g: _problem([*c[:-1], c[-1].split(" = ")[0] + " =", c[-1]], g),
    "empty_construction": lambda c, g: (
        None if (e := _replace_at(c, _with_comma(c), ", ", ", , ")) is None else _problem(e, g)
    ),
    # case
    "case_construction_capitalised": lambda c, g: _problem(
        _last(c, lambda t: t.split(" = ")[0] + " = " + t.split(" = ")[1][:1].upper() + t.split(" = ")[1][1:]), g
    ),
    "case_goal_predicate_capitalised": lambda c, g: _problem(c, g[:1].upper() + g[1:]),
    "case_points_uppercase": lambda c, g: _rename_points(c, g, str.upper),
    "case_one_use_uppercase": lambda c, g: _first_use(c, g, str.upper),
    # unicode
    "unicode_greek_points": lambda c, g: _rename_points(
        c, g, lambda p: GREEK[sorted(set(_points(c))).index(p) % len(GREEK)]
    ),
    "unicode_fullwidth_semicolon": lambda c, g: "\uff1b ".join(c) + " ? " + g,
    "unicode_zero_width_space": lambda c, g: _first_use(c, g, lambda a: a + "\u200b"),
    "unicode_prime_point": lambda c, g: _rename_points(
        c, g, lambda p: p + "\u2032" if p == _points(c)[-1] else p
    ),
    "digits_point_name": lambda c, g: _rename_points(
        c, g, lambda p: "1" if p == _points(c)[-1] else p
    ),
    "coordinates_malformed": lambda c, g: _problem(
        _last(c, lambda t: t.replace(" = ", "@1_x = ", 1)), g
    ),
    "coordinates_given": lambda c, g: _problem([c[0].replace(" ", "@0.5_0.25 ", 1), *c[1:]], g),
}


def base_problems() -> list[tuple[str, str]]:
    data = shared_data()
    assert data is not None, "AlphaGeometry's jgex_ag_231.txt is needed to generate the cases"
    pairs = dict(
        (title, text.splitlines()[1])
        for title, text in alphageometry.split(
            "jgex_ag_231.txt", (data / "jgex_ag_231.txt").read_text()
        )
    )
    return [(title, pairs[title]) for title in BASES]


def generated_cases() -> list[dict[str, str]]:
    """Every mutation of every base problem (a mutation that does not apply is left out)."""
    cases = []
    for n, (title, line) in enumerate(base_problems()):
        head, goal = line.split(" ? ")
        for name, mutate in MUTATIONS.items():
            mutated = mutate(head.split("; "), goal)
            if mutated is not None and mutated != line:
                cases.append({"case": f"{name}:{n}", "base": title, "line": mutated})
    return cases


# -- running the engines ---------------------------------------------------------------------------


def observed(result: CheckResult) -> dict[str, object]:
    """What must agree: the outcome, and the syntax class or logic error and its clause."""
    details = result.details
    clause = details.get("clause")
    return {
        "outcome": details.get("outcome", result.verdict.value),
        "syntax_class": details.get("syntax_class"),
        "logic": details.get("logic"),
        "index": clause.get("index") if isinstance(clause, dict) else None,
    }


def run_engine(
    cases: list[dict[str, str]], engine: str, backend: str, checkpoints: Path
) -> dict[str, CheckResult]:
    settings = Settings(
        backend=backend,
        isolation="warm",
        cache=False,
        checkpoint_dir=checkpoints,
        timeout=TIMEOUT_S,
        retries=0,
        workers=2,
    )
    requests = [
        CheckRequest(
            prover="alphageometry",
            name=case["case"],
            content=case["line"] + "\n",
            options={"engine": engine},
        )
        for case in cases
    ]
    with Checker(settings) as checker:
        return {result.artifact: result for result in checker.map(requests)}
