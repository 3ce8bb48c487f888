"""Rocq's public list of critical bugs (`dev/doc/critical-bugs.md`), read to keep ours current.

The list is Markdown: one heading per bug, then `- field: value` lines.
An entry is known by the upstream issues it names.
An entry that names none is known by the pull requests and commits that fixed it.
An advisory covers an entry when its `upstream` text names one of these.
`missing(text, advisories)` lists the entries no advisory covers.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

_HEADING = re.compile(r"^#{2,4}\s+(?P<title>.+?)\s*$")
_FIELD = re.compile(r"^-\s+(?P<key>[^:]+?)\s*:\s*(?P<value>.*)$")
# An issue or pull request of Rocq's own repository, not another's (`ocaml/ocaml#6385`).
# A `#` glued to a word is never read.
_NUMBER = re.compile(
    r"(?<![\w/])(?:(?:rocq-prover/rocq|coq/coq)\s*(?:PRs?\s*)?)?#(?P<n>\d+)"
    r"|\[(?:PR\s*)?#?(?P<link>\d+)\]\(https://github\.com/rocq-prover/(?:rocq/)?(?:issues|pull)/"
)
_COMMIT = re.compile(r"/commit/(?P<url>[0-9a-f]{7,40})|(?<![\w/#])(?P<bare>[0-9a-f]{7,40})(?![\w])")
_SHORTEST_COMMIT = 7


@dataclass(frozen=True)
class Entry:
    """One bug of the upstream list: its heading, fields and references."""

    title: str
    fields: tuple[tuple[str, str], ...]
    references: frozenset[str]  # `#N` issues/PRs, `commit:HEX`

    def field(self, prefix: str) -> str:
        """The first field whose lower-cased name starts with `prefix`, or ''."""
        for key, value in self.fields:
            if key.lower().startswith(prefix):
                return value
        return ""


def references(text: str) -> frozenset[str]:
    """Rocq issue and pull-request numbers, and commit hashes, named in `text`."""
    found = {f"#{m.group('n') or m.group('link')}" for m in _NUMBER.finditer(text)}
    for match in _COMMIT.finditer(text):
        commit = match.group("url") or match.group("bare")
        if any(c.isalpha() for c in commit):  # a hash, not a year or a number
            found.add(f"commit:{commit}")
    return frozenset(found)


def _same(reference: str, other: str) -> bool:
    if reference.startswith("commit:") and other.startswith("commit:"):
        a, b = sorted((reference[7:], other[7:]), key=len)
        return len(a) >= _SHORTEST_COMMIT and b.startswith(a)
    return reference == other


def covers(upstream: str, entry: Entry) -> bool:
    """Whether the advisory's `upstream` text names one of the entry's references."""
    named = references(upstream)
    return any(_same(mine, theirs) for mine in named for theirs in entry.references)


def parse(text: str) -> list[Entry]:
    """Every bug entry of the list, in order; a heading with no fields is no entry."""
    entries: list[Entry] = []
    title: str | None = None
    fields: list[tuple[str, str]] = []

    def close() -> None:
        if title is not None and any(key.lower() == "component" for key, _ in fields):
            entries.append(Entry(title, tuple(fields), _entry_references(fields)))

    for line in text.splitlines():
        heading = _HEADING.match(line)
        if heading:
            close()
            title, fields = heading.group("title"), []
            continue
        field = _FIELD.match(line)
        if field and title is not None:
            fields.append((field.group("key").strip(), field.group("value").strip()))
        elif fields and line.startswith((" ", "\t")) and line.strip():  # a wrapped value
            key, value = fields[-1]
            fields[-1] = (key, f"{value} {line.strip()}")
    close()
    return entries


def _entry_references(fields: Iterable[tuple[str, str]]) -> frozenset[str]:
    """The issues an entry names, or else its fixes: pull requests and commits."""
    fields = list(fields)
    issues = " ".join(value for key, value in fields if "issue" in key.lower())
    found = references(issues)
    if not found:
        fixes = " ".join(value for key, value in fields if key.lower().startswith("fixed"))
        found = references(fixes)
    return found


def missing(text: str, upstreams: Iterable[str]) -> list[Entry]:
    """The entries of the list `text` that no advisory's `upstream` text covers."""
    upstreams = list(upstreams)
    return [entry for entry in parse(text) if not any(covers(u, entry) for u in upstreams)]
