"""A real S3 HTTP endpoint for tests: moto's server on loopback, and a fresh bucket per test.

Import the fixtures into a test module: `from tests.support.s3_endpoint import s3_bucket, s3_endpoint`.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boto3
import pytest
import requests
from moto.server import ThreadedMotoServer

# moto's server takes any key unless told to enforce IAM (see `iam_enforced`).
TEST_KEY_ID = "testing"
TEST_SECRET = "testing"


def raw_client(endpoint_url: str, service: str = "s3", **keys: str) -> Any:
    """A plain boto3 client on the endpoint, for setting the scene behind the library's back."""
    return boto3.client(
        service,
        endpoint_url=endpoint_url,
        region_name="us-east-1",
        aws_access_key_id=keys.get("key_id", TEST_KEY_ID),
        aws_secret_access_key=keys.get("secret", TEST_SECRET),
    )


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """The URL of a moto server on 127.0.0.1 and a free port, stopped after the tests."""
    werkzeug = logging.getLogger("werkzeug")
    level = werkzeug.level
    werkzeug.setLevel(logging.WARNING)  # one access-log line per request drowns test output
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()
        werkzeug.setLevel(level)


@pytest.fixture
def s3_bucket(s3_endpoint: str) -> Iterator[str]:
    """A new empty bucket, emptied and deleted afterwards so the server's memory stays small."""
    name = f"bundles-{uuid.uuid4().hex[:12]}"
    client = raw_client(s3_endpoint)
    client.create_bucket(Bucket=name)
    yield name
    for upload in client.list_multipart_uploads(Bucket=name).get("Uploads", []):
        client.abort_multipart_upload(Bucket=name, Key=upload["Key"], UploadId=upload["UploadId"])
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=name):
        for item in page.get("Contents", []):
            client.delete_object(Bucket=name, Key=item["Key"])
    client.delete_bucket(Bucket=name)


@contextmanager
def iam_enforced(endpoint_url: str) -> Iterator[None]:
    """Make the server check signatures and IAM policies (moto skips both by default)."""
    requests.post(f"{endpoint_url}/moto-api/reset-auth", data=b"0", timeout=5).raise_for_status()
    try:
        yield
    finally:
        requests.post(f"{endpoint_url}/moto-api/reset-auth", data=b"inf", timeout=5)


def endpoint_env(endpoint_url: str) -> dict[str, str]:
    """`PROOFLOCK_S3_*` variables that point prooflock at the endpoint, as a user would set them."""
    return {
        "PROOFLOCK_S3_ENDPOINT_URL": endpoint_url,
        "PROOFLOCK_S3_ACCESS_KEY_ID": TEST_KEY_ID,
        "PROOFLOCK_S3_SECRET_ACCESS_KEY": TEST_SECRET,
    }
