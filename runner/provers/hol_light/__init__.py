"""HOL Light adapter: a forkserver loads HOL Light once and checks each file in a forked child.

Loading `hol.ml` takes minutes, so the warm worker (forkserver.py, server.ml) boots once per
sandbox and forks one child per check: every check starts from the same pristine parent, and
nothing a check defines, overloads or prints survives it. A check passes only if every phrase of
the file ran, the file reached its end (`exit 0;;` mid-file is not a pass) and it added no axiom
(`new_axiom`, `mk_thm` and `CHEAT_TAC` all add one). Files using OCaml's escape hatches (Obj,
Marshal, `external`, Unix, ...: see source.FORBIDDEN) are refused before they run, since they
can forge a theorem without an axiom. The cold `check` runs the same server for one request,
booting HOL Light for that one file.

Options: `placeholder` (names, default CHEAT_TAC: allowed in statement mode, a `placeholder`
verdict in proof mode) and `preload` (libraries such as Library/prime.ml a warm parent loads
first; used only for a file whose first phrases `needs` them in that order, see
source.effective_preload, so a preloaded library never changes a result).
"""

from __future__ import annotations

from runner.backends.base import Backend, Limits, Sandbox
from runner.models import CheckRequest, Outcome
from runner.provers.base import OptionSpec, defaults, fixed_image
from runner.provers.hol_light import forkserver

NAME = "hol-light"
VERSION = "2"  # 2: input_value and unsafe_* fenced
IMAGE = "hol-light"
MODES = ("proof", "statement")
SUFFIXES = (".ml", ".hl")
CLI_OPTIONS = (
    OptionSpec(
        flag="--placeholder",
        key="placeholder",
        help="hol-light: names that mark an unfinished proof (default CHEAT_TAC; comma-separated)",
    ),
    OptionSpec(
        flag="--preload",
        key="preload",
        help="hol-light: libraries a warm parent loads once, e.g. Library/iter.ml (comma-sep.)",
    ),
)
split = defaults.split
summary = defaults.summary
environment_options = defaults.environment_options
image = fixed_image(IMAGE)

# Debian's layout (package hol-light); the image installs the same package.
HOL_DIR = "/usr/share/hol-light"


def probe(image: str) -> dict[str, list[str]]:
    packages = (
        "dpkg-query -W -f '${Package}=${Version}\\n' hol-light libnum-ocaml-dev camlp5 "
        "ocaml-interp 2>/dev/null || true"
    )
    return {"ocaml": [f"{HOL_DIR}/ocaml", "-version"], "packages": ["sh", "-c", packages]}


def worker_key(request: CheckRequest) -> str:
    """One worker serves every preload set: it forks a preloaded parent per set on demand."""
    return ""


def open_worker(backend: Backend, limits: Limits, request: CheckRequest) -> forkserver.ForkServer:
    return forkserver.ForkServer(backend, limits, IMAGE, HOL_DIR)


def check(request: CheckRequest, sandbox: Sandbox) -> Outcome:
    """Cold: boot HOL Light for this one file (minutes), then check it exactly as a worker would."""
    return forkserver.check_cold(request, sandbox, HOL_DIR)
