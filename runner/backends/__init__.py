"""Which backend runs each image: hardened `docker` containers or `local` processes.

`auto` is predictable. It picks docker for an image when a daemon answers and the image's locked ID
is present on it. Otherwise it picks local, with one line saying why. `--build-missing` builds a
missing locked image instead. An explicit `docker` never falls back: a missing image stops the
command.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from runner.backends.base import Backend
from runner.backends.image_resolver import ImageResolver
from runner.backends.local import LocalBackend
from runner.core.errors import BackendUnavailable, InfraFailure, UserError
from runner.core.messages import Notify, notify_stderr
from runner.core.settings import Settings

if TYPE_CHECKING:  # docker-py takes a third of a second to import: only when docker is used
    from runner.backends.docker import DockerBackend


class BackendChoice:
    """`images`: which image a check runs in, and `--build-missing`'s build.

    Without it there is no docker backend.
    """

    def __init__(
        self,
        settings: Settings,
        notify: Notify | None,
        images: ImageResolver | None = None,
        image_only: frozenset[str] = frozenset(),
    ):
        self.settings = settings
        self._image_only = image_only  # prover versions that run only in their image
        self._notify = notify or notify_stderr
        self._images = images
        self._docker: DockerBackend | None = None
        self._docker_error: str | None = None
        self._local: LocalBackend | None = None
        self._routes: dict[str, Backend] = {}
        self._lock = threading.RLock()

    def for_image(self, image: str) -> Backend:
        with self._lock:
            if image not in self._routes:
                self._routes[image] = self._choose(image)
            return self._routes[image]

    def _choose(self, image: str) -> Backend:
        wanted = self.settings.backend
        if image in self._image_only:
            return self._image_backend(image)
        if wanted == "local":
            return self._local_backend()
        docker = self._docker_backend(required=wanted == "docker")
        if docker is None:
            self._notify(f"{self._docker_error}; checking on the local backend")
            return self._local_backend()
        if not docker.has_image(image):
            if self.settings.build_missing:
                docker.images.build(image)
            elif wanted == "auto":
                tag, _ = docker.locked(image)
                self._notify(
                    f"image {tag} is not built here: checking {image} on the local backend "
                    f"(`prooflock images build {image}` or --build-missing to use it)"
                )
                return self._local_backend()
        return docker  # under --backend docker a missing image fails its environment probe

    def _image_backend(self, image: str) -> Backend:
        """A prover version other than the host's: its image or nothing, never the host."""
        if self.settings.backend == "local":
            raise UserError(
                f"{image} is a pinned prover version that runs only in its image: use "
                "--backend docker (or auto)"
            )
        docker = self._docker_backend(required=True)
        assert docker is not None
        if not docker.has_image(image):
            if self.settings.build_missing:
                docker.images.build(image)
            else:
                tag, _ = docker.locked(image)
                raise InfraFailure(
                    f"{image} runs only in its image {tag}, which is not here: run "
                    f"`prooflock images build {image}`, or pass --build-missing"
                )
        return docker

    def _docker_backend(self, *, required: bool) -> DockerBackend | None:
        if self._docker is None and self._docker_error is None:
            from runner.backends.docker import DockerBackend  # noqa: PLC0415 - see above

            try:
                if self._images is None:
                    raise BackendUnavailable("no image resolver was given (the images lock)")
                self._docker = DockerBackend(self.settings, self._images)
            except BackendUnavailable as exc:
                if required:
                    raise
                self._docker_error = str(exc)
            if self._docker is not None and self.settings.snapshots == "auto":
                from runner.backends.docker_snapshots import DockerSnapshots  # noqa: PLC0415

                self._docker.snapshots = DockerSnapshots(
                    self._docker, self.settings.snapshot_dir, self._notify
                )
        return self._docker

    def _local_backend(self) -> LocalBackend:
        if self._local is None:
            self._local = LocalBackend(self.settings, self._notify)
        return self._local

    def close(self) -> None:
        for backend in (self._docker, self._local):
            if backend is not None:
                backend.close()
