"""A one-file image made here and loaded into the daemon (no registry, no build), for tests of
image archives that must stay fast; removed after the test.

Import the fixture into a test module: `from tests.support.tiny_image import tiny_image`.
"""

from __future__ import annotations

import hashlib
import io
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from docker import DockerClient

from runner.images import archive
from runner.images.state import image_id_of


@pytest.fixture
def tiny_image(client: DockerClient, tmp_path: Path) -> Iterator[str]:
    """Its image ID: a new one per test (the file names the test's directory)."""
    info = tarfile.TarInfo("hello.txt")
    data = f"hello from {tmp_path.name}\n".encode()
    info.size = len(data)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.addfile(info, io.BytesIO(data))
    layer = buffer.getvalue()
    diff_id = f"sha256:{hashlib.sha256(layer).hexdigest()}"
    config = archive.canonical_config({"Cmd": ["sh"]}, [diff_id], [{"created_by": "test"}], 0)
    image_id = archive.image_id(config)
    path = tmp_path / "image.tar"
    archive.write_archive(path, config, [(diff_id, lambda: io.BytesIO(layer), len(layer))])
    archive.load(client, path, image_id)
    yield image_id
    remove(client, image_id)


def remove(client: DockerClient, image_id: str) -> None:
    if image_id_of(client, image_id) is not None:
        client.images.remove(image_id, force=True)
