"""Asymptote adapter: render a `.asy` diagram reproducibly in asy's safe mode, and compare it
with a reference diagram when the request carries one.

Before asy runs, the guard (guard.py) reads the artifact with asy's own lexer (lexer.py) and
refuses, located, whatever is outside its allow-lists: settings, modules, TeX packages, code run
from text, TeX file and shell access. Then asy runs (render.py) in safe mode under a frozen clock,
writing only into `out/` below the source, with TeX restricted by kpathsea (pdfTeX only, no shell
escape, no absolute or `..` paths).

Sandbox layout (fixed names, so no output byte or message holds a temp path or a user's file name):

    artifact/diagram.asy        the artifact; asy -cd artifact -o out/diagram
    artifact/out/diagram.<fmt>  its render; TeX's and the converters' files beside it
    artifact-pdf/...            the artifact again as PDF, for SSIM, when the format is not pdf
    raster-artifact.png         that PDF rasterized at one fixed size for SSIM (see compare.py)

The reference is rendered (as `reference/...`, `raster-reference.png`) in a second sandbox,
opened after the artifact's last run (reference.py): the artifact's sandbox never holds it.

Verdicts: pass (the guard allowed the source, asy exited 0 and wrote the diagram), fail (a refusal,
a located asy error, a LaTeX error summary, a missing module, nothing drawn), timeout, memory,
crash (asy killed by a signal without saying why). details["outputs"] maps the format to the
sha256 of the normalized output bytes, which Outcome.files carries.
"""

from __future__ import annotations

import time
from typing import Literal

from pydantic import Field

from runner.core.models import Outcome, Verdict
from runner.provers.asymptote import diagnostics as asy_diagnostics
from runner.provers.asymptote import guard
from runner.provers.asymptote import outputs as asy_outputs
from runner.provers.asymptote import render as asy_render
from runner.provers.asymptote.reference import compare_with_reference
from runner.provers.base import (
    AdapterOptions,
    FileOption,
    ProverAdapter,
    ResolvedRequest,
    Sandboxes,
)

# 3: settings, modules and TeX packages are allow-listed (a refusal is `fail` with line and
#    column); asy writes only below its source; a frozen clock; the reference renders in a
#    sandbox of its own, and its PDF and both SSIM rasters are kept.
VERSION = "3"
FORMATS = asy_outputs.FORMATS


class AsymptoteOptions(AdapterOptions):
    format: Literal["png", "svg", "pdf"] = Field(
        "png", description="output format (default png)", json_schema_extra={"metavar": "FORMAT"}
    )
    reference: FileOption | None = Field(
        None,
        description="a reference .asy diagram to compare with (keyword F1, SSIM)",
        json_schema_extra={"metavar": "REF.asy"},
    )


def probe(image: str) -> dict[str, list[str]]:
    packages = (
        "dpkg-query -W -f '${db:Status-Abbrev} ${Package}=${Version}\\n' asymptote dvisvgm "
        "ghostscript libgs10 libkpathsea6 tex-common 'texlive-*' lmodern fonts-lmodern "
        "libfaketime 2>/dev/null | sed -n 's/^ii  *//p'"
    )
    # A module the kit pins (olympiad.asy) changes verdicts: its digest, or `missing`, is keyed.
    modules = (
        f"p=$(ASYMPTOTE_DIR={asy_diagnostics.EXTRA_MODULE_DIR} asy -noV -c "
        "'write(locatefile(\"olympiad.asy\"));' 2>/dev/null); "
        'if [ -n "$p" ]; then echo "olympiad.asy $(sha256sum < "$p" | cut -c1-64)"; '
        "else echo 'olympiad.asy missing'; fi"
    )
    return {
        "asy": ["sh", "-c", "asy -version 2>&1 | head -n 1"],
        "packages": ["sh", "-c", packages],
        "modules": ["sh", "-c", modules],
    }


def check(request: ResolvedRequest, sandboxes: Sandboxes) -> Outcome:
    options = request.options_as(AsymptoteOptions)
    fmt = options.format
    reference = (
        (options.reference.name or "reference.asy", options.reference.content)
        if options.reference is not None
        else None
    )
    timeout = float(request.timeout_s)
    timings = asy_render.Timings()
    started = time.monotonic()
    refused = guard.refusals(request.content)
    timings.steps["guard"] = int((time.monotonic() - started) * 1000)
    if refused:
        outcome = Outcome(verdict=Verdict.FAIL, diagnostics=refused, details={"outputs": {}})
    else:
        artifact = asy_render.render(sandboxes.sandbox(), "artifact", request.content, fmt, timeout)
        timings.add("render", artifact.done)
        outcome = asy_render.artifact_outcome(artifact, fmt, timeout)
    if reference is not None:
        comparison = compare_with_reference(
            sandboxes, request, reference, outcome, fmt, timeout, timings
        )
        outcome.details["comparison"] = comparison.details
        outcome.files.update(comparison.files)
    outcome.cpu_ms = timings.cpu_ms
    outcome.worker = {"timings_ms": dict(timings.steps)}
    return outcome


ADAPTER = ProverAdapter(
    name="asymptote",
    version=VERSION,
    modes=("render",),
    images=("asymptote",),
    probe=probe,
    check=check,
    options=AsymptoteOptions,
    description="Asymptote .asy diagrams, rendered reproducibly in asy's safe mode",
)
