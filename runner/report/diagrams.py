"""Asymptote records: the render beside its reference, SSIM and keyword F1, or the error.

Renders are found by digest (`details["outputs"]`, `details["comparison"]["reference_outputs"]`)
and copied beside the page; a render that is missing or does not decode is named, never shown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from runner.core.models import CheckResult
from runner.report.assets import AssetWriter
from runner.report.blobs import BlobStore, render_problem
from runner.report.load import Run
from runner.report.tables import DiagnosticView
from runner.report.text import visible, visible_block

IMAGE_FORMATS = ("png", "svg")  # shown inline; a PDF is linked
MAX_LISTED = 3  # diagrams named in one sentence


@dataclass
class RenderView:
    fmt: str
    sha256: str
    href: str | None = None
    problem: str | None = None

    @property
    def is_image(self) -> bool:
        return self.fmt in IMAGE_FORMATS


@dataclass
class DiagramView:
    index: int
    artifact: str
    verdict: str
    renders: list[RenderView]
    source: str
    compile_error: DiagnosticView | None = None
    reference: str | None = None  # the reference's name, when compared
    reference_renders: list[RenderView] = field(default_factory=list)
    reference_note: str | None = None
    keyword_f1: str | None = None
    ssim: str | None = None
    ssim_error: str | None = None
    reference_error: str | None = None


def diagram_views(
    runs: list[Run], store: BlobStore, assets: AssetWriter, problems: list[str]
) -> list[DiagramView]:
    views = []
    misses: dict[str, list[str]] = {}  # "png render not kept" -> artifact names
    for index, (request, result) in enumerate(runs):
        outputs = result.details.get("outputs")
        if not isinstance(outputs, dict):
            continue
        name = visible(result.artifact)
        view = DiagramView(
            index=index,
            artifact=name,
            verdict=result.verdict.value,
            renders=_renders(outputs, store, assets, misses, name),
            source=visible_block(request.content),
            compile_error=_compile_error(result),
        )
        comparison = result.details.get("comparison")
        if isinstance(comparison, dict):
            _add_comparison(view, comparison, store, assets, misses)
        views.append(view)
    problems.extend(_grouped(misses))
    return views


def _grouped(misses: dict[str, list[str]]) -> list[str]:
    """One sentence per kind of miss, naming a few diagrams, so 1,000 misses stay readable."""
    sentences = []
    for what, names in misses.items():
        listed = ", ".join(names[:MAX_LISTED])
        more = f" (+{len(names) - MAX_LISTED} more)" if len(names) > MAX_LISTED else ""
        count = "1 diagram" if len(names) == 1 else f"{len(names)} diagrams"
        sentences.append(f"{what}: {count} ({listed}{more})")
    return sentences


def _renders(
    outputs: dict[str, Any],
    store: BlobStore,
    assets: AssetWriter,
    misses: dict[str, list[str]],
    name: str,
    side: str = "render",
) -> list[RenderView]:
    views = []
    for fmt, sha256 in sorted(outputs.items()):
        view = RenderView(fmt=visible(fmt), sha256=visible(sha256))
        data = store.read(str(sha256))
        view.problem = render_problem(str(fmt), str(sha256), data)
        if view.problem is None and data is not None:
            # The digest is a checked sha256 and fmt a known format, so this stays in renders/.
            view.href = assets.write(f"renders/{sha256}.{fmt}", data)
        else:
            misses.setdefault(f"{view.fmt} {side}: {view.problem}", []).append(name)
        views.append(view)
    return views


def _compile_error(result: CheckResult) -> DiagnosticView | None:
    if result.verdict.value == "pass":
        return None
    errors = [d for d in result.diagnostics if d.severity == "error"] or result.diagnostics
    return DiagnosticView.of(errors[0]) if errors else None


def _add_comparison(
    view: DiagramView,
    comparison: dict[str, Any],
    store: BlobStore,
    assets: AssetWriter,
    misses: dict[str, list[str]],
) -> None:
    view.reference = visible(comparison.get("reference") or "reference")
    view.keyword_f1 = _text(comparison.get("keyword_f1"))
    view.ssim = _text(comparison.get("ssim"))
    view.ssim_error = _text(comparison.get("ssim_error"))
    view.reference_error = _text(comparison.get("reference_error"))
    references = comparison.get("reference_outputs")
    if isinstance(references, dict) and references:
        view.reference_renders = _renders(
            references, store, assets, misses, view.artifact, side="reference render"
        )
    elif comparison.get("reference_compiles") is False:
        view.reference_note = "the reference did not compile"
    else:
        view.reference_note = "reference render not recorded"
        misses.setdefault("reference render not recorded in the log", []).append(view.artifact)


def _text(value: object) -> str | None:
    return None if value is None else visible(value)
