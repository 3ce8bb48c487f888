"""Pins: what a Dockerfile's `ARG` defaults and the files beside it say an image is made of.

The lock repeats them, so a build can refuse a Dockerfile that drifted from its lock. `prooflock
images pin` records them for images this machine cannot build.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from runner.core.errors import UserError
from runner.images import context
from runner.images.lock import ImagesLock, Kit

TRANSPORT_ARGS = ("APT_MIRROR", "APT_SECURITY_MIRROR", "PIP_INDEX_URL")
SHARED_ARGS = ("BASE", "SOURCE_DATE_EPOCH")  # the lock's own fields, not an image's pins


@dataclass(frozen=True)
class Pins:
    """What the lock records of one image's definition."""

    inputs: dict[str, str]  # Dockerfile ARG → default, without the shared and transport ARGs
    files: dict[str, str]  # other build-context files → sha256
    dockerfile_sha256: str


@dataclass(frozen=True)
class Pinned:
    name: str
    dockerfile: Path
    changed: bool  # the lock's pins were different and now match the Dockerfile
    dropped_build: bool  # the lock had a build of the old pins, no longer locked


def read_pins(images_root: Path, name: str, lock: ImagesLock) -> Pins:
    dockerfile = images_root / name / "Dockerfile"
    declared = context.dockerfile_args(dockerfile)
    shared = {*SHARED_ARGS, *lock.transport}
    return Pins(
        inputs={k: v or "" for k, v in declared.items() if k not in shared},
        files=context.file_hashes(images_root, name),
        dockerfile_sha256=context.sha256_of(dockerfile),
    )


def check_pins_match(images_root: Path, name: str, lock: ImagesLock) -> dict[str, str | None]:
    """The Dockerfile's ARG defaults must equal the lock's pins; return the ARGs it declares."""
    entry = lock.entry(name)
    dockerfile = images_root / name / "Dockerfile"
    if not dockerfile.is_file():
        raise UserError(f"{dockerfile}: no such file")
    declared = context.dockerfile_args(dockerfile)
    expected = {
        **entry.inputs,
        "BASE": lock.base_named(entry.base).registry_reference,
        "SOURCE_DATE_EPOCH": str(lock.source_date_epoch),
        **{arg: lock.transport[arg] for arg in TRANSPORT_ARGS if arg in declared},
    }
    for arg, value in sorted(expected.items()):
        if declared.get(arg, "<not declared>") != value:
            raise UserError(
                f"{dockerfile}: ARG {arg} is {declared.get(arg, '<not declared>')!r} but the images "
                f"lock pins {value!r}: change both together"
            )
    extra = sorted(set(declared) - set(expected))
    if extra:
        raise UserError(f"{dockerfile}: ARG {', '.join(extra)} not pinned in the images lock")
    return declared


def pin_images(kit: Kit, names: Iterable[str]) -> list[Pinned]:
    """Record the Dockerfiles' pins and file hashes in the lock (`prooflock images pin`).

    An image whose pins change loses its recorded build and closure, as they belong to other pins.
    Build the new ones, then run `prooflock images relock`.
    """
    kit.require_writable()
    done = []
    for name in names:
        entry = kit.lock.entry(name)
        pins = read_pins(kit.images_root, name, kit.lock)
        dockerfile = kit.images_root / name / "Dockerfile"
        if (pins.inputs, pins.files, pins.dockerfile_sha256) == (
            entry.inputs,
            entry.files,
            entry.dockerfile_sha256,
        ):
            done.append(Pinned(name, dockerfile, changed=False, dropped_build=False))
            continue
        stale = entry.image_id is not None
        kit.lock.images[name] = entry.model_copy(
            update={
                "inputs": pins.inputs,
                "files": pins.files,
                "dockerfile_sha256": pins.dockerfile_sha256,
                **(_unbuilt() if stale else {}),
            }
        )
        done.append(Pinned(name, dockerfile, changed=True, dropped_build=stale))
    kit.save()
    return done


def _unbuilt() -> dict[str, object]:
    """The fields of a lock entry that describe a build, as they are before any."""
    return {
        "status": "not built",
        "image_id": None,
        "diff_ids": [],
        "packages": [],
        "closure": {},
        "size_bytes": None,
    }
