"""Normalize a freshly built image so the same inputs always give the same image ID.

The legacy builder stamps every layer and the config with the build moment and host. So the image is
saved, and the layers the Dockerfile added are squashed into one normalized layer. It sits on top of
the untouched base layers. Files a later step deleted (such as build-input CA bundles) leave no
trace. The config is rewritten canonically, and the result is loaded back.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from docker import DockerClient

from runner.images import archive
from runner.images.layers import Squash, write_layer
from runner.images.state import image_id_of


@dataclass(frozen=True)
class Normalized:
    image_id: str
    diff_ids: list[str]
    seconds: dict[str, int]  # save, squash, load: where normalization spends its time


class NotFromBase(RuntimeError):
    """The built image does not start with the expected base layers."""


def normalize_image(
    client: DockerClient,
    reference: str,
    *,
    base_reference: str,
    epoch: int,
    created_by: str,
    workdir: Path | None = None,
) -> Normalized:
    """Load a normalized copy of `reference` (untagged) and return its ID and diff_ids."""
    base = client.images.get(base_reference)
    base_diff_ids = base.attrs["RootFS"]["Layers"]
    base_history = len(client.api.history(base.id))
    clock, seconds = time.monotonic(), {}
    with tempfile.TemporaryDirectory(prefix="prooflock-normalize-", dir=workdir) as tmp:
        raw_path, layer_path, out_path = (
            Path(tmp) / n for n in ("raw.tar", "layer.tar", "image.tar")
        )
        archive.save(client, reference, raw_path)
        seconds["save"], clock = int(time.monotonic() - clock), time.monotonic()
        saved = archive.SavedImage.open(raw_path)
        try:
            config = saved.config
            diff_ids = config["rootfs"]["diff_ids"]
            if diff_ids[: len(base_diff_ids)] != base_diff_ids:
                raise NotFromBase(f"{reference} was not built on {base_reference}")
            lower: set[str] = set()
            for index in range(len(base_diff_ids)):
                with saved.layer(index) as layer:
                    lower.update(m.name.removeprefix("./").rstrip("/") for m in layer)
            squash = Squash(lower)
            upper = [saved.layer(i) for i in range(len(base_diff_ids), len(diff_ids))]
            try:
                for offset, layer in enumerate(upper):
                    squash.apply(layer, offset)
                with layer_path.open("wb") as out:
                    layer_id, layer_size = write_layer(squash.result(), out, epoch)
            finally:
                for layer in upper:
                    layer.close()
            history = [
                *config.get("history", [])[:base_history],
                {
                    "created_by": created_by,
                    "comment": "the Dockerfile's steps, squashed and normalized",
                },
            ]
            new_diff_ids = [*base_diff_ids, layer_id]
            config_bytes = archive.canonical_config(
                config.get("config", {}),
                new_diff_ids,
                history,
                epoch,
                config.get("architecture", "amd64"),
            )
            layers: list[archive.Layer] = []
            for index, diff_id in enumerate(base_diff_ids):
                opener, size = saved.layer_data(index)
                layers.append((diff_id, opener, size))
            layers.append((layer_id, archive.file_opener(layer_path), layer_size))
            expected = archive.image_id(config_bytes)
            if image_id_of(client, expected) is None:  # a reproduced image is already here
                archive.write_archive(out_path, config_bytes, layers)
        finally:
            saved.close()
        seconds["squash"], clock = int(time.monotonic() - clock), time.monotonic()
        if out_path.exists():
            archive.load(client, out_path, expected)
        seconds["load"] = int(time.monotonic() - clock)
    return Normalized(expected, new_diff_ids, seconds)
