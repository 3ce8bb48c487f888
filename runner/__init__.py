"""prooflock: check theorem-prover artifacts reproducibly and keep crash-safe, replayable records."""

from runner.checker import Checker, check, run_itp
from runner.models import CheckRequest, CheckResult, Verdict

__all__ = ["CheckRequest", "CheckResult", "Checker", "Verdict", "check", "run_itp"]
