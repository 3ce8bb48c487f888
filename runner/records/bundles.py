"""Where a published result comes from: a checkpoint log, a bundle directory, or an s3:// bundle.

A bundle may carry image archives (`publish --with-images`).
Then an image it used that is missing here loads from the bundle's own store.
That store is its directory, or its s3:// location.
"""

from __future__ import annotations

import contextlib
import shutil
import tarfile
import tempfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from runner.core.errors import BackendUnavailable, InfraFailure, UserError
from runner.core.models import CheckResult
from runner.records.layout import BUNDLE_LOG, image_archive
from runner.records.statement import images_used

if TYPE_CHECKING:
    from runner.storage.s3_settings import S3Settings


@dataclass(frozen=True)
class Source:
    log: Path
    bundle: Path | None  # the bundle directory, when the source is one
    remote: str | None = None  # the s3:// bundle the directory was downloaded from
    given: str | None = None  # what the user named, when `bundle` is a temporary copy
    s3: S3Settings | None = None  # how to reach the s3:// bundle, when it is one

    @property
    def origin(self) -> str:
        return self.given or str(self.bundle or self.log)

    @property
    def stores(self) -> list[str]:
        """Where to get the bundle's image archives (`runner.images.archives` stores)."""
        return [str(place) for place in (self.bundle, self.remote) if place is not None]


@contextlib.contextmanager
def open_source(
    spec: str, *, archives: bool = False, s3: S3Settings | None = None
) -> Iterator[Source]:
    """The log, and the bundle if any, named by `spec`.

    An s3:// bundle is downloaded (with `s3`) for the duration of the block.
    Its image archives come too only with `archives`; otherwise they are fetched when needed.
    """
    if spec.startswith("s3://"):
        from runner.storage import fetch_to_temp  # noqa: PLC0415 - boto3 only when needed

        if s3 is None:
            raise UserError(f"{spec}: no S3 settings were given")
        bundle = fetch_to_temp(spec, settings=s3, archives=archives)
        try:
            with _named_as(bundle, spec):
                yield Source(bundle / BUNDLE_LOG, bundle, spec, spec, s3)
        finally:
            shutil.rmtree(bundle.parent, ignore_errors=True)
        return
    path = Path(spec)
    if path.is_file() and path.suffix == ".tar":
        with tempfile.TemporaryDirectory(prefix="prooflock-bundle-") as tmp:
            bundle = unpack_tar(path, Path(tmp) / "bundle")
            if not (bundle / BUNDLE_LOG).is_file():
                raise UserError(f"{spec}: a tar without {BUNDLE_LOG} is not a prooflock bundle")
            with _named_as(bundle, spec):
                yield Source(bundle / BUNDLE_LOG, bundle, given=spec)
        return
    if path.is_dir():
        if not (path / BUNDLE_LOG).is_file():
            raise UserError(f"{spec}: a directory without {BUNDLE_LOG} is not a prooflock bundle")
        yield Source(path / BUNDLE_LOG, path)
    elif path.exists():
        yield Source(path, None)
    else:
        raise UserError(f"{spec}: no such log or bundle")


@contextlib.contextmanager
def _named_as(copy: Path, given: str) -> Iterator[None]:
    """Make a user error name what the user gave, not the temporary copy they never saw."""
    try:
        yield
    except UserError as exc:
        if str(copy) not in str(exc):
            raise
        raise type(exc)(str(exc).replace(str(copy), given)) from None


def unpack_tar(tar_path: Path, into: Path) -> Path:
    """Unpack a bundle tar for audit and replay, refusing unsafe member names."""
    try:
        with tarfile.open(tar_path) as tar:
            for member in tar.getmembers():
                if (
                    not member.isfile()
                    or member.name.startswith("/")
                    or ".." in Path(member.name).parts
                ):
                    raise UserError(f"{tar_path}: {member.name!r} is not a bundle file")
            tar.extractall(into, filter="data")
    except (tarfile.TarError, EOFError, zlib.error) as exc:  # not a tar, cut short, or damaged
        reason = str(exc).splitlines()[0].rstrip(":") if str(exc) else type(exc).__name__
        if "could not be opened" in reason:  # tarfile lists every compression it tried
            reason = "neither a tar nor a compressed tar"
        raise UserError(
            f"{tar_path} is not a whole tar file ({reason}); a bundle tar is what `publish` makes"
        ) from None
    return into


def load_missing_images(
    results: list[CheckResult],
    stores: list[str],
    say: Callable[[str], None],
    s3: S3Settings | None = None,
) -> list[str]:
    """Load the images the docker records used that this machine lacks; return the IDs loaded.

    Each comes from the first of `stores` that holds its archive, with one line said each;
    `s3` reaches the stores in S3.
    An archive that does not check out is refused by name: damaged, cut, or another image.
    The image then stays missing, and the caller goes its usual way: a rebuild, or drift.
    """
    used = images_used(results)
    if not used or not stores:
        return []
    from runner.backends.policy import connect  # noqa: PLC0415
    from runner.images.archives import fetch_image  # noqa: PLC0415 - docker only when needed
    from runner.images.state import image_id_of  # noqa: PLC0415
    from runner.storage import StorageUnavailable  # noqa: PLC0415

    try:
        client = connect(timeout=30)
    except (BackendUnavailable, InfraFailure):
        return []  # no daemon to load into; the caller says why it cannot run
    loaded: list[str] = []
    for tag, image_id in sorted(used.items()):
        if image_id in loaded or image_id_of(client, image_id) is not None:
            continue
        try:
            found = fetch_image(image_id, stores, client, s3)
        except UserError as exc:  # DamagedArchive, or docker refusing the bytes
            say(f"{tag}: refused the bundle's archive {image_archive(image_id)}: {exc}")
            continue
        except StorageUnavailable as exc:
            say(f"{tag}: could not fetch the bundle's archive {image_archive(image_id)}: {exc}")
            continue
        if found:
            say(f"{tag}: loaded {image_id} from the bundle's archive")
            loaded.append(image_id)
    return loaded
