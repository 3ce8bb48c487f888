"""Asymptote adapter: render a `.asy` diagram reproducibly in asy's safe mode.

When the request carries a reference diagram, the render is compared with it.

A verdict rests on asy itself, run in the sandbox on the diagram's code (trust `kernel`).
Nothing re-checks a render independently.
So `pass` means asy exited 0 and made the render (render.py).
It ran in safe mode, with pdfTeX under kpathsea's limits and the kit's converters.
The kit took the render from outside the diagram's reach.
A render that the diagram's own code wrote is `fail`.

Before asy runs, the guard refuses, located, the few things containment cannot hold.
The guard is guard.py; it reads asy's tokens from source.py.
It refuses:

- writing settings that choose the programs asy runs, or their options;
- writing a TeX engine beyond pdfTeX, or where modules load from;
- `settings` other than as `settings.NAME`;
- asy's raw evaluator;
- modules by path.

Reading settings, any TeX and any module by name are asy's to decide.
So is `eval`: prooflock.asy checks its text where it runs.
Then asy runs (render.py) under a frozen clock.
It writes only into `out/` below the source.

The sandbox uses fixed names.
So no output byte or message holds a temp path or a user's file name.
The layout:

    artifact/diagram.asy        the artifact; asy -cd artifact -o out/diagram (read-only dir)
    artifact/out/...            what asy, TeX and the converters write, and the diagram's files
    .kit/                       the kit's module, converters and clock probe; the render taken

asy runs once per diagram.
With a reference, SSIM compares the render the record keeps (reference.py).
The keyword F1 and the SSIM come from compare.py.
A second sandbox renders the reference in the same format.
It opens after the artifact's last run; the artifact's sandbox never holds the reference.
Both kept renders are rasterized there when they are PDFs, before the reference runs.
PNGs are rasterized in the kit.

Verdicts (judging.py):

- pass: the guard allowed the source, asy exited 0 and made the render.
- fail: a refusal, a located asy error, a LaTeX error summary, or a missing module.
  Also nothing drawn, or a render the diagram wrote itself.
- timeout and memory.
- crash: asy killed by a signal without saying why.

`Outcome.outputs` names the render (role `render`) by the sha256 of its normalized bytes.
Those bytes come from outputs.py, and Outcome.files carries them.
With a reference, it also names `reference`, `raster-artifact` and `raster-reference`.
"""

from __future__ import annotations

import time
from typing import Literal

from pydantic import Field

from runner.core.models import Outcome, Trust
from runner.provers.asymptote import guard
from runner.provers.asymptote import judging as asy_judging
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
from runner.provers.common.verdicts import refused

# 4: the render is taken where the diagram cannot write; one it wrote is `fail`.
#    The guard refuses only what containment cannot hold.
#    Reading settings, eval, any TeX and any module by name are accepted.
#    Text run as code is checked at run time.
#    Ghostscript never reads init files from out/. SVG comes through pdfTeX.
#    The clock is probed before asy runs. Outputs are typed.
# 5: SSIM compares the render the record keeps: one asy run, the reference in the same format.
#    It never compares a second render the diagram could tell apart.
VERSION = "5"
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
        f"p=$(ASYMPTOTE_DIR={asy_render.EXTRA_MODULE_DIR} asy -noV -c "
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
    refusals = guard.refusals(request.content)
    timings.steps["guard"] = int((time.monotonic() - started) * 1000)
    if refusals:
        outcome = refused(refusals)
    else:
        artifact = asy_render.render(sandboxes.sandbox(), "artifact", request.content, fmt, timeout)
        timings.add("render", artifact.done)
        outcome = asy_judging.artifact_outcome(artifact, fmt, timeout)
    if reference is not None:
        comparison = compare_with_reference(
            sandboxes, request, reference, outcome, fmt, timeout, timings
        )
        outcome.details["comparison"] = comparison.details
        outcome.outputs += comparison.outputs
        outcome.files.update(comparison.files)
    outcome.trust = Trust.KERNEL  # asy's own account; no independent re-check of a render
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
    # asy and what it renders with: dvisvgm and ghostscript for SVG and PDF, LaTeX for labels.
    # The fixed clock comes from faketime.
    # Debian's asymptote-doc holds the gallery the suite renders.
    host_packages=("asymptote", "dvisvgm", "ghostscript", "texlive-latex-base", "faketime"),
    corpus_packages=("asymptote-doc",),
    description="Asymptote .asy diagrams, rendered reproducibly in asy's safe mode",
)
