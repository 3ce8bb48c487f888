"""`prooflock images base|build|verify|pin|list`: parse, call runner.images.api, print.

Wire into the CLI with `add_image_commands(commands)` and `"images": cmd_images`. Exit codes
follow the CLI's: 0 done (or reproduced), 1 a build, self-test or verification failed (or, in an
installed copy, gave another image than the lock's), 2 a user mistake (UserError), 3 no Docker
daemon or no images lock.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import orjson

from runner.core.errors import InfraFailure, UserError
from runner.images import api
from runner.images.api import BuildOutcome, Built
from runner.images.build import BuildOptions
from runner.images.inputs import BuildInputs, resolve_inputs
from runner.images.lock import DEFAULT_LOCK, Kit
from runner.images.policy import DaemonUnavailable
from runner.images.state import BASE, ImageState, ImageStatus

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INFRA = 0, 1, 2, 3
LIST_SCHEMA = "prooflock.images/1"
NOT_RECORDED = "not recorded: the installed copy's lock is read-only"


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
    parser.add_argument(
        "--lock", type=Path, metavar="PATH", help=f"images lock (default: the kit's {DEFAULT_LOCK})"
    )


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
    listing.add_argument(
        "--json", action="store_true", help=f"one JSON document ({LIST_SCHEMA}) on stdout"
    )
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
    except (DaemonUnavailable, InfraFailure) as exc:
        print(f"prooflock: infra error: {exc}", file=sys.stderr)
        return EXIT_INFRA
    except api.FAILURES as exc:
        print(f"prooflock: {exc}", file=sys.stderr)
        return EXIT_FAILED


# -- parsing -----------------------------------------------------------------------------------


def _inputs(args: argparse.Namespace, kit: Kit) -> BuildInputs:
    return resolve_inputs(
        kit.lock.transport,
        suite=kit.lock.base.suite,
        apt_mirror=args.apt_mirror,
        apt_security_mirror=args.apt_security_mirror,
        pip_index=args.pip_index,
        ca_bundle=args.ca_bundle,
        files=args.files,
    )


def _pins(specs: list[str]) -> dict[str, str]:
    pins = {}
    for spec in specs:
        key, sep, value = spec.partition("=")
        if not sep or not key:
            raise UserError(f"--pin {spec!r}: expected ARG=VALUE")
        pins[key] = value
    return pins


# -- commands ----------------------------------------------------------------------------------


def _cmd_base(args: argparse.Namespace) -> int:
    kit = Kit.open(args.lock)
    built = api.build_base_image(kit, _inputs(args, kit), rebuild=args.rebuild)
    return _report(built)


def _cmd_build(args: argparse.Namespace) -> int:
    kit = Kit.open(args.lock)
    options = BuildOptions(
        nocache=args.no_cache, pins=_pins(args.pin), base=args.base, verbose=args.verbose
    )
    built_images = api.build_images(
        kit, args.names or None, _inputs(args, kit), options, rebuild=args.rebuild
    )
    worst = EXIT_OK
    for built in built_images:
        worst = max(worst, _report(built))
    return worst


def _report(built: Built) -> int:
    """Print what happened to one image; its exit code."""
    name, now, previous = built.name, built.image_id, built.locked_id
    if built.outcome is BuildOutcome.CURRENT:
        print(f"{name}: {built.tag} is the locked {previous}: nothing to do")
    elif built.outcome is BuildOutcome.FAILED:
        print(f"prooflock: {built.error}", file=sys.stderr)
        return EXIT_FAILED
    elif built.outcome is BuildOutcome.EXPERIMENT:
        print(f"{name}: {now} (pins overridden or another base: not tagged, not recorded)")
    elif not built.recorded:
        return _report_unrecorded(built)
    elif previous is None:
        print(f"{name}: built {now} in {built.seconds} s and recorded it in the lock")
    elif built.matches_lock:
        print(f"{name}: built {now} in {built.seconds} s: the same image ID as the lock")
    else:
        print(
            f"{name}: built {now} in {built.seconds} s; the lock had {previous}. Recorded the new "
            "ID: if the pins did not change, run `prooflock images verify` to see what differs"
        )
    return EXIT_OK


def _report_unrecorded(built: Built) -> int:
    """A build in the installed copy: compared with the locked ID, never written to the lock."""
    name, now, previous = built.name, built.image_id, built.locked_id
    if built.matches_lock:
        print(f"{name}: built {now} in {built.seconds} s: the same image ID as the lock")
        return EXIT_OK
    if previous is None:
        print(f"{name}: built {now} in {built.seconds} s; no locked ID to compare ({NOT_RECORDED})")
        return EXIT_OK
    print(
        f"{name}: built {now} in {built.seconds} s, but the lock has {previous} ({NOT_RECORDED}; "
        "checks use the locked ID): run `prooflock images verify` to see what differs"
    )
    return EXIT_FAILED


def _cmd_verify(args: argparse.Namespace) -> int:
    kit = Kit.open(args.lock)
    worst = EXIT_OK
    for compared in api.verify_images(kit, args.names, _inputs(args, kit)):
        if compared.same:
            print(f"{compared.name}: reproduced {compared.rebuilt_id}")
            continue
        worst = EXIT_FAILED
        print(f"{compared.name}: rebuilt {compared.rebuilt_id}, the lock has {compared.locked_id}")
        for line in compared.differences:
            print(f"  {line}")
    return worst


def _cmd_pin(args: argparse.Namespace) -> int:
    for pinned in api.pin_images(Kit.open(args.lock), args.names):
        if not pinned.changed:
            print(f"{pinned.name}: the lock already matches {pinned.dockerfile}")
            continue
        dropped = "; its old build is no longer locked" if pinned.dropped_build else ""
        print(f"{pinned.name}: recorded the pins of {pinned.dockerfile}{dropped}")
    return EXIT_OK


STATE_TEXT = {
    ImageState.PRESENT: "present",
    ImageState.NOT_BUILT: "not built",
    ImageState.UNCHECKED: "recorded (no daemon to check this machine)",
}


def _cmd_list(args: argparse.Namespace) -> int:
    kit = Kit.open(args.lock)
    found = api.list_images(kit)
    if args.json:
        document = {
            "schema": LIST_SCHEMA,
            "lock": str(kit.lock_path),
            "images_root": str(kit.images_root),
            "lock_writable": kit.writable,
            "images": [_as_json(status) for status in found],
        }
        sys.stdout.buffer.write(orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n")
        sys.stdout.flush()
        return EXIT_OK
    for status in found:
        image_id = (status.image_id or "-")[:19]
        print(f"{status.name:14} {status.tag:32} {image_id:20} {_state_text(status)}")
    return EXIT_OK


def _state_text(status: ImageStatus) -> str:
    if status.state in STATE_TEXT:
        return STATE_TEXT[status.state]
    return "missing here" if status.name == BASE else "missing or stale here"


def _as_json(status: ImageStatus) -> dict[str, str | None]:
    return {
        "name": status.name,
        "tag": status.tag,
        "image_id": status.image_id,
        "state": status.state.value,
    }
