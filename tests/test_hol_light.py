"""HOL Light verdicts from the real prover, through the Checker users call.

Loading HOL Light takes minutes, so one checker (and so one forkserver) serves the whole session;
every check on it starts from the same pristine parent. Two tests pay for a boot of their own:
the cold check and the restart of a killed worker. All checks share one timeout: the core pools
workers by their limits, so another timeout would mean another worker, and another boot.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from runner.backends.base import Limits
from runner.backends.local import LocalBackend
from runner.checker import Checker
from runner.models import CheckRequest, CheckResult, Verdict, result_digest
from runner.provers import hol_light
from runner.provers.hol_light import ocaml_text, source
from runner.settings import Settings
from tests.conftest import artifact

EXPECTED = {
    "pass_arith.ml": Verdict.PASS,
    "pass_induction.ml": Verdict.PASS,
    "defines_things.ml": Verdict.PASS,
    "defines_type.ml": Verdict.PASS,
    "fail_tactic.ml": Verdict.FAIL,
    "fail_term.ml": Verdict.FAIL,
    "fail_syntax.ml": Verdict.FAIL,
    "fail_type.ml": Verdict.FAIL,
    "fail_unbound.ml": Verdict.FAIL,
    "fail_middle.ml": Verdict.FAIL,
    "exit_midfile.ml": Verdict.FAIL,
    "spoof_marker.ml": Verdict.FAIL,
    "directive_use.ml": Verdict.FAIL,
    "forge_obj_magic.ml": Verdict.FAIL,
    "forge_external.ml": Verdict.FAIL,
    "new_axiom.ml": Verdict.AXIOM,
    "mk_thm.ml": Verdict.AXIOM,
    "cheat_tac.ml": Verdict.PLACEHOLDER,
    "cheat_and_axiom.ml": Verdict.PLACEHOLDER,
}
LATER_FILES = ["uses_definition.ml", "uses_infix.ml", "uses_ocaml_value.ml"]
TIMEOUT = 60  # seconds


class HolLight:
    """The session's checker, with the request a user would write for each corpus file."""

    def __init__(self, checker: Checker):
        self.checker = checker

    def check(self, name: str, *, content: str | None = None, **fields) -> CheckResult:
        request = CheckRequest(
            timeout=TIMEOUT,
            prover="hol-light",
            name=name,
            content=artifact("hol-light", name) if content is None else content,
            **fields,
        )
        return self.checker.check_one(request)


@pytest.fixture(scope="session")
def hol(tmp_path_factory) -> HolLight:
    settings = Settings(
        backend="local",
        cache=False,
        checkpoint_dir=tmp_path_factory.mktemp("checkpoints"),
        cache_dir=tmp_path_factory.mktemp("cache"),
        retries=1,
    )
    with Checker(settings) as checker:
        yield HolLight(checker)


def only_error(result: CheckResult):
    [diagnostic] = result.diagnostics
    return diagnostic


# -- verdicts ------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_proof_mode_verdicts(hol, name):
    result = hol.check(name)
    assert result.verdict is EXPECTED[name], result.diagnostics
    assert result.provenance.attempts == 1  # an artifact's failure is never an infra error


@pytest.mark.slow
def test_failing_tactic_names_the_phrase_and_hol_lights_message(hol):
    error = only_error(hol.check("fail_tactic.ml"))
    assert (error.line, error.column) == (2, 0)
    assert error.context.startswith("let WRONG = prove (`!n. n + 1 = n`, ARITH_TAC)")
    assert error.message.startswith("Exception: Failure")


@pytest.mark.slow
def test_bad_term_reports_the_type_error_inside_the_quotation(hol):
    error = only_error(hol.check("fail_term.ml"))
    assert error.line == 2
    assert "T has type bool, it cannot be used with type num" in error.message


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, line, words",
    [
        ("fail_syntax.ml", 3, "Parse error"),
        ("fail_type.ml", 2, "This expression has type string"),
        ("fail_unbound.ml", 1, "Unbound value NO_SUCH_TAC"),
    ],
)
def test_ocaml_errors_are_located_in_the_artifact(hol, name, line, words):
    error = only_error(hol.check(name))
    assert error.line == line
    assert words in error.message
    assert "File" not in error.message  # the location moved into line/column


@pytest.mark.slow
def test_failure_in_the_middle_stops_the_file_at_that_phrase(hol):
    result = hol.check("fail_middle.ml")
    error = only_error(result)
    assert error.line == 3
    assert error.context.startswith("let SECOND = prove")


@pytest.mark.slow
def test_new_axiom_is_named_and_can_be_allowed_by_its_statement(hol):
    result = hol.check("new_axiom.ml")
    assert result.assumptions == ["|- !n. n + 1 = n"]
    allowed = hol.check("new_axiom.ml", allowed_axioms=("|- !n. n + 1 = n",))
    assert allowed.verdict is Verdict.PASS
    assert hol.check("mk_thm.ml").assumptions == ["|- 1 = 2"]


@pytest.mark.slow
def test_statement_mode_allows_cheat_tac_but_not_an_axiom_beside_it(hol):
    assert hol.check("cheat_tac.ml", mode="statement").verdict is Verdict.PASS
    assert hol.check("cheat_and_axiom.ml", mode="statement").verdict is Verdict.AXIOM
    assert hol.check("fail_term.ml", mode="statement").verdict is Verdict.FAIL


@pytest.mark.slow
def test_a_declared_placeholder_other_than_cheat_tac(hol):
    content = "let FORGED = mk_thm([], `1 = 2`);;\n"
    as_placeholder = hol.check(
        "mk.ml", content=content, mode="statement", options={"placeholder": "mk_thm"}
    )
    assert as_placeholder.verdict is Verdict.PASS
    in_proof_mode = hol.check("mk.ml", content=content, options={"placeholder": "mk_thm"})
    assert in_proof_mode.verdict is Verdict.PLACEHOLDER
    bad = hol.check("mk.ml", content=content, options={"placeholder": "x; exit 0"})
    assert bad.verdict is Verdict.FAIL and "placeholder" in bad.diagnostics[0].message


@pytest.mark.slow
def test_exit_in_the_middle_is_not_a_pass(hol):
    error = only_error(hol.check("exit_midfile.ml"))
    assert "stopped before its end" in error.message
    assert error.context == "exit 0"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "where", "word"),
    [
        ("forge_obj_magic.ml", (2, 19), "Obj"),
        ("forge_behind_literals.ml", (3, 19), "Obj"),
        ("forge_unmarshal.ml", (5, 2), "input_value"),
    ],
)
def test_forged_theorems_are_refused_before_they_run(hol, name, where, word):
    # `Obj.magic (Some ([], `F`))` is a theorem |- F that adds no axiom: the kernel cannot tell.
    error = only_error(hol.check(name))
    assert (error.line, error.column) == where
    assert error.message.startswith(f"`{word}` is not allowed")


@pytest.mark.slow
def test_infinite_loop_times_out_at_its_phrase_and_the_worker_lives_on(hol):
    looping = hol.check("diverge.ml")
    assert looping.verdict is Verdict.TIMEOUT
    assert only_error(looping).line == 3
    after = hol.check("pass_arith.ml")
    assert after.verdict is Verdict.PASS
    assert after.provenance.extra["worker_id"] == looping.provenance.extra["worker_id"]


@pytest.mark.slow
def test_new_definitions_constants_and_types_are_recorded(hol):
    things = hol.check("defines_things.ml").details
    assert things["definitions"] == ["|- double = (\\_1. _1 + _1)"]
    assert things["constants"] == [{"name": "double", "type": "num->num"}]
    typed = hol.check("defines_type.ml").details
    assert typed["types"] == [{"name": "pos", "arity": 0}]
    assert [c["name"] for c in typed["constants"]] == ["mk_pos", "dest_pos"]


# -- isolation and the worker's life -------------------------------------------------------


@pytest.mark.slow
def test_state_made_by_one_file_is_invisible_to_every_later_check(hol):
    before = {name: hol.check(name) for name in LATER_FILES}
    assert hol.check("defines_things.ml").verdict is Verdict.PASS
    for name in LATER_FILES:
        after = hol.check(name)
        assert after.verdict is Verdict.FAIL, name
        assert after.result_digest == before[name].result_digest, name


@pytest.mark.slow
def test_one_worker_survives_exits_spoofs_and_cheats(hol):
    results = [
        hol.check("exit_midfile.ml"),
        hol.check("spoof_marker.ml"),
        hol.check("mk_thm.ml"),
        hol.check("fail_syntax.ml"),
        hol.check("pass_arith.ml"),
    ]
    assert results[-1].verdict is Verdict.PASS
    workers = {r.provenance.extra["worker_id"] for r in results}
    assert len(workers) == 1
    served = [r.provenance.extra["checks_served"] for r in results]
    assert served == sorted(served) and len(set(served)) == len(served)
    assert all(r.provenance.worker == "forkserver" for r in results)


@pytest.mark.slow
def test_preloaded_parent_gives_the_result_the_file_gets_alone(hol):
    preload = {"preload": ["Library/iter.ml"]}
    warm = hol.check("uses_iter.ml", options=preload)
    alone = hol.check("uses_iter.ml")
    assert warm.verdict is alone.verdict is Verdict.PASS
    assert warm.provenance.extra["parent"] == "preloaded"
    assert alone.provenance.extra["parent"] == "plain"
    assert warm.result_digest == alone.result_digest
    assert "ITER" in [c["name"] for c in warm.details["constants"]]  # new relative to HOL Light
    # Uses the library without `needs`: it fails alone, so it must fail on the preloaded worker.
    sneaky = hol.check("iter_without_needs.ml", options=preload)
    sneaky_alone = hol.check("iter_without_needs.ml")
    assert sneaky.verdict is Verdict.FAIL
    assert sneaky.provenance.extra["parent"] == "plain"
    assert sneaky.result_digest == sneaky_alone.result_digest


@pytest.mark.slow
def test_killed_worker_is_restarted_and_the_check_in_flight_retried(hol):
    before = hol.check("pass_arith.ml").provenance.extra["worker_id"]
    outcome: dict[str, CheckResult] = {}
    checking = threading.Thread(target=lambda: outcome.update(result=hol.check("diverge.ml")))
    checking.start()
    time.sleep(5)
    [server] = _our_forkservers()
    os.kill(server, signal.SIGKILL)
    checking.join()
    result = outcome["result"]
    assert result.verdict is Verdict.TIMEOUT  # the artifact's own verdict, not an infra error
    assert result.provenance.attempts == 2
    assert result.provenance.extra["worker_id"] != before


def _our_forkservers() -> list[int]:
    """PIDs of forkservers this test process started (children running server.ml)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent == os.getpid() and b"server.ml" in cmdline:
            found.append(int(entry.name))
    return found


# -- cold checks and a broken install -------------------------------------------------------


@pytest.mark.slow
def test_cold_check_gives_the_forkserver_result(hol):
    warm = hol.check("uses_definition.ml")
    request = CheckRequest(
        prover="hol-light",
        name="uses_definition.ml",
        content=artifact("hol-light", "uses_definition.ml"),
        timeout=TIMEOUT,
    )
    with LocalBackend().sandbox(
        hol_light.IMAGE, Limits(timeout_s=TIMEOUT, memory_mb=4096)
    ) as sandbox:
        cold = hol_light.check(request, sandbox)  # boots HOL Light for this one file
    assert cold.verdict is Verdict.FAIL
    assert result_digest(cold) == warm.result_digest


def test_hol_light_that_does_not_load_is_an_infra_error_that_says_why(
    settings, tmp_path, monkeypatch
):
    broken = tmp_path / "hol-light"
    broken.mkdir()
    (broken / "ocaml").symlink_to(Path(hol_light.HOL_DIR, "ocaml"))
    # What Debian's hol-light does without libnum-ocaml-dev: errors printed, exit status 0.
    (broken / "hol.ml").write_text('#load "nums_not_installed.cma";;\ninclude Num;;\n')
    monkeypatch.setattr(hol_light, "HOL_DIR", str(broken))
    with Checker(settings) as checker:
        result = checker.check_one(
            CheckRequest(
                prover="hol-light", name="a.ml", content=artifact("hol-light", "pass_arith.ml")
            )
        )
    assert result.verdict is Verdict.INFRA_ERROR
    message = result.diagnostics[0].message
    assert message.startswith("HOL Light did not load")
    assert "libnum-ocaml-dev" in message


# -- what the text says (no prover) ---------------------------------------------------------


def test_preload_is_used_only_for_a_file_that_needs_those_libraries_first():
    declared = ["Library/prime.ml", "Library/pocklington.ml"]  # the text is all that matters here
    needs_both = '(* c *) needs "Library/prime.ml";;\nneeds "Library/pocklington.ml";;\nlet x = 1;;'
    assert source.effective_preload(declared, needs_both) == declared
    assert source.effective_preload(declared, 'needs "Library/prime.ml";; let x = 1;;') == [
        "Library/prime.ml"
    ]
    assert source.effective_preload(declared, 'let x = 1;;\nneeds "Library/prime.ml";;') == []
    assert source.effective_preload(declared, 'needs "Library/pocklington.ml";;') == []
    assert source.effective_preload(declared, '(* needs "Library/prime.ml";; *) let x = 1;;') == []


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("let q = '\"';; Obj;;", "let q = ' ';; Obj;;"),
        ("let s = {|\"|};; Obj;;", "let s = {| |};; Obj;;"),
        ("let s = {x|a|}|x};; Obj;;", "let s = {x|   |x};; Obj;;"),
        ("let c = '\\'';; Obj;;", "let c = '  ';; Obj;;"),
        ("let f (x : 'a) y' = `t'`;; Obj;;", "let f (x : 'a) y' = `  `;; Obj;;"),
        ('(* "*)" (* {|*)|} *) *) Obj;;', "                        Obj;;"),
        ('let s = "a\\"b";; Obj;;', 'let s = "    ";; Obj;;'),
    ],
)
def test_code_is_read_as_ocaml_lexes_it(text, code):
    assert ocaml_text.code_only(text) == code


def test_escape_hatches_count_in_code_only():
    harmless = 'let x = `Obj`;; (* Unix.fork *) let s = "Marshal";; let y = MyObj.x;;\n'
    assert source.forbidden_uses(harmless) == []
    assert source.forbidden_uses(harmless + "module O = Stdlib.Obj;;") == [(2, 18, "Obj")]
    unmarshal = 'let th : thm = input_value (open_in_bin "/work/x.ml");;'
    assert source.forbidden_uses(unmarshal) == [(1, 15, "input_value")]
    assert source.forbidden_uses("Bytes.unsafe_set b 99 'x';;") == [(1, 6, "unsafe_set")]


def test_placeholder_in_a_comment_or_string_is_not_a_use():
    code = '(* CHEAT_TAC *) let s = "CHEAT_TAC";;\nlet t = MY_CHEAT_TAC;;\n'
    assert source.placeholder_uses(code, ["CHEAT_TAC"]) == []
    assert source.placeholder_uses(code + "let u = CHEAT_TAC;;", ["CHEAT_TAC"]) == ["CHEAT_TAC"]
