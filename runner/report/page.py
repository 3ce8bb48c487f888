"""The page itself: Jinja2 with autoescape always on, and the static files it links."""

from __future__ import annotations

from importlib import resources
from typing import Any

import jinja2

from runner.core import verdicts

STATIC = ("report.css", "report.js")
VERDICT_CSS = "verdicts.css"  # written from runner.core.verdicts, never by hand

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
    files = {name: (folder / name).read_bytes() for name in STATIC}
    files[VERDICT_CSS] = verdict_css()
    return files


def verdict_css() -> bytes:
    """Each verdict's colour as a variable and a badge rule, from the verdict table."""
    names = [row.name for row in verdicts.ROWS]
    colours = "\n".join(f"  --verdict-{row.name}: {row.colour};" for row in verdicts.ROWS)
    badges = "\n".join(
        f".verdict.{name} {{ background: var(--verdict-{name}); }}" for name in names
    )
    return f"/* from runner.core.verdicts */\n:root {{\n{colours}\n}}\n{badges}\n".encode()


def verdict_meanings() -> dict[str, str]:
    """Each verdict's one-sentence meaning, shown when a reader points at its badge."""
    return {row.name: row.meaning for row in verdicts.ROWS}


def uncounted_verdicts() -> list[str]:
    """Verdicts a pass rate leaves out: they say nothing about the artifact."""
    return [row.name for row in verdicts.ROWS if not row.judged]
