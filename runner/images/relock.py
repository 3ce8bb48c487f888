"""`prooflock images relock`: record in the lock what this machine built, with its exact closure.

Besides `pin`, this is the one place that writes the lock. For each image (or `base`) it takes this
machine's latest build of the current definitions (runner.images.machine), if there is one. That
becomes the locked build: image ID, layers, packages, and the definitions' file hashes.

Then it resolves the entry's closure (runner.images.closure):
- every installed package's `.deb` by pool path, sha256 and size. Entries of unchanged versions
  are reused, so relocking an unchanged image needs no network.
- for an image with a hash-pinned `requirements.txt`, each wheel by file name, sha256 and size
  (fetched once with the host's pip).

The lock's other downloads (source tarballs, single files, toolchains) stay as written.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from runner.core.errors import UserError
from runner.images import context, machine
from runner.images.closure import resolve_closure
from runner.images.debian import Indexes, read_indexes
from runner.images.downloads import wheel_downloads
from runner.images.inputs import BuildInputs
from runner.images.lock import BaseEntry, ImageEntry, Kit
from runner.images.store import InputStore

REQUIREMENTS = "requirements.txt"  # an image's hash-pinned wheels, beside its Dockerfile


@dataclass(frozen=True)
class Relocked:
    name: str
    previous_id: str | None
    image_id: str | None
    recorded: bool  # a build of this machine became the locked one
    packages: int  # in the closure
    changed: int  # closure entries that are new or differ from the lock's before


def relock_images(kit: Kit, names: Iterable[str], inputs: BuildInputs) -> list[Relocked]:
    kit.require_writable()
    names = list(names)
    for name in names:
        kit.lock.any_entry(name)  # a UserError naming the image when it is unknown
    store = InputStore(inputs.cache_dir)

    @cache
    def suite_indexes(suite: str) -> Indexes:
        return read_indexes(suite, inputs.apt_mirror, inputs.apt_security_mirror, inputs.cache_dir)

    done = []
    whole = kit
    for name in names:
        kit = whole.for_base(name) if whole.lock.is_base(name) else whole.for_image(name)
        entry = kit.lock.any_entry(name)
        indexes = functools.partial(suite_indexes, kit.lock.base.suite)
        previous = entry.image_id
        entry, recorded = _with_latest_build(kit, name, entry, inputs.cache_dir)
        if not entry.packages:
            raise UserError(
                f"{name}: nothing to relock: no locked build and none of these definitions on "
                f"this machine (run `prooflock images build {name}` first)"
            )
        closure = resolve_closure(
            entry.packages,
            indexes,
            mirror=inputs.apt_mirror,
            security_mirror=inputs.apt_security_mirror,
            known={**kit.lock.base.closure, **entry.closure},
            keep=store.put,
        )
        changed = sum(1 for n, deb in closure.items() if entry.closure.get(n) != deb)
        entry = entry.model_copy(update={"closure": closure})
        requirements = kit.images_root / name / REQUIREMENTS
        if isinstance(entry, ImageEntry) and requirements.is_file():
            wheels = wheel_downloads(requirements, entry.downloads, store)
            others = {n: d for n, d in entry.downloads.items() if d.kind != "wheel"}
            entry = entry.model_copy(update={"downloads": {**others, **wheels}})
        if isinstance(entry, BaseEntry):
            if changed or kit.base_index() is None:
                entry.index_sha256 = _write_base_index(kit, entry, indexes())
            kit.lock.base = entry
        else:
            kit.lock.images[name] = entry
        done.append(Relocked(name, previous, entry.image_id, recorded, len(closure), changed))
        kit.save()
    return done


def _write_base_index(kit: Kit, base: BaseEntry, indexes: Indexes) -> str:
    """Write the archive's stanzas of the base's closure beside the lock; return the file's sha256.

    The stanzas keep the index's order, as debootstrap copies them into the image.
    """
    stanzas = []
    for name, deb in base.closure.items():
        stanza = next(
            (
                s
                for s in indexes.by_name.get(name, [])
                if s.version == deb.version and s.suite == base.suite
            ),
            None,
        )
        if stanza is None:
            raise UserError(
                f"base: {name} {deb.version} is in no `{base.suite}` index: debootstrap could not "
                "have installed it, so the base cannot be relocked from this mirror"
            )
        stanzas.append(stanza)
    data = "".join(f"{s.raw}\n" for s in sorted(stanzas, key=lambda s: s.position)).encode()
    kit.base_index_path.write_bytes(data)
    return hashlib.sha256(data).hexdigest()


def _with_latest_build(
    kit: Kit, name: str, entry: BaseEntry | ImageEntry, cache_dir: Path
) -> tuple[BaseEntry | ImageEntry, bool]:
    """The entry with this machine's latest build of the current definitions in it, if any."""
    if isinstance(entry, BaseEntry):
        definitions = machine.definitions_digest(kit.lock, name, entry)
    else:
        definitions = machine.current_definitions(kit.lock, name, kit.images_root)
    build = machine.latest(name, definitions, machine.state_path(cache_dir))
    if build is None:
        return entry, False
    update: dict[str, object] = {
        "image_id": build.image_id,
        "diff_ids": build.diff_ids,
        "packages": build.packages,
    }
    if isinstance(entry, ImageEntry):
        update.update(
            status="built",
            size_bytes=build.size_bytes,
            dockerfile_sha256=context.sha256_of(kit.images_root / name / "Dockerfile"),
            files=context.file_hashes(kit.images_root, name),
        )
    return entry.model_copy(update=update), True
