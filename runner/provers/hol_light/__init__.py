"""HOL Light adapter: HOL Light's own kernel replays each file's proofs.

Two servers run, each in a sandbox of its own (worker.py).

- The worker (server.ml) loads HOL Light once, with a kernel that records proofs.
  That kernel is recording_fusion.ml: HOL Light's fusion.ml with proofs attached.
  Each file runs in a forked child.
  The worker parses the target first, while HOL Light is still pristine.
  A child that reaches the file's end exports its proofs (export.ml).
  The export holds every theorem the file bound and every axiom it made.
- The replayer (replay.ml, replay_server.ml) is HOL Light's unmodified lib.ml and fusion.ml.
  Its only addition is a reader for those exports.
  It re-derives the library once: the three axioms, then each declaration and definition.
  It replays each check's export in a forked child.
  It reports each named theorem's statement, with the axioms and definitions under it.
  It also says whether a theorem states the target.
  It reads the target while only the library exists.
  So a constant the file defines cannot stand for one of the target's names.

A theorem the replay cannot derive is never a pass (`Trust.REPLAYED`).
What the file's process said does not change that.
The file's code runs only in the worker's child, held by the sandbox.
Nothing in the language is refused.
Everything a check started is killed after it.
A file that breaks its worker is judged by a control check on a fresh one.
protocol.py frames a request and parses the worker's reply.
judging.py turns the reply and the replay into the verdict.

options.py reads two options.

- `placeholder`: names, by default CHEAT_TAC.
  Statement mode allows them; proof mode gives a `placeholder` verdict.
- `preload`: libraries, such as Library/prime.ml, that a warm parent loads first.
  A file gets them only when its first phrases `needs` them in that order.
  So a preloaded library never changes a result (see source.effective_preload).
"""

from __future__ import annotations

from runner.core.errors import BadRequest
from runner.core.models import Outcome
from runner.provers.base import ProverAdapter, ResolvedRequest, Sandboxes
from runner.provers.common.server import SandboxServer, ServerFailed, ServerSpec
from runner.provers.hol_light import judging, source, worker
from runner.provers.hol_light.options import HolLightOptions

VERSION = "5"  # 5: proofs recorded and replayed by HOL Light's kernel alone; no refusals
# The kit's judgement since VERSION 5 (a cache key, see ProverAdapter.rules). 1: an axiom is
# allowed by its typed key only. 2: theorems and definitions keyed too; odd names quoted in keys
# and braced in printings; memory from the worker's observation.
RULES = "2"
# Debian's layout (package hol-light); the image installs the same package.
HOL_DIR = "/usr/share/hol-light"
# The other line: Debian trixie's HOL Light 3.0.0 on OCaml 5.3. Its toplevel is ocaml-hol (the
# package's launcher names one it does not ship), which finds hol.ml's compiled loader through
# -I. The worker and the replayer tell the rest from the sources they find (server.ml,
# build_replay.sh).
LINE_3_0 = "hol-light-3.0"


def toplevel(image: str) -> list[str]:
    """HOL Light's OCaml toplevel in `image`, with the arguments it needs."""
    if image == LINE_3_0:
        return [f"{HOL_DIR}/ocaml-hol", "-I", HOL_DIR]
    return [f"{HOL_DIR}/ocaml"]


def probe(image: str) -> dict[str, list[str]]:
    names = "hol-light libnum-ocaml-dev camlp5 ocaml-interp"
    if image == LINE_3_0:
        names = "hol-light libzarith-ocaml-dev camlp5 ocaml-findlib ocaml-interp"
    packages = f"dpkg-query -W -f '${{Package}}=${{Version}}\\n' {names} 2>/dev/null || true"
    return {"ocaml": [toplevel(image)[0], "-version"], "packages": ["sh", "-c", packages]}


def validate(request: ResolvedRequest) -> None:
    """A target HOL Light cannot parse is bad input (exit 2), found before any check."""
    target = request.target
    problem = source.target_problem(target.name, target.statement) if target else None
    if problem is not None:
        raise BadRequest(problem)


def check(request: ResolvedRequest, sandboxes: Sandboxes) -> Outcome:
    return _check(request, _Held(sandboxes))


def check_batch(requests: list[ResolvedRequest], sandboxes: Sandboxes) -> list[Outcome | None]:
    """Check the files one after the other on one worker.

    Each check's export is read before the next file runs.
    The first check's worker and replayer serve the rest, until one breaks.
    """
    held = _Held(sandboxes)
    return [_check(request, held) for request in requests]


class _Held:
    """The servers one call holds.

    Each `sandboxes.server` call takes another server from the pool.
    Without this, every file of a batch would boot another HOL Light.
    """

    def __init__(self, sandboxes: Sandboxes):
        self._sandboxes = sandboxes
        self._held: dict[str, SandboxServer] = {}

    def server(self, spec: ServerSpec) -> SandboxServer:
        key = f"{spec.name}/{spec.key}"
        if key not in self._held or self._held[key].retired:
            self._held[key] = self._sandboxes.server(spec)
        return self._held[key]

    def worker(self, image: str) -> SandboxServer:
        return self.server(worker.server_spec(HOL_DIR, toplevel(image)))


def _check(request: ResolvedRequest, held: _Held) -> Outcome:
    refusal = judging.refused(request)
    if refusal is not None:  # a target HOL Light cannot be asked about: before anything boots
        return refusal
    # One worker serves every preload set: it forks a preloaded parent per set on demand.
    server = held.worker(request.image)
    try:
        return _check_on(server, request, held)
    except ServerFailed as failure:
        server.retire()

        def on_fresh(what: ResolvedRequest) -> Outcome:
            fresh = held.worker(what.image)  # the failed one is retired: a fresh worker
            try:
                return _check_on(fresh, what, held)
            except ServerFailed:
                fresh.retire()
                raise

        outcome = worker.after_failure(
            failure,
            control=lambda: on_fresh(worker.control_request(request)),
            again=lambda: on_fresh(request),
        )
        # The machine's part goes in the provenance, never hashed. It says what broke the first
        # worker. A control check then passed on a fresh one, and the file ran again there.
        outcome.worker = {**outcome.worker, "infra": f"{failure}; a control check then passed"}
        return outcome


def _check_on(server: SandboxServer, request: ResolvedRequest, held: _Held) -> Outcome:
    # The replayer's library is read from the worker before the file runs on it.
    spec = worker.replayer_spec(HOL_DIR, worker.read_boot(server), server)
    return worker.check_on(server, request, lambda: held.server(spec))


ADAPTER = ProverAdapter(
    name="hol-light",
    version=VERSION,
    rules=RULES,
    modes=("proof", "statement"),
    images=("hol-light",),
    lines=(LINE_3_0,),
    probe=probe,
    check=check,
    options=HolLightOptions,
    targets=True,
    validate=validate,
    check_batch=check_batch,
    warm_up=worker.CONTROL,
    host_packages=("hol-light", "libnum-ocaml-dev"),  # Debian's hol-light loads nums without it
    description="HOL Light .ml files, run in a fork of a loaded HOL Light, proofs replayed by its kernel",
)
