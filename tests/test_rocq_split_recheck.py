"""A long compile's re-check is split over processes, and every proof is still checked.

After a compile that took more CPU than `worker.SPLIT_AFTER_MS`, the worker re-checks the library
in as many processes as its sandbox has CPUs (server.ml, `share_proofs`). Each runs coqchk's checks
on everything but the bodies of the other processes' opaque proofs, largest proofs first to the
least loaded. Here every check splits. The file's one bad proof is small, so a large proof goes
to the first process and the bad one to the second: the verdict must still be coqchk's rejection.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runner.check.checker import Checker
from runner.core.models import CheckRequest, Verdict
from runner.core.settings import Settings
from runner.provers.rocq import judging, worker

pytestmark = pytest.mark.skipif(
    len(os.sched_getaffinity(0)) < 2, reason="a split re-check needs two CPUs"
)

# A proof term of some thousands of nodes: the largest proof in the file, the first process's.
LARGE = "Lemma large : {}.\nProof. repeat split. Qed.\n".format(" /\\ ".join(["True"] * 400))

# rocq#16957's reproducer: coqc's kernel accepts `wrong`, whose body (a VM cast against a poisoned
# cache) coqchk rejects; `main` proves False from it, and Print Assumptions finds no axiom. So only
# the re-check of `wrong`'s body can fail the file. The large proof goes before `main`.
EXPLOIT = (Path(__file__).parent / "exploits" / "rocq" / "PL-ROCQ-16957.v").read_text()
SPLIT_CHEAT = EXPLOIT.replace("Lemma main : False.", LARGE + "Lemma main : False.")
HONEST = "Lemma main : 2 + 2 = 4.\nProof. reflexivity. Qed.\n"

BACKENDS = ["local", pytest.param("docker", marks=[pytest.mark.docker, pytest.mark.slow])]


@pytest.fixture(scope="module", params=BACKENDS)
def checker(request, tmp_path_factory):
    base = tmp_path_factory.mktemp("kit")
    settings = Settings(
        backend=request.param,
        cache=False,
        retries=0,
        timeout=120,
        cpus=2,  # docker holds a check to its CPUs; locally they are the machine's
        cache_dir=base / "cache",
        checkpoint_dir=base / "checkpoints",
    )
    with Checker(settings) as checker:
        yield checker


@pytest.fixture
def split_every_check(monkeypatch):
    monkeypatch.setattr(worker, "SPLIT_AFTER_MS", 0)


def _processes(result) -> int:
    recheck = result.provenance.extra["phases_ms"]["recheck"]
    return recheck.get("processes", 1)


def test_a_bad_proof_left_to_the_second_process_still_fails_the_file(checker, split_every_check):
    assert SPLIT_CHEAT.count(LARGE) == 1
    request = CheckRequest(prover="rocq", name="split.v", content=SPLIT_CHEAT)
    result = checker.check_one(request)
    assert result.provenance.extra["rocq_path"].startswith("worker:")
    assert _processes(result) >= 2  # as many as the machine's CPUs, up to RECHECK_PROCESSES
    assert result.verdict is Verdict.FAIL, result.diagnostics
    assert judging.REJECTED in result.diagnostics[-1].message


def test_a_split_re_check_records_what_one_process_records(checker, monkeypatch):
    request = CheckRequest(prover="rocq", name="split.v", content=LARGE + HONEST)
    whole = checker.check_one(request)
    monkeypatch.setattr(worker, "SPLIT_AFTER_MS", 0)
    split = checker.check_one(request)
    assert _processes(whole) == 1 and _processes(split) >= 2
    assert split.verdict is Verdict.PASS, split.diagnostics
    assert split.result_digest == whole.result_digest


@pytest.mark.docker
@pytest.mark.slow
def test_a_check_held_to_one_cpu_is_not_split(tmp_path, split_every_check):
    """Docker holds a check to `--cpus` (a CPU quota, on cgroup v1 or v2): one CPU, one process."""
    settings = Settings(
        backend="docker", cache=False, retries=0, timeout=120, cpus=1, cache_dir=tmp_path
    )
    request = CheckRequest(prover="rocq", name="split.v", content=LARGE + HONEST)
    with Checker(settings) as checker:
        result = checker.check_one(request)
    assert result.verdict is Verdict.PASS, result.diagnostics
    assert _processes(result) == 1
