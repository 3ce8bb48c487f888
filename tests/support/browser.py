"""A real headless Chromium (Debian's /usr/bin/chromium) driven by Playwright, for page tests.

No browser is downloaded: Playwright is pointed at the system Chromium. Without it the tests
skip, unless PROOFLOCK_REQUIRE_BROWSER is set (CI sets it, so they cannot silently skip there).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path(os.environ.get("PROOFLOCK_CHROMIUM", "/usr/bin/chromium"))
ARTIFACTS = Path(
    os.environ.get("PROOFLOCK_TEST_ARTIFACTS", Path(__file__).parents[1] / ".artifacts")
)
# As root Chromium needs --no-sandbox; the rest keep it from calling home on a closed network.
FLAGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


def require_browser() -> None:
    """Skip (or fail, when CI requires a browser) unless Chromium and Playwright are here."""
    missing = []
    if not CHROMIUM.exists():
        missing.append(f"{CHROMIUM} is not installed (apt-get install -y chromium)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing.append("the playwright package is not installed (pip install -e '.[test]')")
    if not missing:
        return
    reason = "; ".join(missing)
    if os.environ.get("PROOFLOCK_REQUIRE_BROWSER"):
        pytest.fail(f"PROOFLOCK_REQUIRE_BROWSER is set but {reason}")
    pytest.skip(reason)


@dataclass
class LoadedPage:
    """A page as the browser loaded it, and everything it said on its console."""

    page: Any  # playwright.sync_api.Page
    console: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)  # every URL the page asked for

    @property
    def errors(self) -> list[str]:
        return [line for line in self.console if line.startswith(("error", "pageerror"))]

    def screenshot(self, name: str) -> Path:
        """A full-page PNG kept under ARTIFACTS (tests/.artifacts/ unless the env says)."""
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / name
        self.page.screenshot(path=str(path), full_page=True)
        return path


class Chromium:
    """One headless Chromium with a fresh, throwaway profile; `open` loads a file:// page."""

    def __init__(self, context: Any, width: int, height: int):
        self._context = context
        self._size = {"width": width, "height": height}

    def open(self, index: Path) -> LoadedPage:
        page = self._context.new_page()
        page.set_viewport_size(self._size)
        loaded = LoadedPage(page)
        page.on("console", lambda message: loaded.console.append(f"{message.type}: {message.text}"))
        page.on("pageerror", lambda error: loaded.console.append(f"pageerror: {error}"))
        page.on("request", lambda request: loaded.requests.append(request.url))
        page.on(
            "requestfailed",
            lambda request: loaded.console.append(f"error: request failed {request.url}"),
        )
        page.goto(index.resolve().as_uri(), wait_until="load")
        return loaded


@contextmanager
def chromium(width: int = 1280, height: int = 900) -> Iterator[Chromium]:
    from playwright.sync_api import sync_playwright

    profile = Path(tempfile.mkdtemp(prefix="prooflock-chromium-"))
    try:
        with sync_playwright() as playwright:
            context = playwright.chromium.launch_persistent_context(
                str(profile), executable_path=str(CHROMIUM), headless=True, args=list(FLAGS)
            )
            try:
                yield Chromium(context, width, height)
            finally:
                context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)
