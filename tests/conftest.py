"""Shared fixtures: real provers, real files, settings isolated per test."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from runner.core.settings import Settings

# Fixtures shared by several test modules: a real S3 endpoint (moto's HTTP server on loopback),
# a local Ray cluster, a finished real Rocq run, the Docker daemon and a tiny image in it.
pytest_plugins = [
    "tests.support.s3_endpoint",
    "tests.support.ray_cluster",
    "tests.support.finished_run",
    "tests.support.docker_daemon",
    "tests.support.tiny_image",
]


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups off the items
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under `pytest -n`, a module runs whole in one process: some modules tell one story across
    their tests (a store vendored, then rebuilt from), and module fixtures are built once. A
    module with a group of its own (the HOL Light ones share their boots) keeps it."""
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))


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
        *args: str,
        env: dict[str, str] | None = None,
        check: bool | int = False,
        timeout: float = 600,
    ) -> subprocess.CompletedProcess[str]:
        """`check=True` asserts exit 0; `check=N` asserts exit N. `timeout` only stops a hung
        command (a command that boots a prover may need more)."""
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
            timeout=timeout,
        )
        if check is not False:
            expected = 0 if check is True else check
            assert done.returncode == expected, done.stderr
        return done

    return run


@pytest.fixture
def prooflock(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch):
    """`prooflock ...` run in this process, in tmp_path: the same commands as `cli` without an
    interpreter's start-up, for tests that run many quick ones (audit, verify-log, publish)."""
    from runner.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PROOFLOCK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PROOFLOCK_BACKEND", "local")

    def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        with monkeypatch.context() as scoped:
            for name, value in (env or {}).items():
                scoped.setenv(name, value)
            capsys.readouterr()
            sigterm = signal.getsignal(signal.SIGTERM)  # main() installs its own
            try:
                code = main(list(args))
            finally:
                signal.signal(signal.SIGTERM, sigterm)
            out = capsys.readouterr()
        return subprocess.CompletedProcess(list(args), code, out.out, out.err)

    return run
