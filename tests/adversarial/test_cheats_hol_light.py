"""Cheats against the HOL Light adapter, written for the replay design: none passes.

A verdict on a file that ran rests on a replay of its proofs by HOL Light's unmodified kernel in
another sandbox, so these files are free to do anything OCaml allows: forge theorems with
`Obj.magic` or with a type confusion of OCaml 4.13 itself, rebind what HOL Light binds, load
library files, start shells that outlive the check or write the kit's frames. What they get is
what the replay derives, and every process they start dies with the check.

Every case runs on both backends; the local worker is the one tests/test_hol_light.py uses (one
boot per session, see tests/helpers).
"""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from runner.core.models import CheckResult, Trust, Verdict
from tests.helpers import HOL_LIGHT_BACKENDS, SHARES_HOL_LIGHT_BOOTS, HolLight, session_checker
from tests.support.hol_light_cheats import CHEATS, CONFUSE, Cheat

pytestmark = [pytest.mark.slow, SHARES_HOL_LIGHT_BOOTS]


@pytest.fixture(scope="module", params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def hol(request) -> HolLight:
    return HolLight(session_checker(request, request.param))  # one worker per backend per session


def check(hol: HolLight, cheat: Cheat, **more: Any) -> CheckResult:
    return hol.check(cheat.name + ".ml", content=cheat.content, **{**cheat.fields, **more})


@pytest.mark.parametrize("cheat", CHEATS, ids=lambda c: c.name)
def test_no_cheat_passes(hol, cheat):
    result = check(hol, cheat)
    assert result.verdict in cheat.verdicts, result.diagnostics
    assert result.provenance.attempts == 1  # never an infra error
    if cheat.words:
        said = " ".join(d.message for d in result.diagnostics) + " ".join(result.assumptions)
        assert cheat.words in said


def test_a_forged_theorem_is_listed_as_what_the_replay_derived(hol):
    """Without a target the forgery is no lie: the record says |- T, the one thing it proved."""
    result = hol.check(
        "forged.ml", content=CONFUSE + "let FALSE_THM = forge ([], `F`, proof_of TRUTH);;\n"
    )
    assert result.verdict is Verdict.PASS
    assert result.trust is Trust.SELF_REPORTED
    [theorem] = result.details["theorems"]
    assert (theorem["name"], theorem["statement"], theorem["typed"]) == (
        "FALSE_THM",
        "|- T",
        "|- {T:bool}",
    )


def test_a_setsid_process_dies_with_its_check(hol):
    marker = "987.654321"
    result = hol.check(
        "escape.ml",
        content=f"Sys.command \"setsid sh -c 'sleep {marker}' > /dev/null 2>&1 &\";;\n"
        'Sys.command "sleep 1";;\nlet T1 = ARITH_RULE `1 + 1 = 2`;;\n',
    )
    assert result.verdict is Verdict.PASS, result.diagnostics
    left = subprocess.run(["pgrep", "-f", f"sleep {marker}"], capture_output=True, text=True)
    assert left.stdout.strip() == "", "a process the check started outlived it"
    assert hol.check("after.ml", content="let T2 = ARITH_RULE `2 + 2 = 4`;;\n").verdict is (
        Verdict.PASS
    )


def test_a_check_that_kills_itself_is_a_crash_not_memory(hol):
    result = hol.check("suicide.ml", content="Unix.kill (Unix.getpid ()) Sys.sigkill;;\n")
    assert result.verdict is Verdict.CRASH, result.diagnostics


def test_a_type_whose_name_has_a_space_is_reported_not_an_infra_error(hol):
    result = hol.check(
        "spaced.ml",
        content='new_type ("odd name", 0);;\nlet R = REFL (mk_var ("x", mk_type ("odd name", [])));;\n',
    )
    assert result.verdict is Verdict.PASS, result.diagnostics
    assert result.details["types"] == [{"name": "odd name", "arity": 0}]


@pytest.mark.parametrize("backend", HOL_LIGHT_BACKENDS)  # a kill costs a fresh boot
def test_a_check_that_kills_its_worker_is_judged_by_a_control_check(request, backend):
    """The worker dies with the check: a control file on a fresh worker passes, so the verdict
    is the artifact's (crash), not an infra error retried until it sticks."""
    hol = HolLight(session_checker(request, backend))
    result = hol.check(
        "killer.ml", content="Unix.kill (Unix.getppid ()) Sys.sigkill;;\nlet T = TRUTH;;\n"
    )
    assert result.verdict is Verdict.CRASH, result.diagnostics
    assert result.provenance.attempts == 1
    assert hol.check("after.ml", content="let T = ARITH_RULE `1 + 1 = 2`;;\n").verdict is (
        Verdict.PASS
    )
