"""User-facing errors: the CLI prints their message on one line and exits 2, never a traceback."""

from __future__ import annotations

from pydantic import ValidationError


class UserError(Exception):
    """Bad input from the user: a missing file, an unknown prover, a malformed line, a bad log."""


def explain(error: ValidationError) -> str:
    """A pydantic error as one short sentence: `content: Field required; timeout: ...`."""
    parts = []
    for item in error.errors()[:3]:
        where = ".".join(str(p) for p in item["loc"]) or "value"
        parts.append(f"{where}: {item['msg']}")
    more = error.error_count() - len(parts)
    return "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")
