"""Bytes found by sha256, in a log's `X.renders/` directory or a bundle's `blobs/sha256/`."""

from __future__ import annotations

import hashlib
import io
import re
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path

from PIL import Image, UnidentifiedImageError

SHA256 = re.compile(r"^[0-9a-f]{64}$")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SVG_ROOT = "{http://www.w3.org/2000/svg}svg"
MEDIA_TYPES = {"png": "image/png", "svg": "image/svg+xml", "pdf": "application/pdf"}


@dataclass(frozen=True)
class BlobStore:
    """A directory, perhaps absent, of files named by the sha256 of their bytes."""

    directory: Path

    def path(self, sha256: str) -> Path | None:
        """The file for `sha256`, or None for a malformed digest; never a path outside."""
        return self.directory / sha256 if SHA256.match(sha256) else None

    def read(self, sha256: str) -> bytes | None:
        path = self.path(sha256)
        if path is None:
            return None
        try:
            return path.read_bytes()
        except OSError:
            return None

    def has(self, sha256: str) -> bool:
        path = self.path(sha256)
        return path is not None and path.is_file()


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def render_problem(fmt: str, sha256: str, data: bytes | None) -> str | None:
    """Why these render bytes cannot be shown as a `fmt` image, or None when they can."""
    if not SHA256.match(sha256):
        return f"the recorded digest {sha256[:80]!r} is not a sha256"
    if data is None:
        return "render not kept"
    if sha256_of(data) != sha256:
        return "render bytes do not match the recorded digest"
    if fmt == "png":
        return _png_problem(data)
    if fmt == "svg":
        return _svg_problem(data)
    if fmt == "pdf":
        return None if data.startswith(b"%PDF-") else "not a valid PDF"
    return f"unknown render format {fmt[:40]!r}"


def _png_problem(data: bytes) -> str | None:
    if not data.startswith(PNG_SIGNATURE):
        return "not a valid PNG"
    try:
        with Image.open(io.BytesIO(data)) as image:
            image.verify()  # chunk CRCs; verify() spoils the image, so decode anew
        with Image.open(io.BytesIO(data)) as image:
            image.load()
    except Image.DecompressionBombError:
        return "PNG too large to show"
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        return f"not a valid PNG ({exc})"
    return None


def _svg_problem(data: bytes) -> str | None:
    try:
        root = ElementTree.fromstring(data)
    except ElementTree.ParseError as exc:
        return f"not a valid SVG ({exc})"
    return None if root.tag == SVG_ROOT else "not a valid SVG (its root is not <svg>)"
