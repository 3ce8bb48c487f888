"""Reproducible image builds with a real Docker daemon, on newclid (the cheapest real image): a
rebuild without cache gives the LOCKED image ID, or says package by package why not (it never
fails just because Debian moved on); a changed pin changes the ID; a failing self-test fails the
build loudly. They work on a copy of the lock, never the checkout's, which no build writes.

Each build here takes minutes (no cache: newclid's Debian packages and wheels, plus ~1 min to
normalize 650 MB).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from pathlib import Path

import pytest

from runner.core.settings import Settings
from runner.images import api
from runner.images.api import BuildOutcome
from runner.images.build import BuildOptions
from runner.images.commands import EXIT_FAILED, EXIT_OK, cmd_images
from runner.images.flags import add_image_commands
from runner.images.inputs import resolve_inputs
from runner.images.lock import Kit, load_lock
from runner.images.state import discard, image_id_of

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
IMAGE = "newclid"
# The lock's default mirror is a Debian snapshot; machines that cannot reach it (CI here) use
# their own apt mirror unless PROOFLOCK_APT_MIRROR says otherwise.
MIRROR = os.environ.get("PROOFLOCK_APT_MIRROR", "host")
DEAD = "http://127.0.0.1:9/debian"  # no mirror answers: the store alone serves the build


@pytest.fixture(scope="session")
def workspace(tmp_path_factory, client):
    """A copy of images/ and the lock, so tests may break a self-test freely."""
    base = load_lock(ROOT / "manifests" / "images.lock.json").base
    if base.image_id is None or image_id_of(client, base.tag) != base.image_id:
        pytest.fail("the locked base image is missing: run `prooflock images base` first")
    root = tmp_path_factory.mktemp("checkout")
    shutil.copytree(ROOT / "images", root / "images")
    shutil.copytree(
        ROOT / "manifests", root / "manifests", ignore=shutil.ignore_patterns("results")
    )
    return root


def kit_of(workspace: Path) -> Kit:
    return Kit.open(workspace / "manifests" / "images.lock.json")


def images_command(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    add_image_commands(parser.add_subparsers(dest="command"))
    return cmd_images(parser.parse_args(["images", *argv]), Settings(), None)


# A rebuild to the locked ID from the store with no network: tests/test_hermetic_build.py; a
# drifted mirror refused package by package: tests/test_images_drift.py.


def test_changing_a_pin_changes_the_image_id(client, workspace, capsys):
    """From the vendored store alone (no mirror answers), so the pin is the only difference:
    the locked pins give the locked ID, a day later's SOURCE_DATE_EPOCH another one."""
    kit = kit_of(workspace)
    locked = kit.lock.images[IMAGE].image_id
    assert images_command("vendor", IMAGE, "--lock", str(kit.lock_path)) == EXIT_OK
    capsys.readouterr()
    inputs = resolve_inputs(
        kit.lock.transport, Settings(), suite=kit.lock.base.suite, apt_mirror=DEAD
    )

    (control,) = api.build_images(kit, [IMAGE], inputs, BuildOptions(), client=client)
    later = str(kit.lock.source_date_epoch + 86400)
    options = BuildOptions(pins={"SOURCE_DATE_EPOCH": later})
    (changed,) = api.build_images(kit, [IMAGE], inputs, options, client=client)

    assert control.image_id == locked, control
    assert changed.outcome is BuildOutcome.EXPERIMENT and not changed.drift, changed
    assert changed.image_id not in (None, locked)
    assert image_id_of(client, kit.lock.tag(IMAGE)) != changed.image_id  # never tagged
    discard(client, changed.image_id or "")


def test_a_failing_self_test_fails_the_build_loudly(client, workspace, capsys):
    broken = workspace / "broken"
    shutil.copytree(workspace / "images", broken / "images")
    shutil.copytree(workspace / "manifests", broken / "manifests")
    lock_path = broken / "manifests" / "images.lock.json"
    # The known-good problem now asks for a false goal: the image "cannot prove anything".
    (broken / "images/newclid/selftest/good.txt").write_text(
        "isosceles_base_angles\na b c = iso_triangle a b c ? perp a b a c\n"
    )
    before = lock_path.read_bytes()
    tagged = image_id_of(client, load_lock(lock_path).tag(IMAGE))

    code = images_command(
        "build", IMAGE, "--rebuild", "--lock", str(lock_path), "--apt-mirror", MIRROR
    )

    err = capsys.readouterr().err
    assert code == EXIT_FAILED
    assert "newclid: the image's self-test failed" in err
    assert "SELFTEST FAILED: newclid failed on the good problem" in err
    assert lock_path.read_bytes() == before  # nothing recorded
    assert image_id_of(client, load_lock(lock_path).tag(IMAGE)) == tagged  # the tag stays


def test_images_list_json_says_which_locked_images_this_daemon_holds(client, workspace, capsys):
    lock_path = workspace / "manifests" / "images.lock.json"

    assert images_command("list", "--json", "--lock", str(lock_path)) == EXIT_OK

    listing = json.loads(capsys.readouterr().out)
    assert listing["schema"] == "prooflock.images/1" and listing["lock"] == str(lock_path)
    rows = {row["name"]: row for row in listing["images"]}
    locked = load_lock(lock_path).images[IMAGE]
    assert rows["base"]["state"] == "present"
    assert rows[IMAGE]["image_id"] == locked.image_id
    if image_id_of(client, locked.tag) == locked.image_id:
        assert rows[IMAGE]["state"] == "present"
    assert rows["lean"]["state"] == "not built"
