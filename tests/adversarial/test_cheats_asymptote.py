"""Cheats and escapes an adversary writes into an Asymptote diagram, on both backends.

Each cheat is a diagram and what the kit must answer. Either the guard refuses it before asy runs
(`fail`, located at the refused construct, and no sandbox ever opened for the artifact), or asy,
TeX and the sandbox stop it at run time (a verdict that is never `pass` for a cheat that tries to
read the reference). After every cheat nothing named after it exists outside a render's `out/`
directory: not on the host (/tmp, /dev/shm, $HOME, the current directory), not elsewhere in the
sandbox (on docker: the container's /work, /tmp and /dev/shm).

The reference (REFERENCE, a red disc) is rendered in a sandbox of its own; the cheats that go
looking for it under `../reference/` find nothing there.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from runner.backends.base import Backend, Sandbox
from runner.backends.local import LocalBackend
from runner.core.models import CheckRequest, Limits, Outcome, Verdict
from runner.core.settings import Settings
from runner.provers import asymptote
from runner.provers.asymptote import render as asy_render
from tests.helpers import resolved

pytestmark = pytest.mark.slow

REFERENCE = 'size(4cm);\nfill(unitcircle, red);\nlabel("$\\Omega$", (0, 0), white);\n'
BACKSLASH = 'string b = substr("\\\\", 0, 1);  // one backslash, made at run time\n'
MARK = "MARK"  # replaced by a name unique to the test: prooflock-cheat-<hex>
BACKENDS = [
    pytest.param("local", id="local"),
    pytest.param("docker", id="docker", marks=pytest.mark.docker),
]


@dataclass(frozen=True)
class Cheat:
    source: str
    verdict: Verdict
    at: tuple[int, int] | None = None  # line and column of the first diagnostic
    says: str = ""  # in the first diagnostic's message
    reference: bool = False  # checked against REFERENCE, which it tries to read
    timeout: int = 30
    refused: bool = False  # by the guard, before asy runs


def refused(source: str, line: int, column: int, says: str, reference: bool = False) -> Cheat:
    return Cheat(source, Verdict.FAIL, (line, column), says, reference, refused=True)


# -- refused by the guard, before asy runs ------------------------------------------------------

REFUSED = {
    # the TeX engine, and every way to reach asy's settings
    "luatex_engine": refused(
        'settings.tex = "luatex";\n'
        "label(\"\\directlua{io.open('../reference/diagram.asy'):read('a')}\", (0, 0));",
        1,
        1,
        "`settings.tex`",
        reference=True,
    ),
    "lualatex_engine": refused(
        'settings.tex = "lualatex";\ndraw((0,0)--(1,1));', 1, 1, "`settings.tex`"
    ),
    "xelatex_engine": refused(
        'settings.tex = "xelatex";\ndraw((0,0)--(1,1));', 1, 1, "`settings.tex`"
    ),
    "context_engine": refused(
        'settings.tex = "context";\ndraw((0,0)--(1,1));', 1, 1, "`settings.tex`"
    ),
    "engine_by_concatenation": refused('settings.tex = "lua" + "latex";', 1, 1, "`settings.tex`"),
    "texcommand": refused(
        'settings.tex = "pdflatex";\nsettings.texcommand = "lualatex";',
        2,
        1,
        "`settings.texcommand`",
    ),
    "texpath": refused('settings.texpath = "/tmp/MARK";', 1, 1, "`settings.texpath`"),
    "import_settings": refused('import settings;\ntex = "luatex";', 1, 8, "asy's `settings`"),
    "access_settings": refused("access settings;\ndraw((0,0)--(1,1));", 1, 8, "asy's `settings`"),
    "settings_alias": refused('access settings as s;\ns.tex = "luatex";', 1, 8, "asy's `settings`"),
    "unravel_settings": refused('unravel settings;\ntex = "luatex";', 1, 9, "asy's `settings`"),
    "from_settings_access": refused("from settings access tex;", 1, 6, "asy's `settings`"),
    "from_settings_unravel": refused("from settings unravel texcommand;", 1, 6, "asy's `settings`"),
    "setting_in_a_function": refused(
        'void f() { settings.tex = "luatex"; }\nf();', 1, 12, "`settings.tex`"
    ),
    "setting_after_if": refused('if (true) settings.tex = "pdflatex";', 1, 11, "`settings.tex`"),
    "settings_as_a_value": refused("var s = settings;", 1, 9, "asy's `settings`"),
    "usersetting": refused("usersetting();", 1, 1, "`usersetting` runs text as asy code"),
    "eval_of_text": refused('eval("settings.tex = \\"luatex\\";");', 1, 1, "`eval`"),
    "eval_of_quote": refused('eval(quote { settings.tex = "luatex"; });', 1, 1, "`eval`"),
    "asy_function": refused('asy("pdf", "MARK");', 1, 1, "`asy` runs text as asy code"),
    "type_injection": refused(
        'type("int x; import \\"MARK\\"; typedef int", "T");', 1, 1, "`type`"
    ),
    "autoimport": refused('settings.autoimport = "MARK";', 1, 1, "`settings.autoimport`"),
    "ghostscript_options": refused(
        'settings.gsOptions = "-dNOSAFER";', 1, 1, "`settings.gsOptions`"
    ),
    "hyperref_options": refused(
        'settings.hyperrefOptions = "pdfauthor={\\input{/etc/hostname}}";', 1, 1, "`settings"
    ),
    "output_name": refused('settings.outname = "/tmp/MARK";', 1, 1, "`settings.outname`"),
    "safe_mode_off": refused(
        'settings.safe = false;\nsystem("touch /tmp/MARK");', 1, 1, "the artifact sets asy's `safe`"
    ),
    "global_write_on": refused("settings.globalwrite = true;", 1, 1, "sets asy's `globalwrite`"),
    "global_read_on": refused("settings.globalread = true;", 1, 1, "sets asy's `globalread`"),
    "lexer_disagreement": refused(
        'real operator "+"(real a) { settings.tex = "luatex"; return a; }',
        1,
        15,
        "the kit cannot read this as asy does",
    ),
    # modules by path, and modules that run text or files
    "import_the_reference": refused(
        'import "../reference/diagram.asy" as r;', 1, 1, "file path or URL", reference=True
    ),
    "include_the_reference": refused(
        'include "../reference/diagram.asy";', 1, 1, "file path or URL", reference=True
    ),
    "from_the_reference": refused(
        'from "../reference/diagram" access currentpicture;',
        1,
        1,
        "file path or URL",
        reference=True,
    ),
    "import_from_the_network": refused(
        'import "https://example.org/x.asy" as x;', 1, 1, "file path or URL"
    ),
    "slide_includes_files": refused(
        'import slide;\nasyinclude("../reference/diagram.asy");', 1, 1, "module 'slide'"
    ),
    "map_runs_text": refused(
        'import map;\nmapTemplate("M", "int", "int", "0");', 1, 1, "module 'map'"
    ),
    "embed_files": refused('import embed;\nlabel(embed("/etc/hostname"));', 1, 1, "module 'embed'"),
    # TeX in the preamble and in labels
    "preamble_luacode": refused(
        'texpreamble("\\usepackage{luacode}");', 1, 14, "package 'luacode'"
    ),
    "preamble_directlua": refused(
        "texpreamble(\"\\directlua{os.execute('touch /tmp/MARK')}\");", 1, 14, "`\\directlua`"
    ),
    "usepackage_shellesc": refused('usepackage("shellesc");', 1, 12, "package 'shellesc'"),
    "usepackage_minted": refused('usepackage("amsmath, minted");', 1, 12, "package 'minted'"),
    "usepackage_epstopdf": refused('usepackage("epstopdf");', 1, 12, "package 'epstopdf'"),
    "usepackage_computed": refused(
        'string p = "shell" + "esc";\nusepackage(p);', 2, 1, "string literal"
    ),
    "label_directlua": refused(
        "label(\"\\directlua{io.open('/tmp/MARK', 'w'):write('x')}\", (0, 0));",
        1,
        8,
        "`\\directlua`",
    ),
    "label_write18": refused(
        'label("\\immediate\\write18{touch /tmp/MARK}x", (0, 0));', 1, 8, "`\\immediate`"
    ),
    "label_openout_tmp": refused(
        'label("\\immediate\\openout9=/tmp/MARK\\immediate\\closeout9 x", (0, 0));',
        1,
        8,
        "`\\immediate`",
    ),
    "label_openout_parent": refused(
        'label("\\openout9=../../MARK x", (0, 0));', 1, 8, "`\\openout`"
    ),
    "label_input_absolute": refused('label("\\input{/etc/hostname}", (0, 0));', 1, 8, "`\\input`"),
    "label_input_reference": refused(
        'label("\\input{../reference/diagram.asy}", (0, 0));', 1, 8, "`\\input`", reference=True
    ),
    "label_graphic_of_the_reference": refused(
        'label("\\includegraphics{../reference/out/diagram.pdf}", (0, 0));',
        1,
        8,
        "`\\includegraphics`",
        reference=True,
    ),
    "label_octal_backslash": refused("label('\\134directlua{}', (0, 0));", 1, 8, "`\\directlua`"),
    "label_joined_literals": refused(
        "label(\"\\dir\"\n      'ectlua{}', (0, 0));", 1, 8, "`\\directlua`"
    ),
    "label_caret_notation": refused('label("^^5cinput{/etc/hostname}", (0, 0));', 1, 8, "`^^`"),
    "label_csname": refused(
        'label("\\csname input\\endcsname{/etc/hostname}", (0, 0));', 1, 8, "`\\csname`"
    ),
    "label_scantokens": refused('label("\\scantokens{x}", (0, 0));', 1, 8, "`\\scantokens`"),
    "label_catcode": refused('label("\\catcode`\\|=0 x", (0, 0));', 1, 8, "`\\catcode`"),
    "label_ends_the_document": refused(
        'label("x}\\end{document}", (0, 0));', 1, 10, "`\\end{document}`"
    ),
    "label_waits_for_a_terminal": refused(
        'label("\\errorstopmode\\errmessage{stop}x", (0, 0));', 1, 8, "`\\errorstopmode`"
    ),
    "cpu_time": refused(
        "label(string(cputime().parent.user), (0, 0));", 1, 14, "the machine's CPU time"
    ),
}

# -- left to asy, TeX and the sandbox ----------------------------------------------------------

AT_RUN_TIME = {
    "asy_reads_the_reference": Cheat(
        'file f = input("../reference/diagram.asy");\nstring s = f;\nlabel(s, (0, 0));',
        Verdict.FAIL,
        says="Read from other directories disabled",
        reference=True,
    ),
    "asy_reads_an_absolute_path": Cheat(
        'file f = input("/etc/hostname");\nstring s = f;\nlabel(s, (0, 0));',
        Verdict.FAIL,
        says="Read from other directories disabled",
    ),
    "asy_writes_to_tmp": Cheat(
        'file f = output("/tmp/MARK");\nwrite(f, "x");\nclose(f);\ndraw((0,0)--(1,1));',
        Verdict.FAIL,
        says="Write to other directories disabled",
    ),
    "asy_writes_to_the_parent": Cheat(
        'file f = output("../../MARK");\nwrite(f, "x");\nclose(f);\ndraw((0,0)--(1,1));',
        Verdict.FAIL,
        says="Write to other directories disabled",
    ),
    "asy_ships_out_to_the_parent": Cheat(
        'draw((0,0)--(1,1));\nshipout("../../MARK");',
        Verdict.FAIL,
        says="Write to other directories disabled",
    ),
    "tex_reads_the_reference": Cheat(
        BACKSLASH + 'label(b + "input{../reference/diagram.asy}", (0, 0));',
        Verdict.TIMEOUT,
        reference=True,
        timeout=10,  # openin_any=p: LaTeX asks for another name
    ),
    "tex_reads_an_absolute_path": Cheat(
        BACKSLASH + 'label(b + "input{/etc/hostname}", (0, 0));', Verdict.TIMEOUT, timeout=10
    ),
    "tex_runs_a_shell": Cheat(  # shell_escape=f: TeX says `runsystem(...)...disabled` and goes on
        BACKSLASH + 'label(b + "immediate" + b + "write18{touch /tmp/MARK}x", (0, 0));',
        Verdict.PASS,
    ),
    "tex_writes_to_tmp": Cheat(  # openout_any=p: TeX refuses, then asks for another name
        BACKSLASH + 'label(b + "immediate" + b + "openout9=/tmp/MARK" + b + "immediate"'
        ' + b + "closeout9 x", (0, 0));',
        Verdict.TIMEOUT,
        timeout=10,
    ),
    "tex_plants_a_module": Cheat(  # TeX writes out/graph.asy; `import graph` loads asy's own
        BACKSLASH + 'label(b + "immediate" + b + "openout9=graph.asy" + b + "immediate" + b'
        ' + "write9{abort(\\"PLANTED\\");}" + b + "immediate" + b + "closeout9 x", (0, 0));\n'
        "import graph;\ndraw((0,0)--(1,1));",
        Verdict.PASS,
    ),
    "asy_plants_a_module": Cheat(  # output() writes out/graph.asy; `import graph` loads asy's own
        'file f = output("graph.asy");\nwrite(f, "abort(\\"PLANTED\\");");\nclose(f);\n'
        "import graph;\ndraw((0,0)--(1,1));",
        Verdict.PASS,
    ),
    "huge_output": Cheat(
        'string s = "0123456789abcdef";\nfor (int i = 0; i < 16; ++i) s += s;\n'
        'file f = output("big.txt");\nfor (int j = 0; j < 200 * 16; ++j) write(f, s);\n'
        "close(f);\ndraw((0,0)--(1,1));",
        Verdict.FAIL,
        says="larger than 128 MiB",
    ),
    "asy_loops": Cheat("draw((0,0)--(1,1));\nwhile (true) {}", Verdict.TIMEOUT, timeout=5),
    "tex_loops": Cheat('label("\\def\\x{\\x}\\x", (0, 0));', Verdict.TIMEOUT, timeout=5),
    "label_breaks_out_of_its_box": Cheat(
        'draw((0,0)--(1,1));\nlabel("x}\\egroup\\egroup y", (0, 0));', Verdict.FAIL
    ),
}


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
            backends[name] = LocalBackend()
        else:
            from runner.backends.docker import DockerBackend  # needs the docker SDK and daemon

            backends[name] = DockerBackend(Settings(backend="docker", isolation="strict"))
    return backends[name]


@pytest.fixture
def mark() -> str:
    return f"prooflock-cheat-{uuid.uuid4().hex[:12]}"


def check(
    cheat: Cheat, mark: str, backend: Backend, fmt: str = "png"
) -> tuple[Outcome, RecordingSandboxes]:
    options: dict[str, object] = {"format": fmt}
    if cheat.reference:
        options["reference"] = {"name": "secret.asy", "content": REFERENCE}
    request = CheckRequest(
        prover="asymptote",
        mode="render",
        name="cheat.asy",
        content=cheat.source.replace(MARK, mark),
        timeout=cheat.timeout,
        options=options,
    )
    sandboxes = RecordingSandboxes(backend, Limits(timeout_s=cheat.timeout, memory_mb=4096))
    outcome = asymptote.ADAPTER.check(resolved(request), sandboxes)
    return outcome, sandboxes


def assert_answered(cheat: Cheat, outcome: Outcome) -> None:
    assert outcome.verdict is cheat.verdict, outcome.diagnostics
    first = outcome.diagnostics[0] if outcome.diagnostics else None
    if cheat.at is not None:
        assert first is not None and (first.line, first.column) == cheat.at, first
    if cheat.refused:
        assert first is not None and first.message.startswith("refused: "), first
    if cheat.says:
        assert any(cheat.says in d.message for d in outcome.diagnostics), outcome.diagnostics
    if cheat.reference:
        comparison = outcome.details["comparison"]
        assert comparison["reference_compiles"] is True
        assert comparison["ssim"] is None  # nothing of the artifact's to compare: it never passes


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
    roots = [Path(str(getattr(box, "root", "/nonexistent"))) for box in sandboxes.boxes.values()]
    places = {Path("/tmp"), Path(tempfile.gettempdir()), Path("/dev/shm"), Path.home(), Path.cwd()}
    for place in places:
        for depth in ("*", "*/*"):
            for path in place.glob(f"{depth}{mark}*"):
                if not any(root in path.parents for root in roots):
                    found.append(f"host: {path}")
    return found


def run_cheat(cheat: Cheat, mark: str, backend: Backend) -> Outcome:
    outcome, sandboxes = check(cheat, mark, backend)
    try:
        assert not leaks(mark, sandboxes)
        return outcome
    finally:
        sandboxes.close()


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_refused_cheat_fails_where_it_cheats_before_asy_runs(name, backend, mark):
    cheat = REFUSED[name]
    outcome, sandboxes = check(cheat, mark, backend)
    try:
        assert_answered(cheat, outcome)
        assert outcome.details["outputs"] == {} and "check" not in sandboxes.boxes
        assert not leaks(mark, sandboxes)
    finally:
        sandboxes.close()


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
@pytest.mark.parametrize("name", sorted(AT_RUN_TIME))
def test_a_cheat_left_to_asy_and_tex_is_stopped_there(name, backend, mark):
    cheat = AT_RUN_TIME[name]
    outcome = run_cheat(cheat, mark, backend)
    assert_answered(cheat, outcome)
    assert not any("PLANTED" in d.message for d in outcome.diagnostics)


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
@pytest.mark.parametrize("fmt", ["png", "svg"])
def test_a_diagram_reading_the_clock_renders_byte_identically(backend, mark, fmt):
    cheat = Cheat(
        "size(3cm);\nsrand(seconds());\ndot((unitrand(), unitrand()));\n"
        'label(time("%H:%M:%S") + " " + string(seconds()), (0, 0));\n',
        Verdict.PASS,
    )
    first, sandboxes = check(cheat, mark, backend, fmt)
    sandboxes.close()
    time.sleep(1.1)
    second, sandboxes = check(cheat, mark, backend, fmt)
    sandboxes.close()
    assert first.verdict is Verdict.PASS, first.diagnostics
    assert first.details["outputs"] == second.details["outputs"]


# -- past the guard: the second line holds on its own ------------------------------------------


def render_past_the_guard(backend: Backend, source: str) -> tuple[Outcome, list[str]]:
    """asy run on `source` directly, as if the guard had missed it; and what leaked."""
    mark = f"prooflock-cheat-{uuid.uuid4().hex[:12]}"
    sandboxes = RecordingSandboxes(backend, Limits(timeout_s=30, memory_mb=4096))
    try:
        done = asy_render.render(
            sandboxes.sandbox(), "artifact", source.replace(MARK, mark), "png", 30
        )
        return asy_render.artifact_outcome(done, "png", 30), leaks(mark, sandboxes)
    finally:
        sandboxes.close()


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


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_past_the_guard_safe_mode_stays_on(backend):
    outcome, leaked = render_past_the_guard(
        backend, 'settings.safe = false;\nsystem("touch /tmp/MARK");\ndraw((0,0)--(1,1));'
    )
    assert outcome.verdict is Verdict.FAIL
    assert not leaked


@pytest.mark.docker
def test_past_the_guard_an_absolute_tex_command_finds_no_lua_in_the_image(backends):
    # On the local backend (no security boundary) this would reach the host's luatex.
    from runner.backends.docker import DockerBackend

    if "docker" not in backends:
        backends["docker"] = DockerBackend(Settings(backend="docker", isolation="strict"))
    backend = backends["docker"]
    outcome, leaked = render_past_the_guard(
        backend,
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
        done = box.run(
            ["sh", "-c", asy_render.PREPARE, "sh", "artifact", "sh", "-c", probe],
            timeout_s=60,
            env=asy_render.RUN_ENV,
        )
    said = done.stdout.decode().split()
    assert said[:3] == ["f", "p", "p"], done.text
    assert set(said[3:]) <= {os.path.realpath("/bin/false"), "/usr/bin/false", "/bin/false"}
