"""Asymptote: real asy renders diagrams in safe mode, byte-identically, and compares them."""

from __future__ import annotations

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
from runner.backends.base import Limits
from runner.backends.local import LocalBackend
from runner.models import CheckRequest, Outcome, Verdict
from runner.provers import asy_compare, asy_diagnostics, asymptote
from runner.settings import Settings
from tests.conftest import ARTIFACTS, artifact

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
    """The adapter's outcome and the output file it left in its (still open) sandbox."""
    request = CheckRequest(
        prover="asymptote",
        mode="render",
        name=name,
        content=artifact("asymptote", name),
        timeout=30,
        options={"format": fmt},
    )
    with LocalBackend().sandbox("asymptote", Limits(timeout_s=30, memory_mb=4096)) as box:
        outcome = asymptote.check(request, box)
        return outcome, box.read_file(f"artifact/diagram.{fmt}")


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
def test_labelled_diagram_renders_and_the_digest_is_of_the_file_written(fmt):
    outcome, data = render_in_sandbox("triangle_labels.asy", fmt)
    assert outcome.verdict is Verdict.PASS, outcome.diagnostics
    assert outcome.details["outputs"] == {fmt: hashlib.sha256(data).hexdigest()}
    if fmt == "svg":
        assert data.count(b"<use ") >= 5  # the label glyphs (A, B, C, 1, a, b) are drawn
    elif fmt == "png":
        width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
        assert width > 100 and height > 100


def test_record_carries_the_output_digest_and_no_comparison_without_reference(settings):
    result = render("squares_grid.asy", settings, fmt="svg")
    assert result.verdict is Verdict.PASS
    assert list(result.details) == ["outputs"]
    assert SHA256.match(result.details["outputs"]["svg"])


@pytest.mark.slow
@pytest.mark.parametrize("fmt", asymptote.FORMATS)
def test_two_runs_give_identical_bytes(fmt, uncached):
    first = render("triangle_labels.asy", uncached, fmt=fmt)
    time.sleep(1.1)  # a stamped date or a clock-seeded ID would now differ
    second = render("triangle_labels.asy", uncached, fmt=fmt)
    assert not first.provenance.cached and not second.provenance.cached
    assert first.details["outputs"] == second.details["outputs"]
    assert first.result_digest == second.result_digest


@pytest.mark.slow
@pytest.mark.parametrize("name", ["stamps_back_on.asy", "pdflatex_engine.asy"])
def test_pdf_stays_identical_when_the_artifact_turns_stamps_back_on(name, uncached):
    first = render(name, uncached, fmt="pdf")
    time.sleep(1.1)
    second = render(name, uncached, fmt="pdf")
    assert first.verdict is Verdict.PASS, first.diagnostics
    assert first.details["outputs"] == second.details["outputs"]


# -- failures, located ---------------------------------------------------------------------------

LOCATED = {
    # name: (line, column, message fragment)
    "fail_syntax.asy": (3, 1, "syntax error"),
    "fail_undefined.asy": (3, 10, "no matching variable 'circumcentre'"),
    "fail_missing_module.asy": (2, 1, "could not load module 'nosuchmodule'"),
    "write_outside.asy": (2, 1, "Write to other directories disabled"),
    "write_parent.asy": (2, 1, "Write to other directories disabled"),
    "turn_off_safe_mode.asy": (2, 1, "refused"),
}


@pytest.mark.parametrize("name", sorted(LOCATED))
def test_rejected_diagram_fails_at_the_line_asy_names(name, settings):
    result = render(name, settings)
    assert result.verdict is Verdict.FAIL
    assert result.details["outputs"] == {}
    line, column, fragment = LOCATED[name]
    first = result.diagnostics[0]
    assert (first.line, first.column) == (line, column)
    assert fragment in first.message
    assert first.context == artifact("asymptote", name).splitlines()[line - 1].strip()


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
            "ASYMPTOTE_DIR": asy_diagnostics.EXTRA_MODULE_DIR,
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


def test_asy_killing_its_process_group_fails_the_artifact_not_the_kit(settings):
    # asy answers a TeX command it cannot start with SIGPIPE to its whole process group; this
    # test process survives only because each command runs in a session of its own.
    result = render("kills_its_group.asy", settings)
    assert result.verdict is Verdict.FAIL
    assert "cannot execute prooflock-no-such-tex" in result.diagnostics[0].message


def test_infinite_loop_times_out(settings):
    result = render("diverge.asy", settings, timeout=3)
    assert result.verdict is Verdict.TIMEOUT
    assert result.provenance.wall_ms < 30_000


@pytest.mark.slow
def test_latex_label_cannot_write_outside_or_run_commands(settings):
    # TeX refuses the write (openout_any=p) and then waits for another file name: a timeout.
    result = render("latex_escape.asy", settings, timeout=5)
    assert result.verdict is not Verdict.PASS


# -- comparison with a reference -----------------------------------------------------------------


@pytest.mark.slow
def test_identical_diagram_scores_one_and_a_different_one_lower(settings):
    same = render("triangle_labels.asy", settings, reference="triangle_labels.asy")
    moved = render("triangle_labels.asy", settings, fmt="svg", reference="triangle_moved.asy")
    other = render("triangle_labels.asy", settings, fmt="pdf", reference="squares_grid.asy")
    assert same.details["comparison"] == {
        "reference": "triangle_labels.asy",
        "artifact_compiles": True,
        "reference_compiles": True,
        "keyword_f1": "1.0000",
        "ssim": "1.0000",
    }
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
    broken = render("fail_syntax.asy", settings, reference="triangle_labels.asy")
    assert broken.verdict is Verdict.FAIL
    assert broken.details["comparison"]["artifact_compiles"] is False


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
    assert good["verdict"] == "pass" and SHA256.match(good["outputs"]["svg"])
    assert good["comparison"]["reference"] == "triangle_moved.asy"
    assert bad["verdict"] == "fail" and bad["diagnostics"][0]["line"] == 3
    assert "Traceback" not in done.stderr
