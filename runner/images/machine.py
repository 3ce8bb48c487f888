"""What this machine built: a state file beside the cache, never in a checkout.

The lock says what an image is. This file covers each definition of an image this machine built (its
pins, files and tag, by digest). For each it keeps:
- the image it got, and how far that is from the lock (package by package);
- what it was built from;
- the machine's side: mirror URLs, CA bundle digest, docker and debootstrap versions.

`prooflock images build --allow-drift` records a drifted rebuild here. The docker backend uses it
when the locked image cannot be had. `prooflock images relock` reads a build from here to record it
in the lock.

Every checkout on this machine shares the file (`<cache>/images/state.json`). Builds are kept by
their definitions' digest, so two checkouts with different locks do not overwrite each other.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from runner.core.canonical import canonical_bytes
from runner.core.models import JsonValue
from runner.images import context
from runner.images.closure import PackageDrift
from runner.images.lock import BaseEntry, ImageEntry, ImagesLock


class Drift(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    package: str
    locked: str | None
    built: str | None

    def as_package_drift(self) -> PackageDrift:
        return PackageDrift(self.package, self.locked, self.built)


class MachineBuild(BaseModel):
    """One image (or the base) as this machine last built it from one definition."""

    model_config = ConfigDict(extra="forbid")

    name: str
    tag: str
    definitions: str  # sha256 of what defines the image (`definitions_digest`)
    image_id: str
    locked_id: str | None  # what the lock said when it was built
    drift: list[Drift] = Field(default_factory=list)  # package by package, from the lock's list
    built_from: str  # "the locked closure" or the live mirror it took packages from
    diff_ids: list[str] = Field(default_factory=list)
    packages: list[str] = Field(default_factory=list)
    size_bytes: int | None = None
    provenance: dict[str, JsonValue] = Field(default_factory=dict)
    built_at: str = ""

    @property
    def exact(self) -> bool:
        return self.image_id == self.locked_id

    def package_drift(self) -> list[PackageDrift]:
        return [item.as_package_drift() for item in self.drift]


class MachineState(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format: Literal["prooflock.images-state/1"] = "prooflock.images-state/1"
    builds: dict[str, MachineBuild] = Field(default_factory=dict)  # by definitions digest


def state_path(cache_dir: Path) -> Path:
    """The machine's file, under the cache directory (`PROOFLOCK_CACHE_DIR`)."""
    return cache_dir / "images" / "state.json"


def load_state(path: Path) -> MachineState:
    """The state, or an empty one when there is none or it cannot be read (it is a cache)."""
    try:
        return MachineState.model_validate_json(path.read_bytes())
    except (FileNotFoundError, ValidationError, ValueError):
        return MachineState()


def record(build: MachineBuild, path: Path) -> None:
    """Keep `build` as the latest of its definitions.

    Read, change and replace under a file lock: other checkouts on this machine write the same file.
    """
    with _locked(path):
        state = load_state(path)
        state.builds[build.definitions] = build.model_copy(
            update={"built_at": build.built_at or datetime.now(UTC).isoformat(timespec="seconds")}
        )
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".state-")
        with os.fdopen(fd, "w") as out:
            out.write(state.model_dump_json(indent=2) + "\n")
        os.replace(tmp, path)


def latest(name: str, definitions: str, path: Path) -> MachineBuild | None:
    found = load_state(path).builds.get(definitions)
    return found if found is not None and found.name == name else None


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with (path.parent / ".state.lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# -- what defines an image ---------------------------------------------------------------------


def definitions_digest(lock: ImagesLock, name: str, entry: BaseEntry | ImageEntry) -> str:
    """The digest of what the lock says defines `name` (not what a build of it produced)."""
    if isinstance(entry, BaseEntry):
        defined: dict[str, JsonValue] = {
            "tag": entry.tag,
            "suite": entry.suite,
            "variant": entry.variant,
            "include": entry.include,
        }
    else:
        defined = {
            "tag": entry.tag,
            "dockerfile_sha256": entry.dockerfile_sha256,
            "files": entry.files,
            "inputs": entry.inputs,
        }
    defined.update(name=name, source_date_epoch=lock.source_date_epoch)
    return hashlib.sha256(canonical_bytes(defined)).hexdigest()


def current_definitions(lock: ImagesLock, name: str, images_root: Path) -> str:
    """The digest of `name`'s definitions as they are on disk.

    Pins are taken as the lock has them: builds refuse a Dockerfile whose ARGs differ.
    """
    entry = lock.entry(name)
    on_disk = entry.model_copy(
        update={
            "dockerfile_sha256": context.sha256_of(images_root / name / "Dockerfile"),
            "files": context.file_hashes(images_root, name),
        }
    )
    return definitions_digest(lock, name, on_disk)
