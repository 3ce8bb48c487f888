"""Files kept by name under an `s3://bucket/prefix`: written once, read back whole.

This serves content-addressed stores (the `.deb` store, image archives). Their names already say
what the bytes are. An object that exists is not written again, so re-running an interrupted copy
resumes it. Errors come from `runner.storage.s3` (StorageUnavailable: retry; StorageRefused).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from boto3.s3.transfer import TransferConfig
from botocore.exceptions import ClientError

from runner.storage.s3 import CHUNK, translated_errors
from runner.storage.s3_settings import MiB, S3Settings, make_client
from runner.storage.s3_url import S3Location, parse_s3_url

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


class S3Files:
    """The objects below one `s3://bucket/prefix`, by their name under it."""

    def __init__(self, url: str, settings: S3Settings):
        self.location: S3Location = parse_s3_url(url)
        self.settings = settings
        self._client: S3Client | None = None

    @property
    def client(self) -> S3Client:
        """The boto3 client, made on first use (a bad URL is refused before any setting)."""
        if self._client is None:
            self._client = make_client(self.settings)
        return self._client

    def url(self, name: str) -> str:
        return self.location.url(self.location.key(name))

    def has(self, name: str) -> bool:
        with translated_errors(self.location, self.settings):
            try:
                self.client.head_object(Bucket=self.location.bucket, Key=self.location.key(name))
            except ClientError as error:
                if _missing(error):
                    return False
                raise
        return True

    def put(self, name: str, path: Path, sha256: str) -> bool:
        """Upload `path` as `name` unless it is there already; True when it was uploaded."""
        if self.has(name):
            return False
        config = TransferConfig(
            multipart_threshold=self.settings.multipart_threshold_mb * MiB,
            multipart_chunksize=self.settings.part_size_mb * MiB,
        )
        with translated_errors(self.location, self.settings):
            self.client.upload_file(
                str(path),
                self.location.bucket,
                self.location.key(name),
                ExtraArgs={"Metadata": {"sha256": sha256}},
                Config=config,
            )
        return True

    def get(self, name: str, target: Path) -> str | None:
        """Download `name` into `target` (atomically) and return its sha256; None when absent."""
        with translated_errors(self.location, self.settings):
            try:
                body = self.client.get_object(
                    Bucket=self.location.bucket, Key=self.location.key(name)
                )["Body"]
            except ClientError as error:
                if _missing(error):
                    return None
                raise
            digest = hashlib.sha256()
            fd, partial = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
            try:
                with os.fdopen(fd, "wb") as out:
                    for chunk in body.iter_chunks(CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
                os.replace(partial, target)
            except BaseException:
                Path(partial).unlink(missing_ok=True)
                raise
        return digest.hexdigest()


def _missing(error: ClientError) -> bool:
    return str(error.response.get("Error", {}).get("Code", "")) in ("404", "NoSuchKey", "NotFound")
