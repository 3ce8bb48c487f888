"""The images lock (`manifests/images.lock.json`): every pin, and what each build produced.

Pins (`inputs`) are the Dockerfiles' `ARG` defaults, repeated here so one file says what an image
is made of; `prooflock images build` passes them as build arguments. What a build produced (image
ID, layer diff_ids, the installed Debian packages) and the build inputs it used (mirrors, CA
bundle: transport, never content) are recorded beside them.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from runner.core import home
from runner.core.errors import UserError, explain
from runner.core.models import JsonValue

DEFAULT_LOCK = (
    home.LOCK
)  # relative to the kit's home (runner.core.home): a checkout or the installed copy


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class BaseEntry(Strict):
    """The offline base: Debian from debootstrap, normalized and loaded with a fixed config."""

    tag: str
    suite: str
    variant: str
    include: list[str] = Field(default_factory=list)
    registry_reference: str  # the Dockerfiles' default `BASE`, for machines that reach a registry
    image_id: str | None = None
    diff_ids: list[str] = Field(default_factory=list)
    packages: list[str] = Field(default_factory=list)
    built_with: dict[str, JsonValue] = Field(default_factory=dict)


class ImageEntry(Strict):
    tag: str
    status: Literal["built", "not built"] = "not built"
    note: str = ""
    dockerfile_sha256: str
    files: dict[str, str] = Field(default_factory=dict)  # other build-context files → sha256
    inputs: dict[str, str] = Field(default_factory=dict)  # the pins: Dockerfile ARG → value
    image_id: str | None = None
    diff_ids: list[str] = Field(default_factory=list)
    packages: list[str] = Field(default_factory=list)  # `dpkg-query -W` in the built image
    size_bytes: int | None = None
    built_with: dict[str, JsonValue] = Field(default_factory=dict)


class ImagesLock(Strict):
    schema_version: Literal[1] = 1
    source_date_epoch: int  # fixed time for file mtimes, config and history in every image
    transport: dict[str, str]  # build inputs that never change content: ARG → default
    base: BaseEntry
    images: dict[str, ImageEntry]

    def entry(self, name: str) -> ImageEntry:
        try:
            return self.images[name]
        except KeyError:
            known = ", ".join(sorted(self.images))
            raise UserError(f"no image {name!r} in the images lock (known: {known})") from None

    def tag(self, name: str) -> str:
        """`prooflock/<name>:<version>` for an image the lock knows."""
        return self.entry(name).tag

    def image_id(self, name: str) -> str:
        """The locked image ID; a UserError when the image has not been built and recorded."""
        entry = self.entry(name)
        if entry.image_id is None:
            raise UserError(
                f"image {name!r} has no recorded build: run `prooflock images build {name}`"
            )
        return entry.image_id


def load_lock(path: Path | None = None) -> ImagesLock:
    """The lock at `path`, by default the kit's (runner.core.home), wherever the command runs from."""
    path = home.lock_path() if path is None else path
    try:
        return ImagesLock.model_validate_json(Path(path).read_bytes())
    except FileNotFoundError:
        raise UserError(f"{path}: no images lock here (run from the prooflock checkout)") from None
    except ValidationError as exc:
        raise UserError(f"{path}: not a valid images lock: {explain(exc)}") from None


def save_lock(lock: ImagesLock, path: Path) -> None:
    """Write atomically, pretty and key-sorted, so diffs of the lock stay readable."""
    data = orjson.dumps(
        lock.model_dump(mode="json"), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS
    )
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data + b"\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@dataclass
class Kit:
    """An images lock as loaded, the image definitions beside it (`manifests/` and `images/` are
    siblings), and whether builds may be recorded in it: not in the copy installed with the
    package, which a build only compares with."""

    lock: ImagesLock
    lock_path: Path
    images_root: Path
    writable: bool

    @classmethod
    def open(cls, lock_path: Path | None = None) -> Kit:
        """The kit's own lock (runner.core.home), or the lock at `lock_path` and its definitions."""
        if lock_path is None:
            root = home.kit_home()
            return cls(
                load_lock(root / home.LOCK), root / home.LOCK, root / "images", home.writable_home()
            )
        resolved = lock_path.resolve()
        return cls(
            load_lock(lock_path),
            lock_path,
            resolved.parent.parent / "images",
            not resolved.is_relative_to(home.PACKAGED),
        )

    def require_writable(self) -> None:
        if not self.writable:
            raise UserError(READ_ONLY.format(path=self.lock_path))

    def save(self) -> None:
        self.require_writable()
        save_lock(self.lock, self.lock_path)


READ_ONLY = (
    "{path} is the lock installed with the package and is never written: record builds and pins "
    "in a checkout (PROOFLOCK_HOME=/path/to/checkout or --lock PATH)"
)
