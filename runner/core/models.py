"""The check API's data: what is asked (CheckRequest), what comes back (CheckResult)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from runner.core.canonical import canonical_bytes, digest

JsonValue = Any  # plain JSON data without floats; checked by canonical_bytes when hashed


class Verdict(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    PLACEHOLDER = (
        "placeholder"  # Admitted / sorry / CHEAT_TAC: the artifact is not a finished proof
    )
    AXIOM = "axiom"  # relies on an assumption the request does not allow
    WRONG_STATEMENT = "wrong_statement"  # checked, but the target theorem is missing or differs
    TIMEOUT = "timeout"
    MEMORY = "memory"
    CRASH = "crash"  # the prover itself died (not a verdict on the artifact's logic)
    INFRA_ERROR = "infra_error"  # the kit or machine failed; never counted against the artifact


class Target(BaseModel):
    """The theorem an artifact must prove: `name` must exist with exactly `statement` (elaborated)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    statement: str = Field(min_length=1)


class CheckRequest(BaseModel):
    """One artifact to check. Unset limits are filled from settings before hashing."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    prover: str = Field(min_length=1)
    mode: str | None = None  # None: the prover's default mode (its first)
    name: str = Field(min_length=1)
    content: str
    timeout: int | None = Field(default=None, ge=1, description="seconds")
    memory_mb: int | None = Field(default=None, ge=64)
    allowed_axioms: tuple[str, ...] = ()
    options: dict[str, JsonValue] = Field(default_factory=dict)
    target: Target | None = None

    @field_validator("options")
    @classmethod
    def _options_are_canonical(cls, value: dict[str, JsonValue]) -> dict[str, JsonValue]:
        canonical_bytes(value)  # raises NotCanonical (a ValueError) on floats
        return value

    def digest(self) -> str:
        data = self.model_dump(mode="json")
        if data["target"] is None:  # requests without a target keep the digests they always had
            del data["target"]
        return digest(data)

    def record(self) -> dict[str, JsonValue]:
        """The request as a checkpoint stores it (the same fields its digest covers)."""
        data = self.model_dump(mode="json")
        if data["target"] is None:
            del data["target"]
        return data


class Diagnostic(BaseModel):
    """A prover message, normalized so that it replays byte-identically (no temp paths, no times)."""

    model_config = ConfigDict(frozen=True)

    severity: str = "error"
    message: str
    line: int | None = None
    column: int | None = None
    context: str | None = None  # the failing phrase, clause or command, when known


class Outcome(BaseModel):
    """What an adapter concludes about one artifact; the core adds keys, digests and provenance."""

    verdict: Verdict
    diagnostics: list[Diagnostic] = Field(default_factory=list)
    assumptions: list[str] = Field(default_factory=list)
    details: dict[str, JsonValue] = Field(default_factory=dict)
    cpu_ms: int | None = None
    worker: dict[str, JsonValue] = Field(default_factory=dict)  # provenance only, never hashed
    # Output files worth keeping (e.g. renders), by sha256; never hashed or recorded in a log:
    # details name them by digest, and the core stores the bytes when asked to keep outputs.
    files: dict[str, bytes] = Field(default_factory=dict, exclude=True, repr=False)


class Provenance(BaseModel):
    """How a result came to be. Recorded, never part of the environment key or result digest."""

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


class CheckResult(BaseModel):
    artifact: str
    prover: str
    mode: str
    verdict: Verdict
    diagnostics: list[Diagnostic] = Field(default_factory=list)
    assumptions: list[str] = Field(default_factory=list)
    details: dict[str, JsonValue] = Field(default_factory=dict)
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
            diagnostics=[d.model_dump(exclude_none=True) for d in self.diagnostics],
            assumptions=list(self.assumptions),
            env_key=self.env_key,
            request_digest=self.request_digest,
            result_digest=self.result_digest,
            cached=self.provenance.cached,
            wall_ms=self.provenance.wall_ms,
        )
        return line

    def self_consistent(self) -> bool:
        """Whether the record's digests match its own content (a hand-edited record does not)."""
        outcome = Outcome(
            verdict=self.verdict,
            diagnostics=self.diagnostics,
            assumptions=self.assumptions,
            details=self.details,
        )
        return self.result_digest == result_digest(outcome) and self.env_key == digest(
            self.environment
        )


def result_digest(outcome: Outcome) -> str:
    """Digest of everything a replay must reproduce: verdict, diagnostics, assumptions, details."""
    return digest(
        {
            "verdict": outcome.verdict.value,
            "diagnostics": [d.model_dump() for d in outcome.diagnostics],
            "assumptions": list(outcome.assumptions),
            "details": outcome.details,
        }
    )


@dataclass(frozen=True)
class Limits:
    timeout_s: int
    memory_mb: int
    pids: int = 512
    cpus: int = 1
    tmpfs_mb: int = 512
