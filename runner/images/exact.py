"""Builds that install exactly the locked closure, and the words for when they cannot.

- `sources` lists where a closure's `.deb`s are looked for after the local store.
- `repository` writes a gathered closure as an apt repository. A build's context carries it;
  debootstrap reads it as a `file://` directory.
- `missing_lines` says, package by package, why the closure cannot be had. Either the mirror
  moved on to another version, or no source holds the file.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

from runner.core.errors import UserError
from runner.images.debian import Indexes, MirrorUnreachable, read_indexes
from runner.images.inputs import BuildInputs
from runner.images.localrepo import write_repository
from runner.images.lock import Closure, ImagesLock
from runner.images.store import Gathered, InputStore, MirrorSource, RemoteStore, Source


def sources(lock: ImagesLock, inputs: BuildInputs) -> list[Source]:
    """After the local store: the build's mirror, the lock's snapshot, the remote store."""
    found: list[Source] = [
        MirrorSource(
            f"the mirror {inputs.apt_mirror}", inputs.apt_mirror, inputs.apt_security_mirror
        )
    ]
    snapshot, snapshot_security = (
        lock.transport["APT_MIRROR"],
        lock.transport["APT_SECURITY_MIRROR"],
    )
    if snapshot != inputs.apt_mirror:
        found.append(MirrorSource(f"the snapshot {snapshot}", snapshot, snapshot_security))
    if inputs.store:
        if inputs.s3 is None:
            raise UserError(f"the remote store {inputs.store}: no S3 settings were given")
        found.append(RemoteStore(inputs.store, inputs.s3))
    return found


def control_cache(store: InputStore) -> Path:
    return store.root / "debs" / "control"


@contextlib.contextmanager
def repository(
    closure: Closure,
    gathered: Gathered,
    store: InputStore,
    suite: str,
    *,
    index: str | None = None,
) -> Iterator[Path]:
    """The gathered closure as an apt repository in a temporary directory, while in use.

    debootstrap reads it as `file://` on this machine. A docker build reads it in its context (it
    has no network). `index` holds the archive's own stanzas, served instead of stanzas made from
    the files.
    """
    debs = {name: (closure[name], path) for name, path in gathered.paths.items()}
    with tempfile.TemporaryDirectory(prefix="prooflock-repo-") as tmp:
        write_repository(Path(tmp), debs, suite, control_cache(store), index)
        yield Path(tmp)


def live_indexes(lock: ImagesLock, inputs: BuildInputs) -> Indexes | None:
    """The build's mirror's indexes, or None when it does not answer.

    Drift is then told by what is missing only.
    """
    try:
        return read_indexes(
            lock.base.suite, inputs.apt_mirror, inputs.apt_security_mirror, inputs.cache_dir
        )
    except MirrorUnreachable:
        return None


def missing_lines(name: str, gathered: Gathered, indexes: Indexes | None) -> list[str]:
    """One line per closure package that cannot be had.

    Each says what the mirror has instead, or that no source holds it.
    """
    hint = (
        f"vendor the closure (prooflock images vendor {name}) or fetch the archive "
        f"(prooflock images load ARCHIVE)"
    )
    lines = []
    for missing in gathered.missing:
        now = indexes.newest(missing.package) if indexes is not None else None
        if now is not None and now.version != missing.version:
            lines.append(
                f"{missing.package} {missing.version} → {now.version}: the mirror moved on; {hint}"
            )
        else:
            lines.append(str(missing))
    return lines
