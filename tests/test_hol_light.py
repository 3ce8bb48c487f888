"""HOL Light verdicts from the real prover, through the Checker users call: the worker runs each
file, HOL Light's kernel alone re-derives what it proved (tests/test_hol_light_replay.py holds the
replayer to its word on hand-written exports).

Loading HOL Light takes minutes, so one checker (and so one forkserver) per backend serves the
whole session, this file and the adversarial suite alike (`session_checker`); every check on it
starts from the same pristine parent. Other boots: the comparison of the library export's two
writers boots two workers side by side; the cold check and a worker killed from outside get
fresh ones, restored from the machine's snapshots on docker (in CI) and booted locally (only
with PROOFLOCK_HOL_LIGHT_FULL=1). All checks
share one timeout: the core pools workers by their limits, so another timeout would mean another
worker, and another boot.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from runner.backends.local import LocalBackend
from runner.check.checker import Checker
from runner.core.errors import BadRequest
from runner.core.models import CheckRequest, CheckResult, Limits, Target, Trust, Verdict
from runner.core.settings import Settings
from runner.provers import hol_light
from runner.provers.common.lexing import ocaml_code
from runner.provers.common.server import SandboxServer
from runner.provers.hol_light import judging, protocol, source
from runner.provers.hol_light import worker as hol_worker
from tests.helpers import (
    FRESH_LOCAL_HOL_LIGHT_BOOTS,
    HOL_LIGHT_BACKENDS,
    SHARES_HOL_LIGHT_BOOTS,
    HolLight,
    artifact,
    resolved,
    session_checker,
)
from tests.support.hol_light_workers import forkserver_pids, idle_server, worker_of, workers_used

pytestmark = SHARES_HOL_LIGHT_BOOTS

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
    "new_axiom.ml": Verdict.AXIOM,
    "mk_thm.ml": Verdict.AXIOM,
    "cheat_tac.ml": Verdict.PLACEHOLDER,
    "cheat_and_axiom.ml": Verdict.PLACEHOLDER,
}
LATER_FILES = ["uses_definition.ml", "uses_infix.ml", "uses_ocaml_value.ml"]
TIMEOUT = 60  # seconds


@pytest.fixture(scope="session")
def hol(request) -> HolLight:
    return HolLight(session_checker(request, "local", TIMEOUT))


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
    assert error.context.startswith("let SECOND_FACT = prove")


@pytest.mark.slow
def test_new_axiom_is_named_and_can_be_allowed_by_its_typed_key_only(hol):
    result = hol.check("new_axiom.ml")
    assert result.assumptions == ["|- !n. n + 1 = n"]
    printed = hol.check("new_axiom.ml", allowed_axioms=("|- !n. n + 1 = n",))
    assert printed.verdict is Verdict.AXIOM  # a printing can stand for another axiom
    [key] = printed.details["axiom_keys"]
    assert key.startswith("|- ({!:((num,bool)fun,bool)fun} (\\(n:num). ")
    allowed = hol.check("new_axiom.ml", allowed_axioms=(key,))
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
    with pytest.raises(BadRequest, match="placeholder"):  # refused before any check
        hol.check("mk.ml", content=content, options={"placeholder": "x; exit 0"})


@pytest.mark.slow
def test_exit_in_the_middle_stops_the_check_there(hol):
    error = only_error(hol.check("exit_midfile.ml"))
    assert (error.line, error.column) == (3, 0)
    assert error.message.startswith("the file stopped before its end")
    assert error.context == "exit 0"


@pytest.mark.slow
@pytest.mark.parametrize(
    "name",
    ["forge_obj_magic.ml", "forge_external.ml", "forge_behind_literals.ml", "forge_unmarshal.ml"],
)
def test_forged_theorems_never_pass(hol, name):
    # `Obj.magic (Some ([], `F`))` is no theorem any kernel rule made: nothing replays it.
    result = hol.check(name)
    assert result.verdict in (Verdict.FAIL, Verdict.CRASH), result.diagnostics
    assert result.provenance.attempts == 1


@pytest.mark.slow
def test_infinite_loop_times_out_at_its_phrase_and_the_worker_lives_on(hol):
    looping = hol.check("diverge.ml", timeout=10)  # a short limit decides it as well as a long one
    assert looping.verdict is Verdict.TIMEOUT
    assert only_error(looping).line == 3
    after = hol.check("pass_arith.ml")
    assert after.verdict is Verdict.PASS
    assert worker_of(after)["worker_id"] == worker_of(looping)["worker_id"]


@pytest.mark.slow
@pytest.mark.docker
def test_a_long_derivation_of_large_statements_passes_in_the_memory_hol_light_needs(request):
    # 18,000 steps, each a new 4,000-node statement (1.7 GB in all): HOL Light frees each once
    # the next is made. Under 1.5 GB the check fits only if the recorded proof keeps no step's
    # statement (it did: `memory`), and the replay only if it lets each step go after its last
    # use (it kept every one). Docker: a server at another memory limit is restored, not booted.
    hol = HolLight(session_checker(request, "docker", TIMEOUT))
    result = hol.check("long_derivation.ml", memory_mb=1536)
    assert result.verdict is Verdict.PASS, result.diagnostics
    assert [t["name"] for t in result.details["theorems"]] == ["LONG_DERIVATION"]


@pytest.mark.slow
def test_a_theorem_only_the_newer_line_has_fails_on_this_one_naming_it(hol):
    """The default line's side of a drift: 3.0.0 added DIV_ADD_EQ (tests/test_hol_light_lines.py
    passes this file there); 20230128 has no such name."""
    result = hol.check("uses_3_0.ml", content="let T2 = SPECL [`5`; `7`; `8`] DIV_ADD_EQ;;\n")
    assert result.verdict is Verdict.FAIL
    assert "DIV_ADD_EQ" in result.diagnostics[0].message


def test_new_definitions_constants_and_types_are_recorded(hol):
    things = hol.check("defines_things.ml").details
    assert things["definitions"] == ["|- double = (\\_1. _1 + _1)"]
    assert things["constants"] == [{"name": "double", "type": "num->num"}]
    assert [(t["name"], t["statement"]) for t in things["theorems"]] == [
        ("double", "|- !n. double n = n + n"),
        ("DOUBLE_TWO", "|- double 2 = 4"),
    ]
    assert things["theorems"][1]["typed"] == (
        "|- (({=:(num,(num,bool)fun)fun} ({double:(num,num)fun} ({NUMERAL:(num,num)fun} "
        "({BIT0:(num,num)fun} ({BIT1:(num,num)fun} {_0:num}))))) ({NUMERAL:(num,num)fun} "
        "({BIT0:(num,num)fun} ({BIT0:(num,num)fun} ({BIT1:(num,num)fun} {_0:num})))))"
    )
    typed = hol.check("defines_type.ml").details
    assert typed["types"] == [{"name": "pos", "arity": 0}]
    assert [c["name"] for c in typed["constants"]] == ["mk_pos", "dest_pos"]


# -- targets: what the file proved ----------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "statement"),
    [
        ("ADD_COMM_EXAMPLE", "!a b. a + b = b + a"),  # other bound variables: alpha-equivalent
        ("ADD_COMM_EXAMPLE", "!m n. (m + n) = (n + m)"),
        ("EQ_SELF", "!y:B. y = y"),  # other type variable, consistently renamed
    ],
)
def test_a_target_in_other_words_passes(hol, name, statement):
    result = hol.check("targets.ml", target=Target(name=name, statement=statement))
    assert result.verdict is Verdict.PASS, result.diagnostics


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "statement", "words"),
    [
        # Provable, and proved, but weaker than the target.
        ("ADD_ONE_COMM", "!m n. m + n = n + m", "`ADD_ONE_COMM` states: |- !n. n + 1 = 1 + n"),
        ("ABSENT", "!m n. m + n = n + m", "the file binds no theorem `ABSENT`"),
        ("UNDER_HYPOTHESIS", "1 = 2", "has hypotheses: 1 = 2 |- 1 = 2"),
        ("NOT_A_THEOREM", "1 = 1", "the file binds no theorem `NOT_A_THEOREM`"),
        ("ADD_COMM_EXAMPLE", "!m n. n + m = m + n", "the target is: !m n. n + m = m + n"),
        ("ADD_TWO_TWO", "2 + 2 = 4", "the file binds no theorem `ADD_TWO_TWO`"),
    ],
)
def test_a_target_the_file_did_not_prove_is_a_wrong_statement(hol, name, statement, words):
    result = hol.check("targets.ml", target=Target(name=name, statement=statement))
    assert result.verdict is Verdict.WRONG_STATEMENT
    assert words in only_error(result).message


@pytest.mark.slow
def test_a_library_theorem_is_not_what_the_file_proved(hol):
    target = Target(name="ADD_SYM", statement="!m n. m + n = n + m")  # in HOL Light, not the file
    result = hol.check("targets.ml", target=target)
    assert result.verdict is Verdict.WRONG_STATEMENT


@pytest.mark.slow
def test_a_target_is_read_in_hol_light_before_the_file(hol):
    # A constant the file defines is, in the target, a free variable of HOL Light's: the file's
    # theorem about its constant is not a theorem about every `double`...
    defined = hol.check(
        "defines_things.ml", target=Target(name="DOUBLE_TWO", statement="double 2 = 4")
    )
    assert defined.verdict is Verdict.WRONG_STATEMENT, defined.diagnostics
    # ...and notation it introduced does not exist: `===` is the file's infix, not HOL Light's.
    infix = hol.check("defines_things.ml", target=Target(name="DOUBLE_TWO", statement="2 === 2"))
    assert infix.verdict is Verdict.FAIL


@pytest.mark.slow
@pytest.mark.parametrize(
    ("statement", "words"),
    [
        ("!m n. m + n =", "does not parse as a HOL term"),
        ("m + n", "is not a proposition"),
    ],
)
def test_a_target_that_is_not_a_statement_fails_the_check(hol, statement, words):
    result = hol.check("targets.ml", target=Target(name="ADD_COMM_EXAMPLE", statement=statement))
    assert result.verdict is Verdict.FAIL
    error = only_error(result)
    assert words in error.message and error.context == "target"


def test_a_target_name_that_is_no_identifier_is_refused_before_any_check(settings):
    request = CheckRequest(
        prover="hol-light",
        name="a.ml",
        content="let X = TRUTH;;",
        target=Target(name="X;; exit 0", statement="T"),
    )
    with (
        Checker(settings) as checker,
        pytest.raises(BadRequest, match="not a HOL Light theorem name"),
    ):
        checker.check_one(request)  # no worker boots: this would take minutes if one did


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
def test_checks_at_once_wait_for_the_one_worker_never_boot_a_second(hol):
    """Two checks at once (the session checker runs two, as `--workers 2` does):
    the second waits for the booted worker and replayer instead of booting its own."""
    names = ["pass_arith.ml", "fail_tactic.ml", "pass_induction.ml", "fail_term.ml"]
    requests = [
        CheckRequest(
            prover="hol-light", name=n, content=artifact("hol-light", n), timeout=hol.timeout
        )
        for n in names
    ]
    assert hol.checker.settings.workers == 2
    results = list(hol.checker.map(requests))
    assert [r.verdict for r in results] == [EXPECTED[n] for n in names]
    assert len({worker_of(r)["worker_id"] for r in results}) == 1
    kinds = [(r.provenance.worker, sorted(r.provenance.extra)) for r in results]
    assert sum("booted_in_check_ms" in r.provenance.extra for r in results) <= 1, kinds
    # A check that waited for the worker's boot does not count that wait as its own time.
    for result in results:
        waited = result.provenance.extra.get("waited_for_server_ms", 0)
        assert result.provenance.wall_ms < 60_000 or not waited, kinds


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
    worker = [worker_of(r) for r in results]
    workers = {w["worker_id"] for w in worker}
    assert len(workers) == 1
    served = [w["checks_served"] for w in worker]
    assert served == sorted(served) and len(set(served)) == len(served)
    assert all(r.provenance.worker in {"server", "warm"} for r in results)
    assert results[-1].provenance.worker == "warm"


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
def test_a_preloaded_library_does_not_change_what_a_target_means(hol):
    """floor.ml loads the reals, after which `x + y` would parse as real addition: the target is
    parsed in the plain parent, so the preloaded one judges as a file checked alone."""
    preload = {"preload": ["Library/floor.ml"]}
    target = Target(name="goal", statement="!x y. x + y = y + x")
    for theorem, verdict in (("ADD_SYM", Verdict.PASS), ("REAL_ADD_SYM", Verdict.WRONG_STATEMENT)):
        content = f'needs "Library/floor.ml";;\nlet goal = {theorem};;\n'
        warm = hol.check("sym.ml", content=content, options=preload, target=target)
        alone = hol.check("sym.ml", content=content, target=target)
        assert warm.provenance.extra["parent"] == "preloaded"
        assert (warm.verdict, alone.verdict) == (verdict, verdict), warm.diagnostics
        assert warm.result_digest == alone.result_digest


@pytest.mark.slow
@pytest.mark.parametrize("backend", HOL_LIGHT_BACKENDS)
def test_a_worker_killed_from_outside_between_checks_leaves_the_next_its_own_verdict(
    request, backend
):
    """kill -9 of the idle worker's process, as the OOM killer or a crash would: the next check
    finds it dead, a control check on a fresh worker passes, and the file is checked there. Its
    verdict and digest are its own; the dead worker is the machine's part, in the provenance."""
    hol = HolLight(session_checker(request, backend, TIMEOUT))
    killed = worker_of(hol.check("pass_arith.ml"))["worker_id"]
    pids = forkserver_pids(idle_server(hol.checker, killed))
    assert len(pids) == 1, pids
    os.kill(pids[0], signal.SIGKILL)

    result = hol.check("fail_tactic.ml")

    assert result.verdict is Verdict.FAIL, result.diagnostics
    assert result.provenance.attempts == 1
    used = workers_used(result)
    assert used[0] == killed and used[-1] != killed, used
    assert "HOL Light worker exited" in result.provenance.extra["infra"]
    again = hol.check("fail_tactic.ml")  # on the fresh worker, nothing killed
    assert "infra" not in again.provenance.extra
    assert again.result_digest == result.result_digest


@pytest.mark.slow
@pytest.mark.parametrize("backend", [pytest.param("local", marks=FRESH_LOCAL_HOL_LIGHT_BOOTS)])
def test_killed_worker_is_restarted_and_the_check_in_flight_retried(request, backend):
    hol = HolLight(session_checker(request, backend, TIMEOUT))
    before = worker_of(hol.check("pass_arith.ml"))["worker_id"]
    outcome: dict[str, CheckResult] = {}
    checking = threading.Thread(target=lambda: outcome.update(result=hol.check("diverge.ml")))
    checking.start()
    time.sleep(5)
    [server] = forkserver_pids(None)
    os.kill(server, signal.SIGKILL)
    checking.join()
    result = outcome["result"]
    # A control check on a fresh worker passed, so the file was checked again there: its own
    # verdict, not an infra error.
    assert result.verdict is Verdict.TIMEOUT
    assert result.provenance.attempts == 1
    # Provenance names every worker the check used, in order: the killed one, then the fresh one
    # whose answer is the verdict.
    workers = workers_used(result)
    assert workers[0] == before and workers[-1] != before, workers


# -- cold checks and a broken install -------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("backend", HOL_LIGHT_BACKENDS)
def test_cold_check_gives_the_forkserver_result(request, backend):
    """A cold check (a canary's re-check): fresh servers of its own, no warm state."""
    hol = HolLight(session_checker(request, backend, TIMEOUT))
    warm = hol.check("uses_definition.ml")
    file = CheckRequest(
        prover="hol-light",
        name="uses_definition.ml",
        content=artifact("hol-light", "uses_definition.ml"),
        timeout=TIMEOUT,
    )
    cold = hol.checker.check_one(file, cold=True)
    assert cold.provenance.worker == "fresh-server"
    assert workers_used(cold) != [] and worker_of(warm)["worker_id"] not in workers_used(cold)
    assert cold.verdict is Verdict.FAIL
    assert cold.result_digest == warm.result_digest


@pytest.mark.slow
@FRESH_LOCAL_HOL_LIGHT_BOOTS  # two
def test_the_library_export_is_the_same_whoever_writes_its_chunks():
    # With room (the default 4 GB) children forked at each checkpoint write the library export's
    # chunks while HOL Light loads on; with less than 3 GB the worker writes them itself. The
    # replayer must get the same bytes either way.
    def boot(memory_mb: int) -> tuple[hol_worker.Boot, str]:
        spec = hol_worker.server_spec(hol_light.HOL_DIR, hol_light.toplevel("hol-light"))
        limits = Limits(timeout_s=TIMEOUT, memory_mb=memory_mb)
        server = SandboxServer(LocalBackend(Settings()), "hol-light", limits, spec, lambda _: None)
        try:
            server.start()
            return hol_worker.read_boot(server), hol_worker.boot_log(server)
        finally:
            server.close()

    with ThreadPoolExecutor(2) as pool:
        (forked, forked_log), (alone, alone_log) = pool.map(boot, [4096, 2048])
    assert "chunks are written by forked children" in forked_log
    assert "chunks are written by the worker" in alone_log
    assert forked.library_length > 1_000_000
    assert (forked.library_length, forked.library_digest) == (
        alone.library_length,
        alone.library_digest,
    )


def test_hol_light_that_does_not_load_is_an_infra_error_that_says_why(
    settings, tmp_path, monkeypatch
):
    # The fake install lives in a temp dir, which a sandboxed local command does not see.
    monkeypatch.setenv("PROOFLOCK_LOCAL_SANDBOX", "off")
    broken = tmp_path / "hol-light"
    broken.mkdir()
    (broken / "ocaml").symlink_to(Path(hol_light.HOL_DIR, "ocaml"))
    # What Debian's hol-light does without libnum-ocaml-dev: errors printed, exit status 0.
    (broken / "hol.ml").write_text(
        '#load "nums_not_installed.cma";;\ninclude Num;;\nloads "fusion.ml";;\n'
    )
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


def test_a_boot_that_stopped_without_an_error_is_not_blamed_on_a_missing_package():
    # A worker killed for memory while loading (seen under --memory 1536 before its proofs named
    # proofs) left HOL Light's progress dots; every boot's log mentions nums.cma.
    log = '#load "nums.cma";;\n0..0..1..2..6..12..28..48..72..100..147..195..316..458....19757\n'
    stopped = hol_worker.boot_failure(log)
    assert "libnum" not in stopped
    assert stopped.startswith("HOL Light stopped while loading, with no error")
    assert stopped.endswith("458....19757")
    missing = hol_worker.boot_failure(log + "Error: Unbound module Num\n")
    assert missing.startswith("HOL Light did not load: Error: Unbound module Num")
    assert missing.endswith(
        "(HOL Light needs the OCaml num library: Debian package libnum-ocaml-dev)"
    )


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
        ('let s = {|"|};; Obj;;', "let s = {| |};; Obj;;"),
        ("let s = {x|a|}|x};; Obj;;", "let s = {x|   |x};; Obj;;"),
        ("let c = '\\'';; Obj;;", "let c = '  ';; Obj;;"),
        ("let f (x : 'a) y' = `t'`;; Obj;;", "let f (x : 'a) y' = `  `;; Obj;;"),
        ('(* "*)" (* {|*)|} *) *) Obj;;', "                        Obj;;"),
        ('let s = "a\\"b";; Obj;;', 'let s = "    ";; Obj;;'),
    ],
)
def test_code_is_read_as_ocaml_lexes_it(text, code):
    assert ocaml_code(text) == code


def test_placeholder_in_a_comment_or_string_is_not_a_use():
    code = '(* CHEAT_TAC *) let s = "CHEAT_TAC";;\nlet t = MY_CHEAT_TAC;;\n'
    assert source.placeholder_uses(code, ["CHEAT_TAC"]) == []
    assert source.placeholder_uses(code + "let u = CHEAT_TAC;;", ["CHEAT_TAC"]) == ["CHEAT_TAC"]


# -- what a reply means (no prover) ---------------------------------------------------------


def _reply(
    status: str, frames: list[tuple[str, str]], oom: str = "unknown", export: int = 100
) -> bytes:
    report = b"".join(
        f"{tag} {len(payload.encode())}\n".encode() + payload.encode() for tag, payload in frames
    )
    head = f"\n@@n REPLY {status} 5 plain {oom} {len(report)} 0 {export} 0 /work/check1\n"
    return head.encode() + report + protocol.done_marker("n")


def _request(**fields):
    return resolved(CheckRequest(prover="hol-light", name="a.ml", content="x;;\n", **fields))


def _outcome(raw: bytes, replay: dict | None = None, **fields):
    reply, request = protocol.parse_reply(raw, "n"), _request(**fields)
    stopped = judging.stopped_outcome(reply, request, "/work")
    if stopped is not None:
        return stopped
    return judging.replayed_outcome(reply, replay or {"ok": True}, request)


RAN = [("START", ""), ("END", ""), ("RESULT", "")]


@pytest.mark.parametrize(
    ("status", "frames", "oom", "verdict"),
    [
        # What a file printed never decides memory: a Failure "Out_of_memory" is a failure.
        (
            "exited 0",
            [("START", ""), ("FAILED", 'Exception: Failure "Out_of_memory".')],
            "none",
            Verdict.FAIL,
        ),
        # Out_of_memory, said the child, and the worker saw it at its address-space limit.
        (
            "exited 0",
            [("START", ""), ("MEMORY", ""), ("FAILED", "Out of memory")],
            "peak",
            Verdict.MEMORY,
        ),
        # The child's word alone (a frame it can forge) is no memory verdict.
        (
            "exited 0",
            [("START", ""), ("MEMORY", ""), ("FAILED", "Out of memory")],
            "none",
            Verdict.FAIL,
        ),
        # Killed by the kernel: memory only when the cgroup's OOM count says so.
        ("signaled 9", [("START", "")], "oom", Verdict.MEMORY),
        ("signaled 9", [("START", "")], "unknown", Verdict.CRASH),
        ("signaled 9", [("START", "")], "none", Verdict.CRASH),
        ("signaled 11", [("START", "")], "unknown", Verdict.CRASH),
        ("timeout 0", [("START", ""), ("PHRASE", "0 1 0 1 3")], "none", Verdict.TIMEOUT),
        # No RESULT: it did not run to its end, whatever it wrote.
        ("exited 0", [("START", ""), ("END", "")], "none", Verdict.FAIL),
        ("exited 0", [*RAN, ("OVERFLOW", "")], "none", Verdict.FAIL),
    ],
)
def test_a_check_that_stopped_is_judged_by_how_the_child_ended(status, frames, oom, verdict):
    assert _outcome(_reply(status, frames, oom)).verdict is verdict


def test_a_file_that_ran_is_judged_by_the_replay_alone():
    raw = _reply("exited 0", RAN)
    theorem = {"name": "T", "statement": "|- T", "hypotheses": 0, "target": None}
    passed = _outcome(raw, {"ok": True, "theorems": [theorem], "axioms": []})
    assert passed.verdict is Verdict.PASS and passed.trust is Trust.SELF_REPORTED
    axiom = {"ok": True, "theorems": [theorem], "axioms": [{"statement": "|- F"}]}
    assert _outcome(raw, axiom).verdict is Verdict.AXIOM
    refused = _outcome(raw, {"ok": False, "error": "record 7: TRANS"})
    assert refused.verdict is Verdict.FAIL and "TRANS" in refused.diagnostics[0].message
    assert _outcome(raw, {"ok": False, "timeout": True}).verdict is Verdict.TIMEOUT
    # a replay out of memory re-derived nothing either way: not the kernel's refusal
    short = _outcome(raw, {"ok": False, "memory": True, "error": "the replay ran out of memory"})
    assert short.verdict is Verdict.MEMORY
    assert short.diagnostics[0].message == (
        "the replay of the file's proofs ran out of memory (limit 4096 MB)"
    )
    # the child's RESULT with nothing exported is no proof of anything
    assert _outcome(_reply("exited 0", RAN, export=0)).verdict is Verdict.FAIL


class _KilledReplayer:
    """A double of the replayer's SandboxServer: its reply is a replay child killed by a signal,
    as replay_server.ml words it, and its sandbox's OOM count rose by `kills`."""

    def __init__(self, kills: int | None):
        self.kills = kills

    def exchange(self, data: bytes, marker: bytes, timeout_s: float) -> bytes:
        return b'{"ok":false,"signal":9,"error":"the replay died of a signal"}\n'

    def new_oom_kills(self) -> int | None:
        return self.kills


@pytest.mark.parametrize(("kills", "memory"), [(1, True), (0, False), (None, False)])
def test_a_replay_killed_while_its_sandbox_ran_out_of_memory_is_memory(monkeypatch, kills, memory):
    monkeypatch.setattr(hol_worker, "read_replayer", lambda server: None)
    raw = _reply("exited 0", RAN)
    reply, request = protocol.parse_reply(raw, "n"), _request()
    answer = hol_worker.replay(_KilledReplayer(kills), b"PLHP1\n", reply, request)  # type: ignore[arg-type]
    verdict = judging.replayed_outcome(reply, answer, request).verdict
    assert verdict is (Verdict.MEMORY if memory else Verdict.FAIL)


def test_a_record_names_the_claims_that_rest_on_the_childs_word():
    raw = _reply("exited 0", RAN)
    theorem = {"name": "T", "statement": "|- T", "typed": "|- {T:bool}", "target": "same"}
    replay = {"ok": True, "theorems": [theorem], "axioms": []}
    alone = _outcome(raw, replay)
    assert alone.details["self_reported"] == ["ran_to_end", "theorems"]
    assert alone.trust is Trust.SELF_REPORTED
    assert alone.details["theorems"] == [{"name": "T", "statement": "|- T", "typed": "|- {T:bool}"}]
    aimed = _outcome(raw, replay, target=Target(name="T", statement="T"))
    assert aimed.verdict is Verdict.PASS and aimed.trust is Trust.REPLAYED
    assert aimed.details["self_reported"] == ["ran_to_end"]
    stated = _outcome(raw, replay, mode="statement")
    assert stated.details["self_reported"] == ["ran_to_end", "theorems", "placeholders"]


def test_an_axiom_too_large_to_key_is_never_allowed():
    key = "<too large to key: over 20000 nodes>"
    replay = {"ok": True, "theorems": [], "axioms": [{"statement": "|- F", "typed": key}]}
    outcome = _outcome(_reply("exited 0", RAN), replay, allowed_axioms=(key,))
    assert outcome.verdict is Verdict.AXIOM


def test_a_reply_whose_report_does_not_add_up_is_the_kits_fault():
    raw = _reply("exited 0", [("START", "")])
    with pytest.raises(protocol.MalformedReply):
        protocol.parse_reply(raw.replace(b" 8 0 100", b" 9 0 100"), "n")


def test_a_target_travels_after_the_file():
    target = Target(name="T1", statement="1 + 1 = 2")
    data = protocol.encode_request("n", 60, ["CHEAT_TAC"], [], "let x = 1;;", target)
    assert data == b"CHECK n 60000 CHEAT_TAC - 11 T1 9\nlet x = 1;;1 + 1 = 2"
