"""Requests resolved once, before anything runs: adapter, mode, limits, options, image, digest.

Everything a check depends on is settled here, so adapters read plain values and a bad request
is one error class everywhere (`BadRequest`: exit 2 from the CLI), raised before any check.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import ValidationError

from runner import provers
from runner.core.errors import BadRequest, explain
from runner.core.models import CheckRequest, JsonValue, Limits
from runner.core.settings import Settings
from runner.provers.base import AdapterOptions, BadOption, ProverAdapter, ResolvedRequest


def adapter_for(name: str) -> ProverAdapter:
    try:
        return provers.get(name)
    except provers.UnknownProver as exc:
        raise BadRequest(str(exc)) from None


def resolve(request: CheckRequest, settings: Settings) -> ResolvedRequest:
    adapter = adapter_for(request.prover)
    size_mb = len(request.content.encode("utf-8", errors="surrogatepass")) / 2**20
    if size_mb > settings.max_artifact_mb:
        raise BadRequest(
            f"artifact {request.name} is {size_mb:.1f} MB, over the {settings.max_artifact_mb:g} MB "
            "limit (PROOFLOCK_MAX_ARTIFACT_MB raises it)"
        )
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
        request=normalized,
        adapter=adapter,
        options=options,
        limits=limits,
        image=adapter.image_for(options, _line(adapter, request.line)),
    )
    if adapter.validate is not None:
        adapter.validate(resolved)
    return resolved


def _options(adapter: ProverAdapter, raw: Mapping[str, JsonValue]) -> AdapterOptions:
    """The request's options validated into the adapter's model; BadRequest names the option."""
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
