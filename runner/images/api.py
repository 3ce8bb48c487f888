"""The images verbs as Python functions; `prooflock images ...` prints what they return.

    build_base_image(kit, inputs)            the offline base from its closure, unless it is here
    build_images(kit, names, inputs, opts)   prover images from their closures, unless here
    verify_images(kit, names, inputs)        rebuild without cache, compare with the lock
    pin_images(kit, names)                   record the Dockerfiles' pins in the lock
    relock_images(kit, names, inputs)        record this machine's builds and closures in the lock
    vendor_images(kit, names, inputs, to)    fill the .deb store (or a remote one) with closures
    list_images(kit, state_file)             the locked images and whether this daemon has them
    build_locked(name, settings, notify, s3) what `--build-missing` runs: base, then image
    rebuilt_id(name, settings, s3)           what `audit --rebuild` runs: the ID a rebuild gets

A `Kit` (runner.images.lock) is the lock and the definitions beside it. Builds never write it. A
build that gives the locked ID is tagged. One that gives another ID is refused with its drift,
package by package. With `allow_drift` it is tagged instead, and recorded in this machine's state
file (runner.images.machine). Only `pin_images` and `relock_images` write the lock.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, TextIO, cast

from docker import DockerClient

from runner.backends.policy import DaemonUnavailable, connect
from runner.core.errors import InfraFailure, UserError
from runner.core.settings import Settings
from runner.images import machine
from runner.images.base import debootstrap_version
from runner.images.build import BuildFailed, BuildOptions, BuildPlan
from runner.images.inputs import BuildInputs, resolve_inputs
from runner.images.lock import Kit
from runner.images.normalize import NotFromBase
from runner.images.pin import pin_images
from runner.images.relock import relock_images
from runner.images.reproduce import Reproduction, reproduce_base, reproduce_image
from runner.images.selftest import SelfTestFailed
from runner.images.state import (
    ImageState,
    ImageStatus,
    connect_for_builds,
    discard,
    drifted_rebuild,
    image_id_of,
    is_current,
    locked_state,
    statuses,
    tag_image,
)
from runner.images.vendor import vendor_images
from runner.images.verify import verify_images

if TYPE_CHECKING:
    from runner.storage.s3_settings import S3Settings

__all__ = [
    "BuildOutcome",
    "Built",
    "build_base_image",
    "build_images",
    "build_locked",
    "list_images",
    "pin_images",
    "rebuilt_id",
    "relock_images",
    "vendor_images",
    "verify_images",
]

FAILURES = (BuildFailed, SelfTestFailed, NotFromBase)  # a build that ran and did not give an image


class BuildOutcome(StrEnum):
    CURRENT = "current"  # the locked image (or, allowed, a recorded drifted rebuild) is here
    BUILT = "built"  # built to the locked ID (or, for an image never locked, built) and tagged
    DRIFTED = "drifted"  # another ID, allowed: tagged and recorded in this machine's state
    REFUSED = "refused"  # it would not be (or was not) the locked ID: nothing tagged
    EXPERIMENT = "experiment"  # pins overridden or another base: neither tagged nor recorded
    FAILED = "failed"  # the build, its normalization or its self-test failed


@dataclass(frozen=True)
class Built:
    """What happened to one image (or the base)."""

    name: str
    tag: str
    outcome: BuildOutcome
    locked_id: str | None  # what the lock records
    image_id: str | None = None  # what was built (or found current)
    seconds: int = 0
    error: str = ""
    drift: list[str] = field(default_factory=list)  # package by package, why not the locked ID
    built_from: str = ""

    @property
    def matches_lock(self) -> bool:
        return self.image_id is not None and self.image_id == self.locked_id


def build_base_image(
    kit: Kit,
    inputs: BuildInputs,
    *,
    rebuild: bool = False,
    allow_drift: bool = False,
    client: DockerClient | None = None,
    out: TextIO = sys.stderr,
) -> Built:
    """Build the offline base from its closure unless the locked one is here."""
    client = client or connect_for_builds()
    base = kit.lock.base
    state_file = machine.state_path(inputs.cache_dir)
    if not rebuild:
        current = _already_here(client, kit, kit.base_name, allow_drift, state_file)
        if current is not None:
            return current
    try:
        found = reproduce_base(client, kit, inputs, allow_drift=allow_drift, out=out)
    except FAILURES as exc:
        return Built(kit.base_name, base.tag, BuildOutcome.FAILED, base.image_id, error=str(exc))
    provenance = {**inputs.provenance(), "debootstrap": debootstrap_version()}
    return _settle(client, kit, found, allow_drift, provenance, state_file)


def list_images(kit: Kit, state_file: Path) -> list[ImageStatus]:
    """The base and every locked image, with whether this daemon holds it.

    A daemon that does not answer within seconds gives UNCHECKED: listing never waits. Drifted
    rebuilds are listed as `state_file` records them.
    """
    try:
        client = connect(timeout=10)
    except DaemonUnavailable:
        client = None
    return statuses(client, kit.lock, kit.images_root, state_file)


def build_images(
    kit: Kit,
    names: Iterable[str] | None,
    inputs: BuildInputs,
    options: BuildOptions | None = None,
    *,
    rebuild: bool = False,
    client: DockerClient | None = None,
    out: TextIO = sys.stderr,
) -> Iterator[Built]:
    """Build each image from its closure unless the locked one is here and current.

    `names` None means every image in the lock. Yields one outcome per image, as it is done. A
    failed or refused build is an outcome, not an exception, so the next image still builds. With
    `options.experiment` (pins overridden, another base) nothing is tagged or recorded.
    """
    options = options or BuildOptions()
    names = list(names) if names is not None else sorted(kit.lock.images)
    for name in names:
        kit.lock.entry(name)  # a UserError naming the image when it is unknown
    client = client or connect_for_builds()
    options = replace(options, tag=not options.experiment)
    docker_version = str(client.version().get("Version", "unknown"))
    state_file = machine.state_path(inputs.cache_dir)
    for name in names:
        plan = BuildPlan.of(kit, name, inputs, options)
        locked_id, tag = plan.entry.image_id, plan.entry.tag
        if not (rebuild or options.nocache or options.experiment):
            current = _already_here(client, kit, name, options.allow_drift, state_file)
            if current is not None:
                yield current
                continue
        try:
            found = reproduce_image(client, plan, out=out)
        except FAILURES as exc:
            yield Built(name, tag, BuildOutcome.FAILED, locked_id, error=str(exc))
            continue
        if options.experiment:
            yield Built(
                name, tag, BuildOutcome.EXPERIMENT, locked_id, found.image_id, found.seconds
            )
            continue
        provenance = {**inputs.provenance(), "docker": docker_version}
        yield _settle(client, kit, found, options.allow_drift, provenance, state_file)


def _already_here(
    client: DockerClient, kit: Kit, name: str, allow_drift: bool, state_file: Path
) -> Built | None:
    """The locked image, current; or (drift allowed) a recorded rebuild of its definitions."""
    entry = kit.lock.any_entry(name)
    if is_current(client, kit.lock, name, kit.images_root):
        return Built(name, entry.tag, BuildOutcome.CURRENT, entry.image_id, entry.image_id)
    drifted = drifted_rebuild(client, kit.lock, name, state_file) if allow_drift else None
    if drifted is None or image_id_of(client, entry.tag) != drifted.image_id:
        return None
    return Built(
        name,
        entry.tag,
        BuildOutcome.CURRENT,
        entry.image_id,
        drifted.image_id,
        drift=[f"{item}" for item in drifted.package_drift()],
        built_from=drifted.built_from,
    )


def _settle(
    client: DockerClient,
    kit: Kit,
    found: Reproduction,
    allow_drift: bool,
    provenance: dict[str, object],
    state_file: Path,
) -> Built:
    """Tag what may be used and record it on this machine; refuse (and remove) the rest."""
    name, tag, locked_id = found.name, found.tag, found.locked_id
    if found.image_id is None:
        return Built(name, tag, BuildOutcome.REFUSED, locked_id, drift=found.drift_lines())
    lines = found.drift_lines()
    if not (found.exact or locked_id is None or allow_drift):
        discard(client, found.image_id)
        return Built(
            name, tag, BuildOutcome.REFUSED, locked_id, found.image_id, found.seconds, drift=lines
        )
    tag_image(client, tag, found.image_id)
    machine.record(
        machine.MachineBuild(
            name=name,
            tag=tag,
            definitions=_definitions(kit, name),
            image_id=found.image_id,
            locked_id=locked_id,
            drift=[machine.Drift(**vars(item)) for item in found.drift],
            built_from=found.built_from,
            diff_ids=found.diff_ids,
            packages=found.packages,
            size_bytes=found.size_bytes,
            provenance=provenance,
        ),
        state_file,
    )
    outcome = BuildOutcome.BUILT if found.exact or locked_id is None else BuildOutcome.DRIFTED
    return Built(
        name,
        tag,
        outcome,
        locked_id,
        found.image_id,
        found.seconds,
        drift=lines,
        built_from=found.built_from,
    )


def _definitions(kit: Kit, name: str) -> str:
    if kit.lock.is_base(name):
        return machine.definitions_digest(kit.lock, name, kit.lock.base_named(name))
    return machine.current_definitions(kit.lock, name, kit.images_root)


def build_locked(
    name: str,
    settings: Settings,
    notify: Callable[[str], None],
    s3: S3Settings | None = None,
) -> None:
    """Build image `name` from its closure (`--build-missing`), and the locked base first if missing.

    Raises InfraFailure when either build fails or does not give the locked ID. `s3` reaches a
    remote store (`PROOFLOCK_STORE`).
    """
    kit = Kit.open()
    entry = kit.lock.entry(name)
    inputs = resolve_inputs(kit.lock.transport, settings, suite=kit.lock.base.suite, s3=s3)
    if inputs.note:
        notify(inputs.note)
    client = connect_for_builds()
    progress = cast(TextIO, NotifyStream(notify))
    if _base_missing(client, kit.for_image(name)):
        base = kit.for_image(name).lock.base
        notify(f"building the locked base {base.tag} first (debootstrap: minutes)")
        built = build_base_image(
            kit.for_image(name), inputs, rebuild=True, client=client, out=progress
        )
        _require_locked(built)
        notify(f"built {base.tag}: {built.image_id}")
    notify(f"building the locked image {entry.tag} (minutes; build inputs from PROOFLOCK_*)")
    image = next(build_images(kit, [name], inputs, rebuild=True, client=client, out=progress))
    _require_locked(image)
    notify(f"built {entry.tag}: {image.image_id}")


def rebuilt_id(name: str, settings: Settings, s3: S3Settings | None = None) -> str:
    """The ID the locked image `name` gets when rebuilt here (`prooflock audit --rebuild`).

    The rebuild uses its closure, no cache and no tag. Nothing is tagged, recorded or left behind.
    When the closure cannot be had, this is the ID of a drifted rebuild.
    """
    kit = Kit.open()
    inputs = resolve_inputs(kit.lock.transport, settings, suite=kit.lock.base.suite, s3=s3)
    client = connect_for_builds()
    options = BuildOptions(nocache=True, tag=False, allow_drift=True)
    plan = BuildPlan.of(kit, name, inputs, options)
    try:
        found = reproduce_image(client, plan)
    except (*FAILURES, UserError) as exc:
        raise InfraFailure(f"could not rebuild {plan.entry.tag}: {exc}") from None
    assert found.image_id is not None  # drift allowed: never refused
    discard(client, found.image_id)  # untagged: removed unless it is the locked image
    return found.image_id


def _base_missing(client: DockerClient, kit: Kit) -> bool:
    state = locked_state(client, kit.lock, kit.base_name, kit.images_root)
    if state is ImageState.NOT_BUILT:  # no recorded ID: any base under the tag is taken
        return image_id_of(client, kit.lock.base.tag) is None
    return state is not ImageState.PRESENT


def _require_locked(built: Built) -> None:
    if built.outcome is BuildOutcome.FAILED:
        raise InfraFailure(f"could not build {built.tag}: {built.error}")
    if built.locked_id is not None and not built.matches_lock:
        got = f"rebuilt to {built.image_id}" if built.image_id else "cannot be rebuilt"
        raise InfraFailure(
            f"{built.tag} {got}, not the locked {built.locked_id}: "
            + "; ".join(built.drift[:3])
            + (f" (+{len(built.drift) - 3} more)" if len(built.drift) > 3 else "")
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
