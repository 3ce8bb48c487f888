"""A local apt repository holding exactly one closure.

For an image, it holds the closure less what the locked base has at the same version
(runner.images.reproduce.beyond_base). The base keeps those, and apt installs nothing else.

Layout, as apt and debootstrap read it:
- `dists/<suite>/Release`, unsigned. The build's sources line says `[trusted=yes]` and
  debootstrap runs with `--no-check-gpg`. Both check every file against the sha256 listed there.
- `dists/<suite>/main/binary-amd64/Packages`.
- the `.deb`s at their pool paths (links into the store).

A stanza is the `.deb`'s own control fields (`dpkg-deb -f`) with the archive's Priority and the
lock's Filename, Size and SHA256. So apt has one version of each package to choose: the locked one.
Each stanza ends with a blank line, as debootstrap's parser wants. For the base, the archive's own
stanzas are served instead, because debootstrap copies them into the image
(/var/lib/dpkg/available).
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from runner.images.lock import DebFile

COMPONENT = "main"
INDEX = f"{COMPONENT}/binary-amd64/Packages"
ARCHIVE_FIELDS = ("Filename", "Size", "SHA256", "MD5sum", "SHA1", "Priority", "Description-md5")
DATE = "Sat, 01 Jan 2000 00:00:00 UTC"  # apt wants one; a fixed one keeps the repository's bytes


def control_text(deb: Path, cache: Path) -> str:
    """The `.deb`'s control fields as dpkg-deb prints them.

    They are kept in `cache` by the file's name (its sha256 in the store).
    """
    kept = cache / f"{deb.name}.control"
    if kept.is_file():
        return kept.read_text()
    done = subprocess.run(["dpkg-deb", "-f", str(deb)], capture_output=True, text=True, check=True)
    cache.mkdir(parents=True, exist_ok=True)
    kept.write_text(done.stdout)
    return done.stdout


def stanza(control: str, deb: DebFile) -> str:
    lines = []
    skipping = False
    for line in control.rstrip("\n").splitlines():
        if line[:1].isspace():
            if not skipping:
                lines.append(line)
            continue
        skipping = line.partition(":")[0] in ARCHIVE_FIELDS
        if not skipping:
            lines.append(line)
    if deb.priority:
        lines.append(f"Priority: {deb.priority}")
    lines += [f"Filename: {deb.filename}", f"Size: {deb.size}", f"SHA256: {deb.sha256}"]
    return "\n".join(lines) + "\n"


def write_repository(
    root: Path,
    debs: dict[str, tuple[DebFile, Path]],
    suite: str,
    control_cache: Path,
    index: str | None = None,
) -> str:
    """Write the repository of `debs` (package → its lock entry and file) at `root`.

    `index` becomes its Packages file when given (the archive's own stanzas). Otherwise the stanzas
    are made from the files. Returns the Packages file's sha256, which identifies the repository.
    """
    stanzas = []
    for _, (deb, path) in sorted(debs.items()):
        if index is None:
            stanzas.append(stanza(control_text(path, control_cache), deb))
        target = root / deb.filename
        target.parent.mkdir(parents=True, exist_ok=True)
        target.unlink(missing_ok=True)
        target.symlink_to(path.resolve())
    packages = (index or "".join(f"{text}\n" for text in stanzas)).encode()
    digest = hashlib.sha256(packages).hexdigest()
    dists = root / "dists" / suite
    (dists / INDEX).parent.mkdir(parents=True, exist_ok=True)
    (dists / INDEX).write_bytes(packages)
    release = (
        f"Suite: {suite}\nCodename: {suite}\nDate: {DATE}\nArchitectures: amd64\n"
        f"Components: {COMPONENT}\n"
        f"Description: prooflock: exactly one image's locked closure\n"
        f"SHA256:\n {digest} {len(packages)} {INDEX}\n"
    )
    (dists / "Release").write_text(release)
    return digest
