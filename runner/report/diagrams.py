"""Records with rendered outputs: each render by role, beside its reference, with scores.

A render that failed shows its error instead.
A record's output files are its typed `outputs`: role, format, sha256.
Older records name them in their details instead.
There `outputs` maps format to sha256; a comparison adds `reference_outputs` and `rasters`.
These read as the roles `render`, `reference`, `raster-artifact` and `raster-reference`.
Every record of a prover whose records name output files is shown.
So a failed render appears with its error beside the others.
No prover is named here.
Files are found by digest and copied beside the page.
A file that is missing or does not decode is named, never shown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from runner.core import verdicts
from runner.core.models import CheckResult, OutputFile
from runner.report.assets import AssetWriter
from runner.report.blobs import BlobStore, render_problem
from runner.report.load import Run
from runner.report.tables import DiagnosticView
from runner.report.text import visible, visible_block

IMAGE_FORMATS = ("png", "svg")  # shown inline; a PDF is linked
MAX_LISTED = 3  # diagrams named in one sentence
SIDE_NAMES = {"render": "render", "reference": "reference render"}  # in "what is missing" notes
LEGACY_RASTERS = {"artifact": "raster-artifact", "reference": "raster-reference"}


@dataclass
class RenderView:
    role: str
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
    others: list[RenderView] = field(default_factory=list)  # other roles (rasters, ...)


def output_files(result: CheckResult) -> list[OutputFile] | None:
    """The files a record names, by role.

    None when it names none and could not have, as for a prover without outputs.
    An older record with an empty `outputs` map rendered nothing: [].
    """
    found = list(result.outputs)
    legacy = result.details.get("outputs")
    comparison = result.details.get("comparison")
    comparison = comparison if isinstance(comparison, dict) else {}
    maps = [("render", legacy), ("reference", comparison.get("reference_outputs"))]
    for role, digests in maps:
        if isinstance(digests, dict):
            found += [_file(role, fmt, sha) for fmt, sha in sorted(digests.items())]
    rasters = comparison.get("rasters")
    if isinstance(rasters, dict):
        for side, sha in sorted(rasters.items()):
            found.append(_file(LEGACY_RASTERS.get(str(side), f"raster-{side}"), "png", sha))
    if not found and not isinstance(legacy, dict):
        return None
    return found


def _file(role: str, fmt: object, sha256: object) -> OutputFile:
    return OutputFile(role=role, format=str(fmt), sha256=str(sha256))


def diagram_views(
    runs: list[Run], store: BlobStore, assets: AssetWriter, problems: list[str]
) -> list[DiagramView]:
    files = [output_files(result) for _, result in runs]
    rendering = {
        result.prover for (_, result), named in zip(runs, files, strict=True) if named is not None
    }
    views = []
    misses: dict[str, list[str]] = {}  # "png render: render not kept" -> artifact names
    for index, ((request, result), named) in enumerate(zip(runs, files, strict=True)):
        if result.prover not in rendering:
            continue
        name = visible(result.artifact)
        shown = _renders(named or [], store, assets, misses, name)
        view = DiagramView(
            index=index,
            artifact=name,
            verdict=result.verdict.value,
            renders=[r for r in shown if r.role == "render"],
            others=[r for r in shown if r.role not in SIDE_NAMES],
            source=visible_block(request.content),
            compile_error=_compile_error(result),
        )
        comparison = result.details.get("comparison")
        if isinstance(comparison, dict):
            references = [r for r in shown if r.role == "reference"]
            _add_comparison(view, comparison, references, misses)
        views.append(view)
    problems.extend(_grouped(misses))
    return views


def _grouped(misses: dict[str, list[str]]) -> list[str]:
    """One sentence per kind of miss, naming a few diagrams, so many misses stay readable."""
    sentences = []
    for what, names in misses.items():
        listed = ", ".join(names[:MAX_LISTED])
        more = f" (+{len(names) - MAX_LISTED} more)" if len(names) > MAX_LISTED else ""
        count = "1 diagram" if len(names) == 1 else f"{len(names)} diagrams"
        sentences.append(f"{what}: {count} ({listed}{more})")
    return sentences


def _renders(
    files: list[OutputFile],
    store: BlobStore,
    assets: AssetWriter,
    misses: dict[str, list[str]],
    name: str,
) -> list[RenderView]:
    views = []
    for file in files:
        view = RenderView(
            role=visible(file.role), fmt=visible(file.format), sha256=visible(file.sha256)
        )
        data = store.read(file.sha256)
        view.problem = render_problem(file.format, file.sha256, data)
        if view.problem is None and data is not None:
            # A checked sha256 and a known format, so this path stays in renders/.
            view.href = assets.write(f"renders/{file.sha256}.{file.format}", data)
        else:
            side = SIDE_NAMES.get(file.role, view.role)
            misses.setdefault(f"{view.fmt} {side}: {view.problem}", []).append(name)
        views.append(view)
    return views


def _compile_error(result: CheckResult) -> DiagnosticView | None:
    if verdicts.facts(result.verdict).passes:
        return None
    errors = [d for d in result.diagnostics if d.severity == "error"] or result.diagnostics
    return DiagnosticView.of(errors[0]) if errors else None


def _add_comparison(
    view: DiagramView,
    comparison: dict[str, Any],
    references: list[RenderView],
    misses: dict[str, list[str]],
) -> None:
    view.reference = visible(comparison.get("reference") or "reference")
    view.keyword_f1 = _text(comparison.get("keyword_f1"))
    view.ssim = _text(comparison.get("ssim"))
    view.ssim_error = _text(comparison.get("ssim_error"))
    view.reference_error = _text(comparison.get("reference_error"))
    if references:
        view.reference_renders = references
    elif comparison.get("reference_compiles") is False:
        view.reference_note = "the reference did not compile"
    else:
        view.reference_note = "reference render not recorded"
        misses.setdefault("reference render not recorded in the log", []).append(view.artifact)


def _text(value: object) -> str | None:
    return None if value is None else visible(value)
