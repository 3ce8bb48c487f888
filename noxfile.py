"""Sessions: `tests` (everything, slow, docker and browser tests included), `lint`, `reproduce`,
`bench`. The images a session builds are read from the lock: every image recorded as built that
needs no vendored download (lean, isabelle and ag4masses need GitHub or isabelle.in.tum.de)."""

from __future__ import annotations

import json
from pathlib import Path

import nox

nox.options.sessions = ["tests"]
nox.options.reuse_existing_virtualenvs = True
PYTHON = "3.11"
LOCK = Path("manifests/images.lock.json")
EXAMPLE = "manifests/results/example"  # recorded on the docker backend with the locked images
EXAMPLE_LOCAL = "manifests/results/example-local"  # the same requests on the local backend


def buildable_images() -> list[str]:
    images = json.loads(LOCK.read_text())["images"]
    return sorted(
        name
        for name, entry in images.items()
        if entry["status"] == "built" and not entry["built_with"].get("files")
    )


def example_images(bundle: str) -> list[str]:
    """The lock names of the images a bundle's records were checked in."""
    used = json.loads((Path(bundle) / "images.lock.json").read_text())["images"]
    return sorted(used)


def docker_answers(session: nox.Session) -> bool:
    try:
        session.run("docker", "info", silent=True, external=True)
    except nox.command.CommandFailed:
        return False
    return True


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """The whole suite, after making sure the buildable images are present (reused when their
    pins match the lock). `nox -s tests -- -m "not docker"` skips the images and docker tests."""
    session.install("-e", ".[test]")
    if "not docker" not in " ".join(session.posargs):
        session.run("prooflock", "images", "base")
        session.run("prooflock", "images", "build", *buildable_images())
    session.run("pytest", "--durations=20", *session.posargs)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff (lint and format) on everything, mypy on the package, the import layers contract."""
    session.install("-e", ".[dev]")
    session.run("ruff", "check", "runner", "tests", "benchmarks", "noxfile.py")
    session.run("ruff", "format", "--check", "runner", "tests", "benchmarks", "noxfile.py")
    session.run("mypy")
    session.run("lint-imports")
    for folder in sorted(Path("runner/provers").glob("*/sandbox")):  # scripts run in sandboxes
        session.run("mypy", "--ignore-missing-imports", *map(str, sorted(folder.glob("*.py"))))


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Speed ratios measured side by side: `nox -s bench -- --quick` for CI's subset."""
    session.install("-e", ".[test]")
    session.run("python", "-m", "benchmarks", *session.posargs)


@nox.session(python=PYTHON)
def reproduce(session: nox.Session) -> None:
    """Replay a published result on its pinned images: the bundled example, or
    `nox -s reproduce -- BUNDLE|s3://...`. Builds (or reuses) the images it needs first."""
    session.install("-e", ".")
    if session.posargs:
        session.run("prooflock", "replay", *session.posargs)
        return
    if not docker_answers(session):
        session.warn(
            "no Docker daemon answers: the pinned images cannot run here. Replaying the "
            f"LOCAL-BACKEND variant ({EXAMPLE_LOCAL}) instead; its environment key is this "
            "host's packages, so differences there are expected. Start dockerd for the real one."
        )
        session.run("prooflock", "replay", EXAMPLE_LOCAL, "--backend", "local")
        return
    session.run("prooflock", "images", "base")
    session.run("prooflock", "images", "build", *example_images(EXAMPLE))
    session.run("prooflock", "replay", EXAMPLE, "--backend", "docker")
