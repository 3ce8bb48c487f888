"""Build inputs: where the host fetches what a build installs, and what a networked build uses.

The host fetches from mirrors and a remote store, or takes copies given by hand (`--input
NAME=PATH`). Some builds still reach a network: an image with no locked closure yet, pins
overridden, a drifted fallback. Those also take a pip index and an extra CA bundle.

Inputs are transport, not content. Every package is pinned by version or hash, so they never change
what is installed. Normalization keeps them out of the image. They are recorded as this machine's
provenance (runner.images.machine), never in the lock.

A machine whose apt and pip work needs none of them. The host fetches every input of a locked image
with its own trust store and proxy settings, and the build runs without a network.

Set them with CLI flags or `PROOFLOCK_APT_MIRROR`, `PROOFLOCK_APT_SECURITY_MIRROR`,
`PROOFLOCK_PIP_INDEX`, `PROOFLOCK_CA_BUNDLE`, and `PROOFLOCK_STORE`. `PROOFLOCK_STORE` is an
`s3://bucket/prefix` holding inputs by sha256, the last place an input is looked for.
`PROOFLOCK_DEB_STORE` is its first name, still read.
"""

from __future__ import annotations

import hashlib
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from runner.core.apt_sources import HOST, host_mirror
from runner.core.errors import UserError
from runner.core.models import JsonValue
from runner.core.settings import Settings

if TYPE_CHECKING:
    from runner.storage.s3_settings import S3Settings

PROBE_TIMEOUT_S = 8


def sha256_file(path: Path) -> str:
    with path.open("rb") as data:
        return hashlib.file_digest(data, "sha256").hexdigest()


@dataclass(frozen=True)
class BuildInputs:
    apt_mirror: str
    apt_security_mirror: str
    cache_dir: Path  # the local store, the apt index cache, build logs, this machine's state
    pip_index: str = ""  # empty: pip's default index
    ca_bundle: Path | None = None
    files: dict[str, Path] = field(default_factory=dict)  # vendored downloads by file name
    requested: dict[str, str] = field(default_factory=dict)  # as the user asked (`host`, ...)
    store: str = ""  # s3://bucket/prefix of a remote input store, or empty
    s3: S3Settings | None = None  # how to reach S3: the remote store, a vendor target
    note: str = ""  # a choice the kit made for the user (another mirror), to say once

    def build_args(self) -> dict[str, str]:
        return {
            "APT_MIRROR": self.apt_mirror,
            "APT_SECURITY_MIRROR": self.apt_security_mirror,
            "PIP_INDEX_URL": self.pip_index,
        }

    def context_files(self) -> dict[str, bytes]:
        """Files for the build context's `build/` directory."""
        files = {"ca.crt": self.ca_bundle.read_bytes() if self.ca_bundle else b""}
        for name, path in self.files.items():
            files[f"files/{name}"] = path.read_bytes()
        return files

    def provenance(self) -> dict[str, JsonValue]:
        """What this machine's state records of how it built (runner.images.machine)."""
        return {
            "apt_mirror": self.apt_mirror,
            "apt_security_mirror": self.apt_security_mirror,
            "requested": dict(self.requested),
            "pip_index": self.pip_index or "default",
            "ca_bundle_sha256": sha256_file(self.ca_bundle) if self.ca_bundle else None,
            "files": {name: sha256_file(path) for name, path in sorted(self.files.items())},
        }


def resolve_inputs(
    transport_defaults: dict[str, str],
    settings: Settings,
    *,
    suite: str,
    apt_mirror: str | None = None,
    apt_security_mirror: str | None = None,
    pip_index: str | None = None,
    ca_bundle: Path | None = None,
    files: list[str] | None = None,
    s3: S3Settings | None = None,
) -> BuildInputs:
    """Flags win over `settings` (`PROOFLOCK_*`), which win over the lock's defaults."""
    main = apt_mirror or settings.apt_mirror or transport_defaults["APT_MIRROR"]
    security = apt_security_mirror or settings.apt_security_mirror
    requested = {}
    note = ""
    if main == transport_defaults["APT_MIRROR"] and not security and not _answers(main, suite):
        note = (
            f"{main} does not answer: using this machine's apt mirror instead (the lock's "
            "closure still fixes every package version)"
        )
        main = HOST
    if main == HOST:
        requested["apt_mirror"] = HOST
        main = host_mirror(suite)
        security = security or HOST
    security = security or transport_defaults["APT_SECURITY_MIRROR"]
    if security == HOST:
        requested["apt_security_mirror"] = HOST
        security = host_mirror(f"{suite}-security")
    bundle = ca_bundle or settings.ca_bundle
    if bundle is not None and not bundle.is_file():
        raise UserError(f"--ca-bundle {bundle}: no such file")
    return BuildInputs(
        apt_mirror=main,
        apt_security_mirror=security,
        cache_dir=settings.cache_dir,
        pip_index=pip_index or settings.pip_index or transport_defaults.get("PIP_INDEX_URL", ""),
        ca_bundle=bundle,
        files=_vendored(files or []),
        requested=requested,
        store=settings.store or settings.deb_store or "",
        s3=s3,
        note=note,
    )


def _answers(mirror: str, suite: str) -> bool:
    """Whether the mirror serves the suite's Release within seconds.

    The lock's snapshot may be unreachable from here: no route, no DNS, a firewall.
    """
    try:
        request = urllib.request.Request(f"{mirror}/dists/{suite}/Release", method="HEAD")
        with urllib.request.urlopen(request, timeout=PROBE_TIMEOUT_S):
            return True
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _vendored(specs: list[str]) -> dict[str, Path]:
    found = {}
    for spec in specs:
        name, sep, value = spec.partition("=")
        if not sep or not name or "/" in name:
            raise UserError(
                f"--input {spec!r}: expected NAME=PATH, e.g. olympiad.asy=./olympiad.asy"
            )
        path = Path(value)
        if not path.is_file():
            raise UserError(f"--input {spec!r}: {value} is not a file")
        found[name] = path
    return found
