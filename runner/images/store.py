"""The `.deb` store: a closure's files by sha256, gathered from wherever they still are.

The local store is `<cache>/debs/sha256/<hex>`. A file missing there is fetched, in order, from
the build's mirror (its pool path in the main, then the security archive), snapshot.debian.org at
the lock's timestamp, and a remote store (`PROOFLOCK_DEB_STORE=s3://bucket/prefix`, objects at
`prefix/debs/sha256/<hex>`), and kept only when its sha256 and size are the lock's. A mirror that
does not answer is asked nothing more in that run; a remote store that does not answer stops the
run (StorageUnavailable, exit 3: run it again to resume).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from runner.core.settings import Settings
from runner.images.debian import MirrorUnreachable, download
from runner.images.lock import Closure, DebFile

STORE_DIR = Path("debs") / "sha256"  # below a store's root, local or remote


def deb_key(deb: DebFile) -> str:
    return f"{STORE_DIR.as_posix()}/{deb.sha256}"


class DebStore:
    """The local store, under the cache directory unless told otherwise."""

    def __init__(self, root: Path | None = None):
        self.root = root if root is not None else Settings().cache_dir
        self.label = f"the local store {self.root / STORE_DIR}"

    def path(self, deb: DebFile) -> Path:
        return self.root / STORE_DIR / deb.sha256

    def has(self, deb: DebFile) -> bool:
        path = self.path(deb)
        return path.is_file() and path.stat().st_size == deb.size

    def put(self, source: Path, deb: DebFile) -> bool:
        """Move `source` into the store if it is `deb`'s bytes; False (and removed) if not."""
        with source.open("rb") as data:
            sha256 = hashlib.file_digest(data, "sha256").hexdigest()
        if sha256 != deb.sha256 or source.stat().st_size != deb.size:
            source.unlink()
            return False
        target = self.path(deb)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(source, target)
        return True

    def scratch(self) -> Path:
        """A file name in the store's directory, for a download that `put` then moves in."""
        folder = self.root / STORE_DIR
        folder.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=folder, prefix=".partial-")
        os.close(fd)
        return Path(name)


class Source(Protocol):
    label: str

    def fetch(self, deb: DebFile, target: Path) -> bool:
        """Write what this source holds for `deb` into `target`; False when it holds nothing."""
        ...


class MirrorSource:
    """A Debian mirror (or a snapshot of one): pool paths below the main and security roots."""

    def __init__(self, label: str, main: str, security: str):
        self.label, self.main, self.security = label, main.rstrip("/"), security.rstrip("/")
        self.unreachable = ""

    def fetch(self, deb: DebFile, target: Path) -> bool:
        if self.unreachable:
            return False
        roots = [self.security, self.main] if deb.security else [self.main, self.security]
        for root in filter(None, roots):
            try:
                if download(f"{root}/{deb.filename}", target):
                    return True
            except MirrorUnreachable as exc:
                self.unreachable = str(exc)
                self.label += " (unreachable)"
                return False
        return False


class RemoteStore:
    """A store in S3: `prefix/debs/sha256/<hex>`."""

    def __init__(self, url: str):
        from runner.storage.blobs import (
            S3Files,  # boto3 only for a store in S3: the CLI starts faster
        )

        self.files = S3Files(url)
        self.label = f"the remote store {url}"

    def fetch(self, deb: DebFile, target: Path) -> bool:
        return self.files.get(deb_key(deb), target) is not None


@dataclass(frozen=True)
class Missing:
    package: str
    version: str
    tried: list[str]

    def __str__(self) -> str:
        return f"{self.package} {self.version}: in no source (tried {'; '.join(self.tried)})"


@dataclass
class Gathered:
    paths: dict[str, Path] = field(default_factory=dict)  # package → its file in the store
    missing: list[Missing] = field(default_factory=list)
    fetched: int = 0  # files that were not in the local store before
    fetched_bytes: int = 0

    @property
    def complete(self) -> bool:
        return not self.missing


def gather(closure: Closure, store: DebStore, sources: Iterable[Source]) -> Gathered:
    """Put every `.deb` of the closure into the local store, trying `sources` in order."""
    sources = list(sources)
    gathered = Gathered()
    for name, deb in sorted(closure.items()):
        if not store.has(deb):
            if not _fetch(deb, store, sources):
                tried = [store.label, *(source.label for source in sources)]
                gathered.missing.append(Missing(name, deb.version, tried))
                continue
            gathered.fetched += 1
            gathered.fetched_bytes += deb.size
        gathered.paths[name] = store.path(deb)
    return gathered


def _fetch(deb: DebFile, store: DebStore, sources: list[Source]) -> bool:
    for source in sources:
        target = store.scratch()
        try:
            if source.fetch(deb, target) and store.put(target, deb):
                return True
        finally:
            target.unlink(missing_ok=True)
    return False
