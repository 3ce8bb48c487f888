"""One locked image (or the base) built again: exactly from its closure, or drifted when allowed.

The closure's `.deb`s and the image's other inputs go into the local store (runner.images.store).
The build's context carries them, and the build runs with no network. The closure is the only
repository apt sees; debootstrap reads it as a directory. So exactly the locked versions are
installed, and each download is the locked file.

When some cannot be had, the build is refused with one line per package. If drift is allowed, those
packages take the mirror's version and the rest stay locked. If apt cannot resolve that mix, the
build takes everything from the live mirror. Nothing here tags or records: the caller decides what a
result is worth (runner.images.api).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TextIO

from docker import DockerClient

from runner.images.base import BaseBuilt, build_base
from runner.images.build import (
    BuildFailed,
    BuildOptions,
    BuildPlan,
    BuildResult,
    InputMissing,
    build_image,
)
from runner.images.closure import PackageDrift, as_deb, package_drift
from runner.images.debian import Indexes
from runner.images.downloads import gather_downloads, missing_line, unpinned_line
from runner.images.exact import live_indexes, missing_lines, repository, sources
from runner.images.inputs import BuildInputs
from runner.images.lock import Closure, ImagesLock, Kit
from runner.images.store import Gathered, InputStore, MirrorSource, gather

LOCKED_CLOSURE = "the locked closure"


@dataclass
class Reproduction:
    """What a rebuild of a locked definition gave (image_id None: refused before building)."""

    name: str
    tag: str
    locked_id: str | None
    image_id: str | None = None
    built_from: str = ""
    missing: list[str] = field(default_factory=list)  # closure packages that could not be had
    drift: list[PackageDrift] = field(default_factory=list)  # locked → built, by package
    diff_ids: list[str] = field(default_factory=list)
    packages: list[str] = field(default_factory=list)
    size_bytes: int | None = None
    seconds: int = 0

    @property
    def exact(self) -> bool:
        return self.image_id is not None and self.image_id == self.locked_id

    def drift_lines(self) -> list[str]:
        """Package by package, why this is not the locked image."""
        if self.image_id is None:
            return self.missing
        lines = [f"{item}: the mirror moved on" for item in self.drift]
        if not lines and not self.exact and self.locked_id is not None:
            lines = [
                "the packages are the locked ones; the image's own files differ: run "
                f"`prooflock images verify {self.name}` to list them"
            ]
        return lines


# Pins that change no package: an experiment with only these still installs the locked closure.
CLOCK_PINS = frozenset({"SOURCE_DATE_EPOCH"})


def _packages_may_differ(options: BuildOptions) -> bool:
    """Another base, or a pin that may name another package version: the closure may not fit."""
    return options.base is not None or bool(set(options.pins) - CLOCK_PINS)


def reproduce_image(
    client: DockerClient, plan: BuildPlan, *, out: TextIO = sys.stderr
) -> Reproduction:
    entry = plan.entry
    started = time.monotonic()
    found = Reproduction(plan.name, entry.tag, entry.image_id)
    closure = beyond_base(entry.closure, plan.lock)
    store = InputStore(plan.inputs.cache_dir)
    plan = replace(plan, downloads=_gather_downloads(plan, store, out))
    if not entry.closure or _packages_may_differ(plan.options):
        result = build_image(client, plan, out=out)
        found.built_from = f"the mirror {plan.inputs.apt_mirror} (no locked closure applies)"
        return _finish(found, result, entry.versions(), started)
    gathered = _gather(plan.name, closure, store, plan.lock, plan.inputs, out)
    if gathered.complete:
        with repository(closure, gathered, store, plan.lock.base.suite) as folder:
            result = build_image(client, replace(plan, repository=folder), out=out)
        found.built_from = LOCKED_CLOSURE
        return _finish(found, result, entry.versions(), started)
    indexes = live_indexes(plan.lock, plan.inputs)
    found.missing = missing_lines(plan.name, gathered, indexes)
    if not plan.options.allow_drift:
        return found
    result, found.built_from = _build_drifted(client, plan, gathered, indexes, store, out)
    return _finish(found, result, entry.versions(), started)


def reproduce_base(
    client: DockerClient,
    kit: Kit,
    inputs: BuildInputs,
    *,
    allow_drift: bool,
    out: TextIO = sys.stderr,
) -> Reproduction:
    lock = kit.lock
    base = lock.base
    started = time.monotonic()
    found = Reproduction(kit.base_name, base.tag, base.image_id)
    store = InputStore(inputs.cache_dir)
    gathered = (
        _gather(kit.base_name, base.closure, store, lock, inputs, out) if base.closure else None
    )
    if gathered is not None and gathered.complete:
        index = kit.base_index()
        with repository(base.closure, gathered, store, base.suite, index=index) as folder:
            built = build_base(client, lock, inputs, mirror=f"file://{folder}", log=out)
        found.built_from = LOCKED_CLOSURE
        return _finish_base(found, built, base.versions(), started)
    if gathered is not None:
        found.missing = missing_lines(kit.base_name, gathered, live_indexes(lock, inputs))
        if not allow_drift:
            return found
    built = build_base(client, lock, inputs, log=out)
    found.built_from = f"the mirror {inputs.apt_mirror}"
    return _finish_base(found, built, base.versions(), started)


def beyond_base(closure: Closure, lock: ImagesLock) -> Closure:
    """What a build on the locked base installs: the closure less what the base has.

    Packages the base has at the same version are left out. The base keeps those, so the repository
    need not hold them.
    """
    return {name: deb for name, deb in closure.items() if lock.base.closure.get(name) != deb}


def _gather(
    name: str,
    closure: Closure,
    store: InputStore,
    lock: ImagesLock,
    inputs: BuildInputs,
    out: TextIO,
) -> Gathered:
    gathered = gather(closure, store, sources(lock, inputs))
    if gathered.fetched:
        print(
            f"{name}: fetched {gathered.fetched} of {len(closure)} closure packages into the "
            f"store ({gathered.fetched_bytes / 1e6:.0f} MB)",
            file=out,
            flush=True,
        )
    return gathered


def _gather_downloads(plan: BuildPlan, store: InputStore, out: TextIO) -> dict[str, Path]:
    """The image's downloads in the store, and the copies it needs by hand.

    This machine fetches missing ones. InputMissing, in one line, when one cannot be had.
    """
    entry = plan.entry
    given = {*plan.inputs.files, *entry.downloads}  # a locked download comes from the store
    lacking = [name for name in entry.vendored if name not in given]
    if lacking and not plan.options.experiment:
        raise InputMissing(
            f"{plan.name}: needs {lacking[0]}, an input no store holds and the build cannot fetch: "
            f"give it with --input {lacking[0]}=PATH (see images/{plan.name}/Dockerfile)"
        )
    if not entry.downloads:
        return {}
    if refused := unpinned_line(plan.name, entry):
        raise InputMissing(refused)
    gathered = gather_downloads(entry, store, plan.lock, plan.inputs)
    if not gathered.complete:
        raise InputMissing(missing_line(plan.name, entry, gathered))
    if gathered.fetched:
        print(
            f"{plan.name}: fetched {gathered.fetched} of {len(entry.downloads)} downloads into "
            f"the store ({gathered.fetched_bytes / 1e6:.0f} MB)",
            file=out,
            flush=True,
        )
    return gathered.paths


def _build_drifted(
    client: DockerClient,
    plan: BuildPlan,
    gathered: Gathered,
    indexes: Indexes | None,
    store: InputStore,
    out: TextIO,
) -> tuple[BuildResult, str]:
    """The closure with the mirror's version of each package that cannot be had.

    When apt cannot resolve that mix, the live mirror alone.
    """
    closure = beyond_base(plan.entry.closure, plan.lock)
    newer = {}
    for missing in gathered.missing:
        stanza = indexes.newest(missing.package) if indexes is not None else None
        if stanza is not None:
            newer[missing.package] = as_deb(stanza)
    mirror = MirrorSource(
        plan.inputs.apt_mirror, plan.inputs.apt_mirror, plan.inputs.apt_security_mirror
    )
    extra = gather(newer, store, [mirror])
    if len(newer) == len(gathered.missing) and extra.complete:
        mixed = {**{n: closure[n] for n in gathered.paths}, **newer}
        both = Gathered(paths={**gathered.paths, **extra.paths})
        try:
            with repository(mixed, both, store, plan.lock.base.suite) as folder:
                result = build_image(client, replace(plan, repository=folder), out=out)
            return result, (
                f"{LOCKED_CLOSURE}, with the mirror's version of {len(newer)} package(s)"
            )
        except BuildFailed:
            print(
                f"{plan.name}: apt could not install the locked closure with the mirror's newer "
                "packages; building from the live mirror",
                file=out,
                flush=True,
            )
    return build_image(client, plan, out=out), f"the live mirror {plan.inputs.apt_mirror}"


def _finish(
    found: Reproduction, result: BuildResult, locked: dict[str, str], started: float
) -> Reproduction:
    found.image_id = result.image_id
    found.diff_ids, found.packages, found.size_bytes = (
        result.diff_ids,
        result.packages,
        result.size_bytes,
    )
    return _drift(found, locked, started)


def _finish_base(
    found: Reproduction, built: BaseBuilt, locked: dict[str, str], started: float
) -> Reproduction:
    found.image_id = built.entry.image_id
    found.diff_ids, found.packages = built.entry.diff_ids, built.entry.packages
    return _drift(found, locked, started)


def _drift(found: Reproduction, locked: dict[str, str], started: float) -> Reproduction:
    if locked and not found.exact:
        found.drift = package_drift(locked, dict(p.split("=", 1) for p in found.packages))
    found.seconds = int(time.monotonic() - started)
    return found
