"""What an artifact's text says before it runs: leading `needs`, placeholder uses, options."""

from __future__ import annotations

import re
from collections.abc import Iterable

from runner.models import CheckRequest, JsonValue
from runner.provers.hol_light.ocaml_text import code_only

DEFAULT_PLACEHOLDERS = ("CHEAT_TAC",)
# Names are spliced into a HOL Light phrase and paths into the protocol: keep both plain.
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_']*\Z")
LIBRARY_PATH = re.compile(r"[A-Za-z0-9_+-]+(/[A-Za-z0-9_+.-]+)*\.(ml|hl)\Z")
_NEEDS = re.compile(r'\s*needs\s+"([^"\n]*)"\s*;;')


# OCaml that steps around HOL Light's kernel or around the check: `Obj.magic (Some ([], `F`))` is
# a theorem `|- F` that adds no axiom; Marshal, input_value (unmarshalling bytes the artifact
# carries in its own text) and `external "%identity"` forge the same way, and unsafe_* accesses
# can overwrite the heap; Unix and the toplevel's own modules reach the kit's processes; a file
# written with open_out, open_temp_file or Sys.command could be loaded past this scan; a user
# printer could make the report misread the theory. Not a sandbox: a fence against the known ways.
FORBIDDEN = re.compile(
    r"(?<![\w'])(Obj|Marshal|input_value|unsafe_\w+|Unix|UnixLabels|Toploop|Topdirs|Out_channel"
    r"|Stdlib__\w+|external|open_out\w*|open_temp_file|command|install_user_printer)(?![\w'])"
)


class BadOption(ValueError):
    """A request option this adapter cannot use (reported as the check's diagnostic)."""


def forbidden_uses(content: str) -> list[tuple[int, int, str]]:
    """(line, column, word) of each FORBIDDEN word in the code (not comments, strings, terms)."""
    code = code_only(content)
    found = []
    for match in FORBIDDEN.finditer(code):
        line = code.count("\n", 0, match.start()) + 1
        column = match.start() - (code.rfind("\n", 0, match.start()) + 1)
        found.append((line, column, match[1]))
    return found


def leading_needs(content: str) -> list[str]:
    """Library paths the file `needs` before anything else, in order (`needs "a.ml";;` phrases)."""
    code = code_only(content)
    found, at = [], 0
    while match := _NEEDS.match(code, at):
        literal_start = match.start(1)
        path = content[literal_start : match.end(1)]  # the real text under the blanked string
        if not LIBRARY_PATH.match(path):
            break
        found.append(path)
        at = match.end()
    return found


def effective_preload(declared: list[str], content: str) -> list[str]:
    """The part of the declared preload set a preloaded parent may serve this file from.

    A preloaded parent is the plain one after running `needs` on each declared library, so it is
    indistinguishable from the plain parent only for a file whose first phrases are those same
    `needs`, in the same order: the longest common prefix of the two lists. A file that uses a
    library without saying so first is checked on the plain parent and fails just as alone.
    """
    common = []
    for wanted, said in zip(declared, leading_needs(content), strict=False):
        if wanted != said:
            break
        common.append(wanted)
    return common


def placeholders(request: CheckRequest) -> list[str]:
    """The request's placeholder names (`options["placeholder"]`, default CHEAT_TAC)."""
    names = _as_list(request.options.get("placeholder"), DEFAULT_PLACEHOLDERS)
    bad = [n for n in names if not IDENTIFIER.match(n)]
    if bad:
        raise BadOption(
            f"placeholder must be a HOL Light identifier such as CHEAT_TAC, not {bad[0]!r}"
        )
    return names


def preload(request: CheckRequest) -> list[str]:
    """The request's declared preload set (`options["preload"]`); unusable paths are dropped."""
    return [p for p in _as_list(request.options.get("preload"), ()) if LIBRARY_PATH.match(p)]


def placeholder_uses(content: str, names: Iterable[str]) -> list[str]:
    """Placeholder names that occur in the code (not in comments or strings), in source order."""
    code = code_only(content)
    hits = []
    for name in names:
        match = re.search(rf"(?<![A-Za-z0-9_']){re.escape(name)}(?![A-Za-z0-9_'])", code)
        if match:
            hits.append((match.start(), name))
    return [name for _, name in sorted(hits)]


def _as_list(value: JsonValue, default: Iterable[str]) -> list[str]:
    if value is None or value == "":
        return list(default)
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [v.strip() for v in value if v.strip()]
    raise BadOption(f"expected a name or a list of names, not {value!r}")
