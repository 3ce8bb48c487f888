"""HOL Light adapter: a forkserver loads HOL Light once and checks each file in a forked child.

Loading `hol.ml` takes minutes, so the warm worker (forkserver.py, server.ml) boots once per
sandbox and forks one child per check: every check starts from the same pristine parent, and
nothing a check defines, overloads or prints survives it.

What decides a verdict (server.ml, protocol.py):
- Before anything runs, the child parses the file with HOL Light's own front end and walks every
  phrase: only `let` bindings and expressions over identifiers HOL Light's toplevel binds (less a
  deny-list: Obj, Marshal, Sys, Unix, the toplevel, file I/O, loaders, `exit`, `unsafe_*`, ...)
  or the file binds itself; no modules, `open`, `external`, classes; no rebinding of a name
  HOL Light binds. Anything else is `fail` at the offending identifier. `needs` of HOL Light's
  own library files is allowed as the first phrases only. Two soundness bugs of the image's
  OCaml 4.13 are closed the same way: a `when` guard in a match whose patterns read records,
  arrays or lazy values (#7241) and GADT constructors (#13579) are refused.
- The child reports on a pipe the artifact cannot reach: where it stopped, and once the file ran
  to its end, the axioms (`new_axiom`, `mk_thm`; CHEAT_TAC's as placeholders), definitions and
  the theorems it bound (name and statement), read from the kernel and the toplevel environment.
- Time and memory come from the server's deadline, the child's exit status, the cgroup's OOM
  kills and an out-of-memory exception at the address-space limit, never from printed text.
- With a target, the named theorem must be bound by the file, have no hypotheses, and state the
  target (parsed by HOL Light after the file, with HOL Light's own notation) up to renaming of
  bound and type variables; otherwise `wrong_statement`.

Options: `placeholder` (names, default CHEAT_TAC: allowed in statement mode, a `placeholder`
verdict in proof mode) and `preload` (libraries such as Library/prime.ml a warm parent loads
first; used only for a file whose first phrases `needs` them in that order, see
source.effective_preload, so a preloaded library never changes a result).
"""

from __future__ import annotations

from runner.core.errors import BadRequest
from runner.core.models import Outcome
from runner.provers.base import ProverAdapter, ResolvedRequest, Sandboxes
from runner.provers.hol_light import forkserver, source
from runner.provers.hol_light.options import HolLightOptions

VERSION = "4"  # 4: guards that OCaml 4.13 miscompiles (#7241) and GADTs (#13579) refused
# Debian's layout (package hol-light); the image installs the same package.
HOL_DIR = "/usr/share/hol-light"


def probe(image: str) -> dict[str, list[str]]:
    packages = (
        "dpkg-query -W -f '${Package}=${Version}\\n' hol-light libnum-ocaml-dev camlp5 "
        "ocaml-interp 2>/dev/null || true"
    )
    return {"ocaml": [f"{HOL_DIR}/ocaml", "-version"], "packages": ["sh", "-c", packages]}


def validate(request: ResolvedRequest) -> None:
    """A target HOL Light cannot even be asked about is bad input (exit 2), before any check."""
    target = request.target
    problem = source.target_problem(target.name, target.statement) if target else None
    if problem is not None:
        raise BadRequest(problem)


def check(request: ResolvedRequest, sandboxes: Sandboxes) -> Outcome:
    refusal = forkserver.refused(request)
    if refusal is not None:  # a target HOL Light cannot be asked about: before anything boots
        return refusal
    # One worker serves every preload set: it forks a preloaded parent per set on demand.
    server = sandboxes.server(forkserver.server_spec(HOL_DIR))
    return forkserver.check_on(server, request)


def check_batch(requests: list[ResolvedRequest], sandboxes: Sandboxes) -> list[Outcome | None]:
    """Files refused before they run are decided here; the rest go to the worker in one batch."""
    outcomes: list[Outcome | None] = [forkserver.refused(request) for request in requests]
    waiting = [index for index, outcome in enumerate(outcomes) if outcome is None]
    if waiting:
        server = sandboxes.server(forkserver.server_spec(HOL_DIR))
        replies = forkserver.check_many_on(server, [requests[index] for index in waiting])
        for index, outcome in zip(waiting, replies, strict=True):
            outcomes[index] = outcome
    return outcomes


ADAPTER = ProverAdapter(
    name="hol-light",
    version=VERSION,
    modes=("proof", "statement"),
    images=("hol-light",),
    probe=probe,
    check=check,
    options=HolLightOptions,
    targets=True,
    validate=validate,
    check_batch=check_batch,
    description="HOL Light .ml files, each run in a fork of a loaded HOL Light",
)
