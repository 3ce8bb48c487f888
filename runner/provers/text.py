"""Source-text helpers shared by adapters whose languages use `(* nested *)` comments."""

from __future__ import annotations

from collections.abc import Iterable


def strip_nested_comments(source: str, open_: str, close: str) -> str:
    """`source` with nested comments and string literals blanked (newlines kept, so lines still count).

    Strings are blanked too: a placeholder word inside a string is not a placeholder. A quote is
    escaped by doubling it (`""`), as in Coq; OCaml's lexing is in hol_light/ocaml_text.py.
    """
    out: list[str] = []
    depth = 0
    i, n = 0, len(source)
    while i < n:
        if source.startswith(open_, i):
            depth += 1
            out.append(" " * len(open_))
            i += len(open_)
        elif depth and source.startswith(close, i):
            depth -= 1
            out.append(" " * len(close))
            i += len(close)
        elif source[i] == '"':
            end = _string_end(source, i)
            out.append('"' + "".join(c if c == "\n" else " " for c in source[i + 1 : end - 1]) + '"')
            i = end
        else:
            out.append(source[i] if not depth or source[i] == "\n" else " ")
            i += 1
    return "".join(out)


def _string_end(source: str, start: int) -> int:
    """Index just past the string literal opening at `start` (or the end of the text)."""
    i = start + 1
    while i < len(source):
        if source.startswith('""', i):
            i += 2
        elif source[i] == '"':
            return i + 1
        else:
            i += 1
    return len(source)


def axiom_allowed(name: str, allowed: Iterable[str], artifact_module: str) -> bool:
    """Whether an assumption the prover printed is on the request's allowed list.

    Printed names are qualified only as far as needed (`Classical_Prop.classic`), so an allowed
    entry matches by dotted suffix in either direction, except that a short allowed name never
    covers an axiom the artifact itself declares (`Artifact.classic`): only its full name does.
    """
    for entry in allowed:
        if name == entry or entry.endswith("." + name):
            return True
        if name.endswith("." + entry) and not name.startswith(artifact_module + "."):
            return True
    return False
