"""`prooflock images build`: docker build, normalize, self-test, record in the lock.

A build runs on the locked offline base (or another base the user names), passes the lock's pins
and the build inputs as build arguments, streams progress, squashes and normalizes the result,
runs the image's self-test in a hardened container, and only then tags the image and records it.
"""

from __future__ import annotations

import contextlib
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from docker import DockerClient
from docker.errors import APIError, BuildError, ImageNotFound

from runner.errors import UserError
from runner.images import context
from runner.images.containers import run_hardened
from runner.images.inputs import BuildInputs
from runner.images.lock import ImageEntry, ImagesLock
from runner.images.normalize import normalize_image
from runner.images.selftest import SelfTestFailed, run_selftest

TRANSPORT_ARGS = ("APT_MIRROR", "APT_SECURITY_MIRROR", "PIP_INDEX_URL")
PACKAGES = ["dpkg-query", "-W", "-f", "${Package}=${Version}\\n"]


class BuildFailed(RuntimeError):
    """docker build failed (a package missing from the mirror, a checksum mismatch, ...)."""


@dataclass
class BuildOptions:
    nocache: bool = False
    pins: dict[str, str] = field(default_factory=dict)  # experiments: override lock pins
    base: str | None = None  # a base reference instead of the locked offline base
    tag: bool = True  # tag the result as the lock's `prooflock/<name>:<version>`
    verbose: bool = False  # stream all build output, not only the steps
    selftest_timeout: int = 1200


@dataclass
class BuildResult:
    name: str
    image_id: str
    diff_ids: list[str]
    previous_id: str | None
    packages: list[str]
    size_bytes: int
    seconds: dict[str, int]
    base: dict[str, str]

    @property
    def changed(self) -> bool:
        return self.previous_id != self.image_id


def raw_tag(entry: ImageEntry, *, scratch: bool = False) -> str:
    """Where the un-normalized build is kept, so its layers stay in docker's build cache.
    Experiments (verify, changed pins) build under a scratch tag, removed afterwards."""
    repository, _, version = entry.tag.rpartition(":")
    suffix = "-scratch" if scratch else ""
    return f"{repository.replace('prooflock/', 'prooflock-build/', 1)}:{version}{suffix}"


def check_pins_match(images_root: Path, name: str, lock: ImagesLock) -> dict[str, str | None]:
    """The Dockerfile's ARG defaults must equal the lock's pins; return the ARGs it declares."""
    entry = lock.entry(name)
    dockerfile = images_root / name / "Dockerfile"
    if not dockerfile.is_file():
        raise UserError(f"{dockerfile}: no such file")
    declared = context.dockerfile_args(dockerfile)
    expected = {
        **entry.inputs,
        "BASE": lock.base.registry_reference,
        "SOURCE_DATE_EPOCH": str(lock.source_date_epoch),
        **{arg: lock.transport[arg] for arg in TRANSPORT_ARGS if arg in declared},
    }
    for arg, value in sorted(expected.items()):
        if declared.get(arg, "<not declared>") != value:
            raise UserError(
                f"{dockerfile}: ARG {arg} is {declared.get(arg, '<not declared>')!r} but the images "
                f"lock pins {value!r}: change both together"
            )
    extra = sorted(set(declared) - set(expected))
    if extra:
        raise UserError(f"{dockerfile}: ARG {', '.join(extra)} not pinned in the images lock")
    return declared


def locked_base(client: DockerClient, lock: ImagesLock) -> str:
    base = lock.base
    try:
        found = client.images.get(base.tag)
    except ImageNotFound:
        raise UserError(
            f"the base image {base.tag} is missing: run `prooflock images base`"
        ) from None
    if base.image_id is not None and found.id != base.image_id:
        raise UserError(
            f"{base.tag} is {found.id}, not the locked {base.image_id}: run `prooflock images base`"
        )
    return base.tag


def is_current(client: DockerClient, lock: ImagesLock, name: str, images_root: Path) -> bool:
    """The tagged image is the locked one and nothing it was built from has changed since."""
    entry = lock.entry(name)
    if entry.image_id is None:
        return False
    try:
        if client.images.get(entry.tag).id != entry.image_id:
            return False
        if lock.base.image_id is None or client.images.get(lock.base.tag).id != lock.base.image_id:
            return False
    except ImageNotFound:
        return False
    dockerfile = images_root / name / "Dockerfile"
    return (
        context.sha256_of(dockerfile) == entry.dockerfile_sha256
        and context.file_hashes(images_root, name) == entry.files
    )


def build_image(
    client: DockerClient,
    lock: ImagesLock,
    name: str,
    inputs: BuildInputs,
    options: BuildOptions,
    *,
    images_root: Path = Path("images"),
    log_dir: Path,
    out: TextIO = sys.stderr,
) -> BuildResult:
    entry = lock.entry(name)
    declared = check_pins_match(images_root, name, lock)
    unknown = sorted(set(options.pins) - set(entry.inputs) - {"SOURCE_DATE_EPOCH"})
    if unknown:
        raise UserError(
            f"--pin {', '.join(unknown)}: not a pin of {name} (pins: {', '.join(entry.inputs)})"
        )
    base_ref = options.base or locked_base(client, lock)
    epoch_pin = str(options.pins.get("SOURCE_DATE_EPOCH", lock.source_date_epoch))
    if not epoch_pin.isdigit():
        raise UserError(f"--pin SOURCE_DATE_EPOCH={epoch_pin}: expected seconds since 1970")
    epoch = int(epoch_pin)
    args = {
        **entry.inputs,
        **inputs.build_args(),
        "BASE": base_ref,
        "SOURCE_DATE_EPOCH": str(epoch),
        **options.pins,
    }
    args = {key: value for key, value in args.items() if key in declared}
    log_dir.mkdir(parents=True, exist_ok=True)
    raw = raw_tag(entry, scratch=not options.tag)
    replaced = _image_id(client, raw)
    try:
        return _build(
            client,
            lock,
            name,
            inputs,
            options,
            images_root,
            args,
            raw,
            base_ref,
            epoch,
            log_dir,
            out,
        )
    finally:
        if replaced is not None and replaced != _image_id(client, raw):
            discard(client, replaced)  # an older raw build nothing refers to any more
        if not options.tag:
            discard(client, raw, untag=True)  # experiments leave no raw build behind


def _build(
    client: DockerClient,
    lock: ImagesLock,
    name: str,
    inputs: BuildInputs,
    options: BuildOptions,
    images_root: Path,
    args: dict[str, str],
    raw: str,
    base_ref: str,
    epoch: int,
    log_dir: Path,
    out: TextIO,
) -> BuildResult:
    entry = lock.entry(name)
    log_path = log_dir / f"{name}.log"
    seconds: dict[str, int] = {}
    clock = time.monotonic()
    nocache = " without cache" if options.nocache else ""
    print(f"{name}: building on {base_ref}{nocache} (log: {log_path})", file=out, flush=True)
    _docker_build(client, images_root, name, inputs, args, raw, options, log_path, out)
    seconds["build"] = int(time.monotonic() - clock)

    clock = time.monotonic()
    print(f"{name}: normalizing", file=out, flush=True)
    normalized = normalize_image(
        client,
        raw,
        base_reference=base_ref,
        epoch=epoch,
        created_by=f"prooflock images build {name}",
    )
    seconds["normalize"] = int(time.monotonic() - clock)
    if options.verbose:
        print(f"{name}: normalization took {normalized.seconds} s", file=out, flush=True)

    clock = time.monotonic()
    print(f"{name}: self-test in {normalized.image_id[:19]}", file=out, flush=True)
    result = run_selftest(
        client, normalized.image_id, images_root, name, timeout_s=options.selftest_timeout
    )
    (log_dir / f"{name}.selftest.log").write_text(result.output)
    seconds["selftest"] = int(time.monotonic() - clock)
    if not result.passed:
        discard(client, normalized.image_id)
        raise SelfTestFailed(name, result)

    if options.tag:
        repository, _, version = entry.tag.rpartition(":")
        client.images.get(normalized.image_id).tag(repository, version)
    listed = run_hardened(client, normalized.image_id, PACKAGES, timeout_s=120)
    if not listed.ok:
        raise BuildFailed(f"{name}: dpkg-query failed in the built image:\n{listed.output[-2000:]}")
    size = int(client.images.get(normalized.image_id).attrs["Size"])
    print(
        f"{name}: {normalized.image_id} ({size / 1e6:.0f} MB; build {seconds['build']} s, "
        f"normalize {seconds['normalize']} s, self-test {seconds['selftest']} s)",
        file=out,
        flush=True,
    )
    return BuildResult(
        name=name,
        image_id=normalized.image_id,
        diff_ids=normalized.diff_ids,
        previous_id=entry.image_id,
        packages=sorted(listed.output.split()),
        size_bytes=size,
        seconds=seconds,
        base={"reference": base_ref, "image_id": client.images.get(base_ref).id},
    )


def _image_id(client: DockerClient, reference: str) -> str | None:
    try:
        return client.images.get(reference).id
    except ImageNotFound:
        return None


def discard(client: DockerClient, reference: str, *, untag: bool = False) -> None:
    """Remove an image no tag refers to (or, with `untag`, drop the tag `reference`), pruning
    the intermediate images of its build. Tagged images and images in use are left alone."""
    try:
        image = client.images.get(reference)
    except ImageNotFound:
        return
    if untag and reference not in image.tags:
        return
    if not untag and image.tags:
        return
    with contextlib.suppress(APIError):
        client.images.remove(reference if untag else image.id, noprune=False)


def record(
    lock: ImagesLock,
    result: BuildResult,
    inputs: BuildInputs,
    images_root: Path,
    docker_version: str,
) -> None:
    """Write what the build produced into the lock entry (the caller saves the lock)."""
    entry = lock.entry(result.name)
    lock.images[result.name] = entry.model_copy(
        update={
            "status": "built",
            "dockerfile_sha256": context.sha256_of(images_root / result.name / "Dockerfile"),
            "files": context.file_hashes(images_root, result.name),
            "image_id": result.image_id,
            "diff_ids": result.diff_ids,
            "packages": result.packages,
            "size_bytes": result.size_bytes,
            "built_with": {"base": result.base, **inputs.provenance(), "docker": docker_version},
        }
    )


def _docker_build(
    client: DockerClient,
    images_root: Path,
    name: str,
    inputs: BuildInputs,
    args: dict[str, str],
    tag: str,
    options: BuildOptions,
    log_path: Path,
    out: TextIO,
) -> None:
    tail: list[str] = []
    with log_path.open("w") as log:
        try:
            stream = client.api.build(
                fileobj=context.build_context(images_root, name, inputs),
                custom_context=True,
                tag=tag,
                buildargs=args,
                nocache=options.nocache,
                rm=True,
                forcerm=True,
                pull=False,
                decode=True,
            )
            for message in stream:
                if "error" in message:
                    log.write(message["error"] + "\n")
                    tail.append(message["error"])
                    raise BuildFailed(f"{name}: docker build failed:\n" + "\n".join(tail[-40:]))
                text = message.get("stream", "")
                if not text:
                    continue
                log.write(text)
                for line in text.splitlines():
                    tail = [*tail[-60:], line]
                    if options.verbose or line.startswith("Step "):
                        print(f"{name}: {line}", file=out, flush=True)
        except (APIError, BuildError) as exc:
            raise BuildFailed(
                f"{name}: docker build failed: {exc}\n" + "\n".join(tail[-40:])
            ) from None
