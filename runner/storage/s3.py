"""Publish a bundle directory to S3 and fetch it back: write-once, and verified by SHA-256.

Layout under `s3://bucket/prefix`:
- each file's bytes at `blobs/sha256/<hex>`;
- an image archive at its own name, `images/sha256-<image ID>.tar.gz`;
- `bundle-index.json`: relative path -> sha256 and size.

The index is written last, so a reader that finds an index finds all its blobs. Every write is
conditional, so nothing is ever overwritten.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Literal

from botocore.exceptions import (
    ClientError,
    ConnectionError,
    HTTPClientError,
    IncompleteReadError,
    NoCredentialsError,
    PartialCredentialsError,
)
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from runner.core.canonical import canonical_bytes
from runner.core.errors import NotTrusted, UserError, explain
from runner.storage.s3_settings import MiB, S3Settings, make_client
from runner.storage.s3_url import INDEX_NAME, S3Location, is_image_archive, parse_s3_url

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_s3.type_defs import CompletedPartTypeDef, PartTypeDef

INDEX_FORMAT = "prooflock-bundle-index/1"
MAX_PARTS = 10_000  # S3's limit per multipart upload
CHUNK = MiB
# A conditional write lost a race: someone else wrote the key between our HEAD and our PUT.
WRITE_RACE = {"PreconditionFailed", "ConditionalRequestConflict"}
BAD_CREDENTIALS = {
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "InvalidToken",
    "ExpiredToken",
    "InvalidClientTokenId",
}

Progress = Callable[[str], None]


class StorageRefused(UserError):
    """The store said no.

    Causes: a missing bucket, rejected credentials, denied access, or a write-once key that holds
    other bytes.
    """


class DamagedBundle(NotTrusted):
    """A stored bundle whose bytes are missing or do not match its index (exit 1: damage)."""


class StorageUnavailable(RuntimeError):
    """The store did not answer (refused connection, timeout, server errors): retry later."""


class IndexEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    size: int = Field(ge=0)


class BundleIndex(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format: Literal["prooflock-bundle-index/1"]
    files: dict[str, IndexEntry]

    @field_validator("files")
    @classmethod
    def _paths_stay_inside(cls, files: dict[str, IndexEntry]) -> dict[str, IndexEntry]:
        # The index comes from the network: a name must not reach outside the download directory.
        for name in files:
            path = PurePosixPath(name)
            if path.is_absolute() or str(path) != name or ".." in path.parts or "\\" in name:
                raise ValueError(f"unsafe path {name!r}")
        parents = {str(parent) for name in files for parent in PurePosixPath(name).parents}
        if clash := sorted(parents & files.keys()):
            raise ValueError(f"{clash[0]!r} is both a file and a directory")
        return files


@dataclass(frozen=True)
class BundleFile:
    path: Path
    name: str  # relative POSIX path inside the bundle, as the index records it
    sha256: str
    size: int


@dataclass(frozen=True)
class UploadReport:
    url: str
    uploaded: int  # objects written: blobs and the index
    skipped: int  # objects already there with the same bytes
    bytes_sent: int
    seconds: float
    parts_sent: int = 0
    parts_reused: int = 0  # parts of an interrupted upload that were kept

    @property
    def mib_per_s(self) -> float:
        return self.bytes_sent / MiB / self.seconds if self.seconds > 0 else 0.0


def upload_bundle(
    bundle_dir: Path,
    url: str,
    *,
    settings: S3Settings,
    progress: Progress | None = None,
) -> UploadReport:
    """Copy `bundle_dir` to `url`; re-running after a failure resumes and skips what is there."""
    location = parse_s3_url(url)
    files = bundle_files(bundle_dir)
    started = time.monotonic()
    with translated_errors(location, settings):
        publisher = _Publisher(make_client(settings), location, settings, progress or _quiet)
        publisher.publish(files)
    return UploadReport(
        url=str(location),
        seconds=time.monotonic() - started,
        **publisher.counts,
    )


def download_bundle(
    url: str,
    dest: Path,
    *,
    settings: S3Settings,
    progress: Progress | None = None,
    archives: bool = True,
) -> Path:
    """Fetch the bundle at `url` into the new directory `dest`: all of it verified, or nothing.

    Without `archives`, its image archives stay in the store. They are fetched when an image is
    missing.
    """
    location = parse_s3_url(url)
    if dest.exists() or dest.is_symlink():
        raise UserError(f"{dest}: already exists; download into a directory that does not exist")
    say = progress or _quiet
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        # Staged next to dest: the final rename is atomic, and a failure leaves nothing under dest.
        staging = Path(
            tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".partial", dir=dest.parent)
        )
    except OSError as exc:
        raise UserError(f"{dest}: cannot create it ({exc.strerror})") from None
    try:
        with translated_errors(location, settings):
            client = make_client(settings)
            index = _read_index(client, location)
            if index is None:
                raise UserError(f"no bundle at {location}: {INDEX_NAME} not found there")
            for name, entry in sorted(index.files.items()):
                if not archives and is_image_archive(name):
                    continue
                _fetch_blob(client, location, name, entry, staging / name)
                say(f"downloaded {name} ({_human(entry.size)})")
        staging.rename(dest)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return dest


def fetch_to_temp(
    url: str,
    *,
    settings: S3Settings,
    progress: Progress | None = None,
    archives: bool = True,
) -> Path:
    """Download into a fresh temporary directory (for `audit s3://…`).

    The caller removes the returned directory's parent when done.
    """
    root = Path(tempfile.mkdtemp(prefix="prooflock-bundle-"))
    try:
        return download_bundle(
            url, root / "bundle", settings=settings, progress=progress, archives=archives
        )
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise


def bundle_files(bundle_dir: Path) -> list[BundleFile]:
    """Every regular file under `bundle_dir`, hashed; symlinks and special files are refused."""
    if not bundle_dir.exists():
        raise UserError(f"{bundle_dir}: no such bundle directory")
    if not bundle_dir.is_dir():
        raise UserError(f"{bundle_dir}: not a directory (a bundle is a directory of files)")
    files = []
    for root, dirs, names in os.walk(bundle_dir, onerror=_unreadable):
        dirs.sort()
        for name in [*dirs, *names]:
            if Path(root, name).is_symlink():
                raise UserError(f"{Path(root, name)}: a symlink; a bundle holds regular files only")
        for name in sorted(names):
            path = Path(root, name)
            if not path.is_file():
                raise UserError(f"{path}: not a regular file; a bundle holds regular files only")
            with path.open("rb") as stream:
                sha256 = hashlib.file_digest(stream, "sha256").hexdigest()
            relative = path.relative_to(bundle_dir).as_posix()
            files.append(BundleFile(path, relative, sha256, path.stat().st_size))
    if not files:
        raise UserError(f"{bundle_dir}: the bundle directory is empty")
    return files


def index_bytes(files: list[BundleFile]) -> bytes:
    entries = {f.name: {"sha256": f.sha256, "size": f.size} for f in files}
    return canonical_bytes({"format": INDEX_FORMAT, "files": entries})


class _Publisher:
    """One upload: blobs first, the index last, each write conditional on the key being free."""

    def __init__(
        self, client: S3Client, location: S3Location, settings: S3Settings, say: Progress
    ) -> None:
        self.client = client
        self.location = location
        self.settings = settings
        self.say = say
        self.counts = dict.fromkeys(
            ("uploaded", "skipped", "bytes_sent", "parts_sent", "parts_reused"), 0
        )

    def publish(self, files: list[BundleFile]) -> None:
        index = index_bytes(files)
        existing = _read_index_bytes(self.client, self.location)
        if existing is not None and existing != index:
            raise StorageRefused(self._index_conflict())
        for file in files:
            self._put_file(file)
        index_sha = hashlib.sha256(index).hexdigest()
        key = self.location.index_key
        if self._already_there(key, index_sha, len(index), self._index_conflict()):
            self._skipped(INDEX_NAME)
        elif self._put_bytes(key, index, index_sha, self._index_conflict()):
            self._uploaded(INDEX_NAME, len(index))

    def _index_conflict(self) -> str:
        return (
            f"{self.location} already holds a different bundle; bundles are write-once, "
            "so publish this one under a new prefix"
        )

    def _put_file(self, file: BundleFile) -> None:
        key = self.location.file_key(file.name, file.sha256)
        conflict = (
            f"{self.location.url(key)} already holds other bytes than {file.name}; "
            "write-once objects are never overwritten"
        )
        label = (
            file.name
            if is_image_archive(file.name)
            else f"{file.name} as blobs/sha256/{file.sha256[:12]}…"
        )
        if self._already_there(key, file.sha256, file.size, conflict):
            self._skipped(label)
        elif file.size > self.settings.multipart_threshold_mb * MiB:
            sent, reused = self._put_multipart(key, file, conflict)
            self.counts["parts_sent"] += sent
            self.counts["parts_reused"] += reused
            note = f", {reused} of {sent + reused} parts reused" if reused else ""
            self._uploaded(label, file.size, note)
        elif self._put_bytes(key, _read_unchanged(file), file.sha256, conflict):
            self._uploaded(label, file.size)
        else:
            self._skipped(label)

    def _already_there(self, key: str, sha256: str, size: int, conflict: str) -> bool:
        """False if the key is free, True if it holds these bytes; other bytes: StorageRefused."""
        try:
            head = self.client.head_object(
                Bucket=self.location.bucket, Key=key, ChecksumMode="ENABLED"
            )
        except ClientError as error:
            if _code(error) in ("404", "NoSuchKey", "NotFound"):
                return False
            raise
        # Our metadata, and S3's own checksum when it covers the whole object (not multipart).
        recorded = {head.get("Metadata", {}).get("sha256")}
        if "-" not in head.get("ETag", "") and "ChecksumSHA256" in head:
            recorded.add(base64.b64decode(head["ChecksumSHA256"]).hex())
        if recorded - {None} == {sha256} and head.get("ContentLength") == size:
            return True
        raise StorageRefused(conflict)

    def _put_bytes(self, key: str, data: bytes, sha256: str, conflict: str) -> bool:
        """Write `data` if the key is free; False if a racing writer put the same bytes first."""
        try:
            self.client.put_object(
                Bucket=self.location.bucket,
                Key=key,
                Body=data,
                IfNoneMatch="*",
                ChecksumAlgorithm="SHA256",
                ChecksumSHA256=base64.b64encode(bytes.fromhex(sha256)).decode(),
                Metadata={"sha256": sha256},
            )
        except ClientError as error:
            if _code(error) not in WRITE_RACE:
                raise
            self._already_there(key, sha256, len(data), conflict)
            return False
        self.counts["bytes_sent"] += len(data)
        return True

    def _put_multipart(self, key: str, file: BundleFile, conflict: str) -> tuple[int, int]:
        """Upload in parts, keeping the verified parts of an interrupted upload of the same key.

        The object appears under `key` only when the upload completes. Returns (sent, reused).
        """
        bucket = self.location.bucket
        part_size = max(self.settings.part_size_mb * MiB, -(-file.size // MAX_PARTS))
        upload_id, earlier = self._resume_or_start(key, file.sha256)
        parts: list[CompletedPartTypeDef] = []
        sent = reused = 0
        whole = hashlib.sha256()
        with file.path.open("rb") as stream:
            for number in range(1, -(-file.size // part_size) + 1):
                data = stream.read(part_size)
                whole.update(data)
                checksum = _b64_sha256(data)
                old = earlier.get(number)
                if old is not None and _same_part(old, data, checksum):
                    etag = old["ETag"]
                    reused += 1
                else:
                    etag = self.client.upload_part(
                        Bucket=bucket,
                        Key=key,
                        UploadId=upload_id,
                        PartNumber=number,
                        Body=data,
                        ChecksumAlgorithm="SHA256",
                        ChecksumSHA256=checksum,
                    )["ETag"]
                    sent += 1
                    self.counts["bytes_sent"] += len(data)
                parts.append({"PartNumber": number, "ETag": etag, "ChecksumSHA256": checksum})
        if whole.hexdigest() != file.sha256:
            self.client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id)
            raise _changed(file)
        try:
            self.client.complete_multipart_upload(
                Bucket=bucket,
                Key=key,
                UploadId=upload_id,
                MultipartUpload={"Parts": parts},
                IfNoneMatch="*",
            )
        except ClientError as error:
            if _code(error) not in WRITE_RACE:
                raise
            self.client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id)
            self._already_there(key, file.sha256, file.size, conflict)
        return sent, reused

    def _resume_or_start(self, key: str, sha256: str) -> tuple[str, dict[int, PartTypeDef]]:
        """The newest unfinished upload of `key` and its parts, or a new upload with none."""
        bucket = self.location.bucket
        pages = self.client.get_paginator("list_multipart_uploads").paginate(
            Bucket=bucket, Prefix=key
        )
        uploads = [u for page in pages for u in page.get("Uploads", []) if u.get("Key") == key]
        if not uploads:
            created = self.client.create_multipart_upload(
                Bucket=bucket, Key=key, ChecksumAlgorithm="SHA256", Metadata={"sha256": sha256}
            )
            return created["UploadId"], {}
        upload_id = max(uploads, key=lambda u: u["Initiated"])["UploadId"]
        pages_of_parts = self.client.get_paginator("list_parts").paginate(
            Bucket=bucket, Key=key, UploadId=upload_id
        )
        parts = {p["PartNumber"]: p for page in pages_of_parts for p in page.get("Parts", [])}
        return upload_id, parts

    def _uploaded(self, label: str, size: int, note: str = "") -> None:
        self.counts["uploaded"] += 1
        self.say(f"uploaded {label} ({_human(size)}{note})")

    def _skipped(self, label: str) -> None:
        self.counts["skipped"] += 1
        self.say(f"already there: {label}")


def _same_part(listed: PartTypeDef, data: bytes, checksum: str) -> bool:
    """Whether a part the store holds has exactly these bytes.

    Compared by SHA-256 when the store reports one. Otherwise by ETag, which S3 (and moto) make the
    MD5 of the part.
    """
    if listed.get("Size") != len(data):
        return False
    if "ChecksumSHA256" in listed:
        return listed["ChecksumSHA256"] == checksum
    md5 = hashlib.md5(data, usedforsecurity=False).hexdigest()
    return listed.get("ETag", "").strip('"') == md5


def _read_unchanged(file: BundleFile) -> bytes:
    data = file.path.read_bytes()
    if hashlib.sha256(data).hexdigest() != file.sha256:
        raise _changed(file)
    return data


def _changed(file: BundleFile) -> UserError:
    return UserError(f"{file.path}: changed while it was being uploaded; upload the bundle again")


def _read_index_bytes(client: S3Client, location: S3Location) -> bytes | None:
    try:
        response = client.get_object(Bucket=location.bucket, Key=location.index_key)
    except ClientError as error:
        if _code(error) == "NoSuchKey":
            return None
        raise
    return response["Body"].read()


def _read_index(client: S3Client, location: S3Location) -> BundleIndex | None:
    data = _read_index_bytes(client, location)
    if data is None:
        return None
    try:
        return BundleIndex.model_validate_json(data)
    except ValidationError as exc:
        where = location.url(location.index_key)
        raise DamagedBundle(f"{where}: not a bundle index: {explain(exc)}") from None


def _fetch_blob(
    client: S3Client, location: S3Location, name: str, entry: IndexEntry, target: Path
) -> None:
    """Stream one blob to `target`, hashing the bytes as they arrive.

    The store's word is not enough: moto, for one, never checks the checksums it is sent.
    """
    key = location.file_key(name, entry.sha256)
    try:
        body = client.get_object(Bucket=location.bucket, Key=key)["Body"]
    except ClientError as error:
        if _code(error) == "NoSuchKey":
            raise DamagedBundle(
                f"{name}: its blob {location.url(key)} is missing from the bundle"
            ) from None
        raise
    target.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    with target.open("wb") as out:
        for chunk in body.iter_chunks(CHUNK):
            digest.update(chunk)
            out.write(chunk)
    if digest.hexdigest() != entry.sha256 or target.stat().st_size != entry.size:
        raise DamagedBundle(
            f"{name}: the bytes at {location.url(key)} do not match the sha256 its index records "
            "(the object was changed or damaged); nothing was downloaded"
        )


@contextmanager
def translated_errors(location: S3Location, settings: S3Settings) -> Iterator[None]:
    """botocore's failures as one sentence of the right class, with no credential in it."""
    endpoint = settings.endpoint_url or "AWS S3"
    try:
        yield
    except ClientError as error:
        raise _refusal(error, location, endpoint, settings) from None
    except (NoCredentialsError, PartialCredentialsError):
        raise StorageRefused(
            "no S3 credentials found: set PROOFLOCK_S3_ACCESS_KEY_ID and "
            "PROOFLOCK_S3_SECRET_ACCESS_KEY, or configure an AWS profile"
        ) from None
    except (ConnectionError, HTTPClientError, IncompleteReadError) as error:
        reason = _scrub(str(error), settings)
        raise StorageUnavailable(
            f"the S3 endpoint {endpoint} did not answer ({reason}); check it is up, then retry"
        ) from None


def _refusal(
    error: ClientError, location: S3Location, endpoint: str, settings: S3Settings
) -> Exception:
    code = _code(error)
    status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
    if code == "NoSuchBucket":
        return StorageRefused(f"bucket {location.bucket!r} does not exist at {endpoint}")
    if code in BAD_CREDENTIALS:
        return StorageRefused(
            f"{endpoint} rejected the S3 credentials ({code}): check PROOFLOCK_S3_ACCESS_KEY_ID "
            "and PROOFLOCK_S3_SECRET_ACCESS_KEY, or the AWS profile in use"
        )
    if code in ("AccessDenied", "AllAccessDisabled") or status == 403:
        return StorageRefused(
            f"access denied to {location} ({error.operation_name}): "
            "the credentials lack permission there"
        )
    message = _scrub(error.response.get("Error", {}).get("Message", ""), settings)
    if status >= 500:
        return StorageUnavailable(
            f"{endpoint} failed {error.operation_name} on {location} ({code}: {message}); "
            "retry later"
        )
    return StorageRefused(f"{endpoint} refused {error.operation_name} on {location}: {message}")


def _scrub(text: str, settings: S3Settings) -> str:
    for secret in settings.secret_values():
        # Masking a toy "secret" of a few letters would garble the sentence and protect nothing.
        if len(secret) >= 8:
            text = text.replace(secret, "***")
    return " ".join(text.split())


def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def _b64_sha256(data: bytes) -> str:
    return base64.b64encode(hashlib.sha256(data).digest()).decode()


def _human(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    if size < MiB:
        return f"{size / 1024:.1f} KiB"
    return f"{size / MiB:.1f} MiB"


def _unreadable(error: OSError) -> None:
    raise UserError(f"{error.filename}: {error.strerror}")


def _quiet(line: str) -> None:
    pass
