"""`prooflock images base|build|verify|pin|relock|vendor|save|load|list`: parse, call, print.

Each command calls runner.images.api (or runner.images.archives). Wire them into the CLI with
runner.images.flags' `add_image_commands(commands)` and `"images": cmd_images`.

Exit codes follow the CLI's:
- 0: done (reproduced, or drifted with --allow-drift).
- 1: a build, self-test or verification failed, or a build would not give the locked ID (its
  drift listed).
- 2: a user mistake (UserError).
- 3: no Docker daemon, no images lock, or a store that does not answer (run it again to resume).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, TextIO

import orjson

from runner.backends.policy import DaemonUnavailable, connect
from runner.core.errors import InfraFailure, UserError
from runner.core.settings import Settings
from runner.images import api, archives, machine
from runner.images.api import BuildOutcome, Built
from runner.images.build import BuildOptions
from runner.images.flags import LIST_SCHEMA
from runner.images.inputs import BuildInputs, resolve_inputs
from runner.images.lock import Kit
from runner.images.state import ImageState, ImageStatus, tag_if_locked
from runner.images.usable import usable_image
from runner.images.vendor import vendor_closures
from runner.storage.s3_url import parse_s3_url

if TYPE_CHECKING:
    from runner.storage.s3_settings import S3Settings

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INFRA = 0, 1, 2, 3
MOST_LINES = 20  # drift lines a refused build prints (a dead mirror misses every package)


def cmd_images(args: argparse.Namespace, settings: Settings, s3: S3Settings | None) -> int:
    """Run `prooflock images ...` with the settings the CLI read (`s3`: to reach S3, if used)."""
    handler = {
        "base": _cmd_base,
        "build": _cmd_build,
        "verify": _cmd_verify,
        "pin": _cmd_pin,
        "relock": _cmd_relock,
        "vendor": _cmd_vendor,
        "save": _cmd_save,
        "load": _cmd_load,
        "list": _cmd_list,
    }[args.images_command]
    try:
        return handler(args, settings, s3)
    except (DaemonUnavailable, InfraFailure) as exc:
        print(f"prooflock: infra error: {exc}", file=sys.stderr)
        return EXIT_INFRA
    except api.FAILURES as exc:
        print(f"prooflock: {exc}", file=sys.stderr)
        return EXIT_FAILED


# -- parsing -----------------------------------------------------------------------------------


def _inputs(
    args: argparse.Namespace, kit: Kit, settings: Settings, s3: S3Settings | None
) -> BuildInputs:
    inputs = resolve_inputs(
        kit.lock.transport,
        settings,
        suite=kit.lock.base.suite,
        apt_mirror=args.apt_mirror,
        apt_security_mirror=args.apt_security_mirror,
        pip_index=args.pip_index,
        ca_bundle=args.ca_bundle,
        files=args.files,
        s3=s3,
    )
    if inputs.note:
        print(f"prooflock: {inputs.note}", file=sys.stderr, flush=True)
    return inputs


def _pins(specs: list[str]) -> dict[str, str]:
    pins = {}
    for spec in specs:
        key, sep, value = spec.partition("=")
        if not sep or not key:
            raise UserError(f"--pin {spec!r}: expected ARG=VALUE")
        pins[key] = value
    return pins


# -- commands ----------------------------------------------------------------------------------


def _cmd_base(args: argparse.Namespace, settings: Settings, s3: S3Settings | None) -> int:
    kit = Kit.open(args.lock)
    kit.lock.base_named(args.name)  # a UserError naming the bases when it is unknown
    built = api.build_base_image(
        kit.for_base(args.name),
        _inputs(args, kit, settings, s3),
        rebuild=args.rebuild,
        allow_drift=args.allow_drift,
    )
    return _report(built)


def _cmd_build(args: argparse.Namespace, settings: Settings, s3: S3Settings | None) -> int:
    kit = Kit.open(args.lock)
    options = BuildOptions(
        nocache=args.no_cache,
        pins=_pins(args.pin),
        base=args.base,
        verbose=args.verbose,
        allow_drift=args.allow_drift,
    )
    built_images = api.build_images(
        kit, args.names or None, _inputs(args, kit, settings, s3), options, rebuild=args.rebuild
    )
    worst = EXIT_OK
    for built in built_images:
        worst = max(worst, _report(built))
    return worst


def _report(built: Built) -> int:
    """Print what happened to one image; return its exit code."""
    name, now, locked = built.name, built.image_id, built.locked_id
    took = f"in {built.seconds} s from {built.built_from}"
    if built.outcome is BuildOutcome.FAILED:
        print(f"prooflock: {built.error}", file=sys.stderr)
        return EXIT_FAILED
    if built.outcome is BuildOutcome.REFUSED:
        _report_refused(built)
        return EXIT_FAILED
    if built.outcome is BuildOutcome.EXPERIMENT:
        print(f"{name}: {now} (pins overridden or another base: not tagged, not recorded)")
    elif built.outcome is BuildOutcome.CURRENT and built.matches_lock:
        print(f"{name}: {built.tag} is the locked {locked}: nothing to do")
    elif built.outcome is BuildOutcome.CURRENT:
        print(
            f"{name}: {built.tag} is {now}, this machine's drifted rebuild of the locked {locked}:"
        )
        _lines(built.drift)
    elif built.matches_lock:
        print(f"{name}: built {now} {took}: the locked image ID")
    elif locked is None:
        print(
            f"{name}: built {now} {took}; the lock records no build of it "
            f"(`prooflock images relock {name}` records this one)"
        )
    else:
        print(
            f"{name}: built {now} {took}: NOT the locked {locked}; drift allowed, so it is tagged "
            "and recorded on this machine (never in the lock):"
        )
        _lines(built.drift)
    return EXIT_OK


def _report_refused(built: Built) -> None:
    name, locked = built.name, built.locked_id
    if built.image_id is None:
        print(
            f"prooflock: {name}: the locked closure of {locked} cannot be had; nothing was built:",
            file=sys.stderr,
        )
    else:
        print(
            f"prooflock: {name}: built {built.image_id}, not the locked {locked}; not tagged:",
            file=sys.stderr,
        )
    _lines(built.drift[:MOST_LINES], sys.stderr)
    if len(built.drift) > MOST_LINES:
        more = len(built.drift) - MOST_LINES
        print(
            f"  ... and {more} more (`prooflock images vendor {name}` lists all)", file=sys.stderr
        )
    print(
        f"prooflock: {name}: `prooflock images build {name} --allow-drift` builds it anyway "
        "(tagged and recorded on this machine, never in the lock)",
        file=sys.stderr,
    )


def _lines(lines: list[str], out: TextIO | None = None) -> None:
    for line in lines:
        print(f"  {line}", file=out or sys.stdout)


def _cmd_verify(args: argparse.Namespace, settings: Settings, s3: S3Settings | None) -> int:
    kit = Kit.open(args.lock)
    worst = EXIT_OK
    for compared in api.verify_images(kit, args.names, _inputs(args, kit, settings, s3)):
        if compared.same:
            print(f"{compared.name}: reproduced {compared.rebuilt_id}")
            continue
        worst = EXIT_FAILED
        print(f"{compared.name}: rebuilt {compared.rebuilt_id}, the lock has {compared.locked_id}")
        for line in compared.differences:
            print(f"  {line}")
    return worst


def _cmd_pin(args: argparse.Namespace, settings: Settings, s3: S3Settings | None) -> int:
    for pinned in api.pin_images(Kit.open(args.lock), args.names):
        if not pinned.changed:
            print(f"{pinned.name}: the lock already matches {pinned.dockerfile}")
            continue
        dropped = "; its old build is no longer locked" if pinned.dropped_build else ""
        print(f"{pinned.name}: recorded the pins of {pinned.dockerfile}{dropped}")
    return EXIT_OK


def _cmd_relock(args: argparse.Namespace, settings: Settings, s3: S3Settings | None) -> int:
    kit = Kit.open(args.lock)
    for relocked in api.relock_images(kit, args.names, _inputs(args, kit, settings, s3)):
        if relocked.recorded and relocked.previous_id != relocked.image_id:
            what = f"recorded this machine's build {relocked.image_id} (was {relocked.previous_id})"
        elif relocked.recorded:
            what = f"recorded this machine's build of the current definitions ({relocked.image_id})"
        else:
            what = f"kept the locked build {relocked.image_id}"
        print(
            f"{relocked.name}: {what}; closure of {relocked.packages} packages "
            f"({relocked.changed} new or changed)"
        )
    return EXIT_OK


def _cmd_vendor(args: argparse.Namespace, settings: Settings, s3: S3Settings | None) -> int:
    kit = Kit.open(args.lock)
    vendor_closures(kit, args.names)  # refuse an image without a closure before any work
    if args.to:
        parse_s3_url(args.to)
    worst = EXIT_OK
    for vendored in api.vendor_images(kit, args.names, _inputs(args, kit, settings, s3), args.to):
        where = f"; {vendored.uploaded} copied to {args.to}" if args.to else ""
        if vendored.pinned:
            where += f"; {vendored.pinned} pinned on first use (written to {kit.lock_path})"
        kinds = ", ".join(
            f"{files} {kind} ({size / 1e6:.0f} MB)"
            for kind, (files, size) in sorted(vendored.by_kind.items())
        )
        print(
            f"{vendored.name}: {vendored.files - len(vendored.missing)} of {vendored.files} "
            f"inputs ({vendored.size_bytes / 1e6:.0f} MB: {kinds}) in the store, "
            f"{vendored.fetched} fetched now{where}"
        )
        if vendored.missing:
            worst = EXIT_FAILED
            _lines(vendored.missing, sys.stderr)
    return worst


def _cmd_save(args: argparse.Namespace, settings: Settings, s3: S3Settings | None) -> int:
    kit = Kit.open(args.lock)
    entries = {n: kit.lock.any_entry(n) for n in args.names}
    if args.out.startswith("s3://"):
        parse_s3_url(args.out)  # a bad URL is refused before any image is saved
    client = connect()
    state_file = machine.state_path(settings.cache_dir)
    for name, entry in entries.items():
        image_id = usable_image(name, client, kit, state_file).image_id
        where = archives.save_to(client, image_id, args.out, s3)
        locked = "" if image_id == entry.image_id else " (a drifted rebuild, not the locked ID)"
        print(f"{name}: {image_id}{locked} → {where}")
    return EXIT_OK


def _cmd_load(args: argparse.Namespace, settings: Settings, s3: S3Settings | None) -> int:
    kit = Kit.open(args.lock)
    for source in args.archives:
        archives.archive_image_id(source)  # bad names and missing files, before any work
    client = connect()
    for source in args.archives:
        image_id = archives.load_archive(source, client, s3)
        name = tag_if_locked(client, kit.lock, image_id)
        said = f"tagged {name}" if name else "not an image of this lock: left untagged"
        print(f"{source}: loaded {image_id}; {said}")
    return EXIT_OK


STATE_TEXT = {
    ImageState.PRESENT: "present",
    ImageState.DRIFTED: "a drifted rebuild here (not the locked ID)",
    ImageState.NOT_BUILT: "not built",
    ImageState.UNCHECKED: "recorded (no daemon to check this machine)",
}


def _cmd_list(args: argparse.Namespace, settings: Settings, s3: S3Settings | None) -> int:
    kit = Kit.open(args.lock)
    found = api.list_images(kit, machine.state_path(settings.cache_dir))
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
    return "missing here" if status.is_base else "missing or stale here"


def _as_json(status: ImageStatus) -> dict[str, str | None]:
    return {
        "name": status.name,
        "tag": status.tag,
        "image_id": status.image_id,
        "state": status.state.value,
    }
