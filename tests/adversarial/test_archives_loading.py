"""Image archives that ask Docker for more than the kit checked: a name of their own, a second
manifest, a second config under the same name. Docker must load exactly the checked image, by
its ID, under no name the kit did not choose, or nothing at all.

Each archive is written here by hand, as an attacker would: one small image whose archive name
(`sha256-<ID>.tar.gz`) is honest, and an "evil" image smuggled in beside it.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from docker import DockerClient
from docker.errors import ImageNotFound

from runner.images import archive, archives
from runner.images.archives import DamagedArchive, archive_name, load_archive
from runner.images.state import image_id_of
from tests.support.tiny_image import remove

pytestmark = [pytest.mark.docker]
ROOT = Path(__file__).resolve().parent.parent.parent


@dataclass(frozen=True)
class Image:
    """One image by hand: a one-file layer and its canonical config."""

    layer: bytes
    diff_id: str
    config: bytes

    @property
    def id(self) -> str:
        return archive.image_id(self.config)

    @property
    def config_name(self) -> str:
        return f"{self.id[7:]}.json"

    @property
    def layer_name(self) -> str:
        return f"{self.diff_id[7:]}/layer.tar"

    def manifest(self, tags: list[str] | None = None, config_name: str | None = None) -> bytes:
        entry = {"Config": config_name or self.config_name, "RepoTags": tags}
        return json.dumps([{**entry, "Layers": [self.layer_name]}]).encode()


def make_image(text: str, run_config: dict | None = None) -> Image:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo("file.txt")
        data = text.encode()
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    layer = buffer.getvalue()
    diff_id = f"sha256:{hashlib.sha256(layer).hexdigest()}"
    run = run_config or {"Cmd": ["sh"]}
    config = archive.canonical_config(run, [diff_id], [{"created_by": "test"}], 0)
    return Image(layer, diff_id, config)


def write_archive(folder: Path, named: Image, members: list[tuple[str, bytes]]) -> Path:
    """A gzipped tar of `members`, in that order, named as `named`'s archive."""
    path = folder / archive_name(named.id)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    path.write_bytes(gzip.compress(buffer.getvalue(), mtime=0))
    return path


@dataclass(frozen=True)
class Scene:
    good: Image
    evil: Image
    name: str  # the name the attacker wants Docker to give


@pytest.fixture
def scene(client: DockerClient, tmp_path: Path) -> Iterator[Scene]:
    """Two fresh images (neither on the daemon) and a fresh name; all removed afterwards."""
    made = Scene(
        make_image(f"checked, {tmp_path}\n"),
        make_image(f"smuggled, {tmp_path}\n"),
        f"prooflock-test-attacker/{tmp_path.name.lower()}:latest",
    )
    yield made
    for reference in (made.name, made.good.id, made.evil.id):
        remove(client, reference)


def members_of(image: Image) -> list[tuple[str, bytes]]:
    return [(image.layer_name, image.layer), (image.config_name, image.config)]


def named(client: DockerClient, name: str) -> str | None:
    """The ID the name points at on the daemon, or None."""
    try:
        return client.images.get(name).id
    except ImageNotFound:
        return None


def refused_and_nothing_loaded(client: DockerClient, path: Path, scene: Scene) -> str:
    with pytest.raises(DamagedArchive) as refused:
        load_archive(path, client)
    assert str(path) in str(refused.value) and "nothing was loaded" in str(refused.value)
    assert image_id_of(client, scene.good.id) is None
    assert image_id_of(client, scene.evil.id) is None
    assert named(client, scene.name) is None
    return str(refused.value)


def test_an_archive_that_names_its_image_is_refused_and_docker_applies_no_name(
    client, scene, tmp_path
):
    good = scene.good
    path = write_archive(
        tmp_path, good, [*members_of(good), ("manifest.json", good.manifest([scene.name]))]
    )
    said = refused_and_nothing_loaded(client, path, scene)
    assert "its manifest names the image" in said


def test_a_second_manifest_under_another_spelling_is_refused(client, scene, tmp_path):
    good, evil = scene.good, scene.evil
    path = write_archive(
        tmp_path,
        good,
        [
            *members_of(good),
            *members_of(evil),
            ("manifest.json", good.manifest()),  # what a checker reading by name sees
            ("./manifest.json", evil.manifest([scene.name])),  # what Docker reads: the later one
        ],
    )
    said = refused_and_nothing_loaded(client, path, scene)
    assert "two members named 'manifest.json'" in said


def test_a_manifest_that_resolves_to_another_image_than_the_checked_one_is_refused(
    client, scene, tmp_path
):
    good = scene.good
    # The same files, run another way: what the layer hashes cannot show.
    evil = make_image(f"checked, {tmp_path}\n", {"Cmd": ["sh"], "Env": ["LD_PRELOAD=/x.so"]})
    assert evil.diff_id == good.diff_id and evil.id != good.id
    path = write_archive(
        tmp_path,
        good,
        [
            (good.layer_name, good.layer),
            (good.config_name, good.config),  # the config checked against the archive's name
            (f"./{good.config_name}", evil.config),  # the config Docker would read
            ("manifest.json", good.manifest()),
        ],
    )
    try:
        said = refused_and_nothing_loaded(client, path, Scene(good, evil, scene.name))
    finally:
        remove(client, evil.id)
    assert f"two members named {good.config_name!r}" in said


def test_members_the_manifest_does_not_name_are_refused(client, scene, tmp_path):
    good, evil = scene.good, scene.evil
    legacy_tags = json.dumps({scene.name.split(":")[0]: {"latest": evil.id[7:]}}).encode()
    path = write_archive(
        tmp_path,
        good,
        [
            *members_of(good),
            ("manifest.json", good.manifest()),
            (f"{evil.id[7:]}/json", evil.config),
            ("repositories", legacy_tags),
        ],
    )
    said = refused_and_nothing_loaded(client, path, scene)
    assert "holds members its manifest does not name" in said


def test_images_load_gives_the_checked_image_no_name_and_refuses_a_named_one(
    client, scene, tmp_path
):
    good = scene.good
    honest = tmp_path / "honest"
    honest.mkdir()
    path = write_archive(honest, good, [*members_of(good), ("manifest.json", good.manifest())])
    loaded = prooflock_cli("images", "load", str(path), "--no-snapshot")
    assert loaded.returncode == 0, loaded.stderr
    assert f"loaded {good.id}; not an image of this lock: left untagged" in loaded.stdout
    assert client.images.get(good.id).tags == []
    remove(client, good.id)

    tagged = tmp_path / "tagged"
    tagged.mkdir()
    path = write_archive(
        tagged, good, [*members_of(good), ("manifest.json", good.manifest([scene.name]))]
    )
    refused = prooflock_cli("images", "load", str(path), "--no-snapshot")
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert "its manifest names the image" in refused.stderr
    assert image_id_of(client, good.id) is None and named(client, scene.name) is None


def prooflock_cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runner.cli", *argv], capture_output=True, text=True, cwd=ROOT
    )


def test_an_archive_changed_between_its_check_and_its_load_loads_nothing(
    client, scene, tmp_path, monkeypatch
):
    good = scene.good
    path = write_archive(tmp_path, good, [*members_of(good), ("manifest.json", good.manifest())])
    other_bytes = make_image(f"swapped in after the check, {tmp_path}\n").layer
    checked_then_swapped = archives.inspect_archive

    def swap_after_check(*args, **kwargs):
        found = checked_then_swapped(*args, **kwargs)
        members = [(good.layer_name, other_bytes), ("manifest.json", good.manifest())]
        write_archive(tmp_path, good, members)
        return found

    monkeypatch.setattr(archives, "inspect_archive", swap_after_check)
    said = refused_and_nothing_loaded(client, path, scene)
    assert "it changed while it was loaded" in said
