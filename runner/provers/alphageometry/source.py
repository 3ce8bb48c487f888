"""Input formats: files of two-line problems, JSONL records, a lone `clauses ? goal` line.

A problem is a title line and a problem line `clauses ? goal` (AlphaGeometry's problem files). An
artifact is a JSON record only when the whole of it parses as one JSON object. A file splits into
records only when every line is a JSON object holding the problem text (TEXT_KEYS). Neither can be a
valid text problem, as its problem line would start inside JSON. So a title that starts with `{` is
a title.

`split_file` cuts a file into one artifact per problem without judging it. `read_problem` turns one
artifact into a Problem, or a FormatError when the text is not one problem (empty, prose, code
fences, no goal). LLM output in a code fence is a format error unless `lenient`, which takes the
fenced text and says so.

Lines are AlphaGeometry's, as `Problem.from_txt_file` reads them. The file is read in Python's text
mode, so `\r\n` and `\r` end a line as `\n` does. Then it is split on `'\n'`, and empty lines are
dropped. `str.splitlines()` is never used: it also breaks at U+2028, U+0085, `\x0c`, `\x1c`-`\x1e`
and `\x0b`, which AlphaGeometry keeps inside a line. A line of blanks is a line, as there. The kit
takes one liberty: a problem line and a title lose the spaces and tabs at their ends. (AlphaGeometry
would raise KeyError on a trailing space.) No other character is stripped.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import PurePath

FENCE = re.compile(r"^[ \t]*(```|~~~)")
BLANKS = " \t"  # what the kit strips from a line's ends (str.strip() would take U+2028 too)
TITLE_KEYS = ("title", "name", "problem_name", "id")
TEXT_KEYS = ("problem", "text", "dsl", "translation", "formal", "content")


@dataclass(frozen=True)
class Problem:
    title: str
    line: str  # `clauses ? goal`
    note: str | None = None  # what lenient reading changed, if anything


@dataclass(frozen=True)
class FormatError:
    reason: str


def split_file(name: str, content: str) -> list[tuple[str, str]]:
    """One (title, text) per problem.

    Text that is not cleanly problems stays whole, for the check to reject with a reason. Fenced
    problems keep their fence, so the check can apply the policy.
    """
    kept = lines_of(content)
    if not kept:
        return [(name, content)]
    records = _json_records(kept)
    if records is not None:
        return [
            (_record_title(record, f"{name}:{i + 1}"), raw)
            for i, (record, raw) in enumerate(records)
        ]
    body, fenced = [], []  # each line outside fence lines, and whether a fence encloses it
    inside = False
    for line in kept:
        if FENCE.match(line):
            inside = not inside
        else:
            body.append(line)
            fenced.append(inside)
    if len(body) == 1:
        return [(name, content)]
    if len(body) % 2 or not all(_is_problem_line(line) for line in body[1::2]):
        return [(name, content)]
    return [
        (body[k].strip(BLANKS), _wrap(f"{body[k]}\n{body[k + 1]}\n", fenced[k] or fenced[k + 1]))
        for k in range(0, len(body), 2)
    ]


def lines_of(text: str) -> list[str]:
    """The non-empty lines of `text`, as AlphaGeometry reads a problem file."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return [line for line in lines if line]


def read_problem(name: str, content: str, *, lenient: bool = False) -> Problem | FormatError:
    """The one problem in an artifact: `title\\nclauses ? goal`, or the problem line alone."""
    record = _json_object(content)
    if record is not None:
        return _from_record(name, record, lenient)
    read = _from_text(name, content, lenient)
    if isinstance(read, FormatError) and content.lstrip(BLANKS + "\r\n").startswith("{"):
        return FormatError(f"{read.reason} (read as text: it is not one JSON object)")
    return read


def _from_text(name: str, content: str, lenient: bool) -> Problem | FormatError:
    lines = lines_of(content)
    if not lines:
        return FormatError("the input is empty: expected a title line and a `clauses ? goal` line")
    note = None
    if any(FENCE.match(line) for line in lines):
        if not lenient:
            return FormatError(
                "the problem is wrapped in a code fence (```): give the bare DSL, "
                "or pass `--fences strip`"
            )
        lines, note = _inside_fences(lines)
        if not lines:
            return FormatError("the code fence is empty")
    if len(lines) == 1:
        title, line = PurePath(name).name, lines[0]
    elif len(lines) == 2:
        title, line = lines[0].strip(BLANKS), lines[1]
    else:
        extra = sum(1 for line in lines if not _is_problem_line(line))
        return FormatError(
            f"expected one problem (a title line and a `clauses ? goal` line) but found "
            f"{len(lines)} lines, {extra} of which are not DSL: prose around the problem?"
        )
    if " ? " not in line:
        return FormatError(
            "the problem line has no goal: AlphaGeometry needs `clauses ? goal`"
            + (" (a lone `?` needs a space on each side)" if "?" in line else "")
        )
    return Problem(title=title, line=line.strip(BLANKS), note=note)


def _is_problem_line(line: str) -> bool:
    return " = " in line


def _wrap(text: str, fenced: bool) -> str:
    return f"```\n{text}```\n" if fenced else text


def _inside_fences(lines: list[str]) -> tuple[list[str], str]:
    """The lines inside the first fenced block (or all non-fence lines if it never closes)."""
    opened = [i for i, line in enumerate(lines) if FENCE.match(line)]
    start = opened[0] + 1
    end = opened[1] if len(opened) > 1 else len(lines)
    inside = lines[start:end]
    dropped = len(lines) - len(inside) - min(len(opened), 2)
    note = "stripped a code fence" + (
        f" and {dropped} line(s) of text outside it" if dropped else ""
    )
    return inside, note


def _json_records(lines: list[str]) -> list[tuple[dict, str]] | None:
    if not lines[0].lstrip(BLANKS).startswith("{"):
        return None
    records = []
    for line in lines:
        record = _json_object(line)
        if record is None or _record_text(record) is None:
            return None
        records.append((record, line))
    return records


def _json_object(text: str) -> dict | None:
    """`text` as one JSON object, or None when the whole of it is not one."""
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _record_text(record: dict) -> str | None:
    return next((record[k] for k in TEXT_KEYS if isinstance(record.get(k), str)), None)


def _record_title(record: dict, default: str) -> str:
    for key in TITLE_KEYS:
        if isinstance(record.get(key), str | int) and str(record[key]).strip(BLANKS):
            return str(record[key]).strip(BLANKS)
    return default


def _from_record(name: str, record: dict, lenient: bool) -> Problem | FormatError:
    text = _record_text(record)
    if text is None:
        return FormatError(f"the JSON record has no problem text (one of: {', '.join(TEXT_KEYS)})")
    title = _record_title(record, name)
    read = read_problem(title, text, lenient=lenient)
    if isinstance(read, Problem) and len(lines_of(text)) == 1:
        return Problem(title=title, line=read.line, note=read.note)
    return read
