"""Published bundles in S3-compatible storage: upload, download, fetch for audit or replay.

The names below load on first use (PEP 562). Importing boto3 takes about a second, and most commands
never touch S3. So importing `runner.storage.s3_url` alone must not pull it in.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

_HOMES = {
    "DamagedBundle": "s3",
    "StorageRefused": "s3",
    "StorageUnavailable": "s3",
    "UploadReport": "s3",
    "download_bundle": "s3",
    "fetch_to_temp": "s3",
    "upload_bundle": "s3",
    "S3Settings": "s3_settings",
    "S3Location": "s3_url",
    "parse_s3_url": "s3_url",
}

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


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
