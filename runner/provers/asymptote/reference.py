"""Compare a render with a reference diagram: both compile, keyword F1, SSIM.

SSIM compares the render the record keeps, byte for byte.
Since asy runs once per diagram, the comparison sees only what is kept.
A second render, to another format or file name, could be told apart.
The diagram could read `settings.outformat` and draw otherwise.
The reference is rendered in the artifact's format.
Both renders are rasterized the same way (compare.py).
Ghostscript rasterizes a PDF in the reference's sandbox, before any reference code runs there.
The kit rasterizes a PNG.
An SVG has no rasterizer here, so it gets no SSIM, and the details say why.

The reference never enters the artifact's sandbox.
A second sandbox (`sandboxes.sandbox("reference")`) opens after the artifact's last command.
On the local backend, the reference's bytes are nowhere on disk while artifact code runs.
On docker they are in another container.
The SSIM is computed here, on the two rasters' bytes.

For a report, these are kept by sha256 in `Outcome.files` and typed in `Outcome.outputs`:

- the reference's render (role `reference`);
- the two same-size gray rasters SSIM compared (roles `raster-artifact`, `raster-reference`).

The numbers stay in `details["comparison"]`.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field

from runner.backends.base import Sandbox
from runner.core.models import Diagnostic, JsonValue, Outcome, OutputFile, Verdict
from runner.provers.asymptote import compare as asy_compare
from runner.provers.asymptote import guard
from runner.provers.asymptote.judging import diagnostics_of
from runner.provers.asymptote.render import KIT, WITH_WORK_TMPDIR, Render, Timings, render
from runner.provers.base import ResolvedRequest, Sandboxes
from runner.provers.common.verdicts import Refusal

REFERENCE_SANDBOX = "reference"


@dataclass
class Comparison:
    details: dict[str, JsonValue]
    outputs: list[OutputFile] = field(default_factory=list)
    files: dict[str, bytes] = field(default_factory=dict)

    def keep(self, role: str, fmt: str, data: bytes) -> None:
        sha = hashlib.sha256(data).hexdigest()
        self.outputs.append(OutputFile(role=role, format=fmt, sha256=sha))
        self.files[sha] = data


def compare_with_reference(
    sandboxes: Sandboxes,
    request: ResolvedRequest,
    reference: tuple[str, str],
    outcome: Outcome,
    fmt: str,
    timeout: float,
    timings: Timings,
) -> Comparison:
    """Both compile, keyword F1 of the sources, SSIM of the renders (see asy_compare)."""
    name, reference_source = reference
    artifact_compiles = outcome.verdict is Verdict.PASS
    comparison = Comparison(
        {
            "reference": name,
            "artifact_compiles": artifact_compiles,
            "reference_compiles": False,
            "keyword_f1": asy_compare.keyword_f1(request.content, reference_source),
            "ssim": None,
        }
    )
    sandbox = sandboxes.sandbox(REFERENCE_SANDBOX)  # opened after the artifact's last run
    artifact_raster, ssim_error = None, None
    if artifact_compiles:  # before any code of the reference runs in that sandbox
        kept = outcome.files[outcome.outputs[0].sha256]
        artifact_raster, ssim_error = _raster(sandbox, "artifact", fmt, kept, timeout, timings)
    problem, reference_render = _render_reference(sandbox, reference_source, fmt, timeout, timings)
    if reference_render is None or reference_render.data is None:
        comparison.details["reference_error"] = problem
        return comparison
    comparison.details["reference_compiles"] = True
    comparison.keep("reference", fmt, reference_render.data)
    if not artifact_compiles:
        return comparison
    if artifact_raster is None:
        comparison.details["ssim_error"] = ssim_error
        return comparison
    reference_raster, ssim_error = _raster(
        sandbox, "reference", fmt, reference_render.data, timeout, timings
    )
    if reference_raster is None:
        comparison.details["ssim_error"] = ssim_error
        return comparison
    started = time.monotonic()
    try:
        comparison.details["ssim"] = asy_compare.ssim(artifact_raster, reference_raster)
    except (OSError, ValueError) as exc:  # rasters that do not decode or differ in size
        comparison.details["ssim_error"] = f"the rasters cannot be compared: {exc}"
        return comparison
    timings.steps["ssim"] = int((time.monotonic() - started) * 1000)
    comparison.keep("raster-artifact", "png", artifact_raster)
    comparison.keep("raster-reference", "png", reference_raster)
    return comparison


def _render_reference(
    sandbox: Sandbox, source: str, fmt: str, timeout: float, timings: Timings
) -> tuple[str | None, Render | None]:
    """The reference rendered in `fmt`: (why it did not compile, its render).

    The reference passes the artifact's guard too.
    """
    started = time.monotonic()
    refused = guard.refusals(source)
    timings.steps["reference_guard"] = int((time.monotonic() - started) * 1000)
    if refused:
        return _where(refused[0]) + refused[0].message, None
    done = render(sandbox, "reference", source, fmt, timeout)
    timings.add("reference", done.done)
    return (None if done.data is not None else _first_problem(done)), done


def _raster(
    sandbox: Sandbox, side: str, fmt: str, data: bytes, timeout: float, timings: Timings
) -> tuple[bytes | None, str | None]:
    """The kept render `data` rasterized at the fixed SSIM size, or why it could not be."""
    if fmt == "png":
        started = time.monotonic()
        try:
            return asy_compare.png_raster(data), None
        except ValueError as exc:
            return None, f"the {side} PNG cannot be rasterized: {exc}"
        finally:
            timings.steps["raster"] = timings.steps.get("raster", 0) + int(
                (time.monotonic() - started) * 1000
            )
    if fmt != "pdf":
        return None, (
            f"no SSIM for {fmt.upper()}: it compares rasters of the render the record keeps, "
            "and the kit rasterizes only PNG and PDF (use --format png or pdf)"
        )
    return _pdf_raster(sandbox, side, data, timeout, timings)


def _pdf_raster(
    sandbox: Sandbox, side: str, pdf: bytes, timeout: float, timings: Timings
) -> tuple[bytes | None, str | None]:
    """`pdf` rasterized by ghostscript in `sandbox`, or why it could not be."""
    source, raster = f"{KIT}/raster-{side}.pdf", f"{KIT}/raster-{side}.png"
    sandbox.write_file(source, pdf)
    done = sandbox.run(
        [*WITH_WORK_TMPDIR, "gs", *asy_compare.RASTER_ARGS, f"-sOutputFile={raster}", source],
        timeout_s=timeout,
    )
    timings.add("raster", done)
    if not done.ok:
        return None, f"ghostscript could not rasterize the {side} PDF (exit {done.exit_code})"
    try:
        return sandbox.read_file(raster), None
    except FileNotFoundError:  # a PDF without a page: a fact about the diagram, never infra
        return None, f"ghostscript drew no page of the {side} PDF"


def _first_problem(failed: Render) -> str:
    if failed.done.timed_out:
        return "timed out"
    for diagnostic in diagnostics_of(failed):
        if diagnostic.severity == "error":
            return _where(diagnostic) + diagnostic.message
    return failed.missing or f"asy exited {failed.done.exit_code}"


def _where(diagnostic: Diagnostic | Refusal) -> str:
    return f"{diagnostic.line}.{diagnostic.column}: " if diagnostic.line is not None else ""
