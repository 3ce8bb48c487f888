"""A published bundle's file names, in one place; publish writes them, the rest read them."""

from __future__ import annotations

from pathlib import Path

BUNDLE_LOG = "log.jsonl"
STATEMENT = "statement.intoto.json"
SIGNATURE = "statement.intoto.dsse.json"
BUNDLE_LOCK = "images.lock.json"
BLOBS = Path("blobs") / "sha256"
ATTESTATIONS = "attestations"  # reproduction reports attached to the bundle, one file each


def image_archive(image_id: str) -> str:
    """Where an image's `docker save` archive lives, relative to the bundle or its S3 prefix."""
    return f"images/sha256-{image_id.removeprefix('sha256:')}.tar.gz"
