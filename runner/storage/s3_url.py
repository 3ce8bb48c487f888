"""`s3://bucket/prefix` URLs, and the keys a bundle uses under its prefix."""

from __future__ import annotations

import re
from dataclasses import dataclass

from runner.core.errors import UserError

INDEX_NAME = "bundle-index.json"
# A bundle's image archive (`images/sha256-<image ID>.tar.gz`) is stored under its own name, not
# under its bytes' sha256. Its name already says what it holds. So the bundle's prefix is an image
# store (`runner.images.archives.fetch_image`).
IMAGE_ARCHIVE = re.compile(r"images/sha256-[0-9a-f]{64}\.tar\.gz")

# S3's rules for new buckets: 3-63 lowercase letters, digits, dots and hyphens, alphanumeric ends.
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")


@dataclass(frozen=True)
class S3Location:
    """Where one bundle lives: a bucket and a key prefix without leading or trailing slashes."""

    bucket: str
    prefix: str

    def key(self, name: str) -> str:
        return f"{self.prefix}/{name}" if self.prefix else name

    @property
    def index_key(self) -> str:
        return self.key(INDEX_NAME)

    def blob_key(self, sha256_hex: str) -> str:
        return self.key(f"blobs/sha256/{sha256_hex}")

    def file_key(self, name: str, sha256_hex: str) -> str:
        """Where the bundle file `name` with these bytes is stored."""
        return self.key(name) if is_image_archive(name) else self.blob_key(sha256_hex)

    def url(self, key: str | None = None) -> str:
        return f"s3://{self.bucket}/{key if key is not None else self.prefix}".rstrip("/")

    def __str__(self) -> str:
        return self.url()


def is_image_archive(name: str) -> bool:
    return IMAGE_ARCHIVE.fullmatch(name) is not None


def parse_s3_url(url: str) -> S3Location:
    """`s3://bucket` or `s3://bucket/some/prefix/` as a location; anything else is a UserError."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme != "s3":
        raise UserError(f"{url!r} is not an S3 URL: write it as s3://bucket/prefix")
    bucket, _, prefix = rest.partition("/")
    if not _BUCKET.fullmatch(bucket):
        raise UserError(
            f"{url!r}: {bucket!r} is not a valid bucket name "
            "(3-63 lowercase letters, digits, dots or hyphens)"
        )
    prefix = prefix.strip("/")
    if any(mark in prefix for mark in "?#\\"):
        raise UserError(f"{url!r}: the prefix may not contain '?', '#' or backslashes")
    if prefix and any(part in ("", ".", "..") for part in prefix.split("/")):
        raise UserError(f"{url!r}: the prefix has an empty, '.' or '..' segment")
    return S3Location(bucket=bucket, prefix=prefix)
