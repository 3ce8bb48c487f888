"""Lean verdicts through the Checker users call, on the local backend, with the REPL double.

Lean and Mathlib cannot be installed here, so `lean-mathlib repl` is a shim running
tests/doubles/lean_repl_double.py, which speaks the REPL's protocol byte for byte and decides
from the input by documented rules (see its docstring). Everything on the kit side is real: the
source policy, the in-sandbox server (sandbox/lean_server.py) with its deadline, memory watchdog
and recycling, the pool, the verdict ladder. Each test gets its own checker and its own double's
log, which records every command the "REPL" received.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest

from runner.check.checker import Checker
from runner.core.errors import BadRequest
from runner.core.models import CheckRequest, CheckResult, Target, Trust, Verdict
from runner.core.settings import Settings
from runner.provers.lean import source, worker
from tests.support.doubles import DOUBLES, Lean, lean_on_doubles, lean_repl_double, shims

HEADER = "import Mathlib.Tactic\n\n"
GOOD = HEADER + "theorem add_zero' (n : ℕ) : n + 0 = n := by simp\n"


@pytest.fixture
def lean(tmp_path, monkeypatch, request) -> Iterator[Lean]:
    # `@pytest.mark.parametrize("lean", [{"conceal": True}], indirect=True)`: a double that does
    # not announce itself, as the real REPL would not.
    yield from lean_on_doubles(tmp_path, monkeypatch, getattr(request, "param", {}))


def only(result: CheckResult):
    [diagnostic] = result.diagnostics
    return diagnostic


# -- the double is the REPL's protocol -----------------------------------------------------


def test_the_double_renders_every_transcript_reply_byte_for_byte():
    replies = 0
    for path in sorted(lean_repl_double.TRANSCRIPTS.glob("*.expected.out")):
        for frame in lean_repl_double.frames(path.read_text()):
            assert lean_repl_double.pretty(json.loads(frame)) == frame, path.name
            replies += 1
    assert replies >= 20


def test_every_transcript_is_listed_with_the_behaviour_it_mirrors():
    # The transcripts are authored here; the README's table says which REPL behaviour each mirrors.
    readme = (DOUBLES / "README.md").read_text()
    names = sorted(
        path.name.removesuffix(".in") for path in lean_repl_double.TRANSCRIPTS.glob("*.in")
    )
    assert names
    for name in names:
        assert (lean_repl_double.TRANSCRIPTS / f"{name}.expected.out").is_file(), name
        assert f"| `{name}` |" in readme, name


def test_a_transcript_command_gets_its_transcript_reply(lean):
    # transcripts/lean/term_placeholder: `def budget : Nat := sorry` → a sorry at line 1,
    # column 20 (line 3 after the header's two lines). The double's own rules would instead have
    # declared `budget` and named it: the message shows the transcript's reply was used.
    result = lean.check(HEADER + "def budget : Nat := sorry")
    assert result.verdict is Verdict.PLACEHOLDER
    assert only(result).message == "proof left unfinished: sorry at line 3"


# -- verdicts ------------------------------------------------------------------------------


def test_a_proof_passes_and_names_its_declarations(lean):
    result = lean.check(GOOD)
    assert result.verdict is Verdict.PASS, result.diagnostics
    assert result.details["declarations"] == ["add_zero'"]
    assert result.assumptions == []  # propext is one of Lean's own three axioms
    assert result.trust is Trust.DOUBLE  # the double said so when the header was elaborated


@pytest.mark.parametrize("lean", [{"conceal": True}], indirect=True)
def test_a_repl_that_does_not_announce_a_double_gives_kernel_verdicts(lean):
    # What the real REPL and comparator do: a rejection rests on Lean's kernel in the REPL's
    # process; a pass on the re-check in a fresh sandbox (comparator, concealed here too).
    passed = lean.check(GOOD)
    assert (passed.verdict, passed.trust) == (Verdict.PASS, Trust.REPLAYED)
    failed = lean.check("import NoSuchPackage.Foo\ntheorem t : True := trivial\n")
    assert (failed.verdict, failed.trust) == (Verdict.FAIL, Trust.KERNEL)


def test_a_header_lean_refuses_is_the_double_s_verdict_too(lean):
    failed = lean.check("import NoSuchPackage.Foo\ntheorem t : True := trivial\n")
    assert (failed.verdict, failed.trust) == (Verdict.FAIL, Trust.DOUBLE)


def test_an_error_fails_with_lean_s_message_at_its_line_and_column(lean):
    result = lean.check(HEADER + "theorem bad : 2 + 2 = 5 := by decide\n")
    assert result.verdict is Verdict.FAIL
    error = only(result)
    assert (error.line, error.column) == (3, 30)
    assert error.message.startswith("Tactic `decide` proved that the proposition")


def test_an_unknown_name_fails_at_the_name(lean):
    result = lean.check(HEADER + "theorem t : 1 = 1 := by\n  exact no_such_lemma\n")
    assert result.verdict is Verdict.FAIL
    assert (only(result).line, only(result).column) == (4, 8)
    assert only(result).message == "Unknown identifier `no_such_lemma`"


def test_sorry_is_a_placeholder_in_proof_mode_and_allowed_in_statement_mode(lean):
    content = HEADER + "theorem t : 1 = 1 := by\n  sorry\n"
    placeholder = lean.check(content)
    assert placeholder.verdict is Verdict.PLACEHOLDER
    assert only(placeholder).message == "proof left unfinished: t"
    assert lean.check(content, mode="statement").verdict is Verdict.PASS


def test_a_sorry_in_an_example_is_caught_without_a_declaration(lean):
    result = lean.check(HEADER + "example : 2 = 2 := by sorry\n")
    assert result.verdict is Verdict.PLACEHOLDER
    assert "sorry at line 3" in only(result).message


def test_a_user_axiom_is_an_axiom_verdict_unless_allowed(lean):
    content = HEADER + "axiom my_ax : False\ntheorem t : 1 = 2 := my_ax.elim\n"
    result = lean.check(content)
    assert result.verdict is Verdict.AXIOM
    assert result.assumptions == ["my_ax"]
    assert lean.check(content, allowed_axioms=("my_ax",)).verdict is Verdict.PASS
    assert lean.check(content, mode="statement").verdict is Verdict.AXIOM


def test_an_unused_axiom_still_counts(lean):
    result = lean.check(HEADER + "axiom unused : 1 = 2\ntheorem t : 1 = 1 := rfl\n")
    assert result.verdict is Verdict.AXIOM
    assert result.assumptions == ["unused"]


NATIVE = HEADER + "theorem t : 10 < 20 := by native_decide\n"
BV = HEADER + "theorem b (x : BitVec 8) : x + 0 = x := by bv_decide\n"


def test_native_decide_is_an_axiom_decided_before_it_runs_unless_allowed(lean):
    refused = lean.check(NATIVE)
    assert refused.verdict is Verdict.AXIOM
    assert refused.assumptions == ["native_decide"]
    assert "t._native.native_decide" not in only(refused).message  # not run: no name yet
    assert "<proof>._native.native_decide.ax_" in only(refused).message
    assert (only(refused).line, only(refused).column) == (3, 26)
    assert lean.commands() == []  # decided before any REPL ran


@pytest.mark.parametrize("allow", ["native_decide", "Lean.ofReduceBool"])
def test_allowed_native_decide_runs_and_names_the_proof_s_own_axiom(lean, allow):
    # Since Lean 4.29 `#print axioms` names an axiom per proof, not Lean.ofReduceBool;
    # `Lean.ofReduceBool` stays the name that allows all native code, on every line.
    allowed = lean.check(NATIVE, allowed_axioms=(allow,))
    assert allowed.verdict is Verdict.PASS, allowed.diagnostics
    assert allowed.assumptions == ["t._native.native_decide.ax_1_1"]
    assert allowed.details["declarations"] == ["t"]


def test_bv_decide_runs_and_is_an_axiom_naming_its_native_axiom_unless_allowed(lean):
    result = lean.check(BV)
    assert result.verdict is Verdict.AXIOM
    assert result.assumptions == ["b._native.bv_decide.ax_1_1"]
    assert "b._native.bv_decide.ax_1_1" in only(result).message
    assert lean.check(BV, allowed_axioms=("native_decide",)).verdict is Verdict.AXIOM
    assert lean.check(BV, allowed_axioms=("bv_decide",)).verdict is Verdict.PASS


def test_an_older_line_s_native_axiom_is_still_native_code(lean):
    # Before Lean 4.29 every native proof rests on Lean.ofReduceBool, which says no tactic:
    # only allowing Lean.ofReduceBool (all native code) lets it pass.
    older = HEADER + "-- double:lean-4.28\ntheorem b (x : BitVec 8) : x + 0 = x := by bv_decide\n"
    result = lean.check(older, allowed_axioms=("bv_decide",))
    assert (result.verdict, result.assumptions) == (Verdict.AXIOM, ["Lean.ofReduceBool"])
    assert lean.check(older, allowed_axioms=("Lean.ofReduceBool",)).verdict is Verdict.PASS


def test_a_theorem_resting_on_a_native_proof_rests_on_its_axiom(lean):
    content = NATIVE + "theorem u : 10 < 20 ∧ True := ⟨t, trivial⟩\n"
    result = lean.check(content, allowed_axioms=("native_decide",))
    assert result.verdict is Verdict.PASS
    assert result.assumptions == ["t._native.native_decide.ax_1_1"]
    assert lean.check(content.replace("by native_decide", "by bv_decide")).verdict is Verdict.AXIOM


@pytest.mark.parametrize(
    ("line", "word"),
    [
        ("set_option debug.skipKernelTC true", "set_option debug.skipKernelTC"),
        ("unsafe def forge : False := forge", "unsafe"),
        ("@[implemented_by id] def g (n : ℕ) : ℕ := n", "implemented_by"),
        ('@[extern "c_f"] def h (n : ℕ) : ℕ := n', "extern"),
        ("#eval (1 : ℕ)", "#eval"),
        ("theorem t : True := by run_tac pure ()", "run_tac"),
        ("open Lean in theorem t : True := trivial", "Lean"),
        ('elab "forge" : tactic => pure ()', "elab"),
        ('notation "ℕ\'" => Nat', "notation"),
        ("def «IO».x := 1", "IO"),
        ("attribute [csimp] foo", "csimp"),
        ("theorem t : True := trivial import Mathlib.Logic.Basic", "import"),
        ("axiom t._native.native_decide.ax_1_1 : False", "_native"),
        ("theorem t : False := «_native».forged", "_native"),
    ],
)
def test_what_could_bypass_the_kernel_is_refused_before_it_runs(lean, line, word):
    result = lean.check(HEADER + line + "\n")
    assert result.verdict is Verdict.FAIL
    error = result.diagnostics[0]  # every refusal is listed, the first one first
    assert word in error.message and "not allowed" in error.message
    assert (error.line, error.context) == (3, line)
    assert lean.commands() == []


def test_words_in_comments_and_strings_are_not_refused(lean):
    content = (
        HEADER + '-- #eval is fine here\n/- unsafe -/\ntheorem t : "run_cmd" = "run_cmd" := rfl\n'
    )
    assert lean.check(content).verdict is Verdict.PASS


# -- targets -------------------------------------------------------------------------------


def test_a_target_passes_when_the_theorem_states_it_exactly(lean):
    target = Target(name="add_zero'", statement="∀ (n : ℕ), n + 0 = n")
    assert lean.check(GOOD, target=target).verdict is Verdict.PASS


def test_a_different_statement_is_wrong_statement_with_both_statements(lean):
    target = Target(name="add_zero'", statement="∀ (n : ℕ), n + 1 = n + 1")
    result = lean.check(GOOD, target=target)
    assert result.verdict is Verdict.WRONG_STATEMENT
    message = only(result).message
    assert "(n : ℕ) : n + 0 = n" in message and "n + 1 = n + 1" in message


def test_a_missing_theorem_is_wrong_statement(lean):
    result = lean.check(GOOD, target=Target(name="absent", statement="1 = 1"))
    assert result.verdict is Verdict.WRONG_STATEMENT
    assert only(result).message.startswith("no theorem named `absent`")


def test_the_target_is_elaborated_before_the_artifact_on_the_header_alone(lean):
    lean.check(GOOD, target=Target(name="add_zero'", statement="∀ (n : ℕ), n + 0 = n"))
    commands = lean.commands()
    header_env = 0
    target_def, body = commands[1], commands[2]
    assert target_def["env"] == header_env and "__prooflock_target_" in target_def["cmd"]
    assert body["env"] == header_env + 1 and "add_zero'" in body["cmd"]


def test_a_target_lean_cannot_elaborate_fails_before_the_artifact_runs(lean):
    result = lean.check(GOOD, target=Target(name="add_zero'", statement="undeclared_thing = 1"))
    assert result.verdict is Verdict.FAIL
    assert "target statement does not elaborate" in only(result).message
    assert not any("add_zero'" in c["cmd"] for c in lean.commands())


@pytest.mark.parametrize(
    ("name", "statement", "problem"),
    [
        ("add_zero'", "1 = 1) \n#eval (1", "closes a bracket it never opened: ')'"),
        ("add_zero'", "∀ (n : ℕ), (n + 0 = n", "leaves a bracket open (missing ')')"),
        ("add_zero'", "⟨1, 2) = x", "closes '⟩' with ')'"),
        ("add_zero'", "#eval 1 = 1", "`#eval` is not allowed"),
        ("add_zero'", "Lean.Elab.Command.x = 1", "`Lean` is Lean's meta level"),
        ("add_zero'", "1 = 1 /- never closed", "does not lex as Lean: unterminated comment"),
        ("add_zero' extra", "1 = 1", 'the target name "add_zero\' extra" is not a Lean name'),
    ],
)
def test_a_target_that_cannot_be_one_term_is_a_bad_request(lean, name, statement, problem):
    with pytest.raises(BadRequest) as refused:
        lean.check(GOOD, target=Target(name=name, statement=statement))
    assert problem in str(refused.value) and "\n" not in str(refused.value)
    assert lean.commands() == []  # refused before any REPL ran


def test_the_cli_refuses_a_target_that_cannot_parse_with_exit_2(cli, tmp_path):
    log = tmp_path / "repl.log"
    shims.write_shims(tmp_path / "bin", DOUBLES, log)
    (tmp_path / "Add.lean").write_text(GOOD)
    (tmp_path / "target.txt").write_text("∀ (n : ℕ), (n + 0 = n\n")
    done = cli(
        "check", "--prover", "lean", "--target", "add_zero'=target.txt", "Add.lean",
        env={"PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"},
        check=2,
    )  # fmt: skip
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        "prooflock: error: the target statement leaves a bracket open (missing ')')"
    ]
    assert not log.exists()  # no REPL was started


# -- bad input -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("module", "lean_says"),
    [("Mathlib.NoSuchFile", "object file"), ("NoSuchPackage.Foo", "unknown module prefix")],
)
def test_an_import_not_in_the_image_fails_naming_it(lean, module, lean_says):
    result = lean.check(f"import {module}\ntheorem t : True := trivial\n")
    assert result.verdict is Verdict.FAIL
    error = only(result)
    assert error.message.startswith(f"`import {module}`: no module {module} in the lean image")
    assert lean_says in error.context


def test_a_file_that_does_not_lex_is_refused(lean):
    result = lean.check(HEADER + "/- an unclosed comment\ntheorem t : True := trivial\n")
    assert result.verdict is Verdict.FAIL
    assert "does not lex" in only(result).message


# -- the pool, recycling, timeouts, memory, crashes ----------------------------------------


def test_one_header_is_elaborated_once_for_many_checks(lean):
    results = [lean.check(GOOD) for _ in range(4)]
    assert all(r.verdict is Verdict.PASS for r in results)
    assert lean.headers_elaborated() == 1
    assert len({r.provenance.extra["worker_id"] for r in results}) == 1
    assert results[-1].provenance.extra["lean_server"]["header_elaborations"] == 1
    other = lean.check("import Mathlib.Logic.Basic\n\ntheorem t : True := trivial\n")
    assert other.verdict is Verdict.PASS
    assert lean.headers_elaborated() == 2  # another header, another server
    assert other.provenance.extra["worker_id"] != results[0].provenance.extra["worker_id"]


def test_the_repl_is_recycled_after_n_checks(lean, monkeypatch):
    monkeypatch.setattr(worker, "RECYCLE_AFTER", 2)
    results = [lean.check(GOOD) for _ in range(5)]
    assert all(r.verdict is Verdict.PASS for r in results)
    stats = results[-1].provenance.extra["lean_server"]
    assert stats["repl_starts"] == 3 and stats["recycled"] == 2
    assert lean.headers_elaborated() == 3
    assert len({r.provenance.extra["worker_id"] for r in results}) == 1  # same server


@pytest.mark.slow
def test_a_hung_repl_times_out_and_the_next_check_gets_a_fresh_one(lean):
    hung = lean.check(HEADER + "/- double:sleep -/\ntheorem t : True := trivial\n", timeout=2)
    assert hung.verdict is Verdict.TIMEOUT
    assert 2000 <= hung.provenance.wall_ms < 10000
    after = lean.check(GOOD, timeout=2)
    assert after.verdict is Verdict.PASS
    assert after.provenance.extra["worker_id"] == hung.provenance.extra["worker_id"]
    assert after.provenance.extra["lean_server"]["repl_starts"] == 2


def test_a_file_too_large_to_read_in_its_time_is_a_timeout_within_the_limit(lean):
    # About 9 MB (under the 10 MB size limit): the kit's reading alone takes longer than a 1 s
    # check may, so it stops at the check's deadline and says why (no Lean runs).
    theorems = "".join(f"theorem t{i} : {i} + 0 = {i} := by simp\n" for i in range(200_000))
    result = lean.check(HEADER + theorems, timeout=1)
    assert result.verdict is Verdict.TIMEOUT
    assert "ran out while the kit read the artifact" in result.diagnostics[0].message
    assert result.provenance.wall_ms < 15_000


def test_a_repl_crash_is_a_crash_and_the_next_check_works(lean):
    crashed = lean.check(HEADER + "/- double:crash -/\ntheorem t : True := trivial\n")
    assert crashed.verdict is Verdict.CRASH
    assert "the REPL died (exit status 134)" in only(crashed).message
    assert "INTERNAL PANIC" in only(crashed).message
    after = lean.check(GOOD)
    assert after.verdict is Verdict.PASS
    assert after.provenance.extra["lean_server"]["repl_starts"] == 2


@pytest.mark.slow
def test_a_repl_past_the_memory_cap_is_a_memory_verdict(lean):
    hog = lean.check(HEADER + "/- double:memory -/\ntheorem t : True := trivial\n", memory_mb=512)
    assert hog.verdict is Verdict.MEMORY
    assert "memory limit" in only(hog).message
    assert lean.check(GOOD, memory_mb=512).verdict is Verdict.PASS


def test_nothing_the_artifact_prints_reaches_the_reply_channel(lean):
    forged = '{"id": "x", "reply": {"status": "ok"}}\nPROOFLOCK-WORKER-READY {}\n'
    content = HEADER + f"-- {forged}theorem t : 1 = 2 := by sorry\n"
    assert lean.check(content).verdict is Verdict.PLACEHOLDER


# -- the source policy, on its own ---------------------------------------------------------


def test_the_header_is_blanked_so_positions_are_the_file_s_own():
    content = "import A\nimport B.C\ntheorem t : True := trivial\n"
    header = source.split_header(content, source.tokens(content))
    assert header.imports == ("A", "B.C")
    body = source.body_of(content, header)
    assert len(body) == len(content) and body.splitlines()[2] == "theorem t : True := trivial"


def test_escaped_identifiers_are_unescaped_before_the_policy():
    assert source.read("def x := «Lean».Elab\n").refusals
    assert source.read("theorem t : True := by «run_tac» pure ()\n").refusals  # stricter than Lean


def test_native_code_is_found_in_every_spelling_and_only_in_code():
    spellings = {
        "by native_decide": "native_decide",
        "by decide +native": "native_decide",
        "by decide (config := { native := true })": "native_decide",
        "by bv_decide": "bv_decide",
        "by bv_decide?": "bv_decide",
        "ofReduceBool _ _ rfl": "native_decide",
    }
    for proof, tier in spellings.items():
        found = source.read(f"theorem t : P := {proof}\n").native
        assert [use.tactic for use in found] == [tier], proof
    quiet = 'theorem t : "native_decide" = "native_decide" := rfl -- bv_decide\n'
    assert source.read(quiet).native == []


def test_the_server_runs_inside_the_local_sandbox(tmp_path, monkeypatch):
    monkeypatch.setenv("PROOFLOCK_LOCAL_SANDBOX", "auto")
    with shims.sandboxed_shims() as directory:
        monkeypatch.setenv("PATH", f"{directory}{os.pathsep}{os.environ['PATH']}")
        settings = Settings(
            backend="local", cache=False, checkpoint_dir=tmp_path / "c", cache_dir=tmp_path / "k"
        )
        with Checker(settings) as checker:
            request = CheckRequest(prover="lean", name="A.lean", content=GOOD, timeout=20)
            result = checker.check_one(request)
            if result.provenance.isolation != "bubblewrap":
                pytest.skip("bubblewrap cannot run on this machine")
            assert result.verdict is Verdict.PASS, result.diagnostics
            sorry = request.model_copy(
                update={"content": HEADER + "theorem t : 1 = 1 := by sorry\n"}
            )
            assert checker.check_one(sorry).verdict is Verdict.PLACEHOLDER
