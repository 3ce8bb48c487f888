"""The prover adapter protocol. Each prover is one module in this package implementing it.

An adapter module provides:

    NAME: str                 registry name (`--prover NAME`)
    VERSION: str              bump when verdict logic changes; part of every environment key
    IMAGE: str                its default image: a directory under images/
    MODES: tuple[str, ...]    accepted modes; the first is the default
    SUFFIXES: tuple[str, ...] file endings it expects (advisory, for messages)
    CLI_OPTIONS: tuple[OptionSpec, ...]  extra `prooflock check` flags, stored in request.options

    image(request) -> str
        The image (directory under images/) a request runs in; most adapters: always IMAGE.
    probe(image) -> dict[str, list[str]]
        Commands whose output identifies a local install (versions); the local backend runs them
        and the outputs become environment-key inputs. (The docker backend uses the image ID.)
    split(name, content) -> list[tuple[str, str]]
        The artifacts inside one file (most provers: the file itself).
    environment_options(request) -> dict
        Request options that select a different environment (e.g. an engine), for the key.
    check(request, sandbox) -> Outcome
        Check one artifact cold: fresh process(es) in a fresh, empty sandbox.
    open_worker(backend, limits, request) -> Worker | None
        A warm worker that serves many checks, each observationally equivalent to `check` in a
        fresh sandbox; None when the adapter has none (the core then calls `check`). The core
        pools workers by (image, limits, worker_key(request)) and only hands a worker requests
        with the same pool key as the one it was opened for.
    worker_key(request) -> str
        What else a warm worker is specific to (e.g. a preloaded library set); default "".
    summary(results) -> rich Table | None
        A batch's summary in the prover's own categories (shown after multi-artifact checks and
        runs); default None: the core's verdict counts say enough.

`base` supplies defaults for the optional parts; see `defaults` below.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from rich.table import Table

from runner.backends.base import Backend, Limits, Sandbox
from runner.models import CheckRequest, CheckResult, JsonValue, Outcome


@dataclass(frozen=True)
class OptionSpec:
    """An adapter-specific `prooflock check` flag, e.g. `--format svg` → options["format"]."""

    flag: str
    key: str
    help: str
    choices: tuple[str, ...] | None = None
    reads_file: bool = False  # the value is a path whose content (and name) goes into the request
    default: str | None = None


@runtime_checkable
class Worker(Protocol):
    kind: str  # e.g. "forkserver", recorded in provenance

    def check(self, request: CheckRequest) -> Outcome: ...

    def info(self) -> dict[str, JsonValue]: ...

    def close(self) -> None: ...


class ProverAdapter(Protocol):
    NAME: str
    VERSION: str
    IMAGE: str
    MODES: tuple[str, ...]
    SUFFIXES: tuple[str, ...]
    CLI_OPTIONS: tuple[OptionSpec, ...]

    def image(self, request: CheckRequest) -> str: ...

    def probe(self, image: str) -> dict[str, list[str]]: ...

    def split(self, name: str, content: str) -> list[tuple[str, str]]: ...

    def environment_options(self, request: CheckRequest) -> dict[str, JsonValue]: ...

    def check(self, request: CheckRequest, sandbox: Sandbox) -> Outcome: ...

    def open_worker(self, backend: Backend, limits: Limits, request: CheckRequest) -> Worker | None: ...

    def worker_key(self, request: CheckRequest) -> str: ...

    def summary(self, results: list[CheckResult]) -> Table | None: ...


class defaults:  # noqa: N801 - a namespace of default protocol parts, imported by adapters
    """Adapters that need nothing special re-export these."""

    CLI_OPTIONS: tuple[OptionSpec, ...] = ()

    @staticmethod
    def split(name: str, content: str) -> list[tuple[str, str]]:
        return [(name, content)]

    @staticmethod
    def environment_options(request: CheckRequest) -> dict[str, JsonValue]:
        return {}

    @staticmethod
    def open_worker(backend: Backend, limits: Limits, request: CheckRequest) -> Worker | None:
        return None

    @staticmethod
    def worker_key(request: CheckRequest) -> str:
        return ""

    @staticmethod
    def summary(results: list[CheckResult]) -> Table | None:
        return None


def fixed_image(name: str) -> Callable[[CheckRequest], str]:
    """`image` for adapters that always run in the same image."""

    def image(request: CheckRequest) -> str:
        return name

    return image
