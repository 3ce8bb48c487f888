"""OCaml source as HOL Light's toplevel lexes it, with everything that is not code blanked.

The escape-hatch fence and the placeholder scan read only code, so this must never call code what
OCaml treats as text, nor text what OCaml runs: a char literal `'"'` or a quoted string `{|"|}`
read as the start of a string literal would hide the code after it. Positions and newlines are
kept, so line and column numbers still point into the artifact.
"""

from __future__ import annotations

import re

# 'c', '\n', '\'', '\123', '\xff', '\o377'; a quote after an identifier character is part of
# the identifier (x', f'x'), and a quote not closing a char literal starts a type variable ('a).
_CHAR = re.compile(r"'(?:[^\\']|\\(?:[\\'\"ntbr ]|[0-9]{3}|x[0-9a-fA-F]{2}|o[0-3][0-7]{2}))'")
_QUOTED_STRING = re.compile(r"\{([a-z_]*)\|")
_IDENTIFIER_CHAR = re.compile(r"[A-Za-z0-9_']")


def code_only(source: str) -> str:
    """`source` with comments, string and char literals and `term` quotations blanked.

    String literals keep their quotes (so `needs "x.ml"` can still be found and read from the
    original text); comments vanish entirely, nested ones included, with the strings inside them.
    """
    out = list(source)
    depth = 0
    i, n = 0, len(source)

    def blank(start: int, end: int) -> None:
        for k in range(start, end):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        if source.startswith("(*", i):
            depth += 1
            blank(i, i + 2)
            i += 2
            continue
        if depth and source.startswith("*)", i):
            depth -= 1
            blank(i, i + 2)
            i += 2
            continue
        literal = _literal_end(source, i)
        if literal is not None:
            inner_start, inner_end, end = literal
            if depth:  # inside a comment the whole literal is comment text
                inner_start, inner_end = i, end
            blank(inner_start, inner_end)
            i = end
            continue
        if source[i] == "`" and not depth:  # a HOL term or type quotation: no escapes inside
            close = source.find("`", i + 1)
            end = n if close < 0 else close + 1
            blank(i + 1, end - 1 if close >= 0 else end)
            i = end
            continue
        if depth:
            blank(i, i + 1)
        i += 1
    return "".join(out)


def _literal_end(source: str, i: int) -> tuple[int, int, int] | None:
    """(content start, content end, end) of the string or char literal starting at i, if one does."""
    char = source[i]
    if char == '"':
        end = _string_end(source, i)
        return i + 1, max(i + 1, end - 1), end
    if char == "{" and (opening := _QUOTED_STRING.match(source, i)):
        closing = f"|{opening[1]}}}"
        close = source.find(closing, opening.end())
        if close < 0:
            return opening.end(), len(source), len(source)
        return opening.end(), close, close + len(closing)
    if char == "'" and not (i and _IDENTIFIER_CHAR.match(source[i - 1])):
        literal = _CHAR.match(source, i)
        if literal:
            return i + 1, literal.end() - 1, literal.end()
    return None


def _string_end(source: str, start: int) -> int:
    """Index just past the string literal opening at `start` (or the end of the text)."""
    i = start + 1
    while i < len(source):
        if source[i] == "\\":
            i += 2
        elif source[i] == '"':
            return i + 1
        else:
            i += 1
    return len(source)
