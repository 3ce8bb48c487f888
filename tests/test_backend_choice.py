"""`--build-missing` goes through the image resolver the Checker hands the docker backend."""

from __future__ import annotations

import pytest

from runner.backends import BackendChoice
from runner.backends.docker import DockerBackend
from runner.backends.local import LocalBackend
from runner.core.errors import InfraFailure
from runner.core.settings import Settings
from runner.images.resolver import LockedImages

pytestmark = pytest.mark.docker


class ImagesMissingHere(LockedImages):
    """The lock's resolver, on a machine that lacks `missing`; its build only records the ask
    (a real one takes minutes) and then the locked image is there."""

    def __init__(self, missing: str):
        super().__init__(Settings())
        self.missing: set[str] = {missing}
        self.built: list[str] = []

    def usable(self, name, client):  # noqa: ANN001, ANN201 - the protocol's types
        if name in self.missing:
            raise InfraFailure(f"image {name} is not built on this machine")
        return super().usable(name, client)

    def build(self, name: str) -> None:
        self.built.append(name)
        self.missing.discard(name)


def test_build_missing_builds_a_missing_image_through_the_resolver_then_runs_on_docker():
    images = ImagesMissingHere("rocq")
    said: list[str] = []
    choice = BackendChoice(Settings(backend="auto", build_missing=True), said.append, images)
    try:
        backend = choice.for_image("rocq")
        assert isinstance(backend, DockerBackend)
        assert images.built == ["rocq"]
        assert backend.usable("rocq").image_id == images.usable("rocq", backend.client).image_id
    finally:
        choice.close()


def test_without_build_missing_a_missing_image_checks_locally_and_says_how_to_build_it():
    images = ImagesMissingHere("rocq")
    said: list[str] = []
    choice = BackendChoice(Settings(backend="auto"), said.append, images)
    try:
        assert isinstance(choice.for_image("rocq"), LocalBackend)
        assert images.built == []
        assert any("--build-missing" in line and "rocq" in line for line in said), said
    finally:
        choice.close()
