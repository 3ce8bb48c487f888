"""One asy run in a sandbox: reproducible output bytes, located diagnostics, the verdict.

Layout, with fixed names so that no output byte or message holds a temp path or a user's file name:
the source is `<dir>/diagram.asy`, compiled by `asy -cd <dir> -o out/diagram`. In safe mode, with
-noglobalwrite, asy writes only into the directory of its output name (`outname` is a setting
asy itself guards), so `output()` and `shipout()` write into `<dir>/out/`; so do ghostscript,
dvisvgm and TeX (asy starts it with -output-directory=out, which web2c puts before every relative
`\\openout`, and openout_any=p refuses `..` and absolute names). asy imports modules at run time,
searching `<dir>` first, and `<dir>` holds the checked source alone for the whole run: no file
the artifact has written can be imported back as unchecked code.

Fixed clock: asy and everything it starts run under libfaketime frozen at SOURCE_DATE_EPOCH (also
the CPU-time and monotonic clocks), so `seconds()`, `time()`, `srand(seconds())`, TeX's `\\time`
and `\\pdfrandomseed`, and ghostscript's `realtime` give the same value on every run. The preload
is set on asy alone, never on the sandbox's own `timeout`.

Engines: only pdfTeX runs (`latex`, `pdflatex`; guard.py refuses other settings); as a second
line, LuaTeX, XeTeX and ConTeXt are shadowed on PATH by `false` (the image has none at all).
"""

from __future__ import annotations

import hashlib
import signal
from dataclasses import dataclass, field

from runner.backends.base import Completed, Sandbox
from runner.core.errors import InfraFailure
from runner.core.models import Diagnostic, JsonValue, Outcome, Verdict
from runner.provers.asymptote import diagnostics as asy_diagnostics
from runner.provers.asymptote import outputs as asy_outputs

STEM = "diagram"
SOURCE = f"{STEM}.asy"
OUT = "out"  # below the source's directory: where asy, TeX and the converters write
ASY = (
    "asy",
    "-safe",
    "-noglobalwrite",
    "-noglobalread",
    "-noV",
    "-q",
    # TeX's own messages from its first run: quiet, asy re-runs a failed TeX to show them, and
    # that re-run drops -output-directory (asy 2.85's opentex replaces argv[1]) and finds nothing.
    "-vv",
    "-render",
    "0",  # 3D as vectors: no OpenGL, same pixels on every machine
    "-gsOptions",
    "-dOmitInfoDate -dOmitID -dOmitXMP",  # ghostscript's PDF stamps
)
FAKETIME_LIBRARY = "/usr/$LIB/faketime/libfaketime.so.1"  # ld.so expands $LIB (multiarch dir)
FIXED_CLOCK = (  # frozen (no `@`): the clock does not advance while asy runs
    "env",
    f"LD_PRELOAD={FAKETIME_LIBRARY}",
    f"FAKETIME={asy_outputs.FIXED_TIME}",
)
NO_FAKETIME = "from LD_PRELOAD cannot be preloaded"  # ld.so's warning, on every child's stderr
# shadowed on PATH (a shell word list): LuaTeX, XeTeX and ConTeXt in all their names
REFUSED_ENGINES = (
    "luatex lualatex luahbtex luajittex luajithbtex dviluatex dvilualatex texlua texluac "
    "xetex xelatex context mtxrun"
)
FILE_LIMIT_MB = 128  # per file asy, TeX or a converter writes (a diagram needs a few MB)
# $1: the source's directory. Makes out/, a temp dir in HOME (the root and /tmp may be read-only)
# and, once per sandbox, the PATH directory that shadows the refused engines; caps file sizes
# (sh counts 512-byte blocks; a larger file ends the writer with SIGXFSZ).
PREPARE = (
    f"ulimit -f {FILE_LIMIT_MB * 2048}; "
    'dir=$1; shift; mkdir -p "$HOME/.tmp" "$dir/out" || exit 125; '
    'if [ ! -d "$HOME/.engines" ]; then mkdir -p "$HOME/.engines" && '
    f'for e in {REFUSED_ENGINES}; do ln -s /bin/false "$HOME/.engines/$e"; done; fi; '
    'PATH="$HOME/.engines:$PATH" TMPDIR="$HOME/.tmp" exec "$@"'
)
DEAD_PROXY = "http://127.0.0.1:9"  # the discard port: asy's libcurl (`import "https://..."`) fails
PROXY_VARIABLES = ("http_proxy", "https_proxy", "ftp_proxy", "all_proxy")
RUN_ENV = {
    "TZ": "UTC",  # libfaketime reads FIXED_TIME as local time
    "SOURCE_DATE_EPOCH": asy_outputs.SOURCE_DATE_EPOCH,
    "FORCE_SOURCE_DATE": "1",  # pdfTeX: dates and /ID from SOURCE_DATE_EPOCH
    "ASYMPTOTE_DIR": asy_diagnostics.EXTRA_MODULE_DIR,
    "shell_escape": "f",  # kpathsea: no \write18 from a label (checked in the tests, both backends)
    "openout_any": "p",  # TeX writes nowhere but below its directory (out/)
    "openin_any": "p",  # and reads no absolute or `..` path
    "TEXMFVAR": "~/.texmf-var",  # TeX's caches and generated fonts: under HOME, the work dir
    "VARTEXFONTS": "~/.texfonts",  # (Debian's default is /tmp/texfonts)
    **{name: DEAD_PROXY for lower in PROXY_VARIABLES for name in (lower, lower.upper())},
    "no_proxy": "",
    "NO_PROXY": "",
}
# ghostscript's pdfwrite needs a temp dir; the root (and /tmp) may be read-only: use one in HOME.
WITH_WORK_TMPDIR = ("sh", "-c", 'mkdir -p "$HOME/.tmp" && TMPDIR="$HOME/.tmp" exec "$@"', "sh")


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


def output_path(directory: str, fmt: str) -> str:
    return f"{directory}/{OUT}/{STEM}.{fmt}"


def render(sandbox: Sandbox, directory: str, source: str, fmt: str, timeout: float) -> Render:
    """Compile `directory/diagram.asy` to `directory/out/diagram.<fmt>` (asy's cwd: `directory`).

    The source must have passed guard.refusals: this runs it.
    """
    sandbox.write_file(f"{directory}/{SOURCE}", source.encode())
    argv = ["sh", "-c", PREPARE, "sh", directory, *FIXED_CLOCK, *ASY]
    argv += ["-cd", directory, "-f", fmt, "-o", f"{OUT}/{STEM}", SOURCE]
    done = sandbox.run(argv, timeout_s=timeout, env=RUN_ENV)
    if NO_FAKETIME in done.text:
        raise InfraFailure(
            "asy must run under a fixed clock, and libfaketime is not installed here "
            "(Debian: apt-get install faketime); the asymptote image has it"
        )
    result = Render(done=done, diagnostics=asy_diagnostics.parse(done.text, source, SOURCE))
    if done.ok:
        output = f"{STEM}.{fmt}"
        try:
            data = sandbox.read_file(output_path(directory, fmt))
        except FileNotFoundError:
            result.missing = f"asy wrote no {output}: the diagram draws nothing"
            return result
        if not asy_outputs.looks_like(fmt, data):
            result.missing = f"{output} is not a {fmt.upper()} file (the artifact wrote it itself?)"
            return result
        result.data = asy_outputs.normalize(fmt, data)
        if result.data != data:
            sandbox.write_file(output_path(directory, fmt), result.data)
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
        sha = hashlib.sha256(artifact.data).hexdigest()
        details["outputs"] = {fmt: sha}
        return Outcome(
            verdict=Verdict.PASS,
            diagnostics=diagnostics,
            details=details,
            files={sha: artifact.data},
        )
    if artifact.missing is not None:
        diagnostics.append(Diagnostic(message=artifact.missing))
        return Outcome(verdict=Verdict.FAIL, diagnostics=diagnostics, details=details)
    said_why = any(d.severity == "error" for d in diagnostics)
    if done.signal == signal.SIGXFSZ:
        diagnostics.append(
            Diagnostic(message=f"the render wrote a file larger than {FILE_LIMIT_MB} MiB")
        )
        return Outcome(verdict=Verdict.FAIL, diagnostics=diagnostics, details=details)
    if done.signal is not None and not said_why:
        diagnostics.append(Diagnostic(message=f"asy died (signal {done.signal})"))
        return Outcome(verdict=Verdict.CRASH, diagnostics=diagnostics, details=details)
    if not said_why:
        diagnostics.append(Diagnostic(message=f"asy exited {done.exit_code}"))
    return Outcome(verdict=Verdict.FAIL, diagnostics=diagnostics, details=details)
