"""`prooflock images base|build|verify|pin|list`: thin commands over runner.images.

Wire into runner/cli.py with `add_image_commands(commands)` and `"images": cmd_images` in
COMMANDS. Exit codes follow the CLI's: 0 done (or reproduced), 1 a build, self-test or
verification failed, 2 a user mistake (UserError), 3 no Docker daemon.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from docker.errors import ImageNotFound

from runner.errors import UserError
from runner.images import context
from runner.images.base import build_base
from runner.images.build import (
    BuildFailed,
    BuildOptions,
    build_image,
    discard,
    is_current,
    record,
)
from runner.images.containers import DaemonUnavailable, connect
from runner.images.inputs import BuildInputs, resolve_inputs
from runner.images.lock import DEFAULT_LOCK, ImagesLock, load_lock, save_lock
from runner.images.normalize import NotFromBase
from runner.images.selftest import SelfTestFailed
from runner.images.verify import Comparison, package_differences, top_layer_differences
from runner.settings import Settings

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INFRA = 0, 1, 2, 3
BASE = "base"


def _inputs_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("build inputs (transport only: recorded, never in the image)")
    group.add_argument("--apt-mirror", help="Debian mirror URL, or `host` for this machine's own")
    group.add_argument("--apt-security-mirror", help="Debian security mirror URL, or `host`")
    group.add_argument("--pip-index", help="pip index URL (default: pip's)")
    group.add_argument(
        "--ca-bundle", type=Path, help="extra CA bundle, for proxies that intercept TLS"
    )
    group.add_argument(
        "--input",
        action="append",
        default=[],
        dest="files",
        metavar="NAME=PATH",
        help="a vendored copy of a pinned download (checked against its sha256)",
    )


def _lock_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--lock", type=Path, help=f"images lock (default: {DEFAULT_LOCK})")


def add_image_commands(commands: argparse._SubParsersAction) -> None:
    images = commands.add_parser("images", help="build and verify the pinned prover images")
    verbs = images.add_subparsers(dest="images_command", required=True)

    base = verbs.add_parser("base", help="build the offline base image with debootstrap")
    base.add_argument(
        "--rebuild", action="store_true", help="build even if the locked base is present"
    )
    _inputs_flags(base)
    _lock_flag(base)

    build = verbs.add_parser("build", help="build images, normalize, self-test, record in the lock")
    build.add_argument("names", nargs="*", metavar="IMAGE", help="default: every image in the lock")
    build.add_argument(
        "--rebuild", action="store_true", help="build even if the locked image is present"
    )
    build.add_argument("--no-cache", action="store_true", help="do not reuse docker's build cache")
    build.add_argument(
        "--pin",
        action="append",
        default=[],
        metavar="ARG=VALUE",
        help="override a pin (an experiment: the lock and the tag are left alone)",
    )
    build.add_argument(
        "--base", help="build on this base reference instead of the locked offline base"
    )
    build.add_argument("--verbose", action="store_true", help="stream all build output")
    _inputs_flags(build)
    _lock_flag(build)

    verify = verbs.add_parser("verify", help="rebuild without cache and compare with the lock")
    verify.add_argument("names", nargs="+", metavar="IMAGE", help=f"image names, or `{BASE}`")
    _inputs_flags(verify)
    _lock_flag(verify)

    pin = verbs.add_parser(
        "pin", help="record Dockerfile pins and file hashes (images not built here)"
    )
    pin.add_argument("names", nargs="+", metavar="IMAGE")
    _lock_flag(pin)

    listing = verbs.add_parser("list", help="the locked images and whether this machine has them")
    _lock_flag(listing)


def cmd_images(args: argparse.Namespace) -> int:
    handler = {
        "base": _cmd_base,
        "build": _cmd_build,
        "verify": _cmd_verify,
        "pin": _cmd_pin,
        "list": _cmd_list,
    }[args.images_command]
    try:
        return handler(args)
    except DaemonUnavailable as exc:
        print(f"prooflock: infra error: {exc}", file=sys.stderr)
        return EXIT_INFRA
    except (BuildFailed, SelfTestFailed, NotFromBase) as exc:
        print(f"prooflock: {exc}", file=sys.stderr)
        return EXIT_FAILED


# -- helpers -----------------------------------------------------------------------------------


def _lock_path(args: argparse.Namespace) -> Path:
    return args.lock or Settings().images_lock


def _images_root(lock_path: Path) -> Path:
    return lock_path.resolve().parent.parent / "images"  # manifests/ and images/ are siblings


def _inputs(args: argparse.Namespace, lock: ImagesLock) -> BuildInputs:
    return resolve_inputs(
        lock.transport,
        suite=lock.base.suite,
        apt_mirror=args.apt_mirror,
        apt_security_mirror=args.apt_security_mirror,
        pip_index=args.pip_index,
        ca_bundle=args.ca_bundle,
        files=args.files,
    )


def _log_dir() -> Path:
    return Settings().cache_dir / "image-builds"


def _pins(specs: list[str]) -> dict[str, str]:
    pins = {}
    for spec in specs:
        key, sep, value = spec.partition("=")
        if not sep or not key:
            raise UserError(f"--pin {spec!r}: expected ARG=VALUE")
        pins[key] = value
    return pins


def _names(args: argparse.Namespace, lock: ImagesLock) -> list[str]:
    names = args.names or sorted(lock.images)
    for name in names:
        lock.entry(name)  # a UserError naming the image when it is unknown
    return names


# -- commands ----------------------------------------------------------------------------------


def _cmd_base(args: argparse.Namespace) -> int:
    lock_path = _lock_path(args)
    lock = load_lock(lock_path)
    client = connect()
    if not args.rebuild and lock.base.image_id is not None:
        try:
            if client.images.get(lock.base.tag).id == lock.base.image_id:
                print(f"base: {lock.base.tag} is the locked {lock.base.image_id}: nothing to do")
                return EXIT_OK
        except ImageNotFound:
            pass
    built = build_base(client, lock, _inputs(args, lock))
    _report_change("base", lock.base.image_id, built.entry.image_id, built.seconds)
    lock.base = built.entry
    save_lock(lock, lock_path)
    return EXIT_OK


def _cmd_build(args: argparse.Namespace) -> int:
    lock_path = _lock_path(args)
    lock = load_lock(lock_path)
    images_root = _images_root(lock_path)
    names = _names(args, lock)
    pins = _pins(args.pin)
    inputs = _inputs(args, lock)
    experiment = bool(pins) or args.base is not None
    client = connect()
    docker_version = client.version().get("Version", "unknown")
    worst = EXIT_OK
    for name in names:
        if not (args.rebuild or args.no_cache or experiment) and is_current(
            client, lock, name, images_root
        ):
            print(
                f"{name}: {lock.tag(name)} is the locked {lock.images[name].image_id}: nothing to do"
            )
            continue
        options = BuildOptions(
            nocache=args.no_cache,
            pins=pins,
            base=args.base,
            tag=not experiment,
            verbose=args.verbose,
        )
        try:
            result = build_image(
                client, lock, name, inputs, options, images_root=images_root, log_dir=_log_dir()
            )
        except (BuildFailed, SelfTestFailed, NotFromBase) as exc:
            print(f"prooflock: {exc}", file=sys.stderr)
            worst = EXIT_FAILED
            continue
        if experiment:
            print(
                f"{name}: {result.image_id} (pins overridden or another base: not tagged, not recorded)"
            )
            continue
        _report_change(name, result.previous_id, result.image_id, sum(result.seconds.values()))
        record(lock, result, inputs, images_root, docker_version)
        save_lock(lock, lock_path)
    return worst


def _report_change(name: str, previous: str | None, now: str | None, seconds: int) -> None:
    if previous is None:
        print(f"{name}: built {now} in {seconds} s and recorded it in the lock")
    elif previous == now:
        print(f"{name}: built {now} in {seconds} s: the same image ID as the lock")
    else:
        print(
            f"{name}: built {now} in {seconds} s; the lock had {previous}. Recorded the new ID: "
            "if the pins did not change, run `prooflock images verify` to see what differs"
        )


def _cmd_verify(args: argparse.Namespace) -> int:
    lock_path = _lock_path(args)
    lock = load_lock(lock_path)
    images_root = _images_root(lock_path)
    for name in args.names:
        if name != BASE:
            lock.entry(name)
    inputs = _inputs(args, lock)
    client = connect()
    worst = EXIT_OK
    for name in args.names:
        comparison = _verify_one(client, lock, name, inputs, images_root)
        if comparison.same:
            print(f"{name}: reproduced {comparison.rebuilt_id}")
            continue
        worst = EXIT_FAILED
        print(f"{name}: rebuilt {comparison.rebuilt_id}, the lock has {comparison.locked_id}")
        for line in comparison.differences:
            print(f"  {line}")
    return worst


def _verify_one(
    client, lock: ImagesLock, name: str, inputs: BuildInputs, images_root: Path
) -> Comparison:
    if name == BASE:
        if lock.base.image_id is None:
            raise UserError("the base has no recorded build: run `prooflock images base`")
        built = build_base(client, lock, inputs, tag=False)
        comparison = Comparison(BASE, lock.base.image_id, built.entry.image_id or "")
        if not comparison.same:
            comparison.differences = package_differences(lock.base.packages, built.entry.packages)
            comparison.differences += top_layer_differences(
                client, lock.base.image_id, comparison.rebuilt_id
            )
            discard(client, comparison.rebuilt_id)
        return comparison
    entry = lock.entry(name)
    if entry.image_id is None:
        raise UserError(
            f"{name} has no recorded build to verify: run `prooflock images build {name}`"
        )
    result = build_image(
        client,
        lock,
        name,
        inputs,
        BuildOptions(nocache=True, tag=False),
        images_root=images_root,
        log_dir=_log_dir(),
    )
    comparison = Comparison(name, entry.image_id, result.image_id)
    if not comparison.same:
        if result.diff_ids[:-1] != entry.diff_ids[:-1]:
            comparison.differences.append("the base layers differ from the lock's")
        comparison.differences += package_differences(entry.packages, result.packages)
        comparison.differences += top_layer_differences(client, entry.image_id, result.image_id)
        discard(client, result.image_id)
    return comparison


def _cmd_pin(args: argparse.Namespace) -> int:
    lock_path = _lock_path(args)
    lock = load_lock(lock_path)
    images_root = _images_root(lock_path)
    for name in args.names:
        entry = lock.entry(name)
        dockerfile = images_root / name / "Dockerfile"
        declared = context.dockerfile_args(dockerfile)
        shared = {"BASE", "SOURCE_DATE_EPOCH", *lock.transport}
        inputs = {k: v or "" for k, v in declared.items() if k not in shared}
        files = context.file_hashes(images_root, name)
        sha = context.sha256_of(dockerfile)
        if (inputs, files, sha) == (entry.inputs, entry.files, entry.dockerfile_sha256):
            print(f"{name}: the lock already matches {dockerfile}")
            continue
        stale = entry.image_id is not None
        lock.images[name] = entry.model_copy(
            update={
                "inputs": inputs,
                "files": files,
                "dockerfile_sha256": sha,
                **(
                    {
                        "status": "not built",
                        "image_id": None,
                        "diff_ids": [],
                        "packages": [],
                        "size_bytes": None,
                        "built_with": {},
                    }
                    if stale
                    else {}
                ),
            }
        )
        print(
            f"{name}: recorded the pins of {dockerfile}"
            + ("; its old build is no longer locked" if stale else "")
        )
    save_lock(lock, lock_path)
    return EXIT_OK


def _cmd_list(args: argparse.Namespace) -> int:
    lock_path = _lock_path(args)
    lock = load_lock(lock_path)
    images_root = _images_root(lock_path)
    try:
        client = connect(timeout=10)
    except DaemonUnavailable:
        client = None
    for name, entry in [(BASE, lock.base), *sorted(lock.images.items())]:
        if entry.image_id is None:
            state = "not built"
        elif client is None:
            state = "recorded (no daemon to check this machine)"
        elif name == BASE:
            state = "present" if _has(client, entry.tag, entry.image_id) else "missing here"
        else:
            state = (
                "present"
                if is_current(client, lock, name, images_root)
                else "missing or stale here"
            )
        print(f"{name:14} {entry.tag:32} {(entry.image_id or '-')[:19]:20} {state}")
    return EXIT_OK


def _has(client, tag: str, image_id: str) -> bool:
    try:
        return client.images.get(tag).id == image_id
    except ImageNotFound:
        return False
