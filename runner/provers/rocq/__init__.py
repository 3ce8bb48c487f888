"""Rocq (Coq) adapter: compile as library `Artifact`, audit the compiled library with coqchk.

Every check, warm or cold:
1. Sentences that reach the file system, load code or rewire the kernel (`Redirect`, `Load`,
   `Cd`, `Declare ML Module`, `Extraction`, `Global Set`, ...) are refused before the file
   runs (source.refusals; the worker refuses them again on Coq's own parse).
2. The file is compiled exactly as `coqc -q -noglob -Q . "" Artifact.v` compiles it.
3. The compiled library is re-checked by coqchk's code, whose context summary is the authority
   on what the library itself assumes (axioms, type-in-type, unsafe fixpoints, assumed
   positivity); `Print Assumptions`, over every constant coqchk checked, adds the library
   axioms they reach. The two are cross-checked (report.assumptions).
4. With a target, its statement is elaborated after the file's own `Require`s, in a state the
   file never touched, and compared with the named theorem's type as Ltac's `constr_eq` does:
   syntactically, up to alpha-conversion and a consistent renaming of universe levels.

The cold path runs Debian's coqc and coqchk and two drivers (cold.py); the warm path runs the
same steps in a worker that has the file's `Require`s loaded and forks per check (worker.py,
sandbox/server.ml). Both hand their evidence to verdict.outcome.
"""

from __future__ import annotations

from runner.core.errors import BackendUnavailable
from runner.core.models import Diagnostic, Outcome, Verdict
from runner.provers.base import ProverAdapter, ResolvedRequest, Sandboxes
from runner.provers.rocq import cold, source, verdict, worker

# 3: coqchk's summary is the authority on assumptions (full names); Print Assumptions runs over
# the constants coqchk checked, in a driver with no artifact options; file-system commands and
# `Global` options refused; anomalies read from coqc's exit code only; target statements;
# messages read from stderr only.
VERSION = "3"
# Below this the worker (the parent and a forked child) may not fit: check cold.
WARM_MEMORY_MB = 1024


def probe(image: str) -> dict[str, list[str]]:
    packages = "dpkg-query -W -f '${Package}=${Version}\\n' coq 'libcoq-*' 2>/dev/null || true"
    return {
        "coqc": ["coqc", "--version"],
        "coqchk": ["coqchk", "--version"],
        "packages": ["sh", "-c", packages],
    }


def check(request: ResolvedRequest, sandboxes: Sandboxes) -> Outcome:
    refused = refusal(request)
    if refused is not None:
        refused.worker = {"rocq_path": "refused"}
        return refused
    evidence, path = gather(request, sandboxes)
    outcome = verdict.outcome(request, evidence)
    outcome.worker = {"rocq_path": path}  # provenance only: which path gathered the evidence
    return outcome


def gather(request: ResolvedRequest, sandboxes: Sandboxes) -> tuple[verdict.Evidence, str]:
    """The evidence, from the warm worker when it can serve the file, else from the cold path."""
    prefix = source.prefix(request.content)
    warm = not sandboxes.cold and request.limits.memory_mb >= WARM_MEMORY_MB
    if warm and worker.available(request.image):
        chosen = worker.choose_prefix(prefix)
        try:
            server = worker.start(sandboxes, chosen)
        except BackendUnavailable as exc:  # no worker here: check cold (and stop trying if it
            if worker.BUILD_FAILED in str(exc):  # cannot be built, e.g. no OCaml toolchain)
                worker.unavailable(request.image, str(exc))
        else:
            try:
                found = worker.evidence(worker.exchange(server, request, prefix), request)
            except worker.CannotServe:
                pass
            except BackendUnavailable:  # the worker died or stalled (the pool drops it)
                server.retire()
            else:
                return found, f"worker:{server.spec.key}"
    return cold.run(request, sandboxes.sandbox()), "cold"


def refusal(request: ResolvedRequest) -> Outcome | None:
    """A FAIL for a file that uses a refused command, before anything runs."""
    found = source.refusals(request.content)
    if not found:
        return None
    first = found[0]
    message = (
        f"`{first.word}` is not allowed in a checked file: it reaches outside the check or "
        "around the kernel"
    )
    diagnostic = Diagnostic(
        message=message, line=first.line, column=first.column, context=first.context or None
    )
    return Outcome(verdict=Verdict.FAIL, diagnostics=[diagnostic])


ADAPTER = ProverAdapter(
    name="rocq",
    version=VERSION,
    modes=("proof", "statement"),
    images=("rocq",),
    probe=probe,
    check=check,
    targets=True,
    description="Rocq (Coq) .v files, compiled as library Artifact and audited with coqchk",
)
