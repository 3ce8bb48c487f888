"""Published bundles in S3-compatible storage: upload, download, fetch for audit or replay."""

from runner.storage.s3 import (
    DamagedBundle,
    StorageRefused,
    StorageUnavailable,
    UploadReport,
    download_bundle,
    fetch_to_temp,
    upload_bundle,
)
from runner.storage.s3_settings import S3Settings
from runner.storage.s3_url import S3Location, parse_s3_url

__all__ = [
    "DamagedBundle",
    "S3Location",
    "S3Settings",
    "StorageRefused",
    "StorageUnavailable",
    "UploadReport",
    "download_bundle",
    "fetch_to_temp",
    "parse_s3_url",
    "upload_bundle",
]
