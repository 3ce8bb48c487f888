"""prooflock: check theorem-prover artifacts reproducibly and keep crash-safe, replayable records.

from runner import run_itp
result = run_itp("rocq", "Lemma x : True. exact I. Qed.")
result.verdict, result.env_key, result.result_digest
"""

from runner.check.checker import Checker, check, run_itp
from runner.core.models import CheckRequest, CheckResult, Target, Verdict

__all__ = ["CheckRequest", "CheckResult", "Checker", "Target", "Verdict", "check", "run_itp"]
