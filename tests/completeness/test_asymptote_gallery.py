"""Completeness: Asymptote's own example gallery passes under the kit wherever bare asy renders it.

The gallery is Debian's `asymptote-doc` (/usr/share/doc/asymptote/examples/, one file each; a few
read data files beside them, which a single-file check does not have, so bare asy is given the
file alone too). Each example is rendered as PNG twice: by bare `asy -f png` in an empty
directory (asy's defaults, nothing of the kit), and by the kit. Every example bare asy renders
must pass under the kit; the kit may render more (3D as vectors, where bare asy wants an OpenGL
display). Bare asy runs where the kit's asy runs: on this host for the local backend (Debian's
asy also finds the gallery's own modules and data there), in the asymptote image for docker
(which has no gallery: examples that read a sibling file render in neither). A refusal of a real diagram is the failure this catches (round 2 refused
clockarray.asy for reading `settings.paperwidth`, colors.asy for `eval`).

By default a quick subset (QUICK, well under two minutes); `PROOFLOCK_ASY_GALLERY=full` runs all
of it (`nox -s bench` reports the same agreement and timings: benchmarks/asymptote.py). On the
docker backend only when the asymptote image is at its locked ID here.
"""

from __future__ import annotations

import functools
import os
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from runner.backends.base import Backend
from runner.check.checker import Checker
from runner.core.models import CheckRequest, Limits, Verdict
from runner.core.settings import Settings
from tests.support.docker_daemon import docker_skip_reason

EXAMPLES = Path("/usr/share/doc/asymptote/examples")
MISSING = (
    f"Asymptote's example gallery is not installed ({EXAMPLES}): install Debian's asymptote-doc "
    "(apt-get install -y asymptote-doc; on CI it belongs in .ci/run's apt list)"
)
# The two real diagrams round 2 refused, and a spread of label-heavy, graph, marker and fill
# examples that bare asy renders in a few seconds each (3D takes longer: the full run has it).
QUICK = ("clockarray", "colors", "Pythagoras", "lineargraph", "labelbox", "markers1", "venn")
FULL = os.environ.get("PROOFLOCK_ASY_GALLERY") == "full"
FORMAT = "png"
TIMEOUT_S = 120
BACKENDS = [
    pytest.param("local", id="local"),
    pytest.param("docker", id="docker", marks=pytest.mark.docker),
]


@dataclass(frozen=True)
class Bare:
    rendered: bool
    wall_ms: int
    said: str  # the last line asy printed, for a skip's reason


def gallery(full: bool = FULL) -> list[str]:
    """The examples' names (without .asy), all of them or the quick subset."""
    if not EXAMPLES.is_dir():
        return []
    every = sorted(path.stem for path in EXAMPLES.glob("*.asy"))
    return every if full else [name for name in QUICK if name in every]


@functools.cache
def bare_asy(name: str, fmt: str = FORMAT, timeout_s: int = TIMEOUT_S) -> Bare:
    """Bare asy on the example alone, in an empty directory with its own HOME."""
    with tempfile.TemporaryDirectory(prefix="bare-asy-") as work:
        (Path(work) / f"{name}.asy").write_bytes((EXAMPLES / f"{name}.asy").read_bytes())
        (Path(work) / "out").mkdir()
        started = time.monotonic()
        try:
            done = subprocess.run(
                ["asy", "-noV", "-f", fmt, "-o", f"out/{name}", f"{name}.asy"],
                cwd=work,
                env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": work},
                capture_output=True,
                timeout=timeout_s,
            )
            said = (done.stdout + done.stderr).decode(errors="replace").strip()
        except subprocess.TimeoutExpired:
            said = f"no render within {timeout_s} s"
        wall_ms = int((time.monotonic() - started) * 1000)
        rendered = (Path(work) / "out" / f"{name}.{fmt}").is_file()
        return Bare(rendered, wall_ms, said.splitlines()[-1] if said else "")


def bare_asy_in(backend: Backend, name: str, fmt: str = FORMAT, timeout_s: int = TIMEOUT_S) -> Bare:
    """Bare asy on the example alone, in a sandbox of `backend` (the image's asy on docker)."""
    with backend.sandbox("asymptote", Limits(timeout_s=timeout_s, memory_mb=4096)) as box:
        box.write_file(f"{name}.asy", (EXAMPLES / f"{name}.asy").read_bytes())
        script = 'mkdir -p out && exec asy -noV -f "$1" -o "out/$2" "$2.asy"'
        done = box.run(["sh", "-c", script, "sh", fmt, name], timeout_s=timeout_s)
        try:
            box.read_file(f"out/{name}.{fmt}")
            rendered = True
        except FileNotFoundError:
            rendered = False
    said = done.text.strip()
    return Bare(rendered, done.wall_ms, said.splitlines()[-1] if said else "")


def request(name: str, fmt: str = FORMAT, timeout_s: int = TIMEOUT_S) -> CheckRequest:
    return CheckRequest(
        prover="asymptote",
        mode="render",
        name=f"{name}.asy",
        content=(EXAMPLES / f"{name}.asy").read_text(encoding="utf-8", errors="replace"),
        timeout=timeout_s,
        options={"format": fmt},
    )


@functools.cache
@dataclass
class Side:
    """One backend: the kit's checker there, and bare asy where the kit's asy runs."""

    checker: Checker
    bare: Callable[[str], Bare]


@pytest.fixture(scope="module")
def sides(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Side]]:
    made: dict[str, Side] = {}
    yield made
    for side in made.values():
        side.checker.close()


@pytest.fixture
def side(request, sides, tmp_path_factory) -> Side:
    backend = request.param
    if backend == "docker" and (reason := docker_skip_reason()):
        pytest.skip(reason)
    if backend not in sides:
        settings = Settings(
            backend=backend,
            cache=False,
            retries=0,
            timeout=TIMEOUT_S,
            cache_dir=tmp_path_factory.mktemp(f"cache-{backend}"),
        )
        checker = Checker(settings)
        if backend == "local":
            bare = bare_asy
        else:
            image = checker.backend_for("asymptote")
            bare = functools.cache(functools.partial(bare_asy_in, image))
        sides[backend] = Side(checker, bare)
    return sides[backend]


@pytest.mark.slow
@pytest.mark.parametrize("side", BACKENDS, indirect=True)
@pytest.mark.parametrize("name", gallery() or ["(asymptote-doc not installed)"])
def test_an_example_bare_asy_renders_passes_under_the_kit(name, side):
    if not EXAMPLES.is_dir():
        pytest.skip(MISSING)
    bare = side.bare(name)
    if not bare.rendered:
        pytest.skip(f"bare asy renders no {FORMAT} from {name}.asy alone: {bare.said[:200]}")
    result = side.checker.check_one(request(name))
    assert result.verdict is Verdict.PASS, [d.message for d in result.diagnostics]
    [render] = [output for output in result.outputs if output.role == "render"]
    assert render.format == FORMAT
