"""An image's inputs that are not `.deb`s: where the host fetches them, and what a build lacks.

The lock lists each by file name, kind, sha256 and size (runner.images.lock's `Download`). The host
fetches them, never the build:
- wheels with the host's own pip, with its trust store, proxy and index settings (so a
  TLS-intercepting proxy needs nothing more);
- Debian source files from the build's mirror or the lock's snapshot;
- anything else from its URL with the host's trust store;
- or a copy given by hand (`--input NAME=PATH`).

Every file is checked by sha256 and size before it enters the store (runner.images.store). The build
takes it from there.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

from runner.core.errors import UserError
from runner.images.debian import MirrorUnreachable, download
from runner.images.exact import sources
from runner.images.inputs import BuildInputs
from runner.images.lock import Download, Downloads, ImageEntry, ImagesLock
from runner.images.store import Gathered, InputStore, Source, Stored, gather

PYPI = "pypi:"  # a wheel's origin: `pypi:NAME==VERSION`, fetched with the host's pip
GIT = "git:"  # a git bundle's origin: `git:URL@COMMIT:FOLDER`, made by the host's git
# A download whose sha256 no machine that wrote the lock could know (its origin was out of
# reach): `images vendor` pins it on first use and writes the lock; a build refuses it.
UNPINNED = "0" * 64
REQUIREMENT = re.compile(
    r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>\S+)\s+--hash=sha256:(?P<sha>[0-9a-f]{64})"
)
# The images' Python: Debian bookworm's python3 (CPython 3.11, glibc 2.36, x86_64). pip takes
# every platform a wheel may name (it does not widen `--platform` to older glibc versions).
MANYLINUX = [f"manylinux_2_{minor}_x86_64" for minor in range(36, 4, -1)] + [
    "manylinux2014_x86_64",
    "manylinux2010_x86_64",
    "manylinux1_x86_64",
]
PIP_TARGET = [
    "--python-version=3.11",
    "--implementation=cp",
    "--abi=cp311",
    "--abi=abi3",
    "--abi=none",
    *(f"--platform={platform}" for platform in MANYLINUX),
]
PIP_TIMEOUT_S = 600
# Where a build finds its wheels: `build/wheels/` in the context, with a PEP 503 index that
# images/common/pip-install reads as its index (PIP_INDEX_URL): the wheels pip installs are the
# same files as from PyPI, so the installed files are too.
WHEEL_INDEX_URL = "file:///tmp/build/wheels/simple"


def requirements(path: Path) -> dict[str, tuple[str, str]]:
    """A hash-pinned requirements file → {name: (version, sha256)}: one wheel each."""
    text = path.read_text().replace("\\\n", " ")
    found = {}
    for line in text.splitlines():
        match = REQUIREMENT.match(line.strip())
        if match:
            found[match["name"]] = (match["version"], match["sha"])
    return found


def context_path(filename: str, download: Download) -> str:
    """Where the build finds a download, below `build/` (what fetch and git-export read)."""
    return f"{'wheels' if download.kind == 'wheel' else 'files'}/{filename}"


def context_files(downloads: Downloads, paths: Mapping[str, Path]) -> dict[str, Path]:
    """The gathered downloads by their place in the context."""
    return {context_path(name, downloads[name]): path for name, path in paths.items()}


def build_args(downloads: Downloads) -> dict[str, str]:
    if any(download.kind == "wheel" for download in downloads.values()):
        return {"PIP_INDEX_URL": WHEEL_INDEX_URL}
    return {}


def wheel_index(downloads: Downloads) -> dict[str, bytes]:
    """A PEP 503 index of the wheels (`wheels/simple/<project>/index.html`).

    Each link carries its sha256, as pip's --require-hashes wants.
    """
    projects: dict[str, list[str]] = {}
    for filename, item in sorted(downloads.items()):
        if item.kind == "wheel":
            project = re.sub(r"[-_.]+", "-", filename.split("-")[0]).lower()
            projects.setdefault(project, []).append(filename)
    pages = {}
    for project, files in projects.items():
        links = "".join(
            f'<a href="../../{f}#sha256={downloads[f].sha256}">{f}</a><br>\n' for f in files
        )
        pages[f"wheels/simple/{project}/index.html"] = (
            f"<!DOCTYPE html>\n<html><body>\n{links}</body></html>\n".encode()
        )
    return pages


def missing_line(name: str, entry: ImageEntry, gathered: Gathered) -> str:
    """What a build of `name` lacks, in one line, with the command that fills it."""
    first = gathered.missing[0]
    more = f" (and {len(gathered.missing) - 1} more)" if len(gathered.missing) > 1 else ""
    origin = entry.downloads[first.package].origin
    return (
        f"{name}: the input {first.package} {first.version}{more} is not in the store and could "
        f"not be fetched from {origin}: run `prooflock images vendor {name}` where it can be "
        f"(or give it: --input {first.package}=PATH)"
    )


def unpinned_line(name: str, entry: ImageEntry) -> str | None:
    """What a build of `name` refuses first when the lock has not pinned all its downloads."""
    unpinned = sorted(file for file, item in entry.downloads.items() if item.sha256 == UNPINNED)
    if not unpinned:
        return None
    first = entry.downloads[unpinned[0]]
    more = f" (and {len(unpinned) - 1} more)" if len(unpinned) > 1 else ""
    return (
        f"{name}: the input {unpinned[0]} ({first.kind}){more} has no sha256 in the lock yet: "
        f"run `prooflock images vendor {name}` where {_host(first.origin)} answers (it pins "
        "each on first use and writes the lock)"
    )


def pin_download(item: Download, target: Path) -> Download | None:
    """Trust on first use: fetch an unpinned download from its origin and return it pinned.

    The file goes into `target`. Pinned means sha256 and size; a git ref is resolved to its commit.
    None when the origin fails.
    """
    origin = item.origin
    if origin.startswith(GIT):
        repository, ref, folder = git_origin(origin)
        commit = bundle_from(repository, ref, folder, target)
        if commit is None:
            return None
        origin = f"{GIT}{repository}@{commit}:{folder}"
    elif not UrlSource().fetch(item, target):
        return None
    with target.open("rb") as data:
        sha256 = hashlib.file_digest(data, "sha256").hexdigest()
    return item.model_copy(
        update={"sha256": sha256, "size": target.stat().st_size, "origin": origin}
    )


def lake_packages(file: str, bundle: Path) -> Downloads:
    """The packages a Lean project's bundle pins in its lake-manifest.json, as unpinned downloads.

    Each is `<project>-lake-<package>.bundle`, at its manifest's commit. Its `lake build` needs them
    beside it: images/lean/lake-packages puts them in .lake/packages.
    """
    project = file.removesuffix(".bundle")
    with tempfile.TemporaryDirectory(prefix="prooflock-git-") as tmp:
        work = Path(tmp) / "repo.git"
        if not (
            _git("init", "-q", "--bare", str(work))
            and _git("-C", str(work), "bundle", "unbundle", str(bundle))
        ):
            return {}
        commit = bundle.open("rb").read(200).split(b"\n")[1].split(b" ")[0].decode()
        done = subprocess.run(
            ["git", "-C", str(work), "show", f"{commit}:lake-manifest.json"],
            capture_output=True,
            text=True,
        )
    if done.returncode != 0:
        return {}
    found: Downloads = {}
    for package in json.loads(done.stdout).get("packages", []):
        if package.get("type") == "git":
            url = package["url"].removesuffix(".git") + ".git"
            found[f"{project}-lake-{package['name']}.bundle"] = Download(
                kind="git-bundle", sha256=UNPINNED, origin=f"{GIT}{url}@{package['rev']}:"
            )
    return found


def _host(origin: str) -> str:
    url = git_origin(origin)[0] if origin.startswith(GIT) else origin
    return "/".join(url.split("/")[:3]) if "://" in url else url


def download_sources(lock: ImagesLock, inputs: BuildInputs) -> list[Source]:
    """Where a download missing from the local store is looked for, in order."""
    return [
        GivenFiles(inputs.files),
        *sources(lock, inputs),
        HostPip(),
        UrlSource(),
        GitRepository(),
    ]


def gather_downloads(
    entry: ImageEntry, store: InputStore, lock: ImagesLock, inputs: BuildInputs
) -> Gathered:
    """Every download of `entry` into the local store, from wherever it is."""
    return gather(entry.downloads, store, download_sources(lock, inputs))


class GivenFiles:
    """Copies given by hand (`--input NAME=PATH`), served by their content."""

    label = "the files given with --input"

    def __init__(self, files: Mapping[str, Path]):
        self.files = dict(files)
        self._by_sha256: dict[str, Path] | None = None

    def fetch(self, item: Stored, target: Path) -> bool:
        if self._by_sha256 is None:
            self._by_sha256 = {}
            for given in self.files.values():
                with given.open("rb") as data:
                    self._by_sha256[hashlib.file_digest(data, "sha256").hexdigest()] = given
        found = self._by_sha256.get(item.sha256)
        if found is None:
            return False
        shutil.copyfile(found, target)
        return True


class HostPip:
    """The host's own pip: `pip download` of one hash-pinned wheel for the images' Python."""

    label = "PyPI through this machine's pip"

    def __init__(self) -> None:
        self.broken = ""

    def fetch(self, item: Stored, target: Path) -> bool:
        if self.broken or not isinstance(item, Download) or not item.origin.startswith(PYPI):
            return False
        with tempfile.TemporaryDirectory(prefix="prooflock-pip-") as tmp:
            wheel = self.wheel(item.origin.removeprefix(PYPI), item.sha256, Path(tmp))
            if wheel is None:
                return False
            shutil.copyfile(wheel, target)
            return True

    def wheel(self, requirement: str, sha256: str, folder: Path) -> Path | None:
        """Download the one wheel `requirement` with `sha256` into `folder`.

        None when pip cannot; the reason goes into this source's label.
        """
        spec = folder / "requirements.txt"
        spec.write_text(f"{requirement} --hash=sha256:{sha256}\n")
        out = folder / "out"
        argv = [
            *_pip(),
            "download",
            "--quiet",
            "--no-deps",
            "--only-binary=:all:",
            "--require-hashes",
            "--disable-pip-version-check",
            *PIP_TARGET,
            "--dest",
            str(out),
            "-r",
            str(spec),
        ]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=PIP_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as exc:
            self.broken = str(exc)
            self.label += f" (failed: {exc})"
            return None
        got = sorted(out.glob("*.whl"))
        if done.returncode != 0 or len(got) != 1:
            last = (done.stderr.strip().splitlines() or ["no wheel"])[-1]
            self.label = f"PyPI through this machine's pip ({last})"
            return None
        return got[0]


def wheel_downloads(requirements_file: Path, known: Downloads, store: InputStore) -> Downloads:
    """The lock's wheels for a hash-pinned requirements file.

    Those `known` already are kept. The host's pip fetches the rest into the store. A UserError
    names one that cannot be fetched.
    """
    by_sha256 = {d.sha256: (name, d) for name, d in known.items() if d.kind == "wheel"}
    pip = HostPip()
    found: Downloads = {}
    for project, (version, sha256) in sorted(requirements(requirements_file).items()):
        if sha256 in by_sha256:
            name, download = by_sha256[sha256]
            found[name] = download
            continue
        with tempfile.TemporaryDirectory(prefix="prooflock-pip-") as tmp:
            got = pip.wheel(f"{project}=={version}", sha256, Path(tmp))
            if got is None:
                raise UserError(f"{requirements_file}: {project}=={version}: {pip.label}")
            download = Download(
                kind="wheel",
                sha256=sha256,
                size=got.stat().st_size,
                origin=f"{PYPI}{project}=={version}",
            )
            store.put(got, download)
            found[got.name] = download
    return found


def _pip() -> list[str]:
    """This Python's pip when it has one (a nox or venv install), else `pip3` on PATH."""
    done = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True)
    if done.returncode == 0:
        return [sys.executable, "-m", "pip"]
    return [shutil.which("pip3") or "pip3"]


class _Remembering:
    """A source that asks a host (or repository) nothing more once it failed, and says why."""

    what = ""

    def __init__(self) -> None:
        self.failed: dict[str, str] = {}  # host or repository → why

    @property
    def label(self) -> str:
        why = "; ".join(self.failed.values())
        return self.what + (f" ({why})" if why else "")


class UrlSource(_Remembering):
    """A download's own URL, with this machine's trust store and proxy settings."""

    what = "the inputs' URLs"

    def fetch(self, item: Stored, target: Path) -> bool:
        if not isinstance(item, Download) or not item.origin.startswith(("https://", "http://")):
            return False
        host = item.origin.split("/")[2]
        if host in self.failed:
            return False
        try:
            return download(item.origin, target)
        except MirrorUnreachable as exc:
            self.failed[host] = str(exc)
            return False


class GitRepository(_Remembering):
    """A git bundle the host makes from its repository (`git:URL@COMMIT:FOLDER`).

    It follows the recipe of `bundle_folder`. It enters the store only when its sha256 is the
    lock's.
    """

    what = "the bundles' git repositories"

    def fetch(self, item: Stored, target: Path) -> bool:
        if not isinstance(item, Download) or not item.origin.startswith(GIT):
            return False
        repository, commit, folder = git_origin(item.origin)
        if repository in self.failed:
            return False
        if bundle_from(repository, commit, folder, target) is None:
            self.failed[repository] = f"{repository}: git fetch failed"
            return False
        with target.open("rb") as data:
            sha256 = hashlib.file_digest(data, "sha256").hexdigest()
        if sha256 != item.sha256:
            self.failed[repository] = (
                f"the bundle made from {repository} has sha256 {sha256[:12]}, not the lock's "
                "(another git or zlib): give the lock's copy with --input"
            )
            return False
        return True


def git_origin(origin: str) -> tuple[str, str, str]:
    """`git:URL@COMMIT:FOLDER` → (URL, COMMIT, FOLDER)."""
    repository, _, rest = origin.removeprefix(GIT).rpartition("@")
    commit, _, folder = rest.partition(":")
    return repository, commit, folder


def bundle_from(repository: str, ref: str, folder: str, target: Path) -> str | None:
    """`bundle_folder` of `ref`, fetched one commit deep from `repository` by the host's git.

    Returns the commit, or None when the fetch fails.
    """
    with tempfile.TemporaryDirectory(prefix="prooflock-git-") as tmp:
        work = Path(tmp) / "repo.git"
        fetch = ["-C", str(work), "fetch", "-q", "--depth", "1", repository, ref]
        if not (_git("init", "-q", "--bare", str(work)) and _git(*fetch)):
            return None
        return bundle_folder(work, "FETCH_HEAD", folder, target)


def bundle_folder(git_dir: Path, commit: str, folder: str, out: Path) -> str:
    """A git bundle of `commit` holding only `folder`'s objects and the trees above it.

    `commit` is a hash or a ref to resolve. An empty `folder` means the whole tree. The bundle is
    what images/*/git-export reads: one ref, no prerequisites. Its pack reuses no objects and uses
    one thread. So the same git makes the same bytes from any clone that has the objects. Returns
    the commit's hash.
    """
    git = ["git", "-C", str(git_dir)]
    (commit,) = _lines([*git, "rev-parse", "--verify", f"{commit}^{{commit}}"])
    path = folder.strip("/")
    parts = path.split("/") if path else []
    above = [
        f"{commit}^{{tree}}",
        *(f"{commit}:{'/'.join(parts[: n + 1])}" for n in range(len(parts))),
    ]
    objects = {commit, *_lines([*git, "rev-parse", *above])}
    below = [path + "/"] if path else []
    objects.update(_lines([*git, "ls-tree", "-r", "-t", "--object-only", commit, "--", *below]))
    pack = subprocess.run(
        [*git, "pack-objects", "--stdout", "-q", "--threads=1", "--no-reuse-object"],
        input="".join(f"{name}\n" for name in sorted(objects)).encode(),
        capture_output=True,
        check=True,
    )
    header = f"# v2 git bundle\n{commit} refs/heads/pinned\n\n".encode()
    out.write_bytes(header + pack.stdout)
    return commit


def _lines(argv: list[str]) -> list[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout.split()


def _git(*argv: str) -> bool:
    try:
        done = subprocess.run(["git", *argv], capture_output=True, timeout=PIP_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0
