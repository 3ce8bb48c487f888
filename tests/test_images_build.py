"""Reproducible image builds with a real Docker daemon: the rocq image rebuilt without cache has the
same image ID, a changed pin changes it, and a failing self-test fails the build loudly.

Each build here takes minutes (no cache: ~3 min for Rocq's Debian packages, plus ~2 min to
normalize 1.4 GB). They work on a copy of the lock, never the checkout's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from pathlib import Path

import pytest

from runner.images.build import BuildOptions, BuildPlan, build_image
from runner.images.commands import EXIT_FAILED, EXIT_OK, add_image_commands, cmd_images
from runner.images.inputs import resolve_inputs
from runner.images.lock import Kit, load_lock, save_lock
from runner.images.policy import DaemonUnavailable, connect
from runner.images.state import discard, image_id_of, is_current

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
# The lock's default mirror is a Debian snapshot; machines that cannot reach it (CI here) use
# their own apt mirror unless PROOFLOCK_APT_MIRROR says otherwise.
MIRROR = os.environ.get("PROOFLOCK_APT_MIRROR", "host")


@pytest.fixture(scope="session")
def client():
    try:
        return connect()
    except DaemonUnavailable as exc:  # these tests exist to run against a real daemon
        pytest.fail(str(exc))


@pytest.fixture(scope="session")
def workspace(tmp_path_factory):
    """A copy of images/ and the lock, so tests may break a self-test or record freely."""
    root = tmp_path_factory.mktemp("checkout")
    shutil.copytree(ROOT / "images", root / "images")
    (root / "manifests").mkdir()
    shutil.copy(ROOT / "manifests" / "images.lock.json", root / "manifests" / "images.lock.json")
    return root


@pytest.fixture(scope="session")
def locked_rocq(client, workspace):
    """The rocq image the lock records, on this machine (built with cache when it is not)."""
    kit = Kit.open(workspace / "manifests" / "images.lock.json")
    if is_current(client, kit.lock, "rocq", kit.images_root):
        return kit.lock.images["rocq"].image_id
    base = kit.lock.base
    if base.image_id is None or image_id_of(client, base.tag) != base.image_id:
        pytest.fail("the locked base image is missing: run `prooflock images base` first")
    return build_image(client, plan(kit, BuildOptions())).image_id


def plan(kit: Kit, options: BuildOptions) -> BuildPlan:
    """A rocq build of `kit`, with the machine's mirror (see MIRROR) and logs in the workspace."""
    inputs = resolve_inputs(kit.lock.transport, suite=kit.lock.base.suite, apt_mirror=MIRROR)
    log_dir = kit.lock_path.parent.parent / "logs"
    return BuildPlan.of(kit, "rocq", inputs, options, log_dir=log_dir)


def images_command(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    add_image_commands(parser.add_subparsers(dest="command"))
    return cmd_images(parser.parse_args(["images", *argv]))


def test_rebuilding_rocq_without_cache_gives_the_same_image_id(client, workspace, locked_rocq):
    kit = Kit.open(workspace / "manifests" / "images.lock.json")
    lock = kit.lock
    rebuilt = build_image(client, plan(kit, BuildOptions(nocache=True, tag=False)))
    assert rebuilt.image_id == locked_rocq
    if lock.images["rocq"].image_id == locked_rocq:  # the lock describes this very build
        assert rebuilt.diff_ids == lock.images["rocq"].diff_ids
        assert rebuilt.packages == lock.images["rocq"].packages


def test_changing_a_pin_changes_the_image_id(client, workspace, locked_rocq):
    kit = Kit.open(workspace / "manifests" / "images.lock.json")
    lock = kit.lock
    later = str(lock.source_date_epoch + 86400)
    changed = build_image(
        client, plan(kit, BuildOptions(pins={"SOURCE_DATE_EPOCH": later}, tag=False))
    )
    assert changed.image_id != locked_rocq
    assert changed.diff_ids[:-1] == lock.base.diff_ids  # the same base, a different prover layer
    assert client.images.get(lock.tag("rocq")).id == locked_rocq  # an experiment is never tagged
    discard(client, changed.image_id)


def test_a_failing_self_test_fails_the_build_loudly(client, workspace, locked_rocq, capsys):
    broken = workspace / "broken"
    shutil.copytree(workspace / "images", broken / "images")
    (broken / "manifests").mkdir()
    lock_path = broken / "manifests" / "images.lock.json"
    shutil.copy(workspace / "manifests" / "images.lock.json", lock_path)
    # The known-good artifact now holds a false lemma: the image "cannot check anything".
    (broken / "images/rocq/selftest/good.v").write_text(
        "Lemma broken : 1 = 2.\nProof. reflexivity. Qed.\n"
    )
    lock = load_lock(lock_path)
    before = lock.images["rocq"]
    save_lock(lock, lock_path)

    code = images_command(
        "build", "rocq", "--rebuild", "--lock", str(lock_path), "--apt-mirror", MIRROR
    )

    err = capsys.readouterr().err
    assert code == EXIT_FAILED
    assert "rocq: the image's self-test failed" in err
    assert "good.v was rejected" in err and "Unable to unify" in err
    assert load_lock(lock_path).images["rocq"] == before  # nothing recorded
    assert client.images.get(before.tag).id == locked_rocq  # the good image keeps its tag


def test_images_list_json_says_which_locked_images_this_daemon_holds(
    workspace, locked_rocq, capsys
):
    lock_path = workspace / "manifests" / "images.lock.json"

    assert images_command("list", "--json", "--lock", str(lock_path)) == EXIT_OK

    listing = json.loads(capsys.readouterr().out)
    assert listing["schema"] == "prooflock.images/1" and listing["lock"] == str(lock_path)
    rows = {row["name"]: row for row in listing["images"]}
    locked = load_lock(lock_path).images["rocq"]
    assert rows["base"]["state"] == "present"
    assert rows["rocq"] == {
        "name": "rocq",
        "tag": locked.tag,
        "image_id": locked.image_id,
        # the tag is the lock's image unless this machine built rocq to another ID
        "state": "present" if locked.image_id == locked_rocq else "stale",
    }
    assert rows["lean"]["state"] == "not built"
