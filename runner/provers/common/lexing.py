"""Source text with everything that is not code blanked, per syntax, keeping lines and columns.

Adapters scan code for placeholders, `Require`s or settings. A word inside a comment or a string is
none of those. Blanking keeps every newline and the length of every line, so an offset in the
blanked text is an offset in the artifact. These lexers are for *scanning*. Soundness decisions rest
on the prover's own parse (see each adapter).
"""

from __future__ import annotations

import re

# 'c', '\n', '\'', '\123', '\xff', '\o377'. A quote after an identifier character is part of the
# identifier (x', f'x'). A quote not closing a char literal starts a type variable ('a).
_OCAML_CHAR = re.compile(r"'(?:[^\\']|\\(?:[\\'\"ntbr ]|[0-9]{3}|x[0-9a-fA-F]{2}|o[0-3][0-7]{2}))'")
_OCAML_QUOTED_STRING = re.compile(r"\{([a-z_]*)\|")
_IDENTIFIER_CHAR = re.compile(r"[A-Za-z0-9_']")


def position(text: str, offset: int) -> tuple[int, int]:
    """(1-based line, 0-based column) of `offset` in `text`."""
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1)


# Where something other than plain code may start. The text between two is copied (or blanked inside
# a comment) in one piece, so a 10 MB file is read in C, not a character at a time.
_COQ_TOKEN = re.compile(r'\(\*|\*\)|"')
_C_LIKE_TOKEN = re.compile(r"//|/\*|[\"']")
_OCAML_TOKEN = re.compile(r"\(\*|\*\)|[\"'`]|\{[a-z_]*\|")
# A string literal from its opening quote, closed or running to the end of the text. Coq escapes a
# quote by doubling it (`""`). OCaml and C-like languages use a backslash, which takes the next
# character whatever it is.
_COQ_STRING = re.compile(r'"((?:""|[^"])*)("?)')
_BACKSLASHED_STRING = {
    quote: re.compile(rf"{quote}((?:\\[\s\S]?|[^{quote}\\])*)({quote}?)") for quote in "\"'"
}
_NOT_NEWLINE = re.compile(r"[^\n]")


def _blanked(text: str) -> str:
    return _NOT_NEWLINE.sub(" ", text) if "\n" in text else " " * len(text)


def coq_code(source: str) -> str:
    """Coq source with nested `(* *)` comments and the insides of string literals blanked."""
    out: list[str] = []
    depth = copied = at = 0
    while (token := _COQ_TOKEN.search(source, at)) is not None:
        kind, start = token[0], token.start()
        if kind == "*)" and not depth:  # outside a comment, `*)` is plain code
            at = token.end()
            continue
        out.append(_blanked(source[copied:start]) if depth else source[copied:start])
        if kind == '"':  # a string, inside a comment too (Coq's lexer reads those)
            string = _COQ_STRING.match(source, start)
            assert string is not None  # the pattern matches any text opening with a quote
            end = string.end()
            inner = '"' + _blanked(string[1]) + string[2]
            out.append(_blanked(source[start:end]) if depth else inner)
        else:
            depth += 1 if kind == "(*" else -1
            end = token.end()
            out.append("  ")
        copied = at = end
    out.append(_blanked(source[copied:]) if depth else source[copied:])
    return "".join(out)


def c_like_code(source: str) -> str:
    """Asymptote (C-like) source with `//` and `/* */` comments and string literals blanked."""
    out: list[str] = []
    copied = 0
    while (token := _C_LIKE_TOKEN.search(source, copied)) is not None:
        kind, start = token[0], token.start()
        if kind == "//":
            end = source.find("\n", start)
            end = len(source) if end < 0 else end
        elif kind == "/*":
            end = source.find("*/", start + 2)
            end = len(source) if end < 0 else end + 2
        else:
            end = _BACKSLASHED_STRING[kind].match(source, start).end()  # type: ignore[union-attr]
        out.append(source[copied:start])
        out.append(_blanked(source[start:end]))
        copied = end
    out.append(source[copied:])
    return "".join(out)


def ocaml_code(source: str) -> str:
    """OCaml (HOL Light) source with comments, literals and `term` quotations blanked.

    Literals are string and char literals, read as OCaml's lexer reads them. A char literal `'"'` or
    a quoted string `{|"|}` taken for the start of a string would hide the code after it. String
    literals keep their quotes, so `needs "x.ml"` can still be found and read from the original
    text. Comments vanish entirely, nested ones included, with the strings inside them.
    """
    out: list[str] = []
    depth = copied = at = 0

    def keep(end: int) -> None:  # the text up to `end` as it is, or blanked inside a comment
        nonlocal copied
        out.append(_blanked(source[copied:end]) if depth else source[copied:end])
        copied = end

    def blank(end: int) -> None:
        nonlocal copied
        out.append(_blanked(source[copied:end]))
        copied = end

    while (token := _OCAML_TOKEN.search(source, at)) is not None:
        kind, start = token[0], token.start()
        if kind == "(*" or (kind == "*)" and depth):
            keep(start)
            blank(token.end())
            depth += 1 if kind == "(*" else -1
            at = token.end()
        elif kind == "`" and not depth:  # a HOL term or type quotation: no escapes inside
            close = source.find("`", start + 1)
            keep(start + 1)
            blank(len(source) if close < 0 else close)
            at = len(source) if close < 0 else close + 1
        elif kind in ("*)", "`"):  # code: a comment's end outside one, a quotation inside one
            at = token.end()
        elif (literal := _ocaml_literal(source, start)) is not None:
            inner_start, inner_end, end = literal
            if depth:  # inside a comment the whole literal is comment text
                inner_start, inner_end = start, end
            keep(inner_start)
            blank(inner_end)
            keep(end)
            at = end
        else:  # a quote that opens no char literal: a type variable or part of a name
            at = token.end()
    keep(len(source))
    return "".join(out)


def _ocaml_literal(source: str, i: int) -> tuple[int, int, int] | None:
    """(content start, content end, end) of the string or char literal starting at i, if any."""
    char = source[i]
    if char == '"':
        string = _BACKSLASHED_STRING['"'].match(source, i)
        assert string is not None  # the pattern matches any text opening with a quote
        return i + 1, string.end(1), string.end()
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
