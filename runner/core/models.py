"""The check API's data: what is asked (CheckRequest), what comes back (CheckResult)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from runner.core.canonical import canonical_bytes, digest

JsonValue = Any  # plain JSON data without floats; checked by canonical_bytes when hashed


class Verdict(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    PLACEHOLDER = (
        "placeholder"  # Admitted / sorry / CHEAT_TAC: the artifact is not a finished proof
    )
    AXIOM = "axiom"  # relies on an assumption the request does not allow
    WRONG_STATEMENT = "wrong_statement"  # checked, but the target is missing or differs
    TIMEOUT = "timeout"
    MEMORY = "memory"
    CRASH = "crash"  # the prover itself died (not a verdict on the artifact's logic)
    # The prover accepted it, but the independent re-check failed and could not judge it.
    # Neither a pass nor a fail.
    UNVERIFIED = "unverified"
    # Passes on the pinned line, fails on a line where a known soundness bug is fixed.
    DISPUTED = "disputed"
    REFUSED = "refused"  # the kit would not take the artifact at all (too large, undecodable)
    INFRA_ERROR = "infra_error"  # the kit or machine failed; never counted against the artifact


class Trust(StrEnum):
    """What a verdict rests on."""

    REPLAYED = "replayed"  # an independent re-check, in a fresh process the artifact never ran in
    KERNEL = "kernel"  # the prover's own kernel, in the process that ran the artifact's code
    # An independent kernel re-derived what the artifact's own process exported.
    # Which claims were checked is the artifact's word (HOL Light without a target).
    SELF_REPORTED = "self_reported"
    DOUBLE = "double"  # a protocol double standing in for a prover that cannot run here
    KIT = "kit"  # only the kit's own reading before any prover ran (a refusal)
    NONE = "none"  # no verdict on the artifact (an infra error)


class Target(BaseModel):
    """The theorem an artifact must prove: `name`, with exactly `statement` once elaborated."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    statement: str = Field(min_length=1)
    # What the statement alone is elaborated against, such as Rocq `Require`s.
    # Never the artifact's own imports, which could give the statement another meaning.
    requires: tuple[str, ...] = ()


def _canonical_or_value_error(value: JsonValue) -> None:
    try:
        canonical_bytes(value)
    except TypeError as exc:  # orjson: a str that is not UTF-8 text (a lone surrogate)
        raise ValueError(f"not valid Unicode text ({exc})") from None


class Withheld(BaseModel):
    """An artifact kept out of its record: its digest, its size, and why the kit refused it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    size: int = Field(ge=0)  # bytes
    reason: str = Field(min_length=1)

    @classmethod
    def of(cls, raw: bytes, reason: str) -> Withheld:
        return cls(sha256=hashlib.sha256(raw).hexdigest(), size=len(raw), reason=reason)


class CheckRequest(BaseModel):
    """One artifact to check. Unset limits are filled from settings before hashing."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    prover: str = Field(min_length=1)
    mode: str | None = None  # None: the prover's default mode (its first)
    name: str = Field(min_length=1)
    content: str
    # Bounds far past any real check, 30 days and 1 PiB, so a typo is bad input.
    # Otherwise a clock or a cgroup would overflow in the kit, as an infra error.
    timeout: int | None = Field(default=None, ge=1, le=30 * 86_400, description="seconds")
    memory_mb: int | None = Field(default=None, ge=64, le=1 << 30)
    allowed_axioms: tuple[str, ...] = ()
    options: dict[str, JsonValue] = Field(default_factory=dict)
    target: Target | None = None
    line: str | None = None  # which pinned version (an image) of the prover; None: its default
    # Set when the kit refused the artifact (too large, not text). `content` is then empty.
    # So the log holds no megabytes it would not check, and a replay refuses it the same way.
    withheld: Withheld | None = None

    @field_validator("options")
    @classmethod
    def _options_are_canonical(cls, value: dict[str, JsonValue]) -> dict[str, JsonValue]:
        _canonical_or_value_error(value)  # NotCanonical (a ValueError) on floats
        return value

    @model_validator(mode="after")
    def _text_is_unicode(self) -> CheckRequest:
        """Every string must be UTF-8 text.

        A lone surrogate cannot be hashed, stored or sent to a prover.
        Python code or a decoder's surrogateescape can make such a str.
        """
        _canonical_or_value_error(self.record())
        if self.withheld is not None and self.content:
            raise ValueError("a request whose content is withheld carries no content")
        return self

    def digest(self) -> str:
        return digest(self.record())

    def record(self) -> dict[str, JsonValue]:
        """The request as a checkpoint stores it: the fields its digest covers.

        Newer fields are left out while unset, so older requests keep their digests.
        """
        data = self.model_dump(mode="json")
        if data["target"] is None:
            del data["target"]
        elif not data["target"]["requires"]:
            del data["target"]["requires"]
        for key in ("line", "withheld"):
            if data[key] is None:
                del data[key]
        return data


class Diagnostic(BaseModel):
    """A prover message, normalized to replay byte for byte: no temp paths, no times."""

    model_config = ConfigDict(frozen=True)

    severity: str = "error"
    message: str
    line: int | None = None
    column: int | None = None
    context: str | None = None  # the failing phrase, clause or command, when known


class OutputFile(BaseModel):
    """A file a check produced that a reader may want, such as a render, named by digest.

    The bytes travel beside the log (`--output-dir`, a bundle's blobs), never inside it.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: str  # what it is to the check: "render", "reference", "raster", ...
    format: str  # its file type: png, svg, pdf, ...
    sha256: str


class Outcome(BaseModel):
    """What an adapter concludes about one artifact; the core adds keys, digests and provenance."""

    verdict: Verdict
    trust: Trust = Trust.KERNEL
    diagnostics: list[Diagnostic] = Field(default_factory=list)
    assumptions: list[str] = Field(default_factory=list)
    details: dict[str, JsonValue] = Field(default_factory=dict)
    outputs: list[OutputFile] = Field(default_factory=list)
    cpu_ms: int | None = None
    worker: dict[str, JsonValue] = Field(default_factory=dict)  # provenance only, never hashed
    # Output files worth keeping, such as renders, by sha256; never hashed or logged.
    # Details name them by digest; the core stores the bytes when asked to keep outputs.
    files: dict[str, bytes] = Field(default_factory=dict, exclude=True, repr=False)


class Provenance(BaseModel):
    """How a result came to be; recorded, but never in the environment key or result digest."""

    host: str
    backend: str
    isolation: str
    worker: str
    tools: dict[str, str] = Field(default_factory=dict)
    started_at: str
    finished_at: str
    wall_ms: int
    cpu_ms: int | None = None
    attempts: int = 1
    cached: bool = False
    extra: dict[str, JsonValue] = Field(default_factory=dict)

    def restored(self) -> bool:
        """Whether every server this result's check used was restored from a snapshot."""
        servers = self.extra.get("servers", [self.extra])
        return isinstance(servers, list) and all(
            isinstance(server, dict) and bool(server.get("restored_from")) for server in servers
        )


class CheckResult(BaseModel):
    artifact: str
    prover: str
    mode: str
    verdict: Verdict
    trust: Trust | None = None  # None only in records that predate trust tiers
    diagnostics: list[Diagnostic] = Field(default_factory=list)
    assumptions: list[str] = Field(default_factory=list)
    details: dict[str, JsonValue] = Field(default_factory=dict)
    outputs: list[OutputFile] = Field(default_factory=list)
    # Known soundness bugs of the environment's prover whose features the artifact uses.
    # A syntactic flag from manifests/advisories/, never part of the verdict or its digest.
    advisories: list[str] = Field(default_factory=list)
    env_key: str
    environment: dict[str, JsonValue]
    request_digest: str
    result_digest: str
    provenance: Provenance

    def summary_line(self) -> dict[str, JsonValue]:
        """The CLI's JSON-lines contract: the core fields, then adapter details at top level."""
        line: dict[str, JsonValue] = dict(self.details)
        line.update(
            artifact=self.artifact,
            prover=self.prover,
            mode=self.mode,
            verdict=self.verdict.value,
            trust=self.trust.value if self.trust else None,
            diagnostics=[d.model_dump(exclude_none=True) for d in self.diagnostics],
            assumptions=list(self.assumptions),
            env_key=self.env_key,
            request_digest=self.request_digest,
            result_digest=self.result_digest,
            advisories=list(self.advisories),
            cached=self.provenance.cached,
            wall_ms=self.provenance.wall_ms,
        )
        if self.outputs:
            line["outputs"] = [output.model_dump() for output in self.outputs]
        return line

    def with_extra(self, **items: JsonValue) -> CheckResult:
        """A copy whose provenance also records `items`; provenance is never hashed."""
        extra = {**self.provenance.extra, **items}
        return self.model_copy(
            update={"provenance": self.provenance.model_copy(update={"extra": extra})}
        )

    def self_consistent(self) -> bool:
        """Whether the record's digests match its own content; a hand-edited one fails."""
        outcome = Outcome(
            verdict=self.verdict,
            trust=self.trust or Trust.KERNEL,
            diagnostics=self.diagnostics,
            assumptions=self.assumptions,
            details=self.details,
            outputs=self.outputs,
        )
        written = result_digest(outcome, with_trust=self.trust is not None)
        return self.result_digest == written and self.env_key == digest(self.environment)


def result_digest(outcome: Outcome, *, with_trust: bool = True) -> str:
    """Digest of everything a replay must reproduce.

    That is the verdict, what it rests on, diagnostics, assumptions, details and output files.
    `with_trust=False` serves records without trust tiers: they keep their original digest.
    """
    data: dict[str, JsonValue] = {
        "verdict": outcome.verdict.value,
        "diagnostics": [d.model_dump() for d in outcome.diagnostics],
        "assumptions": list(outcome.assumptions),
        "details": outcome.details,
    }
    if with_trust:
        data["trust"] = outcome.trust.value
    if outcome.outputs:
        data["outputs"] = [output.model_dump() for output in outcome.outputs]
    return digest(data)


@dataclass(frozen=True)
class Limits:
    timeout_s: int
    memory_mb: int
    pids: int = 512
    cpus: int = 1
    tmpfs_mb: int = 512
