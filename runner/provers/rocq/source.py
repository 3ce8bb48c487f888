"""What a Rocq file's text says before it runs: its sentences, its `Require` prefix, refusals.

The text is read with comments and string contents blanked (lexing.coq_code), so offsets are the
file's own. These readings decide three things:
- which sentences are refused before anything runs (the worker refuses them again on Coq's own
  parse);
- which leading `Require`s a warm parent may have loaded already;
- how a message quotes the file or names an unfinished proof. What the file declared, and whether a
  proof holds, is never read from here: the compiled library says.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from runner.core import deadline
from runner.provers.common.lexing import coq_code
from runner.provers.common.verdicts import Refusal

# Letters beyond Latin-1's symbols as a negated byte range. It is the same set as \u00C0-\uFFFF plus
# the astral planes, which Coq's letters reach too. It compiles in microseconds; a \uFFFF range took
# milliseconds per class (tens of ms of every CLI call).
IDENT = r"(?:[A-Za-z_]|[^\x00-\xbf])(?:[A-Za-z0-9_']|[^\x00-\xbf])*"
QUALID = rf"{IDENT}(?:\.{IDENT})*"
# `From Coq Require Import Arith Lia.`, `Require Export List.`: what a prefix may hold.
REQUIRE = re.compile(rf"(?:From\s+{QUALID}\s+)?Require(?:\s+(?:Import|Export))?(?:\s+{QUALID})+")
# Tactics and commands that leave a proof unfinished; each leaves an axiom of the file's own. Then
# commands that drop an unfinished theorem entirely. Those leave no trace in the library, so they
# count only as a sentence's command (`Definition Abort := 0.` is not one).
PLACEHOLDER = re.compile(r"(?<![\w'])(Admitted|admit|give_up)(?![\w'])")
# A sentence that is such a command, whatever comes before it (`Timeout 3Abort.`). It is the word
# and at most two more (`Abort All`, `Admit Obligations of f`), then the sentence's end.
ABANDONED = re.compile(
    r"(Abort|Admit[ \t\r\n]+Obligations)"
    r"(?:[ \t\r\n]+[A-Za-z_][\w']*(?:\.[A-Za-z_][\w']*)*){0,2}[ \t\r\n]*\.+\Z"
)

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
# What is still refused, and why containment cannot replace it.
#
# Both backends confine a check to its own sandbox (read-only system, private /work and /tmp, no
# network). And coqchk re-checks the compiled library in a fresh process. So these are accepted:
# file writes (`Redirect`, `Extraction "f"`, `Print Universes "f"`), plugins and load paths
# (`Declare ML Module`, `Add LoadPath`), `Cd`, rewinding (`Reset`, `Back`), and every harmless
# option (`Global Set Implicit Arguments`, printing).
#
# Left is what changes the theory the kernel checks against in a way coqchk takes on trust and does
# not report. No re-check and no sandbox can see it.
# - `Register ... as kernel.*` tells the kernel which inductives its primitive operations compute
#   with. coqchk installs a library's registrations as they are, unchecked
#   (Modops.add_retroknowledge). So a flipped `bool` would make primitives lie to it too.
# - `Definitional UIP`, `Cumulative StrictProp` extend the theory per declaration. coqchk re-checks
#   under the declaration's own flag and lists neither in its summary.
# - `Load` runs sentences read from another file. Neither this reading nor the worker's second wall
#   sees them, so it would carry the two above past both.
# - `Primitive` declares one of the kernel's primitives, which only Rocq's own library needs. On
#   8.16, module subtyping accepts any definition for a primitive a module type declares. coqchk
#   shares the flaw (coq/coq#18503, advisory PL-ROCQ-18503: a clean proof of False).
#
# Each is found anywhere in a sentence, not only as its command. The words that may come before a
# command are Coq's to extend: control words such as `Timeout 0x1_0` or 8.20's `Instructions`,
# attributes, bullets, selectors. And none of these patterns is ordinary proof text.
_REFUSED_WORDS = ("Register", "Set", "Load", "Primitive")  # what each pattern below starts with
# Coq's blanks are space, tab, CR and LF only (a no-break space is part of an identifier).
_B = r"[ \t\r\n]"
_KERNEL_REGISTER = re.compile(rf"Register{_B}+(?:Inline{_B}+)?[^ \t\r\n]+{_B}+as{_B}+kernel\.")
_THEORY_OPTIONS = re.compile(
    rf"Set{_B}+(Definitional{_B}+UIP|Cumulative{_B}+StrictProp)(?![\w'\xa0])"
)
_LOAD = re.compile(rf"Load(?:{_B}+Verbose)?(?![\w'\xa0]){_B}*(?=[\"A-Za-z_]|[^\x00-\x7f])")
_PRIMITIVE = re.compile(r"Primitive(?![\w'\xa0])")  # refused before a `:= #name` (below)
_PRIMITIVE_BODY = re.compile(r":=[ \t\r\n]*#")
_REFUSALS = (
    (_KERNEL_REGISTER, "register"),
    (_THEORY_OPTIONS, "theory"),
    (_LOAD, "load"),
    (_PRIMITIVE, "primitive"),
)
# An identifier or a number running on to the left, read on the reversed text, up to _LOOKBACK
# characters. Coq's identifiers hold letters, digits, `_`, `'`, and a no-break space.
_LOOKBACK = 256
_IDENT_RUN_LEFT = re.compile(rf"[\w'\xa0]{{0,{_LOOKBACK + 1}}}")
# Coq ends a sentence at `.` or `...` (the end of `tac...` under `Proof with`) before a blank or
# the end; `..` (recursive notations) ends none.
_SENTENCE_END = re.compile(r"(?:\.\.\.|(?<!\.)\.)(?=\s|\Z)")
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


def _sentences_of(code: str) -> Iterator[Sentence]:
    """The sentences of blanked code: each ends at a `.` followed by a blank or the end (not `..`)."""
    start = 0
    for stop in _SENTENCE_END.finditer(code):
        chunk = code[start : stop.end()]
        if chunk.strip() != ".":
            yield Sentence(start + len(chunk) - len(chunk.lstrip()), stop.end(), chunk.strip())
        start = stop.end()
    rest = code[start:]
    if rest.strip():
        yield Sentence(start + len(rest) - len(rest.lstrip()), len(code), rest.strip())


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


def refusals(content: str) -> list[Refusal]:
    """Sentences refused before the file runs (the worker refuses them again on Coq's parse)."""
    found: list[Refusal] = []
    code = coq_code(content)
    if not any(word in code for word in _REFUSED_WORDS):
        return found
    lines = content.splitlines()
    for sentence in _sentences_of(code):
        if refused := _refused(sentence.code):
            message, at = refused
            found.append(_refusal(message, sentence.start + at, code, lines))
    return sorted(found, key=lambda r: (r.line, r.column))


# The words a refused command cannot be written without, as Coq's lexer needs them in the text.
_REFUSED_KEYWORDS = re.compile(r"Register|Load|Primitive|Definitional|StrictProp")


def may_hold_a_refused_command(content: str) -> bool:
    """Whether the raw text holds a word without which no refused command can be written.

    Comments and strings are included, since no reading of them is trusted here.
    """
    return _REFUSED_KEYWORDS.search(content) is not None


# `coqc -time` prints, after each sentence it ran, the sentence's byte range in the file.
_TIMED = re.compile(rb"^Chars (\d+) - (\d+) \[", re.MULTILINE)


def refusals_as_coq_read(content: str, timed: bytes) -> list[Refusal]:
    """The same refusals, applied to each sentence as coqc itself read it (`coqc -time`'s output).

    This is the cold path's second wall, where the worker has Coq's parse. A line the file printed
    itself can only name more text to check.
    """
    bom = 1 if content.startswith("\ufeff") else 0  # Coq skips it, and counts bytes after it
    data = content[bom:].encode()
    ranges = {(int(m[1]), int(m[2])) for m in _TIMED.finditer(timed)}
    found: list[Refusal] = []
    code: str | None = None
    for start, end in sorted(ranges):
        if not 0 <= start < end <= len(data):
            continue
        sentence = data[start:end].decode("utf-8", "replace")
        if refused := _refused(coq_code(sentence)):
            message, at = refused
            code = code if code is not None else coq_code(content)
            offset = bom + len(data[:start].decode("utf-8", "replace")) + at
            found.append(_refusal(message, offset, code, content.splitlines()))
    return found


def _refused(code: str) -> tuple[str, int] | None:
    """(why, where) when one sentence's blanked code holds a refused command.

    The command counts anywhere Coq would read the keyword as a word of its own. The scan is linear
    in the sentence, whatever it repeats, so a 10 MB sentence is read before its check's deadline.
    """
    if not any(word in code for word in _REFUSED_WORDS):
        return None  # none of the patterns below can match it (most sentences of most files)
    reversed_code = code[::-1]
    pacer = deadline.Pacer(lambda: "the kit's reading of a Rocq sentence")
    bodies = [m.start() for m in _PRIMITIVE_BODY.finditer(code)]
    found: list[tuple[int, str]] = []
    for pattern, kind in _REFUSALS:
        for match in pattern.finditer(code):
            pacer.step()
            if kind == "primitive" and not (bodies and match.end() <= bodies[-1]):
                break  # a `Primitive` with no `:= #name` after it declares nothing
            if _standalone(reversed_code, match.start()):
                found.append((match.start(), _message(kind, match)))
                break
    return (min(found)[1], min(found)[0]) if found else None


def _standalone(reversed_code: str, at: int) -> bool:
    """Whether Coq reads the word at `at` as a word of its own.

    Nothing of an identifier may run into it from the left. A number may: `Timeout 3Set` is `3`,
    then `Set`.
    """
    left = len(reversed_code) - at  # where the text before `at` starts, read backwards
    run = _IDENT_RUN_LEFT.match(reversed_code, left).end() - left  # type: ignore[union-attr]
    if run == 0:
        return True
    if run > _LOOKBACK:
        return True  # a run longer than the look back: refusing is the side to err on
    return reversed_code[left + run - 1] in "0123456789"  # the run is a number: Coq ends it


def _message(kind: str, match: re.Match[str]) -> str:
    if kind == "register":
        return REGISTER_REFUSED
    if kind == "theory":
        return THEORY_REFUSED.format(option="Set " + " ".join(match.group(1).split()))
    return LOAD_REFUSED if kind == "load" else PRIMITIVE_REFUSED


REGISTER_REFUSED = (
    "`Register ... as kernel.*` is not allowed in a checked file: the kernel's primitive "
    "operations would compute with the file's own types, which no re-check verifies"
)
THEORY_REFUSED = (
    "`{option}` is not allowed in a checked file: it extends the kernel's theory, and the "
    "independent checker neither verifies nor reports that"
)

PRIMITIVE_REFUSED = (
    "`Primitive` is not allowed in a checked file: only Rocq's own library declares the "
    "kernel's primitives, and on 8.16 a module type's primitive can be implemented by any "
    "definition, unseen by coqchk (coq/coq#18503)"
)

LOAD_REFUSED = (
    "`Load` is not allowed in a checked file: the sentences it reads from another file would "
    "escape the kit's reading of the file"
)


def _refusal(message: str, offset: int, code: str, lines: list[str]) -> Refusal:
    line = code.count("\n", 0, offset) + 1
    column = offset - (code.rfind("\n", 0, offset) + 1)
    context = " ".join(lines[line - 1].split()) if line <= len(lines) else ""
    return Refusal(message=message, line=line, column=column, context=context[:300])


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
    for sentence in _sentences_of(coq_code(content)):
        if not REQUIRE.fullmatch(sentence.code[:-1].rstrip()) or '"' in sentence.code:
            break
        end = sentence.end
    return Prefix(end=end, code=coq_code(content[:end]))


def placeholders(content: str) -> list[str]:
    """The first unfinished-proof word of the file, and its first command that drops a theorem."""
    code = coq_code(content)
    found = [f"`{match[0]}`"] if (match := PLACEHOLDER.search(code)) else []
    if "Abort" in code or "Admit" in code:
        for sentence in _sentences_of(code):
            abandoned = ABANDONED.search(sentence.code)
            if abandoned and _standalone(sentence.code[::-1], abandoned.start()):
                return [*found, f"`{' '.join(abandoned[1].split())}`"]
    return found


def stated(content: str, name: str) -> str | None:
    """How the file states theorem `name` (its last component), as written, or None."""
    short = name.rsplit(".", 1)[-1]
    pattern = re.compile(rf"{_THEOREM}\s+{re.escape(short)}(?![\w'])(.*)\.\Z", re.DOTALL)
    code = coq_code(content)
    for sentence in _sentences_of(code):
        match = pattern.match(sentence.command)
        if match:
            text = content[sentence.end - len(match.group(1)) - 1 : sentence.end - 1]
            written = code[sentence.end - len(match.group(1)) - 1 : sentence.end - 1]
            body = written.split(":=", 1)[0] if ":=" in written else written
            return " ".join(text[: len(body)].split()) or None
    return None
