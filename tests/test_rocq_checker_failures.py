"""When the independent checker breaks on a file coqc accepts, the record says so: `unverified`.

coqchk 8.16 ends with an anomaly on some module files coqc compiles (coq/coq#15930: a functor
sealed with a signature that declares a module holding an inductive; Coq's own test-suite file
bugs/bug_2923.v is one). That is the checker's failure, not the file's: never `fail`, never
`pass`, and the record carries coqchk's words, on the warm and the cold path alike.
"""

from __future__ import annotations

import pytest

from runner.check.checker import Checker
from runner.core.models import CheckRequest, Trust, Verdict
from runner.core.settings import Settings
from runner.provers.rocq import report
from tests.support.rocq_cheats import BACKENDS, rocq_checker

# The shape of bugs/bug_2923.v, written afresh.
BREAKS_COQCHK = (
    "Module Type Shape.\n  Inductive color : Set := red.\nEnd Shape.\n"
    "Module Type Holder.\n  Declare Module S : Shape.\nEnd Holder.\n"
    "Module Wrap (Module X : Shape) : Holder.\n  Module S := X.\nEnd Wrap.\n"
)
ANOMALY = 'Anomaly "Uncaught exception Modops.ModuleTypingError(_)."'


@pytest.fixture(scope="module", params=BACKENDS)
def checker(request, tmp_path_factory):
    with rocq_checker(request.param, tmp_path_factory.mktemp("kit"), timeout=120) as checker:
        yield checker


@pytest.mark.slow
@pytest.mark.parametrize("warm", [True, False], ids=["warm", "cold"])
def test_a_checker_anomaly_is_unverified_with_the_checkers_words(checker, warm):
    request = CheckRequest(prover="rocq", name="bug_2923_shape.v", content=BREAKS_COQCHK)
    result = checker.check_one(request, cold=not warm)
    path = result.provenance.extra["rocq_path"]
    assert path.startswith("worker:") if warm else path == "cold"
    assert (result.verdict, result.trust) == (Verdict.UNVERIFIED, Trust.KERNEL)
    assert result.details == {"checker": "coqchk", "checker_error": ANOMALY}
    assert ANOMALY in result.diagnostics[-1].message


@pytest.mark.slow
def test_warm_and_cold_record_a_checker_anomaly_alike(checker):
    request = CheckRequest(prover="rocq", name="bug_2923_shape.v", content=BREAKS_COQCHK)
    warm, cold = checker.check_one(request), checker.check_one(request, cold=True)
    assert warm.result_digest == cold.result_digest, (warm.diagnostics, cold.diagnostics)


def test_coqchk_rejecting_the_library_is_not_its_anomaly():
    """coqchk exits 129 on a type error too: only its words tell a rejection from a crash."""
    rejected = "checking cst:Artifact.f\nFatal Error: Type error: CantApplyBadType at argument 1\n"
    crashed = (
        "checking cst:Artifact.M2.M1.IndType_sind\n"
        'Fatal Error: Anomaly "Uncaught exception Modops.ModuleTypingError(_)."\n'
        "             Please report at http://coq.inria.fr/bugs/.\n"
    )
    assert report.checker_anomaly(rejected) is None
    assert report.checker_anomaly(crashed) == ANOMALY
    assert report.checker_anomaly("checking cst:Artifact.Anomaly\n") is None


@pytest.mark.parametrize("ended", ["memory 0 40210 41005", "signaled 9 40210 41005"])
def test_a_worker_re_check_that_did_not_finish_sends_the_file_to_the_cold_path(ended):
    """The worker's in-process re-check needs more memory than coqchk alone (Coq's Nia.v: 4 GB
    against 745 MB): its death is the kit's, so the file is checked again cold, never `crash`
    or `memory` on the kit's account. Replies in the worker's own frame (server.ml)."""
    from runner.provers.rocq import worker
    from runner.provers.rocq.worker import CannotServe, Reply

    request = CheckRequest(prover="rocq", name="nia.v", content="Lemma main : True. exact I. Qed.")
    resolved = Checker(Settings(backend="local")).resolve(request)
    fields = {"COMPILE": b"exited 0 21000 21500", "CHECK": ended.encode(), "CHECK_OUT": b""}
    with pytest.raises(CannotServe, match="re-check did not finish"):
        worker.evidence(Reply(fields), resolved)
    fields["CHECK"] = b"exited 1 900 950"  # coqchk's own rejection stays the file's evidence
    assert worker.evidence(Reply(fields), resolved).checked is not None
