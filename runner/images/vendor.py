"""`prooflock images vendor`: put images' closures into the `.deb` store, here or in S3.

Every `.deb` a build of each image installs (its closure less what the locked base already has;
the base's whole closure for `base`) is gathered into the local store (from wherever it still is:
runner.images.debstore) and, with a remote store, copied there too (`prefix/debs/sha256/<hex>`,
what `PROOFLOCK_DEB_STORE` reads back). Files already there are skipped, so an interrupted run
resumes where it stopped.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from runner.core.errors import UserError
from runner.images.debstore import DebStore, deb_key, gather
from runner.images.exact import sources
from runner.images.inputs import BuildInputs
from runner.images.lock import Closure, Kit
from runner.images.reproduce import beyond_base


@dataclass(frozen=True)
class Vendored:
    name: str
    packages: int
    size_bytes: int
    fetched: int  # files that were not in the local store before
    uploaded: int = 0  # files copied to the remote store
    missing: list[str] = field(default_factory=list)  # one line per file no source holds


def vendor_closures(kit: Kit, names: Iterable[str]) -> dict[str, Closure]:
    """What vendoring `names` puts in the store; a UserError for an image without a closure."""
    closures = {}
    for name in names:
        entry = kit.lock.any_entry(name)
        if not entry.closure:
            raise UserError(
                f"{name}: the lock records no closure for it: run `prooflock images relock {name}`"
            )
        if kit.lock.is_base(name):
            closures[name] = entry.closure
        else:
            closures[name] = beyond_base(entry.closure, kit.lock.rebased(kit.lock.base_of(name)))
    return closures


def vendor_images(
    kit: Kit, names: Iterable[str], inputs: BuildInputs, to: str | None = None
) -> list[Vendored]:
    closures = vendor_closures(kit, names)
    remote = None
    if to:
        from runner.storage.blobs import S3Files  # boto3 only when asked: the CLI starts faster

        remote = S3Files(to)
    store = DebStore()
    done = []
    for name, closure in closures.items():
        gathered = gather(closure, store, sources(kit.lock, inputs))
        uploaded = 0
        if remote is not None:
            for package, path in sorted(gathered.paths.items()):
                deb = closure[package]
                uploaded += remote.put(deb_key(deb), path, deb.sha256)
        done.append(
            Vendored(
                name,
                packages=len(closure),
                size_bytes=sum(deb.size for deb in closure.values()),
                fetched=gathered.fetched,
                uploaded=uploaded,
                missing=[str(missing) for missing in gathered.missing],
            )
        )
    return done
