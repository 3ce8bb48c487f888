"""Known soundness bugs of the provers, as data: `manifests/advisories/<prover>.toml`.

An advisory names the prover versions a bug affects and the artifact features it needs.
`applicable(environment)` lists the advisories that cover the environment's version.
Each file's own regexes read that version, so no code here names a prover.
`flagged(request, environment)` keeps those whose features the artifact uses.
The scan is syntactic, with comments blanked.
A flag only warns readers.
It never changes a verdict, a result digest or an environment key.
The scan reads the artifact's text, not its compiled library.
So it misses what a notation or a tactic hides.
"""

from __future__ import annotations

import functools
import re
import tomllib
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from runner.core.errors import InfraFailure, explain
from runner.core.home import kit_home
from runner.core.models import CheckResult, JsonValue
from runner.provers.common.lexing import c_like_code, coq_code, ocaml_code

DIRECTORY = Path("manifests") / "advisories"
# How each file syntax reads an artifact before the scan: comments and strings blanked.
CODE_OF = {"coq": coq_code, "ocaml": ocaml_code, "c": c_like_code, "none": lambda text: text}
_VERSION = re.compile(r"(\d+(?:\.\d+)*)(?:[-.~+]?rc(\d+))?")
_CLAUSE = re.compile(r"\s*(>=|<=|==|>|<)\s*(\S+?)\s*\Z")


class Artifact(Protocol):
    """What the scan reads: a CheckRequest or a ResolvedRequest."""

    @property
    def content(self) -> str: ...


@functools.total_ordering
@dataclass(frozen=True)
class Version:
    """A dotted version; `4.34.0-rc1` sorts before `4.34.0`, and 8.16 equals 8.16.0."""

    numbers: tuple[int, ...]
    rc: int | None = None

    @classmethod
    def parse(cls, text: str) -> Version:
        match = _VERSION.fullmatch(text.strip().lstrip("vV"))
        if match is None:
            raise ValueError(f"{text!r} is not a version (digits and dots, optionally -rcN)")
        rc = match.group(2)
        return cls(tuple(int(n) for n in match.group(1).split(".")), int(rc) if rc else None)

    def _key(self) -> tuple[tuple[int, ...], float]:
        numbers = self.numbers + (0,) * (6 - len(self.numbers))
        return numbers, float("inf") if self.rc is None else self.rc

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return self._key() < other._key()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Version) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __str__(self) -> str:
        text = ".".join(map(str, self.numbers))
        return text if self.rc is None else f"{text}-rc{self.rc}"


_COMPARE = {
    ">=": Version.__ge__,
    "<=": Version.__le__,
    ">": Version.__gt__,
    "<": Version.__lt__,
    "==": Version.__eq__,
}


@functools.lru_cache(maxsize=1024)  # records ask about the same few versions
def in_range(version: Version, spec: str) -> bool:
    """Whether `version` meets every clause of `spec`, such as `>=8.11, <8.19`."""
    for clause in spec.split(","):
        match = _CLAUSE.match(clause)
        if match is None:
            raise ValueError(f"{clause.strip()!r}: expected >=, >, <=, < or == and a version")
        operator, bound = match.groups()
        if not _COMPARE[operator](version, Version.parse(bound)):
            return False
    return True


class Advisory(BaseModel):
    """One known bug, as its file states it.

    The header of each manifests/advisories file explains the fields.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^PL-[A-Z0-9]+(?:-[A-Z0-9]+)+$")
    title: str
    upstream: str
    affected: tuple[str, ...]  # ranges such as `>=8.11, <8.19`; any one may hold
    fixed_in: str  # words: a version, "not fixed", "unknown"
    features: str  # words: what an artifact must use
    scan: tuple[str, ...] = ()  # regexes; the artifact's code must match ALL to be flagged
    # catches | misses | unknown: whether the independent re-check (coqchk, ...) stops it
    independent_check: str
    independent_check_note: str = ""
    kit: str = ""  # what the kit does about it: a refusal, a flag, nothing
    risk: str
    exploit: str = ""  # tests/exploits/<prover>/<id>.<ext>, if a reproducer exists
    unverified: str = ""  # facts in this entry not established here

    @field_validator("affected")
    @classmethod
    def _ranges(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for spec in value:
            in_range(Version((0,)), spec)  # raises ValueError on a malformed range
        return value

    @field_validator("scan")
    @classmethod
    def _regexes(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in value:
            re.compile(pattern)
        return value

    @field_validator("independent_check")
    @classmethod
    def _tier(cls, value: str) -> str:
        if value not in ("catches", "misses", "unknown"):
            raise ValueError("independent_check is catches, misses or unknown")
        return value

    def affects(self, version: Version | None) -> bool:
        """Unknown versions are affected; only a version read rules an advisory out."""
        return version is None or any(in_range(version, spec) for spec in self.affected)

    def uses(self, code: str) -> bool:
        return bool(self.scan) and all(re.search(p, code, re.MULTILINE) for p in self.scan)


class VersionReading(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # Tried in order over the flattened environment: one `path=value` line per leaf, such as
    # `install.image=prooflock/rocq:8.16.1`. The first match gives the version.
    # A `version` group is the version itself. An `alias` group is looked up in `aliases`:
    # it is an image tag naming another component than the advised one.
    # An alias not listed leaves the version unknown.
    patterns: tuple[str, ...]
    aliases: dict[str, str] = Field(default_factory=dict)

    @field_validator("patterns")
    @classmethod
    def _named_group(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in value:
            groups = re.compile(pattern).groupindex
            if ("version" in groups) == ("alias" in groups):
                raise ValueError(f"{pattern!r} needs one (?P<version>...) or (?P<alias>...) group")
        return value

    @field_validator("aliases")
    @classmethod
    def _versions(cls, value: dict[str, str]) -> dict[str, str]:
        for version in value.values():
            Version.parse(version)
        return value

    def read(self, environment: Mapping[str, JsonValue]) -> Version | None:
        return self.read_flat(flatten(environment))

    def read_flat(self, text: str) -> Version | None:
        """The version in a flattened environment (see `flatten`)."""
        for pattern in self.patterns:
            match = re.search(pattern, text, re.MULTILINE)
            if match is None:
                continue
            if "version" in match.re.groupindex:
                return Version.parse(match.group("version"))
            alias = self.aliases.get(match.group("alias"))
            return None if alias is None else Version.parse(alias)
        return None


class AdvisoryFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    prover: str
    subject: str  # what the version belongs to: Rocq, or the OCaml under HOL Light
    comments: str = "none"  # how the scan blanks comments: coq, ocaml, c, none
    version: VersionReading
    advisory: tuple[Advisory, ...] = ()

    @field_validator("comments")
    @classmethod
    def _known_syntax(cls, value: str) -> str:
        if value not in CODE_OF:
            raise ValueError(f"comments is one of {', '.join(CODE_OF)}")
        return value

    def version_of(self, environment: Mapping[str, JsonValue]) -> Version | None:
        return self.version.read(environment)


def flatten(data: JsonValue, prefix: str = "") -> str:
    """`a.b=value` lines, one per leaf, keys sorted; multi-line values keep their lines."""
    if isinstance(data, Mapping):
        items: Iterable[tuple[str, JsonValue]] = sorted(data.items())
    elif isinstance(data, list):
        items = ((str(i), v) for i, v in enumerate(data))
    else:
        return f"{prefix}={data}\n"
    return "".join(
        flatten(value, f"{prefix}.{key}" if prefix else str(key)) for key, value in items
    )


def path_of(prover: str) -> Path:
    return kit_home() / DIRECTORY / f"{prover}.toml"


def load(prover: str) -> AdvisoryFile | None:
    """The prover's advisories, or None when the kit holds no file for it."""
    found = _stamped(prover)
    return None if found is None else _load(*found)


def _stamped(prover: str) -> tuple[Path, int] | None:
    """The prover's file and its modification time, so an edited file is read again."""
    try:
        path = path_of(prover)
        return path, path.stat().st_mtime_ns
    except (FileNotFoundError, InfraFailure):  # no file, or an install without the data
        return None


@functools.lru_cache(maxsize=16)
def _load(path: Path, stamp: int) -> AdvisoryFile:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        loaded = AdvisoryFile.model_validate(data)
    except (tomllib.TOMLDecodeError, ValidationError, ValueError) as exc:
        problem = explain(exc) if isinstance(exc, ValidationError) else str(exc)
        raise InfraFailure(f"{path}: not a valid advisories file: {problem}") from None
    if loaded.prover != path.stem:
        raise InfraFailure(f"{path}: names prover {loaded.prover!r}, not {path.stem!r}")
    ids = [a.id for a in loaded.advisory]
    if len(ids) != len(set(ids)):
        raise InfraFailure(f"{path}: an advisory id appears twice")
    return loaded


def applicable(environment: Mapping[str, JsonValue]) -> list[Advisory]:
    """The advisories that affect the environment's prover version.

    An install whose version cannot be read gets all of the prover's advisories.
    A result with no install gets none, such as an infra error before the backend answered.
    """
    prover = environment.get("prover")
    found = _stamped(prover) if isinstance(prover, str) else None
    if found is None or not environment.get("install"):
        return []
    return list(_applicable(*found, flatten(environment)))


@functools.lru_cache(maxsize=64)  # a run's records share a few environments
def _applicable(path: Path, stamp: int, environment: str) -> tuple[Advisory, ...]:
    known = _load(path, stamp)
    version = known.version.read_flat(environment)
    return tuple(advisory for advisory in known.advisory if advisory.affects(version))


def flagged(request: Artifact, environment: Mapping[str, JsonValue]) -> list[str]:
    """Ids of the applicable advisories whose features the artifact's code uses."""
    candidates = [advisory for advisory in applicable(environment) if advisory.scan]
    if not candidates:
        return []
    known = load(str(environment["prover"]))
    assert known is not None  # candidates came from it
    code = CODE_OF[known.comments](request.content)
    return [advisory.id for advisory in candidates if advisory.uses(code)]


def summary(results: Iterable[CheckResult]) -> str | None:
    """One stderr line: how many advisories apply, and how many records carry one."""
    results = list(results)
    ids: set[str] = set()
    files: set[str] = set()
    for result in results:
        found = applicable(result.environment)
        ids.update(advisory.id for advisory in found)
        if found:
            files.add(str(DIRECTORY / f"{result.prover}.toml"))
    flagged_count = sum(1 for result in results if result.advisories)
    if not ids:
        return None
    noun = "advisory applies" if len(ids) == 1 else "advisories apply"
    per_advisory = records_per_advisory(results)
    counts = ", ".join(f"{id_} {count}" for id_, count in per_advisory.items())
    return (
        f"{len(ids)} {noun} to this environment; {flagged_count} records flagged"
        f"{f' ({counts})' if counts else ''}: see the `advisories` field of each line and "
        f"{', '.join(sorted(files))}"
    )


def records_per_advisory(results: Iterable[CheckResult]) -> dict[str, int]:
    """How many records carry each advisory, most first, ties by id."""
    counts = Counter(id_ for result in results for id_ in result.advisories)
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))
