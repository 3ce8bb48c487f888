"""A file that runs out of time is a `timeout`, never an infra error; a broken kit is one.

Coq's own test-suite file success/Nia.v once ended as `infra_error` under load: its compile
finished inside the budget, coqchk's re-check then ran past what was left of it, the kit stopped
waiting for the worker, and the control check that tells a broken file from a broken kit ran on
the file's spent budget and failed too. Now the re-check has its own timeout, a control check
has its own budget, and a worker still silent when the check's budget ran out is the file's
`timeout` once the control passes. Only when the control fails too is it the kit's fault.
"""

from __future__ import annotations

import pytest

from runner.core.models import CheckRequest, Verdict
from runner.provers.rocq import worker
from tests.support.rocq_cheats import BACKENDS, rocq_checker

SHORT_S = 8
# Busy in a tactic until stopped, behind headers a worker's sub-parent loads first.
BUSY = "Lemma spin : True.\nProof. do 1000000000 (pose proof I as x; clear x). exact I. Qed.\n"
HEADERS = ("", "Require Import ZArith Lia.\n", "Require Import Reals.\n", "Require Import List.\n")
# A compile that takes seconds more than the kit's grace (lazy reduction, about 8 s of CPU),
# then a lemma coqc decides in seconds (vm_compute) and coqchk's re-check, without a VM, in
# minutes.
SLOW_RECHECK = (
    "Require Import NArith.\n"
    "Eval lazy in N.iter 1500000 N.succ 0%N.\n"
    "Lemma many : N.iter 20000000 N.succ 0%N = 20000000%N.\n"
    "Proof. vm_compute. reflexivity. Qed.\n"
)
RECHECK_BUDGET_S = 30


@pytest.fixture(scope="module", params=BACKENDS)
def checker(request, tmp_path_factory):
    with rocq_checker(request.param, tmp_path_factory.mktemp("kit"), timeout=SHORT_S) as checker:
        yield checker


@pytest.mark.slow
def test_files_busy_past_a_short_budget_are_timeouts_under_the_kits_own_load(checker):
    requests = [
        CheckRequest(prover="rocq", name=f"busy_{n}.v", content=header + BUSY)
        for n, header in enumerate(HEADERS * 2)
    ]
    results = list(checker.map(requests))
    said = [(r.verdict, [d.message for d in r.diagnostics]) for r in results]
    assert {r.verdict for r in results} == {Verdict.TIMEOUT}, said


@pytest.mark.slow
def test_a_file_whose_recheck_outlasts_its_budget_is_a_timeout(checker):
    request = CheckRequest(
        prover="rocq", name="slow_recheck.v", content=SLOW_RECHECK, timeout=RECHECK_BUDGET_S
    )
    result = checker.check_one(request)
    assert result.verdict is Verdict.TIMEOUT, [d.message for d in result.diagnostics]


@pytest.fixture
def dead_workers(monkeypatch):
    """Rocq workers that boot, then never answer a check: the kit's own machinery is broken
    (their output stops at the ready line, the fresh control worker's too)."""
    sources = dict(worker.sandbox_sources())
    sources["start-real.sh"] = sources[worker.START]
    sources[worker.START] = b"sh start-real.sh | sed '/@@PROOFLOCK-ROCQ-READY/q'\n"
    monkeypatch.setattr(worker, "sandbox_sources", lambda: sources)


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_worker_that_never_answers_and_fails_its_control_is_an_infra_error(
    backend, dead_workers, tmp_path
):
    request = CheckRequest(
        prover="rocq", name="plain.v", content="Lemma t : True.\nexact I.\nQed.\n"
    )
    with rocq_checker(backend, tmp_path, timeout=SHORT_S) as checker:
        result = checker.check_one(request)
    assert result.verdict is Verdict.INFRA_ERROR, [d.message for d in result.diagnostics]
    assert "a control check too" in result.diagnostics[0].message
