"""A locked image rebuilt as a new user would, with a real Docker daemon: no `PROOFLOCK_*` build
input set, its inputs put into the store beforehand by `images vendor` (the host's own apt
sources, trust store and pip: this machine intercepts TLS), then built with no network in the
build's containers, to its LOCKED image ID. Newclid: its wheels were fetched by pip inside the
build before, which does not trust this network's certificates.

Minutes: newclid's Debian packages and wheels without docker's cache, and ~1 min to normalize.
"""

from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path

import pytest

from runner.core.settings import Settings
from runner.images import api
from runner.images.api import BuildOutcome
from runner.images.build import BuildOptions
from runner.images.commands import EXIT_OK, cmd_images
from runner.images.flags import add_image_commands
from runner.images.inputs import resolve_inputs
from runner.images.lock import Kit, load_lock
from runner.images.state import image_id_of
from runner.images.store import InputStore

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
IMAGE = "newclid"
KEPT = {"PROOFLOCK_CACHE_DIR", "PROOFLOCK_HOME"}  # where things are, not how builds reach out


def images_command(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    add_image_commands(parser.add_subparsers(dest="command"))
    return cmd_images(parser.parse_args(["images", *argv]), Settings(), None)


@pytest.fixture
def checkout(tmp_path: Path, client) -> Path:
    """A copy of images/ and the lock, on the locked base; no build input in the environment."""
    base = load_lock(ROOT / "manifests" / "images.lock.json").base
    if base.image_id is None or image_id_of(client, base.tag) != base.image_id:
        pytest.fail("the locked base image is missing: run `prooflock images base` first")
    shutil.copytree(ROOT / "images", tmp_path / "images")
    shutil.copytree(
        ROOT / "manifests", tmp_path / "manifests", ignore=shutil.ignore_patterns("results")
    )
    return tmp_path / "manifests" / "images.lock.json"


@pytest.fixture
def no_build_inputs(monkeypatch):
    for key in [k for k in os.environ if k.startswith("PROOFLOCK_") and k not in KEPT]:
        monkeypatch.delenv(key)


def test_newclid_builds_from_the_store_with_no_network_to_its_locked_id(
    client, checkout, no_build_inputs, monkeypatch, capsys
):
    kit = Kit.open(checkout)
    entry = kit.lock.images[IMAGE]
    assert entry.downloads, "the lock lists newclid's wheels"

    assert images_command("vendor", IMAGE, "--lock", str(checkout)) == EXIT_OK
    said = capsys.readouterr().out
    assert f"{len(entry.downloads)} wheel" in said and "deb" in said
    store = InputStore(Settings().cache_dir)
    assert all(store.has(download) for download in entry.downloads.values())

    networks = []
    build = client.api.build

    def recording_build(**kwargs):
        networks.append(kwargs.get("network_mode"))
        return build(**kwargs)

    monkeypatch.setattr(client.api, "build", recording_build)
    inputs = resolve_inputs(kit.lock.transport, Settings(), suite=kit.lock.base.suite)
    (built,) = api.build_images(
        kit, [IMAGE], inputs, BuildOptions(nocache=True), rebuild=True, client=client
    )

    assert networks == ["none"]
    assert built.outcome is BuildOutcome.BUILT, built
    assert built.image_id == entry.image_id and built.built_from == "the locked closure"
    assert image_id_of(client, entry.tag) == entry.image_id
