"""Rocq verdicts on a corpus of real files, checked by the real coqc."""

from __future__ import annotations

import pytest

from runner import run_itp
from runner.errors import InfraFailure
from runner.models import Verdict
from tests.helpers import ROCQ_EXPECTED, artifact

EXPECTED = ROCQ_EXPECTED


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_proof_mode_verdicts(name, settings):
    result = run_itp("rocq", artifact("rocq", name), name=name, settings=settings)
    assert result.verdict is EXPECTED[name], result.diagnostics


@pytest.mark.parametrize(
    ("name", "named"),
    [
        ("hidden_axiom.v", ["Artifact.Private_escape", "Artifact.lemma_subproof"]),
        ("unsafe_guard.v", ["(assumed guarded)"]),
        ("universe_unchecked.v", ["Artifact.relies_on_it (unsafe universe hierarchy)"]),
    ],
)
def test_cheats_are_named_in_the_assumptions(name, named, settings):
    result = run_itp("rocq", artifact("rocq", name), name=name, settings=settings)
    for fragment in named:
        assert any(fragment in a for a in result.assumptions), result.assumptions
        assert fragment in result.diagnostics[-1].message


def test_failing_tactic_is_located_with_coq_message(settings):
    result = run_itp("rocq", artifact("rocq", "fail_tactic.v"), settings=settings)
    [error] = [d for d in result.diagnostics if d.severity == "error"]
    assert (error.line, error.context) == (3, "reflexivity")
    assert 'Unable to unify "3" with "1 + 1"' in error.message


def test_user_axiom_is_named_in_assumptions(settings):
    result = run_itp("rocq", artifact("rocq", "user_axiom.v"), settings=settings)
    assert result.assumptions == ["Artifact.magic"]


def test_admitted_lemma_is_a_placeholder_even_when_used_by_a_finished_one(settings):
    result = run_itp("rocq", artifact("rocq", "admitted.v"), settings=settings)
    assert result.verdict is Verdict.PLACEHOLDER
    assert "Artifact.hard" in result.assumptions


def test_allowed_axiom_passes_but_a_short_name_never_whitelists_the_artifacts_own(settings):
    allowed = run_itp(
        "rocq", artifact("rocq", "classical.v"), allowed_axioms=["classic"], settings=settings
    )
    assert allowed.verdict is Verdict.PASS
    own = run_itp("rocq", artifact("rocq", "user_axiom.v"), allowed_axioms=["magic"], settings=settings)
    assert own.verdict is Verdict.AXIOM
    full = run_itp(
        "rocq", artifact("rocq", "user_axiom.v"), allowed_axioms=["Artifact.magic"], settings=settings
    )
    assert full.verdict is Verdict.PASS


def test_statement_mode_allows_placeholders_but_still_type_checks(settings):
    assert run_itp("rocq", artifact("rocq", "admitted.v"), mode="statement", settings=settings).verdict is Verdict.PASS
    assert run_itp("rocq", artifact("rocq", "fail_syntax.v"), mode="statement", settings=settings).verdict is Verdict.FAIL


def test_diverging_computation_times_out(settings):
    result = run_itp("rocq", artifact("rocq", "diverge.v"), timeout=3, settings=settings)
    assert result.verdict is Verdict.TIMEOUT
    assert result.provenance.wall_ms < 30_000


def test_placeholder_words_in_comments_and_strings_do_not_count(settings):
    source = (
        "Require Import String.\n(* Admitted (* admit *) *)\n"
        'Definition s := "Admitted ""admit"""%string.\nLemma ok : True. Proof. exact I. Qed.\n'
    )
    assert run_itp("rocq", source, settings=settings).verdict is Verdict.PASS


def test_missing_coqc_stops_at_once_as_an_infra_failure(settings, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(InfraFailure, match="coqc is not installed"):
        run_itp("rocq", artifact("rocq", "pass_arith.v"), settings=settings)
