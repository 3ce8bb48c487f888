"""Lean 4 source read before anything runs: its tokens, its import header, what it may not use.

Lean's own parser is not available on the kit side, and its grammar grows with every `import`. So
this is a lexer, not a parser. It tells comments, strings, char and name literals apart from code
exactly as Lean's tokenizer does. It unescapes `«»`-escaped identifiers before comparing them. On
those tokens the policy (`refusals`) is:

- the header is `import` lines only (no `prelude`, no `module`, no import later on);
- a word that starts user meta-code, a syntax extension or a kernel bypass is refused wherever it
  stands (`#eval`, `run_tac`, `elab`, `macro`, `notation`, `initialize`, `unsafe`, `extern`, ...).
  So is any name in the `Lean` namespace or the IO machinery (`IO`, `EIO`, `RealWorld`, ...).
- the open-ended parts are allow-lists: the `#` commands, the options of `set_option`, and the
  attributes of `@[...]` and `attribute [...]`.

This is sound enough because nothing it allows runs code the artifact wrote. Elaboration stays
inside Lean's and Mathlib's own elaborators, which hand every declaration to the kernel. The kernel
side stays the authority on what a proof rests on (`#print axioms`, see lean_server.py).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass

from runner.core import deadline
from runner.provers.common.lexing import position
from runner.provers.common.verdicts import Refusal


@dataclass(frozen=True)
class Token:
    kind: str  # ident, hash, symbol, string, char, number, name_literal
    text: str  # as written
    offset: int
    parts: tuple[str, ...] = ()  # an identifier's components, unescaped

    @property
    def end(self) -> int:
        return self.offset + len(self.text)


class LexError(ValueError):
    def __init__(self, message: str, offset: int):
        super().__init__(message)
        self.offset = offset


GREEK_NOT_LETTERS = set("λΠΣ")  # Lean reserves these three as tokens


def _letter_like(c: str) -> bool:
    """Lean's `isLetterLike`: ASCII letters, Greek and Coptic (but λ Π Σ), letter-like symbols."""
    code = ord(c)
    return (
        ("a" <= c <= "z" or "A" <= c <= "Z")
        or (0x3B1 <= code <= 0x3C9 and c not in GREEK_NOT_LETTERS)
        or (0x391 <= code <= 0x3A9 and c not in GREEK_NOT_LETTERS)
        or 0x3CA <= code <= 0x3FB
        or 0x1F00 <= code <= 0x1FFE
        or 0x2100 <= code <= 0x214F
        or 0x1D49C <= code <= 0x1D59F
    )


def _subscript(c: str) -> bool:
    code = ord(c)
    return 0x2080 <= code <= 0x208C or 0x2090 <= code <= 0x209C or 0x1D62 <= code <= 0x1D6A


def _ident_start(c: str) -> bool:
    return _letter_like(c) or c == "_"


def _ident_rest(c: str) -> bool:
    return _ident_start(c) or c.isdigit() or c in "'!?" or _subscript(c)


# Matched where they start (`pattern.match(source, i)`), never on a copy of the rest of the source.
# A copy per token would make a 10 MB file take minutes.
RAW_STRING_START = re.compile(r'r(#*)"')
NUMBER = re.compile(
    r"0[xX][0-9a-fA-F_]+|0[bB][01_]+|0[oO][0-7_]+|[0-9_]+(\.[0-9]+)?([eE][-+]?[0-9]+)?"
)
SPACES = re.compile(r"\s+")
COMMENT_MARK = re.compile(r"/-|-/")  # nesting comments: each opening and closing, in order
STRING_REST = re.compile(r'(?:[^"\\]|\\[\s\S])*"')  # after the opening quote, to the closing one
CHAR_LITERAL = re.compile(r"'(\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|.)|[^\\'\n])'")


def tokens(source: str) -> list[Token]:
    """Lean 4 tokens of `source`, comments dropped. Raises LexError on an unclosed literal."""
    found: list[Token] = []
    i, n = 0, len(source)
    pacer = deadline.Pacer(lambda: f"Lean's tokens read up to character {i} of {n}")
    while i < n:
        pacer.step()
        c = source[i]
        if c.isspace():
            i = SPACES.match(source, i).end()  # type: ignore[union-attr]
        elif source.startswith("--", i):
            end = source.find("\n", i)
            i = n if end < 0 else end
        elif source.startswith("/-", i):
            i = _comment_end(source, i)
        elif c == '"':
            end = _string_end(source, i + 1)
            found.append(Token("string", source[i:end], i))
            i = end
        elif c == "r" and RAW_STRING_START.match(source, i):
            end = _raw_string_end(source, i)
            found.append(Token("string", source[i:end], i))
            i = end
        elif c == "'" and _char_literal_end(source, i) is not None:
            end = _char_literal_end(source, i) or i + 1
            found.append(Token("char", source[i:end], i))
            i = end
        elif (
            c == "`"
            and i + 1 < n
            and (source[i + 1] == "`" or _ident_start(source[i + 1]) or source[i + 1] == "«")
        ):
            start = i + (2 if source[i + 1] == "`" else 1)
            end, parts = _identifier(source, start)
            found.append(Token("name_literal", source[i:end], i, parts))
            i = end
        elif c == "#" and i + 1 < n and _ident_start(source[i + 1]):
            end, _ = _identifier(source, i + 1)
            while end < n and source[end] in "!?":
                end += 1
            found.append(Token("hash", source[i:end], i))
            i = end
        elif _ident_start(c) or c == "«":
            end, parts = _identifier(source, i)
            if end < n and source[end] == "%":  # eval%, type_of%, ...: one token in Lean
                found.append(Token("ident", source[i : end + 1], i, (source[i : end + 1],)))
                i = end + 1
            else:
                found.append(Token("ident", source[i:end], i, parts))
                i = end
        elif c.isdigit():
            m = NUMBER.match(source, i)
            end = m.end() if m else i + 1
            found.append(Token("number", source[i:end], i))
            i = end
        else:
            found.append(Token("symbol", c, i))
            i += 1
    return found


def _comment_end(source: str, start: int) -> int:
    depth = 0
    for mark in COMMENT_MARK.finditer(source, start):
        depth += 1 if mark[0] == "/-" else -1
        if depth == 0:
            return mark.end()
    raise LexError("unterminated comment", start)


def _string_end(source: str, i: int) -> int:
    end = STRING_REST.match(source, i)
    if end is None:
        raise LexError("unterminated string literal", i - 1)
    return end.end()


def _raw_string_end(source: str, start: int) -> int:
    hashes = len(RAW_STRING_START.match(source, start)[1])  # type: ignore[index]
    closing = '"' + "#" * hashes
    end = source.find(closing, start + 2 + hashes)
    if end < 0:
        raise LexError("unterminated raw string literal", start)
    return end + len(closing)


def _char_literal_end(source: str, i: int) -> int | None:
    if i > 0 and _ident_rest(source[i - 1]):
        return None  # x' is part of an identifier
    m = CHAR_LITERAL.match(source, i)
    return m.end() if m else None


def _identifier(source: str, i: int) -> tuple[int, tuple[str, ...]]:
    """End of the dotted identifier at `i`, and its components with `«»` escapes removed."""
    parts: list[str] = []
    n = len(source)
    while True:
        if i < n and source[i] == "«":
            close = source.find("»", i)
            if close < 0:
                raise LexError("unterminated «identifier»", i)
            parts.append(source[i + 1 : close])
            i = close + 1
        else:
            start = i
            while i < n and (_ident_rest(source[i]) if i > start else _ident_start(source[i])):
                i += 1
            parts.append(source[start:i])
        if i + 1 < n and source[i] == "." and (_ident_start(source[i + 1]) or source[i + 1] == "«"):
            i += 1
            continue
        return i, tuple(unicodedata.normalize("NFC", p) for p in parts)


# -- the import header ---------------------------------------------------------------------


@dataclass(frozen=True)
class Header:
    imports: tuple[str, ...]
    end: int  # offset in the source where the body starts

    @property
    def key(self) -> str:
        """What a warm REPL is specific to: the imports, in order (the pool key's part)."""
        text = "\n".join(self.imports)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def text(self) -> str:
        return "".join(f"import {module}\n" for module in self.imports)


def split_header(source: str, found: list[Token]) -> Header:
    imports: list[str] = []
    end = 0
    i = 0
    while i < len(found) and found[i].kind == "ident" and found[i].parts == ("import",):
        if i + 1 >= len(found) or found[i + 1].kind != "ident":
            break
        imports.append(".".join(found[i + 1].parts))
        end = found[i + 1].end
        i += 2
    return Header(tuple(imports), end)


def body_of(source: str, header: Header) -> str:
    """The source after the header, with the header blanked: lines and columns are unchanged."""
    blanked = "".join(c if c == "\n" else " " for c in source[: header.end])
    return blanked + source[header.end :]


# -- the policy ----------------------------------------------------------------------------

# `#` commands that only read the environment.
HASH_COMMANDS = {"#check", "#print", "#reduce", "#synth"}

# Words that start code the artifact wrote running at elaboration time, extend the syntax our own
# queries are read with, or step around the kernel. Refused wherever they stand.
DENIED_WORDS = {
    "run_cmd": "runs meta-code",
    "run_elab": "runs meta-code",
    "run_meta": "runs meta-code",
    "run_tac": "runs meta-code",
    "by_elab": "runs meta-code",
    "eval%": "evaluates code at elaboration time",
    "elab": "defines an elaborator (meta-code)",
    "elab_rules": "defines an elaborator (meta-code)",
    "macro": "extends the syntax",
    "macro_rules": "extends the syntax",
    "syntax": "extends the syntax",
    "declare_syntax_cat": "extends the syntax",
    "notation": "extends the syntax",
    "notation3": "extends the syntax",
    "infix": "extends the syntax",
    "infixl": "extends the syntax",
    "infixr": "extends the syntax",
    "prefix": "extends the syntax",
    "postfix": "extends the syntax",
    "simproc": "defines a simplification procedure (meta-code)",
    "dsimproc": "defines a simplification procedure (meta-code)",
    "simproc_decl": "defines a simplification procedure (meta-code)",
    "initialize": "runs code when loaded",
    "builtin_initialize": "runs code when loaded",
    "meta": "defines meta-code",
    "unsafe": "is outside the logic: it can forge a proof",
    "implemented_by": "swaps in unchecked code",
    "extern": "swaps in unchecked code",
    "prelude": "drops Lean's prelude",
    "module": "changes how the file is elaborated (the module system)",
    "plausible": "evaluates the artifact's code",
    "slim_check": "evaluates the artifact's code",
    "import": "imports must all come first, in the header",
}
# Namespaces of the meta level and of IO: naming them is how code reaches the machinery.
DENIED_NAMES = {
    "Lean": "is Lean's meta level",
    "IO": "is input/output",
    "EIO": "is input/output",
    "BaseIO": "is input/output",
    "RealWorld": "is input/output",
    "EStateM": "is input/output's monad",
    "unsafeCast": "is outside the logic",
    "unsafeBaseIO": "is outside the logic",
    "unsafeIO": "is outside the logic",
    "unsafeEIO": "is outside the logic",
    "ptrAddrUnsafe": "is outside the logic",
    "timeit": "is input/output",
    "_native": "is the compiler's namespace for the axioms native code adds",
}
ALLOWED_OPTIONS = re.compile(
    r"^(maxHeartbeats|maxRecDepth|synthInstance\.(maxHeartbeats|maxSize)|autoImplicit"
    r"|relaxedAutoImplicit|linter\..+|pp\..+|trace\..+|tactic\.hygienic|push_neg\.use_distrib"
    r"|simprocs|exponentiation\.threshold)$"
)
ALLOWED_ATTRIBUTES = {
    "simp",
    "ext",
    "reducible",
    "irreducible",
    "semireducible",
    "instance",
    "inline",
    "noinline",
    "specialize",
    "simps",
    "norm_cast",
    "push_cast",
    "refl",
    "symm",
    "trans",
    "gcongr",
    "mono",
    "continuity",
    "measurability",
    "fun_prop",
    "class",
    "match_pattern",
    "elab_as_elim",
    "induction_eliminator",
    "cases_eliminator",
    "coe",
    "nolint",
    "deprecated",
    "local",
    "scoped",
    "grind",
    "grind_norm",
    "field_simps",
    "bound",
    "congr",
    "nontriviality",
    "reassoc",
    "to_additive",
    "pp_nodot",
    "irreducible_def",
    "default_instance",
    "symm_simps",
    "qify_simps",
    "zify_simps",
    "mfld_simps",
    "parity_simps",
    "integral_simps",
}
# Tactics that trust compiled code, by the tier a request allows them under (`allowed_axioms`). Each
# adds an axiom the kernel cannot check.
# - `native_decide` (also `decide +native` and the axioms' own names) compiles and runs the file's
#   own decision procedure.
# - `bv_decide` runs Lean's compiled LRAT checker on the file's goal.
NATIVE_WORDS = {
    "native_decide": "native_decide",
    "ofReduceBool": "native_decide",
    "reduceBool": "native_decide",
    "ofReduceNat": "native_decide",
    "reduceNat": "native_decide",
    "bv_decide": "bv_decide",
    "bv_decide?": "bv_decide",
    "bv_check": "bv_decide",
}


@dataclass(frozen=True)
class NativeUse:
    tactic: str  # the tier: native_decide or bv_decide
    line: int
    column: int


@dataclass(frozen=True)
class Reading:
    """One pass over a file: its header, what the policy refuses, where it trusts native code."""

    header: Header
    refusals: list[Refusal]
    native: list[NativeUse]


def read(source: str) -> Reading:
    """Lex `source` once and apply the policy (no refusals: it may run)."""
    try:
        found = tokens(source)
    except LexError as exc:
        refusal = Refusal.at(source, exc.offset, f"the file does not lex as Lean: {exc}")
        return Reading(Header((), 0), [refusal], [])
    header = split_header(source, found)
    out: list[Refusal] = []
    body = [t for t in found if t.offset >= header.end]
    for index, token in enumerate(body):
        problem = _token_problem(token, body, index)
        if problem is not None:
            out.append(Refusal.at(source, token.offset, problem))
    native = [
        NativeUse(tactic, *position(source, token.offset)) for token, tactic in _native_uses(body)
    ]
    return Reading(header, out, native)


def _token_problem(token: Token, body: list[Token], index: int) -> str | None:
    if token.kind == "hash":
        if token.text not in HASH_COMMANDS:
            return f"`{token.text}` is not allowed in a checked file (allowed: {', '.join(sorted(HASH_COMMANDS))})"
        return None
    if token.kind == "symbol" and token.text == "@" and _next_text(body, index) == "[":
        return _attribute_problem(body, index + 2)
    if token.kind not in ("ident", "name_literal"):
        return None
    word = ".".join(token.parts)
    if token.kind == "ident" and word in DENIED_WORDS:
        return f"`{word}` is not allowed in a checked file: it {DENIED_WORDS[word]}"
    for part in token.parts:
        if part in DENIED_NAMES:
            return f"`{word}` is not allowed in a checked file: `{part}` {DENIED_NAMES[part]}"
    if token.parts == ("set_option",):
        name = body[index + 1] if index + 1 < len(body) else None
        option = ".".join(name.parts) if name is not None and name.kind == "ident" else "?"
        if not ALLOWED_OPTIONS.match(option):
            return f"`set_option {option}` is not allowed in a checked file"
    if token.parts == ("attribute",) and _next_text(body, index) == "[":
        return _attribute_problem(body, index + 2)
    return None


def _next_text(found: list[Token], index: int) -> str | None:
    return found[index + 1].text if index + 1 < len(found) else None


def _attribute_problem(found: list[Token], start: int) -> str | None:
    """The first attribute name outside ALLOWED_ATTRIBUTES in the list opening at `start`."""
    depth, expect_name = 0, True
    for token in found[start:]:
        if token.text in "([{" and token.kind == "symbol":
            depth += 1
        elif token.text in ")}" and token.kind == "symbol":
            depth -= 1
        elif token.text == "]" and token.kind == "symbol":
            if depth == 0:
                return None
            depth -= 1
        elif token.text == "," and depth == 0:
            expect_name = True
        elif expect_name and token.kind == "ident" and depth == 0:
            name = ".".join(token.parts)
            if name in ("local", "scoped"):
                continue
            if name not in ALLOWED_ATTRIBUTES:
                return f"attribute `{name}` is not allowed in a checked file"
            expect_name = False
        elif expect_name and token.text == "-" and depth == 0:
            continue  # attribute [-simp] erases
    return None


def _native_uses(found: list[Token]) -> list[tuple[Token, str]]:
    """Where the file asks Lean to trust compiled code, with the tier of each.

    Such uses are `native_decide`, `decide +native`, `bv_decide`, ...
    """
    uses = []
    for index, token in enumerate(found):
        if token.kind != "ident":
            continue
        tiers = [NATIVE_WORDS[part] for part in token.parts if part in NATIVE_WORDS]
        if tiers:
            uses.append((token, tiers[0]))
        elif token.parts == ("native",) and (
            (index > 0 and found[index - 1].text in ("+", ":="))
            or (index + 1 < len(found) and found[index + 1].text == ":")
        ):
            uses.append((token, "native_decide"))
    return uses


# Lean's paired delimiters: a target is wrapped in `( ... )`, so its own must pair up inside.
BRACKETS = {"(": ")", "[": "]", "{": "}", "⟨": "⟩", "⦃": "⦄", "⟦": "⟧", "‹": "›"}


def target_problem(statement: str) -> str | None:
    """Why a target statement cannot be sent to Lean as one term (None: it can)."""
    try:
        found = tokens(statement)
    except LexError as exc:
        return f"the target statement does not lex as Lean: {exc}"
    if not found:
        return "the target statement is empty"
    opened: list[str] = []
    for index, token in enumerate(found):
        if token.kind == "symbol" and token.text in BRACKETS:
            opened.append(BRACKETS[token.text])
        elif token.kind == "symbol" and token.text in BRACKETS.values():
            if not opened:
                return f"the target statement closes a bracket it never opened: {token.text!r}"
            expected = opened.pop()
            if token.text != expected:
                return f"the target statement closes {expected!r} with {token.text!r}"
        problem = _token_problem(token, found, index)
        if problem is not None:
            return f"the target statement: {problem}"
    if opened:
        return f"the target statement leaves a bracket open (missing {opened[-1]!r})"
    return None
