"""Asymptote: real asy renders diagrams in safe mode, byte-identically, and compares them.

The cheats and escapes an adversary tries, on both backends, are in tests/adversarial/.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import shutil
import subprocess
import tempfile
import time
from decimal import Decimal
from pathlib import Path

import pytest

from runner import run_itp
from runner.backends.local import LocalBackend, LocalSandbox
from runner.check.checker import Checker
from runner.core.errors import InfraFailure
from runner.core.models import CheckRequest, Limits, Outcome, OutputFile, Trust, Verdict
from runner.core.settings import Settings
from runner.provers import asymptote
from runner.provers.asymptote import compare as asy_compare
from runner.provers.asymptote import guard
from runner.provers.asymptote import judging as asy_judging
from runner.provers.asymptote import outputs as asy_outputs
from runner.provers.asymptote import reference as asy_reference
from runner.provers.asymptote import render as asy_render
from runner.provers.asymptote import source as asy_source
from runner.records.checkpoint import inspect_chain, recorded_runs
from runner.records.publish import publish, renders_dir
from runner.report import write_report
from runner.runs.resumable import run_requests
from tests.helpers import ARTIFACTS, OneSandbox, artifact, resolved

SHA256 = re.compile(r"^[0-9a-f]{64}$")
ESCAPES = ("prooflock-asy-escape.txt", "prooflock-tex-escape.txt", "prooflock-tex-shell.txt")


def render(
    name: str,
    settings: Settings,
    *,
    fmt: str = "png",
    reference: str | None = None,
    timeout: int = 30,
):
    options: dict[str, object] = {"format": fmt}
    if reference is not None:
        options["reference"] = {"name": reference, "content": artifact("asymptote", reference)}
    return run_itp(
        "asymptote",
        artifact("asymptote", name),
        name=name,
        mode="render",
        timeout=timeout,
        options=options,
        settings=settings,
    )


def render_in_sandbox(name: str, fmt: str) -> tuple[Outcome, bytes]:
    """The adapter's outcome and the render asy's converter wrote, as the kit kept it."""
    request = CheckRequest(
        prover="asymptote",
        mode="render",
        name=name,
        content=artifact("asymptote", name),
        timeout=30,
        options={"format": fmt},
    )
    with LocalBackend(Settings()).sandbox("asymptote", Limits(timeout_s=30, memory_mb=4096)) as box:
        outcome = asymptote.ADAPTER.check(resolved(request), OneSandbox(box))
        return outcome, box.read_file(asy_render.kept_path("artifact", fmt))


class RecordingSandboxes:
    """A Sandboxes that opens one local sandbox per purpose and logs, in order, what each is asked."""

    cold = True

    def __init__(self, stack: contextlib.ExitStack):
        self._stack = stack
        self.boxes: dict[str, LocalSandbox] = {}
        self.log: list[tuple[str, str, object]] = []  # (purpose, "write" | "run", path | argv)

    def sandbox(self, purpose: str = "check") -> LocalSandbox:
        if purpose not in self.boxes:
            limits = Limits(timeout_s=60, memory_mb=4096)
            box = self._stack.enter_context(LocalBackend(Settings()).sandbox("asymptote", limits))
            self.boxes[purpose] = self._logged(purpose, box)
        return self.boxes[purpose]

    def _logged(self, purpose: str, box: LocalSandbox) -> LocalSandbox:
        write, run = box.write_file, box.run

        def write_file(relpath: str, data: bytes) -> None:
            self.log.append((purpose, "write", (relpath, data)))
            write(relpath, data)

        def run_logged(argv, **kwargs):
            self.log.append((purpose, "run", list(argv)))
            return run(argv, **kwargs)

        box.write_file, box.run = write_file, run_logged  # type: ignore[method-assign]
        return box

    def server(self, spec):
        raise AssertionError("asymptote starts no servers")


def check_with_reference(
    name: str, reference: str, fmt: str, sandboxes: RecordingSandboxes
) -> Outcome:
    request = CheckRequest(
        prover="asymptote",
        mode="render",
        name=name,
        content=artifact("asymptote", name),
        timeout=60,
        options={
            "format": fmt,
            "reference": {"name": reference, "content": artifact("asymptote", reference)},
        },
    )
    return asymptote.ADAPTER.check(resolved(request), sandboxes)


@pytest.fixture
def uncached(settings: Settings) -> Settings:
    return settings.model_copy(update={"cache": False})


@pytest.fixture(autouse=True)
def no_escapes_left():
    """Every test: nothing an artifact tried to write outside its work dir exists afterwards."""
    yield
    for place in {Path("/tmp"), Path(tempfile.gettempdir())}:
        for escape in ESCAPES:
            leaked = place / escape
            assert not leaked.exists(), f"an artifact wrote {leaked}"


# -- good diagrams ---------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", asymptote.FORMATS)
def test_labelled_diagram_renders_and_the_digest_is_of_the_file_asy_wrote(fmt):
    outcome, written = render_in_sandbox("triangle_labels.asy", fmt)
    assert (outcome.verdict, outcome.trust) == (Verdict.PASS, Trust.KERNEL), outcome.diagnostics
    data = asy_outputs.normalize(fmt, written)
    sha = hashlib.sha256(data).hexdigest()
    assert outcome.outputs == [OutputFile(role="render", format=fmt, sha256=sha)]
    assert outcome.files == {sha: data}
    if fmt == "svg":
        assert data.count(b"<path ") >= 8  # the label glyphs (A, B, C, 1, a, b) are drawn
    elif fmt == "png":
        width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
        assert width > 100 and height > 100


def test_record_carries_the_render_typed_and_no_comparison_without_reference(settings):
    result = render("squares_grid.asy", settings, fmt="svg")
    assert result.verdict is Verdict.PASS
    assert result.details == {}
    [output] = result.outputs
    assert (output.role, output.format) == ("render", "svg") and SHA256.match(output.sha256)


@pytest.mark.slow
@pytest.mark.parametrize("fmt", asymptote.FORMATS)
def test_two_runs_give_identical_bytes(fmt, uncached):
    first = render("triangle_labels.asy", uncached, fmt=fmt)
    time.sleep(1.1)  # a stamped date or a clock-seeded ID would now differ
    second = render("triangle_labels.asy", uncached, fmt=fmt)
    assert not first.provenance.cached and not second.provenance.cached
    assert first.outputs == second.outputs
    assert first.result_digest == second.result_digest


@pytest.mark.slow
def test_pdf_stays_identical_when_the_artifact_switches_to_pdflatex(uncached):
    first = render("pdflatex_engine.asy", uncached, fmt="pdf")
    time.sleep(1.1)
    second = render("pdflatex_engine.asy", uncached, fmt="pdf")
    assert first.verdict is Verdict.PASS, first.diagnostics
    assert first.outputs == second.outputs


@pytest.mark.slow
@pytest.mark.parametrize("fmt", asymptote.FORMATS)
def test_diagram_that_reads_the_clock_renders_identically(fmt, uncached):
    first = render("reads_the_clock.asy", uncached, fmt=fmt)
    time.sleep(1.1)  # seconds() and time() would now say otherwise, were the clock not fixed
    second = render("reads_the_clock.asy", uncached, fmt=fmt)
    assert first.verdict is Verdict.PASS, first.diagnostics
    assert first.outputs == second.outputs


# -- failures, located ---------------------------------------------------------------------------

LOCATED = {
    # name: (line, column, message fragment)
    "fail_syntax.asy": (3, 1, "syntax error"),
    "fail_undefined.asy": (3, 10, "no matching variable 'circumcentre'"),
    "write_outside.asy": (2, 1, "Write to other directories disabled"),
    "write_parent.asy": (2, 1, "Write to other directories disabled"),
    "fail_missing_module.asy": (2, 1, "could not load module 'nosuchmodule'"),
    "turn_off_safe_mode.asy": (2, 9, "modifying non-public field"),  # asy guards `safe` itself
    # refused by the guard before asy runs
    "kills_its_group.asy": (2, 1, "refused: `settings.texcommand` names a program asy runs"),
    "stamps_back_on.asy": (2, 1, "refused: `settings.gsOptions` names a program asy runs"),
}


@pytest.mark.parametrize("name", sorted(LOCATED))
def test_rejected_diagram_fails_at_the_line_asy_names(name, settings):
    result = render(name, settings)
    assert result.verdict is Verdict.FAIL
    assert result.outputs == []
    line, column, fragment = LOCATED[name]
    first = result.diagnostics[0]
    assert (first.line, first.column) == (line, column)
    assert fragment in first.message
    assert first.context == artifact("asymptote", name).splitlines()[line - 1].strip()


def test_tex_that_writes_outside_or_runs_a_shell_is_stopped_by_tex_itself(settings):
    # openout_any=p: TeX refuses /tmp and asks for another name, which nobody gives
    result = render("latex_escape.asy", settings, timeout=10)
    assert result.verdict is Verdict.TIMEOUT  # the autouse fixture: nothing was written


def test_bad_latex_label_is_summarized_and_traced_to_its_label(settings):
    result = render("fail_latex.asy", settings)
    assert result.verdict is Verdict.FAIL
    first = result.diagnostics[0]
    assert first.message == "LaTeX error: Undefined control sequence."
    assert (first.line, first.context) == (4, r"$\notacommand{x}$")
    assert not any("/usr/" in d.message or "/tmp" in d.message for d in result.diagnostics)


def test_olympiad_module_works_where_installed_and_is_named_where_not(settings, tmp_path):
    located = subprocess.run(
        ["asy", "-noV", "-c", 'write(locatefile("olympiad.asy"));'],
        env={
            "PATH": "/usr/bin:/bin",
            "HOME": str(tmp_path),
            "ASYMPTOTE_DIR": asy_render.EXTRA_MODULE_DIR,
        },
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.strip()
    result = render("uses_olympiad.asy", settings)
    if located:
        assert result.verdict is Verdict.PASS, result.diagnostics
    else:
        assert result.verdict is Verdict.FAIL
        [error] = result.diagnostics
        assert error.line == 1
        assert "olympiad.asy is not installed in this environment" in error.message


def test_diagram_that_draws_nothing_fails(settings):
    result = render("draws_nothing.asy", settings)
    assert result.verdict is Verdict.FAIL
    assert "draws nothing" in result.diagnostics[-1].message


def test_asy_killing_its_process_group_fails_the_artifact_not_the_kit():
    # asy answers a TeX command it cannot start with SIGPIPE to its whole process group; this
    # test process survives only because each command runs in a session of its own. The guard
    # refuses `settings.texcommand`, so asy is run here directly, past it.
    with LocalBackend(Settings()).sandbox("asymptote", Limits(timeout_s=30, memory_mb=4096)) as box:
        done = asy_render.render(
            box, "artifact", artifact("asymptote", "kills_its_group.asy"), "png", 30
        )
    outcome = asy_judging.artifact_outcome(done, "png", 30)
    assert outcome.verdict is Verdict.FAIL
    assert "cannot execute prooflock-no-such-tex" in outcome.diagnostics[0].message


def test_a_clock_that_is_not_frozen_is_found_by_a_probe_before_the_diagram_runs(monkeypatch):
    # libfaketime missing: the machine's failure, from the probe PREPARE runs before asy (what
    # asy prints is the diagram's: tests/adversarial prints the old warning text and passes)
    missing = asy_render.FAKETIME_LIBRARY.replace("libfaketime", "no-such-libfaketime")
    monkeypatch.setattr(
        asy_render, "PREPARE", asy_render.PREPARE.replace(asy_render.FAKETIME_LIBRARY, missing)
    )
    limits = Limits(timeout_s=30, memory_mb=4096)
    with (
        LocalBackend(Settings()).sandbox("asymptote", limits) as box,
        pytest.raises(InfraFailure, match="fixed clock, and libfaketime is not installed"),
    ):
        asy_render.render(box, "artifact", "draw((0,0)--(1,1));", "png", 30)


def test_a_check_whose_time_ran_out_before_asy_started_is_a_timeout_not_the_machines_fault():
    # The kit's own reading of a large file counts against the check's time; what is left may
    # not reach the clock probe. That is the artifact's timeout: an infra error would stop a run.
    with LocalBackend(Settings()).sandbox("asymptote", Limits(timeout_s=30, memory_mb=1024)) as box:
        done = asy_render.render(box, "artifact", "draw((0,0)--(1,1));", "png", 0.001)
    assert done.done.timed_out and not done.started
    outcome = asy_judging.artifact_outcome(done, "png", 0.001)
    assert outcome.verdict is Verdict.TIMEOUT
    assert "ran out before asy started" in outcome.diagnostics[0].message


def test_a_diagram_too_large_to_read_in_its_time_is_a_timeout_within_the_limit(uncached):
    # About 9 MB (under the 10 MB size limit): the kit's reading alone would take tens of
    # seconds; it stops at the check's deadline (its 1 s and the kit's 5 s) and says why.
    source = "draw((0,0)--(1,1)--(2,0)--cycle, red+1bp);\n" * 200_000
    with Checker(uncached.model_copy(update={"timeout": 1})) as checker:
        result = checker.check_one(CheckRequest(prover="asymptote", name="big", content=source))
    assert result.verdict is Verdict.TIMEOUT
    assert "ran out while the kit read the artifact" in result.diagnostics[0].message
    assert result.provenance.wall_ms < 15_000


def test_a_converter_never_hands_on_a_file_the_diagram_wrote():
    # asy hands gs's pages (diagram_%d.ps) to dvisvgm, which runs PostScript outside SAFER:
    # pages the diagram planted beforehand are gone before gs runs, whatever gs then does
    with LocalBackend(Settings()).sandbox("asymptote", Limits(timeout_s=30, memory_mb=1024)) as box:
        asy_render.install_kit(box)
        for planted in ("out/diagram_1.ps", "out/diagram_2.ps", "out/other.ps"):
            box.write_file(planted, b"%!PS\n(planted) print\n")
        script = (
            'd=$HOME/.kit; chmod 755 "$d/converters.sh"; mkdir -p "$d/bin"; '
            'ln -sf ../converters.sh "$d/bin/gs"; cd out; PROOFLOCK_PATH=$PATH '
            'PROOFLOCK_RENDER=none "$d/bin/gs" -q -sDEVICE=nullpage -sOutputFile=diagram_%d.ps '
            "-c quit; ls"
        )
        done = box.run(["sh", "-c", script], timeout_s=30)
    assert done.stdout.decode().split() == ["other.ps"], done.text


def test_infinite_loop_times_out(settings):
    result = render("diverge.asy", settings, timeout=3)
    assert result.verdict is Verdict.TIMEOUT
    assert result.provenance.wall_ms < 30_000


# -- comparison with a reference -----------------------------------------------------------------


@pytest.mark.slow
def test_identical_diagram_scores_one_and_a_different_one_lower(settings):
    same = render("triangle_labels.asy", settings, reference="triangle_labels.asy")
    moved = render("triangle_labels.asy", settings, reference="triangle_moved.asy")
    other = render("triangle_labels.asy", settings, fmt="pdf", reference="squares_grid.asy")
    assert same.details["comparison"] == {
        "reference": "triangle_labels.asy",
        "artifact_compiles": True,
        "reference_compiles": True,
        "keyword_f1": "1.0000",
        "ssim": "1.0000",
    }
    # the same diagram, rendered as the reference (in the artifact's format): the same render,
    # the same raster
    kept = {output.role: output for output in same.outputs}
    assert sorted(kept) == ["raster-artifact", "raster-reference", "reference", "render"]
    assert (kept["reference"].format, kept["reference"].sha256) == ("png", kept["render"].sha256)
    assert kept["raster-artifact"].sha256 == kept["raster-reference"].sha256
    near, far = moved.details["comparison"], other.details["comparison"]
    assert all(
        re.fullmatch(r"[01]\.\d{4}", c[k]) for c in (near, far) for k in ("ssim", "keyword_f1")
    )
    assert 1 > Decimal(near["ssim"]) > Decimal(far["ssim"])
    assert 1 > Decimal(near["keyword_f1"]) > Decimal(far["keyword_f1"])


@pytest.mark.slow
def test_broken_reference_is_reported_without_touching_the_verdict(settings):
    result = render("triangle_labels.asy", settings, reference="fail_syntax.asy")
    assert result.verdict is Verdict.PASS
    comparison = result.details["comparison"]
    assert (comparison["reference_compiles"], comparison["ssim"]) == (False, None)
    assert comparison["reference_error"] == "3.1: syntax error"
    assert "reference_outputs" not in comparison and "rasters" not in comparison
    broken = render("fail_syntax.asy", settings, reference="triangle_labels.asy")
    assert broken.verdict is Verdict.FAIL
    assert broken.details["comparison"]["artifact_compiles"] is False


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["png", "pdf"])
def test_the_reference_never_enters_the_artifacts_sandbox(fmt):
    with contextlib.ExitStack() as stack:
        sandboxes = RecordingSandboxes(stack)
        outcome = check_with_reference("triangle_labels.asy", "squares_grid.asy", fmt, sandboxes)
        assert outcome.verdict is Verdict.PASS
        assert set(sandboxes.boxes) == {"check", "reference"}
        reference = artifact("asymptote", "squares_grid.asy").encode()
        for purpose, action, what in sandboxes.log:
            if purpose == "check" and action == "write":
                assert reference not in what[1], f"the reference was written into {what[0]}"
        # the reference sandbox opens only once the artifact's last command has run
        purposes = [purpose for purpose, _, _ in sandboxes.log]
        assert purposes == sorted(purposes, key=lambda p: p == "reference")
        assert sandboxes.boxes["reference"].read_file("reference/diagram.asy") == reference


@pytest.mark.slow
def test_the_reference_render_and_both_rasters_are_kept_for_a_report():
    with contextlib.ExitStack() as stack:
        outcome = check_with_reference(
            "triangle_labels.asy", "triangle_moved.asy", "pdf", RecordingSandboxes(stack)
        )
    roles = [(output.role, output.format) for output in outcome.outputs]
    assert roles == [
        ("render", "pdf"),
        ("reference", "pdf"),
        ("raster-artifact", "png"),
        ("raster-reference", "png"),
    ]
    named = [output.sha256 for output in outcome.outputs]
    assert set(outcome.files) == set(named) and len(set(named)) == 4
    assert "reference_outputs" not in outcome.details["comparison"]
    for sha, data in outcome.files.items():
        assert hashlib.sha256(data).hexdigest() == sha
    assert outcome.files[named[1]].startswith(b"%PDF-")
    for raster in named[2:]:
        png = outcome.files[raster]
        width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
        assert (width, height) == (asy_compare.RASTER_SIZE, asy_compare.RASTER_SIZE)


def test_a_pdf_without_a_page_has_no_ssim_and_is_never_infra():
    zero_pages = (
        b"%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n"
        b"2 0 obj << /Type /Pages /Kids [] /Count 0 >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n"
    )
    with LocalBackend(Settings()).sandbox("asymptote", Limits(timeout_s=30, memory_mb=1024)) as box:
        raster, why = asy_reference._raster(
            box, "artifact", "pdf", zero_pages, 30, asy_render.Timings()
        )
    assert (raster, why) == (None, "ghostscript drew no page of the artifact PDF")


# -- records written before outputs were typed ---------------------------------------------------

# The bundled example as published by prooflock 0.2 (round 2), whose asymptote record kept its
# renders in `details`: what old records look like.
EXAMPLE_BUNDLE = ARTIFACTS / "legacy-bundle"


def legacy_digests(log: Path) -> dict[str, str]:
    """The digest maps an old asymptote record kept in its details, flattened by role."""
    for line in log.read_text().splitlines():
        result = (json.loads(line).get("body") or {}).get("result") or {}
        comparison = result.get("details", {}).get("comparison")
        if result.get("prover") == "asymptote" and comparison:
            rasters = comparison["rasters"]
            return {
                "render": result["details"]["outputs"]["png"],
                "reference": comparison["reference_outputs"]["pdf"],
                "raster-artifact": rasters["artifact"],
                "raster-reference": rasters["reference"],
            }
    raise AssertionError(f"{log} holds no compared asymptote record")


def test_old_records_still_report_and_publish_their_renders(tmp_path):
    digests = legacy_digests(EXAMPLE_BUNDLE / "log.jsonl")
    write_report(EXAMPLE_BUNDLE, tmp_path / "report")
    html = (tmp_path / "report" / "index.html").read_text()
    assert f'src="renders/{digests["render"]}.png"' in html
    assert f'href="renders/{digests["reference"]}.pdf"' in html
    assert f'href="renders/{digests["raster-artifact"]}.png">raster-artifact (png)' in html
    # a log of such records, its renders kept beside it, published: every file in the bundle
    log = tmp_path / "run.jsonl"
    shutil.copy(EXAMPLE_BUNDLE / "log.jsonl", log)
    shutil.copytree(EXAMPLE_BUNDLE / "blobs" / "sha256", renders_dir(log))
    publish(log, tmp_path / "bundle")
    kept = {path.name for path in (tmp_path / "bundle" / "blobs" / "sha256").iterdir()}
    assert set(digests.values()) <= kept


@pytest.mark.slow
def test_a_published_run_carries_every_typed_output_as_a_blob(settings, tmp_path):
    log = tmp_path / "run.jsonl"
    request = CheckRequest(
        prover="asymptote",
        mode="render",
        name="triangle_labels.asy",
        content=artifact("asymptote", "triangle_labels.asy"),
        options={
            "format": "png",
            "reference": {"name": "r.asy", "content": artifact("asymptote", "squares_grid.asy")},
        },
    )
    with Checker(settings, keep_outputs=renders_dir(log)) as checker:
        run_requests([request], log, checker, source="asymptote-test")
    [(_, result)] = recorded_runs(inspect_chain(log).records)
    assert len(result.outputs) == 4
    publish(log, tmp_path / "bundle")
    kept = {path.name for path in (tmp_path / "bundle" / "blobs" / "sha256").iterdir()}
    assert {output.sha256 for output in result.outputs} <= kept


# -- the guard: the few refusals containment cannot replace --------------------------------------

ALLOWED = [
    # reading settings, and writing those that choose no program (clockarray.asy, fequlogo.asy)
    "size(settings.paperwidth, settings.paperheight); real w = settings.paperwidth / 2;",
    'settings.outformat = "pdf"; settings.prc = true; ++settings.digits; settings.render = 0;',
    "if (settings.render < 0) settings.render = 8; write(settings.gs, settings.gsOptions);",
    'settings.tex = "pdflatex"; void setup() { settings.tex=\'latex\'; } settings.tex = "pdftex";',
    # text run as code: checked where it runs (colors.asy)
    'pen p; string s = "red"; eval("p=" + s + ";", true); eval(quote { write(1); });',
    'write(cputime()); usersetting(); mapArray("int", "real");',
    # any module by name, any TeX: the sandbox and pdfTeX's limits hold them
    "import geometry; import olympiad; import animate; import embed; access three as t;",
    "from graph access Label; import cse5; include plain_constants; unravel t;",
    'usepackage("shellesc, minted"); texpreamble("\\directlua{}"); label("\\input{/etc/x}");',
    # the refused words inside strings and comments, or as other things' names
    'write("settings.gs = \\"x\\""); // settings.gs = "x"; _eval("x"); import "../x" as y;',
    "/* import plain; */ struct thing { int plain; } thing p; p.plain = 1;",
    "import plain; access settings; usersetting();  // tvgen.asy",
    "if (!settings.multipleView) settings.batchView = false;  // latexusage.asy",
    "real operator +(real a, int b) { return a; } pair operator cast(int i) { return (i, 0); }",
]


@pytest.mark.parametrize("source", ALLOWED)
def test_the_guard_allows_what_containment_holds(source):
    assert guard.refusals(source) == []


REFUSED = {
    # source: (line, column, message fragment)
    'settings.gs = "/bin/sh";': (1, 1, "`settings.gs` names a program asy runs"),
    'settings.gsOptions += " -dNOSAFER";': (1, 1, "ghostscript options alone can start a shell"),
    "settings.dvisvgmOptions = '--no-specials';": (1, 1, "`settings.dvisvgmOptions`"),
    "settings.batchView = true;": (1, 1, "asy would start a viewer program"),
    'settings.libgs = "/tmp/x.so";': (1, 1, "`settings.libgs`"),
    'if (true) settings.texcommand = "x";': (1, 11, "`settings.texcommand`"),
    'settings.tex = "luatex";': (1, 1, "only pdfTeX keeps TeX from files and shells"),
    'settings.tex = "/usr/bin/pdflatex";': (1, 1, "asy runs the value as the TeX program"),
    'settings.tex = "pdf" + "latex";': (1, 1, "`settings.tex = ENGINE;`"),
    'settings.sysdir = "out";': (1, 1, "where modules load from"),
    'settings.user = "x";\nusersetting();': (1, 1, "text `usersetting()` runs as code"),
    "import settings;": (1, 8, "asy's `settings` other than as `settings.NAME`"),
    "access settings as s;": (1, 8, "an alias"),
    "unravel settings;": (1, 9, "an alias"),
    "from settings access gs;": (1, 6, "an alias"),
    "var s = settings;": (1, 9, "writes through it could not be seen"),
    '_eval("x;", true);': (1, 1, "`_eval` is asy's evaluator without the kit's check"),
    'plain.eval("x");': (1, 1, "module `plain` by name"),
    'import plain;\neval("x");': (1, 8, "module `plain` by name in a source that uses `eval`"),
    "from plain access eval;": (1, 6, "module `plain` by name"),
    'import "out/evil" as e;': (1, 1, "a path can name a file the diagram wrote"),
    'include "https://example.org/x.asy";': (1, 1, "file path or URL"),
    "import map;": (1, 1, "module 'map' runs text as asy code"),
    "\naccess graph, slide;": (2, 1, "module 'slide'"),
    'real operator "+"(real a) { return a; }': (1, 15, "cannot read this as asy does"),
}


@pytest.mark.parametrize("source", sorted(REFUSED))
def test_the_guard_refuses_at_the_place_it_names(source):
    line, column, fragment = REFUSED[source]
    first = guard.refusals(source)[0]
    assert (first.line, first.column) == (line, column), first
    assert fragment in first.message
    assert first.message.startswith("refused: ")
    assert first.context == source.splitlines()[line - 1].strip()


# -- text run as code: checked where asy runs it (prooflock.asy) ---------------------------------

RUN_TIME = {
    # source: the word the run-time check names
    'eval("sett" + "ings.gs = \\"/bin/sh\\";");': "settings",
    """eval("eval('set' + 'tings.gsOptions=\\"x\\";');");""": "settings",  # eval in eval'd text
    'string e = "_ev" + "al"; eval(e + "(\\"x\\", true);");': "_eval",
    'eval("import \\"out/evil\\" as e;");': "import",
    'type("int x; settings.gs=\\"y\\"; typedef int", "T");': "settings",
    'mapArray("int", "int; pla" + "in.eval(\\"\\")");': "plain",
}


@pytest.mark.parametrize("source", sorted(RUN_TIME))
def test_text_run_as_code_may_not_reach_what_the_guard_refuses(source, settings):
    assert guard.refusals(source) == []  # built at run time: only the run-time check sees it
    result = run_itp(
        "asymptote", source + "\ndraw((0,0)--(1,1));", name="t.asy", options={}, settings=settings
    )
    assert result.verdict is Verdict.FAIL
    word = RUN_TIME[source]
    assert any(
        f"refused: text run as code (eval) uses `{word}`" in d.message for d in result.diagnostics
    )


def test_text_run_as_code_draws_as_asy_would(settings):
    source = (
        'pen p; string[] names = {"red", "heavygreen"}; int i = 0;\n'
        'for (string s : names) { eval("p=" + s + ";", true); fill(shift(i, 0) * unitsquare, p); ++i; }\n'
        "label(string(cputime().parent.system), (0, -1));\n"  # CPU time reads 0, like the clock
    )
    result = run_itp("asymptote", source, name="colors.asy", options={}, settings=settings)
    assert result.verdict is Verdict.PASS, result.diagnostics
    again = run_itp(
        "asymptote",
        source,
        name="colors.asy",
        options={},
        settings=settings.model_copy(update={"cache": False}),
    )
    assert again.outputs == result.outputs


def test_the_lexer_builds_string_values_as_asy_does(tmp_path):
    literals = [
        r'"a\\b\"c\q"',
        r"'a\\b\'c\q\134\x5C\x5c\x,\7\77\477\n'",
        '"x"  \n  "y" \'z\'',
        '"p\\\nq"',
        r"'\?\a'",
        '"tab\there"',
    ]
    lines = [f"s = {literal};\nwrite(ascii_codes(s));" for literal in literals]
    program = (
        "string s;\nstring ascii_codes(string s) { string out;\n"
        "  for (int i = 0; i < length(s); ++i) out += ' ' + string(ascii(substr(s, i, 1)));\n"
        "  return out; }\n" + "\n".join(lines) + "\n"
    )
    (tmp_path / "strings.asy").write_text(program)
    done = subprocess.run(
        ["asy", "-noV", "strings.asy"],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    said = [[int(code) for code in line.split()] for line in done.stdout.splitlines()]
    values = [t.text for t in asy_source.tokenize(program) if t.kind == "string"][-len(literals) :]
    assert said == [[ord(c) for c in value] for value in values], done.stderr


def test_keyword_f1_counts_function_names_outside_comments_and_strings():
    source = 'if (x) draw("label(" + f (2)); // dot(\n/* fill( */ a.length();'
    assert asy_compare.functions_used(source) == {"draw", "f", "length"}
    assert asy_compare.keyword_f1("draw(a); dot(b);", "draw(c); fill(d);") == "0.5000"
    assert asy_compare.keyword_f1("x = 1;", "y = 2;") == "1.0000"


# -- the CLI -------------------------------------------------------------------------------------


@pytest.mark.slow
def test_cli_check_with_format_and_reference(cli, tmp_path):
    for name in ("triangle_labels.asy", "triangle_moved.asy", "fail_syntax.asy"):
        shutil.copy(ARTIFACTS / "asymptote" / name, tmp_path / name)
    done = cli(
        "check",
        "--prover",
        "asymptote",
        "--format",
        "svg",
        "--reference",
        "triangle_moved.asy",
        "triangle_labels.asy",
        "fail_syntax.asy",
    )
    assert done.returncode == 1, done.stderr
    good, bad = (json.loads(line) for line in done.stdout.splitlines())
    assert good["verdict"] == "pass" and good["trust"] == "kernel"
    render = next(output for output in good["outputs"] if output["role"] == "render")
    assert render["format"] == "svg" and SHA256.match(render["sha256"])
    assert good["comparison"]["reference"] == "triangle_moved.asy"
    assert bad["verdict"] == "fail" and bad["diagnostics"][0]["line"] == 3
    assert "Traceback" not in done.stderr
