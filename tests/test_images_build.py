"""Reproducible image builds with a real Docker daemon: the rocq image rebuilt without cache has the
same image ID, a changed pin changes it, and a failing self-test fails the build loudly.

Each build here takes minutes (no cache: ~3 min for Rocq's Debian packages, plus ~2 min to
normalize 1.4 GB). They work on a copy of the lock, never the checkout's.
"""

from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path

import pytest

from runner.images.build import BuildOptions, build_image, discard, is_current
from runner.images.commands import EXIT_FAILED, add_image_commands, cmd_images
from runner.images.containers import DaemonUnavailable, connect
from runner.images.inputs import resolve_inputs
from runner.images.lock import load_lock, save_lock

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
    lock = load_lock(workspace / "manifests" / "images.lock.json")
    if is_current(client, lock, "rocq", workspace / "images"):
        return lock.images["rocq"].image_id
    if lock.base.image_id is None or not _present(client, lock.base.tag, lock.base.image_id):
        pytest.fail("the locked base image is missing: run `prooflock images base` first")
    result = build_image(
        client,
        lock,
        "rocq",
        _inputs(lock),
        BuildOptions(),
        images_root=workspace / "images",
        log_dir=workspace / "logs",
    )
    return result.image_id


def _present(client, tag: str, image_id: str) -> bool:
    try:
        return client.images.get(tag).id == image_id
    except Exception:  # noqa: BLE001 - absent
        return False


def _inputs(lock):
    return resolve_inputs(lock.transport, suite=lock.base.suite, apt_mirror=MIRROR)


def test_rebuilding_rocq_without_cache_gives_the_same_image_id(client, workspace, locked_rocq):
    lock = load_lock(workspace / "manifests" / "images.lock.json")
    rebuilt = build_image(
        client,
        lock,
        "rocq",
        _inputs(lock),
        BuildOptions(nocache=True, tag=False),
        images_root=workspace / "images",
        log_dir=workspace / "logs",
    )
    assert rebuilt.image_id == locked_rocq
    if lock.images["rocq"].image_id == locked_rocq:  # the lock describes this very build
        assert rebuilt.diff_ids == lock.images["rocq"].diff_ids
        assert rebuilt.packages == lock.images["rocq"].packages


def test_changing_a_pin_changes_the_image_id(client, workspace, locked_rocq):
    lock = load_lock(workspace / "manifests" / "images.lock.json")
    later = str(lock.source_date_epoch + 86400)
    changed = build_image(
        client,
        lock,
        "rocq",
        _inputs(lock),
        BuildOptions(pins={"SOURCE_DATE_EPOCH": later}, tag=False),
        images_root=workspace / "images",
        log_dir=workspace / "logs",
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

    parser = argparse.ArgumentParser()
    add_image_commands(parser.add_subparsers(dest="command"))
    args = parser.parse_args(
        ["images", "build", "rocq", "--rebuild", "--lock", str(lock_path), "--apt-mirror", MIRROR]
    )
    code = cmd_images(args)

    err = capsys.readouterr().err
    assert code == EXIT_FAILED
    assert "rocq: the image's self-test failed" in err
    assert "good.v was rejected" in err and "Unable to unify" in err
    assert load_lock(lock_path).images["rocq"] == before  # nothing recorded
    assert client.images.get(before.tag).id == locked_rocq  # the good image keeps its tag
