"""Cheats an adversary writes into an Asymptote diagram, and what the kit answers, on both backends.

Five classes, each with its own cheats (written for this round, not taken from a held-back set):

- a render the diagram makes itself: it writes `out/diagram.<fmt>` with asy's `output()` or
  TeX's `\\openout`, after (or instead of) asy's shipout, or deletes asy's. The kit takes the
  render from where no code of the diagram can write; such a diagram is `fail`, saying so.
- a program, its options, or a shell: ghostscript's init file planted where asy runs it, a
  DVI PostScript special that dvisvgm would run unconfined, settings that name programs,
  written directly or through text run as code (eval, type, mapArray), modules by path or
  `plain`'s raw evaluator. Refused (by the guard, or where the text runs) or held by SAFER;
  no shell ever runs.
- text that would decide infra: a diagram that prints what the kit once read as "libfaketime
  is missing", or the kit's own message prefix, gets the verdict its run earns, never
  `infra_error`.
- escapes the sandbox, asy's safe mode and pdfTeX hold without any refusal: reading the
  reference, writing /tmp or `..`, TeX's shell and absolute paths, huge files, loops.
- a comparison the diagram steers: it draws the reference only where it can tell that it is
  not the render the record keeps (another format, another file name). asy runs once, and the
  similarity is of the kept render: that of the square it drew.

After every cheat nothing named after it exists outside a render's `out/` directory: not on the
host (/tmp, /var/tmp, /dev/shm, $HOME, the current directory), not elsewhere in the sandbox (its
work dir; on docker also the container's /tmp and /dev/shm). And nothing of the check is left on
the host (HostWatch): no new file under /tmp, /var/tmp or $HOME named after the cheat or holding
its name, no sandbox directory, no process (none of the test's children, none naming the cheat),
no container. Other tests write to /tmp meanwhile, so a new file counts when it is the check's:
named after the cheat, holding its name, or inside one of its sandboxes. The docker cases run
when the asymptote image is at its locked ID here, and say why they skip otherwise.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import pytest

from runner.backends.base import Backend, Sandbox
from runner.backends.local import LocalBackend
from runner.core.models import CheckRequest, Limits, Outcome, Verdict
from runner.core.settings import Settings
from runner.provers import asymptote
from runner.provers.asymptote import compare as asy_compare
from runner.provers.asymptote import judging as asy_judging
from runner.provers.asymptote import render as asy_render
from tests.helpers import resolved
from tests.support.docker_daemon import docker_skip_reason

pytestmark = pytest.mark.slow

REFERENCE = 'size(4cm);\nfill(unitcircle, red);\nlabel("$\\Omega$", (0, 0), white);\n'
BACKSLASH = 'string b = substr("\\\\", 0, 1);  // one backslash, made at run time\n'
MARK = "MARK"  # replaced by a name unique to the test: prooflock-cheat-<hex>
FORGED_PNG = "'\\x89PNG\\r\\n\\x1A\\n' + \"forged\""  # asy: a PNG signature, then junk
SHIPPED = "draw((0,0)--(1,1));\nshipout(outprefix());\nerase();  // no shipout at exit\n"
BACKENDS = [
    pytest.param("local", id="local"),
    pytest.param("docker", id="docker", marks=pytest.mark.docker),
]


RUN_A_SHELL = "RUN_A_SHELL"  # replaced by PostScript that would start a shell touching MARK


def shell(mark: str) -> str:
    """A PostScript hex string of `%pipe%touch ...`: a shell, were ghostscript not SAFER."""
    return "<" + f"%pipe%touch $HOME/{mark} /tmp/{mark} /var/tmp/{mark}".encode().hex() + ">"


@dataclass(frozen=True)
class Cheat:
    source: str
    verdict: Verdict
    says: str = ""  # in some diagnostic's message
    fmt: str = "png"
    reference: bool = False  # checked against REFERENCE, which it tries to read
    timeout: int = 30
    refused: bool = False  # by the guard, before asy runs


def refused(source: str, says: str, fmt: str = "png") -> Cheat:
    return Cheat(source, Verdict.FAIL, says, fmt, refused=True)


# -- a render the diagram makes itself ---------------------------------------------------------

FORGED_RENDERS = {
    "output_over_the_render_after_shipout": Cheat(
        SHIPPED + f'file f = output("diagram.png", mode="binary");\nwrite(f, {FORGED_PNG});',
        Verdict.FAIL,
        "the diagram wrote a second file over its render out/diagram.png",
    ),
    "output_under_the_name_asy_was_given": Cheat(  # reads it: settings.outname is no secret
        "string name = stripdirectory(settings.outname) + '.png';\n"
        f'file f = output(name, mode="binary");\nwrite(f, {FORGED_PNG});',
        Verdict.FAIL,
        "out/diagram.png was written by the diagram itself",
    ),
    "tex_openout_over_the_render": Cheat(
        SHIPPED
        + BACKSLASH
        + 'label(b + "immediate" + b + "openout9=diagram.png" + b + "immediate" + b'
        ' + "write9{forged}" + b + "immediate" + b + "closeout9 x", (0, 0));\n'
        'shipout("later");\nerase();',
        Verdict.FAIL,
        "the diagram wrote a second file over its render",
    ),
    "deletes_its_render": Cheat(
        SHIPPED + 'delete(outprefix() + ".png");',
        Verdict.FAIL,
        "the diagram removed its render out/diagram.png",
    ),
    "pdf_over_pdftex_output": Cheat(
        'settings.tex = "pdflatex";\n'
        + SHIPPED
        + 'file f = output("diagram.pdf");\nwrite(f, "%PDF-1.4 forged");',
        Verdict.FAIL,
        "over its render out/diagram.pdf",
        fmt="pdf",
    ),
    "svg_over_dvisvgm_output": Cheat(
        SHIPPED + 'file f = output("diagram.svg");\nwrite(f, "<svg>forged</svg>");',
        Verdict.FAIL,
        "over its render out/diagram.svg",
        fmt="svg",
    ),
    "forged_before_shipout_is_overwritten_by_asy": Cheat(
        f'file f = output("diagram.png", mode="binary");\nwrite(f, {FORGED_PNG});\nclose(f);\n'
        "draw((0,0)--(1,1));",
        Verdict.PASS,  # asy's shipout writes over it: the render is asy's
    ),
}

# -- a program, its options, a shell ------------------------------------------------------------

SHELLS = {
    "ghostscript_init_file_in_out": Cheat(  # asy runs `gs -P` in out/: gs_init.ps would run first
        f'file f = output("gs_init.ps");\nwrite(f, "10000");\nwrite(f, "{RUN_A_SHELL} (w) file");'
        "\nclose(f);\ndraw((0,0)--(1,1));",
        Verdict.PASS,
    ),
    "dvi_postscript_special_for_svg": Cheat(  # dvisvgm would run it outside SAFER
        'settings.tex = "latex";\n'
        f'label("\\special{{ps:{RUN_A_SHELL} (w) file closefile}}x", (0, 0));',
        Verdict.FAIL,
        "refused: SVG from a DVI file",
        fmt="svg",
    ),
    "postscript_special_for_png": Cheat(  # dvips keeps it; ghostscript runs it SAFER
        f'label("\\special{{ps:{RUN_A_SHELL} (w) file closefile}}x", (0, 0));', Verdict.PASS
    ),
    "raw_postscript_in_the_picture": Cheat(
        f'draw((0,0)--(1,1));\npostscript(currentpicture, "{RUN_A_SHELL} (w) file closefile");',
        Verdict.FAIL,
        "shipout failed",
    ),
    "ghostscript_options": refused(
        'settings.gsOptions = "-dNOSAFER -sOutputFile=x -c (...) -f";', "`settings.gsOptions`"
    ),
    "ghostscript_itself": refused('settings.gs = "/bin/sh";', "`settings.gs` names a program"),
    "dvisvgm_options": refused("settings.dvisvgmOptions += ' --libgs=/tmp/MARK';", "dvisvgm"),
    "tex_engine_by_path": refused(
        'settings.tex = "/usr/bin/luatex";\nlabel("\\directlua{os.execute(\'touch MARK\')}x");',
        "asy runs the value as the TeX program",
    ),
    "tex_engine_by_name": refused('settings.tex = "lualatex";', "`settings.tex`"),
    "text_usersetting_runs": refused(
        'settings.user = "settings.gs=\\"/bin/sh\\";";\nusersetting();', "`settings.user`"
    ),
    "module_search_path": refused('settings.sysdir = "out";\nimport evil;', "`settings.sysdir`"),
    "settings_alias": refused('var s = settings;\ns.gs = "/bin/sh";', "an alias"),
    "eval_writes_a_program_setting": Cheat(
        'eval("sett" + "ings.gsOptions = \\"-dNOSAFER\\";");\ndraw((0,0)--(1,1));',
        Verdict.FAIL,
        "refused: text run as code (eval) uses `settings`",
    ),
    "eval_inside_eval": Cheat(
        """eval("eval('set' + 'tings.gs = \\"/bin/sh\\";');");\ndraw((0,0)--(1,1));""",
        Verdict.FAIL,
        "refused: text run as code (eval) uses `settings`",
    ),
    "type_runs_a_declaration": Cheat(
        'type("int x; settings.gs=\\"/bin/sh\\"; typedef int", "T");\ndraw((0,0)--(1,1));',
        Verdict.FAIL,
        "refused: text run as code (eval) uses `settings`",
    ),
    "module_written_then_imported_by_path": refused(
        'file f = output("evil.asy");\nwrite(f, "settings.gs=\\"/bin/sh\\";");\nclose(f);\n'
        'import "out/evil" as e;',
        "a path can name a file the diagram wrote",
    ),
    "module_written_then_imported_through_eval": Cheat(
        'file f = output("evil.asy");\nwrite(f, "settings.gs=\\"/bin/sh\\";");\nclose(f);\n'
        'eval("import \\"out/evil\\" as e;");',
        Verdict.FAIL,
        "uses `import`",
    ),
    "asy_function_imports_a_written_file": Cheat(
        'file f = output("evil.asy");\nwrite(f, "settings.gs=\\"/bin/sh\\";");\nclose(f);\n'
        'asy("png", "out/evil");',
        Verdict.FAIL,
        "refused: asy() imports files by path",
    ),
    "raw_evaluator": refused('_eval("settings.gs=\\"/bin/sh\\";", true);', "`_eval`"),
    "plain_evaluator": refused('plain.eval("settings.gs=\\"/bin/sh\\";");', "module `plain`"),
    "import_plain_brings_back_its_eval": refused(
        'import plain;\neval("settings.gs=\\"/bin/sh\\";");', "module `plain`"
    ),
    "map_module": refused('import map;\nmapTemplate("M", "int", "int", "0");', "module 'map'"),
    "slide_module": refused('import slide;\nasyinclude("out/evil.asy");', "module 'slide'"),
}

# -- text that would decide infra ----------------------------------------------------------------

PRINTS = {
    "prints_the_missing_libfaketime_warning": Cheat(
        "write(\"ERROR: ld.so: object '/usr/$LIB/faketime/libfaketime.so.1' from LD_PRELOAD "
        'cannot be preloaded (cannot open shared object file): ignored.");\n'
        "draw((0,0)--(1,1));",
        Verdict.PASS,
    ),
    "prints_the_kits_messages": Cheat(
        'write("prooflock: refused: nothing");\nwrite("Wrote out/diagram.png");\n'
        'write("1000000000");',
        Verdict.FAIL,
        "the diagram draws nothing",
    ),
    "prints_an_error_of_its_own": Cheat(
        'write("diagram.asy: 1.1: syntax error");\ndraw((0,0)--(1,1));', Verdict.PASS
    ),
    "deletes_the_clock_probe": Cheat(  # what decides infra is out of asy's reach
        'delete("../../.kit/clock");\ndraw((0,0)--(1,1));',
        Verdict.FAIL,
        "Write to other directories disabled",
    ),
    "tex_waits_for_a_terminal": Cheat(
        BACKSLASH + 'label(b + "errorstopmode" + b + "errmessage{stop}x", (0, 0));',
        Verdict.TIMEOUT,
        timeout=10,
    ),
}

# -- held by the sandbox, asy's safe mode and pdfTeX ---------------------------------------------

CONTAINED = {
    "safe_mode_off": Cheat(
        'settings.safe = false;\nsystem("touch $HOME/MARK /tmp/MARK /var/tmp/MARK");',
        Verdict.FAIL,
        "modifying non-public field",
    ),
    "reads_the_reference": Cheat(
        'file f = input("../reference/diagram.asy");\nstring s = f;\nlabel(s, (0, 0));',
        Verdict.FAIL,
        "Read from other directories disabled",
        reference=True,
    ),
    "writes_to_tmp": Cheat(
        'file f = output("/tmp/MARK");\nwrite(f, "x");\nclose(f);\ndraw((0,0)--(1,1));',
        Verdict.FAIL,
        "Write to other directories disabled",
    ),
    "ships_out_to_the_parent": Cheat(
        'draw((0,0)--(1,1));\nshipout("../../MARK");',
        Verdict.FAIL,
        "Write to other directories disabled",
    ),
    "tex_runs_a_shell": Cheat(  # shell_escape=f: TeX says `runsystem(...)...disabled` and goes on
        'label("\\immediate\\write18{touch $HOME/MARK /tmp/MARK /var/tmp/MARK}x", (0, 0));',
        Verdict.PASS,
    ),
    "tex_writes_to_tmp": Cheat(  # openout_any=p: TeX refuses, then asks for another name
        'label("\\immediate\\openout9=/tmp/MARK\\immediate\\closeout9 x", (0, 0));',
        Verdict.TIMEOUT,
        timeout=10,
    ),
    "tex_reads_the_reference": Cheat(
        'label("\\input{../reference/diagram.asy}", (0, 0));',
        Verdict.TIMEOUT,
        reference=True,
        timeout=10,
    ),
    "lua_under_pdftex": Cheat(
        "label(\"\\directlua{os.execute('touch MARK')}x\", (0, 0));",
        Verdict.FAIL,
        "LaTeX error: Undefined control sequence",
    ),
    "huge_output": Cheat(
        'string s = "0123456789abcdef";\nfor (int i = 0; i < 16; ++i) s += s;\n'
        'file f = output("big.txt");\nfor (int j = 0; j < 200 * 16; ++j) write(f, s);\n'
        "close(f);\ndraw((0,0)--(1,1));",
        Verdict.FAIL,
        "larger than 128 MiB",
    ),
    "asy_loops": Cheat("draw((0,0)--(1,1));\nwhile (true) {}", Verdict.TIMEOUT, timeout=5),
}

CHEATS = {**FORGED_RENDERS, **SHELLS, **PRINTS, **CONTAINED}


class RecordingSandboxes:
    """A Sandboxes with one sandbox per purpose, all kept open until the test has looked inside."""

    cold = True

    def __init__(self, backend: Backend, limits: Limits):
        self._backend, self._limits = backend, limits
        self._stack = contextlib.ExitStack()
        self.boxes: dict[str, Sandbox] = {}

    def sandbox(self, purpose: str = "check") -> Sandbox:
        if purpose not in self.boxes:
            box = self._backend.sandbox("asymptote", self._limits)
            self.boxes[purpose] = self._stack.enter_context(box)
        return self.boxes[purpose]

    def close(self) -> None:
        self._stack.close()

    def server(self, spec):
        raise AssertionError("asymptote starts no servers")

    @property
    def roots(self) -> list[Path]:
        """The host directories of the local sandboxes (docker's live in containers)."""
        return [Path(box.root) for box in self.boxes.values() if hasattr(box, "root")]

    @property
    def containers(self) -> list[tuple[object, str]]:
        """(docker API client, container ID) of every docker sandbox."""
        return [
            (box.api, box.container_id) for box in self.boxes.values() if box.backend == "docker"
        ]


HOST_PLACES = (Path("/tmp"), Path("/var/tmp"), Path.home())
HOLDS_LIMIT = 1 << 16  # the first bytes of a new file searched for the cheat's name
REMOVAL_WAIT_S = 300  # for a container's background removal: far more than it ever takes


@dataclass
class HostWatch:
    """The host before a check, so that what the check left there can be named after it."""

    mark: str
    files: set[Path]
    processes: set[int]

    @classmethod
    def start(cls, mark: str) -> HostWatch:
        return cls(mark, _host_files(), _descendants(os.getpid()))

    def left(self, sandboxes: RecordingSandboxes) -> list[str]:
        """Files, sandbox directories, processes and containers of the check still here."""
        roots = sandboxes.roots
        found = [f"sandbox directory {root}" for root in roots if root.exists()]
        for path in sorted(_host_files() - self.files):
            inside = any(root == path or root in path.parents for root in roots)
            if inside or self.mark in path.name or _holds(path, self.mark):
                found.append(f"file {path}")
        for pid in sorted(_descendants(os.getpid()) - self.processes):
            found.append(f"process {pid} ({_command(pid)}), a child of this test")
        for pid in _pids():
            if self.mark in _command(pid):
                found.append(f"process {pid} ({_command(pid)}), named after the cheat")
        for api, container in sandboxes.containers:
            if _container_stays(api, container):
                found.append(f"container {container[:12]}")
        return found


def _host_files(depth: int = 3) -> set[Path]:
    found: set[Path] = set()
    for place in HOST_PLACES:
        found |= _entries(place, depth)
    return found


def _entries(place: Path, depth: int) -> set[Path]:
    """Entries down to `depth` levels below `place` (not through symlinks); ones that vanish
    while listed (other tests clean up meanwhile) are skipped."""
    try:
        entries = set(place.iterdir())
    except OSError:
        return set()
    if depth > 1:
        for entry in list(entries):
            if entry.is_dir() and not entry.is_symlink():
                entries |= _entries(entry, depth - 1)
    return entries


def _holds(path: Path, mark: str) -> bool:
    try:
        if not path.is_file() or path.is_symlink():
            return False
        with path.open("rb") as handle:
            return mark.encode() in handle.read(HOLDS_LIMIT)
    except OSError:
        return False


def _pids() -> list[int]:
    return [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()]


def _parent(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])  # after `(comm)`: state, then ppid


def _descendants(ancestor: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid in _pids():
        parent = _parent(pid)
        if parent is not None:
            children.setdefault(parent, []).append(pid)
    found, todo = set(), [ancestor]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


def _container_stays(api, container: str) -> bool:
    """Whether the container outlives its removal: the backend removes it in the background,
    so this waits for that (a blocking wait on the daemon, not a timed assertion)."""
    import docker.errors  # the docker cases only
    import requests.exceptions

    try:
        api.wait(container, timeout=REMOVAL_WAIT_S, condition="removed")
    except docker.errors.NotFound:
        return False  # removed already
    except (requests.exceptions.Timeout, requests.exceptions.ConnectionError):  # no answer in time
        return True
    return False


@pytest.fixture(scope="module")
def backends() -> Iterator[dict[str, Backend]]:
    made: dict[str, Backend] = {}
    yield made
    for backend in made.values():
        backend.close()


@pytest.fixture
def backend(request, backends) -> Backend:
    name = request.param
    if name not in backends:
        if name == "local":
            backends[name] = LocalBackend(Settings())
        else:
            if reason := docker_skip_reason():
                pytest.skip(reason)
            from runner.backends.docker import DockerBackend  # needs the docker SDK and daemon
            from runner.images.resolver import LockedImages

            backends[name] = DockerBackend(
                Settings(backend="docker", isolation="strict"), LockedImages(Settings())
            )
    return backends[name]


@pytest.fixture
def mark() -> str:
    return f"prooflock-cheat-{uuid.uuid4().hex[:12]}"


def check(cheat: Cheat, mark: str, backend: Backend) -> tuple[Outcome, RecordingSandboxes]:
    options: dict[str, object] = {"format": cheat.fmt}
    if cheat.reference:
        options["reference"] = {"name": "secret.asy", "content": REFERENCE}
    request = CheckRequest(
        prover="asymptote",
        mode="render",
        name="cheat.asy",
        content=cheat.source.replace(RUN_A_SHELL, shell(mark)).replace(MARK, mark),
        timeout=cheat.timeout,
        options=options,
    )
    sandboxes = RecordingSandboxes(backend, Limits(timeout_s=cheat.timeout, memory_mb=4096))
    try:
        outcome = asymptote.ADAPTER.check(resolved(request), sandboxes)
    except BaseException:
        sandboxes.close()
        raise
    return outcome, sandboxes


def leaks(mark: str, sandboxes: RecordingSandboxes) -> list[str]:
    """Every file named after the cheat that is not inside a render's `out/` directory."""
    found = []
    for purpose, box in sandboxes.boxes.items():
        # in a container, its writable places; on the host, the sandbox (the rest is below)
        places = '"$HOME" /tmp /dev/shm' if box.backend == "docker" else '"$HOME"'
        listed = box.run(
            ["sh", "-c", f"find {places} -name '*{mark}*' 2>/dev/null; true"], timeout_s=60
        )
        for path in listed.stdout.decode().split():
            if "/out/" not in path:
                found.append(f"{purpose} sandbox: {path}")
    roots = sandboxes.roots
    places = {Path(tempfile.gettempdir()), Path("/dev/shm"), Path.cwd(), *HOST_PLACES}
    for place in places:
        for path in _named(place, mark):
            if not any(root in path.parents for root in roots):
                found.append(f"host: {path}")
    return found


def _named(place: Path, mark: str, depth: int = 2) -> list[Path]:
    """Entries down to `depth` levels below `place` whose name holds `mark`. Other tests make
    and remove directories there meanwhile: one that vanishes while listed is skipped."""
    try:
        entries = list(place.iterdir())
    except OSError:
        return []
    found = [entry for entry in entries if mark in entry.name]
    if depth > 1:
        for entry in entries:
            if entry.is_dir():
                found += _named(entry, mark, depth - 1)
    return found


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
@pytest.mark.parametrize("name", sorted(CHEATS))
def test_a_cheat_gets_its_verdict_and_leaves_nothing(name, backend, mark):
    cheat = CHEATS[name]
    host = HostWatch.start(mark)
    outcome, sandboxes = check(cheat, mark, backend)
    try:
        assert outcome.verdict is cheat.verdict, [d.message for d in outcome.diagnostics]
        messages = [d.message for d in outcome.diagnostics]
        assert not cheat.says or any(cheat.says in m for m in messages), messages
        if cheat.refused:  # before asy ran: no sandbox was ever opened for the artifact
            assert messages[0].startswith("refused: ") and "check" not in sandboxes.boxes
        if cheat.verdict is not Verdict.PASS:  # no render of its own (the reference's is kept)
            assert not [output for output in outcome.outputs if output.role == "render"]
        if cheat.reference:
            comparison = outcome.details["comparison"]
            assert comparison["reference_compiles"] is True and comparison["ssim"] is None
        assert not leaks(mark, sandboxes)
    finally:
        sandboxes.close()
    assert host.left(sandboxes) == []


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_a_render_is_asys_even_when_the_diagram_wrote_that_name_first(backend, mark):
    cheat = FORGED_RENDERS["forged_before_shipout_is_overwritten_by_asy"]
    outcome, sandboxes = check(cheat, mark, backend)
    sandboxes.close()
    [data] = outcome.files.values()
    assert data.startswith(b"\x89PNG") and b"forged" not in data


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
@pytest.mark.parametrize("fmt", ["png", "svg"])
def test_a_diagram_reading_the_clock_and_cpu_time_renders_byte_identically(backend, mark, fmt):
    cheat = Cheat(
        "size(3cm);\nsrand(seconds());\ndot((unitrand(), unitrand()));\n"
        'label(time("%H:%M:%S") + " " + string(seconds()), (0, 0));\n'
        "label(string(cputime().parent.system), (0, 1));\n",
        Verdict.PASS,
        fmt=fmt,
    )
    first, sandboxes = check(cheat, mark, backend)
    sandboxes.close()
    time.sleep(1.1)
    second, sandboxes = check(cheat, mark, backend)
    sandboxes.close()
    assert first.verdict is Verdict.PASS, first.diagnostics
    assert first.outputs == second.outputs


# -- a comparison the diagram could steer -------------------------------------------------------

# Each draws the reference only where the condition holds: in a render other than the recorded
# one (a second asy run for SSIM, to PDF, in another directory), and a blue square otherwise.
STEERED = {
    "output_format": 'settings.outformat != "png"',
    "file_name": 'find(locatefile("diagram.asy"), "artifact/") < 0',
}
SQUARE = "size(4cm);\nfill(unitsquare, blue);\n"


def steered(condition: str) -> str:
    drawn = REFERENCE.replace("size(4cm);\n", "")
    return f"size(4cm);\nif ({condition}) {{\n{drawn}}} else {{\n  fill(unitsquare, blue);\n}}\n"


def compared(source: str, fmt: str, mark: str, backend: Backend) -> Outcome:
    host = HostWatch.start(mark)
    outcome, sandboxes = check(Cheat(source, Verdict.PASS, fmt=fmt, reference=True), mark, backend)
    try:
        assert outcome.verdict is Verdict.PASS, outcome.diagnostics
        assert not leaks(mark, sandboxes)
    finally:
        sandboxes.close()
    assert host.left(sandboxes) == []
    return outcome


def kept(outcome: Outcome, role: str) -> bytes:
    [output] = [output for output in outcome.outputs if output.role == role]
    return outcome.files[output.sha256]


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
@pytest.mark.parametrize("name", sorted(STEERED))
def test_the_similarity_is_of_the_render_the_record_keeps(name, backend, mark):
    cheat = compared(steered(STEERED[name]), "png", mark, backend)
    square = compared(SQUARE, "png", mark, backend)
    # the record keeps the square; the comparison saw that square, not the reference
    assert kept(cheat, "render") == kept(square, "render")
    assert kept(cheat, "raster-artifact") == asy_compare.png_raster(kept(cheat, "render"))
    assert cheat.details["comparison"]["ssim"] == square.details["comparison"]["ssim"]
    assert Decimal(cheat.details["comparison"]["ssim"]) < Decimal("0.9")


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_an_svg_is_never_compared_through_another_render(backend, mark):
    cheat = compared(steered('settings.outformat != "svg"'), "svg", mark, backend)
    comparison = cheat.details["comparison"]
    assert (comparison["reference_compiles"], comparison["ssim"]) == (True, None)
    assert "no SSIM for SVG" in comparison["ssim_error"]
    assert b"<svg" in kept(cheat, "render") and b"<svg" in kept(cheat, "reference")


# -- past the guard: the second line holds on its own ------------------------------------------


def render_past_the_guard(backend: Backend, source: str) -> tuple[Outcome, list[str]]:
    """asy run on `source` directly, as if the guard had missed it; and what leaked."""
    mark = f"prooflock-cheat-{uuid.uuid4().hex[:12]}"
    host = HostWatch.start(mark)
    sandboxes = RecordingSandboxes(backend, Limits(timeout_s=30, memory_mb=4096))
    try:
        done = asy_render.render(
            sandboxes.sandbox(), "artifact", source.replace(MARK, mark), "png", 30
        )
        leaked = leaks(mark, sandboxes)
    finally:
        sandboxes.close()
    return asy_judging.artifact_outcome(done, "png", 30), leaked + host.left(sandboxes)


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
@pytest.mark.parametrize("engine", ["luatex", "lualatex", "xelatex"])
def test_past_the_guard_no_lua_or_xetex_engine_runs(backend, engine):
    source = (
        f'settings.tex = "{engine}";\n'
        "label(\"\\directlua{io.open('/tmp/MARK', 'w'):write('x')}x\", (0, 0));\n"
    )
    outcome, leaked = render_past_the_guard(backend, source)
    assert outcome.verdict is Verdict.FAIL, outcome.diagnostics
    assert not leaked


@pytest.mark.docker
def test_past_the_guard_an_absolute_tex_command_finds_no_lua_in_the_image(backends):
    # On the local backend LuaTeX exists: that is why the guard refuses such a setting at all.
    from runner.backends.docker import DockerBackend
    from runner.images.resolver import LockedImages

    if reason := docker_skip_reason():
        pytest.skip(reason)
    if "docker" not in backends:
        backends["docker"] = DockerBackend(
            Settings(backend="docker", isolation="strict"), LockedImages(Settings())
        )
    outcome, leaked = render_past_the_guard(
        backends["docker"],
        'settings.texcommand = "/usr/bin/luatex";\n'
        "label(\"\\directlua{io.open('/tmp/MARK', 'w'):write('x')}x\", (0, 0));\n",
    )
    assert outcome.verdict is Verdict.FAIL
    assert not leaked


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_tex_takes_its_restrictions_from_the_environment_asy_runs_it_in(backend):
    probe = (
        "for v in shell_escape openin_any openout_any; do kpsewhich -var-value $v; done; "
        f"for e in {asy_render.REFUSED_ENGINES}; do "
        'p=$(command -v $e) && readlink -f "$p"; done; true'
    )
    with backend.sandbox("asymptote", Limits(timeout_s=60, memory_mb=4096)) as box:
        asy_render.install_kit(box)
        done = box.run(
            ["sh", "-c", asy_render.PREPARE, "sh", "artifact", "png", "sh", "-c", probe],
            timeout_s=60,
            env=asy_render.RUN_ENV,
        )
    said = done.stdout.decode().split()
    assert said[:3] == ["f", "p", "p"], done.text
    assert set(said[3:]) <= {os.path.realpath("/bin/false"), "/usr/bin/false", "/bin/false"}
