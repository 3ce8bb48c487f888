"""The files a report writes beside index.html, each remembered for the summary."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from runner.core.errors import UserError


@dataclass
class AssetWriter:
    out: Path
    written: list[Path] = field(default_factory=list)

    def write(self, relative: str, data: bytes) -> str:
        """Write `out/relative` and return `relative` as the page's href."""
        path = self.out / relative
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        except OSError as exc:
            raise UserError(f"cannot write the report's {path}: {exc.strerror}") from None
        if path not in self.written:
            self.written.append(path)
        return relative
