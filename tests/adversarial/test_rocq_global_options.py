"""A library's `Global` settings never reach the kit's target comparison or its assumption audit.

`Require`ing a compiled file runs its `Global Set`/`Global Unset` commands in the requiring
session. The cold path's drivers require the file; the warm worker reads the compiled library
without running them. Given a file that sets one (an unchecked universe hierarchy, a proof mode
without tactics), both paths must give the verdict the file earns, and the same one: a wrong
target stays `wrong_statement`, an honest file stays `pass`.
"""

from __future__ import annotations

import pytest

from runner.core.models import CheckRequest, Verdict
from tests.support.rocq_cheats import BACKENDS, rocq_checker

# A theorem about every `Set`, offered for a target about every `Prop`: only an unchecked
# universe hierarchy lets constr_eq equate the two sorts.
ABOUT_SET = "Theorem main : forall T : Set, T -> T.\nProof. auto. Qed.\n"
ABOUT_PROP = {"name": "main", "statement": "forall T : Prop, T -> T"}
HONEST = "Lemma main : 1 + 1 = 2.\nProof. reflexivity. Qed.\n"
TWO = {"name": "main", "statement": "1 + 1 = 2"}
# A library that brings `classic` into scope without using it: only Print Assumptions tells.
CLASSICAL_UNUSED = "Require Import Classical.\n" + HONEST

# name → (file, request fields, the verdict it earns)
FILES: dict[str, tuple[str, dict, Verdict]] = {
    "unchecked-universes-wrong-target": (
        ABOUT_SET + "Global Unset Universe Checking.\n",
        {"target": ABOUT_PROP},
        Verdict.WRONG_STATEMENT,
    ),
    "unchecked-universes-wrong-target-statement-mode": (
        "Global Unset Universe Checking.\n" + ABOUT_SET,
        {"target": ABOUT_PROP, "mode": "statement"},
        Verdict.WRONG_STATEMENT,
    ),
    "unchecked-universes-right-target": (
        HONEST + "Global Unset Universe Checking.\n",
        {"target": TWO},
        Verdict.PASS,
    ),
    "noedit-proof-mode-target": (
        HONEST + 'Global Set Default Proof Mode "Noedit".\n',
        {"target": TWO},
        Verdict.PASS,
    ),
    "noedit-proof-mode-audit": (
        CLASSICAL_UNUSED + 'Global Set Default Proof Mode "Noedit".\n',
        {},
        Verdict.PASS,
    ),
    # Settings that change how later sentences elaborate or what is printed.
    "program-polymorphism-primitive-projections": (
        CLASSICAL_UNUSED + "Global Set Program Mode.\nGlobal Set Universe Polymorphism.\n"
        "Global Set Primitive Projections.\nGlobal Set Printing All.\nGlobal Unset Guard Checking.\n",
        {"target": TWO},
        Verdict.PASS,
    ),
    "warnings-as-errors": (
        CLASSICAL_UNUSED + 'Global Set Warnings "+all".\n',
        {"target": TWO},
        Verdict.PASS,
    ),
    "ltac2-proof-mode-audit": (
        "From Ltac2 Require Import Ltac2.\nRequire Import Classical.\n"
        "Lemma main : 1 + 1 = 2.\nProof. reflexivity. Qed.\n",
        {"target": TWO},
        Verdict.PASS,
    ),
}


@pytest.fixture(scope="module", params=BACKENDS)
def checker(request, tmp_path_factory):
    with rocq_checker(request.param, tmp_path_factory.mktemp("kit")) as checker:
        yield checker


@pytest.mark.parametrize("name", sorted(FILES))
def test_a_files_global_settings_reach_neither_path(name, checker):
    text, fields, earned = FILES[name]
    request = CheckRequest(prover="rocq", name=f"{name}.v", content=text, **fields)
    cold = checker.check_one(request, cold=True)
    warm = checker.check_one(request)
    assert cold.provenance.extra["rocq_path"] == "cold"
    assert warm.provenance.extra["rocq_path"].startswith("worker:")
    assert cold.verdict is earned, (cold.diagnostics, cold.assumptions)
    assert (warm.verdict, warm.result_digest) == (cold.verdict, cold.result_digest), (
        warm.diagnostics,
        cold.diagnostics,
    )


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FILES))
def test_the_other_line_gives_the_verdict_earned_too(name, checker):
    """Coq 8.20.1 has no warm worker: its every check is the cold path's."""
    if checker.settings.backend != "docker":
        pytest.skip("the other line is an image")
    text, fields, earned = FILES[name]
    request = CheckRequest(
        prover="rocq", name=f"{name}.v", content=text, line="rocq-8.20", **fields
    )
    result = checker.check_one(request)
    assert result.provenance.extra["rocq_path"] == "cold"
    assert result.verdict is earned, (result.diagnostics, result.assumptions)
