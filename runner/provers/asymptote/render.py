"""One asy run in a sandbox: the render, taken from where the diagram cannot write.

The layout uses fixed names.
So no output byte or message holds a temp path or a user's file name.
The source is `<dir>/diagram.asy`, compiled by `asy -cd <dir> -o out/diagram`.
In safe mode, with -noglobalwrite, asy writes only into its output name's directory.
The `outname` setting is one that asy itself guards.
So `output()` and `shipout()` write into `<dir>/out/`.
Ghostscript, dvisvgm and TeX write there too.
The kit's asy starts TeX with -output-directory=out.
The web2c library puts that directory before every relative `\\openout`.
Its openout_any=p refuses `..`, absolute and dot names.
`<dir>` holds the source alone and is read-only while asy runs.
That matters because asy imports modules from there first.

The render is not `out/diagram.<fmt>`.
The diagram's own code can write that file at any time (`output()`, TeX's `\\openout`).
It can do so before or after asy's shipout.
The programs that write asy's output are gs, dvisvgm and pdfTeX.
They are reached through the kit's converters.sh.
It keeps a copy of each render as the program wrote it, in `~/.kit/renders/`.
That is outside everything the diagram can write.
The kit takes that copy.
An `out/diagram.<fmt>` that differs from it, or exists without it, is the diagram's.
The verdict is then `fail`, saying so.

Fixed clock: asy and all it starts run under libfaketime, frozen at SOURCE_DATE_EPOCH.
The monotonic clock is frozen too.
CPU time reads as zero through prooflock.asy.
So `seconds()`, `time()` and `srand(seconds())` give the same value on every run.
So do TeX's `\\time` and `\\pdfrandomseed`, and ghostscript's `realtime`.
Before asy starts, the run probes that clock with `date` into `~/.kit/clock`.
A clock that is not frozen is the machine's failure (libfaketime missing).
The kit reads it from that file, never from what the run printed.

Engines: only pdfTeX runs; guard.py refuses any other `settings.tex`.
As a second line, `false` shadows LuaTeX, XeTeX and ConTeXt on PATH.
The image has none of them at all.
SVG is made from pdfTeX's PDF (`-tex pdflatex`).
Through DVI, dvisvgm would run a DVI file's PostScript specials unconfined.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from importlib import resources

from runner.backends.base import Completed, Sandbox
from runner.core.errors import InfraFailure
from runner.provers.asymptote import outputs as asy_outputs

STEM = "diagram"
SOURCE = f"{STEM}.asy"
OUT = "out"  # below the source's directory: where asy, TeX and the converters write
KIT = ".kit"  # in the work dir, beside the sources: the kit's files, out of the diagram's reach
KIT_MODULE = "prooflock"  # prooflock.asy, imported before the diagram (-autoimport)
CONVERTERS = ("gs", "dvisvgm", "pdflatex", "pdftex")  # run through converters.sh
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
    "-autoimport",
    KIT_MODULE,
)
ENGINE_FOR = {"svg": ("-tex", "pdflatex")}  # SVG through PDF, never dvisvgm on a DVI file
FAKETIME_LIBRARY = "/usr/$LIB/faketime/libfaketime.so.1"  # ld.so expands $LIB (multiarch dir)
# frozen (no `@`): the clock does not advance while asy runs
FIXED_CLOCK_ENV = {"LD_PRELOAD": FAKETIME_LIBRARY, "FAKETIME": asy_outputs.FIXED_TIME}
FIXED_CLOCK = tuple(f"{name}={value}" for name, value in FIXED_CLOCK_ENV.items())  # env's argv
# shadowed on PATH (a shell word list): LuaTeX, XeTeX and ConTeXt in all their names
REFUSED_ENGINES = (
    "luatex lualatex luahbtex luajittex luajithbtex dviluatex dvilualatex texlua texluac "
    "xetex xelatex context mtxrun"
)
# Where a kit-pinned module such as olympiad.asy is looked for (besides asy's own directory).
EXTRA_MODULE_DIR = "/usr/local/share/asymptote"
FILE_LIMIT_MB = 128  # per file asy, TeX or a converter writes (a diagram needs a few MB)
# $1: the source's directory, $2: the format. Makes out/ and a temp dir in HOME (the root and
# /tmp may be read-only), the PATH directory of the converters and shadowed engines, probes the
# frozen clock (before any code of the diagram runs), caps file sizes (sh counts 512-byte
# blocks; a larger file ends the writer with SIGXFSZ), then runs asy with the kit's module and
# converters first in line.
CLOCK_PROBE = " ".join(f"{name}={shlex.quote(value)}" for name, value in FIXED_CLOCK_ENV.items())
PREPARE = "; ".join(
    (
        f"ulimit -f {FILE_LIMIT_MB * 2048}",
        f'dir=$1 fmt=$2; shift 2; kit="$HOME/{KIT}"',
        'mkdir -p "$HOME/.tmp" "$dir/out" "$kit/renders" && chmod a-w "$dir" '
        '&& chmod 755 "$kit/converters.sh" || exit 125',
        'if [ ! -d "$kit/bin" ]; then mkdir "$kit/bin" '
        f'&& for e in {REFUSED_ENGINES}; do ln -s /bin/false "$kit/bin/$e"; done '
        f'&& for c in {" ".join(CONVERTERS)}; do ln -s ../converters.sh "$kit/bin/$c"; done '
        "|| exit 125; fi",
        f'{CLOCK_PROBE} date -u +%s > "$kit/clock" 2>/dev/null',
        'PROOFLOCK_RENDER="$(cd "$dir/out" && pwd -P)/diagram.$fmt"',
        'PROOFLOCK_KEEP="$kit/renders/$dir.$fmt" PROOFLOCK_PATH="$PATH"',
        'export PROOFLOCK_RENDER PROOFLOCK_KEEP PROOFLOCK_PATH; rm -f "$PROOFLOCK_KEEP"',
        'PATH="$kit/bin:$PATH" TMPDIR="$HOME/.tmp" ASYMPTOTE_DIR="$kit/asy:$ASYMPTOTE_DIR" '
        'exec env "$@"',
    )
)
DEAD_PROXY = "http://127.0.0.1:9"  # the discard port: asy's libcurl (`import "https://..."`) fails
PROXY_VARIABLES = ("http_proxy", "https_proxy", "ftp_proxy", "all_proxy")
RUN_ENV = {
    "TZ": "UTC",  # libfaketime reads FIXED_TIME as local time
    "SOURCE_DATE_EPOCH": asy_outputs.SOURCE_DATE_EPOCH,
    "FORCE_SOURCE_DATE": "1",  # pdfTeX: dates and /ID from SOURCE_DATE_EPOCH
    "ASYMPTOTE_DIR": EXTRA_MODULE_DIR,
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
    """One asy run: what it said, and the normalized render when asy made a valid one."""

    done: Completed
    source: str  # the diagram's code: judging.diagnostics_of places asy's messages in it
    data: bytes | None = None
    started: bool = True  # asy ran (the check's time did not run out before it)
    missing: str | None = None  # why there is no render although asy exited 0


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


def kept_path(directory: str, fmt: str) -> str:
    return f"{KIT}/renders/{directory}.{fmt}"


def install_kit(sandbox: Sandbox) -> None:
    """The kit's module and converters, written before any code of a diagram runs."""
    kit = resources.files(__package__).joinpath("sandbox")
    sandbox.write_file(f"{KIT}/converters.sh", kit.joinpath("converters.sh").read_bytes())
    module = kit.joinpath(f"{KIT_MODULE}.asy").read_bytes()
    sandbox.write_file(f"{KIT}/asy/{KIT_MODULE}.asy", module)


def render(sandbox: Sandbox, directory: str, source: str, fmt: str, timeout: float) -> Render:
    """Compile `directory/diagram.asy` to a render in format `fmt`, in `directory`.

    The source must have passed guard.refusals: this runs it.
    """
    install_kit(sandbox)
    # (a str from the Python API may hold lone surrogates: bytes for asy, never an exception)
    sandbox.write_file(f"{directory}/{SOURCE}", source.encode(errors="surrogatepass"))
    argv = ["sh", "-c", PREPARE, "sh", directory, fmt, *FIXED_CLOCK, *ASY, *ENGINE_FOR.get(fmt, ())]
    argv += ["-cd", directory, "-f", fmt, "-o", f"{OUT}/{STEM}", SOURCE]
    done = sandbox.run(argv, timeout_s=timeout, env=RUN_ENV)
    started = _require_fixed_clock(sandbox, done)
    result = Render(done=done, source=source)
    result.started = started
    if done.ok:
        result.data, result.missing = _taken(sandbox, directory, fmt)
    return result


def _require_fixed_clock(sandbox: Sandbox, done: Completed) -> bool:
    """Whether the probe that PREPARE runs before asy found the clock frozen.

    A probe that did not run, or found the clock moving, is the machine's failure.
    It is never the diagram's, unless the check's time ran out first.
    The kit's reading of a large file counts against that time.
    That case is a timeout, which artifact_outcome reports.
    """
    try:
        said = sandbox.read_file(f"{KIT}/clock").decode(errors="replace").strip()
    except FileNotFoundError:
        if done.timed_out:
            return False
        how = f"exit {done.exit_code}"
        lines = done.stderr.decode(errors="replace").strip().splitlines()
        raise InfraFailure(
            f"the sandbox never reached asy's clock probe ({how}"
            + (f": {lines[0][:200]})" if lines else ")")
        ) from None
    if said != asy_outputs.SOURCE_DATE_EPOCH:
        raise InfraFailure(
            "asy must run under a fixed clock, and libfaketime is not installed here "
            "(Debian: apt-get install faketime); the asymptote image has it"
        )
    return True


def _taken(sandbox: Sandbox, directory: str, fmt: str) -> tuple[bytes | None, str | None]:
    """(the normalized render, None) or (None, why there is none)."""
    name = f"{OUT}/{STEM}.{fmt}"
    kept = _read(sandbox, kept_path(directory, fmt))
    written = _read(sandbox, output_path(directory, fmt))
    how = "asy's output() or TeX's \\openout"
    if kept is None and written is None:
        return None, f"asy wrote no {STEM}.{fmt}: the diagram draws nothing"
    if kept is None:
        return None, (
            f"{name} was written by the diagram itself ({how}), not by asy's shipout: "
            "a render must be asy's"
        )
    if written is None:
        return None, f"the diagram removed its render {name} after asy wrote it"
    if written != kept:
        return None, (
            f"the diagram wrote a second file over its render {name} after asy wrote it "
            f"({how}): a render must be asy's"
        )
    if not asy_outputs.looks_like(fmt, kept):
        return None, f"{name} is not a {fmt.upper()} file"
    return asy_outputs.normalize(fmt, kept), None


def _read(sandbox: Sandbox, relpath: str) -> bytes | None:
    try:
        return sandbox.read_file(relpath)
    except FileNotFoundError:
        return None
