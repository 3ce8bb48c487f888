"""Backend selection: `local` processes or hardened `docker` containers."""

from __future__ import annotations

from runner.backends.base import Backend, BackendUnavailable
from runner.backends.docker import DockerBackend
from runner.backends.local import LocalBackend
from runner.settings import Settings


def open_backend(settings: Settings) -> Backend:
    """The backend the settings ask for; `auto` is docker when a daemon answers, else local."""
    if settings.backend == "local":
        return LocalBackend()
    if settings.backend == "docker":
        return DockerBackend(settings)
    try:
        return DockerBackend(settings)
    except BackendUnavailable:
        return LocalBackend()
