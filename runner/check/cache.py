"""Content-addressed result cache: (environment key, request digest) → result."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

import orjson
from pydantic import ValidationError

from runner.core.models import CheckResult
from runner.core.verdicts import facts


class ResultCache:
    """Results on disk, keyed by environment, request digest and rules.

    `rules` is the adapter's revision of the kit's judgement (ProverAdapter.rules).
    A result judged by older rules is not reused, even under the same environment key.
    """

    def __init__(self, root: Path):
        self.root = root

    def _path(self, env_key: str, request_digest: str, rules: str) -> Path:
        name = f"{request_digest}.{rules}.json" if rules else f"{request_digest}.json"
        return self.root / env_key[:2] / env_key / name

    def get(self, env_key: str, request_digest: str, rules: str = "") -> CheckResult | None:
        path = self._path(env_key, request_digest, rules)
        try:
            result = CheckResult.model_validate_json(path.read_bytes())
        except (OSError, ValidationError, ValueError):
            return None  # absent or unreadable: a cache miss, never an error
        if result.env_key != env_key or result.request_digest != request_digest:
            return None
        return result

    def put(self, result: CheckResult, rules: str = "") -> None:
        # Only verdicts that rest on the artifact and the environment (runner.core.verdicts).
        if not facts(result.verdict).cacheable or result.provenance.cached:
            return
        path = self._path(result.env_key, result.request_digest, rules)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            with os.fdopen(fd, "wb") as handle:
                handle.write(orjson.dumps(result.model_dump(mode="json")))
            os.replace(tmp, path)  # atomic: readers see the old file or the whole new one
        except OSError:
            with contextlib.suppress(OSError, UnboundLocalError):
                os.unlink(tmp)
