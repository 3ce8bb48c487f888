"""Sessions: `tests` (everything, slow and docker tests included), `lint`, `reproduce`, `bench`."""

from __future__ import annotations

from pathlib import Path

import nox

nox.options.sessions = ["tests"]
nox.options.reuse_existing_virtualenvs = True
PYTHON = "3.11"
EXAMPLE = "manifests/results/rocq-example.jsonl"


# The images this machine can build (lean, isabelle and ag4masses need GitHub or isabelle.in.tum.de).
BUILDABLE_IMAGES = ["rocq", "hol-light", "asymptote", "newclid"]


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """The whole suite, after making sure the buildable images are present (reused when their
    pins match the lock). `nox -s tests -- -m "not docker"` skips the images and docker tests."""
    session.install("-e", ".[test]")
    if "not docker" not in " ".join(session.posargs):
        session.run("prooflock", "images", "base")
        session.run("prooflock", "images", "build", *BUILDABLE_IMAGES)
    session.run("pytest", "--durations=15", *session.posargs)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    session.install("ruff==0.17.6")
    session.run("ruff", "check", "runner", "tests", "benchmarks", "noxfile.py")


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Speed ratios measured side by side: `nox -s bench -- core asymptote` picks benchmarks."""
    session.install("-e", ".[test]")
    chosen = session.posargs or sorted(p.stem for p in Path("benchmarks").glob("*.py"))
    for name in chosen:
        session.log(f"benchmark: {name}")
        session.run("python", f"benchmarks/{name}.py")


@nox.session(python=PYTHON)
def reproduce(session: nox.Session) -> None:
    """Replay a published result (default: the bundled Rocq example) and print what matches."""
    session.install("-e", ".")
    session.run("prooflock", "replay", *(session.posargs or [EXAMPLE]))
