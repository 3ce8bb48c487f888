"""Rocq (Coq) adapter: compile as library `Artifact`, re-check the compiled library with coqchk.

Every check, warm or cold:
1. A few sentences change the kernel's theory in ways no re-check verifies. They are refused
   before the file runs (source.refusals), and the worker refuses them again on Coq's own parse.
   They are `Register ... as kernel.*`, `Set Definitional UIP`, `Set Cumulative StrictProp`,
   `Primitive` (coq/coq#18503), and `Load`, which could hide them. The sandbox contains
   everything else.
2. The file is compiled exactly as `coqc -q -Q . "" Artifact.v` compiles it.
3. coqchk's code re-checks the compiled library in a process the file never ran in. Its context
   summary is the authority on what the library declares and assumes: axioms, type-in-type,
   unsafe fixpoints, assumed positivity. Print Assumptions' traversal adds the library axioms the
   file's constants reach (report.assumptions).
4. With a target, its statement is elaborated after the target's own `requires` alone, before
   anything of the file is loaded. It is compared with the named theorem's type, read from the
   compiled library, as Ltac's `constr_eq` does. That is syntactic, up to alpha-conversion and a
   consistent renaming of universe levels. It is never by conversion. That would accept a theorem that only computes to the target. It would also let a file spend the check's time reducing.

The cold path runs Debian's coqc and coqchk and two drivers (cold.py). The warm path runs the same
steps in a worker that has the file's `Require`s loaded and forks per check (worker.py,
sandbox/server.ml). The audit memo is kept across runs (memo.py). The tools' output is read by
report.py. Both paths hand their evidence to judging.outcome (judging.py). A worker may die or
garble its reply once the file ran. A control check on a fresh worker then follows (control.py).
"""

from __future__ import annotations

import time

from runner.core.errors import BackendUnavailable
from runner.core.models import Outcome
from runner.provers.base import HostSetup, ProverAdapter, ResolvedRequest, Sandboxes
from runner.provers.common import verdicts
from runner.provers.rocq import cold, control, judging, source, worker
from runner.provers.rocq.source import Prefix

# 4: the target elaborated after its own `requires` only; coqchk re-checks in a fresh sandbox and
# decides (trust `replayed`), its rejection is `fail` whatever its exit code; what the file
# declared read from the library only; standard-library primitives are not assumptions; the
# refusals cut to what the kernel cannot re-check; a dead worker is judged by a control check.
# 5: `Primitive` refused (coq/coq#18503: a clean proof of False on 8.16, coqchk included).
VERSION = "5"
# The kit's judgement since VERSION 5 (a cache key, not part of the environment key: see
# ProverAdapter.rules). 1: refused commands found anywhere in a sentence, and on the cold path
# on coqc's own reading of each sentence too; `...` ends a sentence; `Abort` counts only as a
# command; a declaration relying on definitional UIP is an assumption; Coq's byte columns read
# as characters. 2: the drivers' comparison and audit never feel the library's `Global` settings
# (no proof mode, the kernel's checks set back, the comparison re-checked by coqchk); no -noglob,
# so `par:`'s tactic workers start.
RULES = "2"
# Below this the worker (the parent and a forked child) may not fit: check cold.
WARM_MEMORY_MB = 1024
# The warm worker is written against Coq 8.16's OCaml API (the default line's). The other lines
# (Debian trixie's 8.20.1, forky's Rocq 9.2.0) check cold, with their own coqc and coqchk.
WORKER_IMAGES = ("rocq",)


def probe(image: str) -> dict[str, list[str]]:
    packages = "dpkg-query -W -f '${Package}=${Version}\\n' coq 'libcoq-*' 2>/dev/null || true"
    return {
        "coqc": ["coqc", "--version"],
        "coqchk": ["coqchk", "--version"],
        "packages": ["sh", "-c", packages],
    }


def check(request: ResolvedRequest, sandboxes: Sandboxes) -> Outcome:
    refusals = source.refusals(request.content)
    if refusals:
        refused = verdicts.refused(refusals)
        refused.worker = {"rocq_path": "refused"}
        return refused
    try:
        evidence, path = gather(request, sandboxes)
    except WorkerDied as died:
        return control.judge(sandboxes, died.why, died.path)
    outcome = judging.outcome(request, evidence)
    outcome.worker = {**outcome.worker, "rocq_path": path}  # provenance: which path gathered it
    return outcome


class WorkerDied(Exception):
    def __init__(self, why: str, path: str):
        super().__init__(why)
        self.why, self.path = why, path


def _warm(request: ResolvedRequest, sandboxes: Sandboxes) -> bool:
    return (
        not sandboxes.cold
        and request.limits.memory_mb >= WARM_MEMORY_MB
        and request.image in WORKER_IMAGES
        and worker.available(request.image)
    )


def start_ahead(request: ResolvedRequest, sandboxes: Sandboxes) -> None:
    """The base worker, booting while the kit probes the install.

    The audit memo (kept per install) reaches it with its first check.
    """
    if _warm(request, sandboxes):
        worker.start(sandboxes, Prefix(end=0, code=""))


def gather(request: ResolvedRequest, sandboxes: Sandboxes) -> tuple[judging.Evidence, str]:
    """The evidence, from the warm worker when it can serve the file, else from the cold path."""
    prefix = source.prefix(request.content)
    if _warm(request, sandboxes):
        memo = worker.audit_memo(sandboxes)
        try:
            server = worker.start(sandboxes, Prefix(end=0, code=""), memo=memo)
        except BackendUnavailable as exc:  # no worker here: check cold (and stop trying if it
            if worker.BUILD_FAILED in str(exc):  # cannot be built, e.g. no OCaml toolchain)
                worker.unavailable(request.image, str(exc))
        else:
            path = f"worker:{server.spec.key}"
            started = time.monotonic()
            try:
                reply = worker.exchange(server, request, prefix, memo)
                return worker.evidence(reply, request), path
            except worker.CannotServe:  # the cold path decides, with the time this attempt took
                sandboxes.give_back_s(time.monotonic() - started)
            except BackendUnavailable as exc:  # it died, stalled or garbled its reply while
                server.retire()  # the file was in it: a control check says whose fault
                raise WorkerDied(str(exc), path) from None
    return cold.run(request, sandboxes), "cold"


ADAPTER = ProverAdapter(
    name="rocq",
    version=VERSION,
    rules=RULES,
    modes=("proof", "statement"),
    images=("rocq",),
    lines=("rocq-8.20", "rocq-9.2"),
    second_opinion="rocq-9.2",  # fixes four of the six clean proofs of False of 8.16.1
    # Debian's Coq and the libraries the corpus Requires; libcoq-core-ocaml-dev, ocaml-findlib
    # and coqchk's sources (xz for their tarball) build the warm worker's checker.
    host_packages=(
        "coq",
        "libcoq-mathcomp",
        "libcoq-coquelicot",
        "libcoq-flocq",
        "libcoq-interval",
        "libcoq-bignums",
        "libcoq-core-ocaml-dev",
        "ocaml-findlib",
        "xz-utils",
    ),
    host_setup=HostSetup(
        makes="/usr/share/prooflock/coq-checker/validate.ml",
        script="images/rocq/checker-sources",
    ),
    probe=probe,
    check=check,
    affinity=lambda request: source.prefix(request.content).code or None,
    start_ahead=start_ahead,
    targets=True,
    description="Rocq (Coq) .v files, compiled as library Artifact and audited with coqchk",
)
