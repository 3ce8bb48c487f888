"""When a worker dies, stalls or garbles its reply while a file is in it: whose fault it was.

A known-good control file is checked on a fresh worker, with a budget of its own (the file's may be
spent). If it passes, the machinery works and the file is at fault:
- a worker still silent when the check's budget ran out is the file's `timeout`. Think of a slow
  file, say one whose re-check needs more than its time, under load.
- one that died or garbled its reply sooner is the file's `crash`. It is never an infra error a file
  could hide behind. If the control fails too, the machine is at fault: `infra_error`.
"""

from __future__ import annotations

import secrets
import time

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
SPENT_S = 0.5  # a read the check's deadline cut wakes about then


def judge(sandboxes: Sandboxes, why: str, path: str) -> Outcome:
    out_of_time = sandboxes.remaining_s() <= SPENT_S  # before the control takes its time
    if not control_passes(sandboxes):
        outcome = verdicts.infra_error(f"the Rocq worker failed ({why}), and a control check too")
    elif out_of_time:
        message = (
            f"the check's whole budget ran out before its Rocq worker answered ({why}); "
            "a control check passed"
        )
        outcome = Outcome(verdict=Verdict.TIMEOUT, diagnostics=[Diagnostic(message=message)])
    else:
        message = f"the check brought its Rocq worker down ({why}); a control check passed"
        outcome = Outcome(verdict=Verdict.CRASH, diagnostics=[Diagnostic(message=message)])
    outcome.worker = {"rocq_path": path, "control": True}
    return outcome


def control_passes(sandboxes: Sandboxes) -> bool:
    """Whether a fresh worker checks the control file as it must.

    It must be compiled and re-checked, with no axiom and its one lemma declared.
    """
    empty = Prefix(end=0, code="")
    try:
        server = worker.start(sandboxes, empty, key=f"control-{secrets.token_hex(4)}")
    except BackendUnavailable:
        return False
    # The kit's own check, not the file's: its own budget, whatever the file's left.
    server.bound_by(time.monotonic() + 3 * CONTROL_TIMEOUT_S + worker.REPLY_SLACK_S)
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
