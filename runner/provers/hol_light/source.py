"""What an artifact's text says before it runs: leading `needs`, placeholder uses, options.

These functions read the text only to pick a parent and to word messages.
The server decides what a file may do, on HOL Light's own parse of it.
That is server.ml's Prooflock_fence, never this module.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from runner.core.models import JsonValue
from runner.provers.base import BadOption
from runner.provers.common.lexing import ocaml_code as code_only

DEFAULT_PLACEHOLDERS = ("CHEAT_TAC",)
# Names are spliced into a HOL Light phrase and paths into the protocol: keep both plain.
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_']*\Z")
# Relative, inside HOL Light's directory: no `.` or `..` component (the server checks again).
LIBRARY_PATH = re.compile(r"(?!.*(^|/)\.\.?(/|$))[A-Za-z0-9_+-]+(/[A-Za-z0-9_+.-]+)*\.(ml|hl)\Z")
_NEEDS = re.compile(r'\s*needs\s+"([^"\n]*)"\s*;;')


def leading_needs(content: str) -> list[str]:
    """Library paths the file `needs` first, in order (`needs "a.ml";;` phrases)."""
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

    A preloaded parent is the plain one after `needs` on each declared library.
    It matches the plain parent only for a file that starts with those same `needs`, in order.
    So the part is the longest common prefix of the two lists.
    A file that uses a library without saying so first runs on the plain parent.
    There it fails just as it would alone.
    """
    common = []
    for wanted, said in zip(declared, leading_needs(content), strict=False):
        if wanted != said:
            break
        common.append(wanted)
    return common


def target_problem(name: str, statement: str) -> str | None:
    """Why a target cannot be sent to HOL Light at all; HOL Light parses its statement."""
    if not IDENTIFIER.match(name):
        return f"the target name {name!r} is not a HOL Light theorem name (an OCaml identifier)"
    if not statement.strip():
        return "the target statement is empty"
    return None


def parse_placeholders(value: JsonValue) -> tuple[str, ...]:
    """The `placeholder` option: HOL Light identifiers (comma-separated or a list)."""
    names = _as_list(value, DEFAULT_PLACEHOLDERS)
    bad = [n for n in names if not IDENTIFIER.match(n)]
    if bad:
        raise BadOption(
            f"hol-light option 'placeholder' must name HOL Light identifiers such as CHEAT_TAC, "
            f"not {bad[0]!r}"
        )
    return tuple(names)


def parse_preload(value: JsonValue) -> tuple[str, ...]:
    """The `preload` option: library paths such as Library/prime.ml, comma-separated or a list."""
    paths = _as_list(value, ())
    bad = [p for p in paths if not LIBRARY_PATH.match(p)]
    if bad:
        raise BadOption(
            f"hol-light option 'preload' must name library files such as Library/prime.ml, "
            f"not {bad[0]!r}"
        )
    return tuple(paths)


def placeholder_uses(content: str, names: Iterable[str]) -> list[str]:
    """Placeholder names in the code, outside comments and strings, in source order."""
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
    raise BadOption(f"hol-light: expected a name or a list of names, not {value!r}")
