"""The CRIU snapshot containers run, made once per machine under the snapshot dir.

Debian bookworm's CRIU (3.17) stops at its feature check on current kernels; trixie's (4.x) works.
This machine's apt downloads its package and the libraries it needs, trixie's glibc included. They
are unpacked, and patchelf points the binary's loader and library path at the bundle's own
directory. So it runs unchanged in a bookworm image, a trixie one or any other, mounted read-only at
`MOUNT`.

The guard (guard.c, compiled static here with libseccomp) goes with it. There is one file per
version of its source, so a changed guard makes new snapshots.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

from runner.core.apt_sources import HOST, host_mirror
from runner.core.errors import UserError

SUITE = "trixie"
MOUNT = "/opt/prooflock-criu"  # where containers see the bundle
# CRIU and every library it loads that a minimal image may lack or hold in an older version
PACKAGES = (
    "criu",
    "libc6",
    "libgcc-s1",
    "libprotobuf-c1",
    "libnl-3-200",
    "libnet1",
    "libbsd0",
    "libmd0",
    "libnftables1",
    "libnftnl11",
    "libmnl0",
    "libjansson4",
    "libxtables12",
    "libedit2",
    "libtinfo6",
    "libgnutls30t64",
    "libp11-kit0",
    "libidn2-0",
    "libunistring5",
    "libtasn1-6",
    "libffi8",
    "libhogweed6t64",
    "libnettle8t64",
    "libgmp10",
    "libuuid1",
    "libcap2",
)
LIBRARY_DIRS = ("usr/lib/x86_64-linux-gnu", "lib/x86_64-linux-gnu")
STEP_TIMEOUT_S = 300
SECCOMP_ARCHIVE = "/usr/lib/x86_64-linux-gnu/libseccomp.a"  # Debian's libseccomp-dev


class CriuUnavailable(Exception):
    """Why this machine has no CRIU for snapshots (said once; servers then boot)."""


@dataclass(frozen=True)
class Bundle:
    path: Path  # host directory, mounted read-only at MOUNT
    version: str  # `criu --version`'s first line and the guard's digest: in every snapshot's key
    guard_name: str

    @property
    def criu(self) -> str:
        return f"{MOUNT}/criu"

    @property
    def guard(self) -> str:
        return f"{MOUNT}/{self.guard_name}"


def bundle(root: Path, mirror: str | None = None) -> Bundle:
    """The bundle under `root`, made first if there is none; raises CriuUnavailable.

    `mirror`: the Debian archive to fetch CRIU from (`PROOFLOCK_APT_MIRROR`); else this machine's
    own.
    """
    done = root / "criu"
    if not (done / "VERSION").is_file():
        _make(done, mirror)
    source = files(__package__).joinpath("guard.c").read_bytes()
    name = f"guard-{hashlib.sha256(source).hexdigest()[:12]}"
    if not (done / name).is_file():
        _compile_guard(source, done / name)
    version = (done / "VERSION").read_text().strip()
    return Bundle(done, f"{version}, {name}", name)


def _compile_guard(source: bytes, target: Path) -> None:
    """Compile the guard next to the bundle, put in place whole (checks at once may race)."""
    if shutil.which("cc") is None:
        raise CriuUnavailable("`cc` is not installed (needed once, to make CRIU's bundle)")
    if not Path(SECCOMP_ARCHIVE).is_file():
        raise CriuUnavailable("libseccomp-dev is not installed (the guard's filter needs it)")
    with tempfile.TemporaryDirectory(prefix="guard-", dir=target.parent.parent) as work:
        (Path(work) / "guard.c").write_bytes(source)
        built = Path(work) / "guard"
        _run(["cc", "-O2", "-static", "-o", str(built), str(Path(work) / "guard.c"), "-lseccomp"])
        built.chmod(0o755)
        built.replace(target)


def _make(target: Path, mirror: str | None) -> None:
    for tool in ("apt-get", "dpkg-deb", "patchelf"):
        if shutil.which(tool) is None:
            raise CriuUnavailable(f"`{tool}` is not installed (needed once, to make CRIU's bundle)")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="criu-", dir=target.parent) as work:
        staging = Path(work) / "bundle"
        (staging / "lib").mkdir(parents=True)
        unpacked = Path(work) / "root"
        for deb in _download(Path(work) / "apt", mirror):
            _run(["dpkg-deb", "-x", str(deb), str(unpacked)])
        shutil.copy2(unpacked / "usr/sbin/criu", staging / "criu")
        for folder in LIBRARY_DIRS:
            for library in (
                sorted((unpacked / folder).glob("*.so*")) if (unpacked / folder).is_dir() else []
            ):
                shutil.copy2(library, staging / "lib" / library.name, follow_symlinks=True)
        _run(
            ["patchelf", "--set-interpreter", f"{MOUNT}/lib/ld-linux-x86-64.so.2"]
            + ["--force-rpath", "--set-rpath", f"{MOUNT}/lib", str(staging / "criu")]
        )
        version = _version(staging)
        (staging / "VERSION").write_text(version + "\n")
        staging.chmod(0o755)
        if target.exists() and not (target / "VERSION").is_file():
            shutil.rmtree(target, ignore_errors=True)  # left by a process killed midway
        try:
            staging.replace(target)
        except OSError as exc:  # another process made it meanwhile: theirs is as good
            if not (target / "VERSION").is_file():
                raise CriuUnavailable(f"cannot put the bundle in place: {exc}") from None


def _version(staging: Path) -> str:
    """Run the bundle as containers will (its loader, its libraries) from where it is now."""
    loader = staging / "lib" / "ld-linux-x86-64.so.2"
    argv = [str(loader), "--library-path", str(staging / "lib"), str(staging / "criu"), "--version"]
    output = _run(argv)
    first = output.strip().splitlines()[0] if output.strip() else ""
    if not first.startswith("Version: "):
        raise CriuUnavailable(f"the CRIU bundle does not run: {output.strip()[:200]}")
    digest = hashlib.sha256((staging / "criu").read_bytes()).hexdigest()[:12]
    return f"criu {first.removeprefix('Version: ')} ({SUITE}, {digest})"


def _download(folder: Path, mirror: str | None) -> list[Path]:
    """The packages, with apt's own resolver off: exactly PACKAGES from the suite."""
    for sub in ("lists/partial", "cache/archives/partial", "sources.d", "debs"):
        (folder / sub).mkdir(parents=True)
    (folder / "sources.list").write_text(f"deb [trusted=yes] {_archive(mirror)} {SUITE} main\n")
    (folder / "status").touch()
    options = [
        f"-oDir::Etc::sourcelist={folder / 'sources.list'}",
        f"-oDir::Etc::sourceparts={folder / 'sources.d'}",
        f"-oDir::State::Lists={folder / 'lists'}",
        f"-oDir::Cache={folder / 'cache'}",
        f"-oDir::State::status={folder / 'status'}",
        "-oAPT::Sandbox::User=root",
    ]
    _run(["apt-get", *options, "update", "-qq"])
    _run(["apt-get", *options, "download", *PACKAGES], cwd=folder / "debs")
    return sorted((folder / "debs").glob("*.deb"))


def _archive(mirror: str | None) -> str:
    """Debian's archive: `mirror` when given, else the one this machine's apt uses."""
    if mirror and mirror != HOST:
        return mirror
    release = Path("/etc/os-release")
    fields = (
        dict(line.split("=", 1) for line in release.read_text().splitlines() if "=" in line)
        if release.is_file()
        else {}
    )
    try:
        return host_mirror(fields.get("VERSION_CODENAME", "").strip('"'))
    except UserError as exc:
        raise CriuUnavailable(str(exc)) from None


def _run(argv: list[str], cwd: Path | None = None) -> str:
    try:
        done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=STEP_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CriuUnavailable(f"{argv[0]}: {exc}") from None
    if done.returncode != 0:
        tail = " ".join((done.stderr or done.stdout).strip().splitlines()[-2:])[:300]
        raise CriuUnavailable(f"{Path(argv[0]).name} failed: {tail}")
    return done.stdout + done.stderr
