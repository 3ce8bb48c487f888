"""Rocq verdicts on a corpus of real files, checked by the real coqc and coqchk."""

from __future__ import annotations

import pytest

from runner import run_itp
from runner.backends.base import Completed
from runner.core.errors import InfraFailure
from runner.core.models import CheckRequest, Trust, Verdict
from runner.provers.common.server import ServerFailed
from runner.provers.rocq import control, judging, report, source, worker
from tests.helpers import ROCQ_EXPECTED, artifact, resolved

EXPECTED = ROCQ_EXPECTED


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_proof_mode_verdicts(name, settings):
    result = run_itp("rocq", artifact("rocq", name), name=name, settings=settings)
    assert result.verdict is EXPECTED[name], result.diagnostics


@pytest.mark.parametrize(
    ("name", "named"),
    [
        ("hidden_axiom.v", ["Artifact.Private_escape", "Artifact.lemma_subproof"]),
        ("unsafe_guard.v", ["Artifact.spin (assumed guarded)"]),
        ("universe_unchecked.v", ["Artifact.relies_on_it (unsafe universe hierarchy)"]),
        ("classical.v", ["Coq.Logic.Classical_Prop.classic"]),
    ],
)
def test_cheats_are_named_in_the_assumptions_by_their_full_names(name, named, settings):
    result = run_itp("rocq", artifact("rocq", name), name=name, settings=settings)
    for fragment in named:
        assert fragment in result.assumptions, result.assumptions
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
    own = run_itp(
        "rocq", artifact("rocq", "user_axiom.v"), allowed_axioms=["magic"], settings=settings
    )
    assert own.verdict is Verdict.AXIOM
    full = run_itp(
        "rocq",
        artifact("rocq", "user_axiom.v"),
        allowed_axioms=["Artifact.magic"],
        settings=settings,
    )
    assert full.verdict is Verdict.PASS


def test_a_library_axiom_loaded_but_unused_is_not_an_assumption(settings):
    source_text = "Require Import Classical.\nLemma t : True.\nProof. exact I. Qed.\n"
    result = run_itp("rocq", source_text, settings=settings)
    assert (result.verdict, result.assumptions) == (Verdict.PASS, [])


def test_statement_mode_allows_placeholders_but_still_type_checks(settings):
    assert (
        run_itp("rocq", artifact("rocq", "admitted.v"), mode="statement", settings=settings).verdict
        is Verdict.PASS
    )
    assert (
        run_itp(
            "rocq", artifact("rocq", "fail_syntax.v"), mode="statement", settings=settings
        ).verdict
        is Verdict.FAIL
    )


@pytest.mark.slow
def test_diverging_computation_times_out(settings):
    result = run_itp("rocq", artifact("rocq", "diverge.v"), timeout=3, settings=settings)
    assert result.verdict is Verdict.TIMEOUT
    assert result.provenance.wall_ms < 30_000


def test_placeholder_words_in_comments_and_strings_do_not_count(settings):
    text = (
        "Require Import String.\n(* Admitted (* admit *) *)\n"
        'Definition s := "Admitted ""admit"""%string.\nLemma ok : True. Proof. exact I. Qed.\n'
    )
    assert run_itp("rocq", text, settings=settings).verdict is Verdict.PASS


def test_printed_text_never_decides_a_verdict(settings):
    """An artifact can print "Anomaly" or "Out of memory"; only how coqc ended counts."""
    text = (
        "Require Import String.\nOpen Scope string_scope.\n"
        'Check "Anomaly: Out of memory. Cannot allocate memory".\n'
        "Lemma wrong : 1 = 2.\nProof. reflexivity. Qed.\n"
    )
    assert run_itp("rocq", text, settings=settings).verdict is Verdict.FAIL
    passing = text.replace("1 = 2", "2 = 2")
    assert run_itp("rocq", passing, settings=settings).verdict is Verdict.PASS


def test_missing_coqc_stops_at_once_as_an_infra_failure(settings, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(InfraFailure, match="coqc is not installed"):
        run_itp("rocq", artifact("rocq", "pass_arith.v"), settings=settings)


# -- targets ---------------------------------------------------------------------------------

ADD_COMM = (
    "Require Import Arith.\n"
    "Theorem add_comm' : forall n m : nat, n + m = m + n.\n"
    "Proof. intros. apply Nat.add_comm. Qed.\n"
)


def test_a_target_written_differently_but_elaborating_to_the_same_statement_passes(settings):
    target = {"name": "add_comm'", "statement": "forall a b, (a + b : nat) = b + a"}
    assert run_itp("rocq", ADD_COMM, target=target, settings=settings).verdict is Verdict.PASS


def test_a_provable_but_weaker_statement_is_wrong_statement(settings):
    text = "Theorem t : 2 + 2 = 4.\nProof. reflexivity. Qed.\n"
    result = run_itp("rocq", text, target={"name": "t", "statement": "4 = 4"}, settings=settings)
    assert result.verdict is Verdict.WRONG_STATEMENT
    message = result.diagnostics[-1].message
    assert "`4 = 4`" in message and "2 + 2 = 4" in message


def test_a_missing_name_is_wrong_statement(settings):
    result = run_itp(
        "rocq", ADD_COMM, target={"name": "add_comm", "statement": "True"}, settings=settings
    )
    assert result.verdict is Verdict.WRONG_STATEMENT
    assert "no theorem named `add_comm`" in result.diagnostics[-1].message


def test_an_empty_file_with_a_target_is_wrong_statement(settings):
    result = run_itp("rocq", "", target={"name": "t", "statement": "True"}, settings=settings)
    assert result.verdict is Verdict.WRONG_STATEMENT


def test_a_statement_over_prop_is_not_a_statement_over_type(settings):
    text = "Theorem t : forall (A : Prop) (x : A), x = x.\nProof. reflexivity. Qed.\n"
    target = {"name": "t", "statement": "forall (A : Type) (x : A), x = x"}
    assert (
        run_itp("rocq", text, target=target, settings=settings).verdict is Verdict.WRONG_STATEMENT
    )


def test_a_target_cannot_smuggle_a_command(settings):
    target = {"name": "add_comm'", "statement": 'True. Redirect "x" Print nat'}
    result = run_itp("rocq", ADD_COMM, target=target, settings=settings)
    assert result.verdict is Verdict.WRONG_STATEMENT
    assert "single Coq term" in result.diagnostics[-1].message


def test_the_ladder_puts_a_placeholder_before_a_wrong_statement(settings):
    text = "Theorem t : 1 = 2.\nAdmitted.\n"
    result = run_itp("rocq", text, target={"name": "t", "statement": "2 = 2"}, settings=settings)
    assert result.verdict is Verdict.PLACEHOLDER


def test_a_theorem_in_a_module_is_named_by_its_path(settings):
    text = "Module M.\nLemma x : True.\nProof. exact I. Qed.\nEnd M.\n"
    result = run_itp("rocq", text, target={"name": "M.x", "statement": "True"}, settings=settings)
    assert result.verdict is Verdict.PASS


# -- reading Coq's reports --------------------------------------------------------------------

CHECKER_OUTPUT = """\
Checking library: Artifact
  checking module: Artifact
  checking cst:Artifact.magic
  checking module type: Artifact.T
  checking cst:Artifact.T.x
  checking module: Artifact.F
  checking module type: Artifact.X
  checking cst:Artifact.X.x
  checking cst:Artifact.F.y
  checking module: Artifact.N
  checking cst:Artifact.N.y
Modules were successfully checked

CONTEXT SUMMARY
===============

* Theory: Set is predicative

* Axioms:
    Coq.Logic.Classical_Prop.classic
    Artifact.magic

* Constants/Inductives relying on type-in-type: <none>

* Constants/Inductives relying on unsafe (co)fixpoints:
    Artifact.spin

* Inductives whose positivity is assumed: <none>
"""


def test_coqchk_roots_leave_out_module_types_and_functor_bodies():
    checker = report.read_checker(CHECKER_OUTPUT)
    assert checker.roots() == ["Artifact.magic", "Artifact.N.y"]
    assert checker.axioms == {"Coq.Logic.Classical_Prop.classic", "Artifact.magic"}
    assert checker.flagged() == ["Artifact.spin (assumed guarded)"]


def test_print_assumptions_names_map_to_coqchk_names_or_the_audit_is_inconsistent():
    checker = report.read_checker(CHECKER_OUTPUT)
    printed = "Axioms:\nArtifact.magic : forall P : Prop, P\nClassical_Prop.classic : forall P : Prop, P \\/ ~ P\n"
    assert report.read_assumptions(printed, checker) == set(checker.axioms)
    with pytest.raises(report.Inconsistent):
        report.read_assumptions("Axioms:\nclassic2 : False\n", checker)
    with pytest.raises(report.Inconsistent):
        report.read_assumptions("Search Output Name Only is on\n", checker)


def test_coqchks_own_axioms_count_whatever_print_assumptions_says():
    checker = report.read_checker(CHECKER_OUTPUT)
    audit = report.Audit(checker, roots=["Artifact.magic"], used=set())
    assert report.assumptions(audit) == ["Artifact.magic", "Artifact.spin (assumed guarded)"]
    unread = report.Audit(checker, roots=["Artifact.magic"], used=None)
    assert report.assumptions(unread) == [
        "Artifact.magic",
        "Coq.Logic.Classical_Prop.classic",
        "Artifact.spin (assumed guarded)",
    ]
    unknown = report.Audit(checker, roots=["Artifact.magic"], used={"Coq.Init.Logic.cheat"})
    assert report.assumptions(unknown) == report.assumptions(unread)


def test_a_sealed_field_the_traversal_resolves_is_not_an_axiom_a_top_level_one_always_is():
    summary = CHECKER_OUTPUT.replace(
        "    Artifact.magic\n", "    Artifact.magic\n    Artifact.N.y\n"
    )
    checker = report.read_checker(summary)
    audit = report.Audit(checker, roots=["Artifact.magic", "Artifact.N.y"], used=set())
    assert report.assumptions(audit) == ["Artifact.magic", "Artifact.spin (assumed guarded)"]


def test_a_library_that_declares_nothing_has_no_assumptions_but_coqchks_summary_is_required():
    checker = report.read_checker(CHECKER_OUTPUT.replace("checking cst:", "checked: "))
    assert checker.roots() == []
    incomplete = report.read_checker(CHECKER_OUTPUT.split("CONTEXT SUMMARY")[0])
    with pytest.raises(report.Inconsistent, match="no context summary"):
        report.assumptions(report.Audit(incomplete, roots=[], used=set()))


def test_standard_library_primitives_are_read_from_debians_sources_not_comments():
    text = (
        "(* Primitive get_make *)\nPrimitive get : forall A, array A -> int -> A := #array_get.\n"
    )
    assert report.declared_primitives("Coq.Array.PArray", text) == {"Coq.Array.PArray.get"}
    axioms = {"Coq.Array.PArray.get", "Coq.Array.PArray.get_make", "Artifact.get"}
    assert report.primitive_candidates(axioms) == {"Coq.Array.PArray": {"get", "get_make"}}


def test_the_require_prefix_is_read_from_code_and_blanked_in_the_body():
    text = "(* header *)\nFrom Coq Require Import Arith.\nRequire Lia. (* x *)\nLemma t : True.\n"
    prefix = source.prefix(text)
    assert prefix.code.strip().endswith("Require Lia.")
    assert "header" not in prefix.code
    body = prefix.body(text)
    assert body.splitlines()[3] == "Lemma t : True." and "Require" not in body
    assert len(body) == len(text)


# -- verdicts that rest on the re-check, and a worker that dies ---------------------------------


def _compiled(**fields) -> Completed:
    return Completed(**{"argv": ["x"], "exit_code": 0, "stdout": b"", "stderr": b"", **fields})


def test_coqchk_exiting_129_on_a_type_error_is_a_rejection_not_a_signal():
    request = resolved(CheckRequest(prover="rocq", name="t.v", content="Lemma t : True.\n"))
    refused = _compiled(exit_code=129, signal=1, stderr=b"Fatal Error: type error")
    evidence = judging.Evidence(_compiled(), checked=refused)
    outcome = judging.outcome(request, evidence)
    assert (outcome.verdict, outcome.trust) == (Verdict.FAIL, Trust.REPLAYED)
    assert judging.REJECTED in outcome.diagnostics[-1].message
    killed = judging.Evidence(_compiled(), checked=_compiled(exit_code=137, signal=9))
    assert judging.outcome(request, killed).verdict is Verdict.CRASH


def test_a_compile_that_writes_no_library_is_a_fail():
    request = resolved(CheckRequest(prover="rocq", name="t.v", content='Cd "/tmp".\n'))
    outcome = judging.outcome(request, judging.Evidence(_compiled(), library=False))
    assert outcome.verdict is Verdict.FAIL
    assert outcome.diagnostics[-1].message == judging.NO_LIBRARY


def _dies(*args, **kwargs):
    raise ServerFailed("the Rocq worker exited during the check: EOF")


def test_a_worker_that_dies_with_the_file_in_it_is_the_files_crash_when_a_control_passes(
    settings, monkeypatch
):
    monkeypatch.setattr(worker, "exchange", _dies)
    text = "Lemma t : True.\nProof. exact I. Qed.\n"
    result = run_itp("rocq", text, settings=settings)
    assert result.verdict is Verdict.CRASH
    assert "a control check passed" in result.diagnostics[-1].message


def test_a_worker_that_dies_and_a_control_that_fails_is_an_infra_error(settings, monkeypatch):
    monkeypatch.setattr(worker, "exchange", _dies)
    monkeypatch.setattr(control, "control_passes", lambda sandboxes: False)
    result = run_itp("rocq", "Lemma t : True.\nProof. exact I. Qed.\n", settings=settings)
    assert result.verdict is Verdict.INFRA_ERROR


def test_definitional_uip_is_an_assumption_read_from_print_assumptions():
    checker = report.read_checker(CHECKER_OUTPUT)
    printed = (
        "Axioms:\nArtifact.magic : forall P : Prop, P\nArtifact.seq relies on definitional UIP.\n"
    )
    assert report.read_assumptions(printed, checker) == {"Artifact.magic"}
    audit = report.Audit(checker, roots=["Artifact.magic"], used={"Artifact.magic"})
    assert "Artifact.seq (definitional UIP)" in report.assumptions(audit)


def test_a_uip_proof_is_never_a_pass_even_past_both_refusals(settings, monkeypatch):
    """The refusals read the text; the re-check's evidence must stop the proof on its own."""
    from runner import Checker  # noqa: PLC0415
    from tests.support.rocq_cheats import UIP_PROVES_K  # noqa: PLC0415

    monkeypatch.setattr(source, "refusals", lambda content: [])
    monkeypatch.setattr(source, "refusals_as_coq_read", lambda content, timed: [])
    request = CheckRequest(
        prover="rocq", name="k.v", content="Set Definitional UIP.\n" + UIP_PROVES_K
    )
    with Checker(settings.model_copy(update={"cache": False})) as checker:
        result = checker.check_one(request, cold=True)
    assert result.verdict is Verdict.AXIOM, (result.verdict, result.diagnostics)
    assert "Artifact.seq (definitional UIP)" in result.assumptions


@pytest.mark.parametrize(
    "text",
    [
        "From Coq Require Import PrimInt63.\nPrimitive my_add := #int63_add.\n",
        "Inductive flipped := true | false.\n(* é *) Register flipped as kernel.ind_bool.\n",
    ],
)
def test_the_cold_path_refuses_on_coqs_own_reading_when_the_kits_misses(
    text, settings, monkeypatch
):
    """The cold path's second wall: what the kit's reading of the text missed (here: all of
    it), coqc's own reading of each sentence (`coqc -time`) still refuses, pointing at it."""
    from runner import Checker  # noqa: PLC0415

    monkeypatch.setattr(source, "refusals", lambda content: [])
    request = CheckRequest(prover="rocq", name="r.v", content=text)
    with Checker(settings.model_copy(update={"cache": False})) as checker:
        result = checker.check_one(request, cold=True)
    [diagnostic] = result.diagnostics
    assert (result.verdict, result.trust) == (Verdict.FAIL, Trust.KIT), result.diagnostics
    assert "is not allowed in a checked file" in diagnostic.message
    assert diagnostic.line == 2


def test_coqs_reading_names_byte_ranges_and_a_printed_line_only_adds_text_to_check():
    content = "(* é *) Definition a := 1.\nPrimitive p := #int63_add.\n"
    start = len("(* é *) Definition a := 1.\n".encode())
    timed = f"Chars 9 - 27 [Definition~a~:=~1.]\nChars {start} - {start + 26} [Primitive]\n"
    [refusal] = source.refusals_as_coq_read(content, timed.encode())
    assert (refusal.line, refusal.column) == (2, 0)
    forged = b"Chars 0 - 99999 [x]\nChars 5 - 2 [y]\n"  # out of range, backwards: ignored
    assert source.refusals_as_coq_read(content, forged) == []


def test_an_error_after_a_non_ascii_letter_is_located_in_characters(settings):
    text = "(* é, ü *) Definition x : nat := true.\n"
    result = run_itp("rocq", text, name="u.v", settings=settings)
    [diagnostic] = result.diagnostics
    assert (result.verdict, diagnostic.line) == (Verdict.FAIL, 1)
    assert diagnostic.context == "true" and diagnostic.column == text.index("true")
