"""A bundle's in-toto Statement v1 with an SLSA Provenance v1 predicate: model and builder.

Every claim in it is a function of the log and the bundle's lock.
`publish` makes it with `build_statement`.
`verify` makes it again from the same inputs and compares the two field by field.
So nothing the statement says is taken on its word.

Subjects: the log and every artifact.
The log's subject carries its record count, head digest and verdict counts.

Predicate:
- the requests digest, and prover, mode, limits and options;
- the images by ID, with their lock entries and archive address;
- the lock's digest;
- the kit that made the results, from the log's header;
- the backends, isolation and hosts;
- the run's first and last times.

A bundle that carries an image archive also states the file's sha256 and size.
That is a claim about the bundle's files, which `audit` checks against them.
So it is carried over, not recomputed.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field

from runner.core.canonical import canonical_bytes
from runner.core.models import CheckRequest, CheckResult
from runner.images.lock import ImagesLock
from runner.records.checkpoint import ChainReport
from runner.records.layout import BUNDLE_LOCK, BUNDLE_LOG, image_archive

STATEMENT_TYPE: Final = "https://in-toto.io/Statement/v1"
PROVENANCE_TYPE: Final = "https://slsa.dev/provenance/v1"
BUILD_TYPE = "https://prooflock.dev/buildtypes/check-run/v2"
# The prooflock 0.2 format: the same claims, without image archive URIs or verdict counts.
BUILD_TYPE_V1 = "https://prooflock.dev/buildtypes/check-run/v1"
BUILD_TYPES = (BUILD_TYPE, BUILD_TYPE_V1)
BUILDER = "https://prooflock.dev/builder"
KIT = "prooflock"

Run = tuple[CheckRequest, CheckResult]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class OpenModel(BaseModel):
    # Unknown fields are kept, so a claim the kit never makes shows up as a difference.
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class ResourceDescriptor(OpenModel):
    name: str | None = None
    uri: str | None = None
    digest: dict[str, str] | None = None
    annotations: dict[str, Any] | None = None


class Builder(OpenModel):
    id: str
    version: dict[str, str] = Field(default_factory=dict)


class BuildMetadata(OpenModel):
    invocationId: str  # noqa: N815 - SLSA's field names
    startedOn: str | None = None  # noqa: N815
    finishedOn: str | None = None  # noqa: N815


class RunDetails(OpenModel):
    builder: Builder
    metadata: BuildMetadata
    byproducts: list[ResourceDescriptor] = Field(default_factory=list)


class BuildDefinition(OpenModel):
    buildType: str  # noqa: N815
    externalParameters: dict[str, Any]  # noqa: N815
    internalParameters: dict[str, Any] = Field(default_factory=dict)  # noqa: N815
    resolvedDependencies: list[ResourceDescriptor] = Field(default_factory=list)  # noqa: N815


class Provenance(OpenModel):
    buildDefinition: BuildDefinition  # noqa: N815
    runDetails: RunDetails  # noqa: N815


class Statement(OpenModel):
    type: Literal["https://in-toto.io/Statement/v1"] = Field(default=STATEMENT_TYPE, alias="_type")
    subject: list[ResourceDescriptor] = Field(min_length=1)
    predicateType: Literal["https://slsa.dev/provenance/v1"] = PROVENANCE_TYPE  # noqa: N815
    predicate: Provenance

    @classmethod
    def from_json(cls, data: bytes) -> Statement:
        """Raises orjson.JSONDecodeError or pydantic.ValidationError."""
        return cls.model_validate(orjson.loads(data))

    def as_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    def to_bytes(self) -> bytes:
        """The bytes publish writes and signs: indented, keys sorted, one final newline."""
        return (
            orjson.dumps(self.as_dict(), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"
        )

    @property
    def build_type(self) -> str:
        return self.predicate.buildDefinition.buildType

    @property
    def log_subject(self) -> ResourceDescriptor | None:
        return next((s for s in self.subject if s.name == BUNDLE_LOG), None)


@dataclass(frozen=True)
class ArchiveFile:
    """The file digest of an image archive a bundle carries (`images/sha256-<ID>.tar.gz`)."""

    sha256: str
    size: int

    def as_json(self) -> dict[str, Any]:
        return {"sha256": self.sha256, "size": self.size}


@dataclass(frozen=True)
class Evidence:
    """What a statement is made of: the log, its results, and the bundle's lock file."""

    chain: ChainReport
    log_sha256: str
    runs: list[Run]
    lock: ImagesLock | None
    lock_sha256: str | None
    archives: dict[str, ArchiveFile] = field(default_factory=dict)  # image ID → its archive

    @property
    def results(self) -> list[CheckResult]:
        return [result for _, result in self.runs]


def images_used(results: list[CheckResult]) -> dict[str, str]:
    """Image tag → image ID of every docker record."""
    used: dict[str, str] = {}
    for result in results:
        install = result.environment.get("install")
        if isinstance(install, dict) and install.get("kind") == "docker":
            used[str(install.get("image"))] = str(install.get("image_id"))
    return used


def build_statement(evidence: Evidence, build_type: str = BUILD_TYPE) -> Statement:
    """The statement `evidence` supports, in the format `build_type` names (BUILD_TYPES)."""
    current = build_type == BUILD_TYPE
    chain, runs, results = evidence.chain, evidence.runs, evidence.results
    header = chain.header or {}
    log_notes: dict[str, Any] = {
        "records": len(chain.records),
        "head": chain.head,
        "results": len(runs),
        "requests": chain.expected,
    }
    if current:
        log_notes["verdicts"] = dict(sorted(Counter(r.verdict.value for r in results).items()))
    subjects = [
        ResourceDescriptor(
            name=BUNDLE_LOG, digest={"sha256": evidence.log_sha256}, annotations=log_notes
        )
    ]
    subjects += [
        ResourceDescriptor(
            name=f"artifact/{index}/{request.name}",
            digest={"sha256": sha256(request.content.encode())},
        )
        for index, (request, _) in enumerate(runs)
    ]
    backends = sorted({r.provenance.backend for r in results})
    started = min((r.provenance.started_at for r in results), default=None)
    finished = max((r.provenance.finished_at for r in results), default=None)
    kit = str(header.get("prooflock", "unknown"))
    definition = BuildDefinition(
        buildType=build_type,
        externalParameters=_external_parameters(chain, runs),
        internalParameters={
            "backends": backends,
            "isolation": sorted({r.provenance.isolation for r in results}),
        },
        resolvedDependencies=_resolved_dependencies(evidence, kit, with_uri=current),
    )
    details = RunDetails(
        builder=Builder(id=f"{BUILDER}/{'+'.join(backends) or 'none'}", version={KIT: kit}),
        metadata=BuildMetadata(
            invocationId=f"prooflock-run:{header.get('requests', '')}",
            startedOn=_rfc3339(started) if started else None,
            finishedOn=_rfc3339(finished) if finished else None,
        ),
        byproducts=[
            ResourceDescriptor(
                name="hosts", annotations={"hosts": sorted({r.provenance.host for r in results})}
            )
        ],
    )
    return Statement(
        subject=subjects,
        predicate=Provenance(buildDefinition=definition, runDetails=details),
    )


def _external_parameters(chain: ChainReport, runs: list[Run]) -> dict[str, Any]:
    header = chain.header or {}
    checks: dict[str, dict[str, Any]] = {}
    for request, result in runs:
        entry = {
            "prover": request.prover,
            "mode": request.mode,
            "limits": result.environment.get("limits"),
            "options": result.environment.get("options"),
        }
        checks[sha256(canonical_bytes(entry))] = entry
    return {
        "requests": {
            "digest": {"sha256": header.get("requests")},
            "count": header.get("count"),
            "source": header.get("source"),
        },
        "checks": [checks[key] for key in sorted(checks)],
    }


def _resolved_dependencies(
    evidence: Evidence, kit: str, *, with_uri: bool
) -> list[ResourceDescriptor]:
    lock = evidence.lock
    by_tag = {entry.tag: entry for entry in lock.images.values()} if lock else {}
    found: list[ResourceDescriptor] = []
    for tag, image_id in sorted(images_used(evidence.results).items()):
        entry = by_tag.get(tag)
        annotations: dict[str, Any] = {"locked": entry is not None and entry.image_id == image_id}
        if entry is not None:
            annotations.update(diff_ids=entry.diff_ids, pins=entry.inputs)
        if with_uri and image_id in evidence.archives:
            annotations["archive"] = evidence.archives[image_id].as_json()
        found.append(
            ResourceDescriptor(
                name=tag,
                uri=image_archive(image_id) if with_uri else None,
                digest={"sha256": image_id.removeprefix("sha256:")},
                annotations=annotations,
            )
        )
    if evidence.lock_sha256 is not None:
        found.append(ResourceDescriptor(name=BUNDLE_LOCK, digest={"sha256": evidence.lock_sha256}))
    # The kit that made the results, as the log's header records it: "0.2.0+g<commit>".
    _, _, commit = kit.partition("+g")
    found.append(
        ResourceDescriptor(
            name=KIT,
            digest={"gitCommit": commit} if commit else {"sha256": sha256(kit.encode())},
            annotations={"version": kit},
        )
    )
    return found


def listed_archives(statement: Statement) -> dict[str, ArchiveFile]:
    """Image ID → the archive file the statement says the bundle carries for it."""
    listed: dict[str, ArchiveFile] = {}
    for dependency in statement.predicate.buildDefinition.resolvedDependencies:
        archive = (dependency.annotations or {}).get("archive")
        image = (dependency.digest or {}).get("sha256")
        if not isinstance(archive, dict) or not isinstance(image, str):
            continue
        digest, size = archive.get("sha256"), archive.get("size")
        if isinstance(digest, str) and isinstance(size, int):
            listed[f"sha256:{image}"] = ArchiveFile(digest, size)
    return listed


def _rfc3339(stamp: str) -> str:
    return stamp.replace("+00:00", "Z")
