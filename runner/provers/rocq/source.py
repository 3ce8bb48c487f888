"""What a Rocq file's text says before it runs: its sentences, its `Require` prefix, refusals.

The text is read with comments and string contents blanked (lexing.coq_code), so offsets are the
file's own. These readings decide three things, all conservatively: which sentences are refused
before anything runs (the worker refuses them again on Coq's own parse), which leading
`Require`s a warm parent may have loaded already, and how a message quotes the file. Whether a
proof holds is never read from here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from runner.provers.common.lexing import coq_code

IDENT = r"[A-Za-z_\u00C0-\uFFFF][A-Za-z0-9_'\u00C0-\uFFFF]*"
QUALID = rf"{IDENT}(?:\.{IDENT})*"
# `From Coq Require Import Arith Lia.`, `Require Export List.`: what a prefix may hold.
REQUIRE = re.compile(rf"(?:From\s+{QUALID}\s+)?Require(?:\s+(?:Import|Export))?(?:\s+{QUALID})+")
# Tactics and commands that leave a proof unfinished. `Abort` drops the theorem entirely.
PLACEHOLDER = re.compile(r"(?<![\w'])(Admitted|admit|give_up|Abort|Admit\s+Obligations)(?![\w'])")

# Before a sentence's command: bullets, braces, goal selectors (`2:`, `all:`, `[x]:`),
# attributes, and control or locality words.
_RANGE = r"\d+(?:\s*-\s*\d+)?"
_BULLETS = re.compile(
    rf"(?:\s+|[-+*]+|[{{}}]|(?:all|par|!|\[\s*{IDENT}\s*\]|{_RANGE}(?:\s*,\s*{_RANGE})*)\s*:(?!=))*"
)
_ATTRIBUTE = re.compile(r"#\[")
_CONTROL = re.compile(r"(Time|Fail|Succeed|Timeout\s+\d+|Redirect\s+\"[^\"]*\")\s+")
_LOCALITY = re.compile(
    r"(Local|Global|Export|Polymorphic|Monomorphic|Cumulative|NonCumulative|"
    r"Private|Program)\s+"
)
# Commands that reach the file system, load code, rewind, or rewire the kernel.
REFUSED_COMMANDS = (
    "Load",
    "Cd",
    "Declare ML Module",
    "Add LoadPath",
    "Add Rec LoadPath",
    "Remove LoadPath",
    "Add ML Path",
    "Add Rec ML Path",
    "Drop",
    "Quit",
    "Primitive",
    "Reset",
    "Back",
    "BackTo",
    "Extraction",
    "Recursive Extraction",
    "Separate Extraction",
    "Extract",
    "Locate File",
    "Locate Library",
)
_REFUSED = re.compile(
    r"(" + "|".join(re.escape(c).replace(r"\ ", r"\s+") for c in REFUSED_COMMANDS) + r")(?![\w'])"
)
# Options whose effect reaches outside the checked file or around the kernel's checks.
_REFUSED_OPTIONS = re.compile(
    r"NativeCompute|Native\s+Compiler|Extraction|Definitional\s+UIP|"
    r"Template"
)
# `Register ... as kernel.ind_bool` tells the kernel which inductive its primitives return.
_KERNEL_REGISTER = re.compile(rf"Register\s+(?:Inline\s+)?{QUALID}\s+as\s+kernel\.")
_OPTION_COMMAND = re.compile(r"(Set|Unset|Add|Remove)(?![\w'])")
# Refused wherever they stand in code: native compilation writes and runs OCaml, and commands
# no identifier spells.
_REFUSED_WORDS = re.compile(
    r"(?<![\w'.])(native_compute|native_cast_no_check|Redirect|Extraction|Declare\s+ML\s+Module|"
    r"Add\s+(?:Rec\s+)?LoadPath|Add\s+(?:Rec\s+)?ML\s+Path|Locate\s+(?:File|Library))(?![\w'])"
)
DECLARATION = re.compile(
    r"(Theorem|Lemma|Fact|Remark|Corollary|Proposition|Property|Example|Definition|Fixpoint|"
    r"CoFixpoint|Instance|Axiom|Axioms|Parameter|Parameters|Conjecture|Function|Goal)(?![\w'])"
)
_THEOREM = (
    r"(?:Theorem|Lemma|Fact|Remark|Corollary|Proposition|Property|Example|Definition|Axiom|"
    r"Parameter|Conjecture)"
)


@dataclass(frozen=True)
class Sentence:
    start: int  # offset of its first character of code
    end: int  # offset just past its terminating `.`
    code: str  # its text with comments and strings blanked

    @property
    def command(self) -> str:
        """The command, after bullets, braces, attributes, control and locality words."""
        return command_of(self.code)[0]


def sentences(content: str) -> list[Sentence]:
    """The file's sentences: each ends at a `.` followed by a blank or the end (not `..`)."""
    code = coq_code(content)
    found, start, n = [], 0, len(code)
    for i, char in enumerate(code):
        if char != ".":
            continue
        if (i + 1 < n and not code[i + 1].isspace()) or (i and code[i - 1] == "."):
            continue
        chunk = code[start : i + 1]
        stripped = len(chunk) - len(chunk.lstrip())
        if chunk.strip() != ".":
            found.append(Sentence(start + stripped, i + 1, chunk.strip()))
        start = i + 1
    if code[start:].strip():
        found.append(
            Sentence(
                start + len(code[start:]) - len(code[start:].lstrip()), n, code[start:].strip()
            )
        )
    return found


def command_of(code: str) -> tuple[str, list[str]]:
    """(the command text, the control and locality words before it) of one sentence's code."""
    words: list[str] = []
    text = code[_BULLETS.match(code).end() :]  # type: ignore[union-attr]
    while True:
        if _ATTRIBUTE.match(text):
            close = _attribute_end(text)
            words.append(text[:close])
            text = text[close:].lstrip()
            continue
        match = _CONTROL.match(text) or _LOCALITY.match(text)
        if match is None:
            return text, words
        words.append(match.group(1))
        text = text[match.end() :]


def _attribute_end(text: str) -> int:
    depth = 0
    for i, char in enumerate(text):
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth == 0:
                return i + 1
    return len(text)


@dataclass(frozen=True)
class Refusal:
    word: str
    line: int
    column: int
    context: str


def refusals(content: str) -> list[Refusal]:
    """Sentences refused before the file runs (conservative: the worker checks Coq's parse too)."""
    found = []
    code = coq_code(content)
    lines = content.splitlines()
    for match in _REFUSED_WORDS.finditer(code):
        found.append(_refusal(" ".join(match.group(1).split()), match.start(), code, lines))
    for sentence in sentences(content):
        text, before = command_of(sentence.code)
        offset = sentence.start + sentence.code.find(text) if text else sentence.start
        if _KERNEL_REGISTER.match(text):
            found.append(_refusal("Register ... as kernel", offset, code, lines))
            continue
        refused = _REFUSED.match(text)
        if refused:
            found.append(_refusal(" ".join(refused.group(1).split()), offset, code, lines))
            continue
        option = _OPTION_COMMAND.match(text)
        if option is None:
            continue
        outlives = any(w in ("Global", "Export") or _global_attribute(w) for w in before)
        if outlives:
            word = " ".join(
                [
                    *(w for w in before if w in ("Global", "Export") or _global_attribute(w)),
                    option.group(1),
                ]
            )
            found.append(_refusal(word, offset, code, lines))
        elif _REFUSED_OPTIONS.search(text):
            found.append(_refusal(" ".join(text.split()[:3]), offset, code, lines))
    return sorted(found, key=lambda r: (r.line, r.column))


def _global_attribute(word: str) -> bool:
    return (
        word.startswith("#[") and re.search(r"(?<![\w'])(global|export)(?![\w'])", word) is not None
    )


def _refusal(word: str, offset: int, code: str, lines: list[str]) -> Refusal:
    line = code.count("\n", 0, offset) + 1
    column = offset - (code.rfind("\n", 0, offset) + 1)
    context = " ".join(lines[line - 1].split()) if line <= len(lines) else ""
    return Refusal(word=word, line=line, column=column, context=context[:300])


@dataclass(frozen=True)
class Prefix:
    """The file's leading `Require`s: what a warm parent may have run before the file."""

    end: int  # offset just past the last of them (0: none)
    code: str  # content[:end] with comments and strings blanked: what the parent runs

    def body(self, content: str) -> str:
        """The file with its prefix blanked, so the rest keeps every line and column."""
        head = "".join(c if c == "\n" else " " for c in content[: self.end])
        return head + content[self.end :]


def prefix(content: str) -> Prefix:
    end = 0
    for sentence in sentences(content):
        if not REQUIRE.fullmatch(sentence.code[:-1].rstrip()) or '"' in sentence.code:
            break
        end = sentence.end
    return Prefix(end=end, code=coq_code(content[:end]))


def placeholders(content: str) -> list[str]:
    match = PLACEHOLDER.search(coq_code(content))
    return [f"`{match[0]}`"] if match else []


def declares(content: str) -> bool:
    """Whether some sentence declares a constant (then an audit that lists none is broken)."""
    return any(DECLARATION.match(s.command) for s in sentences(content))


def stated(content: str, name: str) -> str | None:
    """How the file states theorem `name` (its last component), as written, or None."""
    short = name.rsplit(".", 1)[-1]
    pattern = re.compile(rf"{_THEOREM}\s+{re.escape(short)}(?![\w'])(.*)\.\Z", re.DOTALL)
    code = coq_code(content)
    for sentence in sentences(content):
        match = pattern.match(sentence.command)
        if match:
            text = content[sentence.end - len(match.group(1)) - 1 : sentence.end - 1]
            written = code[sentence.end - len(match.group(1)) - 1 : sentence.end - 1]
            body = written.split(":=", 1)[0] if ":=" in written else written
            return " ".join(text[: len(body)].split()) or None
    return None
