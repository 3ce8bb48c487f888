"""`prooflock publish`: a finished run as a self-contained, content-addressed bundle.

    BUNDLE/
      log.jsonl               the checkpoint log, byte for byte
      blobs/sha256/<hex>      every artifact's bytes, reference files, kept renders
      images.lock.json        the lock entries (pins and build results) of every image used
      [images/sha256-<hex>.tar.gz]  with --with-images: each image used, as a content-addressed
                              archive (runner.images.archives); the bundle is then an image store
      statement.intoto.json   an in-toto Statement v1 with an SLSA Provenance v1 predicate
      [statement.intoto.dsse.json]  with --sign: a DSSE envelope of exactly those bytes
      [attestations/*.json]   reproduction reports attached later (`prooflock attach`)

`runner.records.statement` says what the statement claims, and why each claim recomputes.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from runner.core import home
from runner.core.errors import UserError
from runner.core.models import CheckResult
from runner.images.lock import ImagesLock, load_lock
from runner.records.checkpoint import inspect_chain, recorded_runs
from runner.records.layout import (
    BLOBS,
    BUNDLE_LOCK,
    BUNDLE_LOG,
    SIGNATURE,
    STATEMENT,
    image_archive,
)
from runner.records.signing import sign
from runner.records.statement import ArchiveFile, Evidence, build_statement, images_used, sha256

if TYPE_CHECKING:
    from securesystemslib.signer import CryptoSigner


@dataclass
class Bundle:
    """What `publish` wrote."""

    path: Path
    records: int
    head: str
    subjects: int
    blobs: int
    images: list[str] = field(default_factory=list)
    signed_by: str | None = None  # the key id of the envelope's signature
    archives: dict[str, ArchiveFile] = field(default_factory=dict)  # bundle path → its file


def renders_dir(log: Path) -> Path:
    """Where `prooflock run` keeps renders for the log `X.jsonl`: `X.renders/`, beside it."""
    return log.with_name(log.stem + ".renders")


def _output_digests(result: CheckResult) -> set[str]:
    """The digests of the files a record names.

    These are its typed outputs, and the digest maps in its details.
    Older records name files only in those maps: `outputs`, and a comparison's
    `reference_outputs` and `rasters`.
    Only sha256 digests count, because they become file names.
    """
    found = {output.sha256 for output in result.outputs}
    for key in ("outputs", "reference_outputs", "rasters"):
        for holder in (result.details, result.details.get("comparison") or {}):
            value = holder.get(key) if isinstance(holder, dict) else None
            if isinstance(value, dict):
                found.update(v for v in value.values() if isinstance(v, str))
    return {d for d in found if len(d) == 64 and all(c in "0123456789abcdef" for c in d)}


def _lock_bytes(lock: ImagesLock, tags: set[str]) -> bytes:
    """The lock entries of the images the run used, as a file: pins and build results."""
    data = lock.model_dump(mode="json")
    data["images"] = {
        name: data["images"][name]
        for name in sorted(data["images"])
        if lock.images[name].tag in tags
    }
    return orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"


def publish(
    log: Path, out: Path, *, signer: CryptoSigner | None = None, with_images: bool = False
) -> Bundle:
    """Write the bundle for `log` into `out`: a new directory, or `out.tar` as one tar file.

    With a `signer`, the bundle holds a DSSE envelope of its statement.
    With `with_images`, it holds the archive of every image the records used.
    Each of those images must be on this machine.
    """
    if out.exists():
        raise UserError(f"{out} already exists: publish writes a new bundle")
    chain = inspect_chain(log)
    if not chain.ok:
        raise UserError(f"cannot publish a tampered log: {chain.describe()}")
    if chain.torn_tail:
        raise UserError(f"{log} ends in a torn record: resume or finish the run first")
    runs = list(recorded_runs(chain.records))
    if not runs:
        raise UserError(f"{log} holds no results to publish")
    if not chain.complete:
        raise UserError(f"cannot publish an unfinished run: {chain.describe()}")
    log_bytes = log.read_bytes()
    results = [result for _, result in runs]
    used = images_used(results)
    lock = load_lock(home.lock_path()) if used else None
    blobs: dict[str, bytes] = {}
    for request, result in runs:
        blobs[sha256(request.content.encode())] = request.content.encode()
        for value in request.options.values():
            if isinstance(value, dict) and isinstance(value.get("content"), str):
                blobs[sha256(value["content"].encode())] = value["content"].encode()
        for digest_hex in _output_digests(result):
            kept = renders_dir(log) / digest_hex
            if kept.is_file() and sha256(kept.read_bytes()) == digest_hex:
                blobs[digest_hex] = kept.read_bytes()
    files: dict[str, bytes] = {BUNDLE_LOG: log_bytes}
    bundle_lock = None
    if lock is not None:
        files[BUNDLE_LOCK] = _lock_bytes(lock, set(used))
        bundle_lock = ImagesLock.model_validate_json(files[BUNDLE_LOCK])
    for digest_hex, data in blobs.items():
        files[str(BLOBS / digest_hex)] = data
    out.parent.mkdir(parents=True, exist_ok=True)
    # Staged beside `out`, then renamed or packed, so there is never half a bundle.
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        saved = _save_archives(used, staging) if with_images else {}
        evidence = Evidence(
            chain=chain,
            log_sha256=sha256(log_bytes),
            runs=runs,
            lock=bundle_lock,
            lock_sha256=sha256(files[BUNDLE_LOCK]) if BUNDLE_LOCK in files else None,
            archives=saved,
        )
        made = build_statement(evidence)
        files[STATEMENT] = made.to_bytes()
        if signer is not None:
            files[SIGNATURE] = sign(files[STATEMENT], signer)
        _write_files(staging, files)
        if out.suffix == ".tar":
            _write_tar(out, staging)
            shutil.rmtree(staging)
        else:
            os.rename(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return Bundle(
        out,
        len(chain.records),
        chain.head,
        len(made.subject),
        len(blobs),
        sorted(used),
        signer.public_key.keyid if signer is not None else None,
        {image_archive(image_id): found for image_id, found in sorted(saved.items())},
    )


def _save_archives(used: dict[str, str], bundle: Path) -> dict[str, ArchiveFile]:
    """Save each image used (tag → ID) once, as `bundle/images/sha256-<hex>.tar.gz`.

    Returns image ID → the archive's digest.
    """
    if not used:
        return {}
    from runner.backends.policy import connect  # noqa: PLC0415
    from runner.images.archives import save_archive  # noqa: PLC0415 - docker only when asked
    from runner.images.state import image_id_of  # noqa: PLC0415

    client = connect()
    saved: dict[str, ArchiveFile] = {}
    for tag, image_id in sorted(used.items()):
        if image_id in saved:
            continue
        if image_id_of(client, image_id) is None:
            raise UserError(
                f"--with-images: {tag} {image_id} is not on this machine, so its archive cannot "
                "be bundled (load or rebuild it, or publish without --with-images)"
            )
        path = save_archive(client, image_id, (bundle / image_archive(image_id)).parent)
        with path.open("rb") as data:
            digest = hashlib.file_digest(data, "sha256").hexdigest()
        saved[image_id] = ArchiveFile(digest, path.stat().st_size)
    return saved


def _write_files(root: Path, files: dict[str, bytes]) -> None:
    for relpath, data in sorted(files.items()):
        path = root / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def _write_tar(out: Path, staging: Path) -> None:
    """One reproducible tar of the staged files: sorted entries, fixed times and owners."""
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tar:
            names = sorted(p.relative_to(staging).as_posix() for p in staging.rglob("*"))
            for name in (n for n in names if (staging / n).is_file()):
                path = staging / name
                info = tarfile.TarInfo(name)
                info.size, info.mode, info.mtime = path.stat().st_size, 0o644, 0
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                with path.open("rb") as data:
                    tar.addfile(info, data)
        os.replace(tmp, out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
