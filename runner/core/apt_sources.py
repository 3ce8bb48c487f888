"""This machine's own Debian mirror, read from its apt sources.

Image builds and CRIU's bundle both fetch packages from it when no mirror is configured.
"""

from __future__ import annotations

import re
from pathlib import Path

from runner.core.errors import UserError

HOST = "host"  # a mirror value: the mirror this machine's own apt sources use
APT_SOURCES = Path("/etc/apt")


def host_mirror(suite: str, sources: Path = APT_SOURCES) -> str:
    """The URI this machine's apt sources use for `suite`, from `.sources` or `.list` files.

    A Debian mirror carries every suite, including ones the sources do not list.
    A bookworm host building a forky image is one such case.
    So an unlisted suite uses a listed Debian archive of the same kind: main, or security.
    """
    entries = _entries(sources)
    for uri, suites in entries:
        if suite in suites:
            return uri.rstrip("/")
    archive = "/debian-security" if suite.endswith("-security") else "/debian"
    for uri, _ in entries:
        if uri.rstrip("/").endswith(archive):
            return uri.rstrip("/")
    raise UserError(
        f"this machine's apt sources have no `{suite}` entry, nor a Debian mirror, to use as "
        "mirror (pass a URL)"
    )


def _entries(sources: Path) -> list[tuple[str, list[str]]]:
    """Every `deb` entry of the apt sources as (URI, suites), in apt's reading order."""
    found: list[tuple[str, list[str]]] = []
    candidates = [sources / "sources.list", *sorted((sources / "sources.list.d").glob("*.list"))]
    for path in [*sorted((sources / "sources.list.d").glob("*.sources")), *candidates]:
        if path.is_file():
            text = path.read_text(errors="replace")
            found += _deb822(text) if path.suffix == ".sources" else _one_line(text)
    return found


def _deb822(text: str) -> list[tuple[str, list[str]]]:
    found = []
    for stanza in re.split(r"\n\s*\n", text):
        fields = {}
        for line in stanza.splitlines():
            if line.startswith("#") or ":" not in line:
                continue
            key, _, value = line.partition(":")
            fields[key.strip().lower()] = value.split()
        if "deb" in fields.get("types", []) and fields.get("uris"):
            found += [(uri, fields.get("suites", [])) for uri in fields["uris"]]
    return found


def _one_line(text: str) -> list[tuple[str, list[str]]]:
    found = []
    for line in text.splitlines():
        words = re.sub(r"\[[^\]]*\]", "", line).split()
        if len(words) >= 3 and words[0] == "deb":
            found.append((words[1], [words[2]]))
    return found
