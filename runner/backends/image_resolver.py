"""What the docker backend asks of images: which one a check runs in, and how to build it.

The backend never reads the images lock. The Checker hands it a resolver built from the lock
(runner.images.resolver). Tests and embedders may hand in their own.
"""

from __future__ import annotations

from typing import Protocol

from docker import DockerClient


class RunnableImage(Protocol):
    """The image a check runs in: the locked one, or a drifted rebuild of it."""

    @property
    def tag(self) -> str: ...

    @property
    def image_id(self) -> str: ...

    @property
    def locked_id(self) -> str | None: ...

    @property
    def drifted(self) -> bool: ...

    def summary(self) -> str:
        """The drift in a few words, or `locked`."""
        ...


class ImageResolver(Protocol):
    def usable(self, name: str, client: DockerClient) -> RunnableImage:
        """The image `name` runs in on this daemon; InfraFailure saying what to run if none."""
        ...

    def locked(self, name: str) -> tuple[str, str | None]:
        """(tag, locked image ID or None when never built)."""
        ...

    def build(self, name: str) -> None:
        """Build the locked image `name` here (`--build-missing`)."""
        ...
