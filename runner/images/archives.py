"""Image archives: an image as one content-addressed file, saved, checked, loaded, fetched.

`sha256-<hex>.tar.gz` holds the image whose ID is `sha256:<hex>`. It is a docker-archive as
runner.images.archive writes it. Each layer tar is under its diff_id, the config under its digest;
one manifest, no tags. It is gzipped with mtime 0, so the same image gives the same bytes.

Loading reads the whole archive first. The config's sha256 must be the ID in the name, and every
layer must hash to its diff_id in the config. A damaged, truncated or misnamed archive loads
nothing. A store (a directory or an `s3://bucket/prefix`) keeps archives under `images/`.

    archive_name(image_id) -> str
    save_archive(client, image_id, out_dir) -> Path
    save_to(client, image_id, destination, s3) -> str     a directory or s3://bucket/prefix
    load_archive(path_or_s3_url, client, s3) -> image_id
    fetch_image(image_id, stores, client, s3) -> bool      from the first store that has it

`s3` says how to reach S3; only s3:// places need it.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import posixpath
import re
import tarfile
import tempfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, cast

from docker import DockerClient

from runner.core.errors import InfraFailure, UserError
from runner.images import archive
from runner.images.lock import Kit
from runner.images.state import image_id_of, tag_if_locked

if TYPE_CHECKING:
    from runner.storage.blobs import S3Files
    from runner.storage.s3_settings import S3Settings

NAME = re.compile(r"^sha256-([0-9a-f]{64})\.tar\.gz$")
IMAGES_DIR = "images"  # below a store's root
SMALL = 16 << 20  # a manifest or config larger than this is not one the kit wrote
GZIP_LEVEL = 1  # measured: 2.6 times as fast as level 6 for 9 % more bytes (NOTE-18)


class DamagedArchive(UserError):
    """An archive that is not what its name says: damaged, truncated, or another image."""


def archive_name(image_id: str) -> str:
    algorithm, _, digest = image_id.partition(":")
    if algorithm != "sha256" or not re.fullmatch(r"[0-9a-f]{64}", digest):
        raise UserError(f"{image_id!r} is not an image ID (sha256:<64 hex digits>)")
    return f"sha256-{digest}.tar.gz"


def save_archive(client: DockerClient, image_id: str, out_dir: Path) -> Path:
    """Write `out_dir/sha256-<hex>.tar.gz` (kept as is when it is there already)."""
    name = archive_name(image_id)
    target = out_dir / name
    if target.is_file():
        return target
    if image_id_of(client, image_id) is None:
        raise UserError(f"image {image_id} is not on this machine: nothing to save")
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="prooflock-save-", dir=out_dir) as tmp:
        raw = Path(tmp) / "saved.tar"
        archive.save(client, image_id, raw)
        saved = archive.SavedImage.open(raw)
        try:
            config = saved.config_bytes()
            if archive.image_id(config) != image_id:
                raise UserError(f"docker saved another image than {image_id}")
            layers = [
                (diff_id, *saved.layer_data(index))
                for index, diff_id in enumerate(saved.config["rootfs"]["diff_ids"])
            ]
            partial = Path(tmp) / name
            with (
                partial.open("wb") as out,
                gzip.GzipFile(
                    filename="", mode="wb", fileobj=out, mtime=0, compresslevel=GZIP_LEVEL
                ) as packed,
            ):
                archive.write_archive(cast(BinaryIO, packed), config, layers)
        finally:
            saved.close()
        os.replace(partial, target)
    return target


def save_to(
    client: DockerClient, image_id: str, destination: str, s3: S3Settings | None = None
) -> str:
    """Save into a directory or upload to `s3://bucket/prefix/sha256-<hex>.tar.gz`; return where."""
    if not destination.startswith("s3://"):
        return str(save_archive(client, image_id, Path(destination)))
    remote = _s3_files(destination, s3)
    with tempfile.TemporaryDirectory(prefix="prooflock-upload-") as tmp:
        path = save_archive(client, image_id, Path(tmp))
        remote.put(path.name, path, _sha256_file(path))
    return remote.url(archive_name(image_id))


def archive_image_id(source: str | Path) -> str:
    """The image ID an archive's name says (a path or an s3:// URL), checked before any work.

    A UserError when the name is not one, or a local file is missing.
    """
    text = str(source)
    expected = _image_of(text.rpartition("/")[2], text)
    if not text.startswith("s3://") and not Path(source).is_file():
        raise UserError(f"{text}: no such archive")
    return expected


def load_archive(source: str | Path, client: DockerClient, s3: S3Settings | None = None) -> str:
    """Check the archive at `source` (a path or an s3:// URL) and load it; return its image ID."""
    text = str(source)
    if text.startswith("s3://"):
        prefix, _, name = text.rpartition("/")
        _image_of(name, text)  # a bad name is refused before anything is downloaded
        with tempfile.TemporaryDirectory(prefix="prooflock-download-") as tmp:
            local = Path(tmp) / name
            if _s3_files(prefix, s3).get(name, local) is None:
                raise UserError(f"{text}: no such archive")
            return _load_checked(local, client, text)
    path = Path(source)
    if not path.is_file():
        raise UserError(f"{path}: no such archive")
    return _load_checked(path, client, str(path))


def fetch_image(
    image_id: str,
    stores: list[str],
    client: DockerClient | None = None,
    s3: S3Settings | None = None,
) -> bool:
    """Load `image_id` from the first store holding `images/sha256-<hex>.tar.gz`.

    False when no store does. A store that does not answer raises StorageUnavailable (run again to
    resume).
    """
    from runner.backends.policy import connect  # noqa: PLC0415 - only once there is work

    name = f"{IMAGES_DIR}/{archive_name(image_id)}"
    for store in stores:
        if store.startswith("s3://"):
            remote = _s3_files(store, s3)
            found: str | Path | None = remote.url(name) if remote.has(name) else None
        else:
            found = Path(store) / name if (Path(store) / name).is_file() else None
        if found is not None:
            client = client or connect()
            load_archive(found, client, s3)
            _tag_if_locked(client, image_id)
            return True
    return False


def _tag_if_locked(client: DockerClient, image_id: str) -> None:
    """Give a fetched image its lock tag, when this installation's lock has it."""
    try:
        lock = Kit.open().lock
    except (UserError, InfraFailure):
        return
    tag_if_locked(client, lock, image_id)


@dataclass(frozen=True)
class CheckedArchive:
    """What an archive was checked to hold: one image, its config and its layers' members."""

    image_id: str
    config: bytes
    layers: dict[str, str]  # diff_id → the member (normalized name) that holds it


def check_archive(path: Path, label: str | None = None) -> str:
    """The image ID the archive at `path` holds, once its name, config and layers agree.

    Raises DamagedArchive, naming it, otherwise.
    """
    return inspect_archive(path, label or str(path)).image_id


def inspect_archive(path: Path, label: str) -> CheckedArchive:
    """Check everything the archive holds, or raise DamagedArchive naming what is wrong.

    It must be what the kit writes:
    - one manifest file with one entry and no tags;
    - each member once (`./manifest.json` is `manifest.json`);
    - nothing the manifest does not name;
    - a config whose sha256 is the ID in the archive's name;
    - layers that hash to the config's diff_ids.
    """
    expected = _image_of(path.name, label)
    hashes: dict[str, str] = {}
    small: dict[str, bytes] = {}
    folders: set[str] = set()
    try:
        with tarfile.open(path, mode="r|gz") as tar:
            for member in tar:
                name = _member_name(member, label)
                if name in hashes or name in folders:
                    raise _refused(label, f"holds two members named {name!r}")
                if member.isdir():
                    folders.add(name)
                    continue
                data = cast(io.BufferedReader, tar.extractfile(member))
                if name.endswith(".json") and member.size <= SMALL:
                    small[name] = data.read()
                    hashes[name] = hashlib.sha256(small[name]).hexdigest()
                else:
                    hashes[name] = hashlib.file_digest(data, "sha256").hexdigest()
    except (tarfile.TarError, EOFError, OSError, zlib.error) as exc:
        raise DamagedArchive(f"{label}: damaged or truncated ({exc}); nothing was loaded") from None
    try:
        manifest = json.loads(small["manifest.json"])
        if not isinstance(manifest, list) or len(manifest) != 1:
            raise _refused(label, "its manifest does not list exactly one image")
        (entry,) = manifest
        config_name = posixpath.normpath(entry["Config"])
        layer_names = [posixpath.normpath(name) for name in entry["Layers"]]
        config_bytes = small[config_name]
        diff_ids = json.loads(config_bytes)["rootfs"]["diff_ids"]
    except (KeyError, ValueError, TypeError, AttributeError) as exc:
        raise DamagedArchive(
            f"{label}: not a docker image archive ({type(exc).__name__}: {exc}); nothing was loaded"
        ) from None
    if entry.get("RepoTags") or set(entry) - {"Config", "RepoTags", "Layers"}:
        raise _refused(label, "its manifest names the image or adds fields: the kit names images")
    actual = archive.image_id(config_bytes)
    if actual != expected:
        raise DamagedArchive(
            f"{label}: holds image {actual}, not the {expected} its name says; nothing was loaded"
        )
    found = [f"sha256:{hashes.get(name, '')}" for name in layer_names]
    if found != diff_ids:
        raise DamagedArchive(
            f"{label}: its layers do not hash to the config's diff_ids; nothing was loaded"
        )
    named = {"manifest.json", config_name, *layer_names}
    stray = sorted(set(hashes) - named) + sorted(
        folder for folder in folders if not any(n.startswith(f"{folder}/") for n in named)
    )
    if stray:
        raise _refused(label, f"holds members its manifest does not name ({', '.join(stray[:3])})")
    return CheckedArchive(actual, config_bytes, dict(zip(diff_ids, layer_names, strict=True)))


def _member_name(member: tarfile.TarInfo, label: str) -> str:
    """The member's name as Docker would resolve it; links, devices and `..` are refused."""
    name = posixpath.normpath(member.name)
    if name.startswith(("/", "../")) or name in ("..", "."):
        raise _refused(label, f"holds a member outside the archive ({member.name!r})")
    if not (member.isfile() or member.isdir()):
        raise _refused(label, f"holds {member.name!r}, neither a file nor a folder")
    return name


def _refused(label: str, why: str) -> DamagedArchive:
    return DamagedArchive(f"{label}: {why}; refused, nothing was loaded")


def _load_checked(path: Path, client: DockerClient, label: str) -> str:
    """Load the checked image only.

    Docker gets an archive rebuilt from the checked config and layers (one manifest, no tags). It
    never gets the file itself.
    """
    checked = inspect_archive(path, label)
    image_id = checked.image_id
    if image_id_of(client, image_id) is not None:
        return image_id
    loaded = []
    for message in client.api.load_image(_rebuilt(path, checked, label)):
        if "error" in message:
            raise UserError(f"{label}: docker load refused it: {message['error']}")
        loaded += _loaded(str(message.get("stream", "")))
    if image_id_of(client, image_id) is None:
        raise UserError(f"{label}: docker loaded it, but not as {image_id}")
    unexpected = [what for what in loaded if what != image_id]
    names = client.images.get(image_id).tags  # it was not here before: no name is ours
    for name in names:
        client.api.remove_image(name, noprune=True)
    if unexpected or names:
        raise UserError(
            f"{label}: docker loaded {', '.join(sorted({*unexpected, *names}))} besides {image_id}, "
            "which the kit did not ask for"
        )
    return image_id


def _loaded(line: str) -> list[str]:
    """What one line of `docker load`'s output says it loaded (an ID, or a name it applied)."""
    for prefix in ("Loaded image ID: ", "Loaded image: "):
        if line.startswith(prefix):
            return [line[len(prefix) :].strip()]
    return []


def _rebuilt(path: Path, checked: CheckedArchive, label: str) -> Iterator[bytes]:
    """The archive Docker loads: each checked layer, then the checked config.

    Each layer is read again from `path` and hashed again on the way. A file changed since its check
    stops the stream.
    """
    wanted = {name: diff_id for diff_id, name in checked.layers.items()}
    with tarfile.open(path, mode="r|gz") as tar:

        def layers() -> Iterator[archive.LayerChunks]:
            for member in tar:
                diff_id = wanted.pop(posixpath.normpath(member.name), None)
                if diff_id is not None and member.isfile():
                    data = cast(io.BufferedReader, tar.extractfile(member))
                    yield diff_id, member.size, _hashed(data, diff_id, label)

        try:
            yield from archive.archive_chunks(checked.config, layers())
        except ValueError as exc:  # the file changed after its check: Docker gets no manifest
            raise _refused(label, f"it changed while it was loaded ({exc})") from None


def _hashed(data: BinaryIO, diff_id: str, label: str) -> Iterator[bytes]:
    digest = hashlib.sha256()
    for chunk in iter(lambda: data.read(archive.CHUNK), b""):
        digest.update(chunk)
        yield chunk
    if f"sha256:{digest.hexdigest()}" != diff_id:
        raise ValueError(f"layer {diff_id[:19]} no longer hashes to its diff_id")


def _image_of(name: str, label: str) -> str:
    match = NAME.match(name)
    if match is None:
        raise UserError(f"{label}: not an image archive name (sha256-<64 hex digits>.tar.gz)")
    return f"sha256:{match.group(1)}"


def _sha256_file(path: Path) -> str:
    with path.open("rb") as data:
        return hashlib.file_digest(data, "sha256").hexdigest()


def _s3_files(url: str, s3: S3Settings | None) -> S3Files:
    from runner.storage.blobs import S3Files  # boto3 only for an S3 store: the CLI starts faster

    if s3 is None:
        raise UserError(f"{url}: no S3 settings were given")
    return S3Files(url, s3)
