"""The images lock as the docker backend's image resolver (runner.backends.image_resolver).

The Checker builds one and hands it down, so the backend never reads the lock itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from docker import DockerClient

from runner.core.errors import InfraFailure, UserError
from runner.core.settings import Settings
from runner.images import machine
from runner.images.lock import Kit
from runner.images.usable import UsableImage, usable_image

if TYPE_CHECKING:
    from runner.storage.s3_settings import S3Settings


class LockedImages:
    """Locked images: what a check runs in, and `--build-missing`'s build (said to `notify`).

    `settings` name the cache directory (this machine's builds) and the build inputs. `s3` reaches a
    remote store of build inputs, when there is one.
    """

    def __init__(
        self,
        settings: Settings,
        notify: Callable[[str], None] = lambda _message: None,
        s3: S3Settings | None = None,
    ):
        self._settings = settings
        self._notify = notify
        self._s3 = s3
        self._kit: Kit | None = None

    def kit(self) -> Kit:
        if self._kit is None:
            try:
                self._kit = Kit.open()
            except UserError as exc:
                raise InfraFailure(str(exc)) from None
        return self._kit

    def usable(self, name: str, client: DockerClient) -> UsableImage:
        return usable_image(name, client, self.kit(), machine.state_path(self._settings.cache_dir))

    def locked(self, name: str) -> tuple[str, str | None]:
        entry = self.kit().lock.entry(name)
        return entry.tag, entry.image_id

    def build(self, name: str) -> None:
        from runner.images.api import build_locked  # noqa: PLC0415 - only when asked to build

        build_locked(name, self._settings, self._notify, self._s3)
        self._kit = None  # the build wrote the lock's image IDs
