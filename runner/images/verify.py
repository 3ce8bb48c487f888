"""`prooflock images verify`: rebuild without cache and compare with the lock.

Same image ID: the recorded image is reproducible from its pins. A different one is explained by
what differs: the base, the installed packages (the mirror served other versions), or, file by
file, the image's own layer (a build step that is not deterministic).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from docker import DockerClient
from docker.errors import ImageNotFound

from runner.images import archive
from runner.images.layers import index_differences, layer_index


@dataclass
class Comparison:
    name: str
    locked_id: str | None
    rebuilt_id: str
    differences: list[str] = field(default_factory=list)

    @property
    def same(self) -> bool:
        return self.locked_id == self.rebuilt_id


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
    try:
        client.images.get(locked_id)
    except ImageNotFound:
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
    return index_differences(*indexes) or ["the layers hold the same files: the configs differ"]
