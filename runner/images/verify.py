"""`prooflock images verify`: rebuild without cache from the locked closure and compare.

The same image ID means the recorded image is reproducible from its pins and closure. A different
one is explained by what differs:
- closure packages that could not be had (the mirror's version was used);
- the base;
- the installed packages;
- file by file, the image's own layer (a build step that is not deterministic).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from docker import DockerClient

from runner.core.errors import UserError
from runner.images import archive
from runner.images.build import BuildOptions, BuildPlan
from runner.images.inputs import BuildInputs
from runner.images.layers import index_differences, layer_index
from runner.images.lock import Kit
from runner.images.reproduce import reproduce_base, reproduce_image
from runner.images.state import base_command, connect_for_builds, discard, image_id_of


@dataclass
class Comparison:
    name: str
    locked_id: str | None
    rebuilt_id: str
    differences: list[str] = field(default_factory=list)

    @property
    def same(self) -> bool:
        return self.locked_id == self.rebuilt_id


def verify_images(
    kit: Kit, names: Iterable[str], inputs: BuildInputs, *, client: DockerClient | None = None
) -> Iterator[Comparison]:
    """Rebuild each image (or `base`) without cache and compare it with the lock, one by one."""
    names = list(names)
    for name in names:
        kit.lock.any_entry(name)  # a UserError naming the image when it is unknown
    client = client or connect_for_builds()
    for name in names:
        if kit.lock.is_base(name):
            yield verify_base(client, kit.for_base(name), inputs)
        else:
            yield verify_image(client, BuildPlan.of(kit, name, inputs))


def verify_base(client: DockerClient, kit: Kit, inputs: BuildInputs) -> Comparison:
    lock = kit.lock
    if lock.base.image_id is None:
        raise UserError(f"{kit.base_name} has no recorded build: run `{base_command(lock)}`")
    built = reproduce_base(client, kit, inputs, allow_drift=True)
    comparison = Comparison(kit.base_name, lock.base.image_id, built.image_id or "")
    if not comparison.same:
        comparison.differences = built.missing + package_differences(
            lock.base.packages, built.packages
        )
        comparison.differences += top_layer_differences(
            client, lock.base.image_id, comparison.rebuilt_id
        )
        discard(client, comparison.rebuilt_id)
    return comparison


def verify_image(client: DockerClient, plan: BuildPlan) -> Comparison:
    """Rebuild `plan`'s image without cache, untagged, and compare it with the lock's."""
    entry = plan.entry
    if entry.image_id is None:
        raise UserError(
            f"{plan.name} has no recorded build to verify: run `prooflock images build {plan.name}`"
        )
    options = BuildOptions(nocache=True, tag=False, allow_drift=True)
    result = reproduce_image(client, replace(plan, options=options))
    assert result.image_id is not None  # drift allowed: never refused
    comparison = Comparison(plan.name, entry.image_id, result.image_id)
    if not comparison.same:
        comparison.differences = list(result.missing)
        if result.diff_ids[:-1] != entry.diff_ids[:-1]:
            comparison.differences.append("the base layers differ from the lock's")
        comparison.differences += package_differences(entry.packages, result.packages)
        comparison.differences += top_layer_differences(client, entry.image_id, result.image_id)
        discard(client, result.image_id)
    return comparison


def package_differences(locked: list[str], rebuilt: list[str]) -> list[str]:
    old = dict(p.split("=", 1) for p in locked)
    new = dict(p.split("=", 1) for p in rebuilt)
    lines = []
    for name in sorted(set(old) | set(new)):
        if old.get(name) != new.get(name):
            lines.append(
                f"package {name}: {old.get(name, '(absent)')} → {new.get(name, '(absent)')}"
            )
    return lines


def top_layer_differences(client: DockerClient, locked_id: str, rebuilt_id: str) -> list[str]:
    """Files that differ in the last layer of two images (both must be on this machine)."""
    if image_id_of(client, locked_id) is None:
        return [f"the locked image {locked_id} is not on this machine: cannot compare files"]
    indexes = []
    with tempfile.TemporaryDirectory(prefix="prooflock-verify-") as tmp:
        for number, image in enumerate((locked_id, rebuilt_id)):
            path = Path(tmp) / f"{number}.tar"
            archive.save(client, image, path)
            saved = archive.SavedImage.open(path)
            try:
                with saved.layer(len(saved.layer_members) - 1) as layer:
                    indexes.append(layer_index(layer))
            finally:
                saved.close()
            path.unlink()
    return index_differences(indexes[0], indexes[1]) or [
        "the layers hold the same files: the configs differ"
    ]
