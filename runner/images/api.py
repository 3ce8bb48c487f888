"""The images verbs as Python functions; `prooflock images ...` prints what they return.

    build_base_image(kit, inputs)            the offline base (debootstrap), unless it is here
    build_images(kit, names, inputs, opts)   prover images, unless the locked ones are here
    verify_images(kit, names, inputs)        rebuild without cache, compare with the lock
    pin_images(kit, names)                   record the Dockerfiles' pins in the lock
    list_images(kit)                         the locked images and whether this daemon has them
    build_locked(name, notify)               what `--build-missing` runs: base, then image
    rebuilt_id(name)                         what `audit --rebuild` runs: the ID a rebuild gets

A `Kit` (runner.images.lock) is the lock and the definitions beside it. A checkout's lock records
what is built; the copy installed with the package is read-only: a build there is compared with
the locked ID, never recorded.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import TextIO, cast

from docker import DockerClient

from runner.core.errors import InfraFailure, UserError
from runner.images.base import build_base
from runner.images.build import BuildFailed, BuildOptions, BuildPlan, build_image
from runner.images.inputs import BuildInputs, resolve_inputs
from runner.images.lock import Kit
from runner.images.normalize import NotFromBase
from runner.images.pin import pin_images
from runner.images.policy import DaemonUnavailable, connect
from runner.images.record import record_base, record_build
from runner.images.selftest import SelfTestFailed
from runner.images.state import (
    BASE,
    ImageState,
    ImageStatus,
    connect_for_builds,
    discard,
    image_id_of,
    is_current,
    locked_state,
    statuses,
)
from runner.images.verify import verify_images

__all__ = [
    "BuildOutcome",
    "Built",
    "build_base_image",
    "build_images",
    "build_locked",
    "list_images",
    "pin_images",
    "rebuilt_id",
    "verify_images",
]

FAILURES = (BuildFailed, SelfTestFailed, NotFromBase)  # a build that ran and did not give an image


class BuildOutcome(StrEnum):
    CURRENT = "current"  # the locked image is here and current: nothing built
    BUILT = "built"  # built and tagged; recorded in the lock when the lock is writable
    EXPERIMENT = "experiment"  # pins overridden or another base: neither tagged nor recorded
    FAILED = "failed"  # the build, its normalization or its self-test failed


@dataclass(frozen=True)
class Built:
    """What happened to one image (or the base)."""

    name: str
    tag: str
    outcome: BuildOutcome
    locked_id: str | None  # what the lock recorded before
    image_id: str | None = None  # what was built (or found current)
    seconds: int = 0
    recorded: bool = False  # written into the lock
    error: str = ""

    @property
    def matches_lock(self) -> bool:
        return self.image_id is not None and self.image_id == self.locked_id


def build_base_image(
    kit: Kit, inputs: BuildInputs, *, rebuild: bool = False, client: DockerClient | None = None
) -> Built:
    """Build the offline base unless the locked one is here; record it if the lock is writable."""
    client = client or connect_for_builds()
    base = kit.lock.base
    if not rebuild and is_current(client, kit.lock, BASE, kit.images_root):
        return Built(BASE, base.tag, BuildOutcome.CURRENT, base.image_id, base.image_id)
    built = build_base(client, kit.lock, inputs)
    if kit.writable:
        record_base(kit.lock, built)
        kit.save()
    return Built(
        BASE,
        base.tag,
        BuildOutcome.BUILT,
        base.image_id,
        built.entry.image_id,
        built.seconds,
        recorded=kit.writable,
    )


def list_images(kit: Kit) -> list[ImageStatus]:
    """The base and every locked image, with whether this daemon holds it (UNCHECKED when no
    daemon answers within seconds: listing never waits for one)."""
    try:
        client = connect(timeout=10)
    except DaemonUnavailable:
        client = None
    return statuses(client, kit.lock, kit.images_root)


def build_images(
    kit: Kit,
    names: Iterable[str] | None,
    inputs: BuildInputs,
    options: BuildOptions | None = None,
    *,
    rebuild: bool = False,
    client: DockerClient | None = None,
) -> Iterator[Built]:
    """Build each image (None: every image in the lock) unless the locked one is here and
    current; one outcome per image, as it is done. A failed build is an outcome, not an
    exception: the next image still builds.

    With `options.experiment` (pins overridden, another base) nothing is tagged or recorded.
    """
    options = options or BuildOptions()
    names = list(names) if names is not None else sorted(kit.lock.images)
    for name in names:
        kit.lock.entry(name)  # a UserError naming the image when it is unknown
    client = client or connect_for_builds()
    docker_version = str(client.version().get("Version", "unknown"))
    options = replace(options, tag=not options.experiment)
    for name in names:
        plan = BuildPlan.of(kit, name, inputs, options)
        locked_id, tag = plan.entry.image_id, plan.entry.tag
        reuse = not (rebuild or options.nocache or options.experiment)
        if reuse and is_current(client, kit.lock, name, kit.images_root):
            yield Built(name, tag, BuildOutcome.CURRENT, locked_id, locked_id)
            continue
        try:
            result = build_image(client, plan)
        except FAILURES as exc:
            yield Built(name, tag, BuildOutcome.FAILED, locked_id, error=str(exc))
            continue
        seconds = sum(result.seconds.values())
        if options.experiment:
            yield Built(name, tag, BuildOutcome.EXPERIMENT, locked_id, result.image_id, seconds)
            continue
        if kit.writable:
            record_build(plan, result, docker_version)
            kit.save()
        yield Built(
            name,
            tag,
            BuildOutcome.BUILT,
            locked_id,
            result.image_id,
            seconds,
            recorded=kit.writable,
        )


def build_locked(name: str, notify: Callable[[str], None]) -> None:
    """Build image `name` from its pins (`--build-missing`), and first the locked base when it is
    missing here; InfraFailure when either fails or does not give the locked ID."""
    kit = Kit.open()
    entry = kit.lock.entry(name)
    inputs = resolve_inputs(kit.lock.transport, suite=kit.lock.base.suite)
    client = connect_for_builds()
    progress = cast(TextIO, NotifyStream(notify))
    if _base_missing(client, kit):
        base = kit.lock.base
        notify(f"building the locked base {base.tag} first (debootstrap: minutes)")
        try:
            built = build_base(client, kit.lock, inputs, log=progress)
        except (BuildFailed, UserError) as exc:
            raise InfraFailure(f"could not build {base.tag}: {exc}") from None
        _require_locked(base.tag, built.entry.image_id, base.image_id, BASE)
        if kit.writable:
            record_base(kit.lock, built)
            kit.save()
        notify(f"built {base.tag}: {built.entry.image_id}")
    notify(f"building the locked image {entry.tag} (minutes; build inputs from PROOFLOCK_*)")
    plan = BuildPlan.of(kit, name, inputs)
    try:
        result = build_image(client, plan, out=progress)
    except (*FAILURES, UserError) as exc:
        raise InfraFailure(f"could not build {entry.tag}: {exc}") from None
    _require_locked(entry.tag, result.image_id, entry.image_id, name)
    if kit.writable:
        record_build(plan, result, str(client.version().get("Version", "unknown")))
        kit.save()
    notify(f"built {entry.tag}: {result.image_id}")


def rebuilt_id(name: str) -> str:
    """Rebuild the locked image `name` from its pins without cache, untagged, and return the ID
    it gets here (`prooflock audit --rebuild`); nothing is tagged, recorded or left behind."""
    kit = Kit.open()
    inputs = resolve_inputs(kit.lock.transport, suite=kit.lock.base.suite)
    client = connect_for_builds()
    plan = BuildPlan.of(kit, name, inputs, BuildOptions(nocache=True, tag=False))
    try:
        result = build_image(client, plan)
    except (*FAILURES, UserError) as exc:
        raise InfraFailure(f"could not rebuild {plan.entry.tag}: {exc}") from None
    discard(client, result.image_id)  # untagged: removed unless it is the locked image
    return result.image_id


def _base_missing(client: DockerClient, kit: Kit) -> bool:
    state = locked_state(client, kit.lock, BASE, kit.images_root)
    if state is ImageState.NOT_BUILT:  # no recorded ID: any base under the tag is taken
        return image_id_of(client, kit.lock.base.tag) is None
    return state is not ImageState.PRESENT


def _require_locked(tag: str, built: str | None, locked: str | None, name: str) -> None:
    if locked is not None and built != locked:
        raise InfraFailure(
            f"{tag} rebuilt to {built}, not the locked {locked}: run "
            f"`prooflock images verify {name}` to see what differs"
        )


class NotifyStream(io.TextIOBase):
    """A text stream that hands each complete line to `notify` (build progress, for the checker)."""

    def __init__(self, notify: Callable[[str], None]):
        self.notify = notify
        self.pending = ""

    def write(self, text: str) -> int:
        lines = (self.pending + text).split("\n")
        self.pending = lines.pop()
        for line in lines:
            if line.strip():
                self.notify(line)
        return len(text)
