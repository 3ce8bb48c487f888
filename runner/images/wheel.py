"""The wheel's copy of the kit: `images/`, the images lock and the advisories, as package data.

They go into `runner/kit/`. The `build_py` step of setuptools is `BuildPyWithKit`, as pyproject.toml
names it. Setuptools loads this file on its own while it builds. So the file uses the standard
library and setuptools only, no `runner` imports. An installed prooflock finds the copy through
`runner.core.home.PACKAGED`; a checkout keeps the files where they are.
"""

from __future__ import annotations

from pathlib import Path

from setuptools.command.build_py import build_py  # type: ignore[import-untyped, unused-ignore]

IMAGES = Path("images")  # beside pyproject.toml, as in a checkout
LOCK = Path("manifests") / "images.lock.json"
# Beside the lock: each base's archive stanzas, `<base>.Packages` (runner.images.lock).
MANIFESTS = Path("manifests")
ADVISORIES = Path("manifests") / "advisories"  # known soundness bugs (runner.check.advisories)
PACKAGED = Path("runner") / "kit"  # runner.core.home.PACKAGED, relative to the wheel's root


def kit_files() -> list[Path]:
    """The files the wheel carries, relative to the project's root (the build's directory)."""
    files = [p for p in sorted(IMAGES.rglob("*")) if p.is_file() and "__pycache__" not in p.parts]
    advisories = sorted(ADVISORIES.glob("*.toml"))
    indexes = sorted(MANIFESTS.glob("*.Packages"))
    return [*files, LOCK, *indexes, *advisories]


class BuildPyWithKit(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:  # an editable install runs from the checkout and reads it there
            return
        for source in kit_files():
            target = Path(self.build_lib) / PACKAGED / source
            self.mkpath(str(target.parent))
            self.copy_file(str(source), str(target))  # keeps the mode: scripts stay executable

    def get_source_files(self) -> list[str]:
        """What an sdist must carry for a wheel built from it to have the kit too."""
        return [*super().get_source_files(), *(str(path) for path in kit_files())]
