"""The images lock (`manifests/images.lock.json`): every pin, and what each build produced.

Pins (`inputs`) are the Dockerfiles' `ARG` defaults. The lock repeats them so one file says what an
image is made of. `prooflock images build` passes them as build arguments. Beside them is what a
locked build produced: image ID, layer diff_ids, the installed Debian packages. Its exact closure is
there too: every `.deb` by pool path, sha256 and size.

Only what defines an image is here. How a machine built it (mirrors, CA bundle, docker version) is
in its state file (runner.images.machine). Only `prooflock images pin` and `prooflock images relock`
write the lock.

Schema 1 locks (bundles published before closures) are read as schema 2 without a closure.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from runner.core import home
from runner.core.errors import UserError, explain
from runner.core.models import JsonValue

BASE_NAME = "base"  # the lock's own base; other suites' bases are named in `bases`
BASE_INDEX = "base.Packages"  # beside the lock; another base's is `<name>.Packages`
DEFAULT_LOCK = (
    home.LOCK
)  # relative to the kit's home (runner.core.home): a checkout or the installed copy


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DebFile(Strict):
    """One `.deb` of a closure, as the archive's Packages index describes it."""

    version: str
    architecture: str
    filename: str  # the pool path, below the main or the security archive's root
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    size: int = Field(ge=0)
    priority: str = ""  # the archive's Priority: debootstrap picks the base's packages by it
    note: str = ""  # how the sha256 was had when no index listed this version any more

    @property
    def security(self) -> bool:
        return self.filename.startswith("pool/updates/")


Closure = dict[str, DebFile]  # package name → its .deb

DownloadKind = Literal["wheel", "source", "git-bundle", "file", "toolchain"]


class Download(Strict):
    """One build input that is not a `.deb`, by content.

    The build sees it under its file name and never fetches it: `build/wheels/` for wheels,
    `build/files/` for the rest.
    """

    kind: DownloadKind
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    size: int | None = Field(default=None, ge=0)  # None: never fetched where the lock was written
    # Where the host fetches it: `pypi:NAME==VERSION` (the host's pip), `debian:POOL/PATH` (the
    # build's mirror, then the lock's snapshot), or a URL.
    origin: str


Downloads = dict[str, Download]  # file name → the input


class LockedBuild(Strict):
    """What every locked build records: the image and exactly what went into it."""

    image_id: str | None = None
    diff_ids: list[str] = Field(default_factory=list)
    packages: list[str] = Field(default_factory=list)  # `dpkg-query -W` in the built image
    closure: Closure = Field(default_factory=dict)  # every installed package's .deb

    def versions(self) -> dict[str, str]:
        return dict(p.split("=", 1) for p in self.packages)


class BaseEntry(LockedBuild):
    """The offline base: Debian from debootstrap, normalized and loaded with a fixed config."""

    tag: str
    suite: str
    variant: str
    include: list[str] = Field(default_factory=list)
    registry_reference: str  # the Dockerfiles' default `BASE`, for machines that reach a registry
    # sha256 of `base.Packages` beside the lock: the archive's stanzas of the closure, in the
    # index's order, which debootstrap copies into the image (/var/lib/dpkg/available).
    index_sha256: str = ""


class ImageEntry(LockedBuild):
    tag: str
    base: str = BASE_NAME  # the base it is built on: `base`, or a name in the lock's `bases`
    status: Literal["built", "not built"] = "not built"
    note: str = ""
    dockerfile_sha256: str
    files: dict[str, str] = Field(default_factory=dict)  # other build-context files → sha256
    inputs: dict[str, str] = Field(default_factory=dict)  # the pins: Dockerfile ARG → value
    vendored: list[str] = Field(default_factory=list)  # inputs given by hand (`--input NAME=`)
    downloads: Downloads = Field(default_factory=dict)  # every input that is not a .deb
    size_bytes: int | None = None


class ImagesLock(Strict):
    schema_version: Literal[2] = 2
    source_date_epoch: int  # fixed time for file mtimes, config and history in every image
    transport: dict[str, str]  # build inputs that never change content: ARG → default
    base: BaseEntry
    # Bases of other Debian suites, by name (`base-trixie`): a prover's newer line is built on
    # the suite that carries it, never on a mix of suites.
    bases: dict[str, BaseEntry] = Field(default_factory=dict)
    images: dict[str, ImageEntry]
    # Which base `base` is in this copy (`rebased`), and the lock's own base while it is not.
    _base_name: str = PrivateAttr(default=BASE_NAME)
    _own_base: BaseEntry | None = PrivateAttr(default=None)

    @property
    def base_name(self) -> str:
        return self._base_name

    def base_names(self) -> list[str]:
        return [BASE_NAME, *sorted(self.bases)]

    def is_base(self, name: str) -> bool:
        return name == BASE_NAME or name in self.bases

    def base_named(self, name: str) -> BaseEntry:
        if name == self._base_name:
            return self.base
        if name == BASE_NAME and self._own_base is not None:
            return self._own_base
        try:
            return self.bases[name]
        except KeyError:
            known = ", ".join(self.base_names())
            raise UserError(f"no base {name!r} in the images lock (bases: {known})") from None

    def any_entry(self, name: str) -> BaseEntry | ImageEntry:
        """The base or image `name`."""
        return self.base_named(name) if self.is_base(name) else self.entry(name)

    def rebased(self, name: str) -> ImagesLock:
        """This lock seen from base `name`: its `base` is that base.

        Images and bases are the same dicts, so code that builds on or compares with `lock.base`
        works for every suite.
        """
        if name == self._base_name:
            return self
        copy = self.model_copy(update={"base": self.base_named(name)})
        copy._base_name = name
        copy._own_base = self._own_base or self.base if name != BASE_NAME else None
        return copy

    def base_of(self, image: str) -> str:
        """The name of the base image `image` is built on."""
        return self.entry(image).base

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

    @model_validator(mode="before")
    @classmethod
    def _from_schema_1(cls, data: Any) -> Any:
        """Drop schema 1's machine provenance (`built_with`) from an entry on reading.

        Only the names of vendored inputs are kept: they say what a build needs.
        """
        if not isinstance(data, dict) or data.get("schema_version", 1) != 1:
            return data
        data = {**data, "schema_version": 2}
        if isinstance(data.get("base"), dict):
            data["base"] = {k: v for k, v in data["base"].items() if k != "built_with"}
        images = data.get("images")
        if isinstance(images, dict):
            data["images"] = {name: _entry_from_schema_1(e) for name, e in images.items()}
        return data


def _entry_from_schema_1(entry: Any) -> Any:
    if not isinstance(entry, dict):
        return entry
    built_with = entry.get("built_with")
    files = built_with.get("files") if isinstance(built_with, dict) else None
    migrated = {k: v for k, v in entry.items() if k != "built_with"}
    if isinstance(files, dict) and files:
        migrated["vendored"] = sorted(files)
    return migrated


def load_lock(path: Path | None = None) -> ImagesLock:
    """The lock at `path`, by default the kit's (runner.core.home), wherever the command runs from."""
    path = home.lock_path() if path is None else path
    try:
        return ImagesLock.model_validate_json(Path(path).read_bytes())
    except FileNotFoundError:
        raise UserError(f"{path}: no images lock here (run from the prooflock checkout)") from None
    except ValidationError as exc:
        raise UserError(f"{path}: not a valid images lock: {explain(exc)}") from None


ONE_LINE_EACH = ("closure", "downloads")  # a line per package or download: readable diffs


def lock_bytes(lock: ImagesLock) -> bytes:
    """Pretty and key-sorted, one line per closure package and download, so lock diffs stay readable."""
    return _pretty(lock.model_dump(mode="json"), "") + b"\n"


def _pretty(value: JsonValue, indent: str, *, key: str = "") -> bytes:
    if key in ONE_LINE_EACH and isinstance(value, dict) and value:
        inner = indent + "  "
        lines = [
            inner.encode() + _one_line(name) + b": " + _one_line(_without_empty_note(deb))
            for name, deb in sorted(value.items())
        ]
        return b"{\n" + b",\n".join(lines) + b"\n" + indent.encode() + b"}"
    if isinstance(value, dict) and value:
        inner = indent + "  "
        items = [
            inner.encode() + _one_line(k) + b": " + _pretty(v, inner, key=k)
            for k, v in sorted(value.items())
        ]
        return b"{\n" + b",\n".join(items) + b"\n" + indent.encode() + b"}"
    if isinstance(value, list) and value:
        inner = indent + "  "
        items = [inner.encode() + _pretty(v, inner) for v in value]
        return b"[\n" + b",\n".join(items) + b"\n" + indent.encode() + b"]"
    return _one_line(value)


def _one_line(value: JsonValue) -> bytes:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(", ", ": ")).encode()


def _without_empty_note(deb: JsonValue) -> JsonValue:
    if isinstance(deb, dict):
        return {k: v for k, v in deb.items() if not (k in ("note", "priority") and v == "")}
    return deb


def save_lock(lock: ImagesLock, path: Path) -> None:
    """Write atomically (see `lock_bytes` for the layout)."""
    data = lock_bytes(lock)
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@dataclass
class Kit:
    """An images lock as loaded, and the image definitions beside it.

    `manifests/` and `images/` are siblings. The kit also says whether builds may be recorded in the
    lock. The copy installed with the package is read-only: a build only compares with it.
    """

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

    # Which base `lock.base` is: a kit opened on another suite's base (`for_base`) sees that
    # base as `lock.base` and writes it back to `bases` when saved.
    base_name: str = BASE_NAME
    whole: ImagesLock | None = None  # the lock as read, when this kit is rebased

    def for_base(self, name: str) -> Kit:
        """This kit seen from base `name` (`ImagesLock.rebased`)."""
        if name == self.base_name:
            return self
        whole = self.whole or self.lock
        if name == BASE_NAME:  # the lock as read
            return Kit(whole, self.lock_path, self.images_root, self.writable)
        return Kit(
            whole.rebased(name), self.lock_path, self.images_root, self.writable, name, whole
        )

    def for_image(self, image: str) -> Kit:
        """This kit seen from the base `image` is built on."""
        return self.for_base((self.whole or self.lock).base_of(image))

    @property
    def base_index_path(self) -> Path:
        name = BASE_INDEX if self.base_name == BASE_NAME else f"{self.base_name}.Packages"
        return self.lock_path.parent / name

    def base_index(self) -> str | None:
        """The base's Packages stanzas (see `BaseEntry.index_sha256`), or None when the lock has none.

        A UserError when the file is not the one the lock records.
        """
        recorded = self.lock.base.index_sha256
        if not recorded:
            return None
        path = self.base_index_path
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise UserError(f"{path}: missing (the images lock records its sha256)") from None
        if hashlib.sha256(data).hexdigest() != recorded:
            raise UserError(f"{path}: not the file the images lock records (sha256 differs)")
        return data.decode()

    def require_writable(self) -> None:
        if not self.writable:
            raise UserError(READ_ONLY.format(path=self.lock_path))

    def save(self) -> None:
        self.require_writable()
        lock = self.lock
        if self.whole is not None:  # put the rebased base back where it belongs (the images
            lock = self.whole  # and bases are the same dicts in both: kits opened from the
            lock.bases[self.base_name] = self.lock.base  # same one stay in step)
        save_lock(lock, self.lock_path)


READ_ONLY = (
    "{path} is the lock installed with the package and is never written: record builds and pins "
    "in a checkout (PROOFLOCK_HOME=/path/to/checkout or --lock PATH)"
)
