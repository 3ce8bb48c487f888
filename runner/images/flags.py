"""`prooflock images …`'s flags, apart from the commands (runner.images.commands).

The commands import docker-py. Keeping the flags apart saves a third of a second when the CLI builds
its parser for a check.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from runner.images.lock import BASE_NAME as BASE
from runner.images.lock import DEFAULT_LOCK

LIST_SCHEMA = "prooflock.images/1"
DRIFT_HELP = (
    "when the locked closure cannot be had (or the build gives another ID), build anyway with "
    "the mirror's versions: tagged, recorded on this machine, never in the lock"
)
NO_SNAPSHOT_HELP = (
    "do not boot, and keep as snapshots, the servers of the provers that keep them (HOL Light's): "
    "the first check then boots them"
)


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
        "name", nargs="?", default=BASE, metavar="BASE", help=f"which base (default: `{BASE}`)"
    )
    base.add_argument(
        "--rebuild", action="store_true", help="build even if the locked base is present"
    )
    base.add_argument("--allow-drift", action="store_true", help=DRIFT_HELP)
    _inputs_flags(base)
    _lock_flag(base)

    build = verbs.add_parser(
        "build", help="build images from their locked closures, normalize, self-test, tag"
    )
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
    build.add_argument("--allow-drift", action="store_true", help=DRIFT_HELP)
    build.add_argument("--no-snapshot", action="store_true", help=NO_SNAPSHOT_HELP)
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

    relock = verbs.add_parser(
        "relock", help="record this machine's build of the current definitions and its closure"
    )
    relock.add_argument("names", nargs="+", metavar="IMAGE", help=f"image names, or `{BASE}`")
    _inputs_flags(relock)
    _lock_flag(relock)

    vendor = verbs.add_parser("vendor", help="put images' closures (.deb files) into the store")
    vendor.add_argument("names", nargs="+", metavar="IMAGE", help=f"image names, or `{BASE}`")
    vendor.add_argument(
        "--to", metavar="s3://BUCKET/PREFIX", help="also copy them to this remote store"
    )
    _inputs_flags(vendor)
    _lock_flag(vendor)

    save = verbs.add_parser(
        "save", help="write images as content-addressed archives (sha256-<hex>.tar.gz)"
    )
    save.add_argument("names", nargs="+", metavar="IMAGE", help=f"image names, or `{BASE}`")
    save.add_argument("--out", required=True, metavar="DIR|s3://BUCKET/PREFIX")
    _lock_flag(save)

    load = verbs.add_parser("load", help="check an image archive and load it")
    load.add_argument("archives", nargs="+", metavar="ARCHIVE|s3://...")
    load.add_argument("--no-snapshot", action="store_true", help=NO_SNAPSHOT_HELP)
    _lock_flag(load)

    listing = verbs.add_parser("list", help="the locked images and whether this machine has them")
    listing.add_argument(
        "--json", action="store_true", help=f"one JSON document ({LIST_SCHEMA}) on stdout"
    )
    _lock_flag(listing)
