"""A published bundle's file names, in one place (publish writes them; everything else reads)."""

from __future__ import annotations

from pathlib import Path

BUNDLE_LOG = "log.jsonl"
STATEMENT = "statement.intoto.json"
SIGNATURE = "statement.intoto.dsse.json"
BUNDLE_LOCK = "images.lock.json"
BLOBS = Path("blobs") / "sha256"
