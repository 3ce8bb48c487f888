"""Deterministic layer tarballs: the same files always give the same bytes, hence the same diff_id.

- Entries are sorted by path.
- Owners are kept as numbers; names are dropped.
- mtimes are clamped to a fixed epoch.
- PAX headers are reduced to file capabilities and other xattrs.
- Hard links point at the first path of their group.
- Volatile files are dropped: apt lists and caches, logs, backups, caches that record build
  times.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import stat
import tarfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, BinaryIO

# Directories kept but emptied: their content only records when and from where the image was built.
EMPTIED_DIRS = (
    "var/cache/apt",
    "var/lib/apt/lists",
    "var/log",
    "var/cache/debconf/tmp",
    "var/tmp",
    "tmp",
    "run",
    "root/.cache",
    "dev",
    "proc",
    "sys",
)
# Files dropped wherever they are: backups and caches that differ between two identical builds.
VOLATILE_FILES = (
    "var/cache/ldconfig/aux-cache",
    "var/cache/debconf/*-old",
    "var/lib/dpkg/*-old",
    "etc/passwd-",
    "etc/group-",
    "etc/shadow-",
    "etc/gshadow-",
    "etc/subuid-",
    "etc/subgid-",
    "etc/machine-id",
    "var/lib/dbus/machine-id",
    "var/cache/man/*",
    "var/cache/fontconfig/*",
    "var/lib/systemd/random-seed",
    "*/__pycache__/*.cpython-*.pyc.*",  # half-written bytecode
)
# Extended attributes that describe the content (capabilities); SELinux labels are the host's.
KEPT_XATTRS = ("SCHILY.xattr.security.capability", "SCHILY.xattr.user.")
WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"


def is_volatile(path: str) -> bool:
    for top in EMPTIED_DIRS:
        if path.startswith(top + "/"):
            return True
    return any(fnmatch.fnmatchcase(path, pattern) for pattern in VOLATILE_FILES)


def sort_key(path: str) -> tuple[str, ...]:
    return tuple(path.split("/"))  # parents before children, siblings by name


@dataclass
class Node:
    """One layer entry. `identity` is shared by hard links to the same content."""

    path: str
    info: tarfile.TarInfo  # type, mode, owner, mtime, size, linkname, device, xattrs
    open_data: Callable[[], BinaryIO] | None = None
    identity: object = None


class HashingWriter:
    """A write-only file that hashes what passes through (the layer's diff_id)."""

    def __init__(self, target: BinaryIO):
        self.target = target
        self.sha = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> int:
        self.sha.update(data)
        self.size += len(data)
        return self.target.write(data)

    def tell(self) -> int:
        return self.size


def clean_info(info: tarfile.TarInfo, path: str, epoch: int) -> tarfile.TarInfo:
    out = tarfile.TarInfo(path)
    out.type = tarfile.REGTYPE if info.type in (tarfile.AREGTYPE, tarfile.CONTTYPE) else info.type
    out.mode = info.mode
    out.uid, out.gid = info.uid, info.gid
    out.uname = out.gname = ""
    out.mtime = min(int(info.mtime), epoch)
    out.size = info.size if out.type == tarfile.REGTYPE else 0
    out.linkname = info.linkname if out.type in (tarfile.SYMTYPE, tarfile.LNKTYPE) else ""
    out.devmajor, out.devminor = info.devmajor, info.devminor
    out.pax_headers = {
        key: value for key, value in sorted(info.pax_headers.items()) if key.startswith(KEPT_XATTRS)
    }
    return out


def write_layer(nodes: Iterable[Node], target: BinaryIO, epoch: int) -> tuple[str, int]:
    """Write nodes as a normalized layer tar; return (diff_id, size in bytes)."""
    ordered = sorted(nodes, key=lambda node: sort_key(node.path))
    first_path: dict[object, str] = {}
    out = HashingWriter(target)
    with tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT) as tar:  # type: ignore[call-overload]
        for node in ordered:
            info = clean_info(node.info, node.path, epoch)
            if node.open_data is not None and node.identity is not None:
                if node.identity in first_path:  # a later path of a hard-link group
                    info.type, info.size, info.linkname = (
                        tarfile.LNKTYPE,
                        0,
                        first_path[node.identity],
                    )
                    tar.addfile(info)
                    continue
                first_path[node.identity] = node.path
            if info.type == tarfile.REGTYPE and node.open_data is not None:
                with node.open_data() as data:
                    tar.addfile(info, data)
            else:
                info.size = 0
                tar.addfile(info)
    return f"sha256:{out.sha.hexdigest()}", out.size


# -- a root filesystem directory as a layer (the offline base) ---------------------------------


def _xattrs(path: str) -> dict[str, str]:
    found: dict[str, str] = {}
    try:
        names = os.listxattr(path, follow_symlinks=False)
    except OSError:
        return found
    for name in names:
        key = f"SCHILY.xattr.{name}"
        if key.startswith(KEPT_XATTRS):
            value = os.getxattr(path, name, follow_symlinks=False)
            found[key] = value.decode("utf-8", "surrogateescape")
    return found


def directory_nodes(root: Path) -> list[Node]:
    """Every path under `root` (not `root` itself), minus volatile ones, as layer nodes."""
    nodes = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root)
            if is_volatile(rel):
                continue
            st = os.lstat(full)
            info = tarfile.TarInfo(rel)
            info.mode, info.uid, info.gid = stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid
            info.mtime = int(st.st_mtime)
            info.pax_headers = _xattrs(full)
            opener, identity = None, None
            if stat.S_ISREG(st.st_mode):
                info.type, info.size = tarfile.REGTYPE, st.st_size
                opener = _file_opener(full)
                identity = (st.st_dev, st.st_ino) if st.st_nlink > 1 else None
            elif stat.S_ISDIR(st.st_mode):
                info.type = tarfile.DIRTYPE
            elif stat.S_ISLNK(st.st_mode):
                info.type, info.linkname = tarfile.SYMTYPE, os.readlink(full)
            elif stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
                info.type = tarfile.CHRTYPE if stat.S_ISCHR(st.st_mode) else tarfile.BLKTYPE
                info.devmajor, info.devminor = os.major(st.st_rdev), os.minor(st.st_rdev)
            elif stat.S_ISFIFO(st.st_mode):
                info.type = tarfile.FIFOTYPE
            else:
                continue  # sockets do not belong in an image
            nodes.append(Node(rel, info, opener, identity))
    return nodes


def _file_opener(path: str) -> Callable[[], BinaryIO]:
    return lambda: open(path, "rb")  # noqa: SIM115 - closed by write_layer


# -- squashing built layers into one ---------------------------------------------------------


def _member_path(name: str) -> str:
    name = name.removeprefix("./").rstrip("/")
    return os.path.normpath(name) if name else name


def _under(path: str, parent: str) -> bool:
    return path.startswith(parent + "/")


class Squash:
    """Apply layer tars in order (overlay semantics) and keep the result as one set of nodes.

    `lower` holds every path of the layers below (the base). A deletion needs a whiteout in the
    squashed layer only when it hides one of those.
    """

    def __init__(self, lower: set[str]):
        self.lower = lower
        self.lower_dirs = {os.path.dirname(p) for p in lower}
        self.nodes: dict[str, Node] = {}
        self.removed: set[str] = set()
        self.opaque: set[str] = set()

    def _drop_tree(self, path: str) -> None:
        for key in [k for k in self.nodes if k == path or _under(k, path)]:
            del self.nodes[key]

    def _lower_has_children(self, path: str) -> bool:
        return path in self.lower_dirs or any(_under(d, path) for d in self.lower_dirs)

    def apply(self, tar: tarfile.TarFile, layer: int) -> None:
        for member in tar:
            path = _member_path(member.name)
            if not path or path == ".":
                continue
            parent, leaf = os.path.split(path)
            if leaf == OPAQUE:
                for key in [k for k in self.nodes if _under(k, parent)]:
                    del self.nodes[key]
                self.removed = {r for r in self.removed if not _under(r, parent)}
                if self._lower_has_children(parent):
                    self.opaque.add(parent)
                continue
            if leaf.startswith(WHITEOUT):
                target = os.path.join(parent, leaf[len(WHITEOUT) :])
                self._drop_tree(target)
                self.opaque = {o for o in self.opaque if o != target and not _under(o, target)}
                if target in self.lower:
                    self.removed.add(target)
                continue
            self._add(tar, member, path, layer)

    def _add(self, tar: tarfile.TarFile, member: tarfile.TarInfo, path: str, layer: int) -> None:
        existing = self.nodes.get(path)
        if existing is not None and existing.info.isdir() and not member.isdir():
            self._drop_tree(path)  # a file replacing a directory hides what was inside
        if path in self.removed:
            self.removed.discard(path)
            if member.isdir() and self._lower_has_children(path):
                self.opaque.add(path)
        if member.islnk():
            target = self.nodes.get(_member_path(member.linkname))
            if target is None or target.open_data is None:
                raise ValueError(f"hard link {path} → {member.linkname}: target not in the layer")
            info = _copy_info(target.info)
            info.mode, info.uid, info.gid, info.mtime = (
                member.mode,
                member.uid,
                member.gid,
                member.mtime,
            )
            self.nodes[path] = Node(path, info, target.open_data, target.identity)
            return
        opener, identity = None, None
        if member.isreg():
            opener = _member_opener(tar, member)
            identity = (layer, member.offset)
        self.nodes[path] = Node(path, member, opener, identity)

    def result(self) -> list[Node]:
        """The squashed layer: surviving non-volatile nodes plus the whiteouts they need."""
        nodes = [node for path, node in self.nodes.items() if not is_volatile(path)]
        counts: dict[object, int] = {}
        for node in nodes:
            counts[node.identity] = counts.get(node.identity, 0) + 1
        for node in nodes:
            if node.identity is not None and counts[node.identity] == 1:
                node.identity = None  # no longer linked: an ordinary file
        for path in self.removed:
            parent, leaf = os.path.split(path)
            nodes.append(Node(os.path.join(parent, WHITEOUT + leaf), _empty_file()))
        for path in self.opaque:
            if path in self.nodes and self.nodes[path].info.isdir():
                nodes.append(Node(os.path.join(path, OPAQUE), _empty_file()))
        return nodes


def _copy_info(info: tarfile.TarInfo) -> tarfile.TarInfo:
    out = tarfile.TarInfo(info.name)
    for field in (
        "type",
        "mode",
        "uid",
        "gid",
        "mtime",
        "size",
        "linkname",
        "devmajor",
        "devminor",
    ):
        setattr(out, field, getattr(info, field))
    out.pax_headers = dict(info.pax_headers)
    return out


def _member_opener(tar: tarfile.TarFile, member: tarfile.TarInfo) -> Callable[[], BinaryIO]:
    return lambda: tar.extractfile(member)  # type: ignore[return-value]


def _empty_file() -> tarfile.TarInfo:
    info = tarfile.TarInfo()
    info.type, info.mode, info.size = tarfile.REGTYPE, 0o644, 0
    return info


# -- comparing layers (what `images verify` reports on a mismatch) ---------------------------


def layer_index(tar: tarfile.TarFile) -> dict[str, str]:
    """path → one line describing the entry (type, mode, owner, mtime, content hash or target)."""
    index = {}
    for member in tar:
        content = _sha256(tar.extractfile(member))[:16] if member.isreg() else member.linkname
        xattrs = ",".join(sorted(k for k in member.pax_headers if k.startswith("SCHILY.xattr.")))
        index[_member_path(member.name)] = (
            f"{member.type.decode()} {member.mode:o} {member.uid}:{member.gid} "
            f"{int(member.mtime)} {member.size} {content} {xattrs}".rstrip()
        )
    return index


def _sha256(data: IO[bytes] | None) -> str:
    sha = hashlib.sha256()
    if data is not None:
        with data:
            for chunk in iter(lambda: data.read(1 << 20), b""):
                sha.update(chunk)
    return sha.hexdigest()


def index_differences(old: dict[str, str], new: dict[str, str], limit: int = 40) -> list[str]:
    lines = []
    for path in sorted(set(old) | set(new), key=sort_key):
        before, after = old.get(path), new.get(path)
        if before == after:
            continue
        if before is None:
            lines.append(f"+ {path}  {after}")
        elif after is None:
            lines.append(f"- {path}  {before}")
        else:
            lines.append(f"~ {path}  {before}  →  {after}")
    if len(lines) > limit:
        lines = [*lines[:limit], f"... and {len(lines) - limit} more"]
    return lines
