"""Source text with everything that is not code blanked, per syntax, keeping lines and columns.

Adapters scan code for placeholders, `Require`s or settings; a word inside a comment or a string
is none of those. Blanking keeps every newline and the length of every line, so an offset in the
blanked text is an offset in the artifact. These are lexers for *scanning*; soundness decisions
rest on the prover's own parse (see each adapter).
"""

from __future__ import annotations

import re

# 'c', '\n', '\'', '\123', '\xff', '\o377'; a quote after an identifier character is part of
# the identifier (x', f'x'), and a quote not closing a char literal starts a type variable ('a).
_OCAML_CHAR = re.compile(r"'(?:[^\\']|\\(?:[\\'\"ntbr ]|[0-9]{3}|x[0-9a-fA-F]{2}|o[0-3][0-7]{2}))'")
_OCAML_QUOTED_STRING = re.compile(r"\{([a-z_]*)\|")
_IDENTIFIER_CHAR = re.compile(r"[A-Za-z0-9_']")


def position(text: str, offset: int) -> tuple[int, int]:
    """(1-based line, 0-based column) of `offset` in `text`."""
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1)


def _string_end(source: str, start: int, *, doubled_quote: bool) -> int:
    """Index just past the string literal opening at `start` (or the end of the text).

    Coq escapes a quote by doubling it (`""`); OCaml and C-like languages use a backslash.
    """
    quote, i = source[start], start + 1
    escape = quote * 2 if doubled_quote else "\\"
    while i < len(source):
        if source.startswith(escape, i):
            i += 2  # the escape and the character it escapes
        elif source[i] == quote:
            return i + 1
        else:
            i += 1
    return len(source)


def _blanked(text: str) -> str:
    return "".join(c if c == "\n" else " " for c in text)


def coq_code(source: str) -> str:
    """Coq source with nested `(* *)` comments and the insides of string literals blanked."""
    out: list[str] = []
    depth, i, n = 0, 0, len(source)
    while i < n:
        if source.startswith("(*", i):
            depth += 1
            out.append("  ")
            i += 2
        elif depth and source.startswith("*)", i):
            depth -= 1
            out.append("  ")
            i += 2
        elif source[i] == '"':
            end = _string_end(source, i, doubled_quote=True)
            inner = _blanked(source[i + 1 : end - 1])
            out.append(_blanked(source[i:end]) if depth else f'"{inner}"')
            i = end
        else:
            out.append(source[i] if not depth or source[i] == "\n" else " ")
            i += 1
    return "".join(out)


def c_like_code(source: str) -> str:
    """Asymptote (C-like) source with `//` and `/* */` comments and string literals blanked."""
    out: list[str] = []
    i, n = 0, len(source)
    while i < n:
        if source.startswith("//", i):
            end = source.find("\n", i)
            end = n if end < 0 else end
        elif source.startswith("/*", i):
            end = source.find("*/", i + 2)
            end = n if end < 0 else end + 2
        elif source[i] in "\"'":
            end = _string_end(source, i, doubled_quote=False)
        else:
            out.append(source[i])
            i += 1
            continue
        out.append(_blanked(source[i:end]))
        i = end
    return "".join(out)


def ocaml_code(source: str) -> str:
    """OCaml (HOL Light) source with comments, string and char literals and `term` quotations
    blanked, as OCaml's lexer reads them: a char literal `'"'` or a quoted string `{|"|}` taken for
    the start of a string would hide the code after it. String literals keep their quotes (so
    `needs "x.ml"` can still be found and read from the original text); comments vanish entirely,
    nested ones included, with the strings inside them.
    """
    out = list(source)
    depth, i, n = 0, 0, len(source)

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
        literal = _ocaml_literal(source, i)
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


def _ocaml_literal(source: str, i: int) -> tuple[int, int, int] | None:
    """(content start, content end, end) of the string or char literal starting at i, if any."""
    char = source[i]
    if char == '"':
        end = _string_end(source, i, doubled_quote=False)
        return i + 1, max(i + 1, end - 1), end
    if char == "{" and (opening := _OCAML_QUOTED_STRING.match(source, i)):
        closing = f"|{opening[1]}}}"
        close = source.find(closing, opening.end())
        if close < 0:
            return opening.end(), len(source), len(source)
        return opening.end(), close, close + len(closing)
    if char == "'" and not (i and _IDENTIFIER_CHAR.match(source[i - 1])):
        literal = _OCAML_CHAR.match(source, i)
        if literal:
            return i + 1, literal.end() - 1, literal.end()
    return None
