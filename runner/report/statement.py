"""A bundle's in-toto statement: its predicate type, and which subjects the bundle holds."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from runner.report.blobs import SHA256, BlobStore, sha256_of
from runner.report.text import visible


@dataclass
class SubjectView:
    name: str
    sha256: str
    in_bundle: bool


@dataclass
class StatementView:
    statement_type: str
    predicate_type: str
    subjects: list[SubjectView] = field(default_factory=list)


def statement_view(
    statement: dict[str, Any], bundle: Path, blobs: BlobStore, problems: list[str]
) -> StatementView:
    view = StatementView(
        statement_type=visible(statement.get("_type", "")),
        predicate_type=visible(statement.get("predicateType", "")),
    )
    subjects = statement.get("subject")
    for subject in subjects if isinstance(subjects, list) else []:
        if not isinstance(subject, dict):
            continue
        name = str(subject.get("name", ""))
        digest = subject.get("digest")
        sha256 = str(digest.get("sha256", "")) if isinstance(digest, dict) else ""
        found = _in_bundle(name, sha256, bundle, blobs)
        view.subjects.append(SubjectView(visible(name), visible(sha256), found))
    absent = [s.name for s in view.subjects if not s.in_bundle]
    if absent:
        more = f" (+{len(absent) - 3} more)" if len(absent) > 3 else ""
        listed = ", ".join(absent[:3])
        problems.append(
            f"{len(absent)} subjects of the statement are not in the bundle: {listed}{more}"
        )
    return view


def _in_bundle(name: str, sha256: str, bundle: Path, blobs: BlobStore) -> bool:
    """Whether a subject is present: a blob of its digest, or a file of its name and digest."""
    if not SHA256.match(sha256):
        return False
    if blobs.has(sha256):
        return True
    relative = PurePosixPath(name)
    if not name or relative.is_absolute() or ".." in relative.parts:
        return False  # never look outside the bundle
    path = bundle / relative
    try:
        return path.is_file() and sha256_of(path.read_bytes()) == sha256
    except OSError:
        return False
