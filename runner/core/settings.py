"""Settings from the environment (`PROOFLOCK_*`), overridable by CLI flags."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

MAX_DEFAULT_WORKERS = 8  # a default that cannot fill a large machine's memory with workers


def usable_cores() -> int:
    """The cores this process may run on (its affinity, a container's cpuset), up to 8."""
    return max(1, min(MAX_DEFAULT_WORKERS, len(os.sched_getaffinity(0))))


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="PROOFLOCK_", extra="ignore")

    checkpoint_dir: Path = Path("checkpoints")
    cache_dir: Path = Path.home() / ".cache" / "prooflock"
    cache: bool = True
    backend: Literal["auto", "docker", "local"] = "auto"
    isolation: Literal["strict", "warm"] = "strict"
    timeout: int = Field(default=60, ge=1, description="seconds per check")
    memory_mb: int = Field(default=4096, ge=64)
    max_artifact_mb: float = Field(
        default=10, gt=0, description="an artifact larger than this is refused before any work"
    )
    pids: int = Field(default=512, ge=16)
    cpus: int = Field(default=1, ge=1)
    # Checks at once (`usable_cores()` for one per core; a prover whose worker costs minutes
    # to boot still keeps one worker: its ServerSpec caps it).
    workers: int = Field(default=1, ge=1)
    batch: int = Field(
        default=8, ge=1, description="requests per worker call, where a prover batches"
    )
    retries: int = Field(default=2, ge=0, description="extra attempts after an infra_error")
    fsync_every: int = Field(default=1, ge=1, description="group commit: fsync once per N records")
    canary: float = Field(default=0, ge=0, le=100, description="percent re-checked cold")
    local_sandbox: Literal["auto", "off", "require"] = "auto"  # bubblewrap for local checks
    daemon: Literal["auto", "off", "start"] = "auto"  # use `prooflock serve` when it answers
    build_missing: bool = False  # auto/docker: build a missing locked image instead of falling back
