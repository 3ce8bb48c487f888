"""What a file asks of Coq's own helper programs runs in the sandbox: `par:`'s tactic workers.

Coq starts `coqtacticworker` beside its running executable and hands it its own arguments; a
file that solves goals with `par:` must pass as under bare `coqc`, on every backend, line and
path (the warm worker is not `coqc`, and the cold path's arguments reach the helper too).
"""

from __future__ import annotations

import pytest

from runner.core.models import CheckRequest, Trust, Verdict
from tests.support.rocq_cheats import rocq_checker

PAR = (
    "Lemma both : (1 + 1 = 2) /\\ (2 + 2 = 4).\n"
    "Proof. split. par: reflexivity. Qed.\n"
    "Lemma all_three : 0 = 0 /\\ 1 = 1 /\\ 2 = 2.\n"
    "Proof. repeat split. par: (simpl; reflexivity). Qed.\n"
)
# (the checker's backend, line, warm): the warm worker serves the default line only.
WAYS = [
    pytest.param("local", None, True, id="local-warm"),
    pytest.param("local", None, False, id="local-cold"),
    pytest.param("docker", None, True, id="docker-warm", marks=pytest.mark.docker),
    pytest.param("docker", None, False, id="docker-cold", marks=pytest.mark.docker),
    pytest.param("docker", "rocq-8.20", False, id="docker-8.20", marks=pytest.mark.docker),
]


@pytest.fixture(scope="module")
def checker(request, tmp_path_factory):
    with rocq_checker(request.param, tmp_path_factory.mktemp("kit"), timeout=120) as checker:
        yield checker


@pytest.mark.slow
@pytest.mark.parametrize(("checker", "line", "warm"), WAYS, indirect=["checker"])
def test_a_par_proof_passes(checker, line, warm):
    request = CheckRequest(prover="rocq", name="par.v", content=PAR, line=line)
    result = checker.check_one(request, cold=not warm)
    path = result.provenance.extra["rocq_path"]
    assert path.startswith("worker:") if warm else path == "cold"
    assert (result.verdict, result.trust) == (Verdict.PASS, Trust.REPLAYED), result.diagnostics
