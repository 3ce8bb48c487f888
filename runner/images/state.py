"""What this Docker daemon holds of the locked images.

One question, asked one way everywhere: is the image the lock records here? It must be under its tag
and built from the current definitions. If not, is there a drifted rebuild of the same definitions
that this machine recorded (runner.images.machine)? This module also removes what a build leaves
behind.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from docker import DockerClient
from docker.errors import APIError, ImageNotFound

from runner.backends.policy import connect
from runner.core.errors import UserError
from runner.images import context, machine
from runner.images.lock import BASE_NAME, BaseEntry, ImageEntry, ImagesLock

BASE = BASE_NAME  # the offline base, listed and verified beside the prover images
BUILD_TIMEOUT = 600  # seconds the daemon may stay silent: a quiet build step, saving a large image


class ImageState(StrEnum):
    PRESENT = "present"  # the tag is the locked ID, and nothing it is built from has changed
    MISSING = "missing"  # no image under the tag here
    STALE = "stale"  # the tag is another image, the base is not the locked one, or a pin changed
    NOT_BUILT = "not built"  # the lock records no build
    UNCHECKED = "unchecked"  # recorded, but no daemon answered to say whether it is here
    DRIFTED = "drifted"  # not the locked ID: a rebuild of the same definitions this machine made


@dataclass(frozen=True)
class ImageStatus:
    name: str
    tag: str
    image_id: str | None
    state: ImageState
    is_base: bool = False  # a debootstrapped base, not a prover image


def connect_for_builds() -> DockerClient:
    """The daemon connection (runner.backends.policy), patient enough for builds."""
    return connect(timeout=BUILD_TIMEOUT)


def image_id_of(client: DockerClient, reference: str) -> str | None:
    """The ID of the image `reference` (a tag or an ID) names on this daemon, or None."""
    try:
        return str(client.images.get(reference).id)
    except ImageNotFound:
        return None


def locked_state(
    client: DockerClient, lock: ImagesLock, name: str, images_root: Path
) -> ImageState:
    """Whether the image the lock records for `name` (or `base`) is here and current."""
    entry = lock.any_entry(name)
    if entry.image_id is None:
        return ImageState.NOT_BUILT
    found = image_id_of(client, entry.tag)
    if found is None:
        return ImageState.MISSING
    if found != entry.image_id:
        return ImageState.STALE
    if lock.is_base(name):
        return ImageState.PRESENT
    if locked_state(client, lock, lock.base_of(name), images_root) is not ImageState.PRESENT:
        return ImageState.STALE
    image = lock.entry(name)
    unchanged = (
        context.sha256_of(images_root / name / "Dockerfile") == image.dockerfile_sha256
        and context.file_hashes(images_root, name) == image.files
    )
    return ImageState.PRESENT if unchanged else ImageState.STALE


def drifted_rebuild(
    client: DockerClient, lock: ImagesLock, name: str, state_file: Path
) -> machine.MachineBuild | None:
    """This machine's recorded rebuild of `name`'s locked definitions, if the daemon still holds it.

    The rebuild is the one `state_file` records; its ID is not the locked ID.
    """
    entry = lock.any_entry(name)
    build = machine.latest(name, machine.definitions_digest(lock, name, entry), state_file)
    if build is None or build.image_id == entry.image_id:
        return None
    return build if image_id_of(client, build.image_id) is not None else None


def is_current(client: DockerClient, lock: ImagesLock, name: str, images_root: Path) -> bool:
    """The tagged image is the locked one, and nothing it was built from has changed."""
    return locked_state(client, lock, name, images_root) is ImageState.PRESENT


def statuses(
    client: DockerClient | None, lock: ImagesLock, images_root: Path, state_file: Path
) -> list[ImageStatus]:
    """The base and every locked image, with their state here (UNCHECKED without a daemon)."""
    found = []
    bases = [(name, lock.base_named(name)) for name in lock.base_names()]
    entries = [(name, base.tag, base.image_id) for name, base in bases]
    entries += [(name, entry.tag, entry.image_id) for name, entry in sorted(lock.images.items())]
    for name, tag, image_id in entries:
        if image_id is None:
            state = ImageState.NOT_BUILT
        elif client is None:
            state = ImageState.UNCHECKED
        else:
            state = locked_state(client, lock, name, images_root)
            if state is not ImageState.PRESENT and drifted_rebuild(client, lock, name, state_file):
                state = ImageState.DRIFTED
        found.append(ImageStatus(name, tag, image_id, state, lock.is_base(name)))
    return found


def require_base(
    client: DockerClient, lock: ImagesLock, state_file: Path, *, allow_drift: bool = False
) -> str:
    """The locked base's tag, once it is here.

    When the lock records an ID, the base must have it. With `allow_drift`, a recorded drifted
    rebuild of it will do.
    """
    base = lock.base
    found = image_id_of(client, base.tag)
    if found is None:
        raise UserError(f"the base image {base.tag} is missing: run `{base_command(lock)}`")
    drifted = drifted_rebuild(client, lock, lock.base_name, state_file) if allow_drift else None
    if base.image_id is not None and found != base.image_id:
        if drifted is not None and drifted.image_id == found:
            return base.tag
        raise UserError(
            f"{base.tag} is {found}, not the locked {base.image_id}: run `{base_command(lock)}`"
        )
    return base.tag


def base_command(lock: ImagesLock) -> str:
    """The command that builds `lock`'s base (`prooflock images base [NAME]`)."""
    name = lock.base_name
    return "prooflock images base" + ("" if name == BASE else f" {name}")


def tag_image(client: DockerClient, tag: str, image_id: str) -> None:
    """Point `tag` (`prooflock/<name>:<version>`) at `image_id`."""
    repository, _, version = tag.rpartition(":")
    client.images.get(image_id).tag(repository, version)


def tag_if_locked(client: DockerClient, lock: ImagesLock, image_id: str) -> str | None:
    """Tag `image_id` as the lock's image (or base) whose ID it is; that name, or None."""
    entries: dict[str, BaseEntry | ImageEntry] = {
        **{name: lock.base_named(name) for name in lock.base_names()},
        **lock.images,
    }
    for name, entry in sorted(entries.items()):
        if entry.image_id == image_id:
            tag_image(client, entry.tag, image_id)
            return name
    return None


def discard(client: DockerClient, reference: str, *, untag: bool = False) -> None:
    """Remove an image no tag refers to, and prune the intermediate images of its build.

    With `untag`, drop the tag `reference` first. Tagged images and images in use are left alone.
    """
    try:
        image = client.images.get(reference)
    except ImageNotFound:
        return
    if untag and reference not in image.tags:
        return
    if not untag and image.tags:
        return
    with contextlib.suppress(APIError):
        client.images.remove(reference if untag else str(image.id), noprune=False)
