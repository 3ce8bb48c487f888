"""Errors the user sees as one line, never a traceback.

- `UserError` is bad input (exit 2), such as a missing file or an unknown prover.
- `InfraFailure` is a machine problem no retry will fix (exit 3), such as no images lock.
- `BackendUnavailable` is transient trouble, retried per check.
- `NotTrusted` is a result that does not verify (exit 1): damaged, forged, or untrusted.
"""

from __future__ import annotations

from pydantic import ValidationError


class UserError(Exception):
    """Bad input from the user: a missing file, an unknown prover, a malformed line, a bad log."""


class BadRequest(UserError):
    """A request refused before any check: unknown prover, mode or option, malformed target."""


class BackendUnavailable(RuntimeError):
    """An infra error: the machine cannot run checks at the moment.

    There is no daemon, say, or no prover install.
    """


class NotTrusted(Exception):
    """A published result that does not verify: damaged, forged, or not signed by a trusted key."""


class InfraFailure(Exception):
    """The machine cannot run these checks, and a retry will not help; fix it, then re-run."""


def explain(error: ValidationError) -> str:
    """A pydantic error as one short sentence: `content: Field required; timeout: ...`."""
    parts = []
    for item in error.errors()[:3]:
        where = ".".join(str(p) for p in item["loc"]) or "value"
        parts.append(f"{where}: {item['msg']}")
    more = error.error_count() - len(parts)
    return "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")
