"""Image archives: an image saved as `sha256-<hex>.tar.gz`, in a directory or S3 (moto on loopback),
loads back to the same ID; a corrupted, truncated or misnamed archive is refused, naming it, with
nothing loaded; a store that does not answer is an infra failure (exit 3)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from runner.core.errors import UserError
from runner.images.archives import (
    DamagedArchive,
    archive_name,
    fetch_image,
    load_archive,
    save_archive,
    save_to,
)
from runner.images.state import image_id_of
from runner.storage import StorageUnavailable
from runner.storage.s3_settings import load_s3_settings
from tests.support.s3_endpoint import endpoint_env, raw_client
from tests.support.tiny_image import remove

pytestmark = [pytest.mark.docker]
OTHER = "sha256:" + "1" * 64


def test_an_archive_is_named_by_its_image_id_and_the_same_image_gives_the_same_bytes(
    client, tiny_image, tmp_path
):
    first = save_archive(client, tiny_image, tmp_path / "a")
    second = save_archive(client, tiny_image, tmp_path / "b")
    assert first.name == archive_name(tiny_image) == f"sha256-{tiny_image[7:]}.tar.gz"
    assert first.read_bytes() == second.read_bytes()
    assert first.read_bytes()[4:8] == b"\0\0\0\0"  # gzip mtime 0

    remove(client, tiny_image)
    assert load_archive(first, client) == tiny_image
    assert image_id_of(client, tiny_image) == tiny_image


@pytest.mark.parametrize("damage", ["corrupt", "truncate", "rename"])
def test_a_damaged_or_misnamed_archive_is_refused_naming_it_and_nothing_is_loaded(
    client, tiny_image, tmp_path, damage
):
    good = save_archive(client, tiny_image, tmp_path / "good")
    remove(client, tiny_image)
    data = bytearray(good.read_bytes())
    bad = tmp_path / "bad" / good.name
    bad.parent.mkdir()
    if damage == "corrupt":
        data[len(data) // 2] ^= 0xFF
    elif damage == "truncate":
        data = data[: len(data) // 2]
    else:
        bad = bad.with_name(archive_name(OTHER))
    bad.write_bytes(bytes(data))

    with pytest.raises(DamagedArchive) as refused:
        load_archive(bad, client)

    assert str(bad) in str(refused.value) and "nothing was loaded" in str(refused.value)
    if damage == "rename":
        assert f"holds image {tiny_image}, not the {OTHER}" in str(refused.value)
    assert image_id_of(client, tiny_image) is None


def test_a_name_that_is_not_an_image_id_is_a_user_mistake(client, tmp_path):
    path = tmp_path / "image.tar.gz"
    path.write_bytes(b"")
    with pytest.raises(UserError, match="not an image archive name"):
        load_archive(path, client)
    with pytest.raises(UserError, match="not an image ID"):
        archive_name("sha256:abc")


def test_archives_travel_through_s3_and_fetch_image_takes_the_first_store_that_has_it(
    client, tiny_image, tmp_path, s3_endpoint, s3_bucket, monkeypatch
):
    for key, value in endpoint_env(s3_endpoint).items():
        monkeypatch.setenv(key, value)
    s3 = load_s3_settings()
    where = save_to(client, tiny_image, f"s3://{s3_bucket}/store/images", s3)
    assert where == f"s3://{s3_bucket}/store/images/{archive_name(tiny_image)}"
    assert save_to(client, tiny_image, f"s3://{s3_bucket}/store/images", s3) == where  # kept

    remove(client, tiny_image)
    assert load_archive(where, client, s3) == tiny_image

    remove(client, tiny_image)
    empty = tmp_path / "empty-store"
    assert not fetch_image(tiny_image, [str(empty)], client)
    assert fetch_image(tiny_image, [str(empty), f"s3://{s3_bucket}/store"], client, s3)
    assert image_id_of(client, tiny_image) == tiny_image

    objects = raw_client(s3_endpoint).list_objects_v2(Bucket=s3_bucket)["Contents"]
    assert [o["Key"] for o in objects] == [f"store/images/{archive_name(tiny_image)}"]


def test_a_store_that_does_not_answer_is_an_infra_failure_to_retry(tmp_path, monkeypatch):
    for key, value in endpoint_env("http://127.0.0.1:9").items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("PROOFLOCK_S3_MAX_ATTEMPTS", "1")
    with pytest.raises(StorageUnavailable, match="did not answer"):
        fetch_image(OTHER, ["s3://bucket/store"], s3=load_s3_settings())

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "runner.cli",
            "images",
            "load",
            f"s3://bucket/x/{archive_name(OTHER)}",
        ],
        capture_output=True,
        text=True,
        env={
            **os.environ,
            "PROOFLOCK_S3_ACCESS_KEY_ID": "k",
            "PROOFLOCK_S3_SECRET_ACCESS_KEY": "s",
        },
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert done.returncode == 3, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "did not answer" in done.stderr


def test_every_user_mistake_is_one_line_and_exit_2(tmp_path):
    for argv in (
        ["images", "load", str(tmp_path / "missing.tar.gz")],
        ["images", "load", str(tmp_path / "sha256-00.tar.gz")],
        ["images", "save", "nosuchimage", "--out", str(tmp_path)],
        ["images", "save", "rocq", "--out", "s3://Not_A_Bucket/x"],
    ):
        done = subprocess.run(
            [sys.executable, "-m", "runner.cli", *argv],
            capture_output=True,
            text=True,
            cwd=Path(__file__).resolve().parent.parent,
        )
        assert done.returncode == 2, (argv, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1, (argv, done.stderr)


def test_vendoring_inputs_no_source_answers_for_is_a_failure_naming_each(tmp_path):
    """Not a usage mistake (exit 1, not 2): `images vendor lean` where GitHub cannot be reached
    names each input it could not fetch or pin, one line each, and writes no lock."""
    root = Path(__file__).resolve().parent.parent
    shutil.copytree(root / "images", tmp_path / "images")
    shutil.copytree(root / "manifests", tmp_path / "manifests")
    lock = tmp_path / "manifests" / "images.lock.json"
    before = lock.read_bytes()
    done = subprocess.run(
        [sys.executable, "-m", "runner.cli", "images", "vendor", "lean", "--lock", str(lock)],
        capture_output=True,
        text=True,
        cwd=root,
    )
    if done.returncode == 0:
        pytest.skip("this machine reaches GitHub: vendoring lean succeeded")
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    for name in ("lean-4.35.0-linux.tar.zst", "mathlib.bundle", "repl.bundle"):
        (line,) = [line for line in done.stderr.splitlines() if name in line]
        assert "did not answer" in line or "in no source" in line, line
    assert lock.read_bytes() == before
