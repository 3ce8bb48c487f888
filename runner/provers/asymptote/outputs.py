"""Deterministic diagram bytes: the stamps asy's toolchain still writes, and their removal.

asy runs so that nothing varies:

- a clock frozen at SOURCE_DATE_EPOCH (libfaketime, see render.py);
- SOURCE_DATE_EPOCH itself, honoured by Debian's ghostscript and by pdfTeX;
  pdfTeX honours it with FORCE_SOURCE_DATE;
- ghostscript's -dOmit* flags;
- fixed file names.

These functions are the backstop for stamps that still reach an uncompressed place.
Such places are the info dictionary, XMP and PNG chunks.
A PDF that asy embeds as it is can bring such stamps, for example.
Every edit keeps the byte length, so a PDF's xref offsets stay valid.
"""

from __future__ import annotations

import re
import struct

FORMATS = ("png", "svg", "pdf")
# What a file of each format starts with (SVG: dvisvgm's XML prolog, then the <svg> element).
MAGIC = {"png": b"\x89PNG\r\n\x1a\n", "pdf": b"%PDF-"}
FIXED_DATE_DIGITS = "20000101000000"  # the date of SOURCE_DATE_EPOCH below, as PDF date digits
SOURCE_DATE_EPOCH = "946684800"  # 2000-01-01T00:00:00Z
FIXED_TIME = "2000-01-01 00:00:00"  # the same instant, as libfaketime reads it (in TZ=UTC)

PDF_DATE = re.compile(rb"/(?:CreationDate|ModDate)\s*\(D:([^)]*)\)")
PDF_ID = re.compile(rb"/ID\s*\[\s*<([0-9A-Fa-f]*)>\s*<([0-9A-Fa-f]*)>\s*\]")
XMP_DATE = re.compile(rb"(?:Create|Modify|Metadata)Date(?:>|=['\"])([0-9T:+\-.Z]+)")
XMP_UUID = re.compile(
    rb"uuid:([0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12})"
)
# PNG text chunks that hold a time; other text (e.g. `Software`) is fixed per install and kept.
PNG_TIME_KEYS = {
    b"Creation Time",
    b"CreationTime",
    b"Modification Time",
    b"date:create",
    b"date:modify",
    b"date:timestamp",
}


def looks_like(fmt: str, data: bytes) -> bool:
    """Whether `data` is plausibly a `fmt` file that asy wrote, not nothing or junk."""
    if fmt == "svg":
        return b"<svg" in data[:4096]
    return data.startswith(MAGIC[fmt])


def normalize(fmt: str, data: bytes) -> bytes:
    if fmt == "pdf":
        return normalize_pdf(data)
    if fmt == "png":
        return normalize_png(data)
    return data  # dvisvgm stamps only its version, which the environment key already holds


def _rewrite_groups(match: re.Match[bytes], rewrite) -> bytes:
    """The match with each captured group passed through `rewrite` (which keeps its length)."""
    whole, base, pieces, cursor = match.group(0), match.start(), [], 0
    for index in range(1, (match.lastindex or 0) + 1):
        start, end = match.start(index) - base, match.end(index) - base
        pieces += [whole[cursor:start], rewrite(whole[start:end])]
        cursor = end
    return b"".join([*pieces, whole[cursor:]])


def _fixed_date(stamp: bytes) -> bytes:
    """Each digit replaced by the fixed date's digits in order, then 0; other bytes kept."""
    digits = iter(FIXED_DATE_DIGITS.encode())
    return bytes(next(digits, ord("0")) if 48 <= c <= 57 else c for c in stamp)


def _zeros(hex_text: bytes) -> bytes:
    return re.sub(rb"[0-9A-Fa-f]", b"0", hex_text)


def normalize_pdf(data: bytes) -> bytes:
    data = PDF_DATE.sub(lambda m: _rewrite_groups(m, _fixed_date), data)
    data = XMP_DATE.sub(lambda m: _rewrite_groups(m, _fixed_date), data)
    data = PDF_ID.sub(lambda m: _rewrite_groups(m, _zeros), data)
    return XMP_UUID.sub(lambda m: _rewrite_groups(m, _zeros), data)


def normalize_png(data: bytes) -> bytes:
    """The PNG without its tIME chunk and time-valued text chunks (pixels untouched)."""
    if not data.startswith(MAGIC["png"]):
        return data
    out, offset = [data[:8]], 8
    while offset + 12 <= len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        kind = data[offset + 4 : offset + 8]
        chunk = data[offset : offset + 12 + length]
        offset += 12 + length
        if kind == b"tIME":
            continue
        if kind in (b"tEXt", b"zTXt", b"iTXt"):
            key = chunk[8 : 8 + length].split(b"\0", 1)[0]
            if key in PNG_TIME_KEYS:
                continue
        out.append(chunk)
    out.append(data[offset:])
    return b"".join(out)
