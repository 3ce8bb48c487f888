"""Canonical JSON and digests: the one place that decides what bytes get hashed."""

from __future__ import annotations

import hashlib
from typing import Any

import orjson


class NotCanonical(ValueError):
    """A value that cannot be hashed reproducibly, such as a float or a non-string key."""


def _reject_floats(value: Any, path: str) -> None:
    # Floats print differently across libraries and platforms, so hashed values hold none.
    if isinstance(value, float):
        raise NotCanonical(f"float at {path or '<root>'}: store a string or an integer instead")
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise NotCanonical(f"non-string key {key!r} at {path or '<root>'}")
            _reject_floats(item, f"{path}.{key}")
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _reject_floats(item, f"{path}[{index}]")


def canonical_bytes(value: Any) -> bytes:
    """Sorted-key, whitespace-free UTF-8 JSON of plain data (no floats)."""
    _reject_floats(value, "")
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def digest(value: Any) -> str:
    """sha256 (hex) of the canonical JSON of `value`."""
    return hashlib.sha256(canonical_bytes(value)).hexdigest()
