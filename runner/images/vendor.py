"""`prooflock images vendor`: put every input of images into the store, here or in S3.

For each image this gathers two kinds of input. One is every `.deb` a build installs: its closure
less what the locked base has (for `base`, its whole closure). The other is every other input the
lock lists for it: wheels, source tarballs, git bundles, single files, toolchain archives.

They go into the local store from wherever they still are (runner.images.store,
runner.images.downloads). With a remote store they are copied there too, at
`prefix/debs/sha256/<hex>`, where `PROOFLOCK_STORE` reads them back. Files already there are
skipped, so an interrupted run resumes where it stopped. A build then needs no network.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from runner.core.errors import UserError
from runner.images.downloads import UNPINNED, gather_downloads, lake_packages, pin_download
from runner.images.exact import sources
from runner.images.inputs import BuildInputs
from runner.images.lock import Closure, ImageEntry, Kit
from runner.images.reproduce import beyond_base
from runner.images.store import Gathered, InputStore, Stored, gather, store_key

DEB = "deb"  # the kind of a closure's files, beside the lock's download kinds


@dataclass(frozen=True)
class Vendored:
    name: str
    files: int
    size_bytes: int
    fetched: int  # files that were not in the local store before
    uploaded: int = 0  # files copied to the remote store
    missing: list[str] = field(default_factory=list)  # one line per file no source holds
    by_kind: dict[str, tuple[int, int]] = field(default_factory=dict)  # kind → (files, bytes)
    pinned: int = 0  # unpinned downloads pinned now, on first use (the lock was written)


def vendor_closures(kit: Kit, names: Iterable[str]) -> dict[str, Closure]:
    """The closures vendoring `names` puts in the store.

    A UserError for an image with neither a closure nor downloads.
    """
    closures = {}
    for name in names:
        entry = kit.lock.any_entry(name)
        downloads = entry.downloads if isinstance(entry, ImageEntry) else {}
        if not entry.closure and not downloads:
            raise UserError(
                f"{name}: the lock records no inputs for it: run `prooflock images relock {name}`"
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

        if inputs.s3 is None:
            raise UserError(f"--to {to}: no S3 settings were given")
        remote = S3Files(to, inputs.s3)
    store = InputStore(inputs.cache_dir)
    done = []
    for name, closure in closures.items():
        unpinned, pinned_now = pin_on_first_use(kit, name, store)
        lock = kit.lock.rebased(kit.lock.base_of(name)) if not kit.lock.is_base(name) else kit.lock
        entry = kit.lock.any_entry(name)
        items: dict[str, Stored] = dict(closure)
        kinds = {package: DEB for package in closure}
        gathered = gather(closure, store, sources(lock, inputs))
        if isinstance(entry, ImageEntry) and entry.downloads:
            pinned = {f: d for f, d in entry.downloads.items() if d.sha256 != UNPINNED}
            fetched = gather_downloads(
                entry.model_copy(update={"downloads": pinned}), store, lock, inputs
            )
            gathered = _joined(gathered, fetched)
            items.update(entry.downloads)
            kinds.update({file: download.kind for file, download in entry.downloads.items()})
        uploaded = 0
        if remote is not None:
            for item_name, path in sorted(gathered.paths.items()):
                item = items[item_name]
                uploaded += remote.put(store_key(item), path, item.sha256)
        done.append(
            Vendored(
                name,
                files=len(items),
                size_bytes=sum(_size(items[n], gathered.paths.get(n)) for n in items),
                fetched=gathered.fetched,
                uploaded=uploaded,
                missing=[*unpinned, *(str(missing) for missing in gathered.missing)],
                by_kind=_by_kind(items, kinds, gathered),
                pinned=pinned_now,
            )
        )
    return done


def pin_on_first_use(kit: Kit, name: str, store: InputStore) -> tuple[list[str], int]:
    """Pin each download the lock has no sha256 for, on first use.

    Each is fetched from its origin and kept in the store. Its sha256 and size go into the lock (for
    a git ref: its commit). Returns a line per failure, and how many were pinned.
    """
    entry = kit.lock.any_entry(name)
    if not isinstance(entry, ImageEntry):
        return [], 0
    failed: list[str] = []
    pinned = 0
    while todo := sorted(
        f for f, d in entry.downloads.items() if d.sha256 == UNPINNED and f not in failed
    ):
        file, item = todo[0], entry.downloads[todo[0]]
        target = store.scratch()
        try:
            found = pin_download(item, target)
            if found is None or not store.put(target, found):
                failed.append(file)
                continue
        finally:
            target.unlink(missing_ok=True)
        entry.downloads[file] = found
        pinned += 1
        if found.kind == "git-bundle":  # a Lean project's packages come with it
            packages = lake_packages(file, store.path(found))
            entry.downloads.update({f: d for f, d in packages.items() if f not in entry.downloads})
    if pinned:
        kit.save()
    lines = [
        f"{file} ({entry.downloads[file].kind}): unpinned, and "
        f"{entry.downloads[file].origin} did not answer"
        for file in failed
    ]
    return lines, pinned


def _joined(first: Gathered, second: Gathered) -> Gathered:
    return Gathered(
        paths={**first.paths, **second.paths},
        missing=[*first.missing, *second.missing],
        fetched=first.fetched + second.fetched,
        fetched_bytes=first.fetched_bytes + second.fetched_bytes,
    )


def _size(item: Stored, path: Path | None) -> int:
    if item.size is not None:
        return item.size
    return path.stat().st_size if path is not None else 0


def _by_kind(
    items: dict[str, Stored], kinds: dict[str, str], gathered: Gathered
) -> dict[str, tuple[int, int]]:
    totals: dict[str, tuple[int, int]] = {}
    for name, item in items.items():
        files, size = totals.get(kinds[name], (0, 0))
        totals[kinds[name]] = (files + 1, size + _size(item, gathered.paths.get(name)))
    return totals
