"""Which image a check may run in: the locked one, else a recorded drifted rebuild of it.

`usable_image(name)` answers for the docker backend and for replay, in order:
- the image the lock records, when this daemon holds it;
- this machine's rebuild of the same definitions, with its package drift. `prooflock images
  build --allow-drift` records it (runner.images.machine).
- an InfraFailure saying exactly what is here and what to run.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from docker import DockerClient

from runner.core.errors import InfraFailure
from runner.images.archives import archive_name
from runner.images.closure import PackageDrift
from runner.images.lock import Kit
from runner.images.state import drifted_rebuild, image_id_of


@dataclass(frozen=True)
class UsableImage:
    name: str
    tag: str
    image_id: str
    locked_id: str | None
    drift: list[PackageDrift] | None  # None: the locked image itself
    built_from: str = ""

    @property
    def drifted(self) -> bool:
        return self.drift is not None

    def summary(self, most: int = 3) -> str:
        """The drift in a few words: `libcups2 2.4.2-3+deb12u9 → 2.4.2-3+deb12u10 (+2 more)`."""
        if not self.drift:
            return "the same packages, other files" if self.drift is not None else "locked"
        shown = ", ".join(str(item) for item in self.drift[:most])
        more = len(self.drift) - most
        return shown + (f" (+{more} more)" if more > 0 else "")


def usable_image(name: str, client: DockerClient, kit: Kit, state_file: Path) -> UsableImage:
    """The image `name` (or `base`) runs in here; a drifted one as `state_file` records it.

    InfraFailure (what is here, what to run) when there is none.
    """
    entry = kit.lock.any_entry(name)
    if entry.image_id is not None and image_id_of(client, entry.image_id) is not None:
        return UsableImage(name, entry.tag, entry.image_id, entry.image_id, None)
    rebuilt = drifted_rebuild(client, kit.lock, name, state_file)
    if rebuilt is not None:
        return UsableImage(
            name,
            entry.tag,
            rebuilt.image_id,
            entry.image_id,
            rebuilt.package_drift(),
            rebuilt.built_from,
        )
    raise InfraFailure(_absent(name, entry.tag, entry.image_id, image_id_of(client, entry.tag)))


def _absent(name: str, tag: str, locked: str | None, tagged: str | None) -> str:
    build = f"`prooflock images build {name}`"
    if locked is None:
        return f"image {tag} ({name}) has no locked build: run {build}"
    load = f"`prooflock images load {archive_name(locked)}`"
    if tagged is not None:
        return (
            f"image {tag} ({name}) here is {tagged[:19]}, not the locked {locked[:19]}, and no "
            f"rebuild of these pins is recorded on this machine: run {build} (it installs the "
            f"locked closure; --allow-drift if that cannot be had), or {load}"
        )
    return (
        f"image {tag} ({name}) is not built on this machine: run {build}, {load}, or pass "
        "--build-missing"
    )
