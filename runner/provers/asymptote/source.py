"""Asymptote source read as asy's own lexer reads it: tokens, places and string values.

The lexer is camp.l of asy 2.85.
There is no AST dump, so the guard (guard.py) decides on these tokens.
This lexer follows camp.l rule by rule where a decision depends on it:

- comments: `//`, and `/* */`, which does not nest;
- `"..."` strings keep backslashes; only `\\"` and `\\\\` are escapes;
- `'...'` strings take C escapes, so `'\\134'` is a backslash;
- adjacent literals are joined into one string (`"a" 'b'`), across newlines too;
- backslash-newline is white space;
- the `operator` state *skips* characters it does not expect (`operator "` opens no string).

Numbers and operators are read by longest match, as flex does.

The generic C-like scanner (common/lexing.py) gives a second reading.
Both must agree on every character that is comment or string.
Where they disagree, the source is `Unreadable`.
The guard then refuses it rather than guess which reading asy takes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from runner.core import deadline
from runner.provers.common.lexing import c_like_code

KEYWORDS = frozenset(
    {
        "and",
        "controls",
        "tension",
        "atleast",
        "curl",
        "if",
        "else",
        "while",
        "for",
        "do",
        "return",
        "break",
        "continue",
        "struct",
        "typedef",
        "new",
        "access",
        "import",
        "unravel",
        "from",
        "include",
        "quote",
        "static",
        "public",
        "private",
        "restricted",
        "this",
        "explicit",
        "true",
        "false",
        "null",
        "cycle",
        "newframe",
    }
)
IDENTIFIER = re.compile(r"[_A-Za-z][_A-Za-z0-9]*")
NUMBERS = (  # camp.l's integer and real rules
    re.compile(r"[0-9]+"),
    re.compile(r"[0-9]*\.[0-9]+"),
    re.compile(r"[0-9]+\.[0-9]*"),
    re.compile(r"[0-9]*\.*[0-9]+e[-+]*[0-9]+"),
    re.compile(r"[0-9]+\.[0-9]*e[-+]*[0-9]+"),
)
OPERATORS = sorted(
    {
        ",",
        ":",
        ";",
        "(",
        ")",
        "[",
        "]",
        "{",
        "}",
        ".",
        "...",
        "+",
        "-",
        "*",
        "/",
        "#",
        "%",
        "^",
        "**",
        "?",
        "=",
        "==",
        "!=",
        "<",
        "<=",
        ">",
        ">=",
        "&&",
        "||",
        "!",
        "^^",
        "::",
        "++",
        "..",
        "--",
        "---",
        "&",
        "|",
        "<<",
        ">>",
        "$",
        "$$",
        "@",
        "@@",
        "~",
        "<>",
        "+=",
        "-=",
        "*=",
        "/=",
        "#=",
        "%=",
        "^=",
    },
    key=len,
    reverse=True,
)
OPERATOR = re.compile("|".join(map(re.escape, OPERATORS)))  # longest first: the longest match
NUMBER_STARTS = frozenset("0123456789.")
# Names an `operator` may define (camp.l's <opname> state), longest first.
OPERATOR_NAMES = sorted(
    {
        *"-+*/#%^!<>",
        "**",
        "==",
        "!=",
        "<=",
        ">=",
        "&",
        "|",
        "^^",
        "..",
        "::",
        "--",
        "---",
        "++",
        "<<",
        ">>",
        "$",
        "$$",
        "@",
        "@@",
        "~",
        "<>",
    },
    key=len,
    reverse=True,
)
NEWLINE = re.compile(r"\\?(?:\r\n|\n|\r)")  # camp.l's ENDL: a backslash before it is dropped
NEWLINE_STARTS = frozenset("\\\r\n")
BLANKS = re.compile(r"[ \t]+")
SPACE_RUN = re.compile(r" +")
WHITE_RUN = re.compile(r"[ \t\r\n]+")
LINE_END = re.compile(r"\r\n|\n|\r")  # asy's line ends (str.splitlines knows more: U+2028, ...)
BETWEEN_LITERALS = re.compile(r"(?:[ \t]|\\?(?:\r\n|\n|\r))*")
C_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "'": "'",
    '"': '"',
    "?": "?",
    "\\": "\\",
}
OCTAL = re.compile(r"[0-3][0-7][0-7]|[0-7][0-7]?")
HEX = re.compile(r"x([0-9,A-F][0-9,A-F]?)")  # camp.l's class: uppercase only, and a comma


class Unreadable(ValueError):
    """asy and a plain C-like reading disagree about this source; `offset` is where."""

    def __init__(self, offset: int, why: str):
        super().__init__(why)
        self.offset = offset


@dataclass(frozen=True)
class Token:
    kind: str  # "id", "keyword", "number", "string", "op", "invalid"
    text: str  # the source text; for a string, the value asy builds (literals joined)
    offset: int
    end: int
    places: tuple[int, ...] = ()  # for a string: where each character of `text` comes from

    def place(self, index: int = 0) -> int:
        """Source offset of character `index` of a string's value (else of the token)."""
        return self.places[index] if self.places else self.offset


def tokenize(source: str) -> list[Token]:
    """The asy tokens of `source`.

    Raises Unreadable where the C-like scan reads the source otherwise.
    Raises deadline.OutOfTime when the check's time runs out first.
    """
    reader = _Reader(source)
    tokens = reader.read()
    _agree_with_c_like_scan(source, reader.quiet)
    return tokens


def lines(text: str) -> list[str]:
    """`text` cut into lines where asy cuts it (never at U+2028, \\x0c, ... as splitlines does)."""
    return LINE_END.split(text)


def position(source: str, offset: int) -> tuple[int, int]:
    """asy's (line, column) of `offset`, both 1-based; `\\r\\n`, `\\n` and `\\r` end a line."""
    line, start = 1, 0
    for newline in NEWLINE.finditer(source, 0, offset):
        if newline.end() <= offset:
            line, start = line + 1, newline.end()
    return line, offset - start + 1


class _Reader:
    def __init__(self, source: str):
        self.source = source
        self.tokens: list[Token] = []
        # Offsets asy reads as comment or string (delimiters included): checked against the
        # C-like scan, which blanks exactly those.
        self.quiet = bytearray(len(source))

    def read(self) -> list[Token]:
        source, n, i = self.source, len(self.source), 0
        pacer = deadline.Pacer(lambda: f"asy's tokens read up to character {i} of {n}")
        while i < n:
            pacer.step()
            char = source[i]
            if char in " \t":
                i = BLANKS.match(source, i).end()  # type: ignore[union-attr]
            elif char in NEWLINE_STARTS and (newline := NEWLINE.match(source, i)):
                i = newline.end()
            elif char == "/" and source.startswith("//", i):
                end = source.find("\n", i)
                i = self._quiet(i, n if end < 0 else end)
            elif char == "/" and source.startswith("/*", i):
                end = source.find("*/", i + 2)
                i = self._quiet(i, n if end < 0 else end + 2)
            elif char in "\"'":
                i = self._string(i)
            elif word := IDENTIFIER.match(source, i):
                text = word.group()
                kind = "keyword" if text in KEYWORDS else "id"
                self.tokens.append(Token(kind, text, i, word.end()))
                i = self._operator_name(word.end()) if text == "operator" else word.end()
            else:
                i = self._number_or_operator(i)
        return self.tokens

    def _quiet(self, start: int, end: int) -> int:
        self.quiet[start:end] = b"\1" * (end - start)
        return end

    def _number_or_operator(self, i: int) -> int:
        source = self.source
        if source[i] not in NUMBER_STARTS and (operator := OPERATOR.match(source, i)):
            self.tokens.append(Token("op", operator[0], i, operator.end()))  # no number rival
            return operator.end()
        end, kind = i, "invalid"
        if source[i] in NUMBER_STARTS:
            for rule in NUMBERS:
                if (number := rule.match(source, i)) and number.end() > end:
                    end, kind = number.end(), "number"
        if (operator := OPERATOR.match(source, i)) and operator.end() >= end:
            end, kind = operator.end(), "op"  # a tie goes to camp.l's earlier rule, the operator
        if kind == "invalid":  # asy: "invalid token", a compile error
            end = i + 1
        self.tokens.append(Token(kind, source[i:end], i, end))
        return end

    def _operator_name(self, i: int) -> int:
        """camp.l's <opname> state after `operator`: the name, skipping anything unexpected."""
        source, n = self.source, len(self.source)
        while i < n:
            if source[i] in " \t\r":
                i += 1
            elif newline := NEWLINE.match(source, i):
                i = newline.end()
            elif name := next((op for op in OPERATOR_NAMES if source.startswith(op, i)), None):
                self.tokens.append(Token("id", name, i, i + len(name)))
                return i + len(name)
            elif word := IDENTIFIER.match(source, i):
                self.tokens.append(Token("id", word.group(), i, word.end()))
                return word.end()
            else:  # asy skips it silently; a C-like reading might take it for a quote
                raise Unreadable(i, f"asy skips {source[i]!r} after `operator`")
        return i

    def _string(self, start: int) -> int:
        """One string token from `start`: literals joined while only white space separates them."""
        source, n = self.source, len(self.source)
        value: list[str] = []
        places: list[int] = []
        quote, i = source[start], start + 1
        while i < n:
            char = source[i]
            if char == quote:
                after = BETWEEN_LITERALS.match(source, i + 1).end()  # type: ignore[union-attr]
                if after < n and source[after] in "\"'":
                    self._quiet(i, after)  # asy: the string goes on into the next literal
                    quote, i = source[after], after + 1
                    continue
                i += 1
                break
            if newline := NEWLINE.match(source, i):
                value.append("\n")
                places.append(i)
                i = newline.end()
            elif char == "\\" and i + 1 < n:
                text, length = _escape(source, i, quote)
                value.append(text)
                places += [i] * len(text)
                i += length
            else:
                value.append(char)
                places.append(i)
                i += 1
        self._quiet(start, i)
        self.tokens.append(Token("string", "".join(value), start, i, tuple(places)))
        return i


def _escape(source: str, i: int, quote: str) -> tuple[str, int]:
    """(value, length) of the backslash sequence at `i` in a `quote` string.

    A backslash asy does not take as an escape stands for itself (length 1).
    """
    following = source[i + 1]
    if quote == '"':
        return ("\\\\", 2) if following == "\\" else ('"', 2) if following == '"' else ("\\", 1)
    if following in C_ESCAPES:
        return C_ESCAPES[following], 2
    if octal := OCTAL.match(source, i + 1):
        return chr(int(octal.group(), 8)), 1 + len(octal.group())
    if hexa := HEX.match(source, i + 1):
        value = 0
        for digit in hexa[1]:
            value = value * 16 + (ord(digit) - 48 if digit <= "9" else 10 + ord(digit) - 65)
        return chr(value & 0xFF), 1 + len(hexa.group())
    return "\\", 1


def _agree_with_c_like_scan(source: str, quiet: bytearray) -> None:
    """Every character but white space is comment or string to both readings, or to neither.

    The C-like scan blanks exactly its comments and strings to spaces.
    Both marks are compared as byte strings, run by run, never a character at a time.
    """
    blanked = c_like_code(source)
    scanned = bytearray(len(source))  # 1: the C-like scan blanked this character
    for run in SPACE_RUN.finditer(blanked):
        scanned[run.start() : run.end()] = b"\1" * (run.end() - run.start())
    for run in WHITE_RUN.finditer(source):  # white space reads alike either way: not compared
        scanned[run.start() : run.end()] = quiet[run.start() : run.end()]
    if scanned == quiet:
        return
    low, high = 0, len(source)  # the first difference is in [low, high)
    while high - low > 1:
        middle = (low + high) // 2
        if scanned[low:middle] != quiet[low:middle]:
            high = middle
        else:
            low = middle
    what = "comment or string" if quiet[low] else "code"
    raise Unreadable(low, f"asy reads this as {what}, a C-like reading does not")
