"""Asymptote adapter: render a `.asy` diagram reproducibly in asy's safe mode, and compare it
with a reference diagram when the request carries one.

Sandbox layout (fixed names, so no output byte or message holds a temp path or a user's file name):

    reference/diagram.asy  compiled first (to PDF), in its own directory
    artifact/diagram.asy   then the artifact, in the requested format, with `asy -cd artifact`.
                           In safe mode asy code may write only into its current directory, so
                           the artifact can touch neither the reference, nor asy's config in
                           ~/.asy, nor TeX's caches, nor anything outside the work dir.
    raster-*.png           both PDFs rendered at one fixed size for SSIM (see asy_compare)

Verdicts: pass (asy exited 0 and wrote the diagram), fail (located asy error, LaTeX error summary,
missing module, nothing drawn), timeout, memory, crash (asy killed by a signal without saying
why). details["outputs"] maps the format to the sha256 of the normalized output bytes.
"""

from __future__ import annotations

import hashlib
import re
import time
from dataclasses import dataclass, field

from runner.backends.base import Completed, Sandbox
from runner.models import CheckRequest, Diagnostic, JsonValue, Outcome, Verdict
from runner.provers import asy_compare, asy_diagnostics, asy_outputs
from runner.provers.base import OptionSpec, defaults, fixed_image

NAME = "asymptote"
VERSION = "2"  # 2: the missing-olympiad message says how the image gets it
IMAGE = "asymptote"
MODES = ("render",)
SUFFIXES = (".asy",)
FORMATS = asy_outputs.FORMATS
CLI_OPTIONS = (
    OptionSpec("--format", "format", "asymptote: output format (default png)", choices=FORMATS,
               default="png"),
    OptionSpec("--reference", "reference", "asymptote: a reference .asy diagram to compare with",
               reads_file=True),
)
split = defaults.split
summary = defaults.summary
environment_options = defaults.environment_options
open_worker = defaults.open_worker
worker_key = defaults.worker_key
image = fixed_image(IMAGE)

STEM = "diagram"
SOURCE = f"{STEM}.asy"
ASY = (
    "asy", "-safe", "-noglobalwrite", "-noglobalread", "-noV", "-q",
    "-render", "0",  # 3D as vectors: no OpenGL, same pixels on every machine
    "-gsOptions", "-dOmitInfoDate -dOmitID -dOmitXMP",  # ghostscript's PDF stamps
)
DEAD_PROXY = "http://127.0.0.1:9"  # the discard port: asy's libcurl (`import "https://..."`) fails
PROXY_VARIABLES = ("http_proxy", "https_proxy", "ftp_proxy", "all_proxy")
RUN_ENV = {
    "SOURCE_DATE_EPOCH": asy_outputs.SOURCE_DATE_EPOCH,
    "FORCE_SOURCE_DATE": "1",  # pdfTeX: dates and /ID from SOURCE_DATE_EPOCH
    "ASYMPTOTE_DIR": asy_diagnostics.EXTRA_MODULE_DIR,
    "shell_escape": "f",  # kpathsea: no \write18 from a label
    "openout_any": "p",  # TeX writes nowhere but below its directory
    "openin_any": "p",
    "TEXMFVAR": "~/.texmf-var",  # TeX's caches and generated fonts: under HOME, the work dir
    "VARTEXFONTS": "~/.texfonts",  # (Debian's default is /tmp/texfonts)
    **{name: DEAD_PROXY for lower in PROXY_VARIABLES for name in (lower, lower.upper())},
    "no_proxy": "",
    "NO_PROXY": "",
}
# ghostscript's pdfwrite needs a temp dir; the root (and /tmp) may be read-only: use one in HOME.
WITH_WORK_TMPDIR = ("sh", "-c", 'mkdir -p "$HOME/.tmp" && TMPDIR="$HOME/.tmp" exec "$@"', "sh")
# Settings asy guards itself ("modifying non-public field"); refused here too, before asy runs.
SANDBOX_SETTINGS = ("safe", "globalwrite", "globalread")
SETTING_ASSIGNED = re.compile(rf"\bsettings\s*\.\s*({'|'.join(SANDBOX_SETTINGS)})\s*=(?!=)")
SETTINGS_OPENED = re.compile(r"\b(?:import|access|unravel)\s+settings\b|\bfrom\s+settings\b")
BARE_SETTING_ASSIGNED = re.compile(rf"(?<![.\w])({'|'.join(SANDBOX_SETTINGS)})\s*=(?!=)")


def probe(image: str) -> dict[str, list[str]]:
    packages = (
        "dpkg-query -W -f '${db:Status-Abbrev} ${Package}=${Version}\\n' asymptote dvisvgm "
        "ghostscript libgs10 libkpathsea6 tex-common 'texlive-*' lmodern fonts-lmodern "
        "2>/dev/null | sed -n 's/^ii  *//p'"
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


@dataclass
class Render:
    """One asy run: what it said, and the normalized output bytes when it wrote a valid file."""

    done: Completed
    diagnostics: list[Diagnostic]
    data: bytes | None = None
    missing: str | None = None  # why there is no output although asy exited 0


@dataclass
class Timings:
    """Wall time per step, for provenance (never hashed)."""

    steps: dict[str, int] = field(default_factory=dict)
    cpu_ms: int = 0

    def add(self, step: str, done: Completed) -> None:
        self.steps[step] = self.steps.get(step, 0) + done.wall_ms
        self.cpu_ms += done.cpu_ms or 0


def check(request: CheckRequest, sandbox: Sandbox) -> Outcome:
    fmt = request_format(request)
    reference = request_reference(request)
    timeout = float(request.timeout or 60)
    timings = Timings()
    reference_render = None
    if reference is not None:  # first, so nothing the artifact writes can exist yet
        reference_render = render(sandbox, "reference", reference[1], "pdf", timeout)
        timings.add("reference", reference_render.done)
    refused = safe_mode_tampering(request.content)
    if refused is not None:
        outcome = Outcome(verdict=Verdict.FAIL, diagnostics=[refused], details={"outputs": {}})
    else:
        artifact = render(sandbox, "artifact", request.content, fmt, timeout)
        timings.add("render", artifact.done)
        outcome = artifact_outcome(artifact, fmt, timeout)
    if reference is not None and reference_render is not None:  # (the second test: for mypy)
        outcome.details["comparison"] = compare(
            sandbox, request, reference, reference_render, outcome, fmt, timeout, timings
        )
    outcome.cpu_ms = timings.cpu_ms
    outcome.worker = {"timings_ms": dict(timings.steps)}
    return outcome


def request_format(request: CheckRequest) -> str:
    fmt = request.options.get("format") or "png"
    if fmt not in FORMATS:
        raise ValueError(f"asymptote: unknown format {fmt!r} (formats: {', '.join(FORMATS)})")
    return fmt


def request_reference(request: CheckRequest) -> tuple[str, str] | None:
    """(name, content) of the reference diagram, from the core's `{"name", "content"}` option."""
    reference = request.options.get("reference")
    if reference is None:
        return None
    if not isinstance(reference, dict) or not isinstance(reference.get("content"), str):
        raise ValueError('asymptote: option "reference" must be {"name": ..., "content": ...}')
    return str(reference.get("name") or "reference.asy"), reference["content"]


def safe_mode_tampering(source: str) -> Diagnostic | None:
    """A refusal when the artifact assigns to a setting that guards the sandbox."""
    code = asy_compare.code_only(source)
    found = SETTING_ASSIGNED.search(code)
    if found is None and SETTINGS_OPENED.search(code):
        found = BARE_SETTING_ASSIGNED.search(code)
    if found is None:
        return None
    line = code.count("\n", 0, found.start()) + 1
    column = found.start() - (code.rfind("\n", 0, found.start()) + 1) + 1
    setting = found[1]
    return Diagnostic(
        message=f"refused: the artifact sets asy's `{setting}`, a setting that guards the sandbox",
        line=line,
        column=column,
        context=source.splitlines()[line - 1].strip(),
    )


def render(sandbox: Sandbox, directory: str, source: str, fmt: str, timeout: float) -> Render:
    """Compile `directory/diagram.asy` to `directory/diagram.<fmt>`, asy's cwd being `directory`."""
    sandbox.write_file(f"{directory}/{SOURCE}", source.encode())
    done = sandbox.run(
        [*WITH_WORK_TMPDIR, *ASY, "-cd", directory, "-f", fmt, "-o", STEM, SOURCE],
        timeout_s=timeout,
        env=RUN_ENV,
    )
    result = Render(done=done, diagnostics=asy_diagnostics.parse(done.text, source, SOURCE))
    if done.ok:
        output = f"{STEM}.{fmt}"
        try:
            data = sandbox.read_file(f"{directory}/{output}")
        except FileNotFoundError:
            result.missing = (
                f"asy wrote no {output}: the diagram draws nothing "
                "(or the artifact changed settings.outformat or settings.outname)"
            )
            return result
        if not asy_outputs.looks_like(fmt, data):
            result.missing = f"{output} is not a {fmt.upper()} file (the artifact wrote it itself?)"
            return result
        result.data = asy_outputs.normalize(fmt, data)
        if result.data != data:
            sandbox.write_file(f"{directory}/{output}", result.data)
    return result


def artifact_outcome(artifact: Render, fmt: str, timeout: float) -> Outcome:
    done, diagnostics = artifact.done, list(artifact.diagnostics)
    details: dict[str, JsonValue] = {"outputs": {}}
    if done.timed_out:
        diagnostics.append(Diagnostic(message=f"asy did not finish within {timeout:g} s"))
        return Outcome(verdict=Verdict.TIMEOUT, diagnostics=diagnostics, details=details)
    if done.out_of_memory:
        return Outcome(verdict=Verdict.MEMORY, diagnostics=diagnostics, details=details)
    if artifact.data is not None:
        details["outputs"] = {fmt: hashlib.sha256(artifact.data).hexdigest()}
        return Outcome(verdict=Verdict.PASS, diagnostics=diagnostics, details=details)
    if artifact.missing is not None:
        diagnostics.append(Diagnostic(message=artifact.missing))
        return Outcome(verdict=Verdict.FAIL, diagnostics=diagnostics, details=details)
    said_why = any(d.severity == "error" for d in diagnostics)
    if done.signal is not None and not said_why:
        diagnostics.append(Diagnostic(message=f"asy died (signal {done.signal})"))
        return Outcome(verdict=Verdict.CRASH, diagnostics=diagnostics, details=details)
    if not said_why:
        diagnostics.append(Diagnostic(message=f"asy exited {done.exit_code}"))
    return Outcome(verdict=Verdict.FAIL, diagnostics=diagnostics, details=details)


def compare(
    sandbox: Sandbox,
    request: CheckRequest,
    reference: tuple[str, str],
    reference_render: Render,
    outcome: Outcome,
    fmt: str,
    timeout: float,
    timings: Timings,
) -> dict[str, JsonValue]:
    """Compile success of both, keyword F1 of the sources, SSIM of the renders (see asy_compare)."""
    name, reference_source = reference
    artifact_compiles = outcome.verdict is Verdict.PASS
    reference_compiles = reference_render.data is not None
    comparison: dict[str, JsonValue] = {
        "reference": name,
        "artifact_compiles": artifact_compiles,
        "reference_compiles": reference_compiles,
        "keyword_f1": asy_compare.keyword_f1(request.content, reference_source),
        "ssim": None,
    }
    if not reference_compiles:
        comparison["reference_error"] = _first_problem(reference_render)
    if not (artifact_compiles and reference_compiles):
        return comparison
    pdf_directory = "artifact"
    if fmt != "pdf":  # SSIM compares PDF rasters; a fresh directory, untouched by the first run
        pdf_directory = "artifact-pdf"
        again = render(sandbox, pdf_directory, request.content, "pdf", timeout)
        timings.add("render_pdf", again.done)
        if again.data is None:
            comparison["ssim_error"] = (
                f"the artifact did not render to PDF: {_first_problem(again)}"
            )
            return comparison
    rasters = []
    for side, directory in (("artifact", pdf_directory), ("reference", "reference")):
        raster = f"raster-{side}.png"
        done = sandbox.run(
            [*WITH_WORK_TMPDIR, "gs", *asy_compare.RASTER_ARGS, f"-sOutputFile={raster}",
             f"{directory}/{STEM}.pdf"],
            timeout_s=timeout,
        )
        timings.add("raster", done)
        if not done.ok:
            comparison["ssim_error"] = (
                f"ghostscript could not rasterize the {side} PDF (exit {done.exit_code})"
            )
            return comparison
        rasters.append(sandbox.read_file(raster))
    started = time.monotonic()
    comparison["ssim"] = asy_compare.ssim(rasters[0], rasters[1])
    timings.steps["ssim"] = int((time.monotonic() - started) * 1000)
    return comparison


def _first_problem(failed: Render) -> str:
    if failed.done.timed_out:
        return "timed out"
    for diagnostic in failed.diagnostics:
        if diagnostic.severity == "error":
            where = (
                f"{diagnostic.line}.{diagnostic.column}: " if diagnostic.line is not None else ""
            )
            return where + diagnostic.message
    return failed.missing or f"asy exited {failed.done.exit_code}"
