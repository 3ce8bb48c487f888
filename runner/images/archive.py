"""Images as `docker save` archives: save, read, write with a chosen config, load.

Docker's image ID is the sha256 of the config JSON. So normalize the layers and write the config
canonically: sorted keys, fixed times, no build-host fields. The ID then depends on the content
only.
"""

from __future__ import annotations

import hashlib
import json
import tarfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from docker import DockerClient

# Config fields that describe how to run the image; the rest (Hostname, Image, container,
# container_config, docker_version, ...) records the build host and moment.
KEPT_RUN_CONFIG = (
    "Cmd",
    "Entrypoint",
    "Env",
    "ExposedPorts",
    "Labels",
    "Shell",
    "StopSignal",
    "User",
    "Volumes",
    "WorkingDir",
)


def timestamp(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def canonical_config(
    run_config: dict,
    diff_ids: list[str],
    history: list[dict],
    epoch: int,
    architecture: str = "amd64",
) -> bytes:
    config = {
        "architecture": architecture,
        "os": "linux",
        "config": {
            k: run_config[k] for k in KEPT_RUN_CONFIG if run_config.get(k) not in (None, "", [], {})
        },
        "created": timestamp(epoch),
        "history": [_history_entry(item, epoch) for item in history],
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
    }
    return json.dumps(config, sort_keys=True, separators=(",", ":")).encode()


def _history_entry(item: dict, epoch: int) -> dict:
    entry = {"created": timestamp(epoch), "created_by": item.get("created_by", "")}
    for key in ("comment", "empty_layer"):
        if item.get(key):
            entry[key] = item[key]
    return entry


def image_id(config: bytes) -> str:
    return f"sha256:{hashlib.sha256(config).hexdigest()}"


def save(client: DockerClient, reference: str, target: Path) -> None:
    with target.open("wb") as out:
        for chunk in client.api.get_image(reference, chunk_size=1 << 20):
            out.write(chunk)


@dataclass
class SavedImage:
    """A `docker save` archive opened for reading: its config and its layer tars."""

    outer: tarfile.TarFile
    config: dict
    layer_members: list[tarfile.TarInfo]

    @classmethod
    def open(cls, path: Path) -> SavedImage:
        outer = tarfile.open(path)  # noqa: SIM115 - closed by close()
        manifest = json.load(outer.extractfile("manifest.json"))  # type: ignore[arg-type]
        if len(manifest) != 1:
            raise ValueError(f"{path}: expected one image in the archive, found {len(manifest)}")
        config = json.load(outer.extractfile(manifest[0]["Config"]))  # type: ignore[arg-type]
        layers = [outer.getmember(name) for name in manifest[0]["Layers"]]
        return cls(outer, config, layers)

    def config_bytes(self) -> bytes:
        """The config exactly as saved: its sha256 is the image ID."""
        manifest = json.load(self.outer.extractfile("manifest.json"))  # type: ignore[arg-type]
        return self.outer.extractfile(manifest[0]["Config"]).read()  # type: ignore[union-attr]

    def layer(self, index: int) -> tarfile.TarFile:
        return tarfile.open(fileobj=self.outer.extractfile(self.layer_members[index]))

    def layer_data(self, index: int) -> tuple[Callable[[], BinaryIO], int]:
        member = self.layer_members[index]
        return (lambda: self.outer.extractfile(member)), member.size  # type: ignore[return-value]

    def close(self) -> None:
        self.outer.close()


Layer = tuple[str, Callable[[], BinaryIO], int]  # diff_id, opener, size
LayerChunks = tuple[str, int, Iterable[bytes]]  # diff_id, size, its bytes in chunks
CHUNK = 1 << 20


def write_archive(target: Path | BinaryIO, config: bytes, layers: list[Layer]) -> None:
    """A loadable `docker save` archive of one untagged image, into a file or a stream."""
    if isinstance(target, Path):
        with target.open("wb") as out:
            write_archive(out, config, layers)
        return
    chunked = ((diff_id, size, _chunks(opener)) for diff_id, opener, size in layers)
    for chunk in archive_chunks(config, chunked):
        target.write(chunk)


def _chunks(opener: Callable[[], BinaryIO]) -> Iterator[bytes]:
    with opener() as data:
        yield from iter(lambda: data.read(CHUNK), b"")


def archive_chunks(config: bytes, layers: Iterable[LayerChunks]) -> Iterator[bytes]:
    """One untagged image as a tar stream.

    The stream holds its layers in the order given (each diff_id once), its config, and one
    manifest. The manifest's `RepoTags` is null, so Docker names nothing. The bytes are those of
    `tarfile` in `w|` mode with the PAX format.
    """
    diff_ids = json.loads(config)["rootfs"]["diff_ids"]
    offset = 0
    written: set[str] = set()
    for diff_id, size, chunks in layers:
        if diff_id in written:
            continue
        written.add(diff_id)
        for chunk in _member(_layer_name(diff_id), size, chunks):
            offset += len(chunk)
            yield chunk
    if written != set(diff_ids):
        raise ValueError("the layers given are not the ones the config lists")
    manifest = json.dumps(
        [
            {
                "Config": _config_name(config),
                "RepoTags": None,
                "Layers": list(map(_layer_name, diff_ids)),
            }
        ]
    ).encode()
    for name, content in ((_config_name(config), config), ("manifest.json", manifest)):
        for chunk in _member(name, len(content), [content]):
            offset += len(chunk)
            yield chunk
    end = tarfile.BLOCKSIZE * 2
    yield tarfile.NUL * (end + -(offset + end) % tarfile.RECORDSIZE)


def _member(name: str, size: int, chunks: Iterable[bytes]) -> Iterator[bytes]:
    info = tarfile.TarInfo(name)
    info.size = size
    yield info.tobuf(tarfile.PAX_FORMAT, tarfile.ENCODING, "surrogateescape")
    count = 0
    for chunk in chunks:
        count += len(chunk)
        yield chunk
    if count != size:
        raise ValueError(f"{name}: {count} bytes, not the {size} announced")
    yield tarfile.NUL * (-size % tarfile.BLOCKSIZE)


def _layer_name(diff_id: str) -> str:
    return f"{diff_id.split(':')[1]}/layer.tar"


def _config_name(config: bytes) -> str:
    return f"{hashlib.sha256(config).hexdigest()}.json"


def load(client: DockerClient, archive: Path, expected_id: str) -> None:
    """Load the archive; docker must compute the ID we computed, or normalization failed."""
    with archive.open("rb") as data:
        for message in client.api.load_image(data):
            if "error" in message:
                raise RuntimeError(f"docker load: {message['error']}")
    loaded = client.images.get(expected_id)
    if loaded.id != expected_id:
        raise RuntimeError(f"docker loaded {loaded.id}, expected {expected_id}")


def file_opener(path: Path) -> Callable[[], BinaryIO]:
    return lambda: path.open("rb")
