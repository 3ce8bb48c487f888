"""An image's closure, and the drift between two package lists.

A closure is every installed package as the exact `.deb` it came from. `resolve_closure` turns a
built image's `name=version` list into the lock's closure. Each version is taken, in order:
- as the lock already has it;
- as the mirror's indexes describe it (pool path, sha256, size, priority);
- for a version no index lists, as the file at its pool path in the main or the security
  archive, hashed here (its entry says so).
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from runner.core.errors import UserError
from runner.images.debian import Indexes, Stanza, download
from runner.images.lock import Closure, DebFile

Keep = Callable[[Path, DebFile], object]  # what to do with a .deb fetched while resolving


@dataclass(frozen=True)
class PackageDrift:
    """One package whose version differs between the lock and a build (None: absent)."""

    package: str
    locked: str | None
    built: str | None

    def __str__(self) -> str:
        return f"{self.package} {self.locked or '(absent)'} → {self.built or '(absent)'}"


def package_drift(locked: dict[str, str], built: dict[str, str]) -> list[PackageDrift]:
    return [
        PackageDrift(name, locked.get(name), built.get(name))
        for name in sorted(set(locked) | set(built))
        if locked.get(name) != built.get(name)
    ]


def resolve_closure(
    packages: list[str],
    indexes: Callable[[], Indexes],
    *,
    mirror: str,
    security_mirror: str,
    known: Closure | None = None,
    keep: Keep | None = None,
) -> Closure:
    """The closure of an image that has `packages` (`name=version`).

    Each entry comes from the lock, else the mirror's index (read only if needed), else the pool
    path. A UserError names the first package none of them accounts for.
    """
    known = known or {}
    closure: Closure = {}
    for item in sorted(packages):
        name, _, version = item.partition("=")
        if name in known and known[name].version == version:
            closure[name] = known[name]
            continue
        stanza = indexes().find(name, version)
        if stanza is not None:
            closure[name] = as_deb(stanza)
        else:
            closure[name] = _from_pool(name, version, indexes(), mirror, security_mirror, keep)
    return closure


def as_deb(stanza: Stanza) -> DebFile:
    return DebFile(
        version=stanza.version,
        architecture=stanza.architecture,
        filename=stanza.filename,
        sha256=stanza.sha256,
        size=stanza.size,
        priority=stanza.priority,
    )


def pool_paths(name: str, version: str, relative: Stanza) -> list[str]:
    """Where `name` at `version` would be in the pools of the main and the security archive.

    `relative` is another version of it: it gives the source package and architecture.
    """
    source = relative.source
    prefix = source[:4] if source.startswith("lib") else source[:1]
    plain = version.partition(":")[2] if ":" in version else version
    leaf = f"{name}_{plain}_{relative.architecture}.deb"
    return [f"pool/main/{prefix}/{source}/{leaf}", f"pool/updates/main/{prefix}/{source}/{leaf}"]


def _from_pool(
    name: str,
    version: str,
    indexes: Indexes,
    mirror: str,
    security_mirror: str,
    keep: Keep | None,
) -> DebFile:
    relatives = indexes.by_name.get(name, [])
    if not relatives:
        raise UserError(f"{name} {version}: no index of the mirror lists this package at all")
    tried = []
    for filename in pool_paths(name, version, relatives[0]):
        root = security_mirror if filename.startswith("pool/updates/") else mirror
        if not root:
            continue
        url = f"{root.rstrip('/')}/{filename}"
        tried.append(url)
        with tempfile.TemporaryDirectory(prefix="prooflock-deb-") as tmp:
            path = Path(tmp) / "file.deb"
            if not download(url, path):
                continue
            with path.open("rb") as data:
                sha256 = hashlib.file_digest(data, "sha256").hexdigest()
            deb = DebFile(
                version=version,
                architecture=relatives[0].architecture,
                filename=filename,
                sha256=sha256,
                size=path.stat().st_size,
                priority=relatives[0].priority,
                note=f"in no Packages index when locked: sha256 of the file at {url}",
            )
            if keep is not None:
                keep(path, deb)
            return deb
    raise UserError(f"{name} {version}: in no index, and not at {' nor '.join(tried)}")
