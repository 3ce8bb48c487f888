"""This machine's own Debian mirror, read from its apt sources.

Image builds and CRIU's bundle both fetch packages from it when no mirror is configured.
"""

from __future__ import annotations

import re
from pathlib import Path

from runner.core.errors import UserError

HOST = "host"  # a mirror value meaning: the mirror this machine's own apt sources use
APT_SOURCES = Path("/etc/apt")


def host_mirror(suite: str, sources: Path = APT_SOURCES) -> str:
    """The URI this machine's apt sources use for `suite` (deb822 `.sources` or `.list` lines)."""
    candidates = [sources / "sources.list", *sorted((sources / "sources.list.d").glob("*.list"))]
    for path in [*sorted((sources / "sources.list.d").glob("*.sources")), *candidates]:
        if not path.is_file():
            continue
        text = path.read_text(errors="replace")
        found = (
            _deb822_uri(text, suite) if path.suffix == ".sources" else _one_line_uri(text, suite)
        )
        if found:
            return found.rstrip("/")
    raise UserError(
        f"this machine's apt sources have no `{suite}` entry to use as mirror (pass a URL)"
    )


def _deb822_uri(text: str, suite: str) -> str | None:
    for stanza in re.split(r"\n\s*\n", text):
        fields = {}
        for line in stanza.splitlines():
            if line.startswith("#") or ":" not in line:
                continue
            key, _, value = line.partition(":")
            fields[key.strip().lower()] = value.split()
        if (
            "deb" in fields.get("types", [])
            and suite in fields.get("suites", [])
            and fields.get("uris")
        ):
            return fields["uris"][0]
    return None


def _one_line_uri(text: str, suite: str) -> str | None:
    for line in text.splitlines():
        words = re.sub(r"\[[^\]]*\]", "", line).split()
        if len(words) >= 3 and words[0] == "deb" and words[2] == suite:
            return words[1]
    return None
