"""The images lock as the docker backend's image resolver (runner.backends.image_resolver).

The Checker builds one and hands it down, so the backend never reads the lock itself.
"""

from __future__ import annotations

from collections.abc import Callable

from docker import DockerClient

from runner.core.errors import InfraFailure, UserError
from runner.images.lock import Kit
from runner.images.usable import UsableImage, usable_image


class LockedImages:
    """Locked images: what a check runs in, and `--build-missing`'s build (said to `notify`)."""

    def __init__(self, notify: Callable[[str], None] = lambda _message: None):
        self._notify = notify
        self._kit: Kit | None = None

    def kit(self) -> Kit:
        if self._kit is None:
            try:
                self._kit = Kit.open()
            except UserError as exc:
                raise InfraFailure(str(exc)) from None
        return self._kit

    def usable(self, name: str, client: DockerClient) -> UsableImage:
        return usable_image(name, client, self.kit())

    def locked(self, name: str) -> tuple[str, str | None]:
        entry = self.kit().lock.entry(name)
        return entry.tag, entry.image_id

    def build(self, name: str) -> None:
        from runner.images.api import build_locked  # noqa: PLC0415 - only when asked to build

        build_locked(name, notify=self._notify)
        self._kit = None  # the build wrote the lock's image IDs
