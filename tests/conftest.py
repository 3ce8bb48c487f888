"""Shared fixtures: real provers, real files, settings isolated per test."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from runner.core.settings import Settings

# Fixtures shared by several test modules: a real S3 endpoint (moto's HTTP server on loopback)
# and a local Ray cluster.
pytest_plugins = ["tests.support.s3_endpoint", "tests.support.ray_cluster"]


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(
        backend="local",
        cache_dir=tmp_path / "cache",
        checkpoint_dir=tmp_path / "checkpoints",
        timeout=30,
        retries=0,
    )


@pytest.fixture
def cli(tmp_path: Path):
    """Run `prooflock ...` as a user would, in tmp_path, with a private cache."""

    def run(
        *args: str, env: dict[str, str] | None = None, check: bool | int = False
    ) -> subprocess.CompletedProcess[str]:
        """`check=True` asserts exit 0; `check=N` asserts exit N."""
        full_env = {
            **os.environ,
            "PROOFLOCK_CACHE_DIR": str(tmp_path / "cache"),
            "PROOFLOCK_BACKEND": "local",
            "XDG_RUNTIME_DIR": "",  # a daemon's socket stays under this test's cache dir
            **(env or {}),
        }
        done = subprocess.run(
            [sys.executable, "-m", "runner.cli", *args],
            cwd=tmp_path,
            env=full_env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if check is not False:
            expected = 0 if check is True else check
            assert done.returncode == expected, done.stderr
        return done

    return run
