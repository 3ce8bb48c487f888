"""prooflock installed from a wheel works from any directory: it carries the image definitions and
the images lock, reads them from its own copy, checks artifacts, and never writes that lock.

The wheel is built from a copy of the checkout (so the checkout gets no build/ directory) and
installed into a fresh venv that borrows the dependencies this test runs with (no downloads).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
SOURCES = [
    "runner",
    "images",
    "manifests/images.lock.json",
    "manifests/base.Packages",
    "manifests/advisories",
    "pyproject.toml",
    "README.md",
]
PROOF = "Lemma one_plus_one : 1 + 1 = 2.\nProof. reflexivity. Qed.\n"


class Installed:
    def __init__(self, venv: Path, workdir: Path):
        self.venv, self.workdir = venv, workdir
        self.env = {
            k: v for k, v in os.environ.items() if k not in ("PROOFLOCK_HOME", "PYTHONPATH")
        }
        self.env["PROOFLOCK_CACHE_DIR"] = str(workdir / "cache")  # a real check, not a cached one

    def prooflock(self, *argv: str) -> subprocess.CompletedProcess[str]:
        """`prooflock ARGV` from the venv, run in a directory that is no checkout."""
        return subprocess.run(
            [str(self.venv / "bin" / "prooflock"), *argv],
            cwd=self.workdir,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    def listing(self) -> dict:
        done = self.prooflock("images", "list", "--json")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)


def run(*argv: str | Path, cwd: Path | None = None) -> None:
    done = subprocess.run([str(a) for a in argv], cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0, f"{argv}: {done.stdout[-2000:]}{done.stderr[-2000:]}"


def borrow_dependencies(venv: Path) -> None:
    """Let the venv import what this interpreter imports from its site-packages (a nox venv's,
    not only the system's, which is all `--system-site-packages` would give), after its own."""
    borrowed = [p for p in sys.path if Path(p).name in ("site-packages", "dist-packages")]
    purelib = subprocess.run(
        [venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    added = "; ".join(f"site.addsitedir({path!r})" for path in borrowed)
    (Path(purelib) / "borrowed-dependencies.pth").write_text(f"import site; {added}\n")


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Installed:
    tmp = tmp_path_factory.mktemp("install")
    source = tmp / "source"
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(
                ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__")
            )
        else:
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    run(sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "-w", tmp / "dist", cwd=source)
    (wheel,) = (tmp / "dist").glob("prooflock-*.whl")
    venv = tmp / "venv"
    run(sys.executable, "-m", "venv", venv)
    borrow_dependencies(venv)
    # --ignore-installed: this interpreter has prooflock (editable) too; the venv gets its own.
    run(venv / "bin" / "python", "-m", "pip", "install", "--no-deps", "--ignore-installed", wheel)
    workdir = tmp / "elsewhere"
    workdir.mkdir()
    return Installed(venv, workdir)


def test_the_installed_copy_reads_its_own_lock_and_definitions(installed):
    version = installed.prooflock("--version")
    assert version.returncode == 0 and version.stdout.startswith("prooflock "), version.stderr

    listing = installed.listing()

    assert listing["schema"] == "prooflock.images/1"
    lock, images_root = Path(listing["lock"]), Path(listing["images_root"])
    assert lock.is_relative_to(installed.venv) and not lock.is_relative_to(ROOT)
    assert lock.read_bytes() == (ROOT / "manifests" / "images.lock.json").read_bytes()
    assert sorted(p.name for p in images_root.iterdir()) == sorted(
        p.name for p in (ROOT / "images").iterdir()
    )
    assert listing["lock_writable"] is False
    checkout = json.loads((ROOT / "manifests" / "images.lock.json").read_text())
    ids = {row["name"]: row["image_id"] for row in listing["images"]}
    assert ids == {
        "base": checkout["base"]["image_id"],
        **{name: entry["image_id"] for name, entry in checkout["bases"].items()},
        **{name: entry["image_id"] for name, entry in checkout["images"].items()},
    }


def test_the_installed_copy_checks_a_rocq_file_from_any_directory(installed):
    (installed.workdir / "one.v").write_text(PROOF)

    done = installed.prooflock("check", "--prover", "rocq", "--backend", "local", "one.v")

    assert done.returncode == 0, done.stderr
    (line,) = done.stdout.splitlines()
    result = json.loads(line)
    assert (result["artifact"], result["verdict"], result["backend"]) == ("one.v", "pass", "local")
    # The advisory data travels in the wheel: Rocq 8.16.1's known bugs are counted on stderr.
    assert "advisories apply to this environment" in done.stderr, done.stderr


def test_the_installed_lock_is_never_written(installed):
    lock = Path(installed.listing()["lock"])
    before = lock.read_bytes()

    done = installed.prooflock("images", "pin", "rocq")

    assert done.returncode == 2
    assert "installed with the package and is never written" in done.stderr
    assert lock.read_bytes() == before


@pytest.mark.docker
def test_the_installed_definitions_are_the_ones_the_images_were_built_from(installed):
    """The locked images count as current for the installed copy exactly as for the checkout:
    its definitions hash as the lock says (nothing lost or changed on the way into the wheel)."""
    listing = installed.listing()
    states = {row["name"]: row["state"] for row in listing["images"]}
    assert "unchecked" not in states.values(), "no Docker daemon answered"
    here = subprocess.run(
        [sys.executable, "-m", "runner", "images", "list", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert states == {row["name"]: row["state"] for row in json.loads(here.stdout)["images"]}
    if states["rocq"] == "present":
        done = installed.prooflock("images", "build", "rocq")
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("rocq: ") and done.stdout.rstrip().endswith("nothing to do")
