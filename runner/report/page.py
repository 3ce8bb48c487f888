"""The page itself: Jinja2 with autoescape always on, and the static files it links."""

from __future__ import annotations

from importlib import resources
from typing import Any

import jinja2

STATIC = ("report.css", "report.js")

_templates = jinja2.Environment(
    loader=jinja2.PackageLoader("runner.report", "templates"),
    autoescape=True,  # every value is escaped; the templates never mark anything safe
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)


def render_page(**context: Any) -> bytes:
    return _templates.get_template("index.html").render(**context).encode("utf-8")


def static_files() -> dict[str, bytes]:
    folder = resources.files("runner.report") / "static"
    return {name: (folder / name).read_bytes() for name in STATIC}
