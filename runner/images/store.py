"""The input store: every build input by sha256, gathered from wherever it still is.

One store holds every kind of input a build takes (runner.images.lock's `Download`). These are the
`.deb`s of closures, wheels, source tarballs, git bundles, single files and toolchain archives.

The local store is `<cache>/debs/sha256/<hex>`. A remote one keeps objects at
`prefix/debs/sha256/<hex>`; it is set by `PROOFLOCK_STORE=s3://bucket/prefix`, or by its first name
`PROOFLOCK_DEB_STORE`. The directory keeps its first name, so stores filled before every kind was
kept still serve.

A file missing here is fetched from the sources a caller lists (runner.images.exact,
runner.images.downloads). In order: a Debian mirror, the lock's snapshot, the remote store, the
host's pip. It is kept only when its sha256 and size are the lock's. A mirror that does not answer
is asked nothing more in that run. A remote store that does not answer stops the run
(StorageUnavailable, exit 3: run it again to resume).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from runner.images.debian import MirrorUnreachable, download
from runner.images.lock import DebFile, Download

if TYPE_CHECKING:
    from runner.storage.s3_settings import S3Settings

STORE_DIR = Path("debs") / "sha256"  # below a store's root, local or remote
DEBIAN = "debian:"  # a Download's origin below a Debian archive's root


class Stored(Protocol):
    """Anything the store keeps: known by its sha256, and its size when the lock knows it."""

    @property
    def sha256(self) -> str: ...

    @property
    def size(self) -> int | None: ...


def store_key(item: Stored) -> str:
    return f"{STORE_DIR.as_posix()}/{item.sha256}"


def describe(item: Stored) -> str:
    """A `.deb`'s version, or a download's kind and digest: what a missing line names."""
    if isinstance(item, DebFile):
        return item.version
    if isinstance(item, Download):
        return f"({item.kind}, sha256 {item.sha256[:12]})"
    return f"(sha256 {item.sha256[:12]})"


class InputStore:
    """The local store, below `root` (the cache directory)."""

    def __init__(self, root: Path):
        self.root = root
        self.label = f"the local store {self.root / STORE_DIR}"

    def path(self, item: Stored) -> Path:
        return self.root / STORE_DIR / item.sha256

    def has(self, item: Stored) -> bool:
        path = self.path(item)
        return path.is_file() and (item.size is None or path.stat().st_size == item.size)

    def put(self, source: Path, item: Stored) -> bool:
        """Move `source` into the store if it is `item`'s bytes; False (and removed) if not."""
        with source.open("rb") as data:
            sha256 = hashlib.file_digest(data, "sha256").hexdigest()
        if sha256 != item.sha256 or item.size not in (None, source.stat().st_size):
            source.unlink()
            return False
        target = self.path(item)
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
    @property
    def label(self) -> str:
        """What the source is, and why it failed when it did: what a missing line lists."""
        ...

    def fetch(self, item: Stored, target: Path) -> bool:
        """Write what this source holds for `item` into `target`; False when it holds nothing."""
        ...


def pool_path(item: Stored) -> tuple[str, bool] | None:
    """Where a Debian archive keeps `item` (below its root), and whether in the security one."""
    if isinstance(item, DebFile):
        return item.filename, item.security
    if isinstance(item, Download) and item.origin.startswith(DEBIAN):
        return item.origin.removeprefix(DEBIAN), False
    return None


class MirrorSource:
    """A Debian mirror (or a snapshot of one): pool paths below the main and security roots."""

    def __init__(self, label: str, main: str, security: str):
        self.label, self.main, self.security = label, main.rstrip("/"), security.rstrip("/")
        self.unreachable = ""

    def fetch(self, item: Stored, target: Path) -> bool:
        where = pool_path(item)
        if self.unreachable or where is None:
            return False
        filename, security = where
        roots = [self.security, self.main] if security else [self.main, self.security]
        for root in filter(None, roots):
            try:
                if download(f"{root}/{filename}", target):
                    return True
            except MirrorUnreachable as exc:
                self.unreachable = str(exc)
                self.label += " (unreachable)"
                return False
        return False


class RemoteStore:
    """A store in S3: `prefix/debs/sha256/<hex>`, reached with `settings`."""

    def __init__(self, url: str, settings: S3Settings):
        from runner.storage.blobs import (
            S3Files,  # boto3 only for a store in S3: the CLI starts faster
        )

        self.files = S3Files(url, settings)
        self.label = f"the remote store {url}"

    def fetch(self, item: Stored, target: Path) -> bool:
        return self.files.get(store_key(item), target) is not None


@dataclass(frozen=True)
class Missing:
    package: str  # a closure's package, or a download's file name
    version: str  # the package's version, or the download's kind and digest
    tried: list[str]

    def __str__(self) -> str:
        return f"{self.package} {self.version}: in no source (tried {'; '.join(self.tried)})"


@dataclass
class Gathered:
    paths: dict[str, Path] = field(default_factory=dict)  # name → its file in the store
    missing: list[Missing] = field(default_factory=list)
    fetched: int = 0  # files that were not in the local store before
    fetched_bytes: int = 0

    @property
    def complete(self) -> bool:
        return not self.missing


def gather(items: Mapping[str, Stored], store: InputStore, sources: Iterable[Source]) -> Gathered:
    """Put every item into the local store, trying `sources` in order.

    Items are a closure's `.deb`s or an image's downloads.
    """
    sources = list(sources)
    gathered = Gathered()
    for name, item in sorted(items.items()):
        if not store.has(item):
            if not _fetch(item, store, sources):
                tried = [store.label, *(source.label for source in sources)]
                gathered.missing.append(Missing(name, describe(item), tried))
                continue
            gathered.fetched += 1
            gathered.fetched_bytes += store.path(item).stat().st_size
        gathered.paths[name] = store.path(item)
    return gathered


def _fetch(item: Stored, store: InputStore, sources: list[Source]) -> bool:
    for source in sources:
        target = store.scratch()
        try:
            if source.fetch(item, target) and store.put(target, item):
                return True
        finally:
            target.unlink(missing_ok=True)
    return False
