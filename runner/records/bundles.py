"""Where a published result comes from: a checkpoint log, a bundle directory, or an s3:// bundle."""

from __future__ import annotations

import contextlib
import shutil
import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from runner.core.errors import UserError
from runner.records.layout import BUNDLE_LOG


@dataclass(frozen=True)
class Source:
    log: Path
    bundle: Path | None  # the bundle directory, when the source is one

    @property
    def origin(self) -> str:
        return str(self.bundle or self.log)


@contextlib.contextmanager
def open_source(spec: str) -> Iterator[Source]:
    """The log (and bundle) named by `spec`; an s3:// bundle is downloaded for the duration."""
    if spec.startswith("s3://"):
        from runner.storage import fetch_to_temp  # noqa: PLC0415 - boto3 only when needed

        bundle = fetch_to_temp(spec)
        try:
            yield Source(bundle / BUNDLE_LOG, bundle)
        finally:
            shutil.rmtree(bundle.parent, ignore_errors=True)
        return
    path = Path(spec)
    if path.is_file() and path.suffix == ".tar":
        with tempfile.TemporaryDirectory(prefix="prooflock-bundle-") as tmp:
            bundle = unpack_tar(path, Path(tmp) / "bundle")
            if not (bundle / BUNDLE_LOG).is_file():
                raise UserError(f"{spec}: a tar without {BUNDLE_LOG} is not a prooflock bundle")
            yield Source(bundle / BUNDLE_LOG, bundle)
        return
    if path.is_dir():
        if not (path / BUNDLE_LOG).is_file():
            raise UserError(f"{spec}: a directory without {BUNDLE_LOG} is not a prooflock bundle")
        yield Source(path / BUNDLE_LOG, path)
    elif path.exists():
        yield Source(path, None)
    else:
        raise UserError(f"{spec}: no such log or bundle")


def unpack_tar(tar_path: Path, into: Path) -> Path:
    """A bundle tar as a directory (for audit and replay), refusing unsafe member names."""
    with tarfile.open(tar_path) as tar:
        for member in tar.getmembers():
            if (
                not member.isfile()
                or member.name.startswith("/")
                or ".." in Path(member.name).parts
            ):
                raise UserError(f"{tar_path}: {member.name!r} is not a bundle file")
        tar.extractall(into, filter="data")
    return into
