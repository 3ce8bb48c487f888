"""Images as `docker save` archives: save, read, write with a chosen config, load.

Docker's image ID is the sha256 of the config JSON, so an image whose layers are normalized and
whose config is written canonically (sorted keys, fixed times, no build-host fields) has an ID
that depends on its content only.
"""

from __future__ import annotations

import hashlib
import json
import tarfile
from collections.abc import Callable
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


def write_archive(target: Path | BinaryIO, config: bytes, layers: list[Layer]) -> None:
    """A loadable `docker save` archive of one untagged image, into a file or a stream."""
    config_name = f"{hashlib.sha256(config).hexdigest()}.json"
    layer_names = [f"{diff_id.split(':')[1]}/layer.tar" for diff_id, _, _ in layers]
    manifest = json.dumps(
        [{"Config": config_name, "RepoTags": None, "Layers": layer_names}]
    ).encode()
    if isinstance(target, Path):
        with target.open("wb") as out:
            write_archive(out, config, layers)
        return
    with tarfile.open(fileobj=target, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        for name, (_, opener, size) in zip(layer_names, layers, strict=True):
            info = tarfile.TarInfo(name)
            info.size = size
            with opener() as data:
                tar.addfile(info, data)
        for name, content in ((config_name, config), ("manifest.json", manifest)):
            info = tarfile.TarInfo(name)
            info.size = len(content)
            tar.addfile(info, _Bytes(content))


class _Bytes:
    def __init__(self, data: bytes):
        self.data, self.offset = data, 0

    def read(self, size: int = -1) -> bytes:
        end = len(self.data) if size < 0 else self.offset + size
        chunk, self.offset = self.data[self.offset : end], min(end, len(self.data))
        return chunk


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
