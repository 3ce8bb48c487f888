"""Isabelle theory source read before anything runs: outer tokens, the header, what is refused.

Isabelle's outer syntax is small and fixed. Comments `(* *)` nest, and so do cartouches `‹ ›` (or
`\\<open> \\<close>`). Strings, `` `...` `` and `{* *}` hold inner syntax. A keyword of the theory
language is an identifier token outside all of those. So a word that only appears inside a
proposition or a comment is never mistaken for a command.

Refused before any check:
- ML in every form (`ML`, `ML_file`, `setup`, `declaration`, `method_setup`, ...): it can change
  the running system;
- the `oracle` command;
- `quick_and_dirty`, which lets `sorry`-like cheats through;
- code printing and reflection, which inject ML;
- tools that leave the sandbox (`sledgehammer`).

The kernel judges everything else. The worker's report lists each theorem's oracles and the theory's
axioms (see sandbox/isabelle_worker.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from runner.core import deadline
from runner.provers.common.lexing import position
from runner.provers.common.verdicts import Refusal

THEORY_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_']*$")
SYMBOLS = {"\\<open>": "‹", "\\<close>": "›"}

DENIED = {
    "ML": "runs ML code",
    "ML_file": "runs ML code",
    "ML_val": "runs ML code",
    "ML_command": "runs ML code",
    "ML_prf": "runs ML code",
    "ML_export": "runs ML code",
    "ML_import": "runs ML code",
    "SML_file": "runs ML code",
    "SML_import": "runs ML code",
    "SML_export": "runs ML code",
    "setup": "runs ML code",
    "local_setup": "runs ML code",
    "declaration": "runs ML code",
    "syntax_declaration": "runs ML code",
    "attribute_setup": "runs ML code",
    "method_setup": "runs ML code",
    "simproc_setup": "runs ML code",
    "parse_translation": "runs ML code",
    "print_translation": "runs ML code",
    "typed_print_translation": "runs ML code",
    "parse_ast_translation": "runs ML code",
    "print_ast_translation": "runs ML code",
    "oracle": "adds an oracle: unchecked theorems",
    "quick_and_dirty": "lets unfinished proofs through",
    "code_printing": "injects code into generated programs",
    "code_reflect": "runs generated code as ML",
    "sledgehammer": "calls external provers",
    "external_file": "reads files outside the theory",
}
PLACEHOLDERS = {"sorry", "oops", "admit"}


@dataclass(frozen=True)
class Token:
    text: str
    offset: int


class LexError(ValueError):
    def __init__(self, message: str, offset: int):
        super().__init__(message)
        self.offset = offset


WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_'.]*")
SPACES = re.compile(r"\s+")
# after the opening quote, to the closing one (a backslash takes the next character)
QUOTED_REST = {quote: re.compile(rf"(?:[^{quote}\\]|\\[\s\S])*{quote}") for quote in '"`'}


def tokens(source: str) -> list[Token]:
    """Outer-syntax words (identifiers, long names, keywords like `[[`), literals dropped."""
    for symbol, glyph in SYMBOLS.items():
        source = source.replace(symbol, glyph + " " * (len(symbol) - 1))
    found: list[Token] = []
    i, n = 0, len(source)
    pacer = deadline.Pacer(lambda: f"Isabelle's tokens read up to character {i} of {n}")
    while i < n:
        pacer.step()
        c = source[i]
        if c.isspace():
            i = SPACES.match(source, i).end()  # type: ignore[union-attr]
        elif source.startswith("(*", i):
            i = _nested_end(source, i, "(*", "*)", "comment")
        elif c == "‹":
            i = _nested_end(source, i, "‹", "›", "cartouche")
        elif source.startswith("{*", i):
            end = source.find("*}", i + 2)
            if end < 0:
                raise LexError("unterminated {* *} text", i)
            i = end + 2
        elif c in '"`':
            i = _quoted_end(source, i)
        elif m := WORD.match(source, i):  # where it starts: a copy of the rest is quadratic
            found.append(Token(m.group(0).rstrip("."), i))
            i = m.end()
        elif source.startswith("[[", i):
            found.append(Token("[[", i))
            i += 2
        else:
            found.append(Token(c, i))
            i += 1
    return found


def _nested_end(source: str, start: int, opening: str, closing: str, what: str) -> int:
    depth = 0
    marks = re.compile(f"{re.escape(opening)}|{re.escape(closing)}")
    for mark in marks.finditer(source, start):
        depth += 1 if mark[0] == opening else -1
        if depth == 0:
            return mark.end()
    raise LexError(f"unterminated {what}", start)


def _quoted_end(source: str, start: int) -> int:
    end = QUOTED_REST[source[start]].match(source, start + 1)
    if end is None:
        raise LexError("unterminated string", start)
    return end.end()


@dataclass(frozen=True)
class Header:
    name: str
    imports: tuple[str, ...]
    offset: int


def header(source: str) -> Header | None:
    """`theory NAME imports A "B.C" ... begin`, or None when the file does not start so."""
    return _header(source, tokens(source))


def _header(source: str, found: list[Token]) -> Header | None:
    if not found or found[0].text != "theory" or len(found) < 2:
        return None
    name = found[1].text
    imports = [
        m.group(1) or m.group(2)
        for m in re.finditer(r'"([^"]+)"|([A-Za-z_][\w.\'-]*)', _header_text(source))
        if (m.group(1) or m.group(2)) not in ("imports", "begin", "keywords", "abbrevs")
    ]
    return Header(name=name, imports=tuple(imports), offset=found[1].offset)


def _header_text(source: str) -> str:
    """The text between `imports` and `begin` (or `keywords`)."""
    m = re.search(r"\bimports\b(.*?)\b(begin|keywords|abbrevs)\b", source, re.DOTALL)
    return m.group(1) if m else ""


# Commands that end an `axiomatization`: the fact names it declares come before one of these.
# A command missing here only makes the span longer, and the names it protects more.
COMMANDS = {
    "lemma", "theorem", "corollary", "proposition", "schematic_goal", "definition",
    "abbreviation", "fun", "function", "primrec", "primcorec", "inductive", "coinductive",
    "datatype", "codatatype", "record", "typedef", "typedecl", "type_synonym", "consts",
    "axiomatization", "axioms", "locale", "class", "instantiation", "instance", "context",
    "interpretation", "sublocale", "notation", "declare", "text", "section", "subsection",
    "subsubsection", "chapter", "paragraph", "end", "hide_const", "hide_fact", "lemmas",
    "named_theorems", "overloading", "specification", "nitpick", "value", "export_code",
}  # fmt: skip


@dataclass(frozen=True)
class Reading:
    """One pass over a theory: its header, what the policy refuses, and what the report is read
    against.

    The last part is the placeholders, the `axiomatization`s, and the fact names they declare.
    """

    header: Header | None
    refusals: list[Refusal]
    placeholders: list[tuple[str, int]]  # (word, line)
    axiomatizations: list[int]  # lines
    axiom_names: frozenset[str]  # the fact names axiomatizations declare, unqualified


def read(source: str) -> Reading:
    """Lex `source` once and apply the policy (no refusals: it may run)."""
    try:
        found = tokens(source)
    except LexError as exc:
        refusal = Refusal.at(source, exc.offset, f"the theory does not lex: {exc}")
        return Reading(None, [refusal], [], [], frozenset())
    refusals = [
        Refusal.at(
            source,
            t.offset,
            f"`{t.text}` is not allowed in a checked theory: it {DENIED[t.text]}",
        )
        for t in found
        if t.text in DENIED
    ]
    found_header = _header(source, found)
    if found_header is None:
        refusals.append(
            Refusal.at(
                source,
                0,
                "the file does not start with a theory header (`theory NAME imports ... begin`)",
            )
        )
    return Reading(
        header=found_header,
        refusals=refusals,
        placeholders=[
            (t.text, position(source, t.offset)[0]) for t in found if t.text in PLACEHOLDERS
        ],
        axiomatizations=[
            position(source, t.offset)[0] for t in found if t.text in ("axiomatization", "axioms")
        ],
        axiom_names=_axiom_names(found),
    )


def _axiom_names(found: list[Token]) -> frozenset[str]:
    """Names followed by `:` (or `[attributes]:`) from an axiomatization to the next command."""
    names: set[str] = set()
    inside = False
    for index, token in enumerate(found):
        if token.text in ("axiomatization", "axioms"):
            inside = True
        elif token.text in COMMANDS:
            inside = False
        elif inside and (token.text[:1].isalpha() or token.text[:1] == "_"):
            after = index + 1
            if after < len(found) and found[after].text == "[":
                while after < len(found) and found[after].text != "]":
                    after += 1
                after += 1
            if after < len(found) and found[after].text == ":":
                names.add(token.text.rsplit(".", 1)[-1])
    return frozenset(names)


def theory_name_problem(file_name: str, source: str) -> str | None:
    """Why this file's name cannot name its theory (None: it can).

    A file without a readable header is not judged here: that is the theory's own failure (`read`).
    """
    stem = file_name.rsplit("/", 1)[-1]
    stem = stem[: -len(".thy")] if stem.endswith(".thy") else stem
    if not THEORY_NAME.match(stem):
        return f"{file_name!r} is not a theory file name: it must be a theory name (a letter, then letters, digits, _ or ') with .thy"
    try:
        found = header(source)
    except LexError:
        return None
    if found is not None and found.name != stem:
        return f"the theory header names theory {found.name!r}, but the file is {file_name!r}: they must agree"
    return None


# An Isabelle symbol: `\<forall>`, `\<^sub>`; a `\<` that does not close is none.
SYMBOL = re.compile(r"\\<\^?[A-Za-z][A-Za-z0-9_']*>")
PAIRS = {"(": ")", "[": "]", "{": "}"}


def target_problem(statement: str) -> str | None:
    """Why a target cannot be read as one proposition in the report theory (None: it can).

    The statement goes into an ML string inside the report theory's `ML ‹...›` block. From there it
    goes to `Syntax.read_prop`. So its cartouches must pair up anywhere, as they delimit that block.
    Its symbols must be whole. Its brackets must pair up outside inner-syntax strings (`''...''`,
    `"..."`), cartouches and comments.
    """
    if not statement.strip():
        return "the target statement is empty"
    if "\\<" in SYMBOL.sub("", statement):
        return "the target statement has a `\\<` that does not start an Isabelle symbol"
    text = statement.replace("\\<open>", "‹").replace("\\<close>", "›")
    depth = 0
    for c in text:
        depth += {"‹": 1, "›": -1}.get(c, 0)
        if depth < 0:
            return "the target statement closes a cartouche it never opened"
    if depth:
        return "the target statement leaves a cartouche open"
    opened: list[str] = []
    i = 0
    while i < len(text):
        for opening, closing in (("''", "''"), ('"', '"'), ("(*", "*)"), ("‹", "›")):
            if text.startswith(opening, i):
                end = _skip(text, i, opening, closing)
                if end < 0:
                    return f"the target statement leaves `{opening}` open"
                i = end
                break
        else:
            c = text[i]
            if c in PAIRS:
                opened.append(PAIRS[c])
            elif c in PAIRS.values():
                if not opened:
                    return f"the target statement closes a bracket it never opened: {c!r}"
                expected = opened.pop()
                if c != expected:
                    return f"the target statement closes {expected!r} with {c!r}"
            i += 1
    if opened:
        return f"the target statement leaves a bracket open (missing {opened[-1]!r})"
    return None


def _skip(text: str, start: int, opening: str, closing: str) -> int:
    """The end of the literal, comment or cartouche opening at `start`, or -1."""
    if opening == "‹":
        depth, i = 0, start
        while i < len(text):
            depth += {"‹": 1, "›": -1}.get(text[i], 0)
            i += 1
            if depth == 0:
                return i
        return -1
    end = text.find(closing, start + len(opening))
    return -1 if end < 0 else end + len(closing)
