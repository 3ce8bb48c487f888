"""A Debian mirror's indexes: its Release and Packages files, fetched, checked and parsed.

A build's mirror serves three suites for one release. `bookworm` and `bookworm-updates` come from
the main archive, `bookworm-security` from the security archive. Their Packages indexes give each
binary package version's pool path, sha256 and size: what a closure is locked by.

InRelease is checked with gpgv against Debian's archive keyring. An unsigned Release is taken only
from this machine (file:// or loopback repositories, as tests serve). Packages files are kept under
the cache by their sha256, so a mirror that has not moved costs one Release download.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import lzma
import re
import shutil
import subprocess
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO
from urllib.parse import urlparse

from runner.core.errors import UserError

KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
COMPONENT_INDEX = "main/binary-amd64/Packages"
TIMEOUT_S = 30
LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1"}


class MirrorUnreachable(RuntimeError):
    """The mirror did not answer (no route, refused, timed out): not the same as "not there"."""


@dataclass(frozen=True)
class Stanza:
    """One binary package version as an index lists it (the fields a closure needs)."""

    package: str
    version: str
    architecture: str
    filename: str
    sha256: str
    size: int
    priority: str = ""
    source: str = ""  # the source package's name (the binary's own when the index omits it)
    suite: str = ""
    raw: str = ""  # the stanza as the index has it (debootstrap copies it into the base)
    position: int = 0  # its place in the suite's index


@dataclass
class Indexes:
    """Every package version the suites of a mirror list, by package name."""

    by_name: dict[str, list[Stanza]] = field(default_factory=dict)
    read: list[str] = field(default_factory=list)  # the suites read, as `URL suite`

    def add(self, stanza: Stanza) -> None:
        self.by_name.setdefault(stanza.package, []).append(stanza)

    def find(self, package: str, version: str) -> Stanza | None:
        for stanza in self.by_name.get(package, []):
            if stanza.version == version:
                return stanza
        return None

    def newest(self, package: str) -> Stanza | None:
        """The version apt would pick: the highest one any suite lists."""
        found = self.by_name.get(package, [])
        best = None
        for stanza in found:
            if best is None or compare_versions(stanza.version, best.version) > 0:
                best = stanza
        return best


def suites_of(release: str, mirror: str, security_mirror: str) -> list[tuple[str, str]]:
    """(mirror, suite) pairs a build of `release` reads, security last (apt's own order)."""
    pairs = [(mirror, release), (mirror, f"{release}-updates")]
    if security_mirror:
        pairs.append((security_mirror, f"{release}-security"))
    return pairs


def read_indexes(release: str, mirror: str, security_mirror: str, cache_dir: Path) -> Indexes:
    """The Packages indexes of `release` on these mirrors, kept under `cache_dir`.

    A suite the mirror lacks is skipped. MirrorUnreachable when a mirror does not answer at all.
    """
    indexes = Indexes()
    for url, suite in suites_of(release, mirror, security_mirror):
        text = _packages_text(url.rstrip("/"), suite, cache_dir / "apt-indexes")
        if text is None:
            continue
        for stanza in parse_packages(text, suite):
            indexes.add(stanza)
        indexes.read.append(f"{url} {suite}")
    if not indexes.read:
        raise UserError(f"{mirror}: no `{release}` suite there (is it a Debian mirror?)")
    return indexes


def parse_packages(text: str, suite: str = "") -> Iterator[Stanza]:
    for position, block in enumerate(text.split("\n\n")):
        fields = control_fields(block)
        if "Package" not in fields or "Filename" not in fields:
            continue
        yield Stanza(
            package=fields["Package"],
            version=fields["Version"],
            architecture=fields.get("Architecture", ""),
            filename=fields["Filename"],
            sha256=fields.get("SHA256", ""),
            size=int(fields.get("Size", "0")),
            priority=fields.get("Priority", ""),
            source=fields.get("Source", fields["Package"]).split(" ", 1)[0],
            suite=suite,
            raw=block.strip("\n") + "\n",
            position=position,
        )


def control_fields(block: str) -> dict[str, str]:
    """A deb822 stanza's single-line fields (continuation lines are dropped)."""
    fields = {}
    for line in block.splitlines():
        if line and not line[0].isspace() and ":" in line:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    return fields


def fetch(url: str, *, timeout: float = TIMEOUT_S) -> bytes | None:
    """The bytes at `url` (http, https or file); None when the server says it has none."""
    buffer = io.BytesIO()
    return buffer.getvalue() if _copy(url, buffer, timeout) else None


def download(url: str, target: Path, *, timeout: float = TIMEOUT_S) -> bool:
    """Stream `url` into `target`; False when the server has no such file."""
    with target.open("wb") as out:
        return _copy(url, out, timeout)


def _copy(url: str, out: BinaryIO, timeout: float) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            shutil.copyfileobj(response, out, 1 << 20)
        return True
    except urllib.error.HTTPError as exc:
        if exc.code in (403, 404, 410):
            return False
        raise MirrorUnreachable(f"{url}: HTTP {exc.code}") from None
    except FileNotFoundError:
        return False
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise MirrorUnreachable(f"{url}: {reason}") from None


def _packages_text(mirror: str, suite: str, cache: Path) -> str | None:
    release = _release(mirror, suite)
    if release is None:
        return None
    sums = _sha256_section(release)
    for suffix, unpack in ((".xz", lzma.decompress), (".gz", gzip.decompress), ("", bytes)):
        name = COMPONENT_INDEX + suffix
        if name not in sums:
            continue
        sha256, size = sums[name]
        cached = cache / sha256
        if cached.is_file():
            return cached.read_text()
        data = fetch(f"{mirror}/dists/{suite}/{name}")
        if data is None or hashlib.sha256(data).hexdigest() != sha256 or len(data) != size:
            raise UserError(f"{mirror}/dists/{suite}/{name}: missing or not what Release says")
        text = unpack(data).decode()
        cached.parent.mkdir(parents=True, exist_ok=True)
        cached.write_text(text)
        return text
    return None


def _release(mirror: str, suite: str) -> str | None:
    """The suite's Release, from InRelease checked with gpgv against Debian's keyring.

    On this machine only, an unsigned Release file is taken too.
    """
    where = f"{mirror}/dists/{suite}"
    signed = fetch(f"{where}/InRelease")
    if signed is None:
        if not _on_this_machine(mirror):
            return None
        plain = fetch(f"{where}/Release")
        return plain.decode() if plain is not None else None
    if not (KEYRING.is_file() and shutil.which("gpgv")):
        raise UserError(f"{where}/InRelease: install gpgv and debian-archive-keyring to check it")
    with tempfile.TemporaryDirectory(prefix="prooflock-release-") as tmp:
        (Path(tmp) / "InRelease").write_bytes(signed)
        done = subprocess.run(
            ["gpgv", "--keyring", str(KEYRING), "--output", "Release", "InRelease"],
            cwd=tmp,
            capture_output=True,
        )
        if done.returncode != 0:
            raise UserError(f"{where}/InRelease: its signature does not verify with {KEYRING}")
        return (Path(tmp) / "Release").read_text()


def _on_this_machine(url: str) -> bool:
    parsed = urlparse(url)
    return parsed.scheme == "file" or parsed.hostname in LOCAL_HOSTS


def _sha256_section(release: str) -> dict[str, tuple[str, int]]:
    sums: dict[str, tuple[str, int]] = {}
    inside = False
    for line in release.splitlines():
        if not line.startswith(" "):
            inside = line.startswith("SHA256:")
            continue
        parts = line.split()
        if inside and len(parts) == 3:
            sums[parts[2]] = (parts[0], int(parts[1]))
    return sums


# -- Debian version order (dpkg's algorithm) ---------------------------------------------------


def compare_versions(a: str, b: str) -> int:
    """<0, 0, >0 as Debian version `a` sorts before, equal to, or after `b`."""
    epoch_a, upstream_a, revision_a = _split(a)
    epoch_b, upstream_b, revision_b = _split(b)
    if epoch_a != epoch_b:
        return epoch_a - epoch_b
    return _compare_part(upstream_a, upstream_b) or _compare_part(revision_a, revision_b)


def _split(version: str) -> tuple[int, str, str]:
    epoch, _, rest = version.rpartition(":") if ":" in version else ("0", "", version)
    upstream, _, revision = rest.rpartition("-") if "-" in rest else (rest, "", "0")
    return int(epoch or 0), upstream, revision


def _order(char: str) -> int:
    if char == "~":
        return -1
    if char.isalpha():
        return ord(char)
    return ord(char) + 256


def _compare_part(a: str, b: str) -> int:
    """dpkg's verrevcmp: alternate non-digit runs (compared by `_order`) and numbers."""
    while a or b:
        text_a, text_b = _leading(a, digits=False), _leading(b, digits=False)
        a, b = a[len(text_a) :], b[len(text_b) :]
        for index in range(max(len(text_a), len(text_b))):
            x = _order(text_a[index]) if index < len(text_a) else 0
            y = _order(text_b[index]) if index < len(text_b) else 0
            if x != y:
                return x - y
        num_a, num_b = _leading(a, digits=True), _leading(b, digits=True)
        a, b = a[len(num_a) :], b[len(num_b) :]
        if int(num_a or 0) != int(num_b or 0):
            return int(num_a or 0) - int(num_b or 0)
    return 0


def _leading(text: str, *, digits: bool) -> str:
    match = re.match(r"[0-9]*" if digits else r"[^0-9]*", text)
    return match.group() if match else ""
