"""`prooflock publish`: a finished run as a self-contained, content-addressed bundle.

    BUNDLE/
      log.jsonl               the checkpoint log, byte for byte
      blobs/sha256/<hex>      every artifact's bytes, reference files, kept renders
      images.lock.json        the lock entries (pins and build results) of every image used
      statement.intoto.json   an in-toto Statement v1 with an SLSA Provenance v1 predicate
      [statement.intoto.dsse.json]  the place for a detached DSSE signature (not made here)

The statement's subjects are the log (annotated with its record count and head digest, so a cut
or re-hashed log no longer matches) and every artifact; its predicate says how the results were
made: the requests digest, prover/mode/limits/options, the images by ID with their layers, the
lock's digest, the kit's version and commit, the backend and the hosts.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from runner.core import home
from runner.core.canonical import canonical_bytes
from runner.core.errors import UserError
from runner.core.models import CheckRequest, CheckResult
from runner.core.provenance import kit_version, source_commit
from runner.images.lock import ImagesLock, load_lock
from runner.records.checkpoint import ChainReport, inspect_chain, recorded_runs
from runner.records.layout import BLOBS, BUNDLE_LOCK, BUNDLE_LOG, STATEMENT

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PROVENANCE_TYPE = "https://slsa.dev/provenance/v1"
BUILD_TYPE = "https://prooflock.dev/buildtypes/check-run/v1"
BUILDER = "https://prooflock.dev/builder"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class Bundle:
    """What `publish` wrote."""

    path: Path
    records: int
    head: str
    subjects: int
    blobs: int
    images: list[str] = field(default_factory=list)


def renders_dir(log: Path) -> Path:
    """Where `prooflock run` keeps renders for the log `X.jsonl`: `X.renders/` beside it."""
    return log.with_name(log.stem + ".renders")


def _output_digests(result: CheckResult) -> set[str]:
    """The digests of the files a record names: its typed outputs, and in records written before
    outputs were typed, the digest maps in its details (`outputs`, and a comparison's
    `reference_outputs` and `rasters`). Only sha256 digests: they become file names."""
    found = {output.sha256 for output in result.outputs}
    for key in ("outputs", "reference_outputs", "rasters"):
        for holder in (result.details, result.details.get("comparison") or {}):
            value = holder.get(key) if isinstance(holder, dict) else None
            if isinstance(value, dict):
                found.update(v for v in value.values() if isinstance(v, str))
    return {d for d in found if len(d) == 64 and all(c in "0123456789abcdef" for c in d)}


def _images_used(results: list[CheckResult]) -> dict[str, str]:
    """Image tag → image ID of every docker record."""
    used: dict[str, str] = {}
    for result in results:
        install = result.environment.get("install")
        if isinstance(install, dict) and install.get("kind") == "docker":
            used[str(install.get("image"))] = str(install.get("image_id"))
    return used


def _lock_subset(lock: ImagesLock, tags: set[str]) -> dict[str, Any]:
    images = {name: entry for name, entry in lock.images.items() if entry.tag in tags}
    data = lock.model_dump(mode="json")
    data["images"] = {name: data["images"][name] for name in sorted(images)}
    return data


def _external_parameters(
    chain: ChainReport, runs: list[tuple[CheckRequest, CheckResult]]
) -> dict[str, Any]:
    header = chain.header or {}
    checks: dict[str, dict[str, Any]] = {}
    for request, result in runs:
        limits = result.environment.get("limits")
        options = result.environment.get("options")
        entry = {
            "prover": request.prover,
            "mode": request.mode,
            "limits": limits,
            "options": options,
        }
        checks[sha256(canonical_bytes(entry))] = entry
    return {
        "requests": {
            "digest": {"sha256": header.get("requests")},
            "count": header.get("count"),
            "source": header.get("source"),
        },
        "checks": [checks[key] for key in sorted(checks)],
    }


def _resolved_dependencies(
    lock: ImagesLock | None, used: dict[str, str], lock_digest: str | None
) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    by_tag = {entry.tag: entry for entry in lock.images.values()} if lock else {}
    for tag, image_id in sorted(used.items()):
        entry = by_tag.get(tag)
        annotations: dict[str, Any] = {"locked": entry is not None and entry.image_id == image_id}
        if entry is not None:
            annotations.update(diff_ids=entry.diff_ids, pins=entry.inputs)
        found.append(
            {
                "name": tag,
                "digest": {"sha256": image_id.removeprefix("sha256:")},
                "annotations": annotations,
            }
        )
    if lock_digest is not None:
        found.append({"name": BUNDLE_LOCK, "digest": {"sha256": lock_digest}})
    commit = source_commit()
    kit: dict[str, Any] = {"name": "prooflock", "annotations": {"version": kit_version()}}
    kit["digest"] = {"gitCommit": commit} if commit else {"sha256": sha256(kit_version().encode())}
    found.append(kit)
    return found


def statement(
    chain: ChainReport,
    log_bytes: bytes,
    runs: list[tuple[CheckRequest, CheckResult]],
    lock: ImagesLock | None,
    lock_digest: str | None,
) -> dict[str, Any]:
    results = [result for _, result in runs]
    subjects: list[dict[str, Any]] = [
        {
            "name": BUNDLE_LOG,
            "digest": {"sha256": sha256(log_bytes)},
            "annotations": {
                "records": len(chain.records),
                "head": chain.head,
                "results": len(runs),
                "requests": chain.expected,
            },
        }
    ]
    for index, (request, _) in enumerate(runs):
        subjects.append(
            {
                "name": f"artifact/{index}/{request.name}",
                "digest": {"sha256": sha256(request.content.encode())},
            }
        )
    backends = sorted({r.provenance.backend for r in results})
    started = min((r.provenance.started_at for r in results), default=None)
    finished = max((r.provenance.finished_at for r in results), default=None)
    predicate = {
        "buildDefinition": {
            "buildType": BUILD_TYPE,
            "externalParameters": _external_parameters(chain, runs),
            "internalParameters": {
                "backends": backends,
                "isolation": sorted({r.provenance.isolation for r in results}),
            },
            "resolvedDependencies": _resolved_dependencies(
                lock, _images_used(results), lock_digest
            ),
        },
        "runDetails": {
            "builder": {
                "id": f"{BUILDER}/{'+'.join(backends) or 'none'}",
                "version": {"prooflock": kit_version()},
            },
            "metadata": {
                "invocationId": f"prooflock-run:{(chain.header or {}).get('requests', '')}",
                **({"startedOn": _rfc3339(started)} if started else {}),
                **({"finishedOn": _rfc3339(finished)} if finished else {}),
            },
            "byproducts": [
                {
                    "name": "hosts",
                    "annotations": {"hosts": sorted({r.provenance.host for r in results})},
                }
            ],
        },
    }
    return {
        "_type": STATEMENT_TYPE,
        "subject": subjects,
        "predicateType": PROVENANCE_TYPE,
        "predicate": predicate,
    }


def _rfc3339(stamp: str) -> str:
    return stamp.replace("+00:00", "Z")


def publish(log: Path, out: Path) -> Bundle:
    """Write the bundle for `log` into `out` (a new directory, or `out.tar` as one tar file)."""
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
    used = _images_used(results)
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
    lock_digest = None
    if lock is not None:
        lock_bytes = (
            orjson.dumps(
                _lock_subset(lock, set(used)), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS
            )
            + b"\n"
        )
        files[BUNDLE_LOCK] = lock_bytes
        lock_digest = sha256(lock_bytes)
    made = statement(chain, log_bytes, runs, lock, lock_digest)
    files[STATEMENT] = orjson.dumps(made, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"
    for digest_hex, data in blobs.items():
        files[str(BLOBS / digest_hex)] = data
    if out.suffix == ".tar":
        _write_tar(out, files)
    else:
        _write_dir(out, files)
    return Bundle(
        out, len(chain.records), chain.head, len(made["subject"]), len(blobs), sorted(used)
    )


def _write_dir(out: Path, files: dict[str, bytes]) -> None:
    """Write into a temporary directory beside `out`, then rename: never half a bundle."""
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        for relpath, data in sorted(files.items()):
            path = staging / relpath
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        os.rename(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _write_tar(out: Path, files: dict[str, bytes]) -> None:
    """One reproducible tar: sorted entries, fixed times and owners."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tar:
            for relpath, data in sorted(files.items()):
                info = tarfile.TarInfo(relpath)
                info.size, info.mode, info.mtime = len(data), 0o644, 0
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                tar.addfile(info, io.BytesIO(data))
        os.replace(tmp, out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
