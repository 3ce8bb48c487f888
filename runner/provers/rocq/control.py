"""When a worker dies, stalls or garbles its reply while a file is in it: whose fault it was.

A known-good control file is checked on a fresh worker. If it passes, the machinery works and
the file brought its worker down: that is the file's own verdict (`crash`), never an infra
error it could hide behind. If the control fails too, the machine is at fault: `infra_error`.
"""

from __future__ import annotations

import secrets

from runner.core.errors import BackendUnavailable
from runner.core.models import Diagnostic, Outcome, Verdict
from runner.provers.base import Sandboxes
from runner.provers.common import verdicts
from runner.provers.rocq import worker
from runner.provers.rocq.source import Prefix

CONTROL = (
    "Lemma prooflock_control : forall n : nat, n + 0 = n.\nProof. induction n; simpl; auto. Qed.\n"
)
CONTROL_TIMEOUT_S = 120


def judge(sandboxes: Sandboxes, why: str, path: str) -> Outcome:
    if control_passes(sandboxes):
        message = f"the check brought its Rocq worker down ({why}); a control check passed"
        outcome = Outcome(verdict=Verdict.CRASH, diagnostics=[Diagnostic(message=message)])
    else:
        outcome = verdicts.infra_error(f"the Rocq worker failed ({why}), and a control check too")
    outcome.worker = {"rocq_path": path, "control": True}
    return outcome


def control_passes(sandboxes: Sandboxes) -> bool:
    """Whether a fresh worker checks the control file as it must (compiled, re-checked, no
    axiom, its one lemma declared)."""
    empty = Prefix(end=0, code="")
    try:
        server = worker.start(sandboxes, empty, key=f"control-{secrets.token_hex(4)}")
    except BackendUnavailable:
        return False
    try:
        reply = worker.exchange_fields(
            server, worker.request_fields(empty, CONTROL, "proof"), CONTROL_TIMEOUT_S
        )
    except (BackendUnavailable, worker.CannotServe):
        return False
    finally:
        server.retire()
    report = reply.text("CHECK_REPORT").splitlines()
    return (
        reply.text("COMPILE").startswith("exited 0 ")
        and reply.text("CHECK").startswith("exited 0 ")
        and "ROOT Artifact.prooflock_control" in report
        and not any(line.startswith("AXIOM ") for line in report)
    )
