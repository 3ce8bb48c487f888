"""Sessions: `tests` (everything, slow, docker and browser tests included), `lint`, `reproduce`,
`bench`.

`tests` and `reproduce` bring up what they need on a fresh Debian machine when it is missing,
saying so in one line each: the Debian packages (apt, as root): the kit's, then those each
prover's adapter says its local backend needs, with the files its set-up script makes; and a
Docker daemon (`dockerd`, as root). Run again, they find it all there. No prover is named here:
what they need is read from the prover registry and the image lock.

The images they build are read from the lock: every image recorded as built that needs no
vendored download (those need GitHub or another upstream site). They are built from their
locked closures (the locked IDs); where a closure cannot be had any more they are built with
`--allow-drift`, which says package by package what differs, so a Debian update never breaks a
session."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import nox

nox.options.sessions = ["tests"]
nox.options.reuse_existing_virtualenvs = True
PYTHON = "3.11"
LOCK = Path("manifests/images.lock.json")
EXAMPLE = "manifests/results/example"  # recorded on the docker backend with the locked images
EXAMPLE_LOCAL = "manifests/results/example-local"  # the same requests on the local backend
# What the kit needs on the host whatever the prover: Docker and debootstrap for the images,
# gpgv and Debian's keyring to read mirrors' indexes, bubblewrap for the local backend's sandbox,
# patchelf, gcc and libseccomp's headers for the snapshots' CRIU bundle. What each prover's local
# backend needs is its adapter's word (`provers_needs`), so adding a prover touches no line here.
KIT_PACKAGES = [
    "docker.io",
    "debootstrap",
    "gpgv",
    "debian-archive-keyring",
    "bubblewrap",
    "patchelf",
    "gcc",
    "libseccomp-dev",  # the snapshot guard's allow-list, linked static
]
TEST_PACKAGES = ["chromium"]  # the report's browser test
# Run in a session's virtualenv, once the kit is installed there: the registry's host needs.
PROVERS_NEEDS = """
import json
from runner import provers
adapters = [provers.get(name) for name in provers.names()]
print(json.dumps({
    "host": sorted({name for a in adapters for name in a.host_packages}),
    "corpora": sorted({name for a in adapters for name in a.corpus_packages}),
    "setup": sorted({(a.host_setup.makes, a.host_setup.script) for a in adapters if a.host_setup}),
}))
"""
DOCKERD_LOG = Path("/var/log/dockerd.log")
DOCKERD_WAIT_S = 90


def buildable_images() -> list[str]:
    images = json.loads(LOCK.read_text())["images"]
    return sorted(
        name
        for name, entry in images.items()
        if entry["status"] == "built" and not entry.get("vendored")
    )


def example_images(bundle: str) -> list[str]:
    """The lock names of the images a bundle's records were checked in."""
    used = json.loads((Path(bundle) / "images.lock.json").read_text())["images"]
    return sorted(used)


# -- what a fresh machine lacks ----------------------------------------------------------------


def ensure_packages(session: nox.Session, packages: list[str]) -> None:
    """Install the Debian packages that are missing (as root), saying which in one line."""
    missing = [name for name in packages if not _installed(name)]
    if not missing:
        return
    if os.geteuid() != 0:
        session.warn(
            f"missing Debian packages, not installed (not root): apt-get install {' '.join(missing)}"
        )
        return
    session.log(f"installing {len(missing)} Debian packages: {' '.join(missing)}")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env, stdout=subprocess.DEVNULL)
    subprocess.run(
        ["apt-get", "install", "-y", "-qq", *missing],
        check=True,
        env=env,
        stdout=subprocess.DEVNULL,
    )


def _installed(package: str) -> bool:
    done = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Status}", package], capture_output=True, text=True
    )
    return done.returncode == 0 and done.stdout.endswith(" installed")


def provers_needs(session: nox.Session) -> dict[str, list]:
    """What the provers' local backends need on the host, as their adapters declare it."""
    said = session.run("python", "-c", PROVERS_NEEDS, silent=True, log=False)
    return json.loads(str(said).strip().splitlines()[-1])


def ensure_provers(session: nox.Session, *, corpora: bool = False) -> None:
    """The provers' Debian packages (their test corpora's too, with `corpora`), then each file a
    local install needs that no package holds, made by its script (as root)."""
    needs = provers_needs(session)
    ensure_packages(session, [*needs["host"], *(needs["corpora"] if corpora else [])])
    for makes, script in needs["setup"]:
        if Path(makes).exists() or os.geteuid() != 0:
            continue
        session.log(f"making {makes} for a local install ({script})")
        subprocess.run(["sh", script], check=True, stdout=subprocess.DEVNULL)


def ensure_docker(session: nox.Session) -> bool:
    """Whether a Docker daemon answers, after starting `dockerd` in the background (as root)."""
    if _docker_answers():
        return True
    if os.geteuid() != 0 or shutil.which("dockerd") is None:
        return False
    session.log(f"starting dockerd in the background (log: {DOCKERD_LOG})")
    with DOCKERD_LOG.open("ab") as log:
        subprocess.Popen(["dockerd"], stdout=log, stderr=log, start_new_session=True)
    deadline = time.monotonic() + DOCKERD_WAIT_S
    while time.monotonic() < deadline:
        if _docker_answers():
            return True
        time.sleep(1)
    session.warn(f"dockerd did not answer within {DOCKERD_WAIT_S} s: see {DOCKERD_LOG}")
    return False


def _docker_answers() -> bool:
    if shutil.which("docker") is None:
        return False
    done = subprocess.run(["docker", "info"], capture_output=True)
    return done.returncode == 0


def build_images(session: nox.Session, names: list[str]) -> None:
    """The bases `names` are built on, then `names`, from their locked closures; drifted (and
    said so) where those cannot be had."""
    images = json.loads(LOCK.read_text())["images"]
    for base in sorted({images[name].get("base", "base") for name in names} | {"base"}):
        session.run("prooflock", "images", "base", base, "--allow-drift")
    session.run("prooflock", "images", "build", "--allow-drift", *names)


# -- sessions ----------------------------------------------------------------------------------


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """The whole suite, after making sure the buildable images are present (reused when their
    pins match the lock). `nox -s tests -- -m "not docker"` skips the images and docker tests."""
    ensure_packages(session, [*KIT_PACKAGES, *TEST_PACKAGES])
    session.install("-e", ".[test]")
    ensure_provers(session, corpora=True)
    if "not docker" not in " ".join(session.posargs):
        if not ensure_docker(session):
            session.error("no Docker daemon answers: start one, or pass -- -m 'not docker'")
        build_images(session, buildable_images())
    # One process per core; each module runs whole in one, and the modules sharing a prover's
    # minutes-long boots share one (`--dist loadgroup`, tests/conftest.py). `-- -n 0`: one process.
    session.run("pytest", "-n", "auto", "--dist", "loadgroup", "--durations=20", *session.posargs)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff (lint and format) on everything, mypy on the package, the import layers contract."""
    session.install("-e", ".[dev]")
    session.run("ruff", "check", "runner", "tests", "benchmarks", "noxfile.py")
    session.run("ruff", "format", "--check", "runner", "tests", "benchmarks", "noxfile.py")
    session.run("mypy")
    session.run("lint-imports")
    for folder in sorted(Path("runner/provers").glob("*/sandbox")):  # scripts run in sandboxes
        if scripts := sorted(folder.glob("*.py")):  # a sandbox/ of OCaml or shell has none
            session.run("mypy", "--ignore-missing-imports", *map(str, scripts))


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Speed ratios measured side by side: `nox -s bench -- --quick` for CI's subset."""
    session.install("-e", ".[test]")
    session.run("python", "-m", "benchmarks", *session.posargs)


@nox.session(python=PYTHON)
def reproduce(session: nox.Session) -> None:
    """Replay a published result on its pinned images: the bundled example, or
    `nox -s reproduce -- BUNDLE|s3://...`. Builds (or reuses) the images it needs first: the
    locked ones when their closures can be had, drifted rebuilds (said so) otherwise."""
    ensure_packages(session, KIT_PACKAGES)
    session.install("-e", ".")
    ensure_provers(session)
    if session.posargs:
        session.run("prooflock", "replay", *session.posargs)
        return
    if not ensure_docker(session):
        session.warn(
            "no Docker daemon answers: the pinned images cannot run here. Replaying the "
            f"LOCAL-BACKEND variant ({EXAMPLE_LOCAL}) instead; its environment key is this "
            "host's packages, so differences there are expected. Start dockerd for the real one."
        )
        session.run(
            "prooflock", "replay", EXAMPLE_LOCAL, "--backend", "local", success_codes=[0, 4]
        )
        return
    build_images(session, example_images(EXAMPLE))
    # Exit 4 is "reproduced on a drifted environment": same verdicts and result digests on a
    # rebuild whose packages moved on (the replay lists the drift). That is a reproduction.
    session.run("prooflock", "replay", EXAMPLE, "--backend", "docker", success_codes=[0, 4])
