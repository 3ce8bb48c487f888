"""The offline base image: Debian by debootstrap, normalized, loaded with a fixed config.

It serves machines that cannot pull from a registry. The package set debootstrap installs is fixed:
the `minbase` variant plus the lock's `include`. The fixups below remove what records the build host
or moment, as Debian's own debuerreotype does. So two runs against the same mirror state give the
same image ID.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from docker import DockerClient

from runner.core.errors import UserError
from runner.images import archive
from runner.images.build import BuildFailed
from runner.images.inputs import BuildInputs
from runner.images.layers import directory_nodes, write_layer
from runner.images.lock import BaseEntry, ImagesLock

PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
SCRIPTS = Path("/usr/share/debootstrap/scripts")
# Debian's suites all bootstrap alike: a suite newer than the host's debootstrap (bookworm's
# knows no `forky`) uses the script debootstrap itself links it to once it knows it.
UNRELEASED_SCRIPT = "sid"


@dataclass(frozen=True)
class BaseBuilt:
    entry: BaseEntry
    changed: bool
    seconds: int


def debootstrap_argv(entry: BaseEntry, root: Path, mirror: str) -> list[str]:
    argv = ["debootstrap", f"--variant={entry.variant}", "--arch=amd64", "--components=main"]
    if mirror.startswith("file://"):
        argv.append("--no-check-gpg")  # the kit's own repository: each file checked by sha256
    elif KEYRING.exists():
        argv.append(f"--keyring={KEYRING}")
    if entry.include:
        argv.append(f"--include={','.join(entry.include)}")
    argv = [*argv, entry.suite, str(root), mirror]
    if SCRIPTS.is_dir() and not (SCRIPTS / entry.suite).exists():
        argv.append(str(SCRIPTS / UNRELEASED_SCRIPT))
    return argv


def fixup(root: Path, lock: ImagesLock) -> None:
    """Replace what debootstrap copied from the host or stamped with today's date."""
    suite = lock.base.suite
    (root / "etc/hostname").write_text("localhost\n")
    (root / "etc/resolv.conf").write_text("")  # docker mounts its own at run time
    (root / "etc/apt/sources.list").write_text(
        f"deb [check-valid-until=no] {lock.transport['APT_MIRROR']} {suite} main\n"
        f"deb [check-valid-until=no] {lock.transport['APT_SECURITY_MIRROR']} {suite}-security main\n"
    )
    shadow = root / "etc/shadow"
    if shadow.exists():
        days = str(lock.source_date_epoch // 86400)
        lines = []
        for line in shadow.read_text().splitlines():
            fields = line.split(":")
            if len(fields) > 2 and fields[2]:
                fields[2] = days  # "last password change": today, unless pinned
            lines.append(":".join(fields))
        shadow.write_text("\n".join(lines) + "\n")
    shutil.rmtree(root / "debootstrap", ignore_errors=True)


def installed_packages(root: Path) -> list[str]:
    done = subprocess.run(
        ["chroot", str(root), "dpkg-query", "-W", "-f", "${Package}=${Version}\\n"],
        capture_output=True,
        text=True,
        check=True,
    )
    return sorted(done.stdout.split())


def build_base(
    client: DockerClient,
    lock: ImagesLock,
    inputs: BuildInputs,
    *,
    mirror: str | None = None,
    workdir: Path | None = None,
    log: TextIO = sys.stderr,
) -> BaseBuilt:
    """Build, normalize and load the base (untagged); return its lock entry.

    `mirror` defaults to the build's mirror.
    """
    if shutil.which("debootstrap") is None:
        raise UserError("debootstrap is not installed (`apt-get install debootstrap`)")
    if os.geteuid() != 0:
        raise UserError(
            "building the base needs root (debootstrap creates device files and chroots)"
        )
    started = time.monotonic()
    entry = lock.base
    epoch = lock.source_date_epoch
    with tempfile.TemporaryDirectory(prefix="prooflock-base-", dir=workdir) as tmp:
        root = Path(tmp) / "rootfs"
        try:
            argv = debootstrap_argv(entry, root, mirror or inputs.apt_mirror)
            _debootstrap(lock.base_name, argv, log)
            fixup(root, lock)
            packages = installed_packages(root)
            layer_path = Path(tmp) / "layer.tar"
            print(f"{lock.base_name}: writing the normalized layer", file=log, flush=True)
            with layer_path.open("wb") as out:
                diff_id, size = write_layer(directory_nodes(root), out, epoch)
        finally:
            _unmount_below(root)
        history = [
            {
                "created_by": f"prooflock images base: debootstrap --variant={entry.variant} {entry.suite}"
            }
        ]
        config = archive.canonical_config(
            {"Env": [PATH_ENV], "Cmd": ["bash"]}, [diff_id], history, epoch
        )
        image_id = archive.image_id(config)
        out_path = Path(tmp) / "image.tar"
        archive.write_archive(out_path, config, [(diff_id, archive.file_opener(layer_path), size)])
        archive.load(client, out_path, image_id)
    new_entry = entry.model_copy(
        update={
            "image_id": image_id,
            "diff_ids": [diff_id],
            "packages": packages,
        }
    )
    return BaseBuilt(
        new_entry, changed=image_id != entry.image_id, seconds=int(time.monotonic() - started)
    )


def _debootstrap(name: str, argv: list[str], log: TextIO) -> None:
    print(f"{name}: {' '.join(argv)}", file=log, flush=True)
    env = {**os.environ, "LC_ALL": "C", "DEBIAN_FRONTEND": "noninteractive"}
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    tail: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        tail = [*tail[-30:], line.rstrip()]
        if line.startswith(
            (
                "I: Retrieving Release",
                "I: Validating Packages",
                "I: Installing core",
                "I: Base system",
            )
        ):
            print(f"{name}: {line.rstrip()}", file=log, flush=True)
    if proc.wait() != 0:
        raise BuildFailed(f"{name}: debootstrap failed:\n" + "\n".join(tail))


def debootstrap_version() -> str:
    done = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Version}", "debootstrap"], capture_output=True, text=True
    )
    return done.stdout.strip() or "unknown"


def _unmount_below(root: Path) -> None:
    """Unmount /proc and /sys in the target, which a failed debootstrap can leave mounted."""
    prefix = str(root.resolve()) + "/"
    with open("/proc/mounts") as mounts:
        points = [line.split()[1] for line in mounts if line.split()[1].startswith(prefix)]
    for point in sorted(points, reverse=True):
        subprocess.run(["umount", "-l", point], check=False)
