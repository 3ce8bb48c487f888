"""Requests resolved once, before anything runs: adapter, mode, limits, options, image, digest.

Everything a check depends on is settled here, so adapters read plain values.
Two kinds of trouble are told apart before any check.
A bad choice by the requester is bad input: prover, mode, line, options, limits, target.
It raises `BadRequest`, and the CLI exits 2.
An artifact the kit will not take is that artifact's record: too large, or not UTF-8 text.
`Refused` carries its `refused` result, and the rest of the run goes on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import ValidationError

from runner import provers
from runner.core.canonical import digest
from runner.core.errors import BadRequest, explain
from runner.core.models import (
    CheckRequest,
    CheckResult,
    Diagnostic,
    JsonValue,
    Limits,
    Outcome,
    Provenance,
    Trust,
    Verdict,
    Withheld,
    result_digest,
)
from runner.core.provenance import base_tools, host, now
from runner.core.settings import Settings
from runner.provers.base import AdapterOptions, BadOption, ProverAdapter, ResolvedRequest


@dataclass(frozen=True)
class Refusal:
    """An artifact the kit will not check: its request as recorded and its `refused` result."""

    request: CheckRequest
    result: CheckResult

    @property
    def digest(self) -> str:
        return self.result.request_digest


class Refused(BadRequest):
    """The artifact is refused, not the request; callers record `refusal` and go on."""

    def __init__(self, refusal: Refusal):
        super().__init__(refusal.result.diagnostics[0].message)
        self.refusal = refusal


def adapter_for(name: str) -> ProverAdapter:
    try:
        return provers.get(name)
    except provers.UnknownProver as exc:
        raise BadRequest(str(exc)) from None


def resolve(request: CheckRequest, settings: Settings) -> ResolvedRequest:
    """The request with every default filled in.

    Raises BadRequest for bad input, and Refused for an artifact the kit will not take.
    """
    adapter = adapter_for(request.prover)
    mode = request.mode or adapter.modes[0]
    if mode not in adapter.modes:
        raise BadRequest(
            f"prover {adapter.name!r} has no mode {mode!r} (modes: {', '.join(adapter.modes)})"
            + provers.suggestion(mode, adapter.modes)
        )
    options = _options(adapter, request.options)
    if request.target is not None and not adapter.targets:
        raise BadRequest(f"prover {adapter.name!r} does not check target statements")
    limits = Limits(
        timeout_s=request.timeout or settings.timeout,
        memory_mb=request.memory_mb or settings.memory_mb,
        pids=settings.pids,
        cpus=settings.cpus,
    )
    normalized = request.model_copy(
        update={"mode": mode, "timeout": limits.timeout_s, "memory_mb": limits.memory_mb}
    )
    resolved = ResolvedRequest(
        request=_within_limit(normalized, settings.max_artifact_mb),
        adapter=adapter,
        options=options,
        limits=limits,
        image=adapter.image_for(options, _line(adapter, request.line)),
    )
    if resolved.request.withheld is not None:
        raise Refused(refusal(resolved, resolved.request.withheld.reason))
    if adapter.validate is not None:
        adapter.validate(resolved)
    return resolved


def _within_limit(request: CheckRequest, max_mb: float) -> CheckRequest:
    """The request, or its withheld form when over the size limit.

    The log keeps no megabytes the kit did not check, only their digest and size.
    """
    raw = request.content.encode("utf-8")
    size_mb = len(raw) / 2**20
    if size_mb <= max_mb:
        return request
    reason = (
        f"artifact {request.name} is {size_mb:.1f} MB, over the {max_mb:g} MB limit "
        "(PROOFLOCK_MAX_ARTIFACT_MB raises it)"
    )
    return request.model_copy(update={"content": "", "withheld": Withheld.of(raw, reason)})


def refusal(resolved: ResolvedRequest, reason: str) -> Refusal:
    """The `refused` record of an artifact nothing ran on; it rests on the kit alone."""
    outcome = Outcome(
        verdict=Verdict.REFUSED, trust=Trust.KIT, diagnostics=[Diagnostic(message=reason)]
    )
    limits = resolved.limits
    environment: dict[str, JsonValue] = {
        "prover": resolved.adapter.name,
        "adapter_version": resolved.adapter.version,
        "install": {"kind": "none"},  # no prover install was used
        "mode": resolved.mode,
        "limits": {
            "timeout_s": limits.timeout_s,
            "memory_mb": limits.memory_mb,
            "pids": limits.pids,
        },
        "options": resolved.options.environment(),
    }
    stamp = now()
    provenance = Provenance(
        host=host(),
        backend="none",
        isolation="none",
        worker="none",
        tools=base_tools(),
        started_at=stamp,
        finished_at=stamp,
        wall_ms=0,
    )
    result = result_of(resolved, outcome, environment, digest(environment), provenance)
    return Refusal(resolved.request, result)


def result_of(
    request: ResolvedRequest,
    outcome: Outcome,
    environment: dict[str, JsonValue],
    env_key: str,
    provenance: Provenance,
    advisories: list[str] | None = None,
) -> CheckResult:
    """The record of `outcome` for `request`: the adapter's conclusion, keyed and digested."""
    return CheckResult(
        artifact=request.name,
        prover=request.adapter.name,
        mode=request.mode,
        verdict=outcome.verdict,
        trust=outcome.trust,
        diagnostics=outcome.diagnostics,
        assumptions=outcome.assumptions,
        details=outcome.details,
        outputs=outcome.outputs,
        advisories=advisories or [],
        env_key=env_key,
        environment=environment,
        request_digest=request.digest,
        result_digest=result_digest(outcome),
        provenance=provenance,
    )


def _options(adapter: ProverAdapter, raw: Mapping[str, JsonValue]) -> AdapterOptions:
    """The request's options, validated into the adapter's model.

    BadRequest names the bad option.
    """
    declared = adapter.options.model_fields
    unknown = sorted(set(raw) - set(declared))
    if unknown:
        known = ", ".join(sorted(declared)) or "none"
        raise BadRequest(f"prover {adapter.name!r} has no option {unknown[0]!r} (options: {known})")
    try:
        return adapter.options.model_validate(
            {key: value for key, value in raw.items() if value is not None}
        )
    except ValidationError as exc:
        raise BadOption(f"{adapter.name} option {explain(exc)}") from None


def _line(adapter: ProverAdapter, line: str | None) -> str | None:
    if line is None or line == adapter.images[0]:
        return None
    if line not in adapter.lines:
        known = ", ".join(adapter.all_lines())
        raise BadRequest(f"prover {adapter.name!r} has no line {line!r} (lines: {known})")
    return line
