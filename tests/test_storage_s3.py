"""Bundles in S3: a user publishes a bundle directory, someone else fetches it, byte for byte,
against a real HTTP endpoint (moto's server on loopback)."""

# The endpoint fixtures are imported from tests.support and then named again as test parameters.
# ruff: noqa: F811

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import random
import shutil
import socket
import subprocess
import sys
import time
import traceback
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

import runner.storage.s3 as s3_module
from runner.core.errors import UserError
from runner.storage import (
    DamagedBundle,
    S3Settings,
    StorageRefused,
    StorageUnavailable,
    download_bundle,
    fetch_to_temp,
    parse_s3_url,
    upload_bundle,
)
from runner.storage.s3_settings import load_s3_settings
from tests.support.s3_endpoint import endpoint_env, iam_enforced, raw_client

MiB = 1024 * 1024


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def make_bundle(root: Path, big: int = 0) -> Path:
    """A bundle like `prooflock publish` makes, plus a `big.bin` of `big` bytes if asked."""
    bundle = root / "bundle"
    (bundle / "blobs" / "sha256").mkdir(parents=True)
    (bundle / "log.jsonl").write_text('{"seq": 0}\n{"seq": 1}\n')
    (bundle / "statement.intoto.json").write_text('{"_type": "https://in-toto.io/Statement/v1"}')
    (bundle / "images.lock.json").write_text('{"images": {}}')
    artifact = b"Theorem t : True. Proof. exact I. Qed.\n"
    (bundle / "blobs" / "sha256" / sha256(artifact)).write_bytes(artifact)
    if big:
        (bundle / "big.bin").write_bytes(random.Random(big).randbytes(big))
    return bundle


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def stored_keys(endpoint: str, bucket: str) -> set[str]:
    listing = raw_client(endpoint).list_objects_v2(Bucket=bucket)
    return {item["Key"] for item in listing.get("Contents", [])}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(autouse=True)
def no_s3_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Settings come from each test, not from whatever PROOFLOCK_S3_* the shell exports."""
    for name in [name for name in os.environ if name.startswith("PROOFLOCK_S3_")]:
        monkeypatch.delenv(name)


@pytest.fixture
def settings(s3_endpoint: str) -> S3Settings:
    return S3Settings(
        endpoint_url=s3_endpoint,
        access_key_id="testing",
        secret_access_key="testing",
        multipart_threshold_mb=5,
        part_size_mb=5,
        connect_timeout_s=2,
        max_attempts=1,
    )


@pytest.fixture
def requests_sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, Any]]]:
    """Every S3 operation the library makes, in order, with its parameters."""
    sent: list[tuple[str, dict[str, Any]]] = []
    real_make_client = s3_module.make_client

    def recording_client(settings: S3Settings) -> Any:
        client = real_make_client(settings)
        client.meta.events.register(
            "provide-client-params.s3",
            lambda params, model, **_: sent.append((model.name, dict(params))),
        )
        return client

    monkeypatch.setattr(s3_module, "make_client", recording_client)
    return sent


# --- URLs


def test_s3_urls_name_a_bucket_and_a_prefix() -> None:
    assert parse_s3_url("s3://proofs/runs/2026-05/").prefix == "runs/2026-05"
    assert parse_s3_url("s3://proofs").prefix == ""
    assert parse_s3_url("s3://proofs/a/b").blob_key("ab") == "a/b/blobs/sha256/ab"
    for bad, says in [
        ("https://proofs/x", "not an S3 URL"),
        ("s3://Proofs/x", "not a valid bucket name"),
        ("s3://proofs/a/../b", "'..' segment"),
    ]:
        with pytest.raises(UserError, match=says):
            parse_s3_url(bad)


# --- upload: layout, write-once, checksums


def test_upload_stores_each_file_by_digest_and_writes_the_index_last(
    tmp_path: Path, s3_endpoint: str, s3_bucket: str, settings: S3Settings, requests_sent: list
) -> None:
    bundle = make_bundle(tmp_path)
    lines: list[str] = []
    report = upload_bundle(
        bundle, f"s3://{s3_bucket}/runs/1", settings=settings, progress=lines.append
    )

    files = tree(bundle)
    blob_keys = {f"runs/1/blobs/sha256/{sha256(data)}" for data in files.values()}
    assert stored_keys(s3_endpoint, s3_bucket) == blob_keys | {"runs/1/bundle-index.json"}
    stored = raw_client(s3_endpoint).get_object(Bucket=s3_bucket, Key="runs/1/bundle-index.json")
    index_bytes = stored["Body"].read()
    index = json.loads(index_bytes)
    assert index == {
        "format": "prooflock-bundle-index/1",
        "files": {
            name: {"sha256": sha256(data), "size": len(data)} for name, data in files.items()
        },
    }
    assert index_bytes == json.dumps(index, sort_keys=True, separators=(",", ":")).encode()

    writes = [params["Key"] for op, params in requests_sent if op == "PutObject"]
    assert writes[-1] == "runs/1/bundle-index.json" and len(writes) == len(files) + 1
    assert (report.uploaded, report.skipped) == (len(files) + 1, 0) and report.seconds > 0
    assert report.bytes_sent == sum(map(len, files.values())) + len(index_bytes)
    assert len(lines) == len(files) + 1 and lines[-1].startswith("uploaded bundle-index.json")
    assert any(line.startswith("uploaded log.jsonl as blobs/sha256/") for line in lines)


def test_every_write_is_conditional_and_carries_its_sha256(
    tmp_path: Path, s3_endpoint: str, s3_bucket: str, settings: S3Settings, requests_sent: list
) -> None:
    upload_bundle(make_bundle(tmp_path), f"s3://{s3_bucket}/b", settings=settings)

    puts = [params for op, params in requests_sent if op == "PutObject"]
    for put in puts:
        digest = hashlib.sha256(put["Body"]).digest()
        assert put["IfNoneMatch"] == "*"
        assert put["ChecksumAlgorithm"] == "SHA256"
        assert put["ChecksumSHA256"] == base64.b64encode(digest).decode()
        assert put["Metadata"] == {"sha256": digest.hex()}
        head = raw_client(s3_endpoint).head_object(
            Bucket=s3_bucket, Key=put["Key"], ChecksumMode="ENABLED"
        )
        assert head["ChecksumSHA256"] == put["ChecksumSHA256"]


def test_the_server_itself_refuses_to_replace_a_key_written_with_if_none_match(
    s3_endpoint: str, s3_bucket: str
) -> None:
    """moto 5.2.1 honours `If-None-Match: *` over HTTP, on a put and on a multipart complete."""
    client = raw_client(s3_endpoint)
    client.put_object(Bucket=s3_bucket, Key="k", Body=b"first")
    with pytest.raises(ClientError) as refused:
        client.put_object(Bucket=s3_bucket, Key="k", Body=b"second", IfNoneMatch="*")
    assert refused.value.response["Error"]["Code"] == "PreconditionFailed"
    upload = client.create_multipart_upload(Bucket=s3_bucket, Key="k")["UploadId"]
    etag = client.upload_part(
        Bucket=s3_bucket, Key="k", UploadId=upload, PartNumber=1, Body=b"third"
    )["ETag"]
    with pytest.raises(ClientError) as refused:
        client.complete_multipart_upload(
            Bucket=s3_bucket,
            Key="k",
            UploadId=upload,
            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]},
            IfNoneMatch="*",
        )
    assert refused.value.response["Error"]["Code"] == "PreconditionFailed"
    assert client.get_object(Bucket=s3_bucket, Key="k")["Body"].read() == b"first"


@pytest.mark.parametrize("big", [0, 12 * MiB], ids=["put", "multipart"])
def test_a_writer_racing_between_the_check_and_the_write_is_stopped_by_the_server(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    s3_endpoint: str,
    s3_bucket: str,
    settings: S3Settings,
    big: int,
) -> None:
    """The client's HEAD sees a free key; someone else writes it before our PUT (or before our
    multipart upload completes): only the conditional write keeps their object from being
    replaced, and the upload stops with a refusal instead of overwriting."""
    bundle = make_bundle(tmp_path, big=big)
    name = "big.bin" if big else "log.jsonl"
    key = f"b/blobs/sha256/{sha256((bundle / name).read_bytes())}"
    real_check = s3_module._Publisher._already_there

    def racer_writes_after_the_check(self: Any, checked: str, *args: Any) -> bool:
        if checked == key and not getattr(self, "raced", False):
            self.raced = True
            raw_client(s3_endpoint).put_object(Bucket=s3_bucket, Key=key, Body=b"racer's bytes")
            return False  # what the HEAD saw a moment ago
        return real_check(self, checked, *args)

    monkeypatch.setattr(s3_module._Publisher, "_already_there", racer_writes_after_the_check)
    with pytest.raises(StorageRefused, match=f"already holds other bytes than {name}"):
        upload_bundle(bundle, f"s3://{s3_bucket}/b", settings=settings)
    stored = raw_client(s3_endpoint).get_object(Bucket=s3_bucket, Key=key)["Body"].read()
    assert stored == b"racer's bytes"
    assert "b/bundle-index.json" not in stored_keys(s3_endpoint, s3_bucket)


def test_publishing_the_same_bundle_again_sends_nothing(
    tmp_path: Path, s3_bucket: str, settings: S3Settings
) -> None:
    bundle = make_bundle(tmp_path)
    first = upload_bundle(bundle, f"s3://{s3_bucket}/b", settings=settings)
    lines: list[str] = []
    again = upload_bundle(bundle, f"s3://{s3_bucket}/b", settings=settings, progress=lines.append)
    assert (again.uploaded, again.skipped, again.bytes_sent) == (0, first.uploaded, 0)
    assert all(line.startswith("already there: ") for line in lines)


def test_a_blob_key_holding_other_bytes_is_refused_and_no_index_appears(
    tmp_path: Path, s3_endpoint: str, s3_bucket: str, settings: S3Settings
) -> None:
    bundle = make_bundle(tmp_path)
    key = f"b/blobs/sha256/{sha256((bundle / 'log.jsonl').read_bytes())}"
    raw_client(s3_endpoint).put_object(Bucket=s3_bucket, Key=key, Body=b"someone else's bytes")

    with pytest.raises(StorageRefused, match="already holds other bytes than log.jsonl"):
        upload_bundle(bundle, f"s3://{s3_bucket}/b", settings=settings)
    stored = raw_client(s3_endpoint).get_object(Bucket=s3_bucket, Key=key)["Body"].read()
    assert stored == b"someone else's bytes"
    assert "b/bundle-index.json" not in stored_keys(s3_endpoint, s3_bucket)


def test_a_different_bundle_under_a_published_prefix_is_refused_before_any_write(
    tmp_path: Path, s3_endpoint: str, s3_bucket: str, settings: S3Settings
) -> None:
    bundle = make_bundle(tmp_path)
    upload_bundle(bundle, f"s3://{s3_bucket}/b", settings=settings)
    before = stored_keys(s3_endpoint, s3_bucket)
    (bundle / "log.jsonl").write_text('{"seq": 0}\n')

    with pytest.raises(StorageRefused, match="already holds a different bundle"):
        upload_bundle(bundle, f"s3://{s3_bucket}/b", settings=settings)
    assert stored_keys(s3_endpoint, s3_bucket) == before


def test_a_file_edited_during_the_upload_is_not_published_under_its_old_digest(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    s3_endpoint: str,
    s3_bucket: str,
    settings: S3Settings,
) -> None:
    real_bundle_files = s3_module.bundle_files

    def hashed_then_edited(bundle_dir: Path) -> list[Any]:
        files = real_bundle_files(bundle_dir)
        (bundle_dir / "log.jsonl").write_text('{"seq": "edited"}\n')
        return files

    monkeypatch.setattr(s3_module, "bundle_files", hashed_then_edited)
    with pytest.raises(UserError, match="log.jsonl: changed while it was being uploaded"):
        upload_bundle(make_bundle(tmp_path), f"s3://{s3_bucket}/b", settings=settings)
    assert "b/bundle-index.json" not in stored_keys(s3_endpoint, s3_bucket)


@pytest.mark.parametrize("problem", ["missing", "a file", "a symlink inside"])
def test_only_a_directory_of_regular_files_is_a_bundle(
    tmp_path: Path, s3_bucket: str, settings: S3Settings, problem: str
) -> None:
    bundle = make_bundle(tmp_path)
    if problem == "missing":
        bundle = tmp_path / "nowhere"
    elif problem == "a file":
        bundle = bundle / "log.jsonl"
    else:
        (bundle / "outside").symlink_to("/etc/passwd")
    with pytest.raises(UserError, match="no such bundle|not a directory|a symlink"):
        upload_bundle(bundle, f"s3://{s3_bucket}/b", settings=settings)


# --- download: verified, all or nothing


def test_download_returns_the_same_files_and_fetch_to_temp_too(
    tmp_path: Path, s3_bucket: str, settings: S3Settings
) -> None:
    bundle = make_bundle(tmp_path)
    upload_bundle(bundle, f"s3://{s3_bucket}/b", settings=settings)
    lines: list[str] = []
    dest = download_bundle(
        f"s3://{s3_bucket}/b", tmp_path / "out" / "copy", settings=settings, progress=lines.append
    )
    assert dest == tmp_path / "out" / "copy"
    assert tree(dest) == tree(bundle)
    assert sorted(line.split(" (")[0] for line in lines) == sorted(
        f"downloaded {name}" for name in tree(bundle)
    )
    assert os.listdir(tmp_path / "out") == ["copy"]  # no staging directory left behind

    fetched = fetch_to_temp(f"s3://{s3_bucket}/b", settings=settings)
    assert tree(fetched) == tree(bundle)
    assert fetched.parent.name.startswith("prooflock-bundle-")
    shutil.rmtree(fetched.parent)


def test_a_tampered_blob_fails_the_download_naming_the_file_and_leaves_nothing(
    tmp_path: Path, s3_endpoint: str, s3_bucket: str, settings: S3Settings
) -> None:
    bundle = make_bundle(tmp_path)
    upload_bundle(bundle, f"s3://{s3_bucket}/b", settings=settings)
    key = f"b/blobs/sha256/{sha256((bundle / 'log.jsonl').read_bytes())}"
    raw_client(s3_endpoint).put_object(Bucket=s3_bucket, Key=key, Body=b'{"seq": 99}\n')

    downloads = tmp_path / "downloads"
    with pytest.raises(DamagedBundle) as failure:
        download_bundle(f"s3://{s3_bucket}/b", downloads / "copy", settings=settings)
    message = str(failure.value)
    assert message.startswith("log.jsonl: ") and "do not match the sha256" in message
    assert "\n" not in message
    assert os.listdir(downloads) == []


def test_an_index_naming_a_path_outside_the_bundle_is_refused(
    tmp_path: Path, s3_endpoint: str, s3_bucket: str, settings: S3Settings
) -> None:
    evil = {
        "format": "prooflock-bundle-index/1",
        "files": {"../escape": {"sha256": "0" * 64, "size": 1}},
    }
    raw_client(s3_endpoint).put_object(
        Bucket=s3_bucket, Key="b/bundle-index.json", Body=json.dumps(evil).encode()
    )
    with pytest.raises(DamagedBundle, match="not a bundle index.*unsafe path"):
        download_bundle(f"s3://{s3_bucket}/b", tmp_path / "d" / "copy", settings=settings)
    assert not (tmp_path / "d" / "escape").exists() and os.listdir(tmp_path / "d") == []


def test_download_refuses_an_existing_dest_and_a_prefix_with_no_bundle(
    tmp_path: Path, s3_bucket: str, settings: S3Settings
) -> None:
    (tmp_path / "taken").mkdir()
    with pytest.raises(UserError, match="already exists"):
        download_bundle(f"s3://{s3_bucket}/b", tmp_path / "taken", settings=settings)
    with pytest.raises(UserError, match=f"no bundle at s3://{s3_bucket}/empty"):
        download_bundle(f"s3://{s3_bucket}/empty", tmp_path / "copy", settings=settings)
    assert sorted(os.listdir(tmp_path)) == ["taken"]


# --- multipart


def test_a_large_file_goes_up_in_parts_and_comes_back_whole(
    tmp_path: Path, s3_endpoint: str, s3_bucket: str, settings: S3Settings
) -> None:
    bundle = make_bundle(tmp_path, big=12 * MiB)
    report = upload_bundle(bundle, f"s3://{s3_bucket}/b", settings=settings)
    assert (report.parts_sent, report.parts_reused) == (3, 0)
    key = f"b/blobs/sha256/{sha256((bundle / 'big.bin').read_bytes())}"
    assert raw_client(s3_endpoint).head_object(Bucket=s3_bucket, Key=key)["ETag"].endswith('-3"')

    again = upload_bundle(bundle, f"s3://{s3_bucket}/b", settings=settings)
    assert again.uploaded == 0  # the multipart object's sha256 lives in its metadata
    assert tree(
        download_bundle(f"s3://{s3_bucket}/b", tmp_path / "copy", settings=settings)
    ) == tree(bundle)


def test_resuming_keeps_only_the_parts_whose_bytes_match(
    tmp_path: Path, s3_endpoint: str, s3_bucket: str, settings: S3Settings
) -> None:
    bundle = make_bundle(tmp_path, big=12 * MiB)
    data = (bundle / "big.bin").read_bytes()
    key = f"b/blobs/sha256/{sha256(data)}"
    client = raw_client(s3_endpoint)
    upload_id = client.create_multipart_upload(Bucket=s3_bucket, Key=key)["UploadId"]
    client.upload_part(
        Bucket=s3_bucket, Key=key, UploadId=upload_id, PartNumber=1, Body=data[: 5 * MiB]
    )
    client.upload_part(
        Bucket=s3_bucket, Key=key, UploadId=upload_id, PartNumber=2, Body=bytes(5 * MiB)
    )

    report = upload_bundle(bundle, f"s3://{s3_bucket}/b", settings=settings)
    assert (report.parts_reused, report.parts_sent) == (1, 2)
    assert client.get_object(Bucket=s3_bucket, Key=key)["Body"].read() == data


KILLED_UPLOAD = """
import os, sys
from collections.abc import Iterator
from pathlib import Path
import runner.storage.s3 as s3
from runner.storage.s3_settings import load_s3_settings

real_make_client = s3.make_client

def client_that_dies(settings):
    # Test-only hook: the process dies, as if killed, right after part N reaches the store.
    client = real_make_client(settings)
    real_upload_part = client.upload_part
    def upload_part(**kwargs):
        response = real_upload_part(**kwargs)
        if kwargs["PartNumber"] == int(sys.argv[3]):
            os._exit(17)
        return response
    client.upload_part = upload_part
    return client

s3.make_client = client_that_dies
s3.upload_bundle(Path(sys.argv[1]), sys.argv[2], settings=load_s3_settings())
"""


def test_an_upload_killed_midway_leaves_no_object_and_a_rerun_reuses_its_parts(
    tmp_path: Path, s3_endpoint: str, s3_bucket: str, settings: S3Settings
) -> None:
    bundle = make_bundle(tmp_path, big=12 * MiB)
    url = f"s3://{s3_bucket}/b"
    env = {
        **os.environ,
        **endpoint_env(s3_endpoint),
        "PROOFLOCK_S3_MULTIPART_THRESHOLD_MB": "5",
        "PROOFLOCK_S3_PART_SIZE_MB": "5",
    }
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_UPLOAD, str(bundle), url, "2"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert killed.returncode == 17, killed.stderr

    client = raw_client(s3_endpoint)
    key = f"b/blobs/sha256/{sha256((bundle / 'big.bin').read_bytes())}"
    assert key not in stored_keys(s3_endpoint, s3_bucket)
    assert "b/bundle-index.json" not in stored_keys(s3_endpoint, s3_bucket)
    (upload,) = client.list_multipart_uploads(Bucket=s3_bucket)["Uploads"]
    assert (
        len(client.list_parts(Bucket=s3_bucket, Key=key, UploadId=upload["UploadId"])["Parts"]) == 2
    )

    lines: list[str] = []
    report = upload_bundle(bundle, url, settings=settings, progress=lines.append)
    assert (report.parts_reused, report.parts_sent) == (2, 1)
    assert any("2 of 3 parts reused" in line for line in lines)
    assert client.list_multipart_uploads(Bucket=s3_bucket).get("Uploads", []) == []
    assert tree(download_bundle(url, tmp_path / "copy", settings=settings)) == tree(bundle)


# --- settings and credentials


def test_settings_come_from_prooflock_s3_variables_and_hide_the_secret(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, s3_endpoint: str, s3_bucket: str
) -> None:
    secret = f"env-secret-{uuid.uuid4().hex}"
    for name, value in endpoint_env(s3_endpoint).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("PROOFLOCK_S3_SECRET_ACCESS_KEY", secret)
    monkeypatch.setenv("PROOFLOCK_S3_PART_SIZE_MB", "8")

    settings = load_s3_settings()
    assert settings.endpoint_url == s3_endpoint and settings.part_size_mb == 8
    assert settings.region == "us-east-1" and settings.addressing_style is None
    assert secret not in repr(settings) and secret not in settings.model_dump_json()
    # moto accepts any key until told to check them, so the environment alone is enough here.
    assert upload_bundle(make_bundle(tmp_path), f"s3://{s3_bucket}/env", settings=settings).uploaded

    monkeypatch.setenv("PROOFLOCK_S3_PART_SIZE_MB", "1")
    with pytest.raises(UserError, match="bad PROOFLOCK_S3_\\* setting: part_size_mb"):
        load_s3_settings()


def test_half_a_key_pair_or_a_missing_aws_profile_is_a_user_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    bundle = make_bundle(tmp_path)
    with pytest.raises(UserError, match="set both"):
        upload_bundle(bundle, "s3://b-u-c/x", settings=S3Settings(access_key_id="a"))
    monkeypatch.setenv("AWS_PROFILE", f"absent-{uuid.uuid4().hex}")
    with pytest.raises(UserError, match="config profile .* could not be found"):
        download_bundle("s3://b-u-c/x", tmp_path / "copy", settings=S3Settings())
    assert not (tmp_path / "copy").exists()


@pytest.fixture
def iam_users(s3_endpoint: str, s3_bucket: str) -> Iterator[dict[str, Any]]:
    """Two IAM users: `writer` may do anything in S3, `nobody` nothing; the server then checks."""
    iam = raw_client(s3_endpoint, "iam")
    keys = {}
    for user, actions in [("writer", ["s3:*"]), ("nobody", [])]:
        name = f"{user}-{uuid.uuid4().hex[:8]}"
        iam.create_user(UserName=name)
        if actions:
            policy = {
                "Version": "2012-10-17",
                "Statement": [{"Effect": "Allow", "Action": actions, "Resource": "*"}],
            }
            iam.put_user_policy(UserName=name, PolicyName="s3", PolicyDocument=json.dumps(policy))
        keys[user] = iam.create_access_key(UserName=name)["AccessKey"]
    with iam_enforced(s3_endpoint):
        yield keys


def test_rejected_credentials_denied_access_and_missing_buckets_are_user_errors_without_secrets(
    tmp_path: Path,
    s3_endpoint: str,
    s3_bucket: str,
    iam_users: dict[str, Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    bundle = make_bundle(tmp_path)
    writer, nobody = iam_users["writer"], iam_users["nobody"]

    def as_user(key_id: str, secret: str) -> S3Settings:
        return S3Settings(endpoint_url=s3_endpoint, access_key_id=key_id, secret_access_key=secret)

    wrong_secret = f"not-the-secret-{uuid.uuid4().hex}"
    with caplog.at_level(logging.DEBUG), pytest.raises(StorageRefused):  # botocore's log too
        upload_bundle(bundle, f"s3://{s3_bucket}/b", settings=as_user("AKIA0000", wrong_secret))
    assert caplog.text and wrong_secret not in caplog.text

    cases = [
        (as_user(writer["AccessKeyId"], wrong_secret), s3_bucket, "rejected the S3 credentials"),
        (as_user("AKIAUNKNOWNKEY000000", wrong_secret), s3_bucket, "rejected the S3 credentials"),
        (as_user(nobody["AccessKeyId"], nobody["SecretAccessKey"]), s3_bucket, "access denied to"),
        (
            as_user(writer["AccessKeyId"], writer["SecretAccessKey"]),
            "no-such-bucket",
            "does not exist",
        ),
    ]
    for settings, bucket, says in cases:
        with pytest.raises(StorageRefused, match=says) as upload_failure:
            upload_bundle(bundle, f"s3://{bucket}/b", settings=settings)
        with pytest.raises(StorageRefused, match=says) as download_failure:
            download_bundle(f"s3://{bucket}/b", tmp_path / "copy", settings=settings)
        for failure in (upload_failure, download_failure):
            assert "\n" not in str(failure.value)
            everything = "".join(traceback.format_exception(failure.value))
            for secret in settings.secret_values()[1:]:  # [0] is the key id, not a secret
                assert secret not in everything

    writer_settings = as_user(writer["AccessKeyId"], writer["SecretAccessKey"])
    assert upload_bundle(bundle, f"s3://{s3_bucket}/b", settings=writer_settings).uploaded > 0


def test_an_endpoint_that_does_not_answer_is_unavailable_not_a_user_error(
    tmp_path: Path, s3_bucket: str
) -> None:
    secret = f"secret-{uuid.uuid4().hex}"
    settings = S3Settings(
        endpoint_url=f"http://127.0.0.1:{free_port()}",
        access_key_id="testing",
        secret_access_key=secret,
        connect_timeout_s=1,
        max_attempts=1,
    )
    started = time.monotonic()
    for attempt in (
        lambda: upload_bundle(make_bundle(tmp_path), f"s3://{s3_bucket}/b", settings=settings),
        lambda: download_bundle(f"s3://{s3_bucket}/b", tmp_path / "copy", settings=settings),
    ):
        with pytest.raises(StorageUnavailable, match="did not answer") as failure:
            attempt()
        assert not isinstance(failure.value, UserError)
        assert secret not in "".join(traceback.format_exception(failure.value))
    assert time.monotonic() - started < 10
    assert not (tmp_path / "copy").exists()
